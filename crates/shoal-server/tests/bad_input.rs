//! Malformed and hostile input: memcached's replies or a closed connection, never a panic,
//! a hang, unbounded memory, or damage to other clients' data. After each case a fresh
//! connection still works and previously stored data is intact.

mod common;

use common::{Conn, Server};
use std::time::Duration;

const SENTINEL: &[u8] = b"precious data";

/// A server holding a sentinel item that every case checks afterwards.
fn server() -> Server {
    let s = Server::start();
    s.conn().set("sentinel", SENTINEL);
    s
}

#[track_caller]
fn assert_intact(s: &Server) {
    let mut c = s.conn();
    c.assert_alive();
    assert_eq!(c.get("sentinel").as_deref(), Some(SENTINEL));
}

/// Resident memory of the server process, in KiB.
fn rss_kib(s: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", s.pid())).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// Deterministic pseudo-random bytes (xorshift), so failures reproduce.
fn garbage(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

#[test]
fn binary_garbage() {
    let s = server();
    for seed in 1..=8u64 {
        let mut c = s.conn();
        c.send_lossy(&garbage(64 * 1024, seed));
        // Replies (ERROR...) or a close, but within bounded time.
        let _ = c.drain_for(Duration::from_millis(200));
    }
    // Garbage lines with newlines: each is an unknown command, or a format error when
    // shorter than four bytes.
    let mut c = s.conn();
    c.rt(b"\x00\x01\x02\xff\xfe garbage\r\n", b"ERROR\r\n");
    c.rt(b"\x7f\x7f\r\n", b"ERROR\r\n");
    c.rt(b"\x7f\r\n", b"CLIENT_ERROR bad command line format\r\n");
    c.rt(b"\r\n", b"CLIENT_ERROR bad command line format\r\n");
    c.rt(b"\n", b"CLIENT_ERROR bad command line format\r\n");
    assert_intact(&s);
}

#[test]
fn half_sent_data_block_then_disconnect() {
    let s = server();
    {
        let mut c = s.conn();
        c.send(b"set sentinel 0 0 100\r\n");
        c.send(&[b'x'; 50]);
    }
    {
        // Header only, then a reset.
        let mut c = s.conn();
        c.send(b"set sentinel 0 0 10");
        c.reset();
    }
    {
        let mut c = s.conn();
        c.send(b"ms sentinel 100 T0\r\nabc");
        c.reset();
    }
    assert_intact(&s);
    // A partial block completed later is stored normally.
    let mut c = s.conn();
    c.send(b"set later 0 0 10\r\n01234");
    // Not synchronisation: a pause so the halves reach the server in separate reads.
    std::thread::sleep(Duration::from_millis(50));
    c.rt(b"56789\r\n", b"STORED\r\n");
    assert_eq!(c.get("later").as_deref(), Some(&b"0123456789"[..]));
}

#[test]
fn abrupt_disconnects_mid_pipeline() {
    let s = server();
    let big = vec![b'b'; 100_000];
    s.conn().set("big", &big);
    // Many large replies requested, none read, then a reset.
    for _ in 0..5 {
        let mut c = s.conn();
        let mut req = Vec::new();
        for _ in 0..200 {
            req.extend_from_slice(b"get big\r\n");
        }
        c.send(&req);
        c.reset();
    }
    // A pipeline cut in the middle of a command.
    for _ in 0..5 {
        let mut c = s.conn();
        c.send(b"set p1 0 0 1\r\n1\r\nset p2 0 0 1\r\n2\r\nget p1 p2\r\nset p3 0 0 5\r\n12");
        drop(c);
    }
    assert_intact(&s);
    let mut c = s.conn();
    assert_eq!(c.get("big").map(|v| v.len()), Some(100_000));
    assert_eq!(c.get("p2").as_deref(), Some(&b"2"[..]));
    assert_eq!(c.get("p3"), None);
}

#[test]
fn long_line_without_newline_closes() {
    let s = server();
    let mut c = s.conn();
    let mut line = b"set ".to_vec();
    line.extend(std::iter::repeat_n(b'a', 3000));
    c.send(&line);
    c.expect_closed();
    // A long get line is fine (memcached allows long multigets).
    let mut c = s.conn();
    let mut keys = String::from("get");
    for i in 0..500 {
        keys.push_str(&format!(" key{i:05}"));
    }
    keys.push_str(" sentinel\r\n");
    assert!(keys.len() > 3000);
    let mut expected = format!("VALUE sentinel 0 {}\r\n", SENTINEL.len()).into_bytes();
    expected.extend_from_slice(SENTINEL);
    expected.extend_from_slice(b"\r\nEND\r\n");
    c.rt(keys.as_bytes(), &expected);
    // ...but not an endless one.
    let mut c = s.conn();
    let mut endless = b"get".to_vec();
    for i in 0..300_000 {
        endless.extend_from_slice(format!(" k{i}").as_bytes());
    }
    c.send_lossy(&endless);
    c.expect_closed();
    assert!(rss_kib(&s) < 256 * 1024, "rss {} KiB", rss_kib(&s));
    assert_intact(&s);
}

#[test]
fn http_request_closes() {
    let s = server();
    let mut c = s.conn();
    c.send(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    c.expect_closed();
    let mut c = s.conn();
    c.send(b"POST /x HTTP/1.0\r\n");
    c.expect_closed();
    assert_intact(&s);
}

#[test]
fn bad_keys_and_lengths() {
    let s = server();
    let mut c = s.conn();
    let k251 = "k".repeat(251);
    // Once a storage line's length is read, its data block is swallowed on any error.
    c.rt(
        format!("set {k251} 0 0 1\r\nx\r\n").as_bytes(),
        b"CLIENT_ERROR bad command line format\r\n",
    );
    c.rt(
        format!("get ok {k251}\r\n").as_bytes(),
        b"CLIENT_ERROR bad command line format\r\n\r\n",
    );
    c.rt(
        format!("incr {k251} 1\r\n").as_bytes(),
        b"CLIENT_ERROR bad command line format\r\n",
    );
    c.rt(
        format!("touch {k251} 1\r\n").as_bytes(),
        b"CLIENT_ERROR bad command line format\r\n",
    );
    c.rt(
        b"set k 0 0 -1\r\n",
        b"CLIENT_ERROR bad command line format\r\n",
    );
    c.rt(
        b"set k 0 0 2147483647\r\n",
        b"CLIENT_ERROR bad command line format\r\n",
    );
    c.rt(
        b"set k 0 0 99999999999999999999\r\n",
        b"CLIENT_ERROR bad command line format\r\n",
    );
    c.rt(
        b"set k abc 0 1\r\nx\r\n",
        b"CLIENT_ERROR bad command line format\r\n",
    );
    c.rt(
        b"set k 0 abc 1\r\nx\r\n",
        b"CLIENT_ERROR bad command line format\r\n",
    );
    c.rt(
        b"set k 0 0\r\n",
        b"CLIENT_ERROR bad command line format\r\n",
    );
    c.rt(b"set\r\n", b"CLIENT_ERROR bad command line format\r\n");
    c.rt(b"bogus command\r\n", b"ERROR\r\n");
    // Bad data chunk: exactly len + 2 bytes are read, the rest is the next command
    // (here "e\r\n", too short to be one).
    c.rt(
        b"set sentinel 0 0 3\r\nabcde\r\n",
        b"CLIENT_ERROR bad data chunk\r\nCLIENT_ERROR bad command line format\r\n",
    );
    c.rt(b"set k 0 0 3\r\nabcXY", b"CLIENT_ERROR bad data chunk\r\n");
    c.assert_alive();
    assert_intact(&s);
}

#[test]
fn huge_lengths_are_swallowed_without_buffering() {
    let s = server();
    let mut c = s.conn();
    // Beyond -I (1m): an error, the data swallowed as it arrives.
    let len = 5_000_000usize;
    c.send(format!("set sentinel 0 0 {len}\r\n").as_bytes());
    c.expect(b"SERVER_ERROR object too large for cache\r\n");
    let chunk = vec![b'z'; 256 * 1024];
    let mut sent = 0;
    while sent < len {
        let n = chunk.len().min(len - sent);
        c.send(&chunk[..n]);
        sent += n;
    }
    c.send(b"\r\n");
    c.rt(b"get sentinel\r\n", b"END\r\n");
    s.conn().set("sentinel", SENTINEL);
    // A 2 GB claim is refused up front and never buffered.
    let before = rss_kib(&s);
    let mut c = s.conn();
    c.rt(
        b"set other 0 0 2000000000\r\n",
        b"SERVER_ERROR object too large for cache\r\n",
    );
    c.send(&chunk);
    drop(c);
    let mut c = s.conn();
    c.rt(
        b"ms other 2000000000 T0\r\n",
        b"SERVER_ERROR object too large for cache\r\n",
    );
    drop(c);
    let after = rss_kib(&s);
    assert!(
        after < before + 64 * 1024,
        "rss grew {before} -> {after} KiB"
    );
    assert_intact(&s);
}

#[test]
fn many_clients_connect_and_vanish() {
    let s = server();
    let addr = s.addr.expect("tcp");
    for i in 0..200 {
        let mut c = Conn::tcp(addr);
        match i % 4 {
            0 => {}
            1 => c.send(b"get sentinel\r\n"),
            2 => c.send(b"set x 0 0 5\r\nab"),
            _ => {
                c.send(b"mg sentinel v\r\n");
                c.reset();
                continue;
            }
        }
    }
    assert_intact(&s);
    let mut c = s.conn();
    // Closed connections are no longer counted (bounded wait: closes are asynchronous).
    let mut curr = u64::MAX;
    for _ in 0..100 {
        curr = c.stat("curr_connections");
        if curr <= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(curr <= 2, "curr_connections {curr}");
}
