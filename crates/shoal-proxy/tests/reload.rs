//! Configuration reload (issue 16): SIGHUP and the stats port's `reload` command switch
//! pools without dropping client connections; an invalid file is refused and the old
//! configuration keeps serving.

mod common;

use common::{holders, reload, stats_port, Conn, Proxy, Shoald};
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
    proxy.proc.sighup();
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
    let hup = || proc.sighup();
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

/// One pool `alpha` over `backends` with these weights, hash and distribution.
fn placed_conf(backends: &[Shoald], weights: &[u32], hash: &str, distribution: &str) -> String {
    let mut c = format!(
        "alpha:\n  listen: 127.0.0.1:0\n  hash: {hash}\n  distribution: {distribution}\n  \
         timeout: 2000\n  servers:\n"
    );
    for (b, w) in backends.iter().zip(weights) {
        c.push_str(&format!("   - {}:{w}\n", b.addr));
    }
    c
}

/// Where `keys` land when set through a fresh shoal-proxy started on `conf` (the backends
/// are emptied before and after).
fn fresh_placement(conf: &str, backends: &[Shoald], keys: &[String]) -> Vec<Vec<usize>> {
    common::flush(backends);
    let fresh = Proxy::start(conf, 1);
    common::set_all(fresh.pools[0], keys);
    let held = holders(backends, keys);
    common::flush(backends);
    held
}

/// A reload that reweights a server, then one that changes the pool's `hash`, then one
/// that changes its `distribution`: after each, keys set through the reloaded proxy (on a
/// connection opened before all of them) land exactly where a proxy started on the new
/// file puts them, and not where they were before.
#[test]
fn weight_hash_and_distribution_changes_place_keys_as_a_fresh_proxy_does() {
    let backends = common::three_backends();
    let keys = keys("placed", 300);
    let steps = [
        placed_conf(&backends, &[1, 1, 1], "md5", "ketama"),
        placed_conf(&backends, &[6, 1, 1], "md5", "ketama"),
        placed_conf(&backends, &[6, 1, 1], "murmur", "ketama"),
        placed_conf(&backends, &[6, 1, 1], "murmur", "modula"),
    ];
    let proxy = Proxy::start(&steps[0], 1);
    let mut c = proxy.conn();
    common::set_over(&mut c, &keys);
    let mut before = holders(&backends, &keys);
    assert!(before.iter().all(|h| h.len() == 1), "{before:?}");
    for (i, conf) in steps.iter().enumerate().skip(1) {
        let want = fresh_placement(conf, &backends, &keys);
        std::fs::write(&proxy.conf, conf).expect("rewrite conf");
        assert_eq!(reload(&proxy), "OK\r\n", "step {i}");
        common::set_over(&mut c, &keys);
        let after = holders(&backends, &keys);
        common::flush(&backends);
        assert_eq!(after, want, "step {i}: not where a fresh proxy puts them");
        let moved = after.iter().zip(&before).filter(|(a, b)| a != b).count();
        assert!(moved > 30, "step {i}: only {moved} of 300 keys moved");
        before = after;
    }
    // Each step's weights: server 0 got most keys once it weighed 6 of 8.
    let on_first = before.iter().filter(|h| h == &&[0]).count();
    assert!(on_first > 150, "{on_first} of 300 keys on the heavy server");
}

/// Sends `get k` over `c` and returns how long the timeout error took.
fn time_out(c: &mut Conn) -> Duration {
    let t = Instant::now();
    c.send(b"get k\r\n");
    assert_eq!(c.line(), "SERVER_ERROR Connection timed out");
    t.elapsed()
}

/// A reload that changes the pool's `timeout` applies it: a silent server's requests fail
/// after the new timeout, on a connection opened before the reload.
#[test]
fn a_reloaded_timeout_applies() {
    let silent = common::fake_backend(None);
    let conf = |ms: u64| {
        format!("alpha:\n  listen: 127.0.0.1:0\n  timeout: {ms}\n  servers:\n   - {silent}:1\n")
    };
    let proxy = Proxy::start(&conf(250), 1);
    let mut c = proxy.conn();
    let short = time_out(&mut c);
    assert!(
        short >= Duration::from_millis(200) && short < Duration::from_millis(1000),
        "{short:?} with a 250 ms timeout"
    );
    std::fs::write(&proxy.conf, conf(1500)).expect("rewrite conf");
    assert_eq!(reload(&proxy), "OK\r\n");
    let long = time_out(&mut c);
    assert!(
        long >= Duration::from_millis(1400) && long < Duration::from_millis(2500),
        "{long:?} with a 1500 ms timeout"
    );
}

/// A server that answers only when told to: it reports each request it reads on
/// `arrived`, then waits for a message on the returned sender before answering it with
/// `reply`.
fn gated_backend(
    reply: &'static [u8],
) -> (
    SocketAddr,
    std::sync::mpsc::Receiver<()>,
    std::sync::mpsc::Sender<()>,
) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    let (arrived_tx, arrived) = std::sync::mpsc::channel();
    let (release, release_rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let Ok((mut s, _)) = l.accept() else { return };
        let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
        let mut buf = [0u8; 4096];
        while matches!(s.read(&mut buf), Ok(n) if n > 0) {
            if arrived_tx.send(()).is_err()
                || release_rx.recv_timeout(Duration::from_secs(30)).is_err()
                || s.write_all(reply).is_err()
            {
                return;
            }
        }
    });
    (addr, arrived, release)
}

/// A request in flight across a reload finishes on the configuration it started on: held
/// by a slow server, it is answered by that server after a SIGHUP that removed it, while
/// new requests (and the same connection's next one) use the new server.
#[test]
fn a_request_in_flight_across_a_reload_is_answered_by_its_removed_server() {
    let (slow, arrived, release) = gated_backend(b"VALUE k 0 4\r\nslow\r\nEND\r\n");
    let new = Shoald::start();
    let conf = |server: SocketAddr| {
        format!("alpha:\n  listen: 127.0.0.1:0\n  timeout: 20000\n  servers:\n   - {server}:1\n")
    };
    let proxy = Proxy::start(&conf(slow), 1);
    let mut held = proxy.conn();
    held.send(b"get k\r\n");
    arrived
        .recv_timeout(common::IO_TIMEOUT)
        .expect("the request reached the slow server");

    std::fs::write(&proxy.conf, conf(new.addr)).expect("rewrite conf");
    proxy.proc.sighup();
    let changes = proxy.proc.wait_for("configuration reloaded: ");
    assert!(
        changes.contains(&format!("server {slow} removed")),
        "{changes}"
    );
    // New connections use the new server meanwhile.
    let mut other = proxy.conn();
    assert_eq!(other.set("k", "fast"), "STORED");
    assert_eq!(other.get(&["k"]), Ok(vec![("k".into(), "fast".into())]));

    release.send(()).expect("release the slow reply");
    assert_eq!(held.values(), Ok(vec![("k".into(), "slow".into())]));
    // Its next request uses the new configuration.
    assert_eq!(held.get(&["k"]), Ok(vec![("k".into(), "fast".into())]));
    assert_eq!(
        holders(std::slice::from_ref(&new), &["k".to_string()]),
        vec![vec![0]]
    );
}
