//! Hostile clients and backends against the real shoal-proxy (over a real shoald): the
//! proxy's memory stays bounded and other clients keep being served.
//!
//! - slow readers: 40 connections each ask for 5,000 copies of a 100 KB value (500 MB of
//!   replies each) and never read;
//! - stalled senders: 800 connections each send 900 KB of a declared 1 MB value and stall;
//! - stalled backends: a backend that accepts and never answers, and one that answers half
//!   a value, make requests fail with twemproxy's timeout error within the pool's
//!   `timeout`; with 200 clients asking for large values from backends that stall
//!   half-way through them, memory stays bounded and a healthy pool is still served;
//! - idle clients: `client_idle_timeout` closes clients that send nothing (or half a
//!   request), never one that is active or waiting for its reply;
//! - the stats port: clients that never read or never send hold a connection slot for a
//!   bounded time only, and never keep other stats clients waiting past it.
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

/// Lets this process (and the processes it starts) open a few thousand sockets, and
/// fails clearly when they cannot open the `need` a test holds at once.
fn raise_fd_limit(need: u64) {
    let limit = shoal_test_support::raise_fd_limit(65_536);
    assert!(
        limit >= need,
        "this test holds {need} sockets at once; the open-file limit is {limit}"
    );
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
    raise_fd_limit(256);
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
    // 800 stalled senders, plus the probes and the other tests' sockets.
    raise_fd_limit(1000);
    let backend = Shoald::start();
    let proxy = Proxy::start(&conf(backend.addr, ""), 1);
    let addr = proxy.pools[0];
    let pid = proxy.proc.child.id();
    set_raw(addr, "probe", b"ok");
    set_raw(addr, "victim", b"old");
    let chunk = vec![b'x'; 900 * 1024];
    let conns: Vec<TcpStream> = (0..800)
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
        "stalled senders: shoal-proxy max RSS {} MB with 800 stalled 1 MB sets; worst \
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

/// Backends that stall half-way through large values while 200 clients keep asking for
/// them: the proxy holds no more than what the stalled backends sent (bounded by the
/// pool's `server_connections`), every client gets twemproxy's timeout error within the
/// pool's `timeout`, and a client of a healthy pool on the same worker thread is served
/// within 2 s throughout.
#[test]
fn backends_stalled_mid_value_stay_bounded() {
    let _one_at_a_time = heavy();
    raise_fd_limit(512);
    // Each backend connection gets the header and half of a 1 MB value, then nothing.
    let mut half = b"VALUE big 0 1048576\r\n".to_vec();
    half.resize(half.len() + 512 * 1024, b'h');
    let stalled = stalling_backend(half);
    let healthy = Shoald::start();
    let timeout = Duration::from_millis(1000);
    let conf = format!(
        "stalled:\n  listen: 127.0.0.1:0\n  timeout: {}\n  server_connections: 16\n  \
         servers:\n   - {stalled}:1\nhealthy:\n  listen: 127.0.0.1:0\n  servers:\n   - {}:1\n",
        timeout.as_millis(),
        healthy.addr
    );
    let proxy = Proxy::start(&conf, 2);
    let (stalled_pool, healthy_pool) = (proxy.pools[0], proxy.pools[1]);
    let pid = proxy.proc.child.id();
    set_raw(healthy_pool, "probe", b"ok");
    let idle_rss = rss_kb(pid);

    let run_for = Duration::from_secs(4);
    let clients: Vec<std::thread::JoinHandle<(u32, Duration)>> = (0..200)
        .map(|i| {
            std::thread::spawn(move || {
                let mut c = Conn::connect(stalled_pool);
                let req = format!("get big big-{i} big-{i}-2\r\n");
                let start = Instant::now();
                let (mut answered, mut worst) = (0, Duration::ZERO);
                while start.elapsed() < run_for {
                    let t = Instant::now();
                    c.send(req.as_bytes());
                    assert_eq!(c.line(), "SERVER_ERROR Connection timed out", "client {i}");
                    worst = worst.max(t.elapsed());
                    answered += 1;
                }
                (answered, worst)
            })
        })
        .collect();
    let (rss, lat) = watch(pid, healthy_pool, run_for);
    let mut slowest = Duration::ZERO;
    for c in clients {
        let (answered, worst) = c.join().expect("client");
        assert!(answered > 0);
        slowest = slowest.max(worst);
    }
    eprintln!(
        "stalled backends: shoal-proxy RSS {} MB idle, max {} MB with 200 clients asking for \
         1 MB values the backends stall half-way through; slowest timeout {slowest:?}; worst \
         healthy-pool latency {lat:?}",
        idle_rss / 1024,
        rss / 1024
    );
    assert!(rss < RSS_LIMIT_KB, "shoal-proxy RSS {rss} KB");
    assert!(lat < MAX_LATENCY, "a healthy pool's client waited {lat:?}");
    assert!(
        slowest < timeout + Duration::from_secs(1),
        "a request waited {slowest:?} with a {timeout:?} timeout"
    );
}

/// Reads from `s` until it is closed (or fails); returns how long that took.
fn closed_after(mut s: TcpStream) -> std::thread::JoinHandle<Duration> {
    let t = Instant::now();
    std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
        t.elapsed()
    })
}

/// `client_idle_timeout` closes a client that sends nothing, or half a request, for that
/// long; not one that keeps sending, nor one waiting longer than that for its reply. A
/// reload applies a new value to the connections accepted after it.
#[test]
fn idle_clients_are_closed_and_active_ones_are_not() {
    let backend = Shoald::start();
    let silent = fake_backend(None);
    let idle = Duration::from_millis(600);
    let conf_text = |idle_ms: u128| {
        format!(
            "alpha:\n  listen: 127.0.0.1:0\n  client_idle_timeout: {idle_ms}\n  servers:\n   \
             - {}:1\nslow:\n  listen: 127.0.0.1:0\n  client_idle_timeout: {idle_ms}\n  \
             timeout: 1500\n  servers:\n   - {silent}:1\n",
            backend.addr
        )
    };
    let proxy = Proxy::start(&conf_text(idle.as_millis()), 2);
    let (alpha, slow) = (proxy.pools[0], proxy.pools[1]);
    let quiet = closed_after(connect(alpha));
    let mut half = connect(alpha);
    half.write_all(b"get ke").expect("half a request");
    let half = closed_after(half);

    // Active: a request every 200 ms for three idle timeouts, each answered.
    let mut active = Conn::connect(alpha);
    let t = Instant::now();
    while t.elapsed() < idle * 3 {
        assert!(active.cmd("version").starts_with("VERSION "));
        std::thread::sleep(Duration::from_millis(200));
    }
    // Waiting 1.5 s for a silent backend's timeout is not being idle.
    let mut waiting = Conn::connect(slow);
    assert_eq!(
        waiting.cmd("get k"),
        "SERVER_ERROR Connection timed out",
        "closed while waiting for its reply"
    );
    assert!(waiting.cmd("version").starts_with("VERSION "));
    for (what, h) in [("quiet", quiet), ("half a request", half)] {
        let took = h.join().expect("reader");
        assert!(
            took >= idle.mul_f32(0.8) && took < idle + Duration::from_secs(1),
            "{what}: closed after {took:?} with a {idle:?} idle timeout"
        );
    }

    // Reloaded without the timeout (0: none), new connections are never closed for it.
    std::fs::write(&proxy.conf, conf_text(0)).expect("rewrite conf");
    assert_eq!(reload(&proxy), "OK\r\n");
    let mut kept = Conn::connect(alpha);
    std::thread::sleep(idle * 2);
    assert!(kept.cmd("version").starts_with("VERSION "));
}

/// A client socket that takes in almost nothing unread (small segments, a tiny receive
/// buffer), so a writer of more than ~100 KB to it stalls: a stats client that never
/// reads. With `send`, it asks for the stats (an empty line) first; without, it never
/// sends anything.
fn non_reader(addr: SocketAddr, send: bool) -> TcpStream {
    let sock =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    sock.set_mss(536).expect("mss");
    sock.set_recv_buffer_size(4096).expect("rcvbuf");
    sock.connect_timeout(&addr.into(), IO_TIMEOUT)
        .expect("connect");
    let mut s: TcpStream = sock.into();
    s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    if send {
        s.write_all(b"\r\n").expect("ask");
    }
    s
}

/// The stats document, or `None` if the stats port closed the connection without one.
fn try_stats(addr: SocketAddr) -> Option<serde_json::Value> {
    let mut s = connect(addr);
    s.write_all(b"stats\r\n").ok()?;
    let mut doc = Vec::new();
    s.read_to_end(&mut doc).ok()?;
    if doc.is_empty() {
        return None;
    }
    Some(serde_json::from_slice(&doc).expect("a whole JSON document"))
}

/// Stats clients that never read their answer, or never send, do not keep other stats
/// clients waiting: below the connection cap others are served at once; past it the
/// extra connections are closed at once, and the ones holding places are dropped after
/// the write timeout, so a new client is served within it.
#[test]
fn stats_clients_that_never_read_or_send_do_not_block_others() {
    // Its bounds are times: not beside the tests that load the machine.
    let _one_at_a_time = heavy();
    // 2,000 servers (never connected to: server connections are made on first use) make a
    // stats document of about 350 KB, far more than a non-reading client takes in.
    let mut conf = "alpha:\n  listen: 127.0.0.1:0\n  servers:\n".to_string();
    for i in 0..2000 {
        conf.push_str(&format!("   - 127.0.0.1:{}:1\n", 20_000 + i));
    }
    let proxy = Proxy::start(&conf, 1);
    let full = {
        let mut s = connect(proxy.stats);
        s.write_all(b"stats\r\n").expect("ask");
        let mut doc = Vec::new();
        s.read_to_end(&mut doc).expect("stats");
        doc.len()
    };
    assert!(full > 300 * 1024, "the stats document is only {full} bytes");

    // Under the cap (32): ten stuck clients, and another is served at once.
    let mut stuck: Vec<TcpStream> = (0..10)
        .map(|i| non_reader(proxy.stats, i % 2 == 0))
        .collect();
    let t = Instant::now();
    let doc = try_stats(proxy.stats).expect("served under the cap");
    assert!(doc.get("alpha").is_some());
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());

    // Past the cap: forty more.
    stuck.extend((0..40).map(|i| non_reader(proxy.stats, i % 2 == 0)));
    let t = Instant::now();
    let deadline = t + Duration::from_secs(4);
    loop {
        if try_stats(proxy.stats).is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "no stats client served for 4 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    let waited = t.elapsed();
    eprintln!("stats port: served {waited:?} after 50 clients stopped reading");
    assert!(waited < Duration::from_millis(3500), "{waited:?}");

    // Every stuck client was let go: each ends (now that it reads) at end-of-stream or a
    // reset, with part of the document or none (closed over the cap), or all of it where
    // the kernel had taken it into its buffers before the proxy closed. A connection
    // still held open would leave the read waiting for its 5 s timeout instead.
    // Read only once every write timeout has run out (2 s after the answer, itself at
    // most 100 ms after the last of them connected).
    std::thread::sleep((t + Duration::from_millis(2600)).saturating_duration_since(Instant::now()));
    for mut s in stuck {
        let mut got = Vec::new();
        let began = Instant::now();
        match s.read_to_end(&mut got) {
            Ok(_) => assert!(got.len() <= full, "{} bytes", got.len()),
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
        }
        assert!(
            began.elapsed() < Duration::from_secs(2),
            "a stuck client was still connected"
        );
    }
}
