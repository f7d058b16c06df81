//! Prometheus metrics for the three daemons: the text exposition format, a lock-free
//! histogram, and a small HTTP/1.1 endpoint (`--metrics-listen`) serving `GET /metrics`.
//!
//! # Why hand-written
//!
//! `prometheus-client` and `metrics-exporter-prometheus` both record through shared
//! registries (atomics reached through an `Arc`'d family map, or a global recorder behind
//! a key lookup) and bring an HTTP stack (hyper) along. Shoal already keeps one set of
//! counters per worker thread, owned by that thread and summed when asked for (`stats`),
//! so what a scrape needs is only a way to print those sums. The format is a few lines of
//! text per family, and the endpoint answers one request per connection, so both fit in
//! this module, with no dependency beyond the tokio runtime the daemons already run and
//! no change to the request path: a histogram here is an array of relaxed atomics that
//! only its worker writes ([`Histogram::record`]: one binary search and two uncontended
//! adds), and scraping reads them ([`Histogram::snapshot`]) without any lock the worker
//! could wait on.
//!
//! # The endpoint
//!
//! [`MetricsServer`] answers `GET` (and `HEAD`) `/metrics` and closes the connection after
//! each reply (`Connection: close`; Prometheus opens one per scrape). Anything else gets
//! a 4xx and a closed connection, never a stall: bytes that are not an HTTP request
//! (400), a request line and headers longer than [`MAX_REQUEST_HEAD`] (431), a request
//! that has not arrived whole within [`REQUEST_TIMEOUT`] (408, the slowloris case), an
//! unknown path (404), another method (405). At most [`MAX_CONNECTIONS`] connections are
//! served at once; more are closed on accept.

mod log_histogram;

pub use log_histogram::{LogHistogram, LogSnapshot};

use std::fmt::Write as _;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The longest request line plus headers the endpoint reads (431 beyond).
pub const MAX_REQUEST_HEAD: usize = 8 * 1024;
/// How long a client has to send its whole request head (408 after).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections served at once; more are closed as soon as they are accepted.
pub const MAX_CONNECTIONS: usize = 32;
/// How long writing a reply may take before the connection is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// The content type of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Latency bucket bounds in nanoseconds: 1-2-5 steps from 1 µs to 10 s, which keeps a
/// bucket's error within a factor of 2.5 across seven decades in 22 series per label set.
pub const LATENCY_BOUNDS_NS: [u64; 22] = [
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
    200_000_000,
    500_000_000,
    1_000_000_000,
    2_000_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// Count bucket bounds (batch sizes and the like): powers of two up to 4096.
pub const COUNT_BOUNDS: [u64; 13] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096];

/// A histogram one thread records into and any thread snapshots: a counter per bucket
/// (the last one past the largest bound, `+Inf`) and the sum of observations.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [u64],
    counts: Box<[AtomicU64]>,
    sum: AtomicU64,
}

impl Histogram {
    /// An empty histogram with these (ascending) upper bounds.
    pub fn new(bounds: &'static [u64]) -> Histogram {
        Histogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
        }
    }

    /// A latency histogram ([`LATENCY_BOUNDS_NS`]), recorded in nanoseconds.
    pub fn latency() -> Histogram {
        Histogram::new(&LATENCY_BOUNDS_NS)
    }

    /// Records one observation. Relaxed adds: the recording thread is the only writer, so
    /// they never contend; a scrape may see the bucket and the sum of one observation in
    /// different snapshots, which the next scrape corrects.
    #[inline]
    pub fn record(&self, value: u64) {
        let i = self.bounds.partition_point(|&b| b < value);
        // `i <= bounds.len()`, and there are `bounds.len() + 1` counters.
        if let Some(c) = self.counts.get(i) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        self.sum.fetch_add(value, Ordering::Relaxed);
    }

    /// Records `n` observations of the same value at once.
    #[inline]
    pub fn record_n(&self, value: u64, n: u64) {
        let i = self.bounds.partition_point(|&b| b < value);
        if let Some(c) = self.counts.get(i) {
            c.fetch_add(n, Ordering::Relaxed);
        }
        self.sum
            .fetch_add(value.saturating_mul(n), Ordering::Relaxed);
    }

    /// Records a duration in nanoseconds (saturating at `u64::MAX`).
    #[inline]
    pub fn record_duration(&self, d: Duration) {
        self.record(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// The current counts.
    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            bounds: self.bounds,
            counts: self
                .counts
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect(),
            sum: self.sum.load(Ordering::Relaxed),
        }
    }
}

impl Default for Histogram {
    /// A latency histogram.
    fn default() -> Histogram {
        Histogram::latency()
    }
}

/// A histogram's counts at one moment, which snapshots of other threads' histograms (with
/// the same bounds) can be added to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistogramSnapshot {
    bounds: &'static [u64],
    counts: Vec<u64>,
    sum: u64,
}

impl HistogramSnapshot {
    /// An empty snapshot with these bounds.
    pub fn empty(bounds: &'static [u64]) -> HistogramSnapshot {
        HistogramSnapshot {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0,
        }
    }

    /// Adds another snapshot's counts (ignored if its bounds differ).
    pub fn merge(&mut self, other: &HistogramSnapshot) {
        if self.bounds != other.bounds {
            return;
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.sum += other.sum;
    }

    /// Observations in all.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The sum of the observations, in the recorded unit.
    pub fn sum(&self) -> u64 {
        self.sum
    }
}

/// A clock cheap enough to read on every connection turn: the CPU's time-stamp counter
/// where the kernel itself keeps time with it (x86-64 with clock source `tsc`: constant,
/// synchronised across cores), else [`std::time::Instant`]. `rdtsc` costs ~15 ns on the
/// project's VM under load, against ~40 ns for `Instant::now()` through the vDSO.
pub mod clock {
    use std::sync::OnceLock;
    use std::time::{Duration, Instant};

    struct Calibration {
        /// Whether [`now`] reads the time-stamp counter.
        tsc: bool,
        /// Nanoseconds per tick, as a 32.32 fixed-point number.
        ns_per_tick: u64,
        /// The origin of fallback ticks (nanoseconds since it).
        epoch: Instant,
    }

    static CALIBRATION: OnceLock<Calibration> = OnceLock::new();

    fn calibration() -> &'static Calibration {
        CALIBRATION.get_or_init(|| {
            let epoch = Instant::now();
            let fallback = Calibration {
                tsc: false,
                ns_per_tick: 1 << 32,
                epoch,
            };
            if !tsc_trusted() {
                return fallback;
            }
            let (t0, i0) = (tsc(), Instant::now());
            std::thread::sleep(Duration::from_millis(20));
            let (t1, i1) = (tsc(), Instant::now());
            let ticks = t1.saturating_sub(t0);
            let ns = u64::try_from(i1.duration_since(i0).as_nanos()).unwrap_or(0);
            if ticks == 0 || ns == 0 {
                return fallback;
            }
            Calibration {
                tsc: true,
                ns_per_tick: u64::try_from((u128::from(ns) << 32) / u128::from(ticks))
                    .unwrap_or(1 << 32),
                epoch,
            }
        })
    }

    #[cfg(target_arch = "x86_64")]
    fn tsc_trusted() -> bool {
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .is_ok_and(|s| s.trim() == "tsc")
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn tsc_trusted() -> bool {
        false
    }

    #[cfg(target_arch = "x86_64")]
    #[inline]
    fn tsc() -> u64 {
        // SAFETY: `rdtsc` exists on every x86-64 CPU and only reads a counter.
        unsafe { core::arch::x86_64::_rdtsc() }
    }

    #[cfg(not(target_arch = "x86_64"))]
    #[inline]
    fn tsc() -> u64 {
        0
    }

    /// Calibrates the clock (20 ms, once per process); call at startup so the first
    /// [`now`] on a worker does not pay for it.
    pub fn calibrate() {
        calibration();
    }

    /// The current time in ticks (comparable only with other ticks of this process).
    #[inline]
    pub fn now() -> u64 {
        let c = calibration();
        if c.tsc {
            tsc()
        } else {
            u64::try_from(c.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
        }
    }

    /// Nanoseconds in `ticks` (a difference of two [`now`]s).
    #[inline]
    pub fn ticks_to_ns(ticks: u64) -> u64 {
        let ns = (u128::from(ticks) * u128::from(calibration().ns_per_tick)) >> 32;
        u64::try_from(ns).unwrap_or(u64::MAX)
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn ticks_measure_nanoseconds() {
            super::calibrate();
            let (t0, i0) = (super::now(), std::time::Instant::now());
            std::thread::sleep(std::time::Duration::from_millis(30));
            let ns = super::ticks_to_ns(super::now() - t0) as f64;
            let real = i0.elapsed().as_nanos() as f64;
            assert!((ns / real - 1.0).abs() < 0.05, "{ns} vs {real}");
        }
    }
}

/// What a metric family is, as `# TYPE` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (resets at restart).
    Counter,
    /// Goes up and down.
    Gauge,
    /// Buckets, sum and count.
    Histogram,
    /// Quantiles, sum and count.
    Summary,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
            Kind::Summary => "summary",
        }
    }
}

/// A summary's values for [`Page::summary`].
#[derive(Debug, Clone, Copy)]
pub struct Summary<'a> {
    /// `(quantile, value)` pairs; `None` where nothing was observed.
    pub quantiles: &'a [(f64, Option<u64>)],
    /// The sum of all observations, in the recorded unit.
    pub sum: u64,
    /// Observations in all.
    pub count: u64,
}

/// One family's samples, in the order added.
#[derive(Debug)]
struct Family {
    name: String,
    help: String,
    kind: Kind,
    /// Rendered sample lines.
    body: String,
}

/// A page of metrics being built for one scrape. Families print in the order they are
/// first named, each with its `# HELP` and `# TYPE` once and all its samples together
/// (as the format requires), whatever order samples are added in.
#[derive(Debug, Default)]
pub struct Page {
    families: Vec<Family>,
}

impl Page {
    /// An empty page.
    pub fn new() -> Page {
        Page::default()
    }

    fn family(&mut self, name: &str, help: &str, kind: Kind) -> &mut String {
        let i = match self.families.iter().position(|f| f.name == name) {
            Some(i) => i,
            None => {
                self.families.push(Family {
                    name: name.to_string(),
                    help: help.to_string(),
                    kind,
                    body: String::new(),
                });
                self.families.len() - 1
            }
        };
        &mut self.families[i].body
    }

    /// Names a family without adding a sample (so `# HELP`/`# TYPE` print even when it
    /// has no series yet).
    pub fn declare(&mut self, name: &str, help: &str, kind: Kind) {
        self.family(name, help, kind);
    }

    /// Whether a family of this name is on the page.
    pub fn has(&self, name: &str) -> bool {
        self.families.iter().any(|f| f.name == name)
    }

    /// Adds a counter or gauge sample.
    pub fn sample(&mut self, name: &str, help: &str, kind: Kind, labels: &[(&str, &str)], v: f64) {
        let body = self.family(name, help, kind);
        line(body, name, "", labels, None, v);
    }

    /// Adds a counter sample from an integer.
    pub fn counter(&mut self, name: &str, help: &str, labels: &[(&str, &str)], v: u64) {
        self.sample(name, help, Kind::Counter, labels, v as f64);
    }

    /// Adds a gauge sample from an integer.
    pub fn gauge(&mut self, name: &str, help: &str, labels: &[(&str, &str)], v: u64) {
        self.sample(name, help, Kind::Gauge, labels, v as f64);
    }

    /// Adds a histogram's series (`_bucket` for each bound and `+Inf`, `_sum`, `_count`),
    /// bounds and sum divided by `divisor` (1e9 to print nanoseconds as seconds; dividing
    /// rather than multiplying by 1e-9 keeps `le="0.000001"` exact).
    pub fn histogram(
        &mut self,
        name: &str,
        help: &str,
        labels: &[(&str, &str)],
        h: &HistogramSnapshot,
        divisor: f64,
    ) {
        let body = self.family(name, help, Kind::Histogram);
        let mut cumulative = 0u64;
        let mut le = String::new();
        for (i, &n) in h.counts.iter().enumerate() {
            cumulative += n;
            le.clear();
            match h.bounds.get(i) {
                Some(&b) => {
                    let _ = write!(le, "{}", fmt_value(b as f64 / divisor));
                }
                None => le.push_str("+Inf"),
            }
            line(body, name, "_bucket", labels, Some(&le), cumulative as f64);
        }
        line(body, name, "_sum", labels, None, h.sum as f64 / divisor);
        line(body, name, "_count", labels, None, cumulative as f64);
    }

    /// Adds a summary's series: one sample per quantile (`NaN` for a quantile with no
    /// observations, as Prometheus' own clients print it), then `_sum` and `_count`.
    /// Values and the sum are divided by `divisor`, as in [`Page::histogram`].
    pub fn summary(
        &mut self,
        name: &str,
        help: &str,
        labels: &[(&str, &str)],
        s: &Summary<'_>,
        divisor: f64,
    ) {
        let body = self.family(name, help, Kind::Summary);
        for (q, v) in s.quantiles {
            let q = fmt_value(*q);
            let mut labelled: Vec<(&str, &str)> = labels.to_vec();
            labelled.push(("quantile", &q));
            let v = v.map_or(f64::NAN, |v| v as f64 / divisor);
            line(body, name, "", &labelled, None, v);
        }
        line(body, name, "_sum", labels, None, s.sum as f64 / divisor);
        line(body, name, "_count", labels, None, s.count as f64);
    }

    /// The page in the text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(self.families.iter().map(|f| f.body.len() + 128).sum());
        for f in &self.families {
            out.push_str("# HELP ");
            out.push_str(&f.name);
            out.push(' ');
            escape_help(&mut out, &f.help);
            out.push_str("\n# TYPE ");
            out.push_str(&f.name);
            out.push(' ');
            out.push_str(f.kind.as_str());
            out.push('\n');
            out.push_str(&f.body);
        }
        out
    }

    /// The family names on the page.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.families.iter().map(|f| f.name.as_str())
    }
}

/// Prints one sample line.
fn line(
    out: &mut String,
    name: &str,
    suffix: &str,
    labels: &[(&str, &str)],
    le: Option<&str>,
    v: f64,
) {
    out.push_str(name);
    out.push_str(suffix);
    let all = labels.iter().copied().chain(le.map(|le| ("le", le)));
    let mut first = true;
    for (k, val) in all {
        out.push(if first { '{' } else { ',' });
        first = false;
        out.push_str(k);
        out.push_str("=\"");
        escape_label(out, val);
        out.push('"');
    }
    if !first {
        out.push('}');
    }
    out.push(' ');
    out.push_str(&fmt_value(v));
    out.push('\n');
}

/// A sample value as the format spells it: integers without a fraction, `+Inf`, `NaN`.
pub fn fmt_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn escape_label(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn escape_help(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// What renders a page for each scrape.
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// The metrics endpoint's listening socket, bound at startup so a bad address fails the
/// daemon's start rather than its first scrape.
#[derive(Debug)]
pub struct MetricsServer {
    listener: std::net::TcpListener,
}

impl MetricsServer {
    /// Binds `addr`.
    pub fn bind(addr: SocketAddr) -> io::Result<MetricsServer> {
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        Ok(MetricsServer { listener })
    }

    /// The bound address (the port, when asked for port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves scrapes until the future is dropped (with its runtime). Must be polled on a
    /// tokio runtime with I/O and time enabled.
    pub fn serve(self, render: Render) -> impl Future<Output = ()> + Send + 'static {
        let std_listener = self.listener;
        async move {
            let listener = match tokio::net::TcpListener::from_std(std_listener) {
                Ok(l) => l,
                Err(e) => {
                    tracing::error!("metrics listener: {e}");
                    return;
                }
            };
            let open = Arc::new(AtomicUsize::new(0));
            loop {
                let (stream, peer) = match listener.accept().await {
                    Ok(x) => x,
                    Err(e) => {
                        // Out of descriptors and the like: back off rather than spin.
                        tracing::warn!("metrics accept: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                if open.fetch_add(1, Ordering::Relaxed) >= MAX_CONNECTIONS {
                    open.fetch_sub(1, Ordering::Relaxed);
                    tracing::debug!(%peer, "metrics: too many connections, closed");
                    drop(stream);
                    continue;
                }
                let (open, render) = (open.clone(), render.clone());
                tokio::spawn(async move {
                    let _ = handle(stream, &render).await;
                    open.fetch_sub(1, Ordering::Relaxed);
                });
            }
        }
    }

    /// Serves scrapes on a thread of its own (with a one-thread runtime), for a daemon
    /// whose runtimes are all busy serving clients. The thread lives as long as the
    /// process.
    pub fn spawn_thread(self, render: Render) -> io::Result<()> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::Builder::new()
            .name("shoal-metrics".into())
            .spawn(move || rt.block_on(self.serve(render)))?;
        Ok(())
    }
}

/// What a request head asks for.
#[derive(Debug, PartialEq, Eq)]
enum Head {
    /// `GET /metrics` (`head`: a `HEAD`, answered without the body).
    Metrics { head: bool },
    /// An error status to answer with (0: the client went away, answer nothing).
    Status(u16),
}

/// Reads one request head and answers it; the caller closes the connection.
async fn handle(mut stream: tokio::net::TcpStream, render: &Render) -> io::Result<()> {
    let mut buf = vec![0u8; MAX_REQUEST_HEAD];
    let mut len = 0;
    let read = async {
        loop {
            if let Some(end) = find_head_end(&buf[..len]) {
                return parse_head(&buf[..end]);
            }
            // A first line that cannot be the start of an HTTP request: say so now rather
            // than waiting for more.
            if !plausible_start(&buf[..len]) {
                return Head::Status(400);
            }
            if len == buf.len() {
                return Head::Status(431);
            }
            match stream.read(&mut buf[len..]).await {
                Ok(0) | Err(_) => return Head::Status(0),
                Ok(n) => len += n,
            }
        }
    };
    let head = tokio::time::timeout(REQUEST_TIMEOUT, read)
        .await
        .unwrap_or(Head::Status(408));
    let reply = match head {
        Head::Status(0) => return Ok(()),
        Head::Status(code) => status_reply(code),
        Head::Metrics { head } => {
            let body = render();
            let mut r = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n",
                body.len()
            )
            .into_bytes();
            if !head {
                r.extend_from_slice(body.as_bytes());
            }
            r
        }
    };
    let write = async {
        stream.write_all(&reply).await?;
        stream.shutdown().await
    };
    tokio::time::timeout(WRITE_TIMEOUT, write)
        .await
        .unwrap_or(Ok(()))
}

/// A short error reply that closes the connection.
fn status_reply(code: u16) -> Vec<u8> {
    let reason = match code {
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    };
    let allow = if code == 405 {
        "Allow: GET, HEAD\r\n"
    } else {
        ""
    };
    let body = format!("{code} {reason}\n");
    format!(
        "HTTP/1.1 {code} {reason}\r\n{allow}Content-Type: text/plain\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Where the head ends (past its blank line), if it has arrived.
fn find_head_end(buf: &[u8]) -> Option<usize> {
    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
        return Some(i + 4);
    }
    // Bare LF line ends, which HTTP/1.1 servers are asked to accept.
    buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2)
}

/// Whether what has arrived so far can still be the start of an HTTP request line: an
/// upper-case token method, then a space. Binary or memcached text (`get foo`, `stats`)
/// fails this within its first few bytes.
fn plausible_start(buf: &[u8]) -> bool {
    let method_len = buf.iter().take_while(|b| b.is_ascii_uppercase()).count();
    match buf.get(method_len) {
        None => method_len <= 16,
        Some(b' ') => method_len > 0,
        Some(_) => false,
    }
}

/// Parses a complete request head.
fn parse_head(head: &[u8]) -> Head {
    let Ok(text) = std::str::from_utf8(head) else {
        return Head::Status(400);
    };
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let request_line = lines.next().unwrap_or("");
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Head::Status(400);
    };
    if !version.starts_with("HTTP/") {
        return Head::Status(400);
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Head::Status(505);
    }
    // Each header line must be `name: value`.
    for l in lines.take_while(|l| !l.is_empty()) {
        match l.split_once(':') {
            Some((name, _)) if !name.is_empty() && !name.contains(' ') => {}
            _ => return Head::Status(400),
        }
    }
    let path = target.split(['?', '#']).next().unwrap_or("");
    if path != "/metrics" {
        return Head::Status(404);
    }
    match method {
        "GET" => Head::Metrics { head: false },
        "HEAD" => Head::Metrics { head: true },
        _ => Head::Status(405),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_and_bounds_inclusive() {
        let h = Histogram::latency();
        h.record(500); // <= 1 µs
        h.record(1_000); // == 1 µs: le is inclusive
        h.record(1_500); // <= 2 µs
        h.record(u64::MAX / 2); // +Inf
        let s = h.snapshot();
        assert_eq!(s.count(), 4);
        let mut page = Page::new();
        page.histogram("x_seconds", "X.", &[("command", "get")], &s, 1e9);
        let text = page.render();
        for want in [
            "x_seconds_bucket{command=\"get\",le=\"0.000001\"} 2\n",
            "x_seconds_bucket{command=\"get\",le=\"0.000002\"} 3\n",
            "x_seconds_bucket{command=\"get\",le=\"10\"} 3\n",
            "x_seconds_bucket{command=\"get\",le=\"+Inf\"} 4\n",
            "x_seconds_count{command=\"get\"} 4\n",
        ] {
            assert!(text.contains(want), "{want} in {text}");
        }
        assert!(text.starts_with("# HELP x_seconds X.\n# TYPE x_seconds histogram\n"));
    }

    #[test]
    fn snapshots_merge() {
        let (a, b) = (Histogram::latency(), Histogram::latency());
        a.record(3_000);
        b.record(3_000);
        b.record(7);
        let mut s = a.snapshot();
        s.merge(&b.snapshot());
        assert_eq!(s.count(), 3);
        assert_eq!(s.sum(), 6_007);
    }

    #[test]
    fn families_group_their_samples() {
        let mut p = Page::new();
        p.counter("a_total", "A.", &[("k", "1")], 1);
        p.gauge("b", "B \\ with\nnewline.", &[], 2);
        p.counter("a_total", "A.", &[("k", "q\"\\\n")], 3);
        assert_eq!(
            p.render(),
            "# HELP a_total A.\n# TYPE a_total counter\na_total{k=\"1\"} 1\n\
             a_total{k=\"q\\\"\\\\\\n\"} 3\n# HELP b B \\\\ with\\nnewline.\n# TYPE b gauge\nb 2\n"
        );
        assert!(p.has("b") && !p.has("c"));
    }

    #[test]
    fn values_format_as_prometheus_reads_them() {
        assert_eq!(fmt_value(3.0), "3");
        assert_eq!(fmt_value(0.25), "0.25");
        assert_eq!(fmt_value(1e-6), "0.000001");
        assert_eq!(fmt_value(f64::INFINITY), "+Inf");
        assert_eq!(fmt_value(f64::NAN), "NaN");
    }

    #[test]
    fn request_heads() {
        let p = |s: &str| parse_head(s.as_bytes());
        assert_eq!(
            p("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Head::Metrics { head: false }
        );
        assert_eq!(
            p("HEAD /metrics?x=1 HTTP/1.0\r\n\r\n"),
            Head::Metrics { head: true }
        );
        assert_eq!(p("GET / HTTP/1.1\r\n\r\n"), Head::Status(404));
        assert_eq!(p("POST /metrics HTTP/1.1\r\n\r\n"), Head::Status(405));
        assert_eq!(p("GET /metrics HTTP/2.0\r\n\r\n"), Head::Status(505));
        assert_eq!(p("GET /metrics\r\n\r\n"), Head::Status(400));
        assert_eq!(
            p("GET /metrics HTTP/1.1\r\nbad header\r\n\r\n"),
            Head::Status(400)
        );
        assert!(plausible_start(b"GE"));
        assert!(plausible_start(b"GET /"));
        assert!(!plausible_start(b"get foo\r\n"));
        assert!(!plausible_start(b"\x80\x01"));
        assert!(!plausible_start(b" GET"));
    }
}
