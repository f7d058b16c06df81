//! Hostile clients and backends against the real shoal-proxy (over a real shoald): the
//! proxy's memory stays bounded and other clients keep being served.
//!
//! - slow readers: 40 connections each ask for 5,000 copies of a 100 KB value (500 MB of
//!   replies each) and never read;
//! - stalled senders: 320 connections each send 900 KB of a declared 1 MB value and stall;
//! - stalled backends: a backend that accepts and never answers, and one that answers half
//!   a value, make requests fail with twemproxy's timeout error within the pool's
//!   `timeout`.
//!
//! RSS figures are printed (`cargo test --release -p shoal-proxy --test hostile --
//! --nocapture`). Every wait is bounded.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::*;

/// The RSS the proxy must stay under.
const RSS_LIMIT_KB: u64 = 192 * 1024;
/// How long a fresh client may wait for its reply while the hostile ones are connected.
const MAX_LATENCY: Duration = Duration::from_secs(2);

/// The memory cases run one at a time, so neither's load skews the other's figures.
static HEAVY: Mutex<()> = Mutex::new(());

fn heavy() -> std::sync::MutexGuard<'static, ()> {
    HEAVY.lock().unwrap_or_else(|e| e.into_inner())
}

use shoal_test_support::rss_kib as rss_kb;

/// Lets this process (and the processes it starts) open a few thousand sockets.
fn raise_fd_limit() {
    shoal_test_support::raise_fd_limit(65_536);
}

fn conf(backend: SocketAddr, extra: &str) -> String {
    format!("alpha:\n  listen: 127.0.0.1:0\n{extra}  servers:\n   - {backend}:1\n")
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
    s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    s.set_write_timeout(Some(IO_TIMEOUT)).expect("timeout");
    s
}

/// How long a fresh client waits for `get probe` (a small stored value).
fn probe_latency(addr: SocketAddr) -> Duration {
    let t = Instant::now();
    let mut c = Conn::connect(addr);
    let got = c.get(&["probe"]).expect("probe get");
    assert_eq!(got, vec![("probe".to_string(), "ok".to_string())]);
    t.elapsed()
}

/// Samples `pid`'s RSS every 100 ms for `dur`, probing with a fresh client every second;
/// returns (max RSS KB, worst probe latency).
fn watch(pid: u32, addr: SocketAddr, dur: Duration) -> (u64, Duration) {
    let start = Instant::now();
    let (mut max_rss, mut worst) = (0, Duration::ZERO);
    let mut next_probe = start;
    while start.elapsed() < dur {
        max_rss = max_rss.max(rss_kb(pid));
        if Instant::now() >= next_probe {
            worst = worst.max(probe_latency(addr));
            next_probe += Duration::from_secs(1);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    (max_rss, worst)
}

fn set_raw(addr: SocketAddr, key: &str, value: &[u8]) {
    let mut c = Conn::connect(addr);
    let mut req = format!("set {key} 0 0 {}\r\n", value.len()).into_bytes();
    req.extend_from_slice(value);
    req.extend_from_slice(b"\r\n");
    c.send(&req);
    assert_eq!(c.line(), "STORED", "set {key}");
}

#[test]
fn slow_readers_of_big_multigets_stay_bounded() {
    let _one_at_a_time = heavy();
    raise_fd_limit();
    let backend = Shoald::start();
    let proxy = Proxy::start(&conf(backend.addr, ""), 1);
    let addr = proxy.pools[0];
    let pid = proxy.proc.child.id();
    set_raw(addr, "probe", b"ok");
    let big = vec![b'v'; 100 * 1024];
    set_raw(addr, "big", &big);
    let idle_rss = rss_kb(pid);

    let mut line = b"get".to_vec();
    for _ in 0..5000 {
        line.extend_from_slice(b" big");
    }
    line.extend_from_slice(b"\r\n");
    let conns: Vec<TcpStream> = (0..40)
        .map(|_| {
            let mut s = connect(addr);
            s.write_all(&line).expect("send multi-get");
            s
        })
        .collect();
    let (rss, lat) = watch(pid, addr, Duration::from_secs(5));
    eprintln!(
        "slow readers: shoal-proxy RSS {} MB idle, max {} MB with 40 non-reading 500 MB \
         multi-gets; worst fresh-client latency {lat:?}",
        idle_rss / 1024,
        rss / 1024
    );
    assert!(rss < RSS_LIMIT_KB, "shoal-proxy RSS {rss} KB");
    assert!(lat < MAX_LATENCY, "a fresh client waited {lat:?}");

    // A slow reader that does read gets every value, in order, then END.
    let mut s = Conn::connect(addr);
    let mut req = b"get".to_vec();
    for _ in 0..300 {
        req.extend_from_slice(b" big missing");
    }
    req.extend_from_slice(b"\r\n");
    s.send(&req);
    let got = s.values().expect("values");
    assert_eq!(got.len(), 300);
    assert!(got.iter().all(|(k, v)| k == "big" && v.len() == big.len()));

    drop(conns);
    std::thread::sleep(Duration::from_millis(500));
    let after = rss_kb(pid);
    eprintln!("slow readers gone: shoal-proxy RSS {} MB", after / 1024);
    assert!(after < RSS_LIMIT_KB);
    assert!(probe_latency(addr) < MAX_LATENCY);
}

#[test]
fn stalled_large_values_stay_bounded() {
    let _one_at_a_time = heavy();
    raise_fd_limit();
    let backend = Shoald::start();
    let proxy = Proxy::start(&conf(backend.addr, ""), 1);
    let addr = proxy.pools[0];
    let pid = proxy.proc.child.id();
    set_raw(addr, "probe", b"ok");
    set_raw(addr, "victim", b"old");
    let chunk = vec![b'x'; 900 * 1024];
    let conns: Vec<TcpStream> = (0..320)
        .map(|i| {
            let mut s = connect(addr);
            s.write_all(format!("set stall{i} 0 0 1048576\r\n").as_bytes())
                .expect("send header");
            s.write_all(&chunk).expect("send 900 KB");
            s
        })
        .collect();
    let (rss, lat) = watch(pid, addr, Duration::from_secs(4));
    eprintln!(
        "stalled senders: shoal-proxy max RSS {} MB with 320 stalled 1 MB sets; worst \
         fresh-client latency {lat:?}",
        rss / 1024
    );
    assert!(rss < RSS_LIMIT_KB, "shoal-proxy RSS {rss} KB");
    assert!(lat < MAX_LATENCY, "a fresh client waited {lat:?}");

    // Senders past the 64 MB budget were told so while they stalled.
    let mut refused = 0;
    for mut s in conns.iter().rev().take(50) {
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        let mut buf = [0u8; 64];
        if let Ok(n) = s.read(&mut buf) {
            if buf[..n].starts_with(b"SERVER_ERROR out of memory storing object\r\n") {
                refused += 1;
            }
        }
    }
    assert_eq!(refused, 50, "the last 50 senders were refused");

    // With the budget spent, a large set is refused whole, its bytes are skipped, the old
    // value is removed (as memcached does), and the connection stays in step.
    let mut c = Conn::connect(addr);
    let mut req = b"set victim 0 0 1048576\r\n".to_vec();
    req.extend(std::iter::repeat_n(b'n', 1 << 20));
    req.extend_from_slice(b"\r\n");
    c.send(&req);
    assert_eq!(c.line(), "SERVER_ERROR out of memory storing object");
    assert_eq!(c.get(&["victim"]), Ok(vec![]));
    assert_eq!(c.set("small", "fits"), "STORED");
    assert_eq!(
        c.get(&["small"]),
        Ok(vec![("small".to_string(), "fits".to_string())])
    );
    // The stalled senders held the budget until now.
    drop(conns);
}

/// Sends `req` on a new connection and checks it fails with twemproxy's timeout error
/// within `timeout` (and, when `alone`, not much sooner: a request sharing the backend
/// connection with older ones fails with them when the oldest times out).
fn times_out(addr: SocketAddr, req: &[u8], timeout: Duration, alone: bool) {
    let t = Instant::now();
    let mut c = Conn::connect(addr);
    c.send(req);
    let line = c.line();
    let took = t.elapsed();
    assert_eq!(line, "SERVER_ERROR Connection timed out", "for {req:?}");
    assert!(
        (!alone || took >= timeout.mul_f32(0.8)) && took < timeout + Duration::from_secs(1),
        "timed out after {took:?}, configured {timeout:?}"
    );
}

#[test]
fn stalled_backends_time_out() {
    let timeout = Duration::from_millis(400);
    let extra = format!("  timeout: {}\n", timeout.as_millis());
    // A backend that accepts and never answers.
    let silent = fake_backend(None);
    let proxy = Proxy::start(&conf(silent, &extra), 1);
    let addr = proxy.pools[0];
    times_out(addr, b"get k\r\n", timeout, true);
    times_out(addr, b"set k 0 0 1\r\nv\r\n", timeout, true);
    let mut many = b"get".to_vec();
    for i in 0..2000 {
        many.extend_from_slice(format!(" key{i}").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    times_out(addr, &many, timeout, true);

    // Many clients at once: every one is answered by the timeout, and the proxy's own
    // replies are not held up meanwhile.
    let clients: Vec<std::thread::JoinHandle<()>> = (0..50)
        .map(|_| std::thread::spawn(move || times_out(addr, b"get k\r\n", timeout, false)))
        .collect();
    let t = Instant::now();
    let mut c = Conn::connect(addr);
    assert!(c.cmd("version").starts_with("VERSION "));
    assert!(t.elapsed() < MAX_LATENCY);
    for h in clients {
        h.join().expect("client");
    }

    // A backend that answers half a value and stalls.
    let half = fake_backend(Some(b"VALUE k 0 100000\r\nhalf of it"));
    let proxy = Proxy::start(&conf(half, &extra), 1);
    times_out(proxy.pools[0], b"get k\r\n", timeout, true);
    times_out(proxy.pools[0], b"get k\r\n", timeout, true);
}

/// `client_connections` still caps a pool, and a closed connection's slot comes back (it
/// is held by a guard the connection's task drops however it ends).
#[test]
fn connection_limit_holds_and_slots_come_back() {
    let backend = Shoald::start();
    let proxy = Proxy::start(&conf(backend.addr, "  client_connections: 3\n"), 1);
    let addr = proxy.pools[0];
    let mut open: Vec<Conn> = (0..3).map(|_| Conn::connect(addr)).collect();
    for c in &mut open {
        assert!(c.cmd("version").starts_with("VERSION "));
    }
    // Over the limit: accepted by the kernel, closed by the proxy.
    let mut extra = connect(addr);
    let _ = extra.write_all(b"version\r\n");
    let mut buf = [0u8; 64];
    assert!(
        matches!(extra.read(&mut buf), Ok(0) | Err(_)),
        "a fourth connection was served"
    );
    // Quitting gives the slot back (as soon as the proxy has seen it).
    open[0].send(b"quit\r\n");
    drop(open.remove(0));
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let mut s = connect(addr);
        let _ = s.write_all(b"version\r\n");
        if matches!(s.read(&mut buf), Ok(n) if buf[..n].starts_with(b"VERSION ")) {
            break;
        }
        assert!(Instant::now() < deadline, "the slot never came back");
        std::thread::sleep(Duration::from_millis(50));
    }
    for c in &mut open {
        assert!(c.cmd("version").starts_with("VERSION "));
    }
}
