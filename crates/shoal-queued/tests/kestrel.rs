//! Kestrel clients against the real binary: Kestrel 2.4's exact replies for requests that
//! carry read options (and for every request under `--kestrel`), as Grabby Hands and
//! kestrel-client parse them.

mod common;

use common::Server;
use std::time::{Duration, Instant};

/// Peeks until `want` is at the head of `q`: a disconnected client's open read goes back
/// a moment after its socket closes.
fn wait_for_head(c: &mut common::Client, q: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while c.get_str(&format!("{q}/peek")).as_deref() != Some(want) {
        assert!(Instant::now() < deadline, "{want} never came back to {q}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// Grabby Hands' exchange, byte for byte: it parses exactly `"VALUE " + queue + " 0 "`.
#[test]
fn grabby_hands_exchange() {
    let d = dir();
    let s = Server::start(d.path(), &[]);
    let mut c = s.client();
    c.send(b"set q 5 0 5\r\nhello\r\n");
    assert_eq!(c.bytes(8), b"STORED\r\n");
    let want = b"VALUE q 0 5\r\nhello\r\nEND\r\n";
    c.send(b"get q/t=10/close/open\r\n");
    assert_eq!(c.bytes(want.len()), want);
    c.send(b"get q/abort\r\n");
    assert_eq!(c.bytes(5), b"END\r\n");
    // Aborted: back at the head, and read again the same way.
    c.send(b"get q/t=10/close/open\r\n");
    assert_eq!(c.bytes(want.len()), want);
    // Closing the last read with nothing behind it.
    c.send(b"get q/t=10/close/open\r\n");
    assert_eq!(c.bytes(5), b"END\r\n");
    c.send(b"get q/close\r\n");
    assert_eq!(c.bytes(5), b"END\r\n");
    // `/peek` and `/t=` alone are Kestrel requests too; a plain get keeps MemcacheQ's reply
    // (the key and the flags given at set).
    c.send(b"set q 5 0 2\r\nhi\r\nget q/peek\r\nget q\r\n");
    let want = b"STORED\r\nVALUE q 0 2\r\nhi\r\nEND\r\nVALUE q 5 2\r\nhi\r\nEND\r\n";
    assert_eq!(c.bytes(want.len()), want);
}

/// Kestrel refuses a second open read on a queue, and a plain read of a queue the
/// connection holds an open read on, with `ERROR` and a disconnect; the open read then
/// goes back to the head.
#[test]
fn kestrel_transaction_errors() {
    let d = dir();
    let s = Server::start(d.path(), &[]);
    let mut c = s.client();
    for m in ["a", "b"] {
        assert_eq!(c.set("k", m.as_bytes()), "STORED");
    }
    assert_eq!(c.get_str("k/open").as_deref(), Some("a"));
    // Peeking with a read open is allowed.
    assert_eq!(c.get_str("k/peek").as_deref(), Some("b"));
    assert_eq!(c.cmd("get k/open"), "ERROR");
    assert!(c.closed());
    let mut c = s.client();
    wait_for_head(&mut c, "k", "a");
    assert_eq!(
        c.get_str("k/open").as_deref(),
        Some("a"),
        "returned on disconnect"
    );
    assert_eq!(c.cmd("get k/t=10"), "ERROR");
    assert!(c.closed());
    let mut c = s.client();
    wait_for_head(&mut c, "k", "a");
    assert_eq!(c.get_str("k/open").as_deref(), Some("a"));
    // A plain MemcacheQ get is not a Kestrel request: it reads past the open read.
    assert_eq!(c.get_str("k").as_deref(), Some("b"));
    assert_eq!(c.get("k/close"), None);
    assert_eq!(c.get("k"), None);
}

/// `--kestrel`: every request is answered as Kestrel does.
#[test]
fn kestrel_flag_for_every_request() {
    let d = dir();
    let s = Server::start(d.path(), &["--kestrel"]);
    let mut c = s.client();
    assert_eq!(c.try_set("q", 5, 0, b"one").expect("set"), "STORED");
    c.send(b"get q\r\n");
    let want = b"VALUE q 0 3\r\none\r\nEND\r\n";
    assert_eq!(c.bytes(want.len()), want);
    // Kestrel's exptime rule: from 1,000,000 s on it is a unix time, so 20 days is one
    // in 1970, already past (memcached's rule would read 20 days from now).
    assert_eq!(
        c.try_set("q", 0, 20 * 86_400, b"gone").expect("set"),
        "STORED"
    );
    assert_eq!(c.try_set("q", 0, 999_999, b"later").expect("set"), "STORED");
    assert_eq!(c.get_str("q").as_deref(), Some("later"));
    assert_eq!(c.set("q", b"x"), "STORED");
    assert_eq!(c.cmd("flush_all"), "Flushed all queues.");
    assert_eq!(c.get("q"), None);
    assert_eq!(c.cmd("delete q"), "END");
    assert_eq!(c.cmd("delete nosuch"), "END");
    // A plain get with a read open on the queue: Kestrel's ERROR and a disconnect.
    assert_eq!(c.set("q", b"y"), "STORED");
    assert_eq!(c.get_str("q/open").as_deref(), Some("y"));
    assert_eq!(c.cmd("get q"), "ERROR");
    assert!(c.closed());
    let mut c = s.client();
    assert_eq!(c.cmd("bogus"), "CLIENT_ERROR");
    assert!(c.closed());
    // Commands the parser knows but a queue has no use for: the same as Kestrel's
    // catch-all, CLIENT_ERROR and a disconnect.
    for cmd in ["incr q 1", "verbosity 1", "touch q 10", "gets q"] {
        let mut c = s.client();
        assert_eq!(c.cmd(cmd), "CLIENT_ERROR", "{cmd}");
        assert!(c.closed(), "{cmd}");
    }
    let mut c = s.client();
    wait_for_head(&mut c, "q", "y");
    assert_eq!(
        c.get_str("q").as_deref(),
        Some("y"),
        "the open read came back"
    );
}

/// `stats` and `dump_stats` with Kestrel's names and meanings: per queue `items bytes
/// total_items logsize expired_items mem_items mem_bytes age` (milliseconds the last
/// message read had waited) `discarded waiters open_transactions`; server `curr_items`
/// and `total_items` (ever added).
#[test]
fn kestrel_stats() {
    let d = dir();
    let s = Server::start(d.path(), &[]);
    let mut c = s.client();
    let num = |c: &mut common::Client, k: &str| -> u64 {
        c.stat(k)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("stat {k}"))
    };
    for m in ["aaaa", "bb", "c"] {
        assert_eq!(c.set("k", m.as_bytes()), "STORED");
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(c.get_str("k").as_deref(), Some("aaaa"));
    assert_eq!(c.get_str("k/open").as_deref(), Some("bb"));
    let mut waiter = s.client();
    waiter.send(b"get idle/t=5000\r\n");
    let deadline = Instant::now() + Duration::from_secs(5);
    // The queue appears when the read arrives.
    while c.stat("queue_idle_waiters").as_deref() != Some("1") {
        assert!(Instant::now() < deadline, "waiter not counted");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(num(&mut c, "queue_k_items"), 1, "open reads are not items");
    assert_eq!(num(&mut c, "queue_k_bytes"), 1, "nor their bytes");
    assert_eq!(num(&mut c, "queue_k_total_items"), 3, "ever added");
    assert_eq!(num(&mut c, "queue_k_mem_items"), 1);
    assert_eq!(num(&mut c, "queue_k_mem_bytes"), 1);
    assert_eq!(num(&mut c, "queue_k_open_transactions"), 1);
    assert_eq!(num(&mut c, "queue_k_expired_items"), 0);
    assert_eq!(num(&mut c, "queue_k_discarded"), 0);
    assert_eq!(num(&mut c, "queue_k_waiters"), 0);
    assert!(num(&mut c, "queue_k_logsize") > 0);
    let age = num(&mut c, "queue_k_age");
    assert!((300..60_000).contains(&age), "age in milliseconds: {age}");
    assert_eq!(num(&mut c, "curr_items"), 1);
    assert_eq!(num(&mut c, "total_items"), 3);
    // dump_stats: the same, Kestrel's fields first.
    let lines = c.lines_until_end("dump_stats");
    let k = lines
        .iter()
        .position(|l| l == "queue 'k' {")
        .expect("queue k");
    let fields: Vec<&str> = lines[k + 1..k + 12]
        .iter()
        .map(|l| l.trim_start().split('=').next().unwrap_or_default())
        .collect();
    assert_eq!(
        fields,
        [
            "items",
            "bytes",
            "total_items",
            "logsize",
            "expired_items",
            "mem_items",
            "mem_bytes",
            "age",
            "discarded",
            "waiters",
            "open_transactions"
        ]
    );
    // Emptied, the age is 0 as in Kestrel.
    assert_eq!(c.get("k/close"), None);
    assert_eq!(c.get_str("k").as_deref(), Some("c"));
    assert_eq!(num(&mut c, "queue_k_age"), 0);
    assert_eq!(c.set("idle", b"x"), "STORED");
    assert_eq!(waiter.line(), "VALUE idle 0 1");
}

/// `flush <q>` (and `flush_all`) takes only what is waiting, as Kestrel's: open reads,
/// other connections' and the flusher's own, stay with their holders, to be closed
/// (consumed) or aborted (back at the head), across a restart too.
#[test]
fn flush_leaves_open_reads() {
    let d = dir();
    let s = Server::start(d.path(), &[]);
    let mut a = s.client();
    let mut b = s.client();
    for m in ["one", "two", "three", "four"] {
        assert_eq!(b.set("q", m.as_bytes()), "STORED");
    }
    assert_eq!(a.get_str("q/open").as_deref(), Some("one"));
    assert_eq!(b.get_str("q/open").as_deref(), Some("two"));
    assert_eq!(b.cmd("flush q"), "END");
    assert_eq!(b.stat("queue_q_items").as_deref(), Some("0"));
    assert_eq!(b.stat("queue_q_open_transactions").as_deref(), Some("2"));
    // b's own read is still open: closing it consumes it.
    assert_eq!(b.get("q/close"), None);
    assert_eq!(b.cmd("flush_all"), "OK");
    assert_eq!(b.stat("queue_q_open_transactions").as_deref(), Some("1"));
    // a's read, aborted, is back at the head.
    assert_eq!(a.get("q/abort"), None);
    assert_eq!(b.get_str("q/peek").as_deref(), Some("one"));
    assert_eq!(a.get_str("q/open").as_deref(), Some("one"));
    assert_eq!(b.cmd("flush q"), "END");
    drop(s);
    // Still open at the crash (drop kills): delivered again after the restart, alone.
    let s = Server::start(d.path(), &[]);
    let mut c = s.client();
    assert_eq!(c.get_str("q").as_deref(), Some("one"));
    assert_eq!(c.get("q"), None);
}

/// Kestrel's transaction, flush and queue-count stats.
#[test]
fn kestrel_transaction_flush_and_queue_stats() {
    let d = dir();
    let s = Server::start(d.path(), &[]);
    let mut c = s.client();
    for m in ["a", "b"] {
        c.set("q", m.as_bytes());
    }
    assert_eq!(c.get_str("q/open").as_deref(), Some("a"));
    c.send(b"get q/abort\r\n");
    assert_eq!(c.line(), "END");
    assert_eq!(c.get_str("q/open").as_deref(), Some("a"));
    c.send(b"get q/close\r\n");
    assert_eq!(c.line(), "END");
    assert_eq!(c.cmd("flush q"), "END");
    c.set("other", b"x");
    assert_eq!(c.cmd("delete other"), "DELETED");
    let stat = |c: &mut common::Client, k: &str| c.stat(k).unwrap_or_default();
    assert_eq!(stat(&mut c, "queue_q_transactions"), "2");
    assert_eq!(stat(&mut c, "queue_q_canceled_transactions"), "1");
    assert_eq!(stat(&mut c, "queue_q_total_flushes"), "1");
    assert_eq!(stat(&mut c, "queue_creates"), "2");
    assert_eq!(stat(&mut c, "queue_deletes"), "1");
    assert_eq!(stat(&mut c, "queue_expires"), "0");
}
