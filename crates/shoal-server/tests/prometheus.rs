//! A real Prometheus (Debian's `prometheus`) scrapes shoald, shoal-proxy and shoal-queued
//! through `--metrics-listen`: `up` is 1 for each, and counters move after
//! traffic, as seen through Prometheus's HTTP API.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

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

/// The three daemons, each serving metrics on an ephemeral port.
struct Daemons {
    shoald_metrics: SocketAddr,
    proxy_addr: SocketAddr,
    proxy_metrics: SocketAddr,
    queued_addr: SocketAddr,
    queued_metrics: SocketAddr,
    _procs: (common::Server, Proc, Proc),
}

fn start_daemons(tmp: &Path) -> Daemons {
    // Built first if missing or older than the workspace sources.
    let (proxy_bin, queued_bin) = (
        shoal_test_support::workspace_bin("shoal-proxy"),
        shoal_test_support::workspace_bin("shoal-queued"),
    );
    let (shoald, shoald_metrics) = common::with_metrics(&[]);
    let queued = Proc::spawn(
        Command::new(queued_bin)
            .args(["-p", "0", "-l", "127.0.0.1", "-v", "-t", "1"])
            .args(["--metrics-listen", "127.0.0.1:0", "-d"])
            .arg(tmp.join("queues")),
    );
    let queued_addr = queued.addr_after("listening on ");
    let queued_metrics = queued.addr_after("metrics on http://");
    let conf = tmp.join("proxy.yml");
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
    Daemons {
        shoald_metrics,
        proxy_addr,
        proxy_metrics,
        queued_addr,
        queued_metrics,
        _procs: (shoald, queued, proxy),
    }
}

#[test]
fn prometheus_scrapes_all_three_daemons() {
    let Some(prometheus) = shoal_test_support::peer("prometheus", "prometheus") else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = start_daemons(tmp.path());
    let Daemons {
        shoald_metrics,
        proxy_addr,
        proxy_metrics,
        queued_addr,
        queued_metrics,
        ..
    } = d;
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
        Command::new(prometheus)
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

    // Every query of the Grafana dashboard, as Grafana would send it, is valid PromQL to
    // this Prometheus and returns series from the three daemons.
    let queries = dashboard_queries();
    loop {
        let failing: Vec<String> = queries
            .iter()
            .filter_map(
                |(title, expr)| match evaluate(prom_addr, &grafana_expand(expr)) {
                    Ok(n) if n > 0 => None,
                    Ok(_) => Some(format!("{title}: no series for {expr}")),
                    Err(e) => Some(format!("{title}: {expr}: {e}")),
                },
            )
            .collect();
        if failing.is_empty() {
            break;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "dashboard queries failing:\n{}",
            failing.join("\n")
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    eprintln!(
        "all {} dashboard queries return data, {:?} after start",
        queries.len(),
        start.elapsed()
    );
}

/// Every `(panel title, expr)` of docs/grafana/shoal.json.
fn dashboard_queries() -> Vec<(String, String)> {
    let dash = dashboard();
    let mut out = Vec::new();
    for panel in dash["panels"].as_array().expect("panels") {
        let title = panel["title"].as_str().unwrap_or("?");
        for t in panel["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = t["expr"].as_str() {
                out.push((title.to_string(), expr.to_string()));
            }
        }
    }
    out
}

fn dashboard() -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/grafana/shoal.json");
    let text = std::fs::read_to_string(&path).expect("docs/grafana/shoal.json");
    serde_json::from_str(&text).expect("valid JSON")
}

/// What Grafana substitutes before sending a query: the dashboard's `$instance` variable
/// (all instances) and the built-in `$__rate_interval` (at least four scrape intervals).
fn grafana_expand(expr: &str) -> String {
    expr.replace("$instance", ".*")
        .replace("$__rate_interval", "1m")
}

/// Evaluates `expr` on Prometheus: the number of series, or Prometheus' error.
fn evaluate(prom: SocketAddr, expr: &str) -> Result<usize, String> {
    let mut encoded = String::new();
    for b in expr.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            encoded.push(char::from(b));
        } else {
            encoded.push_str(&format!("%{b:02X}"));
        }
    }
    let v = api(prom, &format!("/api/v1/query?query={encoded}"))
        .ok_or_else(|| "no answer from prometheus".to_string())?;
    if v["status"] != "success" {
        return Err(format!("{}: {}", v["errorType"], v["error"]));
    }
    Ok(v["data"]["result"].as_array().map_or(0, Vec::len))
}

/// Metric family names in a PromQL expression: identifiers naming Shoal's or the
/// exporter's metrics (label names, functions and `$variables` never start so), with a
/// histogram's `_bucket`/`_sum`/`_count` series named by their family.
fn metric_names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find(|c: char| c.is_ascii_alphabetic() || c == '_' || c == '$') {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$' || c == ':'))
            .unwrap_or(tail.len());
        let word = &tail[..end];
        if word.starts_with("shoal_") || word.starts_with("memcached_") {
            out.push(word.to_string());
        }
        rest = &tail[end..];
    }
    out
}

/// docs/grafana/shoal.json is a dashboard Grafana imports (its `__inputs` datasource used by
/// every panel) whose every query names metrics the three daemons export.
#[test]
fn the_grafana_dashboard_queries_only_exported_metrics() {
    let dash = dashboard();
    assert_eq!(dash["__inputs"][0]["name"], "DS_PROMETHEUS");
    assert_eq!(dash["__inputs"][0]["pluginId"], "prometheus");
    assert!(dash["uid"].is_string() && dash["title"].is_string());

    let tmp = tempfile::tempdir().expect("tempdir");
    let d = start_daemons(tmp.path());
    let mut exported = std::collections::BTreeSet::new();
    for addr in [d.shoald_metrics, d.proxy_metrics, d.queued_metrics] {
        let (status, page) = common::http_get(addr, "/metrics");
        assert_eq!(status, 200);
        for line in page.lines() {
            let Some(rest) = line.strip_prefix("# TYPE ") else {
                continue;
            };
            let mut parts = rest.split(' ');
            let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
                continue;
            };
            exported.insert(name.to_string());
            if kind == "histogram" || kind == "summary" {
                for suffix in ["_bucket", "_sum", "_count"] {
                    exported.insert(format!("{name}{suffix}"));
                }
            }
        }
    }
    let panels = dash["panels"].as_array().expect("panels");
    let mut queries = 0;
    for panel in panels.iter().filter(|p| p["type"] != "row") {
        let title = panel["title"].as_str().unwrap_or("?");
        assert_eq!(panel["datasource"]["uid"], "${DS_PROMETHEUS}", "{title}");
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}");
        for t in targets {
            let expr = t["expr"].as_str().expect("expr");
            let names = metric_names(expr);
            assert!(!names.is_empty(), "{title}: {expr}");
            for name in names {
                assert!(exported.contains(&name), "{title}: {name} is not exported");
            }
            queries += 1;
        }
    }
    eprintln!(
        "{queries} dashboard queries over {} exported series names",
        exported.len()
    );
    let _ = (d.proxy_addr, d.queued_addr);
}

/// `promtool check metrics` finds nothing to say about shoal-proxy's and shoal-queued's
/// pages (shoald's is checked in tests/metrics.rs), with per-server and per-queue series
/// present.
#[test]
fn proxy_and_queued_pages_pass_promtool() {
    if shoal_test_support::peer("promtool", "prometheus").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = start_daemons(tmp.path());
    common::Conn::tcp(d.proxy_addr).set("k", b"v");
    common::Conn::tcp(d.queued_addr).rt(b"set jobs 0 0 1\r\nx\r\n", b"STORED\r\n");
    for (name, addr) in [
        ("shoal-proxy", d.proxy_metrics),
        ("shoal-queued", d.queued_metrics),
    ] {
        let (status, page) = common::http_get(addr, "/metrics");
        assert_eq!(status, 200);
        assert!(
            page.contains("server=") || page.contains("queue=\"jobs\""),
            "{page}"
        );
        let remarks = shoal_test_support::promtool_check(&page).expect("promtool");
        assert!(remarks.is_empty(), "{name}: {remarks:?}\n{page}");
    }
}
