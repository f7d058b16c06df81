//! shoal-proxy's `--metrics-listen` page (issue 15): twemproxy's stats per pool and
//! server, requests in flight and latency histograms; `--log-format` (JSON lines; the
//! same events in both formats).

mod common;

use common::{proxy_bin, write_conf, Proc, Shoald};
use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use shoal_test_support::{metric_value as value, scrape_metrics as scrape};

fn start(backends: &[Shoald], extra: &[&str]) -> (Proc, SocketAddr, SocketAddr) {
    let mut conf = "alpha:\n  listen: 127.0.0.1:0\n  hash: md5\n  distribution: ketama\n  \
                    timeout: 1000\n  servers:\n"
        .to_string();
    for b in backends {
        conf.push_str(&format!("   - {}:1\n", b.addr));
    }
    let mut cmd = Command::new(proxy_bin());
    cmd.arg("-c")
        .arg(write_conf(&conf))
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
        "INFO shoal_proxy::server: pool alpha listening on #.#.#.#:#",
        "DEBUG shoal_net::accept: connection accepted peer=#.#.#.#:#",
        "DEBUG shoal_net::connection: connection closed end=Eof",
        "INFO shoal_proxy: shut down",
        "ERROR shoal_proxy: pool 'alpha': cannot listen on #.#.#.#:#: Address already in use \
         (os error #)",
    ] {
        assert_eq!(events.get(want), Some(&1), "{want:?} in {events:#?}");
    }
}
