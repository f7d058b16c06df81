//! Kestrel's `monitor` and `confirm`, and several open reads per connection
//! (`--max-open-transactions`), against the real binary.

mod common;

use common::{Client, Server};
use std::time::{Duration, Instant};

/// Reads a `monitor` reply: the values, then `END`.
fn monitor_reply(c: &mut Client, q: &str) -> Vec<String> {
    let mut v = Vec::new();
    loop {
        let l = c.line();
        if l == "END" {
            return v;
        }
        let parts: Vec<&str> = l.split(' ').collect();
        assert_eq!(parts[..3], ["VALUE", q, "0"], "{l}");
        let n: usize = parts[3].parse().expect("length");
        v.push(String::from_utf8(c.bytes(n)).expect("utf8"));
        assert_eq!(c.bytes(2), b"\r\n");
    }
}

#[test]
fn monitor_streams_confirm_consumes_disconnect_returns() {
    let d = tempfile::tempdir().expect("tempdir");
    let s = Server::start(d.path(), &["--max-open-transactions", "10"]);
    let mut p = s.client();
    for i in 0..12 {
        assert_eq!(p.set("q", format!("m{i}").as_bytes()), "STORED");
    }
    let mut c = s.client();
    c.send(b"monitor q 1 10\r\n");
    let want: Vec<String> = (0..10).map(|i| format!("m{i}")).collect();
    assert_eq!(monitor_reply(&mut c, "q"), want, "up to 10, then END");
    assert_eq!(p.stat("queue_q_open_transactions").as_deref(), Some("10"));
    assert_eq!(c.cmd("confirm q 10"), "END");
    assert_eq!(p.stat("queue_q_open_transactions").as_deref(), Some("0"));
    assert_eq!(p.stat("queue_q_items").as_deref(), Some("2"));
    assert_eq!(c.cmd("confirm q 1"), "ERROR", "none open");

    // A monitor waits for what arrives, sending each as it comes, until its time is up.
    let started = Instant::now();
    c.send(b"monitor q 1\r\n");
    let got = monitor_reply(&mut c, "q");
    assert_eq!(got, ["m10", "m11"]);
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "waited out its second"
    );
    // Unconfirmed reads go back to the head when the client disconnects, in order.
    drop(c);
    let deadline = Instant::now() + Duration::from_secs(5);
    while p.stat("queue_q_items").as_deref() != Some("2") {
        assert!(Instant::now() < deadline, "the reads never came back");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(p.get_str("q").as_deref(), Some("m10"));
    assert_eq!(p.get_str("q").as_deref(), Some("m11"));
}

#[test]
fn several_open_reads_up_to_the_limit() {
    let d = tempfile::tempdir().expect("tempdir");
    let s = Server::start(d.path(), &["--max-open-transactions", "2"]);
    let mut c = s.client();
    for m in ["a", "b", "c"] {
        c.set("q", m.as_bytes());
    }
    assert_eq!(c.get_str("q/open").as_deref(), Some("a"));
    assert_eq!(c.get_str("q/open").as_deref(), Some("b"));
    // `/close` consumes the oldest; `/abort` gives the oldest back.
    c.send(b"get q/close\r\n");
    assert_eq!(c.line(), "END");
    c.send(b"get q/abort\r\n");
    assert_eq!(c.line(), "END");
    assert_eq!(c.get_str("q/peek").as_deref(), Some("b"));
    assert_eq!(c.get_str("q/open").as_deref(), Some("b"));
    assert_eq!(c.get_str("q/open").as_deref(), Some("c"));
    // A third is one too many: Kestrel's ERROR and a disconnect; both go back.
    c.send(b"get q/open\r\n");
    assert_eq!(c.line(), "ERROR");
    assert!(c.closed());
    let mut p = s.client();
    let deadline = Instant::now() + Duration::from_secs(5);
    while p.get_str("q/peek").as_deref() != Some("b") {
        assert!(Instant::now() < deadline, "the reads never came back");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(p.get_str("q").as_deref(), Some("b"));
    assert_eq!(p.get_str("q").as_deref(), Some("c"));
}
