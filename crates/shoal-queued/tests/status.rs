//! Kestrel's server status against the real binary: `READONLY` refuses sets (and deletes,
//! flushes) with `SERVER_ERROR` while gets work, `QUIESCENT` refuses every queue operation
//! but closing reads opened before; the status survives a restart. And MemcacheQ's
//! `stats reset`.

mod common;

use common::Server;

#[test]
fn readonly_and_quiescent_survive_a_restart() {
    let d = tempfile::tempdir().expect("tempdir");
    let s = Server::start(d.path(), &[]);
    let mut c = s.client();
    assert_eq!(c.cmd("status"), "UP");
    for m in ["a", "b", "c"] {
        assert_eq!(c.set("q", m.as_bytes()), "STORED");
    }
    assert_eq!(c.cmd("status readonly"), "END");
    assert_eq!(c.cmd("status"), "READONLY");
    assert_eq!(
        c.set("q", b"x"),
        "SERVER_ERROR server is read-only (status READONLY)"
    );
    assert_eq!(c.get_str("q").as_deref(), Some("a"), "gets work");
    assert!(c.cmd("delete q").starts_with("SERVER_ERROR "));
    assert!(c.cmd("flush q").starts_with("SERVER_ERROR "));
    assert_eq!(c.cmd("status spongebob"), "CLIENT_ERROR");
    assert_eq!(c.cmd("status down"), "CLIENT_ERROR", "DOWN cannot be set");
    drop(c);
    assert!(s.signal_and_wait(libc::SIGTERM).success());

    let s = Server::start(d.path(), &[]);
    let mut c = s.client();
    assert_eq!(c.cmd("status"), "READONLY", "kept across the restart");
    assert!(c.set("q", b"x").starts_with("SERVER_ERROR "));
    // A read opened before QUIESCENT may still be closed.
    assert_eq!(c.get_str("q/open").as_deref(), Some("b"));
    assert_eq!(c.cmd("status QUIESCENT"), "END");
    assert_eq!(
        c.cmd("get q"),
        "SERVER_ERROR server is quiescent (status QUIESCENT)"
    );
    c.send(b"get q/close\r\n");
    assert_eq!(c.line(), "END");
    assert!(c.stat("curr_items").is_some(), "stats still served");
    assert_eq!(c.cmd("status up"), "END");
    assert_eq!(c.get_str("q").as_deref(), Some("c"), "b was closed");
    assert_eq!(c.set("q", b"d"), "STORED");
}

#[test]
fn stats_reset() {
    let d = tempfile::tempdir().expect("tempdir");
    let s = Server::start(d.path(), &[]);
    let mut c = s.client();
    c.set("q", b"1");
    c.set("q", b"2");
    assert_eq!(c.get_str("q").as_deref(), Some("1"));
    assert_eq!(c.stat("cmd_set").as_deref(), Some("2"));
    assert_eq!(c.cmd("stats reset"), "RESET");
    assert_eq!(c.stat("cmd_set").as_deref(), Some("0"));
    assert_eq!(c.stat("get_hits").as_deref(), Some("0"));
    assert_eq!(c.stat("queue_q_total_items").as_deref(), Some("0"));
    assert_eq!(c.stat("queue_q_items").as_deref(), Some("1"), "sizes stay");
    assert_eq!(c.stat("curr_items").as_deref(), Some("1"));
}
