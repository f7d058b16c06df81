//! `expire_to` against the real binary (Kestrel's delay queue): messages that expire in
//! `delay` appear in `work`, in order, none lost or duplicated across a restart, and none
//! lost across `kill -9` (at-least-once: a kill between the copy and the removal may
//! move one twice).

mod common;

use common::{Client, Server};
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

fn start(d: &Path, extra: &[&str]) -> Server {
    let conf = d.join("queues.conf");
    std::fs::write(&conf, "delay expire_to=work max_expire_sweep=50\n").expect("write");
    let data = d.join("data");
    let mut args = vec!["--queue-config", conf.to_str().expect("utf8")];
    args.extend_from_slice(extra);
    Server::start(&data, &args)
}

/// Reads `work` until at least `n` messages arrived and then nothing more for 300 ms, or
/// until `limit`.
fn collect(c: &mut Client, n: usize, limit: Duration) -> Vec<String> {
    let deadline = Instant::now() + limit;
    let mut v = Vec::new();
    while Instant::now() < deadline {
        match c.get_str("work/t=300") {
            Some(m) => v.push(m),
            None if v.len() >= n => break,
            None => {}
        }
    }
    v
}

#[test]
fn delay_queue_moves_to_work_across_a_restart() {
    let d = tempfile::tempdir().expect("tempdir");
    let s = start(d.path(), &["--fsync", "always"]);
    let mut c = s.client();
    for i in 0..20 {
        assert_eq!(
            c.try_set("delay", 0, 2, format!("m{i}").as_bytes())
                .expect("set"),
            "STORED"
        );
    }
    assert_eq!(c.get_str("work"), None, "not yet expired");
    drop(c);
    // Restarted before (or while) they expire.
    assert!(s.signal_and_wait(libc::SIGTERM).success());
    let s = start(d.path(), &["--fsync", "always"]);
    let mut c = s.client();
    let got = collect(&mut c, 20, Duration::from_secs(6));
    let want: Vec<String> = (0..20).map(|i| format!("m{i}")).collect();
    assert_eq!(got, want, "every message once, in order");
    assert_eq!(c.get_str("delay"), None);
    assert_eq!(c.stat("queue_delay_items").as_deref(), Some("0"));
}

#[test]
fn kill9_while_moving_loses_nothing() {
    let d = tempfile::tempdir().expect("tempdir");
    let s = start(d.path(), &["--fsync", "always"]);
    let mut c = s.client();
    let n = 2000;
    for i in 0..n {
        assert_eq!(
            c.try_set("delay", 0, 1, format!("m{i}").as_bytes())
                .expect("set"),
            "STORED"
        );
    }
    drop(c);
    // Kill once the moves (50 per second) have begun.
    let mut w = s.client();
    let deadline = Instant::now() + Duration::from_secs(10);
    while w.stat("queue_work_items").as_deref().unwrap_or("0") == "0" {
        assert!(Instant::now() < deadline, "nothing moved");
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(w);
    s.kill9();
    // max_expire_sweep off, so the rest moves at once after the restart.
    let conf = d.path().join("queues.conf");
    std::fs::write(&conf, "delay expire_to=work\n").expect("write");
    let data = d.path().join("data");
    let s = Server::start(&data, &["--queue-config", conf.to_str().expect("utf8")]);
    let mut c = s.client();
    let got = collect(&mut c, n, Duration::from_secs(15));
    let mut seen: HashMap<String, usize> = HashMap::new();
    for m in &got {
        *seen.entry(m.clone()).or_default() += 1;
    }
    for i in 0..n {
        assert!(seen.contains_key(&format!("m{i}")), "m{i} lost");
    }
    // At-least-once: at most the batch in flight at the kill is moved twice.
    assert!(got.len() <= n + 50, "{} moved for {n}", got.len());
    assert_eq!(c.get_str("delay"), None);
}

/// Kestrel's `flush_expired` moves at once what has expired, rather than at the next sweep.
#[test]
fn flush_expired_moves_at_once() {
    let d = tempfile::tempdir().expect("tempdir");
    let s = start(d.path(), &[]);
    let mut c = s.client();
    let mut w = s.client();
    // Read before the sweep can: a sweep may come first, then flush_expired finds fewer.
    for i in 0..3 {
        assert_eq!(
            c.try_set("delay", 0, 1, format!("m{i}").as_bytes())
                .expect("set"),
            "STORED"
        );
    }
    std::thread::sleep(Duration::from_millis(2100));
    let n: usize = c.cmd("flush_expired delay").parse().expect("a count");
    assert!(n <= 3);
    assert_eq!(
        collect(&mut w, 3, Duration::from_secs(3)),
        ["m0", "m1", "m2"]
    );
}
