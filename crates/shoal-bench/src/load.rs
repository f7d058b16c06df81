//! The closed-loop load generator behind `shoal-bench load`.
//!
//! `threads` OS threads each run a single-threaded tokio runtime driving their share of
//! `conns` connections. Each connection keeps `depth` requests in flight: it writes as
//! many new requests as replies it has just read, in one write, so depth 1 is a classic
//! request/reply client and depth 16 a pipelining one. Latency is measured per request
//! from the write that carried it to the read that completed its reply.
//!
//! The run has three phases: an optional prefill (every key set once, pipelined), a
//! warm-up (load applied, nothing recorded) and the measured window. Every request ever
//! answered is counted in [`LoadReport::total_ops`], so the report can be checked against
//! the server's own `stats`.

use crate::proto::Protocol;
use crate::rng::Rng;
use crate::text::{self, Op, Reply};
use crate::workload::{KeyChooser, KeyDist, ValueSize};
use crate::BenchError;
use hdrhistogram::Histogram;
use serde::Serialize;
use shoal_ring::Ring;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What to send, to where, for how long.
#[derive(Clone, Debug, Serialize)]
pub struct LoadConfig {
    /// The servers' addresses: one, or several with a [`LoadConfig::placement`] ring.
    pub servers: Vec<SocketAddr>,
    /// The wire protocol.
    pub protocol: Protocol,
    /// Which server a key goes to when there are several (client-side placement).
    #[serde(skip)]
    pub placement: Option<Arc<Ring>>,
    /// A label for the placement, for reports (`modula`, `ketama`, ...).
    pub placement_name: Option<String>,
    /// Client threads (each a single-threaded event loop).
    pub threads: usize,
    /// Connections, in total, spread over the threads (with several servers, each
    /// connection is one socket per server).
    pub conns: usize,
    /// Requests kept in flight per connection.
    pub depth: usize,
    /// Number of distinct keys.
    pub keys: u64,
    /// How keys are chosen.
    pub key_dist: KeyDist,
    /// Key prefix; keys are the prefix and a zero-padded index.
    pub key_prefix: String,
    /// Digits the index is padded to (`key:` and 8 digits make 12-byte keys).
    pub key_width: usize,
    /// Value sizes for sets.
    pub value_size: ValueSize,
    /// Fraction of requests that are sets (the rest are gets), 0.0 to 1.0.
    pub set_ratio: f64,
    /// Length of the measured window (ignored when `requests` is set).
    #[serde(serialize_with = "secs")]
    pub duration: Duration,
    /// Load applied before the measured window, not recorded (ignored with `requests`).
    #[serde(serialize_with = "secs")]
    pub warmup: Duration,
    /// Send exactly this many requests in total instead of running for `duration`.
    pub requests: Option<u64>,
    /// Cap on requests per second over all connections (paced per connection; latency
    /// is measured from each request's scheduled time).
    pub rate: Option<f64>,
    /// Set every key once before the warm-up, so gets hit.
    pub prefill: bool,
    /// Seed for key and operation choice.
    pub seed: u64,
    /// How the pipeline is refilled.
    pub refill: Refill,
    /// Draw a progress bar on stderr when it is a terminal.
    #[serde(skip)]
    pub progress: bool,
}

/// How a connection keeps its pipeline full.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Refill {
    /// Write `depth` requests, read all `depth` replies, repeat (memtier's pipelining).
    #[default]
    Batch,
    /// After every read, write as many new requests as replies just completed.
    Window,
}

/// Serialises a duration as seconds (a float).
pub(crate) fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

impl LoadConfig {
    /// A configuration with the defaults of `shoal-bench load` for `server`.
    pub fn new(server: SocketAddr) -> Self {
        LoadConfig {
            servers: vec![server],
            protocol: Protocol::Text,
            placement: None,
            placement_name: None,
            threads: 2,
            conns: 50,
            depth: 1,
            keys: 10_000,
            key_dist: KeyDist::Uniform,
            key_prefix: "key:".into(),
            key_width: 8,
            value_size: ValueSize::fixed(100),
            set_ratio: 0.1,
            duration: Duration::from_secs(5),
            warmup: Duration::from_secs(1),
            requests: None,
            rate: None,
            prefill: true,
            seed: 0x5eed,
            refill: Refill::Batch,
            progress: false,
        }
    }

    /// Checks the combination of options.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |m: &str| Err(BenchError::Config(m.to_string()));
        if self.servers.is_empty() {
            return bad("no server to send to");
        }
        if self.servers.len() > 1 {
            match &self.placement {
                None => return bad("several servers need a placement (ring)"),
                Some(r) if r.servers().len() != self.servers.len() => {
                    return bad("the placement ring and the server list differ in length")
                }
                Some(_) => {}
            }
            if self.depth != 1 {
                return bad("several servers (client-side placement) work at --depth 1 only");
            }
        }
        if self.threads == 0 {
            return bad("--threads must be at least 1");
        }
        if self.conns < self.threads {
            return bad("--conns must be at least --threads");
        }
        if self.depth == 0 {
            return bad("--depth must be at least 1");
        }
        if self.keys == 0 {
            return bad("--keys must be at least 1");
        }
        if !(0.0..=1.0).contains(&self.set_ratio) {
            return bad("--set-ratio must be between 0 and 1");
        }
        if self.requests.is_none() && self.duration.is_zero() {
            return bad("--duration must be positive");
        }
        if let Some(n) = self.requests {
            if n < self.conns as u64 {
                return bad("--requests must be at least --conns (every connection sends one)");
            }
        }
        if let Some(r) = self.rate {
            if !(r.is_finite() && r > 0.0) {
                return bad("--rate must be a positive number of requests per second");
            }
        }
        let key_len = self.key_prefix.len() + self.key_width.max(self.keys.to_string().len());
        if key_len > 250 || self.key_prefix.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return bad("keys must be at most 250 bytes with no spaces or control characters");
        }
        Ok(())
    }

    /// The key with index `i`.
    pub fn key(&self, i: u64, buf: &mut Vec<u8>) {
        buf.clear();
        text::push_key(buf, self.key_prefix.as_bytes(), i, self.key_width);
    }

    /// Which server key `key` goes to.
    pub fn server_of(&self, key: &[u8]) -> usize {
        match &self.placement {
            Some(r) if self.servers.len() > 1 => r.locate(key).unwrap_or(0),
            _ => 0,
        }
    }
}

/// Latency percentiles of the measured window, in microseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Latency {
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Slowest request.
    pub max_us: f64,
    /// Mean.
    pub mean_us: f64,
}

impl Latency {
    /// Percentiles of a histogram recorded in nanoseconds.
    pub fn from_histogram(h: &Histogram<u64>) -> Self {
        let us = |ns: u64| ns as f64 / 1000.0;
        Latency {
            p50_us: us(h.value_at_quantile(0.50)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
            mean_us: h.mean() / 1000.0,
        }
    }
}

/// Counts of requests and replies.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Counts {
    /// Gets answered.
    pub gets: u64,
    /// Sets answered.
    pub sets: u64,
    /// Gets that returned a value.
    pub hits: u64,
    /// Gets that returned nothing.
    pub misses: u64,
    /// `ERROR`, `CLIENT_ERROR` and `SERVER_ERROR` replies.
    pub errors: u64,
}

impl Counts {
    fn record(&mut self, op: Op, reply: Reply) {
        match op {
            Op::Get => self.gets += 1,
            Op::Set => self.sets += 1,
        }
        match reply {
            Reply::Hit => self.hits += 1,
            Reply::Miss => self.misses += 1,
            Reply::Error => self.errors += 1,
            Reply::Stored | Reply::NotStored => {}
        }
    }

    fn add(&mut self, o: &Counts) {
        self.gets += o.gets;
        self.sets += o.sets;
        self.hits += o.hits;
        self.misses += o.misses;
        self.errors += o.errors;
    }

    /// Gets and sets answered.
    pub fn ops(&self) -> u64 {
        self.gets + self.sets
    }
}

/// The result of one load run.
#[derive(Clone, Debug, Serialize)]
pub struct LoadReport {
    /// What was run.
    pub config: LoadConfig,
    /// Requests answered in the measured window.
    pub measured: Counts,
    /// Requests answered per second in the measured window.
    pub ops_per_sec: f64,
    /// Length of the measured window in seconds (shorter than asked if a server died).
    pub window_secs: f64,
    /// Latency in the measured window.
    pub latency: Latency,
    /// Every request answered, prefill and warm-up included (what the server counted).
    pub total: Counts,
    /// Wall time of the whole run, prefill included, in seconds.
    pub elapsed_secs: f64,
    /// Why connections stopped early (a server closed them or died), with how many.
    /// Empty when the run completed; the numbers above are what was measured before.
    pub failures: Vec<String>,
}

impl LoadReport {
    /// Every request answered: prefill, warm-up and measured window.
    pub fn total_ops(&self) -> u64 {
        self.total.ops()
    }

    /// Whether the run stopped early.
    pub fn failed(&self) -> bool {
        !self.failures.is_empty()
    }

    /// A few lines for a person.
    pub fn summary(&self) -> String {
        let c = &self.config;
        let m = &self.measured;
        let l = &self.latency;
        let servers: Vec<String> = c.servers.iter().map(|s| s.to_string()).collect();
        let mut out = format!(
            "{server} ({proto}{placement}): {conns} conns x depth {depth} on {threads} threads, \
             {keys} keys ({dist}), {vs}-byte values, {set:.0}% sets, {window}\n\
             ops/s {ops:.0}  ({gets} gets, {sets} sets, hit rate {hit:.1}%, {err} errors)\n\
             latency us: p50 {p50:.1}  p99 {p99:.1}  p99.9 {p999:.1}  max {max:.1}  mean {mean:.1}",
            server = servers.join(","),
            proto = c.protocol.name(),
            placement = c
                .placement_name
                .as_deref()
                .map(|p| format!(", {p}"))
                .unwrap_or_default(),
            conns = c.conns,
            depth = c.depth,
            threads = c.threads,
            keys = c.keys,
            dist = c.key_dist,
            vs = c.value_size,
            set = c.set_ratio * 100.0,
            window = match c.requests {
                Some(n) => format!("{n} requests in {:.2}s", self.window_secs),
                None => format!(
                    "{:.1}s (+{:.1}s warm-up)",
                    self.window_secs,
                    c.warmup.as_secs_f64()
                ),
            },
            ops = self.ops_per_sec,
            gets = m.gets,
            sets = m.sets,
            hit = if m.gets > 0 {
                m.hits as f64 * 100.0 / m.gets as f64
            } else {
                0.0
            },
            err = m.errors,
            p50 = l.p50_us,
            p99 = l.p99_us,
            p999 = l.p999_us,
            max = l.max_us,
            mean = l.mean_us,
        );
        for f in &self.failures {
            out.push_str("\nstopped early: ");
            out.push_str(f);
        }
        out
    }
}

/// One connection's results.
struct ConnResult {
    hist: Histogram<u64>,
    measured: Counts,
    total: Counts,
    /// When the last measured reply arrived.
    last: Option<Instant>,
    /// Why and when the connection stopped early.
    failure: Option<(String, Instant)>,
}

fn new_histogram() -> Histogram<u64> {
    // 1 ns to 100 s at 3 significant digits; cannot fail with these bounds.
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("constant bounds are valid")
}

/// Sets every key once, pipelined, over the configured protocol and placement: one
/// thread per server. Returns the sets answered and the error replies.
pub fn prefill(cfg: &LoadConfig) -> Result<Counts, BenchError> {
    let results: Vec<Result<Counts, BenchError>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..cfg.servers.len())
            .map(|i| s.spawn(move || prefill_server(cfg, i)))
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(BenchError::Config("prefill thread panicked".into())))
            })
            .collect()
    });
    let mut c = Counts::default();
    for r in results {
        c.add(&r?);
    }
    Ok(c)
}

fn prefill_server(cfg: &LoadConfig, server: usize) -> Result<Counts, BenchError> {
    use std::io::{Read, Write};
    let addr = cfg.servers[server];
    let mut s = std::net::TcpStream::connect(addr)
        .map_err(|e| BenchError::io(format!("connect to {addr}"), e))?;
    let _ = s.set_nodelay(true);
    let mut rng = Rng::new(cfg.seed ^ 0xf111);
    let value = vec![b'v'; cfg.value_size.max];
    let mut key = Vec::new();
    let mut wbuf = Vec::new();
    let mut rbuf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut counts = Counts::default();
    let mut i = 0;
    while i < cfg.keys {
        let mut batch = 0;
        while i < cfg.keys && batch < 64 {
            cfg.key(i, &mut key);
            i += 1;
            if cfg.server_of(&key) != server {
                continue;
            }
            let len = cfg.value_size.next(&mut rng);
            cfg.protocol.encode(&mut wbuf, Op::Set, &key, &value[..len]);
            batch += 1;
        }
        s.write_all(&wbuf)
            .map_err(|e| BenchError::io(format!("write to {addr}"), e))?;
        wbuf.clear();
        while batch > 0 {
            match cfg.protocol.parse(&rbuf, Op::Set)? {
                Some((reply, used)) => {
                    rbuf.drain(..used);
                    counts.record(Op::Set, reply);
                    batch -= 1;
                }
                None => {
                    let n = s
                        .read(&mut chunk)
                        .map_err(|e| BenchError::io(format!("read from {addr}"), e))?;
                    if n == 0 {
                        return Err(BenchError::Closed(addr.to_string()));
                    }
                    rbuf.extend_from_slice(&chunk[..n]);
                }
            }
        }
    }
    Ok(counts)
}

/// Raises the soft open-file limit to the hard limit (many connections need many
/// descriptors); returns the new soft limit.
pub fn raise_fd_limit() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write to and read from a valid rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return 0;
        }
        if r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
    r.rlim_cur
}

/// Runs a load and returns its report. Blocks the calling thread.
///
/// An unreachable server is an error; a server that closes connections or dies mid-run
/// is not: the report says so in [`LoadReport::failures`] and holds what was measured.
pub fn run(cfg: &LoadConfig) -> Result<LoadReport, BenchError> {
    cfg.validate()?;
    let fds = raise_fd_limit();
    let need = (cfg.conns * cfg.servers.len()) as u64 + 64;
    if fds > 0 && fds < need {
        return Err(BenchError::Config(format!(
            "{need} file descriptors needed but the limit is {fds} (ulimit -n)"
        )));
    }
    let started = Instant::now();
    let mut total = Counts::default();
    if cfg.prefill {
        total.add(&prefill(cfg)?);
    }
    let done = Arc::new(AtomicU64::new(0));
    let finished = AtomicBool::new(false);
    // Connections are opened before the clock starts.
    let t0 = Instant::now() + Duration::from_millis(100 + cfg.conns as u64 / 10);
    let measure_from = if cfg.requests.is_some() {
        t0
    } else {
        t0 + cfg.warmup
    };
    let results = std::thread::scope(|s| {
        let bar = cfg
            .progress
            .then(|| s.spawn(|| progress_bar(cfg, &done, &finished, t0)));
        let handles: Vec<_> = (0..cfg.threads)
            .map(|t| {
                let n = cfg.conns / cfg.threads + usize::from(t < cfg.conns % cfg.threads);
                let first = (0..t)
                    .map(|u| cfg.conns / cfg.threads + usize::from(u < cfg.conns % cfg.threads))
                    .sum::<usize>();
                let done = &done;
                s.spawn(move || thread_main(cfg, t, first, n, t0, done))
            })
            .collect();
        let out = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(BenchError::Config("client thread panicked".into())))
            })
            .collect::<Vec<_>>();
        finished.store(true, Ordering::Relaxed);
        if let Some(b) = bar {
            let _ = b.join();
        }
        out
    });
    let mut hist = new_histogram();
    let mut measured = Counts::default();
    let mut last: Option<Instant> = None;
    let mut first_failure: Option<Instant> = None;
    let mut failures: Vec<(String, usize)> = Vec::new();
    for r in results {
        for c in r? {
            // Both histograms have the same bounds; a value beyond them was saturated.
            let _ = hist.add(&c.hist);
            measured.add(&c.measured);
            total.add(&c.total);
            last = last.max(c.last);
            if let Some((why, at)) = c.failure {
                first_failure = Some(first_failure.map_or(at, |f: Instant| f.min(at)));
                match failures.iter_mut().find(|(w, _)| *w == why) {
                    Some((_, n)) => *n += 1,
                    None => failures.push((why, 1)),
                }
            }
        }
    }
    let window_secs = match (cfg.requests, first_failure) {
        (_, Some(f)) => f.saturating_duration_since(measure_from).as_secs_f64(),
        (Some(_), None) => last.map_or(0.0, |l| {
            l.saturating_duration_since(measure_from).as_secs_f64()
        }),
        (None, None) => cfg.duration.as_secs_f64(),
    };
    Ok(LoadReport {
        config: cfg.clone(),
        ops_per_sec: if window_secs > 0.0 {
            measured.ops() as f64 / window_secs
        } else {
            0.0
        },
        window_secs,
        measured,
        latency: Latency::from_histogram(&hist),
        total,
        elapsed_secs: started.elapsed().as_secs_f64(),
        failures: failures
            .into_iter()
            .map(|(w, n)| format!("{n} connection(s): {w}"))
            .collect(),
    })
}

/// Draws a progress bar on stderr (if it is a terminal) until `finished`.
fn progress_bar(cfg: &LoadConfig, done: &AtomicU64, finished: &AtomicBool, t0: Instant) {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return;
    }
    let (len, style) = match cfg.requests {
        Some(n) => (n, "{bar:40} {pos}/{len} requests {msg}"),
        None => (
            (cfg.warmup + cfg.duration).as_millis() as u64,
            "{bar:40} {msg}",
        ),
    };
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(st) = ProgressStyle::with_template(style) {
        bar.set_style(st);
    }
    while !finished.load(Ordering::Relaxed) {
        let n = done.load(Ordering::Relaxed);
        let secs = t0.elapsed().as_secs_f64();
        match cfg.requests {
            Some(_) => bar.set_position(n),
            None => bar.set_position((secs * 1000.0) as u64),
        }
        bar.set_message(format!("{n} replies, {:.0}/s", n as f64 / secs.max(1e-3)));
        std::thread::sleep(Duration::from_millis(100));
    }
    bar.finish_and_clear();
}

fn thread_main(
    cfg: &LoadConfig,
    thread: usize,
    first: usize,
    conns: usize,
    t0: Instant,
    done: &Arc<AtomicU64>,
) -> Result<Vec<ConnResult>, BenchError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| BenchError::io("client runtime", e))?;
    rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        let cfg = Arc::new(cfg.clone());
        for c in 0..conns {
            let cfg = cfg.clone();
            let seed = cfg.seed ^ ((thread as u64) << 32 | c as u64).wrapping_mul(0x9e37_79b9);
            let quota = cfg.requests.map(|n| {
                let i = (first + c) as u64;
                let k = cfg.conns as u64;
                n / k + u64::from(i < n % k)
            });
            set.spawn(conn_main(cfg, seed, quota, t0, done.clone()));
        }
        let mut out = Vec::with_capacity(conns);
        while let Some(r) = set.join_next().await {
            out.push(r.map_err(|e| BenchError::Config(format!("connection task: {e}")))??);
        }
        Ok(out)
    })
}

/// Where one connection's run stands: what it sends next and what it has counted.
struct ConnState {
    rng: Rng,
    keys: KeyChooser,
    value: Vec<u8>,
    key: Vec<u8>,
    hist: Histogram<u64>,
    measured: Counts,
    total: Counts,
    last: Option<Instant>,
    /// Requests still to send (count mode).
    quota: Option<u64>,
    /// Pacing: when the next batch is due, and the gap between batches.
    next_due: Option<Instant>,
    gap: Duration,
}

impl ConnState {
    fn new(cfg: &LoadConfig, seed: u64, quota: Option<u64>) -> Self {
        let per_conn_rate = cfg.rate.map(|r| r / cfg.conns as f64);
        let gap = per_conn_rate.map_or(Duration::ZERO, |r| {
            Duration::from_secs_f64((cfg.depth as f64 / r).min(3600.0))
        });
        let mut rng = Rng::new(seed);
        // Each connection starts at a random phase of its gap: started together, every
        // connection would send in the same instant and the bursts, not the server, would
        // set the latency.
        let phase = gap.mul_f64(rng.unit());
        ConnState {
            rng,
            keys: KeyChooser::new(cfg.key_dist, cfg.keys),
            value: vec![b'x'; cfg.value_size.max],
            key: Vec::with_capacity(64),
            hist: new_histogram(),
            measured: Counts::default(),
            total: Counts::default(),
            last: None,
            quota,
            next_due: per_conn_rate.map(|_| Instant::now() + phase),
            gap,
        }
    }

    /// Whether another request may be sent at `now`.
    fn more(&self, now: Instant, end: Instant) -> bool {
        match self.quota {
            Some(q) => q > 0,
            None => now < end,
        }
    }

    /// Picks the next request: its kind, with its key in `self.key`.
    fn next_op(&mut self, cfg: &LoadConfig) -> Op {
        let k = self.keys.next(&mut self.rng);
        cfg.key(k, &mut self.key);
        if let Some(q) = self.quota.as_mut() {
            *q -= 1;
        }
        if cfg.set_ratio > 0.0 && (cfg.set_ratio >= 1.0 || self.rng.unit() < cfg.set_ratio) {
            Op::Set
        } else {
            Op::Get
        }
    }

    fn encode(&mut self, cfg: &LoadConfig, op: Op, buf: &mut Vec<u8>) {
        let len = cfg.value_size.next(&mut self.rng);
        cfg.protocol.encode(buf, op, &self.key, &self.value[..len]);
    }

    /// Waits until the next batch is due (rate limit); returns the time its latency is
    /// measured from.
    ///
    /// Behind schedule (the server was slow), that is the time the batch was due, so the
    /// wait the server caused is counted (no coordinated omission). On schedule, it is
    /// when the sleep ended: tokio's timer fires up to a millisecond late, and that slop is
    /// the client's, not the server's.
    async fn pace(&mut self) -> Instant {
        match self.next_due {
            Some(due) => {
                self.next_due = Some(due + self.gap);
                if Instant::now() >= due {
                    return due;
                }
                tokio::time::sleep_until(due.into()).await;
                Instant::now()
            }
            None => Instant::now(),
        }
    }

    fn record(
        &mut self,
        op: Op,
        reply: Reply,
        sent: Instant,
        now: Instant,
        window: (Instant, Instant),
    ) {
        self.total.record(op, reply);
        if sent >= window.0 && now <= window.1 {
            self.measured.record(op, reply);
            self.hist
                .saturating_record(now.duration_since(sent).as_nanos() as u64);
            self.last = Some(now);
        }
    }

    fn finish(self, failure: Option<(String, Instant)>) -> ConnResult {
        ConnResult {
            hist: self.hist,
            measured: self.measured,
            total: self.total,
            last: self.last,
            failure,
        }
    }
}

/// Connects to `addr` (waiting at most 10 s) with `TCP_NODELAY`.
pub(crate) async fn connect(addr: SocketAddr) -> Result<TcpStream, BenchError> {
    let stream = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(addr))
        .await
        .map_err(|_| {
            BenchError::io(
                format!("connect to {addr}"),
                std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out after 10 s"),
            )
        })?
        .map_err(|e| BenchError::io(format!("connect to {addr}"), e))?;
    stream
        .set_nodelay(true)
        .map_err(|e| BenchError::io("TCP_NODELAY", e))?;
    Ok(stream)
}

async fn conn_main(
    cfg: Arc<LoadConfig>,
    seed: u64,
    quota: Option<u64>,
    t0: Instant,
    done: Arc<AtomicU64>,
) -> Result<ConnResult, BenchError> {
    let mut streams = Vec::with_capacity(cfg.servers.len());
    for &addr in &cfg.servers {
        streams.push(connect(addr).await?);
    }
    let window = if cfg.requests.is_some() {
        (t0, t0 + Duration::from_secs(1 << 30))
    } else {
        (t0 + cfg.warmup, t0 + cfg.warmup + cfg.duration)
    };
    tokio::time::sleep_until(t0.into()).await;
    let mut st = ConnState::new(&cfg, seed, quota);
    let r = if streams.len() == 1 {
        pipelined(&cfg, &mut streams[0], &mut st, window, &done).await
    } else {
        placed(&cfg, &mut streams, &mut st, window, &done).await
    };
    Ok(st.finish(r.err().map(|e| (e.to_string(), Instant::now()))))
}

/// Reads into `rbuf` from `stream`; an end of stream is an error.
pub(crate) async fn fill_buf(
    stream: &mut TcpStream,
    rbuf: &mut Vec<u8>,
    addr: SocketAddr,
) -> Result<(), BenchError> {
    if rbuf.capacity() - rbuf.len() < 4096 {
        rbuf.reserve(64 * 1024);
    }
    let n = stream
        .read_buf(rbuf)
        .await
        .map_err(|e| BenchError::io(format!("read from {addr}"), e))?;
    if n == 0 {
        return Err(BenchError::Closed(addr.to_string()));
    }
    Ok(())
}

/// One server, `depth` requests in flight.
async fn pipelined(
    cfg: &LoadConfig,
    stream: &mut TcpStream,
    st: &mut ConnState,
    window: (Instant, Instant),
    done: &AtomicU64,
) -> Result<(), BenchError> {
    let addr = cfg.servers[0];
    let mut wbuf: Vec<u8> = Vec::with_capacity(cfg.depth * (cfg.value_size.max + 64));
    let mut rbuf: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut inflight: VecDeque<(Op, Instant)> = VecDeque::with_capacity(cfg.depth);
    let mut now = Instant::now();
    loop {
        let refill = match cfg.refill {
            Refill::Batch => inflight.is_empty(),
            Refill::Window => inflight.len() < cfg.depth,
        };
        if refill && st.more(now, window.1) {
            let sent = st.pace().await;
            while inflight.len() < cfg.depth && st.more(now, window.1) {
                let op = st.next_op(cfg);
                st.encode(cfg, op, &mut wbuf);
                inflight.push_back((op, sent));
            }
            stream
                .write_all(&wbuf)
                .await
                .map_err(|e| BenchError::io(format!("write to {addr}"), e))?;
            wbuf.clear();
        }
        if inflight.is_empty() {
            return Ok(());
        }
        fill_buf(stream, &mut rbuf, addr).await?;
        now = Instant::now();
        let mut pos = 0;
        let mut n = 0;
        while let Some(&(op, sent)) = inflight.front() {
            match cfg.protocol.parse(&rbuf[pos..], op)? {
                Some((reply, used)) => {
                    pos += used;
                    n += 1;
                    inflight.pop_front();
                    st.record(op, reply, sent, now, window);
                }
                None => break,
            }
        }
        done.fetch_add(n, Ordering::Relaxed);
        if pos == rbuf.len() {
            rbuf.clear();
        } else if pos > 0 {
            rbuf.drain(..pos);
        }
    }
}

/// Several servers, one request at a time, each sent to the server its key is placed on.
async fn placed(
    cfg: &LoadConfig,
    streams: &mut [TcpStream],
    st: &mut ConnState,
    window: (Instant, Instant),
    done: &AtomicU64,
) -> Result<(), BenchError> {
    let mut wbuf: Vec<u8> = Vec::with_capacity(cfg.value_size.max + 64);
    let mut rbuf: Vec<u8> = Vec::with_capacity(64 * 1024);
    while st.more(Instant::now(), window.1) {
        let sent = st.pace().await;
        let op = st.next_op(cfg);
        let i = cfg.server_of(&st.key);
        let addr = cfg.servers[i];
        st.encode(cfg, op, &mut wbuf);
        streams[i]
            .write_all(&wbuf)
            .await
            .map_err(|e| BenchError::io(format!("write to {addr}"), e))?;
        wbuf.clear();
        loop {
            if let Some((reply, used)) = cfg.protocol.parse(&rbuf, op)? {
                rbuf.drain(..used);
                st.record(op, reply, sent, Instant::now(), window);
                done.fetch_add(1, Ordering::Relaxed);
                break;
            }
            fill_buf(&mut streams[i], &mut rbuf, addr).await?;
        }
    }
    Ok(())
}
