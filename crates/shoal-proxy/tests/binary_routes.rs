//! Binary clients through route pools (issue 16: the binary front end and the
//! mcrouter-style routes together), packet by packet, through a real shoal-proxy with
//! `--threads 2` over real shoald backends: a failover route (gets fail over on misses,
//! writes and touches on errors only, quiet batches grouped through the route, a key
//! that failed on every pool answered with its own error packet), a prefix route (a
//! batch split over pools and back in request order, a key text cannot carry routed by
//! its bytes, `FLUSH` to every pool), warm-up, shadow and replicated routes, and SASL on a
//! route pool.

mod common;

use std::io::Read;
use std::net::{SocketAddr, TcpStream};

use common::bin::{arith_extras, op, packet, status, store_extras, Bin, Resp};
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

/// A listening route pool `front` with client directives `extra` and `route` (its keys,
/// indented by four).
fn front(extra: &str, route: &str) -> String {
    named("front", extra, route)
}

/// A listening route pool `name` (see [`front`]).
fn named(name: &str, extra: &str, route: &str) -> String {
    format!("{name}:\n  listen: 127.0.0.1:0\n{extra}  route:\n{route}")
}

fn noop(opaque: u32) -> Vec<u8> {
    packet(op::NOOP, opaque, 0, &[], &[], &[])
}

/// Reads packets up to and including the `NOOP` reply with `opaque`.
fn until_noop(c: &mut Bin, opaque: u32) -> Vec<Resp> {
    let mut got = Vec::new();
    loop {
        let r = c.recv();
        let done = r.opcode == op::NOOP && r.opaque == opaque;
        got.push(r);
        if done {
            return got;
        }
    }
}

/// `GETKQ` of every key (opaque = its index) then `NOOP` (opaque `u32::MAX`), in one
/// write; the packets before the `NOOP`'s.
fn getkq_batch(c: &mut Bin, keys: &[&str]) -> Vec<Resp> {
    let mut batch = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        batch.extend(packet(op::GETKQ, i as u32, 0, &[], k.as_bytes(), &[]));
    }
    batch.extend(noop(u32::MAX));
    c.send(&batch);
    let mut got = until_noop(c, u32::MAX);
    got.pop();
    got
}

/// (opaque, key, value) of each hit, checking every packet is a `GETKQ` hit.
fn hits(got: &[Resp]) -> Vec<(u32, String, String)> {
    got.iter()
        .map(|r| {
            assert_eq!((r.opcode, r.status), (op::GETKQ, status::OK), "{r:?}");
            assert_ne!(r.cas, 0, "a hit carries its CAS unique");
            (
                r.opaque,
                String::from_utf8_lossy(&r.key).into_owned(),
                String::from_utf8_lossy(&r.value).into_owned(),
            )
        })
        .collect()
}

fn hit(opaque: u32, key: &str, value: &str) -> (u32, String, String) {
    (opaque, key.to_string(), value.to_string())
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

fn stats_json(addr: SocketAddr) -> serde_json::Value {
    let mut s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("stats");
    s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read stats");
    serde_json::from_str(&out).expect("stats json")
}

/// Requests pool `pool` sent to its servers so far.
fn requests(st: &serde_json::Value, pool: &str) -> u64 {
    st[pool]
        .as_object()
        .expect("pool")
        .values()
        .filter_map(|v| v.get("requests").and_then(|r| r.as_u64()))
        .sum()
}

#[test]
fn binary_clients_through_a_failover_route() {
    let (mut a, mut b) = (Shoald::start(), Shoald::start());
    let conf = front("", "    type: failover\n    pools: [main, backup]\n")
        + &servers("main", None, &[&a])
        + &servers("backup", None, &[&b]);
    let proxy = Proxy::start_threads(&conf, 1, 2);
    set_on(&a, "only-a", "a");
    set_on(&b, "only-b", "b");
    set_on(&a, "both", "a");
    set_on(&b, "both", "b");
    let mut c = Bin::connect(proxy.pools[0]);

    // Gets fail over on misses, loud or quiet, alone or batched; a hit on main stops
    // there. Opaques come back, misses of quiet gets say nothing.
    assert_eq!(c.get(b"only-b").value, b"b");
    let k = c.call(op::GETK, 7, 0, &[], b"both", &[]);
    assert_eq!(
        (k.status, &k.key[..], &k.value[..]),
        (0, &b"both"[..], &b"a"[..])
    );
    let miss = c.call(op::GETK, 8, 0, &[], b"nowhere", &[]);
    assert_eq!(
        (miss.status, &miss.key[..]),
        (status::NOT_FOUND, &b"nowhere"[..])
    );
    let got = getkq_batch(&mut c, &["only-a", "nowhere", "only-b", "both", "only-b"]);
    assert_eq!(
        hits(&got),
        vec![
            hit(0, "only-a", "a"),
            hit(2, "only-b", "b"),
            hit(3, "both", "a"),
            hit(4, "only-b", "b"),
        ]
    );

    // A batch goes through the route as a few multi-gets, not one request per key: 100
    // keys, half of them only on backup.
    let keys: Vec<String> = (0..100).map(|i| format!("k{i}")).collect();
    for k in keys.iter().step_by(2) {
        set_on(&b, k, k);
    }
    let before = stats_json(proxy.stats);
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let got = getkq_batch(&mut c, &refs);
    let want: Vec<_> = (0..100)
        .step_by(2)
        .map(|i| hit(i, &keys[i as usize], &keys[i as usize]))
        .collect();
    assert_eq!(hits(&got), want);
    let after = stats_json(proxy.stats);
    let sent = (requests(&after, "main") - requests(&before, "main"))
        + (requests(&after, "backup") - requests(&before, "backup"));
    assert!(sent <= 30, "{sent} server requests for a batch of 100 gets");

    // Writes fail over on errors only: a stored SET, or an ADD main refuses, is the
    // answer, and backup never sees it.
    let s = c.call(op::SET, 9, 0, &store_extras(5, 0), b"new", b"n");
    assert_eq!(s.status, status::OK);
    assert_ne!(s.cas, 0);
    assert_eq!(value_on(&a, "new").as_deref(), Some("n"));
    assert_eq!(value_on(&b, "new"), None);
    let add = c.call(op::ADD, 10, 0, &store_extras(0, 0), b"both", b"x");
    assert_eq!(add.status, status::EXISTS);
    assert_eq!(
        value_on(&b, "both").as_deref(),
        Some("b"),
        "not failed over"
    );
    // A TOUCH is a write (as text `touch`): a miss on main is the answer. A GAT is a get:
    // it fails over, and touches backup's copy.
    let t = c.call(op::TOUCH, 11, 0, &100u32.to_be_bytes(), b"only-b", &[]);
    assert_eq!(t.status, status::NOT_FOUND);
    assert_eq!(
        c.call(op::TOUCH, 12, 0, &100u32.to_be_bytes(), b"only-a", &[])
            .status,
        status::OK
    );
    let gat = c.call(op::GAT, 13, 0, &100u32.to_be_bytes(), b"only-b", &[]);
    assert_eq!((gat.status, &gat.value[..]), (status::OK, &b"b"[..]));
    // Counters, quiet writes (silent when they succeed), and a NOOP after them.
    let n = c.call(op::INCREMENT, 14, 0, &arith_extras(1, 40, 0), b"ctr", &[]);
    assert_eq!((n.status, n.counter()), (status::OK, 40));
    let mut batch = Vec::new();
    for i in 0..10u32 {
        let key = format!("q{i}");
        batch.extend(packet(
            op::SETQ,
            i,
            0,
            &store_extras(i, 0),
            key.as_bytes(),
            b"q",
        ));
    }
    batch.extend(packet(op::DELETEQ, 20, 0, &[], b"q0", &[]));
    batch.extend(noop(21));
    c.send(&batch);
    assert_eq!(
        until_noop(&mut c, 21).len(),
        1,
        "quiet writes that succeed say nothing"
    );
    assert_eq!(value_on(&a, "q9").as_deref(), Some("q"));
    assert_eq!(value_on(&a, "q0"), None);

    // Main dies: writes, quiet or not, go on to backup; gets find backup's keys.
    a.proc.kill();
    assert_eq!(c.set(b"after", b"z", 0).status, status::OK);
    assert_eq!(value_on(&b, "after").as_deref(), Some("z"));
    c.send(
        &[
            packet(op::SETQ, 30, 0, &store_extras(0, 0), b"after2", b"y"),
            noop(31),
        ]
        .concat(),
    );
    assert_eq!(until_noop(&mut c, 31).len(), 1);
    assert_eq!(value_on(&b, "after2").as_deref(), Some("y"));
    let got = getkq_batch(&mut c, &["after", "only-a", "only-b"]);
    assert_eq!(
        hits(&got),
        vec![hit(0, "after", "z"), hit(2, "only-b", "b")]
    );

    // Both die: every key of a quiet batch gets its own error packet (quiet gets are
    // quiet about misses, not failures), then the NOOP; loud requests get one each.
    b.proc.kill();
    let got = getkq_batch(&mut c, &["after", "only-b"]);
    let failed: Vec<(u32, u16)> = got.iter().map(|r| (r.opaque, r.status)).collect();
    assert_eq!(
        failed,
        vec![
            (0, status::TEMPORARY_FAILURE),
            (1, status::TEMPORARY_FAILURE)
        ]
    );
    assert_eq!(c.get(b"after").status, status::TEMPORARY_FAILURE);
    assert_eq!(c.set(b"x", b"y", 0).status, status::TEMPORARY_FAILURE);
    let st = stats_json(proxy.stats);
    assert_eq!(st["front"]["client_connections"], 1);
    assert!(
        st["front"]["forward_error"].as_u64().unwrap_or(0) >= 4,
        "{st}"
    );
}

#[test]
fn binary_clients_through_a_prefix_route() {
    let (a1, a2, ab, other) = (
        Shoald::start(),
        Shoald::start(),
        Shoald::start(),
        Shoald::start(),
    );
    // `pa` also listens itself, so what landed there can be read back through it.
    let conf = front(
        "",
        "    type: prefix\n    prefixes:\n      \"a/\": pa\n      \"a/b/\": pab\n    default: rest\n",
    ) + &servers("pa", Some("127.0.0.1:0"), &[&a1, &a2])
        + &servers("pab", None, &[&ab])
        + &servers("rest", None, &[&other]);
    let proxy = Proxy::start_threads(&conf, 2, 2);
    let mut c = Bin::connect(proxy.pools[0]);
    let placed: Vec<(String, usize)> = (0..20)
        .flat_map(|i| {
            [
                (format!("a/{i}"), 0),
                (format!("a/b/{i}"), 1),
                (format!("x/{i}"), 2),
            ]
        })
        .collect();
    let mut batch = Vec::new();
    for (i, (k, _)) in placed.iter().enumerate() {
        batch.extend(packet(
            op::SETQ,
            i as u32,
            0,
            &store_extras(i as u32, 0),
            k.as_bytes(),
            k.as_bytes(),
        ));
    }
    batch.extend(noop(999));
    c.send(&batch);
    assert_eq!(until_noop(&mut c, 999).len(), 1);
    let pools = [vec![&a1, &a2], vec![&ab], vec![&other]];
    for (k, at) in &placed {
        for (p, backends) in pools.iter().enumerate() {
            let found = backends.iter().filter(|b| value_on(b, k).is_some()).count();
            assert_eq!(found, usize::from(p == *at), "{k} in pool {p}");
        }
    }
    // Both of pa's servers hold some: the route's part of a batch is split per server.
    assert!(placed.iter().any(|(k, _)| value_on(&a1, k).is_some()));
    assert!(placed.iter().any(|(k, _)| value_on(&a2, k).is_some()));

    // One batch over every pool and both of pa's servers, a miss and a repeated key
    // among them: hits in request order, flags and opaques kept.
    let ask = ["x/3", "a/b/1", "nope", "a/1", "a/2", "a/b/1", "a/7", "x/9"];
    let got = getkq_batch(&mut c, &ask);
    let want: Vec<_> = ask
        .iter()
        .enumerate()
        .filter(|(_, k)| **k != "nope")
        .map(|(i, k)| hit(i as u32, k, k))
        .collect();
    assert_eq!(hits(&got), want);
    let flags_of = |k: &str| placed.iter().position(|(p, _)| p == k).expect("placed") as u32;
    for r in &got {
        assert_eq!(r.flags(), flags_of(&String::from_utf8_lossy(&r.key)));
    }

    // A key text cannot carry (sent base64-encoded) is routed by its bytes: "a/b c" is
    // pa's, and reads back through pa's own listener.
    assert_eq!(c.set(b"a/b c", b"spaced", 3).status, status::OK);
    let mut direct = Bin::connect(proxy.pools[1]);
    let g = direct.get(b"a/b c");
    assert_eq!(
        (g.status, &g.value[..], g.flags()),
        (status::OK, &b"spaced"[..], 3)
    );
    let g = c.call(op::GETK, 5, 0, &[], b"a/b c", &[]);
    assert_eq!((g.status, &g.key[..]), (status::OK, &b"a/b c"[..]));

    // FLUSH reaches every pool of the route.
    assert_eq!(c.call(op::FLUSH, 6, 0, &[], &[], &[]).status, status::OK);
    for (k, _) in &placed {
        for b in [&a1, &a2, &ab, &other] {
            assert_eq!(value_on(b, k), None, "{k} flushed");
        }
    }
    assert!(getkq_batch(&mut c, &ask).is_empty());
}

#[test]
fn sasl_on_a_route_pool() {
    let (a, b) = (Shoald::start(), Shoald::start());
    // The route pool requires SASL; main, which also listens, does not.
    let conf = front(
        "  sasl:\n    users:\n      - alice:wonderland\n",
        "    type: failover\n    pools: [main, backup]\n",
    ) + &servers("main", Some("127.0.0.1:0"), &[&a])
        + &servers("backup", None, &[&b]);
    let proxy = Proxy::start_threads(&conf, 2, 2);
    set_on(&b, "k", "from-backup");

    let mut c = Bin::connect(proxy.pools[0]);
    let m = c.call(op::SASL_LIST_MECHS, 1, 0, &[], b"", &[]);
    assert_eq!((m.status, &m.value[..]), (status::OK, &b"PLAIN"[..]));
    assert_eq!(c.get(b"k").status, status::AUTH_ERROR);
    // A quiet batch before authenticating: each request refused out loud.
    let got = getkq_batch(&mut c, &["k", "j"]);
    let refused: Vec<(u32, u16)> = got.iter().map(|r| (r.opaque, r.status)).collect();
    assert_eq!(
        refused,
        vec![(0, status::AUTH_ERROR), (1, status::AUTH_ERROR)]
    );
    let wrong = c.call(op::SASL_AUTH, 2, 0, &[], b"PLAIN", b"\0alice\0guess");
    assert_eq!(wrong.status, status::AUTH_ERROR);
    let ok = c.call(op::SASL_AUTH, 3, 0, &[], b"PLAIN", b"\0alice\0wonderland");
    assert_eq!(
        (ok.status, &ok.value[..]),
        (status::OK, &b"Authenticated"[..])
    );

    // Authenticated: served through the route (a miss on main fails over to backup).
    assert_eq!(c.get(b"k").value, b"from-backup");
    assert_eq!(c.set(b"mine", b"m", 0).status, status::OK);
    assert_eq!(value_on(&a, "mine").as_deref(), Some("m"));
    let got = getkq_batch(&mut c, &["mine", "none", "k"]);
    assert_eq!(
        hits(&got),
        vec![hit(0, "mine", "m"), hit(2, "k", "from-backup")]
    );
    // STAT names the route pool and its counters.
    c.send(&packet(op::STAT, 4, 0, &[], &[], &[]));
    let mut stats = Vec::new();
    loop {
        let r = c.recv();
        if r.key.is_empty() {
            break;
        }
        stats.push((
            String::from_utf8_lossy(&r.key).into_owned(),
            String::from_utf8_lossy(&r.value).into_owned(),
        ));
    }
    assert!(
        stats.contains(&("pool".into(), "front".into())),
        "{stats:?}"
    );
    assert!(stats.iter().any(|(k, _)| k == "forward_error"), "{stats:?}");

    // Text clients of the route pool cannot authenticate: refused. Main's own listener
    // has no SASL and serves them.
    let mut t = Conn::connect(proxy.pools[0]);
    assert_eq!(
        t.cmd("get k"),
        "CLIENT_ERROR authentication required (binary SASL only)"
    );
    let mut t = Conn::connect(proxy.pools[1]);
    assert_eq!(t.get(&["mine"]), Ok(vec![("mine".into(), "m".into())]));
    let mut anon = Bin::connect(proxy.pools[1]);
    assert_eq!(anon.get(b"mine").value, b"m");
}

/// Polls (bounded) until `f` holds.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !f() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn binary_clients_through_warmup_shadow_and_replicated_routes() {
    let (cold, warm) = (Shoald::start(), Shoald::start());
    let (main, shadow) = (Shoald::start(), Shoald::start());
    let (r0, r1) = (Shoald::start(), Shoald::start());
    let conf = named(
        "warmup",
        "",
        "    type: warmup\n    cold: cold\n    warm: warm\n    exptime: 300\n",
    ) + &named(
        "shadowed",
        "",
        "    type: shadow\n    pool: main\n    shadow: test\n    fraction: 1\n",
    ) + &named(
        "replicated",
        "",
        "    type: replicated\n    pools: [r0, r1]\n",
    ) + &servers("cold", None, &[&cold])
        + &servers("warm", None, &[&warm])
        + &servers("main", None, &[&main])
        + &servers("test", None, &[&shadow])
        + &servers("r0", None, &[&r0])
        + &servers("r1", None, &[&r1]);
    let proxy = Proxy::start_threads(&conf, 3, 2);

    // Warm-up: a batch's keys cold lacks are read from warm and copied into cold before
    // they are answered (binary gets carry CAS, so the token is cold's); writes go to cold.
    set_on(&warm, "w1", "one");
    set_on(&warm, "w2", "two");
    set_on(&cold, "w2", "cold-two");
    let mut c = Bin::connect(proxy.pools[0]);
    let got = getkq_batch(&mut c, &["w1", "none", "w2"]);
    assert_eq!(
        hits(&got),
        vec![hit(0, "w1", "one"), hit(2, "w2", "cold-two")]
    );
    assert_eq!(value_on(&cold, "w1").as_deref(), Some("one"), "copied");
    let on_cold = cold.conn().cmd("mg w1 c");
    assert_eq!(on_cold, format!("HD c{}", got[0].cas), "cold's CAS token");
    assert_eq!(c.set(b"fresh", b"f", 0).status, status::OK);
    assert_eq!(value_on(&cold, "fresh").as_deref(), Some("f"));
    assert_eq!(value_on(&warm, "fresh"), None);
    // A TOUCH is a write: cold only, so a key only warm has is not found.
    set_on(&warm, "w3", "three");
    let t = c.call(op::TOUCH, 1, 0, &60u32.to_be_bytes(), b"w3", &[]);
    assert_eq!(t.status, status::NOT_FOUND);

    // Shadow: main answers; every write (fraction 1) is copied to the test pool.
    let mut c = Bin::connect(proxy.pools[1]);
    assert_eq!(c.set(b"sk", b"sv", 0).status, status::OK);
    assert_eq!(value_on(&main, "sk").as_deref(), Some("sv"));
    eventually("the copy on the shadow pool", || {
        value_on(&shadow, "sk").as_deref() == Some("sv")
    });
    set_on(&shadow, "only-shadow", "x");
    assert_eq!(c.get(b"only-shadow").status, status::NOT_FOUND);
    let got = getkq_batch(&mut c, &["sk", "only-shadow"]);
    assert_eq!(hits(&got), vec![hit(0, "sk", "sv")]);

    // Replicated: writes reach every replica and the worst reply answers.
    let mut c = Bin::connect(proxy.pools[2]);
    assert_eq!(c.set(b"rk", b"rv", 0).status, status::OK);
    assert_eq!(value_on(&r0, "rk").as_deref(), Some("rv"));
    assert_eq!(value_on(&r1, "rk").as_deref(), Some("rv"));
    set_on(&r1, "dup", "x");
    let add = c.call(op::ADD, 2, 0, &store_extras(0, 0), b"dup", b"y");
    assert_eq!(add.status, status::EXISTS, "one replica refused");
    assert_eq!(value_on(&r0, "dup").as_deref(), Some("y"));
    let d = c.call(op::DELETE, 3, 0, &[], b"rk", &[]);
    assert_eq!(d.status, status::OK);
    assert_eq!((value_on(&r0, "rk"), value_on(&r1, "rk")), (None, None));
    let got = getkq_batch(&mut c, &["dup", "rk"]);
    assert_eq!(got.len(), 1, "one hit: {got:?}");
    assert_eq!(got[0].opaque, 0);
}
