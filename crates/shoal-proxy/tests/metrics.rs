//! shoal-proxy's `--metrics-listen` page: twemproxy's stats per pool and server,
//! requests in flight, ejections and latency histograms (per server and per pool), which
//! move with timeouts and ejections; bad HTTP input; `--log-format` (JSON lines; the same
//! events in both formats).

mod common;

use common::{fake_backend, proxy_bin, write_conf, Conn, Proc, Shoald};
use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use shoal_test_support::{metric_value as value, scrape_metrics as scrape};

fn start(backends: &[Shoald], extra: &[&str]) -> (Proc, SocketAddr, SocketAddr) {
    let mut conf = "alpha:\n  listen: 127.0.0.1:0\n  hash: md5\n  distribution: ketama\n  \
                    timeout: 1000\n  servers:\n"
        .to_string();
    for b in backends {
        conf.push_str(&format!("   - {}:1\n", b.addr));
    }
    start_conf(&conf, extra)
}

/// shoal-proxy on `conf` (one pool, `alpha`) with metrics: the process, the pool's address
/// and the metrics address.
fn start_conf(conf: &str, extra: &[&str]) -> (Proc, SocketAddr, SocketAddr) {
    let mut cmd = Command::new(proxy_bin());
    cmd.arg("-c")
        .arg(write_conf(conf))
        .args(["-s", "-1", "--metrics-listen", "127.0.0.1:0"])
        .args(extra);
    let proc = Proc::spawn(cmd);
    let pool: SocketAddr = proc
        .wait_for("pool alpha listening on ")
        .split('"')
        .next()
        .unwrap_or_default()
        .parse()
        .expect("pool addr");
    let metrics: SocketAddr = proc
        .wait_for("metrics listening on ")
        .split('"')
        .next()
        .unwrap_or_default()
        .parse()
        .expect("metrics addr");
    (proc, pool, metrics)
}

#[test]
fn per_server_requests_latency_and_twemproxy_stats() {
    let backends: Vec<Shoald> = (0..2).map(|_| Shoald::start()).collect();
    let (_proxy, pool, metrics) = start(&backends, &[]);
    let mut c = common::Conn::connect(pool);
    for i in 0..20 {
        assert_eq!(c.set(&format!("k{i}"), "v"), "STORED");
    }
    let page = scrape(metrics);
    let mut requests = 0.0;
    let mut latency_count = 0.0;
    for b in &backends {
        let l = format!("{{pool=\"alpha\",server=\"{}:1\"}}", b.addr);
        let l = l.replace(":1\"", "\"");
        requests += value(&page, &format!("shoal_proxy_requests_total{l}"))
            .unwrap_or_else(|| panic!("requests for {l} in {page}"));
        latency_count += value(
            &page,
            &format!("shoal_proxy_server_request_duration_seconds_count{l}"),
        )
        .expect("latency count");
        assert_eq!(
            value(&page, &format!("shoal_proxy_in_flight_requests{l}")),
            Some(0.0)
        );
    }
    assert_eq!(requests, 20.0, "{page}");
    assert_eq!(latency_count, 20.0);
    // The pool's own histogram counts the clients' requests, as the client saw them.
    assert_eq!(
        value(
            &page,
            "shoal_proxy_request_duration_seconds_count{pool=\"alpha\"}"
        ),
        Some(20.0),
        "{page}"
    );
    assert_eq!(
        value(&page, "shoal_proxy_client_connections{pool=\"alpha\"}"),
        Some(1.0)
    );
    assert_eq!(
        value(&page, "shoal_proxy_server_ejects_total{pool=\"alpha\"}"),
        Some(0.0)
    );
    assert_eq!(value(&page, "shoal_proxy_current_connections"), Some(1.0));
}

#[test]
fn log_format_json_keeps_the_listening_lines() {
    let backends = vec![Shoald::start()];
    let (proxy, _, _) = start(&backends, &["--log-format", "json"]);
    drop(proxy);
    // `start` found both listening lines in JSON objects; check the shape of one.
    let conf = write_conf(&format!(
        "alpha:\n  listen: 127.0.0.1:0\n  servers:\n   - {}:1\n",
        backends[0].addr
    ));
    let mut cmd = Command::new(proxy_bin());
    cmd.arg("-c")
        .arg(conf)
        .args(["-s", "-1", "--log-format", "json"]);
    let p = Proc::spawn(cmd);
    let line = p
        .lines
        .recv_timeout(Duration::from_secs(10))
        .expect("a log line");
    let v: serde_json::Value = serde_json::from_str(&line).expect("JSON");
    assert_eq!(v["level"], "INFO", "{line}");
    assert!(
        v["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("pool alpha listening on ")),
        "{line}"
    );
}

/// `--log-format text` and `json` carry the same events: start, a client connection
/// accepted and closed, orderly shutdown, and the fatal error of a pool port in use
/// (logged, not printed past the log); every JSON line is a JSON object.
#[test]
fn both_log_formats_carry_the_same_events() {
    use shoal_test_support::logs::{same_events_in_both_formats, Format};
    let command = |format: Format, port: u16| {
        // The server is never contacted: the connection sends nothing.
        let conf = write_conf(&format!(
            "alpha:\n  listen: 127.0.0.1:{port}\n  servers:\n   - 127.0.0.1:1:1\n"
        ));
        let mut cmd = Command::new(proxy_bin());
        cmd.arg("-c")
            .arg(conf)
            .args(["-s", "-1", "-v", "7", "--log-format", format.flag()]);
        cmd
    };
    let events = same_events_in_both_formats(command, &[]);
    for want in [
        "INFO shoal_proxy::accept: pool alpha listening on #.#.#.#:#",
        "DEBUG shoal_net::accept: connection accepted peer=#.#.#.#:#",
        "DEBUG shoal_net::connection: connection closed end=Eof",
        "INFO shoal_proxy: shut down",
        "ERROR shoal_proxy: pool 'alpha': cannot listen on #.#.#.#:#: Address already in use \
         (os error #)",
    ] {
        assert_eq!(events.get(want), Some(&1), "{want:?} in {events:#?}");
    }
}

/// The series of `metric` for the one server of pool alpha.
fn server_series(metric: &str, server: SocketAddr) -> String {
    format!("{metric}{{pool=\"alpha\",server=\"{server}\"}}")
}

/// Scrapes until `series` has value `want` (5 s at most); the page that had it.
fn wait_for_value(metrics: SocketAddr, series: &str, want: f64) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let page = scrape(metrics);
        if value(&page, series) == Some(want) {
            return page;
        }
        assert!(
            Instant::now() < deadline,
            "{series} never reached {want}: {page}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A request held by a silent server shows as in flight while it waits; its timeout moves
/// `server_timedout`, and (with `auto_eject_hosts` and a failure limit of 1) ejects the
/// server, which the per-server ejection counter, the pool's `server_ejects` and
/// `server_ejected_at` all show; the pool's latency histogram has the request, at its
/// timeout. The page still passes promtool.
#[test]
fn timeouts_ejections_and_in_flight_requests_move() {
    let silent = fake_backend(None);
    let conf = format!(
        "alpha:\n  listen: 127.0.0.1:0\n  timeout: 1500\n  auto_eject_hosts: true\n  \
         server_failure_limit: 1\n  server_retry_timeout: 60000\n  servers:\n   - {silent}:1\n"
    );
    let (_proxy, pool, metrics) = start_conf(&conf, &[]);
    let in_flight = server_series("shoal_proxy_in_flight_requests", silent);
    let page = scrape(metrics);
    assert_eq!(value(&page, &in_flight), Some(0.0), "{page}");

    let mut c = Conn::connect(pool);
    let sent = Instant::now();
    c.send(b"get k\r\n");
    // Seen while the request waits (well inside its 1.5 s timeout).
    let page = wait_for_value(metrics, &in_flight, 1.0);
    assert!(sent.elapsed() < Duration::from_millis(1500), "{page}");
    assert_eq!(
        value(
            &page,
            &server_series("shoal_proxy_server_timedout_total", silent)
        ),
        Some(0.0)
    );
    assert_eq!(c.line(), "SERVER_ERROR Connection timed out");

    let page = wait_for_value(metrics, &in_flight, 0.0);
    let v = |series: &str| value(&page, series).unwrap_or_else(|| panic!("{series}: {page}"));
    assert_eq!(
        v(&server_series("shoal_proxy_server_timedout_total", silent)),
        1.0
    );
    assert_eq!(
        v(&server_series("shoal_proxy_server_ejections_total", silent)),
        1.0
    );
    assert_eq!(v("shoal_proxy_server_ejects_total{pool=\"alpha\"}"), 1.0);
    assert!(
        v(&server_series(
            "shoal_proxy_server_ejected_at_seconds",
            silent
        )) > 0.0
    );
    assert_eq!(
        v("shoal_proxy_request_duration_seconds_count{pool=\"alpha\"}"),
        1.0
    );
    let waited = v("shoal_proxy_request_duration_seconds_sum{pool=\"alpha\"}");
    assert!(
        (1.4..3.0).contains(&waited),
        "the request waited {waited} s"
    );
    // Timed-out requests are not in the server's reply histogram (replies only).
    assert_eq!(
        v(&server_series(
            "shoal_proxy_server_request_duration_seconds_count",
            silent
        )),
        0.0
    );
    if let Some(remarks) = shoal_test_support::promtool_check(&page) {
        assert!(remarks.is_empty(), "promtool: {remarks:?}");
    }
}

/// The proxy's metrics listener answers bad HTTP with a 4xx and closes the connection
/// (the shared endpoint is tested at length on shoald).
#[test]
fn bad_http_gets_a_4xx_and_a_closed_connection() {
    let backends = vec![Shoald::start()];
    let (_proxy, _, metrics) = start(&backends, &[]);
    shoal_test_support::check_bad_http_is_refused(metrics, "shoal_proxy_uptime_seconds");
}
