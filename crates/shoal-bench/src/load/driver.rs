//! The closed-loop driver: threads of single-threaded runtimes, each connection keeping
//! `depth` requests in flight, and the run's phases (prefill, warm-up, measured window).

use super::report::{new_histogram, ConnResult};
use super::{prefill, Counts, Latency, LoadConfig, LoadReport, Refill};
use crate::rng::Rng;
use crate::text::{Op, Reply};
use crate::workload::KeyChooser;
use crate::BenchError;
use hdrhistogram::Histogram;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

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
            // Only the progress display is lost, not the run; still say why.
            if let Err(panic) = b.join() {
                let msg = panic
                    .downcast_ref::<&str>()
                    .copied()
                    .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                    .unwrap_or("(no message)");
                eprintln!("shoal-bench: the progress display panicked: {msg}");
            }
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

/// Several servers, each request sent to the server its key is placed on: `depth` requests
/// at a time, each server's share written at once, then every reply read (what a client
/// that places keys itself does with a batch, without a proxy in between).
async fn placed(
    cfg: &LoadConfig,
    streams: &mut [TcpStream],
    st: &mut ConnState,
    window: (Instant, Instant),
    done: &AtomicU64,
) -> Result<(), BenchError> {
    let n = streams.len();
    let mut wbufs: Vec<Vec<u8>> = (0..n)
        .map(|_| Vec::with_capacity(cfg.depth * (cfg.value_size.max + 64)))
        .collect();
    let mut rbufs: Vec<Vec<u8>> = (0..n).map(|_| Vec::with_capacity(64 * 1024)).collect();
    let mut inflight: Vec<VecDeque<(Op, Instant)>> =
        (0..n).map(|_| VecDeque::with_capacity(cfg.depth)).collect();
    while st.more(Instant::now(), window.1) {
        let sent = st.pace().await;
        let mut batch = 0;
        while batch < cfg.depth && st.more(Instant::now(), window.1) {
            let op = st.next_op(cfg);
            let i = cfg.server_of(&st.key);
            st.encode(cfg, op, &mut wbufs[i]);
            inflight[i].push_back((op, sent));
            batch += 1;
        }
        for (i, wbuf) in wbufs.iter_mut().enumerate() {
            if wbuf.is_empty() {
                continue;
            }
            let addr = cfg.servers[i];
            streams[i]
                .write_all(wbuf)
                .await
                .map_err(|e| BenchError::io(format!("write to {addr}"), e))?;
            wbuf.clear();
        }
        for i in 0..n {
            let addr = cfg.servers[i];
            let rbuf = &mut rbufs[i];
            while let Some(&(op, sent)) = inflight[i].front() {
                match cfg.protocol.parse(rbuf, op)? {
                    Some((reply, used)) => {
                        rbuf.drain(..used);
                        inflight[i].pop_front();
                        st.record(op, reply, sent, Instant::now(), window);
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    None => fill_buf(&mut streams[i], rbuf, addr).await?,
                }
            }
        }
    }
    Ok(())
}
