//! Configuration reload (issue 16): SIGHUP and the stats port's `reload` command switch
//! pools without dropping client connections; an invalid file is refused and the old
//! configuration keeps serving.

mod common;

use common::{holders, Conn, Proxy, Shoald};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn conf(pools: &[(&str, &str, &[&Shoald])]) -> String {
    let mut c = String::new();
    for (name, listen, backends) in pools {
        c.push_str(&format!(
            "{name}:\n  listen: {listen}\n  hash: md5\n  distribution: ketama\n  \
             timeout: 2000\n  servers:\n"
        ));
        for b in backends.iter() {
            c.push_str(&format!("   - {}:1\n", b.addr));
        }
    }
    c
}

/// Sends `request` to the stats port and reads the whole answer.
fn stats_port(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect_timeout(&addr, common::IO_TIMEOUT).expect("stats");
    s.set_read_timeout(Some(common::IO_TIMEOUT))
        .expect("timeout");
    s.write_all(request).expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read stats");
    out
}

fn reload(proxy: &Proxy) -> String {
    stats_port(proxy.stats, b"reload\r\n")
}

fn stats(proxy: &Proxy) -> serde_json::Value {
    serde_json::from_str(&stats_port(proxy.stats, b"")).expect("stats json")
}

fn counter(proxy: &Proxy, name: &str) -> u64 {
    stats(proxy)[name].as_u64().expect(name)
}

fn keys(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// Sets every key over `c` and checks it reads back.
fn set_get(c: &mut Conn, keys: &[String]) {
    for k in keys {
        assert_eq!(c.set(k, "v"), "STORED", "set {k}");
        assert_eq!(c.get(&[k]), Ok(vec![(k.clone(), "v".into())]), "get {k}");
    }
}

#[test]
fn sighup_adds_a_server_under_load_without_failures_or_dropped_connections() {
    add_a_server_under_load(1);
}

#[test]
fn sighup_under_load_with_two_worker_threads() {
    add_a_server_under_load(2);
}

fn add_a_server_under_load(threads: usize) {
    let backends: Vec<Shoald> = (0..3).map(|_| Shoald::start()).collect();
    let (a, b, new) = (&backends[0], &backends[1], &backends[2]);
    let proxy = Proxy::start_threads(&conf(&[("alpha", "127.0.0.1:0", &[a, b])]), 1, threads);
    let addr = proxy.pools[0];
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..8)
        .map(|t| {
            let (stop, done) = (stop.clone(), done.clone());
            std::thread::spawn(move || {
                let mut c = Conn::connect(addr);
                let mut i = 0u64;
                // Bounded: the main thread stops it within a few seconds.
                while !stop.load(Ordering::Relaxed) && i < 1_000_000 {
                    let k = format!("load-{t}-{i}");
                    // The set and its get in one write: they are read in one turn, so
                    // they are placed by the same ring even across the switch.
                    c.send(format!("set {k} 0 0 2\r\nv{t}\r\nget {k}\r\n").as_bytes());
                    assert_eq!(c.line(), "STORED", "set {k}");
                    assert_eq!(c.values(), Ok(vec![(k.clone(), format!("v{t}"))]), "{k}");
                    i += 1;
                    done.fetch_add(1, Ordering::Relaxed);
                }
                c
            })
        })
        .collect();
    let until = |n: u64| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while done.load(Ordering::Relaxed) < n {
            assert!(Instant::now() < deadline, "load stalled");
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    until(2_000);
    std::fs::write(&proxy.conf, conf(&[("alpha", "127.0.0.1:0", &[a, b, new])]))
        .expect("rewrite conf");
    let pid = i32::try_from(proxy.proc.child.id()).expect("pid");
    // SAFETY: kill(2) on our own child's pid has no memory effects.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGHUP) }, 0);
    let changes = proxy.proc.wait_for("configuration reloaded: ");
    assert!(changes.contains("server"), "{changes}");
    let after = done.load(Ordering::Relaxed);
    until(after + 2_000);
    stop.store(true, Ordering::Relaxed);
    let mut conns: Vec<Conn> = workers
        .into_iter()
        .map(|w| w.join().expect("worker failed"))
        .collect();
    // The same client sockets now place keys on the new ring, the new server included.
    let fresh = keys("fresh", 200);
    for (i, c) in conns.iter_mut().enumerate() {
        set_get(c, &fresh[i * 25..(i + 1) * 25]);
    }
    let held = holders(&backends, &fresh);
    assert!(held.iter().all(|h| h.len() == 1), "{held:?}");
    assert!(held.iter().any(|h| h == &[2]), "no key on the new server");
    assert_eq!(counter(&proxy, "reloads"), 1);
    assert_eq!(stats(&proxy)["alpha"]["client_err"], 0);
}

#[test]
fn invalid_config_is_refused_with_its_line_and_the_old_one_keeps_serving() {
    let backend = Shoald::start();
    let good = conf(&[("alpha", "127.0.0.1:0", &[&backend])]);
    let proxy = Proxy::start(&good, 1);
    let mut c = proxy.conn();
    set_get(&mut c, &keys("before", 10));
    std::fs::write(&proxy.conf, good.replace("hash: md5", "hash: nosuch")).expect("write");
    let reply = reload(&proxy);
    assert!(reply.starts_with("ERROR "), "{reply:?}");
    assert!(
        reply.contains("line 3") && reply.contains("hash"),
        "{reply:?}"
    );
    assert!(
        reply.ends_with("\r\n") && reply.lines().count() == 1,
        "{reply:?}"
    );
    // Same connection, new connections: the old configuration still serves.
    set_get(&mut c, &keys("after", 10));
    set_get(&mut proxy.conn(), &keys("new-conn", 10));
    assert_eq!(counter(&proxy, "reload_failures"), 1);
    assert_eq!(counter(&proxy, "reloads"), 0);
    // Fixed, it reloads.
    std::fs::write(&proxy.conf, &good).expect("write");
    assert_eq!(reload(&proxy), "OK\r\n");
    assert_eq!(counter(&proxy, "reloads"), 1);
    set_get(&mut c, &keys("fixed", 10));
    // Anything else on the stats port is an error; nothing still gets the JSON.
    assert_eq!(
        stats_port(proxy.stats, b"frobnicate\r\n"),
        "ERROR unknown command\r\n"
    );
}

#[test]
fn a_removed_server_stops_receiving_keys() {
    let (a, b) = (Shoald::start(), Shoald::start());
    let proxy = Proxy::start(&conf(&[("alpha", "127.0.0.1:0", &[&a, &b])]), 1);
    let mut c = proxy.conn();
    let before = keys("before", 100);
    set_get(&mut c, &before);
    let on_b = holders(std::slice::from_ref(&b), &before);
    assert!(
        on_b.iter().any(|h| !h.is_empty()),
        "b had no keys to begin with: {on_b:?} (a: {:?})",
        holders(std::slice::from_ref(&a), &before)
    );
    std::fs::write(&proxy.conf, conf(&[("alpha", "127.0.0.1:0", &[&a])])).expect("write");
    assert_eq!(reload(&proxy), "OK\r\n");
    common::flush(std::slice::from_ref(&b));
    let after = keys("after", 100);
    set_get(&mut c, &after);
    set_get(&mut proxy.conn(), &keys("after-new-conn", 100));
    let on_b = holders(std::slice::from_ref(&b), &after);
    assert!(on_b.iter().all(|h| h.is_empty()), "{on_b:?}");
    let on_a = holders(std::slice::from_ref(&a), &after);
    assert!(on_a.iter().all(|h| h.len() == 1), "{on_a:?}");
}

#[test]
fn pools_are_added_moved_and_removed_without_touching_the_others() {
    let (a, b) = (Shoald::start(), Shoald::start());
    let proxy = Proxy::start(
        &conf(&[
            ("alpha", "127.0.0.1:0", &[&a]),
            ("beta", "127.0.0.1:0", &[&b]),
        ]),
        2,
    );
    let mut alpha = Conn::connect(proxy.pools[0]);
    let mut beta = Conn::connect(proxy.pools[1]);
    set_get(&mut alpha, &keys("a", 5));
    set_get(&mut beta, &keys("b", 5));
    // beta moves to a new port, gamma is added, alpha is removed.
    let moved = common::free_port();
    std::fs::write(
        &proxy.conf,
        conf(&[
            ("beta", &format!("127.0.0.1:{moved}"), &[&b]),
            ("gamma", "127.0.0.1:0", &[&a]),
        ]),
    )
    .expect("write");
    assert_eq!(reload(&proxy), "OK\r\n");
    let gamma: SocketAddr = proxy
        .proc
        .wait_for("pool gamma listening on ")
        .parse()
        .expect("gamma addr");
    // Open connections keep working, on whatever pool they were accepted by.
    set_get(&mut alpha, &keys("a2", 5));
    set_get(&mut beta, &keys("b2", 5));
    set_get(&mut Conn::connect(gamma), &keys("g", 5));
    set_get(
        &mut Conn::connect(SocketAddr::from(([127, 0, 0, 1], moved))),
        &keys("b3", 5),
    );
    // The removed pool's and the moved pool's old listeners are closed.
    for old in &proxy.pools {
        assert!(
            TcpStream::connect_timeout(old, common::IO_TIMEOUT).is_err(),
            "{old}"
        );
    }
    let s = stats(&proxy);
    assert!(s.get("alpha").is_none() && s.get("gamma").is_some(), "{s}");
}

/// `total_connections` of a backend, asked directly (the asking connection counts).
fn backend_connections(b: &Shoald) -> u64 {
    let mut c = b.conn();
    c.send(b"stats\r\n");
    loop {
        let l = c.line();
        assert_ne!(l, "END", "no total_connections");
        if let Some(n) = l.strip_prefix("STAT total_connections ") {
            return n.parse().expect("number");
        }
    }
}

#[test]
fn a_kept_server_keeps_its_backend_connection() {
    let backends: Vec<Shoald> = (0..2).map(|_| Shoald::start()).collect();
    let (a, b) = (&backends[0], &backends[1]);
    let proxy = Proxy::start(&conf(&[("alpha", "127.0.0.1:0", &[a])]), 1);
    let mut c = proxy.conn();
    set_get(&mut c, &keys("before", 20));
    let before = backend_connections(a);
    std::fs::write(&proxy.conf, conf(&[("alpha", "127.0.0.1:0", &[a, b])])).expect("write");
    assert_eq!(reload(&proxy), "OK\r\n");
    let after = keys("after", 100);
    set_get(&mut c, &after);
    let held = holders(&backends, &after);
    assert!(
        held.iter().any(|h| h == &[0]) && held.iter().any(|h| h == &[1]),
        "{held:?}"
    );
    // holders() opened one connection to `a`, and asking opens one more: the proxy's
    // connection to `a` is the one it had before the reload.
    assert_eq!(backend_connections(a), before + 2);
}

#[test]
fn reloads_are_counted_on_the_metrics_page() {
    let backend = Shoald::start();
    let good = conf(&[("alpha", "127.0.0.1:0", &[&backend])]);
    let path = common::write_conf(&good);
    let mut cmd = std::process::Command::new(common::proxy_bin());
    cmd.arg("-c")
        .arg(&path)
        .args(["-s", "-1", "--metrics-listen", "127.0.0.1:0"]);
    let proc = common::Proc::spawn(cmd);
    let metrics: SocketAddr = proc
        .wait_for("metrics listening on ")
        .parse()
        .expect("metrics addr");
    let pid = i32::try_from(proc.child.id()).expect("pid");
    let hup = || {
        // SAFETY: kill(2) on our own child's pid has no memory effects.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGHUP) }, 0);
    };
    std::fs::write(&path, "alpha:\n  listen: [\n").expect("write");
    hup();
    let why = proc.wait_for("reload refused");
    assert!(why.contains("line "), "{why}");
    std::fs::write(&path, &good).expect("write");
    hup();
    proc.wait_for("configuration reloaded");
    let page = shoal_test_support::scrape_metrics(metrics);
    let value = |m: &str| shoal_test_support::metric_value(&page, m);
    assert_eq!(value("shoal_proxy_reloads_total"), Some(1.0), "{page}");
    assert_eq!(
        value("shoal_proxy_reload_failures_total"),
        Some(1.0),
        "{page}"
    );
}
