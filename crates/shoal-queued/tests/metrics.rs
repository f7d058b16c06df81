//! shoal-queued's `--metrics-listen` page: per-queue figures, the server's
//! counters and the per-queue fsync histograms, bad HTTP input, and `--log-format`.

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
    // Every acknowledged set waited for an fsync of its queue under `always`.
    let fsyncs = value(
        &page,
        "shoal_queued_fsync_duration_seconds_count{queue=\"jobs\"}",
    )
    .expect("count");
    assert!(fsyncs >= 1.0, "{page}");
    let batched = value(
        &page,
        "shoal_queued_group_commit_writes_sum{queue=\"jobs\"}",
    )
    .expect("sum");
    assert!(
        batched >= 5.0,
        "{batched}: every write is covered by some fsync"
    );
    assert_eq!(
        value(
            &page,
            "shoal_queued_fsync_duration_seconds_bucket{queue=\"jobs\",le=\"+Inf\"}"
        ),
        Some(fsyncs)
    );
}

/// The fsync histograms are per queue: each queue's fsyncs count the writes to that queue
/// only, and a deleted queue's series leave the page.
#[test]
fn fsync_histograms_are_per_queue_and_leave_with_the_queue() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(
        dir.path(),
        &["--fsync", "always", "--metrics-listen", "127.0.0.1:0"],
    );
    let metrics = metrics_addr(&server);
    let page = scrape(metrics);
    assert!(
        page.contains("# TYPE shoal_queued_fsync_duration_seconds histogram")
            && page.contains("# TYPE shoal_queued_group_commit_writes histogram"),
        "declared before any queue exists: {page}"
    );
    let mut c = server.client();
    for i in 0..3 {
        assert_eq!(c.set("alpha", format!("a{i}").as_bytes()), "STORED");
    }
    for i in 0..2 {
        assert_eq!(c.set("beta", format!("b{i}").as_bytes()), "STORED");
    }
    let page = scrape(metrics);
    let series = |name: &str, q: &str| value(&page, &format!("{name}{{queue=\"{q}\"}}"));
    // Only sets were written, each acknowledged after an fsync of its own queue covered
    // it: the batches of a queue add up to exactly its writes (server-wide they would be
    // five for both).
    assert_eq!(
        series("shoal_queued_group_commit_writes_sum", "alpha"),
        Some(3.0),
        "{page}"
    );
    assert_eq!(
        series("shoal_queued_group_commit_writes_sum", "beta"),
        Some(2.0),
        "{page}"
    );
    for q in ["alpha", "beta"] {
        let n = series("shoal_queued_group_commit_writes_count", q).expect("passes");
        assert!((1.0..=3.0).contains(&n), "{q}: {n} fsync passes\n{page}");
        // One fsync of the segment per pass, and the first pass also made the new queue's
        // directory (in the queues directory) and its first segment (in the queue's
        // directory) durable: two directory fsyncs, in the same histogram.
        assert_eq!(
            series("shoal_queued_fsync_duration_seconds_count", q),
            Some(n + 2.0),
            "{q}\n{page}"
        );
        assert!(series("shoal_queued_fsync_duration_seconds_sum", q).is_some_and(|s| s > 0.0));
    }
    assert!(
        !page.contains("shoal_queued_fsync_duration_seconds_count "),
        "no unlabelled series: {page}"
    );

    assert_eq!(c.cmd("delete beta"), "DELETED");
    let page = scrape(metrics);
    assert!(!page.contains("queue=\"beta\""), "{page}");
    assert!(
        value(
            &page,
            "shoal_queued_group_commit_writes_sum{queue=\"alpha\"}"
        ) == Some(3.0),
        "{page}"
    );
}

/// The metrics listener answers what is not a scrape with a 4xx and closes, and cuts a
/// request that never finishes (slowloris), while scrapes go on being served.
#[test]
fn bad_http_gets_a_4xx_and_a_closed_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &["--metrics-listen", "127.0.0.1:0"]);
    shoal_test_support::check_bad_http_is_refused(
        metrics_addr(&server),
        "shoal_queued_uptime_seconds",
    );
    // The queue port is unaffected.
    assert!(server.client().cmd("version").starts_with("VERSION "));
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

/// `--log-format text` and `json` carry the same events: start, a connection accepted and
/// closed, orderly shutdown, and the fatal error of a port in use (logged, not printed
/// past the log); every JSON line is a JSON object.
#[test]
fn both_log_formats_carry_the_same_events() {
    use shoal_test_support::logs::{same_events_in_both_formats, Format};
    let dir = tempfile::tempdir().expect("tempdir");
    let command = |format: Format, port: u16| {
        let mut cmd = std::process::Command::new(common::bin());
        cmd.args(["-l", "127.0.0.1", "-vv", "-t", "1", "-p"])
            .arg(port.to_string())
            .arg("-d")
            .arg(dir.path())
            .args(["--log-format", format.flag()]);
        cmd
    };
    let path = dir.path().display().to_string();
    let events = same_events_in_both_formats(command, &[(&path, "<dir>")]);
    for want in [
        "INFO shoal_queued: listening on #.#.#.#:# (data <dir>, fsync #ms)",
        "DEBUG shoal_net::accept: connection accepted peer=#.#.#.#:#",
        "DEBUG shoal_net::connection: connection closed end=Eof",
        "INFO shoal_queued::server: shut down",
        "ERROR shoal_queued: failed to listen: Address already in use (os error #)",
    ] {
        assert_eq!(events.get(want), Some(&1), "{want:?} in {events:#?}");
    }
}
