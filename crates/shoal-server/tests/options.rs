//! Command-line options: -C, -M, eviction, -F, -A, -c, -s/-a, -I, usage errors, signals.
//! memcached compatibility of the whole command line is in `dropin.rs`.

mod common;

use common::{run_to_exit, Conn, Server};
use std::time::{Duration, Instant};

/// Sets `count` keys `{prefix}{i}` with `size`-byte values, `batch` per write; returns the
/// replies in order (stops at the first batch that holds an error if `stop_on_error`).
fn fill(
    c: &mut Conn,
    prefix: &str,
    count: usize,
    size: usize,
    stop_on_error: bool,
) -> Vec<Vec<u8>> {
    const BATCH: usize = 50;
    let value = vec![b'v'; size];
    let mut replies = Vec::with_capacity(count);
    let mut i = 0;
    while i < count {
        let n = BATCH.min(count - i);
        let mut req = Vec::with_capacity(n * (size + 64));
        for j in i..i + n {
            req.extend_from_slice(format!("set {prefix}{j} 0 0 {size}\r\n").as_bytes());
            req.extend_from_slice(&value);
            req.extend_from_slice(b"\r\n");
        }
        c.send(&req);
        let mut error = false;
        for _ in 0..n {
            let line = c.read_line();
            error |= line != b"STORED\r\n";
            replies.push(line);
        }
        i += n;
        if error && stop_on_error {
            break;
        }
    }
    replies
}

#[test]
fn disable_cas_returns_zero() {
    let s = Server::with_args(&["-C"]);
    let mut c = s.conn();
    c.set("k", b"v");
    c.rt(b"gets k\r\n", b"VALUE k 0 1 0\r\nv\r\nEND\r\n");
    c.rt(b"mg k c\r\n", b"HD c0\r\n");
    assert_eq!(c.stats("settings")["cas_enabled"], "no");
}

#[test]
fn disable_evictions_reports_out_of_memory() {
    let s = Server::with_args(&["-M", "-m", "8"]);
    let mut c = s.conn();
    let replies = fill(&mut c, "key", 20_000, 1000, true);
    let first_err = replies
        .iter()
        .position(|r| r != b"STORED\r\n")
        .expect("an 8 MB cache refuses 20 MB of data with -M");
    assert_eq!(
        common::show(&replies[first_err]),
        "SERVER_ERROR out of memory storing object\r\n"
    );
    assert!(first_err > 1000, "stored only {first_err} items in 8 MB");
    // Nothing was evicted: the first and last stored items are there.
    assert!(c.get("key0").is_some());
    assert!(c.get(&format!("key{}", first_err - 1)).is_some());
    let st = c.stats("");
    assert_eq!(st["evictions"], "0");
    assert_eq!(st["curr_items"], first_err.to_string());
    assert_eq!(c.stats("settings")["evictions"], "off");
    // Deleting frees room for new items again (bounded retries for reclamation).
    c.rt(b"flush_all\r\n", b"OK\r\n");
    let mut ok = false;
    for _ in 0..50 {
        c.send(b"set again 0 0 1\r\nx\r\n");
        if c.read_line() == b"STORED\r\n" {
            ok = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(ok, "memory is reused after flush_all");
}

#[test]
fn evicts_oldest_when_full() {
    let s = Server::with_args(&["-m", "8"]);
    let mut c = s.conn();
    let replies = fill(&mut c, "key", 20_000, 1000, false);
    assert!(
        replies.iter().all(|r| r == b"STORED\r\n"),
        "every set succeeds with eviction on"
    );
    assert_eq!(c.get("key0"), None, "oldest evicted");
    assert_eq!(c.get("key19999").as_deref(), Some(&[b'v'; 1000][..]));
    let st = c.stats("");
    let evictions: u64 = st["evictions"].parse().unwrap();
    let items: u64 = st["curr_items"].parse().unwrap();
    let bytes: u64 = st["bytes"].parse().unwrap();
    assert!(evictions > 0);
    assert!(items < 20_000 && items > 3_000, "items {items}");
    assert!(bytes <= 8 << 20, "bytes {bytes} within -m");
}

#[test]
fn disable_flush_all() {
    let s = Server::with_args(&["-F"]);
    let mut c = s.conn();
    c.set("k", b"v");
    c.rt(b"flush_all\r\n", b"CLIENT_ERROR flush_all not allowed\r\n");
    c.rt(
        b"flush_all 0\r\n",
        b"CLIENT_ERROR flush_all not allowed\r\n",
    );
    c.rt(b"get k\r\n", b"VALUE k 0 1\r\nv\r\nEND\r\n");
    // memcached counts refused flushes too ("we log it on stats").
    assert_eq!(c.stat("cmd_flush"), 2);
}

#[test]
fn shutdown_needs_a() {
    let s = Server::start();
    let mut c = s.conn();
    c.rt(b"shutdown\r\n", b"SERVER_ERROR: shutdown not enabled\r\n");
    c.assert_alive();

    let mut s = Server::with_args(&["-A"]);
    let mut c = s.conn();
    c.set("k", b"v");
    c.send(b"shutdown\r\n");
    c.expect_closed();
    let status = s.wait_exit(Duration::from_secs(5)).expect("shoald exits");
    assert_eq!(status.code(), Some(0));
}

#[test]
fn connection_limit() {
    let s = Server::with_args(&["-c", "2"]);
    let mut a = s.conn();
    a.assert_alive();
    let mut b = s.conn();
    b.assert_alive();
    let mut third = s.conn();
    third.expect(b"ERROR Too many open connections\r\n");
    third.expect_closed();
    assert!(a.stat("rejected_connections") >= 1);
    // Once one leaves, a new client gets in (the count drops asynchronously).
    drop(b);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut c = s.conn();
        c.send(b"version\r\n");
        let line = c.read_line();
        if line.starts_with(b"VERSION ") {
            break;
        }
        assert_eq!(common::show(&line), "ERROR Too many open connections\r\n");
        assert!(Instant::now() < deadline, "slot never freed");
        std::thread::sleep(Duration::from_millis(50));
    }
    a.assert_alive();
}

#[test]
fn unix_socket_with_mask() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("shoal-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("shoald.sock");
    let path_s = path.to_str().unwrap().to_string();
    {
        let s = Server::with_args(&["-s", &path_s, "-a", "600"]);
        assert_eq!(s.socket.as_deref(), Some(path.as_path()));
        assert!(s.addr.is_none(), "a unix socket replaces TCP");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let mut c = s.conn();
        c.set("k", b"unix");
        let mut c2 = s.conn();
        assert_eq!(c2.get("k").as_deref(), Some(&b"unix"[..]));
        assert_eq!(c.stats("settings")["domain_socket"], path_s);
        // `stats conns` names the socket path, as memcached does.
        let conns = c.stats("conns");
        let addrs: Vec<&String> = conns
            .iter()
            .filter(|(k, _)| k.ends_with(":addr"))
            .map(|(_, v)| v)
            .collect();
        // The listening socket, then the two connections.
        assert_eq!(addrs.len(), 3, "{conns:?}");
        assert_eq!(conns["1:state"], "conn_listening", "{conns:?}");
        assert!(
            addrs.iter().all(|a| **a == format!("unix:{path_s}")),
            "{conns:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn max_item_size() {
    // -I 2m allows a 1.5 MB value.
    let s = Server::with_args(&["-I", "2m"]);
    let mut c = s.conn();
    let big: Vec<u8> = (0..1_500_000u32).map(|i| (i % 251) as u8).collect();
    c.set("big", &big);
    assert_eq!(c.get("big").as_deref(), Some(&big[..]));
    drop(s);

    // The default 1m refuses 2 MB: error, data swallowed, old value gone.
    let s = Server::start();
    let mut c = s.conn();
    c.set("big", b"old");
    c.set("other", b"kept");
    let huge = vec![b'x'; 2 << 20];
    let mut req = format!("set big 0 0 {}\r\n", huge.len()).into_bytes();
    req.extend_from_slice(&huge);
    req.extend_from_slice(b"\r\n");
    c.send(&req);
    c.expect(b"SERVER_ERROR object too large for cache\r\n");
    c.rt(b"get big\r\n", b"END\r\n");
    c.rt(b"get other\r\n", b"VALUE other 0 4\r\nkept\r\nEND\r\n");
    // Just under the limit (with memcached's item overhead) still fits.
    let ok = vec![b'y'; 1_000_000];
    c.set("big", &ok);
    assert_eq!(c.get("big").map(|v| v.len()), Some(1_000_000));
    // The data of a too-large noreply set is swallowed silently.
    let mut req = format!("set big 0 0 {} noreply\r\n", huge.len()).into_bytes();
    req.extend_from_slice(&huge);
    req.extend_from_slice(b"\r\n");
    c.send(&req);
    c.rt(b"mn\r\n", b"MN\r\n");
    c.rt(b"get big\r\n", b"END\r\n");
}

#[test]
fn usage_errors_exit_as_memcached() {
    // memcached exits 1 for a bad option or value and EX_USAGE (64) for options that do
    // not fit together; shoald does the same.
    for (args, code) in [
        (&["--no-such-option"][..], 1),
        (&["-Z"], 64),
        (&["-p", "notaport"], 1),
        (&["-p", "70000"], 64),
        (&["-m", "0"], 64),
        (&["-I", "1x"], 1),
        (&["-I", "100m", "-m", "64"], 64),
        (&["-t", "0"], 1),
        (&["-c", "0"], 1),
        (&["-R", "0"], 1),
        (&["-l", "not_an_address"], 1),
        (&["-o", "bogus=1"], 1),
        (&["-a", "999"], 1),
    ] {
        let (got, err) = run_to_exit(args);
        assert_eq!(got, Some(code), "args {args:?}: stderr {err}");
        assert!(!err.is_empty(), "args {args:?} explain the error");
    }
    let (code, _) = run_to_exit(&["-V"]);
    assert_eq!(code, Some(0));
    let (code, _) = run_to_exit(&["-h"]);
    assert_eq!(code, Some(0));
}

#[test]
fn sigterm_and_sigint_exit_zero() {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let mut s = Server::start();
        let mut c = s.conn();
        c.set("k", b"v");
        s.signal(sig);
        let status = s
            .wait_exit(Duration::from_secs(5))
            .expect("exits on signal");
        assert_eq!(status.code(), Some(0), "signal {sig}");
        c.expect_closed();
    }
}

/// A stop signal sent the moment `listening on` is logged (what scripts and supervisors
/// wait for) stops shoald, even from a parent that left SIGTERM ignored: the line is
/// logged before the accept loop installs its own handlers, and a signal in between used
/// to be dropped (an inherited SIG_IGN) and leave the server running for good, as it did
/// in CI's package test. Repeated, since the window is a race.
#[test]
fn a_stop_signal_right_after_listening_is_logged_stops_the_server() {
    let args = ["-p", "-1", "-l", "127.0.0.1", "-U", "0", "-v"];
    shoal_test_support::signals::stops_on_sigterm_right_after_listening(
        common::shoald_bin(),
        &args,
        12,
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

/// The address a running server logged for `ip` ("listening on IP:PORT").
fn logged_addr(s: &Server, ip: &str) -> std::net::SocketAddr {
    let line = s
        .wait_log(&format!("listening on {ip}:"), Duration::from_secs(10))
        .unwrap_or_else(|| panic!("no listener on {ip}"));
    let rest = line.split("listening on ").nth(1).expect("address");
    rest.trim().parse().expect("listening address")
}

#[test]
fn several_listen_addresses_are_each_served() {
    // Repeated -l (the harness passes -l 127.0.0.1) and a comma-separated list, as
    // memcached takes them; -p -1 gives each its own ephemeral port.
    for args in [&["-l", "127.0.0.2"][..], &["-l", "127.0.0.1,127.0.0.2"][..]] {
        let s = Server::with_args(args);
        let first = s.addr.expect("first address");
        assert_eq!(first.ip().to_string(), "127.0.0.1");
        let second = logged_addr(&s, "127.0.0.2");
        let mut a = Conn::tcp(first);
        let mut b = Conn::tcp(second);
        a.set("k", b"one store");
        assert_eq!(b.get("k").as_deref(), Some(&b"one store"[..]), "{args:?}");
        b.set("k2", b"both ways");
        assert_eq!(a.get("k2").as_deref(), Some(&b"both ways"[..]));
        assert_eq!(a.stats("")["curr_connections"], "2");
    }
}

/// `-L` allocates the whole of `-m` at startup, as memcached does; without it segment
/// memory becomes resident only as it is written.
#[test]
fn large_pages_preallocate_the_memory_limit() {
    let rss_mb = |s: &Server| shoal_test_support::rss_kib(s.pid() as u32) / 1024;
    let lazy = Server::with_args(&["-m", "128"]);
    let eager = Server::with_args(&["-m", "128", "-L"]);
    // Both answer, so both have finished starting.
    lazy.conn().set("k", b"v");
    eager.conn().set("k", b"v");
    let (lazy_mb, eager_mb) = (rss_mb(&lazy), rss_mb(&eager));
    assert!(eager_mb >= 128, "-L -m 128: RSS {eager_mb} MB");
    assert!(lazy_mb < 64, "-m 128 without -L: RSS {lazy_mb} MB");
    let mut c = eager.conn();
    c.rt(b"get k\r\n", b"VALUE k 0 1\r\nv\r\nEND\r\n");
}

/// Reads memcached's port file once it is in place: `(transport, port)` per line.
fn read_port_file(path: &std::path::Path) -> Vec<(String, u16)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "no port file at {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::read_to_string(path)
        .expect("port file")
        .lines()
        .map(|l| {
            let (kind, port) = l.split_once(": ").expect("memcached's `KIND: PORT` line");
            (kind.to_string(), port.parse().expect("port"))
        })
        .collect()
}

#[test]
fn port_file_lists_the_ports_bound_as_memcached_writes_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("ports");
    let path_s = path.to_str().expect("utf-8 path");
    // -p -1 and -U -1: a free port each, named in the file (TCP first, then UDP).
    let s = Server::with_env(&["-U", "-1"], &[("MEMCACHED_PORT_FILENAME", path_s)]);
    let ports = read_port_file(&path);
    assert_eq!(ports.len(), 2, "{ports:?}");
    assert_eq!(ports[0], ("TCP INET".to_string(), s.port()));
    assert_eq!(ports[1].0, "UDP INET");
    assert_ne!(ports[1].1, 0);
    s.conn().rt(
        b"version\r\n",
        format!("VERSION {}\r\n", shoal_server::VERSION).as_bytes(),
    );
    assert!(!dir.path().join("ports.lck").exists());
}

#[test]
fn port_zero_turns_tcp_off() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("ports");
    // memcached's -p 0: no TCP listener at all, the -l address's included; UDP still
    // answers.
    let mut child = std::process::Command::new(common::shoald_bin())
        .args(["-p", "0", "-U", "-1", "-l", "127.0.0.1", "-t", "1"])
        .env("MEMCACHED_PORT_FILENAME", &path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn shoald");
    let ports = read_port_file(&path);
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("udp");
    udp.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let answer = match ports.as_slice() {
        [(kind, port)] if kind == "UDP INET" => {
            // memcached's UDP frame: request id, sequence, count, reserved.
            udp.send_to(
                b"\x00\x01\x00\x00\x00\x01\x00\x00version\r\n",
                ("127.0.0.1", *port),
            )
            .expect("send");
            let mut buf = [0u8; 256];
            udp.recv(&mut buf).map(|n| buf[8..n].to_vec())
        }
        other => Err(std::io::Error::other(format!("ports {other:?}"))),
    };
    let _ = child.kill();
    let _ = child.wait();
    let answer = answer.expect("a UDP answer and only a UDP port");
    assert!(answer.starts_with(b"VERSION "), "{}", common::show(&answer));
}

/// memcached's test-suite hook `T_MEMD_INITIAL_MALLOC` (honoured by every memcached build,
/// used by its t/64bit.t): the bytes it names count as allocated, so `total_malloced`
/// starts there and only the rest of `-m` can be filled; with `-M` the next store is
/// refused with memcached's error, and what was stored stays readable.
#[test]
fn memcacheds_initial_malloc_hook_counts_memory_as_allocated() {
    let fake = 4_294_967_328u64; // 2^32 + 32, as t/64bit.t
    let fake_text = fake.to_string();
    let s = Server::with_env(
        &["-m", "4098", "-M"],
        &[("T_MEMD_INITIAL_MALLOC", &fake_text)],
    );
    let mut c = s.conn();
    assert_eq!(c.stats("")["limit_maxbytes"], "4297064448");
    assert_eq!(c.stats("slabs")["total_malloced"], fake_text);
    let value = vec![b'a'; 400 * 1024];
    let mut refused = 0;
    for i in 0..5 {
        let mut req = format!("set big{i} 0 0 {}\r\n", value.len()).into_bytes();
        req.extend_from_slice(&value);
        req.extend_from_slice(b"\r\n");
        let reply = c.request_until(&req, b"\r\n");
        match &reply[..] {
            b"STORED\r\n" => assert_eq!(refused, 0, "stored after a refusal"),
            b"SERVER_ERROR out of memory storing object\r\n" => refused += 1,
            other => panic!("{}", common::show(other)),
        }
    }
    assert!(refused >= 3, "about 2 MiB of room: {refused} refused");
    assert_eq!(c.get("big0").as_deref(), Some(&value[..]));
    let total: u64 = c.stats("slabs")["total_malloced"].parse().expect("number");
    assert!(total > fake && total <= 4_297_064_448, "{total}");
}
