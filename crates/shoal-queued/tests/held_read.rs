//! The disk stays bounded under a read held open (issue 27): one connection holds an open
//! read while others push many segments' worth of messages through the queue; the held
//! message is carried forward so the segments behind it can go, and its fate across a
//! `kill -9` (delivered again, exactly once), a `/close` (gone) and an `/abort` (back at
//! the head) is the same as if it had never moved.

mod common;

use common::{Client, Server};
use std::path::Path;

/// The smallest segment, so that ten segments' worth of traffic under `--fsync always`
/// (an fsync per reply) takes about a second.
const SEGMENT: u64 = 4 << 10;
/// Ten segments' worth of 200-byte messages (232 bytes each in the log).
const MESSAGES: u64 = 10 * SEGMENT / 232;

/// `--fsync always`: the old segment goes once the carried copy is durable, which under
/// an interval policy waits for the next fsync however much is written meanwhile (the
/// bound is then about two segments plus what arrives during one fsync: see queue.md).
fn start(dir: &Path) -> Server {
    Server::start(dir, &["--segment-size", "4k", "--fsync", "always"])
}

fn stat(c: &mut Client, name: &str) -> u64 {
    c.stat(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("stat {name}"))
}

/// Opens `held` on `holder`, pushes [`MESSAGES`] through `q` on `worker`; returns the most
/// disk the queue used, measured every 5 messages.
fn push_past_held_read(holder: &mut Client, worker: &mut Client) -> u64 {
    assert_eq!(worker.set("q", b"held"), "STORED");
    assert_eq!(holder.get_str("q/open").as_deref(), Some("held"));
    let payload = [b'x'; 200];
    let mut max_disk = 0;
    for i in 0..MESSAGES {
        assert_eq!(worker.set("q", &payload), "STORED");
        assert_eq!(worker.get("q").map(|(_, d)| d.len()), Some(200));
        if i % 5 == 0 {
            max_disk = max_disk.max(stat(worker, "queue_q_disk_bytes"));
        }
    }
    max_disk
}

fn files(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("queues/q"))
        .expect("queue dir")
        .count()
}

#[test]
fn held_read_keeps_disk_bounded_and_survives_kill9() {
    let d = tempfile::tempdir().expect("tempdir");
    let s = start(d.path());
    let mut holder = s.client();
    let mut worker = s.client();
    let max_disk = push_past_held_read(&mut holder, &mut worker);
    // Without the carry the log would hold all ten segments.
    assert!(max_disk <= 2 * SEGMENT + 1024, "disk reached {max_disk}");
    assert!(files(d.path()) <= 3, "{} segment files", files(d.path()));
    assert!(stat(&mut worker, "queue_q_carried") >= 5);
    assert_eq!(stat(&mut worker, "queue_q_items"), 0);
    s.kill9();
    let s = start(d.path());
    let mut c = s.client();
    assert_eq!(c.get_str("q").as_deref(), Some("held"), "delivered again");
    assert_eq!(c.get("q"), None, "exactly once");
}

#[test]
fn carried_read_closed_is_gone_aborted_is_back_at_the_head() {
    let d = tempfile::tempdir().expect("tempdir");
    let s = start(d.path());
    let mut holder = s.client();
    let mut worker = s.client();
    push_past_held_read(&mut holder, &mut worker);
    assert_eq!(holder.get("q/close"), None);
    s.kill9();
    let s = start(d.path());
    let mut holder = s.client();
    let mut worker = s.client();
    assert_eq!(worker.get("q"), None, "closed: consumed for good");
    push_past_held_read(&mut holder, &mut worker);
    assert_eq!(worker.set("q", b"after"), "STORED");
    assert_eq!(holder.get("q/abort"), None);
    assert_eq!(worker.get_str("q").as_deref(), Some("held"));
    assert_eq!(worker.get_str("q").as_deref(), Some("after"));
    assert_eq!(worker.get("q"), None);
}

/// `kill -9` while messages stream past a held read, so the kill can land before, during
/// or after a carry: after the restart the held message is there exactly once, no
/// message received before the kill comes back, and no message comes twice.
#[test]
fn kill9_during_carries_loses_and_duplicates_nothing() {
    let d = tempfile::tempdir().expect("tempdir");
    let s = start(d.path());
    let mut holder = s.client();
    let mut worker = s.client();
    assert_eq!(worker.set("q", b"held"), "STORED");
    assert_eq!(holder.get_str("q/open").as_deref(), Some("held"));
    let addr = s.addr;
    let load = std::thread::spawn(move || {
        let mut c = Client::connect(addr);
        let mut received = Vec::new();
        let mut stored = Vec::new();
        let pad = "x".repeat(180);
        for i in 0u64.. {
            let m = format!("{i}:{pad}");
            match c.try_set("q", 0, 0, m.as_bytes()) {
                Ok(r) if r == "STORED" => stored.push(i),
                _ => break,
            }
            match c.try_get("q") {
                Ok(Some((_, d))) => received.push(String::from_utf8(d).expect("utf8")),
                Ok(None) => panic!("the message just stored is missing"),
                Err(_) => break,
            }
        }
        (stored, received)
    });
    std::thread::sleep(std::time::Duration::from_millis(400));
    let carried = stat(&mut worker, "queue_q_carried");
    s.kill9();
    let (stored, received) = load.join().expect("load thread");
    assert!(carried >= 2, "the load crossed carries ({carried})");
    assert!(stored.len() > 100, "{} stored", stored.len());
    let s = start(d.path());
    let mut c = s.client();
    let mut after = Vec::new();
    while let Some(m) = c.get_str("q") {
        after.push(m);
    }
    assert_eq!(
        after.iter().filter(|m| *m == "held").count(),
        1,
        "held exactly once: {after:?}"
    );
    for m in after.iter().filter(|m| *m != "held") {
        assert!(
            !received.contains(m),
            "received before the kill, back after it"
        );
    }
    // At most the last one stored (whose get the kill cut off) is left, besides held.
    assert!(after.len() <= 2, "{after:?}");
}
