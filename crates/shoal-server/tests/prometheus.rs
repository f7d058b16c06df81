//! A real Prometheus (Debian's `prometheus`) scrapes shoald, shoal-proxy and shoal-queued
//! through `--metrics-listen` (issue 15): `up` is 1 for each, and counters move after
//! traffic, as seen through Prometheus's HTTP API.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const PROMETHEUS: &str = "/usr/bin/prometheus";
/// Everything Prometheus is waited for must happen within this.
const DEADLINE: Duration = Duration::from_secs(30);

/// A child process killed on drop, its stderr lines in a channel.
struct Proc {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Proc {
    fn spawn(cmd: &mut Command) -> Proc {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
        let err = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Proc { child, lines: rx }
    }

    /// The address logged after `needle` (10 s at most).
    fn addr_after(&self, needle: &str) -> SocketAddr {
        let deadline = Instant::now() + Duration::from_secs(10);
        while let Ok(line) = self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            if let Some(rest) = line.split(needle).nth(1) {
                let addr: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
                    .collect();
                return addr
                    .parse()
                    .unwrap_or_else(|_| panic!("address in {line:?}"));
            }
        }
        panic!("no {needle:?} logged");
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// shoal-proxy and shoal-queued, built (if stale) next to the shoald these tests run.
fn sibling(name: &str) -> PathBuf {
    let dir = Path::new(common::shoald_bin()).parent().expect("bin dir");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-q", "-p", name, "--bin", name]);
    if dir.ends_with("release") {
        cmd.arg("--release");
    }
    assert!(
        cmd.status().expect("cargo build").success(),
        "building {name}"
    );
    dir.join(name)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// `GET path` on Prometheus's API (HTTP/1.0, so the body is not chunked): the JSON.
fn api(addr: SocketAddr, path: &str) -> Option<serde_json::Value> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (_, body) = out.split_once("\r\n\r\n")?;
    serde_json::from_str(body).ok()
}

/// The instant vector of `query`, as `(job, value)` pairs.
fn query(prom: SocketAddr, query: &str) -> Vec<(String, f64)> {
    let Some(v) = api(prom, &format!("/api/v1/query?query={query}")) else {
        return Vec::new();
    };
    v["data"]["result"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(|s| {
                    let job = s["metric"]["job"].as_str().unwrap_or("").to_string();
                    let v = s["value"][1].as_str()?.parse().ok()?;
                    Some((job, v))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Polls until `check` holds (within [`DEADLINE`] from `start`).
fn until(start: Instant, what: &str, mut check: impl FnMut() -> bool) {
    while !check() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn prometheus_scrapes_all_three_daemons() {
    let present = Path::new(PROMETHEUS).exists();
    if !present {
        assert!(
            std::env::var_os("SHOAL_REQUIRE_PEERS").is_none(),
            "{PROMETHEUS} is missing (install Debian's prometheus package)"
        );
        eprintln!("SKIPPED: {PROMETHEUS} is missing (install Debian's prometheus package)");
        return;
    }
    let (proxy_bin, queued_bin) = (sibling("shoal-proxy"), sibling("shoal-queued"));
    let tmp = tempfile::tempdir().expect("tempdir");

    let (shoald, shoald_metrics) = common::with_metrics(&[]);
    let queued = Proc::spawn(
        Command::new(queued_bin)
            .args(["-p", "0", "-l", "127.0.0.1", "-v", "-t", "1"])
            .args(["--metrics-listen", "127.0.0.1:0", "-d"])
            .arg(tmp.path().join("queues")),
    );
    let queued_addr = queued.addr_after("listening on ");
    let queued_metrics = queued.addr_after("metrics on http://");
    let conf = tmp.path().join("proxy.yml");
    let backend = shoald.addr.expect("tcp");
    std::fs::write(
        &conf,
        format!("alpha:\n  listen: 127.0.0.1:0\n  servers:\n   - {backend}:1\n"),
    )
    .expect("conf");
    let proxy = Proc::spawn(Command::new(proxy_bin).arg("-c").arg(&conf).args([
        "-s",
        "-1",
        "--metrics-listen",
        "127.0.0.1:0",
    ]));
    let proxy_addr = proxy.addr_after("pool alpha listening on ");
    let proxy_metrics = proxy.addr_after("metrics listening on ");

    let prom_addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let config = tmp.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n\
             \x20 - job_name: shoald\n    static_configs:\n      - targets: ['{shoald_metrics}']\n\
             \x20 - job_name: shoal-proxy\n    static_configs:\n      - targets: ['{proxy_metrics}']\n\
             \x20 - job_name: shoal-queued\n    static_configs:\n      - targets: ['{queued_metrics}']\n"
        ),
    )
    .expect("prometheus.yml");
    let _prometheus = Proc::spawn(
        Command::new(PROMETHEUS)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                tmp.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={prom_addr}")),
    );
    let start = Instant::now();
    let jobs = ["shoal-proxy", "shoal-queued", "shoald"];
    until(start, "up == 1 for all three jobs", || {
        let mut up: Vec<String> = query(prom_addr, "up")
            .into_iter()
            .filter(|(_, v)| *v == 1.0)
            .map(|(job, _)| job)
            .collect();
        up.sort();
        up == jobs
    });
    // A scrape from before any traffic, then traffic on each daemon.
    let before = |q: &str| query(prom_addr, q).first().map(|(_, v)| *v);
    until(start, "first samples", || {
        before("memcached_items_total").is_some()
            && before("sum(shoal_proxy_requests_total)").is_some()
    });
    let items0 = before("memcached_items_total").unwrap_or(0.0);
    let proxied0 = before("sum(shoal_proxy_requests_total)").unwrap_or(0.0);
    let mut c = common::Conn::tcp(proxy_addr);
    for i in 0..10 {
        c.set(&format!("k{i}"), b"v");
    }
    let mut q = common::Conn::tcp(queued_addr);
    for _ in 0..3 {
        q.rt(b"set jobs 0 0 1\r\nx\r\n", b"STORED\r\n");
    }
    until(start, "counters to move", || {
        before("memcached_items_total").is_some_and(|v| v >= items0 + 10.0)
            && before("sum(shoal_proxy_requests_total)").is_some_and(|v| v >= proxied0 + 10.0)
            && before("sum(shoal_queue_enqueued_total)").is_some_and(|v| v >= 3.0)
            && before("sum(shoal_request_duration_seconds_count)").is_some_and(|v| v >= 10.0)
    });
    eprintln!(
        "prometheus saw all three daemons and their counters move in {:?}",
        start.elapsed()
    );
}
