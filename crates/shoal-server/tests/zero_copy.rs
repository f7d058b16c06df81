//! Values sent from segment memory (zero-copy replies) against a real shoald.
//!
//! Hits of 4 KB and more are not copied into the reply: the reply refers to the value in
//! its segment, pinned until written. These tests churn a small memory so that segments
//! are evicted and reused all the time while replies refer into them, and check every
//! value read, byte for byte, in the text, meta and binary protocols; and that a client
//! that stops reading does not keep memory from being reused.

mod common;

use common::binproto::{self as bp, op};
use common::Server;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

const KEYS: u64 = 24;
const RUN: Duration = Duration::from_millis(2500);

/// The value version `version` of key `key` has: `key:version:` then bytes that depend on
/// both, so a torn value, another key's value or reused memory is caught anywhere in it.
fn value_for(key: u64, version: u64) -> Vec<u8> {
    let len = 4096 + ((key * 7919 + version * 104_729) % 200_000) as usize;
    let mut v = format!("k{key}:{version}:").into_bytes();
    let mut i = v.len() as u64;
    while v.len() < len {
        v.push(((version.wrapping_mul(31) + key + i) % 251) as u8);
        i += 1;
    }
    v
}

/// Checks a value read for `key` against what its embedded version says it must be.
fn check(key: u64, value: &[u8]) {
    let text = String::from_utf8_lossy(&value[..value.len().min(40)]).to_string();
    let mut parts = text.splitn(3, ':');
    let k = parts.next().unwrap_or_default();
    let version: u64 = parts
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("key {key}: no version in {text:?}"));
    assert_eq!(k, format!("k{key}"), "another key's value");
    let want = value_for(key, version);
    if value != want.as_slice() {
        let at = value.iter().zip(&want).position(|(a, b)| a != b);
        panic!(
            "key {key} version {version}: {} bytes read, {} expected, first difference at {at:?}",
            value.len(),
            want.len()
        );
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Reads exactly `n` bytes, in small reads with pauses: a slow reader, so replies are
/// still being written (from pinned segments) while writers evict.
fn read_slowly(s: &mut TcpStream, n: usize, buf: &mut Vec<u8>) {
    let start = buf.len();
    buf.resize(start + n, 0);
    let mut got = 0;
    while got < n {
        let end = (got + 48 * 1024).min(n);
        let k = s.read(&mut buf[start + got..start + end]).expect("read");
        assert!(k > 0, "server closed mid-reply");
        got += k;
        if got % 5 == 0 {
            thread::sleep(Duration::from_micros(200));
        }
    }
}

fn read_line(s: &mut TcpStream) -> Vec<u8> {
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        s.read_exact(&mut b).expect("read line");
        line.push(b[0]);
        assert!(line.len() < 1024, "runaway line");
    }
    line.truncate(line.len() - 2);
    line
}

/// Sets values until told to stop; returns (stored, refused). A set may be refused with
/// memcached's `SERVER_ERROR out of memory storing object` when every segment it could
/// take is pinned by replies in flight for longer than the store waits (memcached refuses
/// likewise when every item it could evict is referenced); anything else fails.
fn writer(addr: SocketAddr, t: u64, stop: &AtomicBool, versions: &AtomicU64) -> (u64, u64) {
    let mut s = connect(addr);
    let (mut stored, mut refused) = (0, 0);
    while !stop.load(Ordering::Relaxed) {
        let version = versions.fetch_add(1, Ordering::Relaxed);
        let key = (version * 13 + t) % KEYS;
        let v = value_for(key, version);
        let mut req = format!("set k{key} 0 0 {}\r\n", v.len()).into_bytes();
        req.extend_from_slice(&v);
        req.extend_from_slice(b"\r\n");
        s.write_all(&req).expect("set");
        match &read_line(&mut s)[..] {
            b"STORED" => stored += 1,
            b"SERVER_ERROR out of memory storing object" => refused += 1,
            other => panic!("set answered {}", String::from_utf8_lossy(other)),
        }
    }
    (stored, refused)
}

/// Text multi-gets of every key, read slowly; returns the values checked.
fn text_reader(addr: SocketAddr, stop: &AtomicBool) -> u64 {
    let mut s = connect(addr);
    let mut checked = 0;
    let all: Vec<String> = (0..KEYS).map(|k| format!("k{k}")).collect();
    let req = format!("get {}\r\n", all.join(" "));
    let mut buf = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        s.write_all(req.as_bytes()).expect("get");
        loop {
            let line = read_line(&mut s);
            if line == b"END" {
                break;
            }
            let line = String::from_utf8(line).expect("ascii header");
            let f: Vec<&str> = line.split(' ').collect();
            assert_eq!(f[0], "VALUE", "{line}");
            let key: u64 = f[1][1..].parse().expect("key");
            let len: usize = f[3].parse().expect("len");
            buf.clear();
            read_slowly(&mut s, len + 2, &mut buf);
            assert_eq!(&buf[len..], b"\r\n");
            check(key, &buf[..len]);
            checked += 1;
        }
    }
    checked
}

/// Meta gets with values, pipelined in batches, read slowly.
fn meta_reader(addr: SocketAddr, stop: &AtomicBool) -> u64 {
    let mut s = connect(addr);
    let mut checked = 0;
    let mut req = Vec::new();
    for k in 0..KEYS {
        req.extend_from_slice(format!("mg k{k} v k q\r\n").as_bytes());
    }
    req.extend_from_slice(b"mn\r\n");
    let mut buf = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        s.write_all(&req).expect("mg");
        loop {
            let line = String::from_utf8(read_line(&mut s)).expect("ascii");
            if line == "MN" {
                break;
            }
            let f: Vec<&str> = line.split(' ').collect();
            assert_eq!(f[0], "VA", "{line}");
            let len: usize = f[1].parse().expect("len");
            let key: u64 = f
                .iter()
                .find_map(|t| t.strip_prefix("kk"))
                .and_then(|k| k.parse().ok())
                .expect("k flag");
            buf.clear();
            read_slowly(&mut s, len + 2, &mut buf);
            check(key, &buf[..len]);
            checked += 1;
        }
    }
    checked
}

/// Binary GETKQ of every key then NOOP, read slowly.
fn binary_reader(addr: SocketAddr, stop: &AtomicBool) -> u64 {
    let mut s = connect(addr);
    let mut checked = 0;
    let mut req = Vec::new();
    for k in 0..KEYS {
        let key = format!("k{k}");
        req.extend_from_slice(&bp::packet(
            op::GETKQ,
            &[],
            key.as_bytes(),
            &[],
            k as u32,
            0,
        ));
    }
    req.extend_from_slice(&bp::packet(op::NOOP, &[], &[], &[], 999, 0));
    let mut buf = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        s.write_all(&req).expect("getkq");
        loop {
            buf.clear();
            read_slowly(&mut s, 24, &mut buf);
            let opcode = buf[1];
            let key_len = u16::from_be_bytes([buf[2], buf[3]]) as usize;
            let extras = buf[4] as usize;
            let body = u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize;
            buf.clear();
            read_slowly(&mut s, body, &mut buf);
            if opcode == op::NOOP {
                break;
            }
            let key = &buf[extras..extras + key_len];
            let key: u64 = std::str::from_utf8(&key[1..]).unwrap().parse().unwrap();
            check(key, &buf[extras + key_len..]);
            checked += 1;
        }
    }
    checked
}

#[test]
fn values_sent_from_segment_memory_stay_intact_while_memory_churns() {
    // 4 MB: four 1 MB segments, refilled many times a second by two writers.
    let server = Server::with_args(&["-m", "4"]);
    let stop = AtomicBool::new(false);
    let versions = AtomicU64::new(1);
    let addr = server.addr.expect("tcp");
    let started = Instant::now();
    let (sets, refused, checked) = thread::scope(|scope| {
        let writers: Vec<_> = (0..2)
            .map(|t| {
                let (stop, versions) = (&stop, &versions);
                scope.spawn(move || writer(addr, t, stop, versions))
            })
            .collect();
        let readers = vec![
            scope.spawn(|| text_reader(addr, &stop)),
            scope.spawn(|| text_reader(addr, &stop)),
            scope.spawn(|| meta_reader(addr, &stop)),
            scope.spawn(|| binary_reader(addr, &stop)),
        ];
        while started.elapsed() < RUN
            && !writers.iter().any(|h| h.is_finished())
            && !readers.iter().any(|h| h.is_finished())
        {
            thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, Ordering::Relaxed);
        let (sets, refused) = writers
            .into_iter()
            .map(|h| h.join().unwrap())
            .fold((0, 0), |(a, b), (s, r)| (a + s, b + r));
        let checked: Vec<u64> = readers.into_iter().map(|h| h.join().unwrap()).collect();
        (sets, refused, checked)
    });
    let mut c = server.conn();
    let evictions = c.stat("evictions");
    eprintln!(
        "zero-copy churn: {sets} sets, {refused} refused, {checked:?} values checked, \
         {evictions} evictions"
    );
    // Rare: only while readers hold every segment eviction could take.
    assert!(refused * 20 <= sets, "{refused} of {sets} sets refused");
    assert!(
        evictions > 100,
        "memory was not churned ({evictions} evictions)"
    );
    assert!(
        checked.iter().all(|&n| n > 20),
        "every reader checked values: {checked:?}"
    );
    c.assert_alive();
}

#[test]
fn a_client_that_stops_reading_does_not_hold_memory_back() {
    // Four 1 MB segments. A client asks for a reply of large values spread over the whole
    // memory and never reads it: the reply cannot refer into segments while it waits, or
    // every segment would stay pinned and no set could find room.
    let server = Server::with_args(&["-m", "4"]);
    let mut c = server.conn();
    let big = vec![b'x'; 300_000];
    for k in 0..10 {
        c.set(&format!("big{k}"), &big);
    }
    let mut stalled = connect(server.addr.expect("tcp"));
    let keys: Vec<String> = (0..10).map(|k| format!("big{k}")).collect();
    let req = format!("get {}\r\n", keys.join(" ")).repeat(20);
    stalled.write_all(req.as_bytes()).expect("get");
    // Wait (the socket's read timeout bounds it) until the reply has started to arrive:
    // the multi-get is being served. The 60 MB it asks for are far more than the
    // sockets buffer, so the reply stalls while the sets below run. Peeking reads
    // nothing, so the check at the end still sees the reply from its first byte.
    let mut first_byte = [0u8; 1];
    assert_eq!(stalled.peek(&mut first_byte).expect("reply starts"), 1);
    // Refill memory several times over: every set must be stored.
    let v = vec![b'y'; 200_000];
    for round in 0..100 {
        let key = format!("new{}", round % 30);
        c.send(format!("set {key} 0 0 {}\r\n", v.len()).as_bytes());
        c.send(&v);
        c.send(b"\r\n");
        let line = c.read_line();
        assert_eq!(
            common::show(&line),
            "STORED\r\n",
            "set {round} while a reader stalls"
        );
    }
    assert!(c.stat("evictions") > 10);
    // The stalled client still gets a well-formed reply once it reads.
    let mut first = [0u8; 32];
    stalled
        .read_exact(&mut first)
        .expect("stalled reader gets its reply");
    assert!(first.starts_with(b"VALUE big0 0 300000\r\n"));
}

#[test]
fn data_path_settings_are_reported_and_the_threshold_is_honoured() {
    let uring = shoal_net::uring::supported();
    let server = Server::with_args(&["-m", "16", "-o", "io_uring,zero_copy_min=1024"]);
    let mut c = server.conn();
    let st = c.stats("settings");
    assert_eq!(st["io_uring"], if uring { "yes" } else { "no" });
    assert_eq!(st["zero_copy_min"], "1024");
    // Values on both sides of the threshold come back intact, one reply each.
    for len in [1000usize, 1024, 5000] {
        let v = value_for(7, len as u64);
        c.set(&format!("k{len}"), &v);
        assert_eq!(c.get(&format!("k{len}")).as_deref(), Some(v.as_slice()));
    }
    let copying = Server::with_args(&["-o", "no_zero_copy"]);
    assert_eq!(copying.conn().stats("settings")["zero_copy_min"], "off");
    // Segment memory on the heap unless asked for huge pages (as memcached, which uses
    // them only with -L); values come back intact from the huge-page reservation too.
    assert_eq!(st["hugepages"], "no");
    let huge = Server::with_args(&["-m", "16", "-o", "hugepages"]);
    let mut c = huge.conn();
    assert_eq!(c.stats("settings")["hugepages"], "yes");
    let v = value_for(9, 200_000);
    c.set("on-huge-pages", &v);
    assert_eq!(c.get("on-huge-pages").as_deref(), Some(v.as_slice()));
}

/// Both worker loops (shoal-net's epoll loop, the default, and tokio's runtime with
/// `-o event_loop=tokio`) give the same replies: a pipelined burst mixing copied and
/// zero-copy values in one multi-get, a reply larger than the socket buffer to a client
/// that reads late, and an idle connection closed by `idle_timeout` (the loop's timers)
/// while a busy one is served.
#[test]
fn both_worker_loops_serve_the_same_replies() {
    for (args, name) in [
        (vec!["-m", "16", "-o", "idle_timeout=1"], "epoll"),
        (
            vec!["-m", "16", "-o", "idle_timeout=1,event_loop=tokio"],
            "tokio",
        ),
    ] {
        let server = Server::with_args(&args);
        let mut c = server.conn();
        let settings = c.stats("settings");
        // The suite's io_uring rerun (SHOALD_TEST_ARGS=--io-uring) runs on tokio.
        let name = if settings["io_uring"] == "yes" {
            "tokio"
        } else {
            name
        };
        assert_eq!(settings["event_loop"], name);
        let idle = server.conn();
        let sizes = [10usize, 4095, 4096, 100_000, 900_000];
        let (mut burst, mut want, mut hits) = (Vec::new(), Vec::new(), Vec::new());
        for (i, &len) in sizes.iter().enumerate() {
            let v = value_for(i as u64, len as u64);
            let v = &v[..len.min(v.len())];
            burst.extend_from_slice(format!("set k{i} {i} 0 {}\r\n", v.len()).as_bytes());
            burst.extend_from_slice(v);
            burst.extend_from_slice(b"\r\n");
            want.extend_from_slice(b"STORED\r\n");
            hits.extend_from_slice(format!("VALUE k{i} {i} {}\r\n", v.len()).as_bytes());
            hits.extend_from_slice(v);
            hits.extend_from_slice(b"\r\n");
        }
        burst.extend_from_slice(b"get k0 k1 k2 k3 k4 missing\r\n");
        want.extend_from_slice(&hits);
        want.extend_from_slice(b"END\r\n");
        c.send(&burst);
        // Read late: the reply (over 1 MB) has to wait for the socket buffer to drain.
        thread::sleep(Duration::from_millis(200));
        let got = c.read_n(want.len());
        assert!(got == want, "{name}: the burst's replies differ");
        // The busy connection stays open past the idle timeout; the idle one is closed.
        for _ in 0..6 {
            thread::sleep(Duration::from_millis(400));
            c.send(b"mn\r\n");
            c.expect(b"MN\r\n");
        }
        let mut idle = idle;
        idle.expect_closed();
        assert!(c.stat("idle_kicks") >= 1, "{name}: idle_kicks");
    }
}
