//! mcrouter-style routes (issue 16): failover, warmup, shadow, prefix and replicated
//! pools, each over real shoald backends started here, through a real shoal-proxy; bad
//! route configurations; routes across a reload.

mod common;

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use common::*;

/// A server pool named `name` over `backends` (no listen unless given).
fn servers(name: &str, listen: Option<&str>, backends: &[&Shoald]) -> String {
    let mut s = format!("{name}:\n");
    if let Some(l) = listen {
        s.push_str(&format!("  listen: {l}\n"));
    }
    s.push_str("  hash: md5\n  timeout: 1000\n  servers:\n");
    for b in backends {
        s.push_str(&format!("   - {}:1\n", b.addr));
    }
    s
}

/// A listening route pool `front` with `route` (its keys, indented by four).
fn front(route: &str) -> String {
    format!("front:\n  listen: 127.0.0.1:0\n  route:\n{route}")
}

fn stats_json(addr: SocketAddr) -> serde_json::Value {
    let mut s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("stats");
    s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read stats");
    serde_json::from_str(&out).expect("stats json")
}

/// `get key` straight from a backend: its value, if it has one.
fn value_on(b: &Shoald, key: &str) -> Option<String> {
    b.conn()
        .get(&[key])
        .expect("backend get")
        .into_iter()
        .next()
        .map(|(_, v)| v)
}

fn set_on(b: &Shoald, key: &str, value: &str) {
    assert_eq!(b.conn().set(key, value), "STORED");
}

/// Polls (bounded) until `f` holds.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn failover_goes_on_for_misses_of_gets_and_errors_of_everything() {
    let (mut a, b) = (Shoald::start(), Shoald::start());
    let conf = front("    type: failover\n    pools: [main, backup]\n")
        + &servers("main", None, &[&a])
        + &servers("backup", None, &[&b]);
    let proxy = Proxy::start_threads(&conf, 1, 2);
    set_on(&a, "only-a", "a");
    set_on(&b, "only-b", "b");
    set_on(&a, "both", "a");
    set_on(&b, "both", "b");
    let mut c = proxy.conn();
    // Gets: a miss on main goes on to backup; a hit on main stops there.
    assert_eq!(c.get(&["only-b"]), Ok(pairs(&[("only-b", "b")])));
    assert_eq!(c.get(&["both"]), Ok(pairs(&[("both", "a")])));
    assert_eq!(
        c.get(&["only-a", "nowhere", "only-b", "both", "only-b"]),
        Ok(pairs(&[
            ("only-a", "a"),
            ("only-b", "b"),
            ("both", "a"),
            ("only-b", "b")
        ]))
    );
    assert_eq!(c.get(&["nowhere"]), Ok(vec![]));
    // Meta gets fail over on misses too.
    assert_eq!(c.cmd("mg only-b v"), "VA 1");
    assert_eq!(c.data(1), b"b");
    assert_eq!(c.cmd("mg nowhere v"), "EN");
    // Writes fail over only on errors: a success or NOT_STORED on main is the answer.
    assert_eq!(c.set("new", "n"), "STORED");
    assert_eq!(value_on(&a, "new").as_deref(), Some("n"));
    assert_eq!(value_on(&b, "new"), None);
    c.send(b"add both 0 0 1\r\nx\r\n");
    assert_eq!(c.line(), "NOT_STORED");
    assert_eq!(
        value_on(&b, "both").as_deref(),
        Some("b"),
        "not failed over"
    );
    // Main dies: every request goes on to backup.
    a.proc.kill();
    assert_eq!(c.set("after", "z"), "STORED");
    assert_eq!(value_on(&b, "after").as_deref(), Some("z"));
    assert_eq!(c.get(&["after", "only-a"]), Ok(pairs(&[("after", "z")])));
    assert_eq!(c.cmd("delete only-b"), "DELETED");
    assert_eq!(value_on(&b, "only-b"), None);
    assert_eq!(c.cmd("ms m 1 T0\r\nq"), "HD");
    assert_eq!(value_on(&b, "m").as_deref(), Some("q"));
    // The route pool has its own counters in the stats.
    let st = stats_json(proxy.stats);
    assert_eq!(st["front"]["client_connections"], 1);
    assert!(st["main"]["forward_error"].as_u64().unwrap_or(0) > 0);
}

#[test]
fn failover_with_both_pools_down_answers_the_last_error() {
    let (mut a, mut b) = (Shoald::start(), Shoald::start());
    let conf = front("    type: failover\n    pools: [main, backup]\n")
        + &servers("main", None, &[&a])
        + &servers("backup", None, &[&b]);
    let proxy = Proxy::start(&conf, 1);
    a.proc.kill();
    b.proc.kill();
    let mut c = proxy.conn();
    assert!(c.set("k", "v").starts_with("SERVER_ERROR"));
    assert!(c
        .get(&["k", "j"])
        .expect_err("error")
        .starts_with("SERVER_ERROR"));
    let st = stats_json(proxy.stats);
    assert_eq!(st["front"]["forward_error"], 2);
}

#[test]
fn warmup_reads_warm_on_cold_misses_and_fills_cold() {
    let (cold, warm) = (Shoald::start(), Shoald::start());
    let conf = front("    type: warmup\n    cold: new\n    warm: old\n    exptime: 300\n")
        + &servers("new", None, &[&cold])
        + &servers("old", None, &[&warm]);
    let proxy = Proxy::start_threads(&conf, 1, 2);
    let mut w = warm.conn();
    w.send(b"set w1 42 0 2\r\nhi\r\nset w2 7 0 3\r\nabc\r\nset w3 0 0 1\r\nx\r\n");
    for _ in 0..3 {
        assert_eq!(w.line(), "STORED");
    }
    let mut c = proxy.conn();
    // get: answered from warm, copied into cold with warm's flags and the route's exptime.
    assert_eq!(c.cmd("get w1"), "VALUE w1 42 2");
    assert_eq!(c.data(2), b"hi");
    assert_eq!(c.line(), "END");
    let mut on_cold = cold.conn();
    eventually("w1 on cold", || {
        let l = on_cold.cmd("mg w1 f t v");
        if l == "EN" {
            return false;
        }
        let toks: Vec<&str> = l.split(' ').collect();
        assert_eq!(toks[..3], ["VA", "2", "f42"], "{l}");
        let ttl: i64 = toks[3].trim_start_matches('t').parse().expect("ttl");
        assert!((290..=300).contains(&ttl), "{l}");
        assert_eq!(on_cold.data(2), b"hi");
        true
    });
    // gets: copied before answering, and the CAS token is cold's.
    let line = c.cmd("gets w2");
    assert!(line.starts_with("VALUE w2 7 3 "), "{line}");
    let cas = line.rsplit(' ').next().unwrap_or_default().to_string();
    assert_eq!(c.data(3), b"abc");
    assert_eq!(c.line(), "END");
    let mut again = cold.conn();
    assert_eq!(
        again.cmd("mg w2 c"),
        format!("HD c{cas}"),
        "on cold right away"
    );
    // gat: the copy gets the expiration time the request asked for.
    assert_eq!(c.cmd("gat 50 w3"), "VALUE w3 0 1");
    assert_eq!(c.data(1), b"x");
    assert_eq!(c.line(), "END");
    eventually("w3 on cold with ttl 50", || {
        let l = again.cmd("mg w3 t");
        l.starts_with("HD t") && {
            let ttl: i64 = l[4..].parse().expect("ttl");
            (40..=50).contains(&ttl)
        }
    });
    // A cold hit wins over warm.
    set_on(&cold, "both", "cold");
    set_on(&warm, "both", "warm");
    assert_eq!(c.get(&["both"]), Ok(pairs(&[("both", "cold")])));
    // Multi-get: cold's, warm's, neither; in key order.
    set_on(&warm, "w4", "4");
    assert_eq!(
        c.get(&["w4", "nowhere", "both"]),
        Ok(pairs(&[("w4", "4"), ("both", "cold")]))
    );
    // Sets and deletes go to cold only.
    assert_eq!(c.set("fresh", "f"), "STORED");
    assert_eq!(value_on(&cold, "fresh").as_deref(), Some("f"));
    assert_eq!(value_on(&warm, "fresh"), None);
    assert_eq!(c.cmd("delete w1"), "DELETED");
    assert_eq!(value_on(&cold, "w1"), None);
    assert_eq!(
        value_on(&warm, "w1").as_deref(),
        Some("hi"),
        "warm untouched"
    );
    // ... so, as in mcrouter, the next get brings warm's value back.
    assert_eq!(c.get(&["w1"]), Ok(pairs(&[("w1", "hi")])));
    // Meta reads try cold then warm, without copying.
    set_on(&warm, "m1", "mv");
    assert_eq!(c.cmd("mg m1 v"), "VA 2");
    assert_eq!(c.data(2), b"mv");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(value_on(&cold, "m1"), None);
}

/// Keys on `b` among `keys`, asked directly.
fn held(b: &Shoald, keys: &[String]) -> Vec<String> {
    let mut c = b.conn();
    let mut out = Vec::new();
    for chunk in keys.chunks(100) {
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        out.extend(c.get(&refs).expect("get").into_iter().map(|(k, _)| k));
    }
    out
}

/// `held` once the count stops changing (shadow copies arrive after the replies).
fn settled(b: &Shoald, keys: &[String]) -> Vec<String> {
    let mut last = held(b, keys);
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let now = held(b, keys);
        if now.len() == last.len() {
            return now;
        }
        last = now;
    }
}

#[test]
fn shadow_copies_a_fixed_fraction_of_keys_and_a_dead_shadow_costs_clients_nothing() {
    let (main, mut test) = (Shoald::start(), Shoald::start());
    let conf = front("    type: shadow\n    pool: prod\n    shadow: test\n    fraction: 0.3\n")
        + &servers("prod", None, &[&main])
        + &servers("test", None, &[&test]);
    let proxy = Proxy::start_threads(&conf, 1, 2);
    let keys: Vec<String> = (0..1000).map(|i| format!("sh:{i}")).collect();
    set_all(proxy.pools[0], &keys);
    assert_eq!(held(&main, &keys).len(), 1000, "prod has every key");
    let copied = settled(&test, &keys);
    // 30% of 1000 keys: the binomial standard deviation is 14.5 keys; +-3.4 of them.
    assert!(
        (250..=350).contains(&copied.len()),
        "{} keys copied",
        copied.len()
    );
    // By key, so always the same keys: set everything again with another value.
    let mut c = proxy.conn();
    for k in &keys {
        assert_eq!(c.set(k, "2"), "STORED");
    }
    let again = settled(&test, &keys);
    assert_eq!(again, copied, "the same keys");
    for k in &copied {
        assert_eq!(value_on(&test, k).as_deref(), Some("2"));
    }
    // Reads are copied too, and their answers discarded: the client sees prod's.
    let before = stats_json(proxy.stats)["test"][test.addr.to_string()]["requests"]
        .as_u64()
        .expect("requests");
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    assert_eq!(c.get(&refs[..100]).expect("get").len(), 100);
    eventually("copied get", || {
        stats_json(proxy.stats)["test"][test.addr.to_string()]["requests"]
            .as_u64()
            .unwrap_or(0)
            > before
    });
    // The shadow dies: clients do not notice.
    test.proc.kill();
    let start = Instant::now();
    for k in &keys[..300] {
        assert_eq!(c.set(k, "3"), "STORED");
        assert_eq!(c.get(&[k.as_str()]), Ok(vec![(k.clone(), "3".into())]));
    }
    assert!(start.elapsed() < Duration::from_secs(20));
    let st = stats_json(proxy.stats);
    assert_eq!(st["front"]["forward_error"], 0);
    assert_eq!(st["prod"]["forward_error"], 0);
}

#[test]
fn a_shadow_that_never_reads_gets_copies_dropped_not_clients_stalled() {
    let main = Shoald::start();
    // Accepts connections (the kernel does) and never reads them: the proxy's writes
    // to it back up, then its queue fills.
    let hole = TcpListener::bind("127.0.0.1:0").expect("bind");
    let hole_addr = hole.local_addr().expect("addr");
    let conf = front("    type: shadow\n    pool: prod\n    shadow: hole\n    fraction: 1\n")
        + &servers("prod", None, &[&main])
        + &format!("hole:\n  servers:\n   - {hole_addr}:1\n");
    let proxy = Proxy::start(&conf, 1);
    let value = "v".repeat(4096);
    let mut c = proxy.conn();
    let start = Instant::now();
    let n = 10_000;
    for chunk in 0..n / 50 {
        let mut req = Vec::new();
        for i in 0..50 {
            req.extend_from_slice(
                format!(
                    "set hole:{} 0 0 {}\r\n{value}\r\n",
                    chunk * 50 + i,
                    value.len()
                )
                .as_bytes(),
            );
        }
        c.send(&req);
        for _ in 0..50 {
            assert_eq!(c.line(), "STORED");
        }
    }
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "{:?}",
        start.elapsed()
    );
    let st = stats_json(proxy.stats);
    let copies = st["hole"][hole_addr.to_string()]["requests"]
        .as_u64()
        .expect("requests");
    assert!(
        copies < n,
        "{copies} of {n} copies queued: some were dropped"
    );
    drop(hole);
}

#[test]
fn prefix_routes_by_longest_prefix_with_a_default() {
    let (a, ab, other) = (Shoald::start(), Shoald::start(), Shoald::start());
    let conf = front(
        "    type: prefix\n    prefixes:\n      \"a/\": pa\n      \"a/b/\": pab\n    default: rest\n",
    ) + &servers("pa", None, &[&a])
        + &servers("pab", None, &[&ab])
        + &servers("rest", None, &[&other]);
    let proxy = Proxy::start_threads(&conf, 1, 2);
    let mut c = proxy.conn();
    let placed = [
        ("a/1", 0),
        ("a/b/1", 1),
        ("a/bc", 0),
        ("a/b/", 1),
        ("x/1", 2),
        ("b/a/", 2),
        ("a", 2),
    ];
    let backends = [&a, &ab, &other];
    for (k, _) in placed {
        assert_eq!(c.set(k, k), "STORED");
    }
    for (k, at) in placed {
        for (i, b) in backends.iter().enumerate() {
            let want = (i == at).then(|| k.to_string());
            assert_eq!(value_on(b, k), want, "{k} on backend {i}");
        }
    }
    // A multi-get over every pool, back in key order.
    let ask = ["b/a/", "a/b/1", "nope", "a/1", "x/1", "a/b/1"];
    let want: Vec<(String, String)> = ask
        .iter()
        .filter(|k| **k != "nope")
        .map(|k| (k.to_string(), k.to_string()))
        .collect();
    assert_eq!(c.get(&ask), Ok(want));
    // Meta commands route by key too (a base64 key by its decoded bytes: "a/b/2").
    assert_eq!(c.cmd("ms YS9iLzI= 1 b\r\nz"), "HD");
    assert_eq!(value_on(&ab, "a/b/2").as_deref(), Some("z"));
    // flush_all reaches every pool of the route.
    assert_eq!(c.cmd("flush_all"), "OK");
    for b in backends {
        assert_eq!(
            held(b, &["a/1".into(), "a/b/1".into(), "x/1".into()]).len(),
            0
        );
    }
}

#[test]
fn replicated_pools_write_all_sync_and_read_latest() {
    let mut reps = vec![Shoald::start(), Shoald::start(), Shoald::start()];
    let conf = front("    type: replicated\n    pools: [r0, r1, r2]\n")
        + &servers("r0", None, &[&reps[0]])
        + &servers("r1", None, &[&reps[1]])
        + &servers("r2", None, &[&reps[2]]);
    let proxy = Proxy::start_threads(&conf, 1, 2);
    let mut c = proxy.conn();
    // AllSync: every replica gets the write.
    assert_eq!(c.set("k", "v"), "STORED");
    for r in &reps {
        assert_eq!(value_on(r, "k").as_deref(), Some("v"));
    }
    // ... and the worst reply answers: NOT_STORED from one replica beats STORED.
    set_on(&reps[1], "dup", "x");
    c.send(b"add dup 0 0 1\r\ny\r\n");
    assert_eq!(c.line(), "NOT_STORED");
    assert_eq!(value_on(&reps[0], "dup").as_deref(), Some("y"));
    assert_eq!(value_on(&reps[2], "dup").as_deref(), Some("y"));
    // Latest: reads go to this host's replica, always the same one.
    for (i, r) in reps.iter().enumerate() {
        set_on(r, "which", &i.to_string());
    }
    let first = c.get(&["which"]).expect("get");
    let preferred: usize = first[0].1.parse().expect("index");
    for _ in 0..20 {
        assert_eq!(c.get(&["which"]).expect("get"), first);
    }
    // A miss there is the answer (no failover on misses).
    let other = (preferred + 1) % 3;
    set_on(&reps[other], "elsewhere", "e");
    assert_eq!(c.get(&["elsewhere"]), Ok(vec![]));
    // The preferred replica dies: reads fail over, writes answer its error while the
    // live replicas still take them.
    reps[preferred].proc.kill();
    let got = c.get(&["which"]).expect("failed-over get");
    assert_ne!(got[0].1, preferred.to_string());
    assert!(c.set("late", "l").starts_with("SERVER_ERROR"));
    for (i, r) in reps.iter().enumerate().filter(|(i, _)| *i != preferred) {
        assert_eq!(value_on(r, "late").as_deref(), Some("l"), "replica {i}");
    }
}

#[test]
fn routes_compose_and_flush_reaches_their_pools() {
    // A prefix route whose "f/" keys go through a failover route.
    let (a, b, d) = (Shoald::start(), Shoald::start(), Shoald::start());
    let conf = front("    type: prefix\n    prefixes:\n      \"f/\": fo\n    default: plain\n")
        + "fo:\n  route:\n    type: failover\n    pools: [fa, fb]\n"
        + &servers("fa", None, &[&a])
        + &servers("fb", None, &[&b])
        + &servers("plain", Some("127.0.0.1:0"), &[&d]);
    let proxy = Proxy::start(&conf, 2);
    set_on(&b, "f/x", "from-b");
    let mut c = proxy.conn();
    assert_eq!(c.get(&["f/x"]), Ok(pairs(&[("f/x", "from-b")])));
    assert_eq!(c.set("y", "d"), "STORED");
    assert_eq!(value_on(&d, "y").as_deref(), Some("d"));
    // The plain pool also listens on its own.
    let mut direct = Conn::connect(proxy.pools[1]);
    assert_eq!(direct.get(&["y"]), Ok(pairs(&[("y", "d")])));
    assert_eq!(c.cmd("flush_all"), "OK");
    for s in [&a, &b, &d] {
        assert_eq!(held(s, &["f/x".into(), "y".into()]).len(), 0);
    }
}

fn run_test_conf(text: &str) -> (Option<i32>, String) {
    let out = std::process::Command::new(proxy_bin())
        .arg("-t")
        .arg("-c")
        .arg(write_conf(text))
        .output()
        .expect("run");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_route_configs_are_refused_with_their_line() {
    let b = Shoald::start();
    let pools = servers("p1", None, &[&b]) + &servers("p2", None, &[&b]);
    let cases = [
        (
            front("    type: failover\n    pools: [p1, p3]\n") + &pools,
            "line 5: field 'pools': no pool named 'p3'",
        ),
        (
            front("    type: fastest\n") + &pools,
            "line 4: field 'type': unknown route type 'fastest'",
        ),
        (
            front("    type: warmup\n    cold: p1\n") + &pools,
            "line 3: field 'route': a 'warmup' route needs 'warm'",
        ),
        (
            front("    type: shadow\n    pool: p1\n    shadow: p2\n    fraction: 2\n") + &pools,
            "line 7: field 'fraction': '2' is not between 0 and 1",
        ),
        (
            front("    type: failover\n    pools: [p1, front]\n") + &pools,
            "line 3: field 'route': routes loop: front -> front",
        ),
    ];
    for (text, want) in cases {
        let (code, err) = run_test_conf(&text);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains(want), "want {want:?} in {err:?}");
    }
    let (code, err) = run_test_conf(&(front("    type: failover\n    pools: [p1, p2]\n") + &pools));
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn reload_turns_a_pool_into_a_route_and_back_keeping_connections() {
    let (a, b) = (Shoald::start(), Shoald::start());
    let listen = format!("127.0.0.1:{}", free_port());
    let plain = servers("front", Some(&listen), &[&a]);
    let proxy = Proxy::start_threads(&plain, 1, 2);
    let mut c = proxy.conn();
    set_on(&b, "only-b", "b");
    assert_eq!(c.get(&["only-b"]), Ok(vec![]));
    // Same listen address, now a failover route over the old server and a new pool.
    let routed =
        format!("front:\n  listen: {listen}\n  route:\n    type: failover\n    pools: [pa, pb]\n")
            + &servers("pa", None, &[&a])
            + &servers("pb", None, &[&b]);
    std::fs::write(&proxy.conf, &routed).expect("write conf");
    assert_eq!(reload(&proxy), "OK\r\n");
    assert_eq!(
        c.get(&["only-b"]),
        Ok(pairs(&[("only-b", "b")])),
        "same connection"
    );
    // A bad route is refused with its line; the route keeps serving.
    std::fs::write(&proxy.conf, routed.replace("[pa, pb]", "[pa, pz]")).expect("write");
    let r = reload(&proxy);
    assert!(
        r.starts_with("ERROR") && r.contains("line 5: field 'pools'"),
        "{r}"
    );
    assert_eq!(c.get(&["only-b"]), Ok(pairs(&[("only-b", "b")])));
    // A target pool's servers change: the route follows.
    std::fs::write(
        &proxy.conf,
        routed.replace(&b.addr.to_string(), &a.addr.to_string()),
    )
    .expect("write");
    assert_eq!(reload(&proxy), "OK\r\n");
    assert_eq!(c.get(&["only-b"]), Ok(vec![]));
    // And back to a plain pool.
    std::fs::write(&proxy.conf, servers("front", Some(&listen), &[&b])).expect("write");
    assert_eq!(reload(&proxy), "OK\r\n");
    assert_eq!(c.get(&["only-b"]), Ok(pairs(&[("only-b", "b")])));
    let st = stats_json(proxy.stats);
    assert_eq!(st["reloads"], 3);
    assert_eq!(st["reload_failures"], 1);
    assert_eq!(
        st["front"]["client_connections"], 1,
        "counters carried over"
    );
}

#[test]
fn warmup_and_replicated_pools_over_real_memcached() {
    let (Some(cold), Some(warm), Some(other)) = (memcached(), memcached(), memcached()) else {
        return;
    };
    let conf = front("    type: warmup\n    cold: new\n    warm: old\n    exptime: 120\n")
        + &servers("new", None, &[&cold])
        + &servers("old", None, &[&warm])
        + "both:\n  listen: 127.0.0.1:0\n  route:\n    type: replicated\n    \
           pools: [new, other]\n"
        + &servers("other", None, &[&other]);
    let proxy = Proxy::start(&conf, 2);
    let mut w = warm.conn();
    w.send(b"set k 9 0 3\r\nold\r\nset g 5 0 1\r\ng\r\n");
    assert_eq!(w.line(), "STORED");
    assert_eq!(w.line(), "STORED");
    let mut c = proxy.conn();
    assert_eq!(c.cmd("get k"), "VALUE k 9 3");
    assert_eq!(c.data(3), b"old");
    assert_eq!(c.line(), "END");
    let mut on_cold = cold.conn();
    eventually("k copied into cold memcached", || {
        let l = on_cold.cmd("mg k f t v");
        if l == "EN" {
            return false;
        }
        assert!(l.starts_with("VA 3 f9 t"), "{l}");
        let ttl: i64 = l
            .rsplit('t')
            .next()
            .unwrap_or_default()
            .parse()
            .expect("ttl");
        assert!((110..=120).contains(&ttl), "{l}");
        assert_eq!(on_cold.data(3), b"old");
        true
    });
    let line = c.cmd("gets g");
    let cas = line.rsplit(' ').next().unwrap_or_default().to_string();
    assert_eq!(c.data(1), b"g");
    assert_eq!(c.line(), "END");
    assert_eq!(on_cold.cmd("mg g c"), format!("HD c{cas}"));
    // The replicated route over memcached pools: the worst reply answers.
    let mut r = Conn::connect(proxy.pools[1]);
    r.send(b"add k 0 0 1\r\nx\r\n");
    assert_eq!(r.line(), "NOT_STORED", "cold has k; other took the add");
    assert_eq!(value_on(&other, "k").as_deref(), Some("x"));
}
