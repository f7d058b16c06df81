//! shoald's `--metrics-listen` endpoint: the page, the latency histograms, what bad HTTP
//! input gets, `promtool check metrics`, and `--log-format` (JSON lines; the same events
//! in both formats).

mod common;

use common::{http_get, parse_page, with_metrics};
use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn value(page: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    parse_page(page).into_iter().find_map(|(n, l, v)| {
        let want: Vec<(String, String)> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        (n == name && l == want).then_some(v)
    })
}

#[test]
fn latency_histograms_count_every_request_by_command() {
    let (server, metrics) = with_metrics(&[]);
    let mut c = server.conn();
    for i in 0..10 {
        c.set(&format!("k{i}"), b"v");
    }
    for i in 0..7 {
        assert!(c.get(&format!("k{i}")).is_some());
    }
    c.rt(b"mn\r\n", b"MN\r\n");
    // Binary requests count as their command too.
    let mut b = server.conn();
    common::binproto::set(&mut b, b"bk", b"v", 0);
    let (status, page) = http_get(metrics, "/metrics");
    assert_eq!(status, 200);
    let count = |cmd: &str| {
        value(
            &page,
            "shoal_request_duration_seconds_count",
            &[("command", cmd)],
        )
    };
    assert_eq!(count("set"), Some(11.0), "{page}");
    assert_eq!(count("get"), Some(7.0));
    assert_eq!(count("mn"), Some(1.0));
    let inf = value(
        &page,
        "shoal_request_duration_seconds_bucket",
        &[("command", "get"), ("le", "+Inf")],
    );
    assert_eq!(inf, Some(7.0));
    let sum = value(
        &page,
        "shoal_request_duration_seconds_sum",
        &[("command", "get")],
    );
    assert!(sum.is_some_and(|s| s > 0.0 && s < 1.0), "{sum:?}");
    // Buckets are cumulative.
    let buckets: Vec<f64> = parse_page(&page)
        .into_iter()
        .filter(|(n, l, _)| n == "shoal_request_duration_seconds_bucket" && l[0].1 == "set")
        .map(|(_, _, v)| v)
        .collect();
    assert_eq!(buckets.len(), 23);
    assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "{buckets:?}");
    for family in [
        "shoal_store_segments",
        "shoal_auth_failures_total",
        "shoal_tls_handshakes_total",
        "memcached_up",
    ] {
        assert!(page.contains(&format!("# TYPE {family} ")), "{family}");
    }
}

#[test]
fn latency_quantiles_are_served_per_command() {
    let (server, metrics) = with_metrics(&[]);
    let mut c = server.conn();
    for i in 0..50 {
        c.set(&format!("q{i}"), b"v");
    }
    let (status, page) = http_get(metrics, "/metrics");
    assert_eq!(status, 200);
    assert!(
        page.contains("# TYPE shoal_request_latency_seconds summary"),
        "{page}"
    );
    let q = |quantile: &str| {
        value(
            &page,
            "shoal_request_latency_seconds",
            &[("command", "set"), ("quantile", quantile)],
        )
    };
    let (p50, p99, p9999) = (q("0.5"), q("0.99"), q("0.9999"));
    // Loopback sets take microseconds; the quantiles are ordered and plausible.
    for p in [p50, p99, p9999] {
        assert!(p.is_some_and(|v| v > 0.0 && v < 1.0), "{p:?}\n{page}");
    }
    assert!(p50 <= p99 && p99 <= p9999, "{p50:?} {p99:?} {p9999:?}");
    let count = value(
        &page,
        "shoal_request_latency_seconds_count",
        &[("command", "set")],
    );
    assert_eq!(count, Some(50.0));
    // Commands not served have neither view.
    assert_eq!(
        value(
            &page,
            "shoal_request_latency_seconds",
            &[("command", "decr"), ("quantile", "0.5")]
        ),
        None
    );
}

#[test]
fn without_the_flag_there_is_no_endpoint_and_no_histogram() {
    let server = common::Server::start();
    assert!(server
        .wait_log("metrics on", Duration::from_millis(300))
        .is_none());
}

#[test]
fn bad_http_gets_a_4xx_and_a_closed_connection() {
    let (_server, metrics) = with_metrics(&[]);
    shoal_test_support::check_bad_http_is_refused(metrics, "memcached_up");

    // Connections are bounded: idle ones past the limit are closed at once.
    let idle: Vec<TcpStream> = (0..40)
        .filter_map(|_| TcpStream::connect(metrics).ok())
        .collect();
    let mut closed = 0;
    for mut s in idle {
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        let mut b = [0u8; 1];
        if matches!(s.read(&mut b), Ok(0)) {
            closed += 1;
        }
    }
    assert!(closed >= 8, "{closed} of 40 idle connections closed");
}

#[test]
fn promtool_accepts_the_page_but_for_the_exporters_own_names() {
    let (server, metrics) = with_metrics(&[]);
    let mut c = server.conn();
    c.set("a", b"b");
    assert!(c.get("a").is_some());
    let (_, page) = http_get(metrics, "/metrics");
    let Some(remarks) = shoal_test_support::promtool_check(&page) else {
        return;
    };
    // memcached_exporter types these as counters without `_total`; the names (and the
    // types) are kept for its dashboards, and promtool's lint says so about them, as it
    // does about the exporter's own page. Nothing else may be reported.
    let exporter_names = [
        "memcached_uptime_seconds",
        "memcached_slab_items_evicted_time_seconds",
        "memcached_slab_items_moves_to_cold",
        "memcached_slab_items_moves_to_warm",
        "memcached_slab_items_moves_within_lru",
        "memcached_slab_mem_requested_bytes",
    ];
    for line in remarks {
        let ok = exporter_names
            .iter()
            .any(|n| line == format!("{n} counter metrics should have \"_total\" suffix"));
        assert!(ok, "promtool: {line}\n{page}");
    }
}

#[test]
fn log_format_json_writes_one_object_per_line() {
    let mut child = Command::new(common::shoald_bin())
        .args([
            "-p",
            "-1",
            "-l",
            "127.0.0.1",
            "-v",
            "-t",
            "1",
            "--log-format",
            "json",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut listening = None;
    let deadline = Instant::now() + Duration::from_secs(10);
    while listening.is_none() && Instant::now() < deadline {
        let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) else {
            continue;
        };
        let v: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON: {line:?}: {e}"));
        assert!(
            v["level"].is_string() && v["timestamp"].is_string(),
            "{line}"
        );
        let msg = v["fields"]["message"].as_str().unwrap_or("").to_string();
        if msg.contains("listening on") {
            listening = Some(msg);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(listening.is_some(), "no JSON listening line");
    let out = Command::new(common::shoald_bin())
        .args(["--log-format", "xml", "--version"])
        .output()
        .expect("run");
    assert!(!out.status.success());
}

/// A multi-get whose reply is served in several turns (past the output high-water mark)
/// is still one request.
#[test]
fn a_suspended_multi_get_counts_once() {
    let (server, metrics) = with_metrics(&["-I", "2m"]);
    let mut c = server.conn();
    let big = vec![b'x'; 500_000];
    let keys: Vec<String> = (0..12).map(|i| format!("big{i}")).collect();
    for k in &keys {
        c.set(k, &big);
    }
    c.send(format!("get {}\r\n", keys.join(" ")).as_bytes());
    let reply = c.read_until(b"END\r\n");
    assert!(reply.len() > 12 * 500_000, "{}", reply.len());
    let (_, page) = http_get(metrics, "/metrics");
    assert_eq!(
        value(
            &page,
            "shoal_request_duration_seconds_count",
            &[("command", "get")]
        ),
        Some(1.0)
    );
}

/// `--log-format text` and `json` carry the same events: start, a connection accepted and
/// closed, orderly shutdown, and the fatal error of a port in use (logged, not printed
/// past the log); every JSON line is a JSON object.
#[test]
fn both_log_formats_carry_the_same_events() {
    use shoal_test_support::logs::{same_events_in_both_formats, Format};
    let command = |format: Format, port: u16| {
        let mut cmd = Command::new(common::shoald_bin());
        // Port 0 asks for any free port, which shoald spells -p -1 (its -p 0, as
        // memcached's, turns TCP off).
        let port = if port == 0 {
            "-1".to_string()
        } else {
            port.to_string()
        };
        cmd.args(["-l", "127.0.0.1", "-vv", "-t", "1", "-p"])
            .arg(port)
            .args(["--log-format", format.flag()]);
        cmd
    };
    let events = same_events_in_both_formats(command, &[]);
    for want in [
        "INFO shoald: listening on #.#.#.#:#",
        "DEBUG shoal_net::accept: connection accepted peer=#.#.#.#:#",
        "DEBUG shoal_net::connection: connection closed end=Eof",
        "INFO shoal_server::server: shut down",
        "ERROR shoald: failed to listen: Address already in use (os error #)",
    ] {
        assert_eq!(events.get(want), Some(&1), "{want:?} in {events:#?}");
    }
}
