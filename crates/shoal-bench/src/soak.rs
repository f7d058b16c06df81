//! `shoal-bench soak`: does a server's memory stay bounded under hours-like abuse?
//!
//! The server is started here with a memory limit (`-m`; for shoal-queued, the same
//! total split across its queues as `--queue-memory`), then driven for the whole
//! duration by two kinds of connection:
//!
//! - **churners** send one request at a time (sets and gets of random keys, values
//!   log-uniform in 10 B-500 KB by default) and close after 1-200 requests, 5% of the
//!   time with a request still unanswered, then reconnect; the key space holds several
//!   times the memory limit, so eviction never stops;
//! - **slow readers** connect with a 16 KB receive buffer, send one multi-get of many
//!   keys, read the reply a few KB per 100 ms, sometimes stop reading for 2-5 s, and
//!   hang up after 5-30 s whether the reply is complete or not; the server, not this
//!   client's kernel, must hold what they have not read.
//!
//! For a queue the keys are a handful of queue names: sets enqueue, gets dequeue, at
//! equal rates so consumers keep up, and each queue is also capped (`--max-bytes` twice
//! its memory share, `--discard-old`) so a random walk cannot grow it without bound.
//!
//! The server's VmRSS is sampled every second. After a warm-up (memory filling), the
//! run passes when the largest sample stays within `-m` plus a stated overhead.

use crate::chart::{self, Series};
use crate::load::{connect, fill_buf, raise_fd_limit, secs};
use crate::machine::MachineInfo;
use crate::rng::Rng;
use crate::seeds::{num, ServerKind};
use crate::server::ServerProcess;
use crate::text::{self, Op, Reply};
use crate::workload::ValueSize;
use crate::BenchError;
use plotters::chart::SeriesLabelPosition;
use serde::Serialize;
use std::fmt::Write as _;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// Queues shoal-queued is driven through.
pub const QUEUES: u64 = 4;
/// Every socket operation waits at most this long.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Wait before reconnecting after a failed connect (the server may be at its limit).
const RETRY: Duration = Duration::from_millis(100);
/// A churner closes its connection after 1 to this many requests.
const MAX_REQUESTS_PER_CONN: u64 = 200;
/// Share of churner connections closed with their last request unanswered.
const ABANDON: f64 = 0.05;
/// A slow reader's receive buffer (the kernel doubles it).
const SLOW_RCVBUF: u32 = 16 * 1024;
/// A slow reader reads once per tick.
const SLOW_TICK: Duration = Duration::from_millis(100);
/// Chance per tick that a slow reader stops reading for 2-5 s.
const SLOW_PAUSE: f64 = 0.02;
/// A slow reader hangs up 5 s + up to this many ms after sending, done or not.
const SLOW_LIFE_MS: (u64, u64) = (5_000, 25_000);
/// The longest first and last windows compared for flatness.
const WINDOW_MAX: Duration = Duration::from_secs(60);
/// One MiB, the unit of `-m` and of every number reported.
const MIB: f64 = 1024.0 * 1024.0;

/// What to run.
#[derive(Clone, Debug, Serialize)]
pub struct SoakConfig {
    /// The server under test.
    pub server: ServerKind,
    /// Its binary.
    pub bin: PathBuf,
    /// How long the load runs.
    #[serde(serialize_with = "secs")]
    pub duration: Duration,
    /// The start of the run that is not judged (memory filling up).
    #[serde(serialize_with = "secs")]
    pub warmup: Duration,
    /// The server's memory limit in MiB (`-m`).
    pub memory_mb: u64,
    /// Connections in total, churners and slow readers.
    pub conns: usize,
    /// Fraction of the connections that are slow readers.
    pub slow_readers: f64,
    /// Client threads (each a single-threaded event loop).
    pub threads: usize,
    /// Server worker threads (`-t`).
    pub server_threads: usize,
    /// Value sizes, drawn log-uniformly from the range.
    pub value_size: ValueSize,
    /// The key space as a multiple of memory: keys x mean value = this x `memory_mb`.
    pub key_space: f64,
    /// Fraction of churner requests that are sets.
    pub set_ratio: f64,
    /// Keys in each slow reader's multi-get.
    pub multiget_keys: usize,
    /// Bytes a slow reader reads per 100 ms.
    pub slow_read_bytes: usize,
    /// The verdict's fixed allowance above `memory_mb`, MiB.
    pub overhead_mb: f64,
    /// The verdict's allowance per 100 connections, MiB.
    pub overhead_per_100_conns_mb: f64,
    /// shoal-queued's `--fsync`.
    pub queue_fsync: String,
    /// Random seed.
    pub seed: u64,
    /// Further flags for the server (e.g. `--io-uring`), after the soak's own.
    pub extra_args: Vec<String>,
}

impl SoakConfig {
    /// The defaults of `shoal-bench soak` for `server` started from `bin`.
    pub fn new(server: ServerKind, bin: PathBuf) -> Self {
        let duration = Duration::from_secs(600);
        SoakConfig {
            server,
            bin,
            duration,
            warmup: Self::auto_warmup(duration),
            memory_mb: 64,
            conns: 100,
            slow_readers: 0.1,
            threads: 2,
            server_threads: 2,
            value_size: ValueSize {
                min: 10,
                max: 500 * 1024,
            },
            key_space: 4.0,
            // Dequeues must keep up with enqueues; a cache needs sets to churn.
            set_ratio: if server == ServerKind::ShoalQueued {
                0.5
            } else {
                0.3
            },
            multiget_keys: 100,
            slow_read_bytes: 4 * 1024,
            overhead_mb: 64.0,
            overhead_per_100_conns_mb: 2.0,
            queue_fsync: "5".into(),
            seed: 0x50a6,
            extra_args: Vec::new(),
        }
    }

    /// The default warm-up: a fifth of the run, at most a minute.
    pub fn auto_warmup(duration: Duration) -> Duration {
        (duration / 5).min(WINDOW_MAX)
    }

    /// Checks the combination of options.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |m: &str| Err(BenchError::Config(m.to_string()));
        if self.server == ServerKind::Redis {
            return bad("soak drives shoald, memcached or shoal-queued (memcache protocol)");
        }
        if self.duration < Duration::from_secs(2) {
            return bad("--duration must be at least 2s");
        }
        if self.warmup + Duration::from_secs(1) > self.duration {
            return bad("--warmup must leave at least 1s of the run to judge");
        }
        if !(8..=1 << 20).contains(&self.memory_mb) {
            return bad("--memory-mb must be between 8 and 1048576");
        }
        if self.conns == 0 || self.threads == 0 || self.server_threads == 0 {
            return bad("--conns, --threads and --server-threads must be at least 1");
        }
        if !(0.0..=1.0).contains(&self.slow_readers) {
            return bad("--slow-readers must be between 0 and 1");
        }
        if !(0.0..=1.0).contains(&self.set_ratio) {
            return bad("--set-ratio must be between 0 and 1");
        }
        if self.value_size.min == 0 || self.value_size.max > 1000 * 1024 {
            return bad(
                "--value-size must be within 1 B and 1000 KiB (the servers' 1 MiB item limit)",
            );
        }
        if !(self.key_space.is_finite() && self.key_space > 0.0) {
            return bad("--key-space must be a positive multiple of memory");
        }
        if !(1..=1000).contains(&self.multiget_keys) {
            return bad("--multiget-keys must be between 1 and 1000");
        }
        if self.slow_read_bytes == 0 {
            return bad("--slow-read-kb must be positive");
        }
        if !(self.overhead_mb.is_finite()
            && self.overhead_mb >= 0.0
            && self.overhead_per_100_conns_mb.is_finite()
            && self.overhead_per_100_conns_mb >= 0.0)
        {
            return bad("the overhead allowances must be non-negative MiB");
        }
        Ok(())
    }

    /// The verdict's limit on RSS after warm-up, MiB: `-m` + fixed + per-connection.
    pub fn budget_mb(&self) -> f64 {
        self.memory_mb as f64
            + self.overhead_mb
            + self.overhead_per_100_conns_mb * self.conns as f64 / 100.0
    }

    /// The budget spelled out, for reports.
    pub fn budget_line(&self) -> String {
        format!(
            "{} MiB (-m) + {} MiB fixed + {} MiB per 100 connections x {} connections = {} MiB",
            self.memory_mb,
            self.overhead_mb,
            self.overhead_per_100_conns_mb,
            self.conns,
            num(self.budget_mb())
        )
    }

    /// Distinct keys: enough that they hold `key_space` times the memory limit (for a
    /// queue, the queue count).
    pub fn keys(&self) -> u64 {
        if self.server == ServerKind::ShoalQueued {
            return QUEUES;
        }
        let bytes = self.key_space * self.memory_mb as f64 * MIB;
        ((bytes / self.value_size.log_uniform_mean().max(1.0)).ceil() as u64).max(100)
    }

    /// Slow readers among the connections.
    pub fn slow_conns(&self) -> usize {
        ((self.conns as f64 * self.slow_readers).round() as usize).min(self.conns)
    }

    /// The window compared at each end of the judged part of the run.
    pub fn window(&self) -> Duration {
        (self.duration.saturating_sub(self.warmup) / 2).min(WINDOW_MAX)
    }

    /// The server's arguments (the port and address are added when starting it).
    pub fn server_args(&self) -> Vec<String> {
        let mut args = self.own_server_args();
        args.extend(self.extra_args.iter().cloned());
        args
    }

    fn own_server_args(&self) -> Vec<String> {
        let conn_limit = (self.conns * 2 + 64).max(1024).to_string();
        let threads = self.server_threads.to_string();
        match self.server {
            ServerKind::ShoalQueued => {
                // Its memory bound is per queue: split -m over the queues. The byte cap
                // (on disk) keeps a queue that producers get ahead of from growing forever.
                let share_kib = self.memory_mb * 1024 / QUEUES;
                vec![
                    "-t".into(),
                    threads,
                    "-c".into(),
                    conn_limit,
                    "--queue-memory".into(),
                    format!("{share_kib}k"),
                    "--max-bytes".into(),
                    format!("{}k", share_kib * 2),
                    "--discard-old".into(),
                ]
            }
            _ => vec![
                "-m".into(),
                self.memory_mb.to_string(),
                "-t".into(),
                threads,
                "-c".into(),
                conn_limit,
            ],
        }
    }
}

/// One RSS sample.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Sample {
    /// Seconds since the load started.
    pub t_secs: f64,
    /// VmRSS, MiB.
    pub rss_mb: f64,
    /// Requests answered so far.
    pub ops: u64,
}

/// What the clients did and what went wrong.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct SoakCounts {
    /// Gets answered (churners).
    pub gets: u64,
    /// Sets answered.
    pub sets: u64,
    /// Gets that returned a value.
    pub hits: u64,
    /// Gets that returned nothing.
    pub misses: u64,
    /// Slow readers' multi-gets read to the end.
    pub multigets_done: u64,
    /// Values in those multi-gets.
    pub multiget_values: u64,
    /// Slow readers that hung up before their reply was complete.
    pub multigets_abandoned: u64,
    /// Bytes slow readers read.
    pub slow_bytes_read: u64,
    /// Connections opened.
    pub connects: u64,
    /// `ERROR`, `CLIENT_ERROR` and `SERVER_ERROR` replies.
    pub error_replies: u64,
    /// Connections that failed, were refused, or were closed by the server.
    pub conn_errors: u64,
    /// Replies that were not the memcache protocol.
    pub protocol_errors: u64,
    /// Socket operations that waited 10 s.
    pub timeouts: u64,
}

impl SoakCounts {
    /// Requests answered: gets, sets and completed multi-gets.
    pub fn ops(&self) -> u64 {
        self.gets + self.sets + self.multigets_done
    }

    /// Every kind of error.
    pub fn errors(&self) -> u64 {
        self.error_replies + self.conn_errors + self.protocol_errors + self.timeouts
    }
}

/// The RSS curve summed up, MiB.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RssSummary {
    /// Before any load.
    pub idle_mb: f64,
    /// Smallest sample.
    pub min_mb: f64,
    /// Median sample.
    pub median_mb: f64,
    /// Largest sample.
    pub max_mb: f64,
    /// Largest sample after the warm-up: what the verdict judges.
    pub max_after_warmup_mb: Option<f64>,
    /// Median of the first window after the warm-up.
    pub first_window_mb: Option<f64>,
    /// Median of the last window.
    pub last_window_mb: Option<f64>,
    /// Last window minus first: how far from flat the curve is.
    pub growth_mb: Option<f64>,
    /// The first window, seconds from the start.
    pub first_window_secs: (f64, f64),
    /// The last window, seconds from the start.
    pub last_window_secs: (f64, f64),
}

/// The result of one soak run.
#[derive(Clone, Debug, Serialize)]
pub struct SoakReport {
    /// The command line (set by the caller).
    pub command: String,
    /// When the load started (UTC).
    pub started: String,
    /// Where it ran.
    pub machine: MachineInfo,
    /// What was run.
    pub config: SoakConfig,
    /// The server's arguments.
    pub server_args: Vec<String>,
    /// Distinct keys (queues for shoal-queued).
    pub keys: u64,
    /// Mean value size, bytes.
    pub mean_value_bytes: f64,
    /// Slow readers among the connections.
    pub slow_conns: usize,
    /// Limit on RSS after warm-up, MiB.
    pub budget_mb: f64,
    /// RSS every second.
    pub samples: Vec<Sample>,
    /// The curve summed up.
    pub rss: RssSummary,
    /// What the clients did.
    pub counts: SoakCounts,
    /// Requests answered per second.
    pub ops_per_sec: f64,
    /// Seconds the load ran (shorter than asked if the server died).
    pub elapsed_secs: f64,
    /// The 1-minute load average when the load ended (the machine's is at the start):
    /// with 2 cores, anything much above 2 means other work competed with the run.
    pub load_average_end: f64,
    /// Whether the server was still running at the end.
    pub server_survived: bool,
    /// The verdict.
    pub pass: bool,
    /// Why it failed (empty on a pass).
    pub reasons: Vec<String>,
}

/// Counters shared by every client task.
#[derive(Default)]
struct Counters {
    gets: AtomicU64,
    sets: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    multigets_done: AtomicU64,
    multiget_values: AtomicU64,
    multigets_abandoned: AtomicU64,
    slow_bytes_read: AtomicU64,
    connects: AtomicU64,
    error_replies: AtomicU64,
    conn_errors: AtomicU64,
    protocol_errors: AtomicU64,
    timeouts: AtomicU64,
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

impl Counters {
    fn record(&self, op: Op, reply: Reply) {
        bump(
            match op {
                Op::Get => &self.gets,
                Op::Set => &self.sets,
            },
            1,
        );
        match reply {
            Reply::Hit => bump(&self.hits, 1),
            Reply::Miss => bump(&self.misses, 1),
            Reply::Error => bump(&self.error_replies, 1),
            Reply::Stored | Reply::NotStored => {}
        }
    }

    fn fault(&self, f: Fault) {
        bump(
            match f {
                Fault::Timeout => &self.timeouts,
                Fault::Broken => &self.conn_errors,
                Fault::Protocol => &self.protocol_errors,
            },
            1,
        );
    }

    fn ops(&self) -> u64 {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        g(&self.gets) + g(&self.sets) + g(&self.multigets_done)
    }

    fn snapshot(&self) -> SoakCounts {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        SoakCounts {
            gets: g(&self.gets),
            sets: g(&self.sets),
            hits: g(&self.hits),
            misses: g(&self.misses),
            multigets_done: g(&self.multigets_done),
            multiget_values: g(&self.multiget_values),
            multigets_abandoned: g(&self.multigets_abandoned),
            slow_bytes_read: g(&self.slow_bytes_read),
            connects: g(&self.connects),
            error_replies: g(&self.error_replies),
            conn_errors: g(&self.conn_errors),
            protocol_errors: g(&self.protocol_errors),
            timeouts: g(&self.timeouts),
        }
    }
}

/// Why a connection ended early.
#[derive(Clone, Copy, Debug)]
enum Fault {
    Timeout,
    Broken,
    Protocol,
}

/// What every client task reads.
struct Shared {
    addr: SocketAddr,
    prefix: &'static [u8],
    width: usize,
    keys: u64,
    sizes: ValueSize,
    set_ratio: f64,
    multiget_keys: usize,
    slow_read_bytes: usize,
    /// The bytes every set's value is cut from.
    value: Vec<u8>,
    /// Set when the run ends early (the server died).
    stop: AtomicBool,
    c: Counters,
}

impl Shared {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// Runs the soak: starts the server, loads it for the duration while sampling its RSS,
/// and judges the curve. Blocks the calling thread.
pub fn run(cfg: &SoakConfig) -> Result<SoakReport, BenchError> {
    cfg.validate()?;
    let fds = raise_fd_limit();
    let need = cfg.conns as u64 + 64;
    if fds > 0 && fds < need {
        return Err(BenchError::Config(format!(
            "{need} file descriptors needed but the limit is {fds} (ulimit -n)"
        )));
    }
    let machine = MachineInfo::detect();
    let args = cfg.server_args();
    let mut srv = match cfg.server {
        ServerKind::Shoald => ServerProcess::start_shoald(&cfg.bin, &args)?,
        ServerKind::Memcached => ServerProcess::start_memcached(&cfg.bin, &args)?,
        ServerKind::ShoalQueued => ServerProcess::start_queued(&cfg.bin, &cfg.queue_fsync, &args)?,
        ServerKind::Redis => return Err(BenchError::Config("soak cannot drive redis".into())),
    };
    let idle_mb = srv.rss_kib()? as f64 / 1024.0;
    let queue = cfg.server == ServerKind::ShoalQueued;
    let sh = Arc::new(Shared {
        addr: srv.addr,
        prefix: if queue { b"soakq" } else { b"soak:" },
        width: if queue { 0 } else { 8 },
        keys: cfg.keys(),
        sizes: cfg.value_size,
        set_ratio: cfg.set_ratio,
        multiget_keys: cfg.multiget_keys,
        slow_read_bytes: cfg.slow_read_bytes,
        value: vec![b'v'; cfg.value_size.max],
        stop: AtomicBool::new(false),
        c: Counters::default(),
    });
    // Slow readers first, then churners, dealt round-robin so every thread has both.
    let slow = cfg.slow_conns();
    let mut per_thread: Vec<Vec<(bool, u64)>> = vec![Vec::new(); cfg.threads];
    for i in 0..cfg.conns {
        let seed = cfg.seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        per_thread[i % cfg.threads].push((i < slow, seed));
    }
    let started = utc_date(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    );
    let t0 = Instant::now();
    let end = t0 + cfg.duration;
    let mut samples = Vec::with_capacity(cfg.duration.as_secs().min(86_400) as usize + 2);
    let mut survived = true;
    // When the load stopped: the end, or when the server was found dead.
    let mut stopped_at = end;
    let joined: Vec<Result<(), BenchError>> = std::thread::scope(|s| {
        let handles: Vec<_> = per_thread
            .into_iter()
            .map(|tasks| {
                let sh = sh.clone();
                s.spawn(move || client_thread(sh, tasks, end))
            })
            .collect();
        // One sample a second on the second, and one at the end.
        for k in 0u64.. {
            let at = (t0 + Duration::from_secs(k)).min(end);
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            if !srv.alive() {
                survived = false;
                stopped_at = Instant::now();
                break;
            }
            if let Ok(kib) = srv.rss_kib() {
                let ops = sh.c.ops();
                let t_secs = t0.elapsed().as_secs_f64();
                samples.push(Sample {
                    t_secs,
                    rss_mb: kib as f64 / 1024.0,
                    ops,
                });
                if k % 10 == 0 || at >= end {
                    eprintln!(
                        "[soak {}] {:>5.0}s  RSS {:>7.1} MiB  ops {:>11}  errors {}",
                        cfg.server.name(),
                        t_secs,
                        kib as f64 / 1024.0,
                        count(ops),
                        sh.c.snapshot().errors()
                    );
                }
            }
            if at >= end {
                break;
            }
        }
        sh.stop.store(true, Ordering::Relaxed);
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(BenchError::Config("client thread panicked".into())))
            })
            .collect()
    });
    let elapsed_secs = stopped_at.saturating_duration_since(t0).as_secs_f64();
    let load_average_end = crate::machine::load_average();
    for r in joined {
        r?;
    }
    survived &= srv.alive();
    drop(srv);
    let counts = sh.c.snapshot();
    let rss = summarize(cfg, idle_mb, &samples);
    let mut reasons = Vec::new();
    if !survived {
        reasons.push(format!("{} exited during the run", cfg.server.name()));
    }
    if counts.ops() == 0 {
        reasons.push("no request was answered: the load did not run".into());
    }
    match rss.max_after_warmup_mb {
        None => reasons.push("no RSS sample after the warm-up".into()),
        Some(m) if m > cfg.budget_mb() => reasons.push(format!(
            "max RSS after warm-up {} MiB is above the budget of {} MiB",
            num(m),
            num(cfg.budget_mb())
        )),
        Some(_) => {}
    }
    Ok(SoakReport {
        command: String::new(),
        started,
        machine,
        config: cfg.clone(),
        server_args: args,
        keys: cfg.keys(),
        mean_value_bytes: cfg.value_size.log_uniform_mean(),
        slow_conns: slow,
        budget_mb: cfg.budget_mb(),
        samples,
        rss,
        counts,
        ops_per_sec: if elapsed_secs > 0.0 {
            counts.ops() as f64 / elapsed_secs
        } else {
            0.0
        },
        elapsed_secs,
        load_average_end,
        server_survived: survived,
        pass: reasons.is_empty(),
        reasons,
    })
}

/// The median of `v` (0 when empty).
fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Sums the curve up: extremes, the largest sample after warm-up, and the medians of the
/// first and last windows of the judged part.
fn summarize(cfg: &SoakConfig, idle_mb: f64, samples: &[Sample]) -> RssSummary {
    let all: Vec<f64> = samples.iter().map(|s| s.rss_mb).collect();
    let within = |from: f64, to: f64| -> Option<f64> {
        let v: Vec<f64> = samples
            .iter()
            .filter(|s| s.t_secs >= from && s.t_secs <= to)
            .map(|s| s.rss_mb)
            .collect();
        (!v.is_empty()).then(|| median(v))
    };
    let warm = cfg.warmup.as_secs_f64();
    let dur = cfg.duration.as_secs_f64();
    let win = cfg.window().as_secs_f64();
    // Samples are taken on the second, up to a few ms late: a small tolerance keeps the
    // window's last sample in it.
    let slack = 0.5;
    let first = (warm, warm + win);
    let last = (dur - win, dur);
    let first_mb = within(first.0, first.1 + slack);
    let last_mb = within(last.0, last.1 + slack);
    RssSummary {
        idle_mb,
        min_mb: all.iter().copied().reduce(f64::min).unwrap_or(0.0),
        median_mb: median(all.clone()),
        max_mb: all.iter().copied().reduce(f64::max).unwrap_or(0.0),
        max_after_warmup_mb: samples
            .iter()
            .filter(|s| s.t_secs >= warm)
            .map(|s| s.rss_mb)
            .reduce(f64::max),
        first_window_mb: first_mb,
        last_window_mb: last_mb,
        growth_mb: first_mb.zip(last_mb).map(|(a, b)| b - a),
        first_window_secs: first,
        last_window_secs: last,
    }
}

/// One client thread: a single-threaded runtime driving its tasks until `end`.
fn client_thread(sh: Arc<Shared>, tasks: Vec<(bool, u64)>, end: Instant) -> Result<(), BenchError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| BenchError::io("client runtime", e))?;
    rt.block_on(async move {
        let end = tokio::time::Instant::from_std(end);
        let mut set = tokio::task::JoinSet::new();
        for (slow, seed) in tasks {
            let sh = sh.clone();
            // The deadline drops each task wherever it is: mid-request connections are
            // simply closed, as churn does anyway.
            set.spawn(async move {
                if slow {
                    let _ = tokio::time::timeout_at(end, slow_reader(sh, seed)).await;
                } else {
                    let _ = tokio::time::timeout_at(end, churner(sh, seed)).await;
                }
            });
        }
        while let Some(r) = set.join_next().await {
            r.map_err(|e| BenchError::Config(format!("client task: {e}")))?;
        }
        Ok(())
    })
}

/// Runs `f` for at most [`IO_TIMEOUT`].
async fn within<T>(f: impl Future<Output = T>) -> Result<T, Fault> {
    tokio::time::timeout(IO_TIMEOUT, f)
        .await
        .map_err(|_| Fault::Timeout)
}

/// Connect, send 1-200 requests one at a time, close; again until stopped.
async fn churner(sh: Arc<Shared>, seed: u64) {
    let mut rng = Rng::new(seed);
    let mut wbuf = Vec::with_capacity(64 * 1024);
    let mut rbuf = Vec::with_capacity(64 * 1024);
    while !sh.stopped() {
        let mut stream = match connect(sh.addr).await {
            Ok(s) => s,
            Err(_) => {
                sh.c.fault(Fault::Broken);
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        bump(&sh.c.connects, 1);
        let requests = 1 + rng.below(MAX_REQUESTS_PER_CONN);
        let abandon = rng.unit() < ABANDON;
        let r = session(
            &sh,
            &mut stream,
            &mut rng,
            requests,
            abandon,
            &mut wbuf,
            &mut rbuf,
        );
        if let Err(f) = r.await {
            sh.c.fault(f);
        }
        rbuf.clear();
    }
}

/// One churner connection's requests; with `abandon`, the last one's reply is not read.
async fn session(
    sh: &Shared,
    stream: &mut TcpStream,
    rng: &mut Rng,
    requests: u64,
    abandon: bool,
    wbuf: &mut Vec<u8>,
    rbuf: &mut Vec<u8>,
) -> Result<(), Fault> {
    for i in 0..requests {
        if sh.stopped() {
            return Ok(());
        }
        let k = rng.below(sh.keys);
        wbuf.clear();
        let op = if rng.unit() < sh.set_ratio {
            let len = sh.sizes.next_log_uniform(rng);
            text::encode_set(wbuf, sh.prefix, k, sh.width, &sh.value[..len]);
            Op::Set
        } else {
            text::encode_get(wbuf, sh.prefix, k, sh.width);
            Op::Get
        };
        within(stream.write_all(wbuf))
            .await?
            .map_err(|_| Fault::Broken)?;
        if abandon && i + 1 == requests {
            return Ok(());
        }
        let reply = loop {
            if let Some((r, used)) = text::parse_reply(rbuf, op).map_err(|_| Fault::Protocol)? {
                rbuf.drain(..used);
                break r;
            }
            within(fill_buf(stream, rbuf, sh.addr))
                .await?
                .map_err(|_| Fault::Broken)?;
        };
        sh.c.record(op, reply);
    }
    Ok(())
}

/// Connects with a small receive buffer, set before connecting so the advertised window
/// is small from the start: what the reader has not read stays in the server.
async fn connect_slow(addr: SocketAddr) -> Result<TcpStream, Fault> {
    let sock = if addr.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .map_err(|_| Fault::Broken)?;
    sock.set_recv_buffer_size(SLOW_RCVBUF)
        .map_err(|_| Fault::Broken)?;
    within(sock.connect(addr)).await?.map_err(|_| Fault::Broken)
}

/// Connect, send a big multi-get, read it slowly, hang up; again until stopped.
async fn slow_reader(sh: Arc<Shared>, seed: u64) {
    let mut rng = Rng::new(seed);
    let mut wbuf = Vec::with_capacity(sh.multiget_keys * 16);
    let mut rbuf = Vec::new();
    let mut chunk = vec![0u8; sh.slow_read_bytes];
    while !sh.stopped() {
        let mut stream = match connect_slow(sh.addr).await {
            Ok(s) => s,
            Err(f) => {
                sh.c.fault(f);
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        bump(&sh.c.connects, 1);
        let r = slow_session(&sh, &mut stream, &mut rng, &mut wbuf, &mut rbuf, &mut chunk);
        if let Err(f) = r.await {
            sh.c.fault(f);
        }
        rbuf.clear();
    }
}

/// One slow reader connection: the multi-get, then a few KB per tick until the reply is
/// complete or the connection's life is over.
async fn slow_session(
    sh: &Shared,
    stream: &mut TcpStream,
    rng: &mut Rng,
    wbuf: &mut Vec<u8>,
    rbuf: &mut Vec<u8>,
    chunk: &mut [u8],
) -> Result<(), Fault> {
    wbuf.clear();
    let keys = (0..sh.multiget_keys).map(|_| rng.below(sh.keys));
    text::encode_multi_get(wbuf, sh.prefix, keys, sh.width);
    within(stream.write_all(wbuf))
        .await?
        .map_err(|_| Fault::Broken)?;
    let life = Instant::now() + Duration::from_millis(SLOW_LIFE_MS.0 + rng.below(SLOW_LIFE_MS.1));
    loop {
        if sh.stopped() || Instant::now() >= life {
            bump(&sh.c.multigets_abandoned, 1);
            return Ok(());
        }
        if rng.unit() < SLOW_PAUSE {
            tokio::time::sleep(Duration::from_millis(2000 + rng.below(3000))).await;
            continue;
        }
        let n = within(stream.read(chunk))
            .await?
            .map_err(|_| Fault::Broken)?;
        if n == 0 {
            return Err(Fault::Broken);
        }
        bump(&sh.c.slow_bytes_read, n as u64);
        rbuf.extend_from_slice(&chunk[..n]);
        if let Some((values, _)) = text::parse_multi_get(rbuf).map_err(|_| Fault::Protocol)? {
            bump(&sh.c.multigets_done, 1);
            bump(&sh.c.multiget_values, values);
            return Ok(());
        }
        tokio::time::sleep(SLOW_TICK).await;
    }
}

/// A count with thousands separators (`num` would give small ones decimals).
fn count(n: u64) -> String {
    if n >= 100 {
        num(n as f64)
    } else {
        n.to_string()
    }
}

/// `YYYY-MM-DD HH:MM:SS UTC` for seconds since 1970 (Howard Hinnant's days-to-civil).
pub fn utc_date(unix: u64) -> String {
    let days = (unix / 86_400) as i64;
    let secs = unix % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

impl SoakReport {
    /// The file name stem for this server's results: `soak-shoald`, or with extra flags
    /// `soak-shoald-io-uring` (the flags, dashes trimmed, joined by dashes).
    pub fn stem(&self) -> String {
        let mut stem = format!("soak-{}", self.config.server.name());
        for a in &self.config.extra_args {
            let a: String = a
                .trim_start_matches('-')
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                .collect();
            stem.push('-');
            stem.push_str(&a);
        }
        stem
    }

    /// A person's summary: what ran, the curve's numbers, the verdict.
    pub fn markdown(&self) -> String {
        let c = &self.config;
        let r = &self.rss;
        let n = &self.counts;
        let opt = |v: Option<f64>| v.map_or_else(|| "-".to_string(), num);
        let mut m = String::new();
        let _ = writeln!(
            m,
            "# Soak: {}, {} MiB, {} s\n",
            c.server.name(),
            c.memory_mb,
            c.duration.as_secs_f64()
        );
        let _ = writeln!(m, "Command: `{}`  ", self.command);
        let _ = writeln!(m, "Started: {}  ", self.started);
        let _ = writeln!(
            m,
            "Machine: {}; {:.1} when it ended  ",
            self.machine.line(),
            self.load_average_end
        );
        let _ = writeln!(
            m,
            "Server: `{} {}` (plus a port and -l 127.0.0.1)\n",
            c.bin.display(),
            self.server_args.join(" ")
        );
        let what = if c.server == ServerKind::ShoalQueued {
            format!(
                "{QUEUES} queues (sets enqueue, gets dequeue); -m split over them as \
                 --queue-memory, each capped at twice that with --max-bytes and --discard-old"
            )
        } else {
            format!(
                "{} keys (x mean value = {} x -m, so eviction never stops)",
                count(self.keys),
                c.key_space
            )
        };
        let _ = writeln!(
            m,
            "Load: {conns} connections on {threads} client threads. {churn} churners send one \
             request at a time ({set:.0}% sets) and reconnect after 1-{maxr} requests, {ab:.0}% \
             of them closing with a request unanswered. {slow} slow readers connect with a \
             {rcv} KiB receive buffer, send a {mg}-key multi-get, read {rd} bytes per 100 ms, \
             stop reading for 2-5 s at random ({pause:.0}% chance per read) and hang up after \
             5-30 s, done or not. Values: log-uniform {vmin}-{vmax} bytes (mean {mean}). {what}.\n",
            conns = c.conns,
            threads = c.threads,
            churn = c.conns - self.slow_conns,
            set = c.set_ratio * 100.0,
            maxr = MAX_REQUESTS_PER_CONN,
            ab = ABANDON * 100.0,
            slow = self.slow_conns,
            rcv = SLOW_RCVBUF / 1024,
            mg = c.multiget_keys,
            rd = c.slow_read_bytes,
            pause = SLOW_PAUSE * 100.0,
            vmin = c.value_size.min,
            vmax = c.value_size.max,
            mean = num(self.mean_value_bytes),
        );
        let _ = writeln!(
            m,
            "Budget: {}. Warm-up (not judged): the first {} s. MiB = 2^20 bytes; RSS is VmRSS \
             from /proc/PID/status, sampled every second ({} samples).\n",
            c.budget_line(),
            c.warmup.as_secs_f64(),
            self.samples.len()
        );
        let _ = writeln!(m, "| RSS | MiB |\n|---|---:|");
        let rows = [
            ("idle, before the load".to_string(), num(r.idle_mb)),
            ("min".into(), num(r.min_mb)),
            ("median".into(), num(r.median_mb)),
            ("max".into(), num(r.max_mb)),
            ("**max after warm-up**".into(), opt(r.max_after_warmup_mb)),
            (
                format!(
                    "median, first window after warm-up ({}-{} s)",
                    num(r.first_window_secs.0),
                    num(r.first_window_secs.1)
                ),
                opt(r.first_window_mb),
            ),
            (
                format!(
                    "median, last window ({}-{} s)",
                    num(r.last_window_secs.0),
                    num(r.last_window_secs.1)
                ),
                opt(r.last_window_mb),
            ),
            ("growth, last window - first".into(), opt(r.growth_mb)),
            ("budget".into(), num(self.budget_mb)),
        ];
        for (k, v) in rows {
            let _ = writeln!(m, "| {k} | {v} |");
        }
        let hit = if n.gets > 0 {
            n.hits as f64 * 100.0 / n.gets as f64
        } else {
            0.0
        };
        let _ = writeln!(
            m,
            "\nOps: {} in {} s ({}/s): {} gets ({hit:.1}% hits), {} sets, {} multi-gets read to \
             the end ({} values) and {} abandoned mid-reply, {} bytes read slowly; {} connections \
             opened.  ",
            count(n.ops()),
            num(self.elapsed_secs),
            num(self.ops_per_sec),
            count(n.gets),
            count(n.sets),
            count(n.multigets_done),
            count(n.multiget_values),
            count(n.multigets_abandoned),
            count(n.slow_bytes_read),
            count(n.connects),
        );
        let _ = writeln!(
            m,
            "Errors: {} ({} error replies, {} connection errors, {} protocol errors, \
             {} timeouts).\n",
            n.errors(),
            n.error_replies,
            n.conn_errors,
            n.protocol_errors,
            n.timeouts
        );
        if self.pass {
            let _ = writeln!(
                m,
                "**Verdict: PASS**: max RSS after warm-up {} MiB is within the budget of {} MiB.",
                opt(r.max_after_warmup_mb),
                num(self.budget_mb)
            );
        } else {
            let _ = writeln!(m, "**Verdict: FAIL**: {}.", self.reasons.join("; "));
        }
        let _ = writeln!(m, "\n![RSS over time]({}.png)", self.stem());
        m
    }

    /// Draws the RSS curve (with lines at -m and at the budget) into `dir/file`.
    pub fn chart(&self, dir: &Path, file: &str) -> Result<String, BenchError> {
        let c = &self.config;
        let end = c.duration.as_secs_f64();
        let flat = |y: f64| vec![(0.0, y), (end, y)];
        let rss = self.samples.iter().map(|s| (s.t_secs, s.rss_mb)).collect();
        chart::line_chart_legend_at(
            dir,
            file,
            &format!(
                "{} RSS under soak: -m {}, {} connections, {} slow",
                c.server.name(),
                c.memory_mb,
                c.conns,
                self.slow_conns
            ),
            "seconds",
            "RSS (MiB)",
            &[
                Series::line("VmRSS", rss),
                Series::line(format!("-m {}", c.memory_mb), flat(c.memory_mb as f64)),
                Series::line(
                    format!("budget {}", num(self.budget_mb)),
                    flat(self.budget_mb),
                ),
            ],
            SeriesLabelPosition::LowerRight,
        )
    }

    /// Writes `soak-SERVER.json`, `.md` and `.png` into `dir`; returns their paths.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>, BenchError> {
        std::fs::create_dir_all(dir).map_err(|e| BenchError::io(dir.display().to_string(), e))?;
        let stem = self.stem();
        let png = self.chart(dir, &format!("{stem}.png"))?;
        let json = serde_json::to_string_pretty(self)
            .map_err(|e| BenchError::Config(format!("serialising the soak report: {e}")))?;
        let mut out = vec![dir.join(png)];
        for (ext, text) in [("json", json), ("md", self.markdown())] {
            let path = dir.join(format!("{stem}.{ext}"));
            std::fs::write(&path, text)
                .map_err(|e| BenchError::io(path.display().to_string(), e))?;
            out.push(path);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(kind: ServerKind) -> SoakConfig {
        SoakConfig::new(kind, PathBuf::from("/bin/true"))
    }

    #[test]
    fn dates() {
        assert_eq!(utc_date(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc_date(1_700_000_000), "2023-11-14 22:13:20 UTC");
        assert_eq!(utc_date(951_782_400), "2000-02-29 00:00:00 UTC");
    }

    #[test]
    fn budget_and_key_space() {
        let c = cfg(ServerKind::Shoald);
        assert_eq!(c.budget_mb(), 64.0 + 64.0 + 2.0);
        assert!(c.budget_line().contains("= 130 MiB"), "{}", c.budget_line());
        // 4 x 64 MiB over a ~47 KB mean value.
        assert!((5_000..6_500).contains(&c.keys()), "{}", c.keys());
        assert_eq!(cfg(ServerKind::ShoalQueued).keys(), QUEUES);
        assert_eq!(c.slow_conns(), 10);
        assert_eq!(c.warmup, Duration::from_secs(60));
        assert_eq!(c.window(), Duration::from_secs(60));
        let q = cfg(ServerKind::ShoalQueued).server_args().join(" ");
        assert!(
            q.contains("--queue-memory 16384k --max-bytes 32768k"),
            "{q}"
        );
        assert!(c.server_args().join(" ").starts_with("-m 64 -t 2 -c 1024"));
    }

    #[test]
    fn refuses_bad_combinations() {
        let mut c = cfg(ServerKind::Shoald);
        c.validate().unwrap();
        c.duration = Duration::from_secs(5);
        c.warmup = SoakConfig::auto_warmup(c.duration);
        c.validate().unwrap();
        assert_eq!(c.window(), Duration::from_secs(2));
        c.warmup = Duration::from_secs(5);
        assert!(c.validate().is_err());
        let mut c = cfg(ServerKind::Memcached);
        c.slow_readers = 1.5;
        assert!(c.validate().is_err());
        assert!(cfg(ServerKind::Redis).validate().is_err());
    }

    #[test]
    fn summarizes_a_curve() {
        let mut c = cfg(ServerKind::Shoald);
        c.duration = Duration::from_secs(10);
        c.warmup = Duration::from_secs(2);
        // Climbs to 2 s, then 50 MiB flat except one 90 MiB spike at 7 s.
        let samples: Vec<Sample> = (0..=10)
            .map(|t| Sample {
                t_secs: t as f64 + 0.002,
                rss_mb: match t {
                    0 => 5.0,
                    1 => 30.0,
                    7 => 90.0,
                    _ => 50.0,
                },
                ops: t * 100,
            })
            .collect();
        let r = summarize(&c, 4.0, &samples);
        assert_eq!(r.min_mb, 5.0);
        assert_eq!(r.max_mb, 90.0);
        assert_eq!(r.median_mb, 50.0);
        assert_eq!(r.max_after_warmup_mb, Some(90.0));
        assert_eq!(r.first_window_secs, (2.0, 6.0));
        assert_eq!(r.last_window_secs, (6.0, 10.0));
        assert_eq!(r.first_window_mb, Some(50.0));
        assert_eq!(r.last_window_mb, Some(50.0));
        assert_eq!(r.growth_mb, Some(0.0));
        let empty = summarize(&c, 4.0, &[]);
        assert_eq!(empty.max_after_warmup_mb, None);
        assert_eq!(empty.growth_mb, None);
    }

    #[test]
    fn medians() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(Vec::new()), 0.0);
    }
}
