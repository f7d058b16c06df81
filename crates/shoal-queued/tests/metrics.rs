//! shoal-queued's `--metrics-listen` page (issue 15): per-queue figures, the server's
//! counters and the fsync histograms, and `--log-format json`.

mod common;

use common::Server;
use std::io::Read;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use shoal_test_support::{metric_value as value, scrape_metrics as scrape};

fn metrics_addr(server: &Server) -> SocketAddr {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let Ok(line) = server.stderr.recv_timeout(Duration::from_millis(200)) else {
            continue;
        };
        if let Some(rest) = line.split("metrics on http://").nth(1) {
            let addr = rest.trim().trim_end_matches("/metrics");
            return addr.parse().expect("metrics address");
        }
    }
    panic!("no metrics address logged");
}

#[test]
fn per_queue_figures_and_fsync_histograms() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(
        dir.path(),
        &["--fsync", "always", "--metrics-listen", "127.0.0.1:0"],
    );
    let metrics = metrics_addr(&server);
    let page = scrape(metrics);
    // Families are there before any queue exists.
    assert!(page.contains("# TYPE shoal_queue_items gauge"), "{page}");
    let mut c = server.client();
    for i in 0..5 {
        assert_eq!(c.set("jobs", format!("m{i}").as_bytes()), "STORED");
    }
    assert!(c.get("jobs").is_some());
    assert!(c.get("jobs/open").is_some());
    assert!(c.get("empty").is_none());
    let page = scrape(metrics);
    assert_eq!(
        value(&page, "shoal_queue_items{queue=\"jobs\"}"),
        Some(3.0),
        "{page}"
    );
    assert_eq!(
        value(&page, "shoal_queue_enqueued_total{queue=\"jobs\"}"),
        Some(5.0)
    );
    assert_eq!(
        value(&page, "shoal_queue_open_reads{queue=\"jobs\"}"),
        Some(1.0)
    );
    assert!(value(&page, "shoal_queue_disk_bytes{queue=\"jobs\"}").is_some_and(|b| b > 0.0));
    assert_eq!(
        value(
            &page,
            "shoal_queued_commands_total{command=\"set\",result=\"all\"}"
        ),
        Some(5.0)
    );
    assert_eq!(
        value(
            &page,
            "shoal_queued_commands_total{command=\"get\",result=\"hit\"}"
        ),
        Some(2.0)
    );
    // Every acknowledged set waited for an fsync under `always`.
    let fsyncs = value(&page, "shoal_queued_fsync_duration_seconds_count").expect("count");
    assert!(fsyncs >= 1.0, "{page}");
    let batched = value(&page, "shoal_queued_group_commit_writes_sum").expect("sum");
    assert!(
        batched >= 5.0,
        "{batched}: every write is covered by some fsync"
    );
    assert_eq!(
        value(
            &page,
            "shoal_queued_fsync_duration_seconds_bucket{le=\"+Inf\"}"
        ),
        Some(fsyncs)
    );
}

#[test]
fn log_format_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let child = std::process::Command::new(common::bin())
        .args([
            "-p",
            "0",
            "-l",
            "127.0.0.1",
            "-v",
            "--log-format",
            "json",
            "-d",
        ])
        .arg(dir.path())
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let mut child = child;
    let mut stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        let mut acc = Vec::new();
        while let Ok(n) = stderr.read(&mut buf) {
            if n == 0 {
                break;
            }
            acc.extend_from_slice(&buf[..n]);
            while let Some(i) = acc.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = acc.drain(..=i).collect();
                let _ = tx.send(String::from_utf8_lossy(&line).trim().to_string());
            }
        }
    });
    let line = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("a log line");
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.starts_with('{') && line.ends_with('}'), "{line}");
    assert!(line.contains("\"level\":\"INFO\""), "{line}");
    assert!(line.contains("listening on"), "{line}");
}
