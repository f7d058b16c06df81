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

use crate::rng::Rng;
use crate::text::{self, Op, Reply};
use crate::BenchError;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What to send, to where, for how long.
#[derive(Clone, Debug, Serialize)]
pub struct LoadConfig {
    /// The server's address.
    pub server: SocketAddr,
    /// Client threads (each a single-threaded event loop).
    pub threads: usize,
    /// Connections, in total, spread over the threads.
    pub conns: usize,
    /// Requests kept in flight per connection.
    pub depth: usize,
    /// Number of distinct keys, chosen uniformly.
    pub keys: u64,
    /// Key prefix; keys are the prefix and a zero-padded index.
    pub key_prefix: String,
    /// Digits the index is padded to (`key:` and 8 digits make 12-byte keys).
    pub key_width: usize,
    /// Value size in bytes for sets.
    pub value_size: usize,
    /// Fraction of requests that are sets (the rest are gets), 0.0 to 1.0.
    pub set_ratio: f64,
    /// Length of the measured window.
    #[serde(serialize_with = "secs")]
    pub duration: Duration,
    /// Load applied before the measured window, not recorded.
    #[serde(serialize_with = "secs")]
    pub warmup: Duration,
    /// Set every key once before the warm-up, so gets hit.
    pub prefill: bool,
    /// Seed for key and operation choice.
    pub seed: u64,
    /// How the pipeline is refilled.
    pub refill: Refill,
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

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

impl LoadConfig {
    /// A configuration with the defaults of `shoal-bench load` for `server`.
    pub fn new(server: SocketAddr) -> Self {
        LoadConfig {
            server,
            threads: 2,
            conns: 50,
            depth: 1,
            keys: 10_000,
            key_prefix: "key:".into(),
            key_width: 8,
            value_size: 100,
            set_ratio: 0.1,
            duration: Duration::from_secs(5),
            warmup: Duration::from_secs(1),
            prefill: true,
            seed: 0x5eed,
            refill: Refill::Batch,
        }
    }

    /// Checks the combination of options.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |m: &str| Err(BenchError::Config(m.to_string()));
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
        if self.duration.is_zero() {
            return bad("--duration must be positive");
        }
        let key_len = self.key_prefix.len() + self.key_width.max(self.keys.to_string().len());
        if key_len > 250 || self.key_prefix.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return bad("keys must be at most 250 bytes with no spaces or control characters");
        }
        Ok(())
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
    /// Latency in the measured window.
    pub latency: Latency,
    /// Every request answered, prefill and warm-up included (what the server counted).
    pub total: Counts,
    /// Wall time of the whole run, prefill included, in seconds.
    pub elapsed_secs: f64,
}

impl LoadReport {
    /// Every request answered: prefill, warm-up and measured window.
    pub fn total_ops(&self) -> u64 {
        self.total.ops()
    }

    /// A few lines for a person.
    pub fn summary(&self) -> String {
        let c = &self.config;
        let m = &self.measured;
        let l = &self.latency;
        format!(
            "{server}: {conns} conns x depth {depth} on {threads} threads, {keys} keys, \
             {vs}-byte values, {set:.0}% sets, {dur:.1}s (+{wu:.1}s warm-up)\n\
             ops/s {ops:.0}  ({gets} gets, {sets} sets, hit rate {hit:.1}%, {err} errors)\n\
             latency us: p50 {p50:.1}  p99 {p99:.1}  p99.9 {p999:.1}  max {max:.1}  mean {mean:.1}",
            server = c.server,
            conns = c.conns,
            depth = c.depth,
            threads = c.threads,
            keys = c.keys,
            vs = c.value_size,
            set = c.set_ratio * 100.0,
            dur = c.duration.as_secs_f64(),
            wu = c.warmup.as_secs_f64(),
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
        )
    }
}

/// One connection's results.
struct ConnResult {
    hist: Histogram<u64>,
    measured: Counts,
    total: Counts,
}

fn new_histogram() -> Histogram<u64> {
    // 1 ns to 100 s at 3 significant digits; cannot fail with these bounds.
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("constant bounds are valid")
}

/// Runs a load and returns its report. Blocks the calling thread.
pub fn run(cfg: &LoadConfig) -> Result<LoadReport, BenchError> {
    cfg.validate()?;
    let started = Instant::now();
    let mut total = Counts::default();
    if cfg.prefill {
        let f = crate::fill::fill(&crate::fill::FillConfig {
            server: cfg.server,
            keys: cfg.keys,
            key_prefix: cfg.key_prefix.clone(),
            key_width: cfg.key_width,
            value_size: cfg.value_size,
            conns: cfg.threads.max(2),
            depth: 64,
        })?;
        total.sets += f.sets;
        total.errors += f.errors;
    }
    // Connections are opened before the clock starts.
    let t0 = Instant::now() + Duration::from_millis(100);
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.threads)
            .map(|t| {
                let n = cfg.conns / cfg.threads + usize::from(t < cfg.conns % cfg.threads);
                s.spawn(move || thread_main(cfg, t, n, t0))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(BenchError::Config("client thread panicked".into())))
            })
            .collect::<Vec<_>>()
    });
    let mut hist = new_histogram();
    let mut measured = Counts::default();
    for r in results {
        for c in r? {
            // Both histograms have the same bounds; a value beyond them was saturated.
            let _ = hist.add(&c.hist);
            measured.add(&c.measured);
            total.add(&c.total);
        }
    }
    Ok(LoadReport {
        config: cfg.clone(),
        ops_per_sec: measured.ops() as f64 / cfg.duration.as_secs_f64(),
        measured,
        latency: Latency::from_histogram(&hist),
        total,
        elapsed_secs: started.elapsed().as_secs_f64(),
    })
}

fn thread_main(
    cfg: &LoadConfig,
    thread: usize,
    conns: usize,
    t0: Instant,
) -> Result<Vec<ConnResult>, BenchError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| BenchError::io("client runtime", e))?;
    rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for c in 0..conns {
            let cfg = cfg.clone();
            let seed = cfg.seed ^ ((thread as u64) << 32 | c as u64).wrapping_mul(0x9e37_79b9);
            set.spawn(async move { conn_main(&cfg, seed, t0).await });
        }
        let mut out = Vec::with_capacity(conns);
        while let Some(r) = set.join_next().await {
            out.push(r.map_err(|e| BenchError::Config(format!("connection task: {e}")))??);
        }
        Ok(out)
    })
}

async fn conn_main(cfg: &LoadConfig, seed: u64, t0: Instant) -> Result<ConnResult, BenchError> {
    let addr = cfg.server;
    let mut stream = TcpStream::connect(addr)
        .await
        .map_err(|e| BenchError::io(format!("connect to {addr}"), e))?;
    stream
        .set_nodelay(true)
        .map_err(|e| BenchError::io("TCP_NODELAY", e))?;
    let measure_from = t0 + cfg.warmup;
    let end = measure_from + cfg.duration;
    tokio::time::sleep_until(t0.into()).await;

    let mut rng = Rng::new(seed);
    let prefix = cfg.key_prefix.as_bytes();
    let value = vec![b'x'; cfg.value_size];
    let mut wbuf: Vec<u8> = Vec::with_capacity(cfg.depth * (cfg.value_size + 64));
    let mut rbuf: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut inflight: VecDeque<(Op, Instant)> = VecDeque::with_capacity(cfg.depth);
    let mut hist = new_histogram();
    let mut measured = Counts::default();
    let mut total = Counts::default();
    let mut now = Instant::now();
    loop {
        let refill = match cfg.refill {
            Refill::Batch => inflight.is_empty(),
            Refill::Window => inflight.len() < cfg.depth,
        };
        if now < end && refill {
            while inflight.len() < cfg.depth {
                let key = rng.below(cfg.keys);
                let op = if cfg.set_ratio > 0.0 && rng.unit() < cfg.set_ratio {
                    text::encode_set(&mut wbuf, prefix, key, cfg.key_width, &value);
                    Op::Set
                } else {
                    text::encode_get(&mut wbuf, prefix, key, cfg.key_width);
                    Op::Get
                };
                inflight.push_back((op, now));
            }
            stream
                .write_all(&wbuf)
                .await
                .map_err(|e| BenchError::io(format!("write to {addr}"), e))?;
            wbuf.clear();
        }
        if inflight.is_empty() {
            break;
        }
        if rbuf.capacity() - rbuf.len() < 4096 {
            rbuf.reserve(64 * 1024);
        }
        let n = stream
            .read_buf(&mut rbuf)
            .await
            .map_err(|e| BenchError::io(format!("read from {addr}"), e))?;
        if n == 0 {
            return Err(BenchError::Closed(addr.to_string()));
        }
        now = Instant::now();
        let mut pos = 0;
        while let Some(&(op, sent)) = inflight.front() {
            match text::parse_reply(&rbuf[pos..], op)? {
                Some((reply, used)) => {
                    pos += used;
                    inflight.pop_front();
                    total.record(op, reply);
                    if sent >= measure_from && now <= end {
                        measured.record(op, reply);
                        hist.saturating_record(now.duration_since(sent).as_nanos() as u64);
                    }
                }
                None => break,
            }
        }
        if pos == rbuf.len() {
            rbuf.clear();
        } else if pos > 0 {
            rbuf.drain(..pos);
        }
    }
    Ok(ConnResult {
        hist,
        measured,
        total,
    })
}
