//! The binary-protocol front end, packet by packet, through a real shoal-proxy over real
//! shoald backends: every opcode (loud and quiet), opaque and CAS echoed, `GETKQ ... NOOP`
//! batches whose keys live on several servers (one of them dead), keys text cannot
//! carry, SASL PLAIN at the proxy, hostile input, the memory bound for binary clients
//! that never read, and libmemcached's `memccapable -b` conformance suite through the
//! proxy.

mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::bin::{arith_extras, op, packet, status, store_extras, Bin, Resp};
use common::*;

fn pool_conf(backends: &[Shoald], extra: &str) -> String {
    let mut s = format!(
        "alpha:\n  listen: 127.0.0.1:0\n  hash: md5\n  distribution: ketama\n  timeout: 1000\n{extra}  servers:\n"
    );
    for b in backends {
        s.push_str(&format!("   - {}:1\n", b.addr));
    }
    s
}

fn noop(opaque: u32) -> Vec<u8> {
    packet(op::NOOP, opaque, 0, &[], &[], &[])
}

/// Reads packets up to and including the `NOOP` reply with `opaque`.
fn until_noop<S: std::io::Read + Write>(c: &mut Bin<S>, opaque: u32) -> Vec<Resp> {
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

#[test]
fn every_opcode_through_the_proxy() {
    let backends = three_backends();
    let proxy = Proxy::start(&pool_conf(&backends, ""), 1);
    let mut c = Bin::connect(proxy.pools[0]);

    assert_eq!(c.call(op::NOOP, 1, 0, &[], b"", b"").status, status::OK);
    let v = c.call(op::VERSION, 2, 0, &[], b"", b"");
    assert_eq!(v.status, status::OK);
    assert!(
        String::from_utf8_lossy(&v.value).contains("shoal-proxy"),
        "{v:?}"
    );
    // memcached 1.6.45 does not serve binary VERBOSITY; the proxy answers as it does.
    assert_eq!(
        c.call(op::VERBOSITY, 3, 0, &1u32.to_be_bytes(), b"", b"")
            .status,
        status::UNKNOWN
    );

    // Set, then get with flags and the same CAS unique; GETK returns the key.
    let s = c.call(op::SET, 10, 0, &store_extras(0xdead_beef, 0), b"k", b"v1");
    assert_eq!(s.status, status::OK);
    assert_ne!(s.cas, 0, "a set returns the new CAS unique");
    let g = c.call(op::GET, 11, 0, &[], b"k", &[]);
    assert_eq!(
        (g.status, g.flags(), &g.value[..], g.cas),
        (status::OK, 0xdead_beef, &b"v1"[..], s.cas)
    );
    assert!(g.key.is_empty());
    let g = c.call(op::GETK, 12, 0, &[], b"k", &[]);
    assert_eq!((&g.key[..], &g.value[..]), (&b"k"[..], &b"v1"[..]));
    let m = c.call(op::GET, 13, 0, &[], b"nope", &[]);
    assert_eq!(
        (m.status, &m.value[..]),
        (status::NOT_FOUND, &b"Not found"[..])
    );
    let m = c.call(op::GETK, 14, 0, &[], b"nope", &[]);
    assert_eq!((m.status, &m.key[..]), (status::NOT_FOUND, &b"nope"[..]));

    // Compare-and-swap.
    let stale = c.call(op::SET, 20, s.cas + 1, &store_extras(0, 0), b"k", b"v2");
    assert_eq!(stale.status, status::EXISTS);
    let swapped = c.call(op::SET, 21, s.cas, &store_extras(7, 0), b"k", b"v2");
    assert_eq!(swapped.status, status::OK);
    assert_ne!(swapped.cas, s.cas);
    let missing = c.call(op::SET, 22, 99, &store_extras(0, 0), b"gone", b"x");
    assert_eq!(missing.status, status::NOT_FOUND, "CAS on a missing key");

    // add / replace / append / prepend.
    assert_eq!(
        c.call(op::ADD, 30, 0, &store_extras(0, 0), b"k", b"x")
            .status,
        status::EXISTS
    );
    assert_eq!(
        c.call(op::ADD, 31, 0, &store_extras(0, 0), b"a", b"1")
            .status,
        status::OK
    );
    assert_eq!(
        c.call(op::REPLACE, 32, 0, &store_extras(0, 0), b"nope", b"x")
            .status,
        status::NOT_FOUND
    );
    assert_eq!(
        c.call(op::REPLACE, 33, 0, &store_extras(3, 0), b"a", b"2")
            .status,
        status::OK
    );
    assert_eq!(
        c.call(op::APPEND, 34, 0, &[], b"a", b"post").status,
        status::OK
    );
    assert_eq!(
        c.call(op::PREPEND, 35, 0, &[], b"a", b"pre").status,
        status::OK
    );
    let g = c.get(b"a");
    assert_eq!((&g.value[..], g.flags()), (&b"pre2post"[..], 3));
    assert_eq!(
        c.call(op::APPEND, 36, 0, &[], b"nope", b"x").status,
        status::NOT_STORED
    );

    // delete, with and without CAS.
    let cas = c.get(b"a").cas;
    assert_eq!(
        c.call(op::DELETE, 40, cas + 1, &[], b"a", &[]).status,
        status::EXISTS
    );
    assert_eq!(
        c.call(op::DELETE, 41, cas, &[], b"a", &[]).status,
        status::OK
    );
    assert_eq!(
        c.call(op::DELETE, 42, 0, &[], b"a", &[]).status,
        status::NOT_FOUND
    );

    // incr / decr: creation with the initial value, no creation, non-numeric.
    let n = c.call(op::INCREMENT, 50, 0, &arith_extras(5, 10, 0), b"n", &[]);
    assert_eq!((n.status, n.counter()), (status::OK, 10));
    assert_ne!(n.cas, 0);
    assert_eq!(
        c.call(op::INCREMENT, 51, 0, &arith_extras(5, 10, 0), b"n", &[])
            .counter(),
        15
    );
    assert_eq!(
        c.call(op::DECREMENT, 52, 0, &arith_extras(20, 0, 0), b"n", &[])
            .counter(),
        0
    );
    let no_create = c.call(
        op::INCREMENT,
        53,
        0,
        &arith_extras(1, 0, 0xffff_ffff),
        b"nn",
        &[],
    );
    assert_eq!(no_create.status, status::NOT_FOUND);
    assert_eq!(
        c.call(op::INCREMENT, 54, 0, &arith_extras(1, 0, 0), b"k", &[])
            .status,
        status::NON_NUMERIC
    );

    // touch, gat, gatk.
    let t = c.call(op::TOUCH, 60, 0, &100u32.to_be_bytes(), b"k", &[]);
    assert_eq!((t.status, t.flags(), t.value.len()), (status::OK, 7, 0));
    assert_eq!(
        c.call(op::TOUCH, 61, 0, &100u32.to_be_bytes(), b"nope", &[])
            .status,
        status::NOT_FOUND
    );
    let g = c.call(op::GAT, 62, 0, &100u32.to_be_bytes(), b"k", &[]);
    assert_eq!((g.status, &g.value[..]), (status::OK, &b"v2"[..]));
    let g = c.call(op::GATK, 63, 0, &0u32.to_be_bytes(), b"k", &[]);
    assert_eq!((&g.key[..], &g.value[..]), (&b"k"[..], &b"v2"[..]));

    // STAT: the proxy's own statistics, ended by an empty packet; a group is not found.
    c.send(&packet(op::STAT, 70, 0, &[], b"", &[]));
    let mut names = Vec::new();
    loop {
        let r = c.recv();
        assert_eq!((r.opcode, r.opaque, r.status), (op::STAT, 70, status::OK));
        if r.key.is_empty() {
            break;
        }
        names.push(String::from_utf8_lossy(&r.key).into_owned());
    }
    for n in [
        "pid",
        "uptime",
        "version",
        "pool",
        "forward_error",
        "client_connections",
    ] {
        assert!(names.iter().any(|x| x == n), "{n} in {names:?}");
    }
    assert_eq!(
        c.call(op::STAT, 71, 0, &[], b"items", &[]).status,
        status::NOT_FOUND
    );

    // Unknown opcodes, and SASL on a pool without it (as memcached without -S).
    assert_eq!(c.call(0x55, 80, 0, &[], b"", &[]).status, status::UNKNOWN);
    assert_eq!(
        c.call(op::SASL_LIST_MECHS, 81, 0, &[], b"", &[]).status,
        status::UNKNOWN
    );

    // flush empties every server.
    assert_eq!(c.call(op::FLUSH, 90, 0, &[], b"", &[]).status, status::OK);
    assert_eq!(c.get(b"k").status, status::NOT_FOUND);
    assert_eq!(c.get(b"n").status, status::NOT_FOUND);

    // QUIT answers, then closes; QUITQ just closes.
    assert_eq!(c.call(op::QUIT, 99, 0, &[], b"", &[]).status, status::OK);
    assert!(c.closed());
    let mut q = Bin::connect(proxy.pools[0]);
    q.send(&packet(op::QUITQ, 1, 0, &[], b"", &[]));
    assert!(q.closed(), "QUITQ closes without a reply");
}

#[test]
fn quiet_opcodes_answer_only_failures_and_hits() {
    let backends = three_backends();
    let proxy = Proxy::start(&pool_conf(&backends, ""), 1);
    let mut c = Bin::connect(proxy.pools[0]);
    let mut batch = Vec::new();
    batch.extend(packet(op::SETQ, 1, 0, &store_extras(0, 0), b"q1", b"one"));
    batch.extend(packet(op::ADDQ, 2, 0, &store_extras(0, 0), b"q1", b"x")); // exists
    batch.extend(packet(op::DELETEQ, 3, 0, &[], b"missing", &[])); // not found
    batch.extend(packet(
        op::INCREMENTQ,
        4,
        0,
        &arith_extras(1, 5, 0),
        b"ctr",
        &[],
    ));
    batch.extend(packet(op::GETQ, 5, 0, &[], b"missing", &[])); // silent miss
    batch.extend(packet(op::GETQ, 6, 0, &[], b"q1", &[])); // hit
    batch.extend(packet(
        op::REPLACEQ,
        7,
        0,
        &store_extras(0, 0),
        b"missing",
        b"x",
    )); // not found
    batch.extend(packet(op::APPENDQ, 8, 0, &[], b"q1", b"+"));
    batch.extend(packet(op::PREPENDQ, 9, 0, &[], b"q1", b"-"));
    batch.extend(packet(
        op::DECREMENTQ,
        10,
        0,
        &arith_extras(1, 0, 0),
        b"ctr",
        &[],
    ));
    batch.extend(packet(
        op::GATQ,
        11,
        0,
        &0u32.to_be_bytes(),
        b"missing",
        &[],
    ));
    batch.extend(packet(op::GATKQ, 12, 0, &0u32.to_be_bytes(), b"q1", &[]));
    batch.extend(packet(op::FLUSHQ, 13, 0, &[], b"", &[]));
    batch.extend(packet(op::GETKQ, 14, 0, &[], b"q1", &[])); // flushed: silent
    batch.extend(noop(15));
    c.send(&batch);
    let got: Vec<(u8, u32, u16)> = until_noop(&mut c, 15)
        .iter()
        .map(|r| (r.opcode, r.opaque, r.status))
        .collect();
    assert_eq!(
        got,
        vec![
            (op::ADDQ, 2, status::EXISTS),
            (op::DELETEQ, 3, status::NOT_FOUND),
            (op::GETQ, 6, status::OK),
            (op::REPLACEQ, 7, status::NOT_FOUND),
            (op::GATKQ, 12, status::OK),
            (op::NOOP, 15, status::OK),
        ]
    );
}

/// The keys `key:{i}` for `i` in `0..n`, and which backend holds each, after setting
/// every `every`-th one through `c`.
fn set_keys(
    c: &mut Bin,
    backends: &[Shoald],
    n: u32,
    every: usize,
) -> (Vec<String>, Vec<Vec<usize>>) {
    let keys: Vec<String> = (0..n).map(|i| format!("key:{i}")).collect();
    let mut batch = Vec::new();
    for (i, k) in keys.iter().enumerate().filter(|(i, _)| i % every == 0) {
        let value = format!("v{i}");
        batch.extend(packet(
            op::SETQ,
            i as u32,
            0,
            &store_extras(i as u32, 0),
            k.as_bytes(),
            value.as_bytes(),
        ));
    }
    batch.extend(noop(u32::MAX));
    c.send(&batch);
    let replies = until_noop(c, u32::MAX);
    assert_eq!(replies.len(), 1, "quiet sets succeed silently: {replies:?}");
    let holders = holders(backends, &keys);
    (keys, holders)
}

#[test]
fn getkq_batches_split_over_servers_return_hits_in_order() {
    getkq_batches(1);
}

#[test]
fn getkq_batches_on_two_worker_threads() {
    getkq_batches(2);
}

fn getkq_batches(threads: usize) {
    let backends = three_backends();
    let proxy = Proxy::start_threads(&pool_conf(&backends, ""), 1, threads);
    let mut c = Bin::connect(proxy.pools[0]);
    let (keys, holders) = set_keys(&mut c, &backends, 400, 2);
    let servers: std::collections::HashSet<usize> = holders.iter().flatten().copied().collect();
    assert_eq!(servers.len(), 3, "the hits live on every server");

    let before = server_requests(&proxy);
    // 400 GETKQ (half of them misses) then NOOP, in one write; twice, so the second
    // batch also follows a first one still being answered.
    let mut batch = Vec::new();
    for round in 0..2u32 {
        for (i, k) in keys.iter().enumerate() {
            batch.extend(packet(
                op::GETKQ,
                round * 1000 + i as u32,
                0,
                &[],
                k.as_bytes(),
                &[],
            ));
        }
        batch.extend(noop(round * 1000 + 999));
    }
    c.send(&batch);
    for round in 0..2u32 {
        let got = until_noop(&mut c, round * 1000 + 999);
        assert_eq!(got.len(), 201, "200 hits and the noop");
        for (n, r) in got[..200].iter().enumerate() {
            let i = 2 * n;
            assert_eq!(
                (r.opcode, r.status, r.opaque),
                (op::GETKQ, status::OK, round * 1000 + i as u32)
            );
            assert_eq!(r.key, keys[i].as_bytes());
            assert_eq!(r.value, format!("v{i}").into_bytes());
            assert_eq!(r.flags(), i as u32);
            assert_ne!(r.cas, 0);
        }
    }
    // Gathered into a few `gets` per server, not 800 requests.
    let sent = server_requests(&proxy) - before;
    assert!(sent <= 30, "{sent} backend requests for 800 gets");

    // Loud GETK: every key answered, misses with their key.
    let mut batch = Vec::new();
    for (i, k) in keys.iter().enumerate().take(20) {
        batch.extend(packet(op::GETK, i as u32, 0, &[], k.as_bytes(), &[]));
    }
    c.send(&batch);
    for (i, k) in keys.iter().enumerate().take(20) {
        let r = c.recv();
        assert_eq!((r.opaque, &r.key[..]), (i as u32, k.as_bytes()));
        let want = if i % 2 == 0 {
            status::OK
        } else {
            status::NOT_FOUND
        };
        assert_eq!(r.status, want);
    }
}

/// Requests the proxy sent to its servers so far (the stats port's per-server counters).
fn server_requests(proxy: &Proxy) -> u64 {
    use std::io::Read;
    let mut s = TcpStream::connect_timeout(&proxy.stats, IO_TIMEOUT).expect("stats");
    s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    s.write_all(b"stats\r\n").expect("write");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("json");
    doc["alpha"]
        .as_object()
        .expect("pool")
        .values()
        .filter_map(|v| v.get("requests").and_then(|r| r.as_u64()))
        .sum()
}

#[test]
fn gathered_gets_keep_repeated_keys_and_expiries_apart() {
    let backends = three_backends();
    let proxy = Proxy::start(&pool_conf(&backends, ""), 1);
    let mut c = Bin::connect(proxy.pools[0]);
    assert_eq!(c.set(b"a", b"A", 1).status, status::OK);
    assert_eq!(c.set(b"b", b"B", 2).status, status::OK);
    let t = |n: u32| n.to_be_bytes();
    let mut batch = Vec::new();
    batch.extend(packet(op::GETKQ, 1, 0, &[], b"a", &[]));
    batch.extend(packet(op::GETKQ, 2, 0, &[], b"a", &[]));
    batch.extend(packet(op::GETK, 3, 0, &[], b"b", &[]));
    batch.extend(packet(op::GETKQ, 4, 0, &[], b"missing", &[]));
    batch.extend(packet(op::GETKQ, 5, 0, &[], b"a", &[]));
    batch.extend(packet(op::GATQ, 6, 0, &t(100), b"b", &[]));
    batch.extend(packet(op::GATKQ, 7, 0, &t(100), b"a", &[]));
    batch.extend(packet(op::GAT, 8, 0, &t(200), b"missing", &[]));
    batch.extend(packet(op::GATK, 9, 0, &t(0), b"b", &[]));
    batch.extend(packet(op::GETQ, 10, 0, &[], b"b", &[]));
    batch.extend(packet(op::GET, 11, 0, &[], b"missing", &[]));
    batch.extend(noop(12));
    c.send(&batch);
    let got: Vec<(u32, u16, Vec<u8>, Vec<u8>)> = until_noop(&mut c, 12)
        .into_iter()
        .map(|r| (r.opaque, r.status, r.key, r.value))
        .collect();
    let hit = |o: u32, k: &[u8], v: &[u8]| (o, status::OK, k.to_vec(), v.to_vec());
    assert_eq!(
        got,
        vec![
            hit(1, b"a", b"A"),
            hit(2, b"a", b"A"),
            hit(3, b"b", b"B"),
            hit(5, b"a", b"A"),
            hit(6, b"", b"B"),
            hit(7, b"a", b"A"),
            (8, status::NOT_FOUND, vec![], b"Not found".to_vec()),
            hit(9, b"b", b"B"),
            hit(10, b"", b"B"),
            (11, status::NOT_FOUND, vec![], b"Not found".to_vec()),
            (12, status::OK, vec![], vec![]),
        ]
    );
}

#[test]
fn a_dead_server_fails_only_its_keys_in_a_quiet_batch() {
    let mut backends = three_backends();
    let proxy = Proxy::start(&pool_conf(&backends, ""), 1);
    let mut c = Bin::connect(proxy.pools[0]);
    let (keys, holders) = set_keys(&mut c, &backends, 120, 1);
    backends[1].proc.kill();
    let mut batch = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        batch.extend(packet(op::GETKQ, i as u32, 0, &[], k.as_bytes(), &[]));
    }
    batch.extend(noop(9999));
    c.send(&batch);
    let got = until_noop(&mut c, 9999);
    let mut it = got.iter();
    for (i, h) in holders.iter().enumerate() {
        let on_dead = h.contains(&1);
        let r = it.next().expect("a packet for this key");
        assert_eq!(r.opaque, i as u32, "packets in request order");
        if on_dead {
            // Quiet gets are quiet about misses only: the failure is reported.
            assert_eq!(r.status, status::TEMPORARY_FAILURE, "{r:?}");
        } else {
            assert_eq!(
                (r.status, &r.value[..]),
                (status::OK, format!("v{i}").as_bytes())
            );
        }
    }
    assert_eq!(it.next().map(|r| r.opcode), Some(op::NOOP));
    assert!(
        holders.iter().any(|h| h.contains(&1)),
        "some keys were on the dead server"
    );
}

#[test]
fn keys_text_cannot_carry_round_trip() {
    let backends = three_backends();
    let proxy = Proxy::start(&pool_conf(&backends, ""), 1);
    let mut c = Bin::connect(proxy.pools[0]);
    let keys: Vec<Vec<u8>> = vec![
        b"with space".to_vec(),
        b"crlf\r\nset x 0 0 1\r\n".to_vec(),
        vec![0, 1, 2, 0xff, b' '],
        vec![b'k'; 250],
        vec![b' '; 186],
    ];
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(
            c.set(k, format!("v{i}").as_bytes(), i as u32).status,
            status::OK,
            "{k:?}"
        );
    }
    for (i, k) in keys.iter().enumerate() {
        let g = c.call(op::GETK, i as u32, 0, &[], k, &[]);
        assert_eq!(
            (g.status, &g.key, g.value.clone()),
            (status::OK, k, format!("v{i}").into_bytes())
        );
        assert_eq!(c.call(op::DELETE, 0, 0, &[], k, &[]).status, status::OK);
    }
    // No `x` was stored by a key that smuggled a command.
    assert_eq!(c.get(b"x").status, status::NOT_FOUND);
    // Past 186 bytes an unsafe key cannot be sent base64-encoded (250 characters).
    assert_eq!(c.set(&[b' '; 187], b"v", 0).status, status::INVALID);
}

fn sasl_conf(backends: &[Shoald]) -> String {
    pool_conf(
        backends,
        "  sasl:\n    users:\n      - alice:wonderland\n      - bob:pw:with:colons\n",
    )
}

fn plain(user: &str, pw: &str) -> Vec<u8> {
    format!("\0{user}\0{pw}").into_bytes()
}

#[test]
fn sasl_plain_at_the_proxy() {
    let backends = three_backends();
    let proxy = Proxy::start(&sasl_conf(&backends), 1);
    let mut c = Bin::connect(proxy.pools[0]);
    // Before authenticating: version and the mechanism list only.
    assert_eq!(c.call(op::VERSION, 1, 0, &[], b"", &[]).status, status::OK);
    let m = c.call(op::SASL_LIST_MECHS, 2, 0, &[], b"", &[]);
    assert_eq!((m.status, &m.value[..]), (status::OK, &b"PLAIN"[..]));
    for (opcode, extras) in [(op::GET, vec![]), (op::SET, store_extras(0, 0).to_vec())] {
        let r = c.call(opcode, 3, 0, &extras, b"k", b"");
        assert_eq!(
            r.status,
            status::AUTH_ERROR,
            "opcode {opcode:#x} before auth"
        );
    }
    // A quiet command is refused out loud too.
    c.send(&packet(op::SETQ, 4, 0, &store_extras(0, 0), b"k", b"v"));
    assert_eq!(c.recv().status, status::AUTH_ERROR);
    // Wrong password, unknown user, other mechanism, a step: refused (after a delay).
    let t = Instant::now();
    assert_eq!(
        c.call(op::SASL_AUTH, 5, 0, &[], b"PLAIN", &plain("alice", "nope"))
            .status,
        status::AUTH_ERROR
    );
    assert!(
        t.elapsed() >= Duration::from_millis(150),
        "failures are slowed down"
    );
    assert_eq!(
        c.call(
            op::SASL_AUTH,
            6,
            0,
            &[],
            b"PLAIN",
            &plain("carol", "wonderland")
        )
        .status,
        status::AUTH_ERROR
    );
    assert_eq!(
        c.call(op::SASL_AUTH, 7, 0, &[], b"CRAM-MD5", b"x").status,
        status::AUTH_ERROR
    );
    assert_eq!(c.get(b"k").status, status::AUTH_ERROR);
    let ok = c.call(
        op::SASL_AUTH,
        8,
        0,
        &[],
        b"PLAIN",
        &plain("alice", "wonderland"),
    );
    assert_eq!(
        (ok.status, &ok.value[..]),
        (status::OK, &b"Authenticated"[..])
    );
    assert_eq!(c.set(b"k", b"v", 0).status, status::OK);
    assert_eq!(c.get(b"k").value, b"v");
    // A password with colons.
    let mut b = Bin::connect(proxy.pools[0]);
    assert_eq!(
        b.call(
            op::SASL_AUTH,
            1,
            0,
            &[],
            b"PLAIN",
            &plain("bob", "pw:with:colons")
        )
        .status,
        status::OK
    );
    assert_eq!(b.get(b"k").value, b"v");
    // A text client cannot authenticate: refused and closed.
    let mut t = Conn::connect(proxy.pools[0]);
    assert_eq!(
        t.cmd("get k"),
        "CLIENT_ERROR authentication required (binary SASL only)"
    );
}

#[test]
fn hostile_binary_input_is_refused_and_others_are_served() {
    let backends = three_backends();
    let proxy = Proxy::start(&pool_conf(&backends, ""), 1);
    let addr = proxy.pools[0];

    // A key over 250 bytes: invalid arguments, then the connection closes.
    let mut c = Bin::connect(addr);
    let r = c.call(op::GET, 5, 0, &[], &[b'k'; 251], &[]);
    assert_eq!(r.status, status::INVALID);
    assert!(c.closed());
    // A get announcing a 1 GB body: refused at the header, nothing buffered.
    let mut c = Bin::connect(addr);
    let mut p = packet(op::GET, 6, 0, &[], b"k", &[]);
    p[8..12].copy_from_slice(&(1u32 << 30).to_be_bytes());
    c.send(&p);
    assert_eq!(c.recv().status, status::INVALID);
    assert!(c.closed());
    // A body whose shape the opcode does not take (a GET with extras).
    let mut c = Bin::connect(addr);
    assert_eq!(
        c.call(op::GET, 7, 0, &[1, 2, 3, 4], b"k", &[]).status,
        status::INVALID
    );
    assert!(c.closed());
    // Text bytes on a binary connection: the magic is wrong, so the connection closes.
    let mut c = Bin::connect(addr);
    assert_eq!(c.call(op::NOOP, 8, 0, &[], b"", &[]).status, status::OK);
    c.send(b"get k\r\n................................");
    assert!(matches!(
        c.try_recv(),
        None | Some(Resp {
            status: status::INVALID,
            ..
        })
    ));
    // A value over the proxy's 64 MB limit: `Too large.` (quiet or not), its bytes
    // swallowed, and the connection goes on; a set that fails removes the old value.
    let mut c = Bin::connect(addr);
    assert_eq!(c.set(b"big", b"old", 0).status, status::OK);
    let value = vec![b'x'; 64 * 1024 * 1024 + 1];
    let mut p = packet(op::SETQ, 9, 0, &store_extras(0, 0), b"big", &value);
    p.extend(noop(10));
    c.send(&p);
    let r = c.recv();
    assert_eq!((r.opaque, r.status), (9, status::TOO_LARGE));
    assert_eq!(c.recv().opcode, op::NOOP);
    assert_eq!(
        c.get(b"big").status,
        status::NOT_FOUND,
        "the old value was removed"
    );
    // Garbage: many connections of random packets; the proxy never dies.
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..50 {
        let mut junk = vec![0x80u8];
        for _ in 0..300 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            junk.push(seed as u8);
        }
        if let Ok(mut s) = TcpStream::connect(addr) {
            let _ = s.set_write_timeout(Some(IO_TIMEOUT));
            let _ = s.write_all(&junk);
        }
    }
    let mut c = Bin::connect(addr);
    assert_eq!(c.set(b"after", b"ok", 0).status, status::OK);
    assert_eq!(c.get(b"after").value, b"ok");
    assert!(proxy.proc.child.id() > 0);
    let mut text = Conn::connect(addr);
    assert_eq!(
        text.get(&["after"]).expect("text get"),
        vec![("after".into(), "ok".into())]
    );
}

#[test]
fn binary_clients_that_never_read_stay_bounded() {
    shoal_test_support::raise_fd_limit(65_536);
    let backend = Shoald::start();
    let proxy = Proxy::start(&pool_conf(std::slice::from_ref(&backend), ""), 1);
    let addr: SocketAddr = proxy.pools[0];
    let pid = proxy.proc.child.id();
    let mut c = Bin::connect(addr);
    let big = vec![b'v'; 100 * 1024];
    assert_eq!(c.set(b"big", &big, 0).status, status::OK);
    let idle = shoal_test_support::rss_kib(pid);
    // 40 connections each ask for 5,000 copies of a 100 KB value (500 MB of replies
    // each) and never read.
    let mut batch = Vec::new();
    for i in 0..5000u32 {
        batch.extend(packet(op::GETKQ, i, 0, &[], b"big", &[]));
    }
    let conns: Vec<TcpStream> = (0..40)
        .map(|_| {
            let mut s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
            s.set_write_timeout(Some(IO_TIMEOUT)).expect("timeout");
            s.write_all(&batch).expect("send");
            s
        })
        .collect();
    let sampler = shoal_test_support::RssSampler::start(pid, Duration::from_millis(50));
    std::thread::sleep(Duration::from_secs(3));
    // Others are served meanwhile.
    let t = Instant::now();
    let mut probe = Bin::connect(addr);
    assert_eq!(probe.set(b"probe", b"ok", 0).status, status::OK);
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "a fresh client waited {:?}",
        t.elapsed()
    );
    let max = sampler.finish();
    eprintln!(
        "binary slow readers: shoal-proxy RSS {} MB idle, max {} MB with 40 non-reading 500 MB batches",
        idle / 1024,
        max / 1024
    );
    assert!(max < 192 * 1024, "shoal-proxy RSS {max} KB");
    drop(conns);
}

#[test]
fn memccapable_binary_suite_through_the_proxy() {
    let Some(bin) = shoal_test_support::peer("memccapable", "libmemcached-tools") else {
        return;
    };
    let backends = three_backends();
    let proxy = Proxy::start(&pool_conf(&backends, ""), 1);
    let out = std::process::Command::new(bin)
        .args([
            "-b",
            "-h",
            "127.0.0.1",
            "-p",
            &proxy.pools[0].port().to_string(),
        ])
        .output()
        .expect("run memccapable");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("All tests passed"),
        "memccapable -b through shoal-proxy:\n{text}"
    );
}

/// A real memcached on a free loopback port, killed on drop.
fn memcached(bin: &std::path::Path) -> (Proc, SocketAddr) {
    let port = free_port();
    let mut cmd = std::process::Command::new(bin);
    // `-u root` only matters (and is only needed) when the tests run as root.
    cmd.args([
        "-p",
        &port.to_string(),
        "-U",
        "0",
        "-l",
        "127.0.0.1",
        "-u",
        "root",
    ]);
    let proc = Proc::spawn(cmd);
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let deadline = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect(addr).is_err() {
        assert!(
            Instant::now() < deadline,
            "memcached did not start on {port}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (proc, addr)
}

#[test]
fn real_memcached_backends_serve_binary_clients() {
    let Some(bin) = shoal_test_support::peer("memcached", "memcached") else {
        return;
    };
    let nodes: Vec<(Proc, SocketAddr)> = (0..3).map(|_| memcached(&bin)).collect();
    let mut conf =
        "alpha:\n  listen: 127.0.0.1:0\n  hash: md5\n  timeout: 1000\n  servers:\n".to_string();
    for (_, a) in &nodes {
        conf.push_str(&format!("   - {a}:1\n"));
    }
    let proxy = Proxy::start(&conf, 1);
    let mut c = Bin::connect(proxy.pools[0]);
    // A quiet batch over the three memcached: hits only, in order, then the NOOP.
    let mut batch = Vec::new();
    for i in 0..200u32 {
        let k = format!("m:{i}");
        if i % 2 == 0 {
            batch.extend(packet(
                op::SETQ,
                i,
                0,
                &store_extras(i, 0),
                k.as_bytes(),
                b"v",
            ));
        }
    }
    for i in 0..200u32 {
        batch.extend(packet(
            op::GETKQ,
            1000 + i,
            0,
            &[],
            format!("m:{i}").as_bytes(),
            &[],
        ));
    }
    batch.extend(noop(9));
    c.send(&batch);
    let got = until_noop(&mut c, 9);
    let opaques: Vec<u32> = got.iter().map(|r| r.opaque).collect();
    let want: Vec<u32> = (0..200u32)
        .filter(|i| i % 2 == 0)
        .map(|i| 1000 + i)
        .chain([9])
        .collect();
    assert_eq!(opaques, want);
    for (_, a) in &nodes {
        let mut direct = Conn::connect(*a);
        assert!(
            direct.cmd("stats").starts_with("STAT"),
            "a memcached node answers"
        );
        let held = (0..200).filter(|i| {
            let k = format!("m:{i}");
            direct
                .get(&[k.as_str()])
                .map(|v| !v.is_empty())
                .unwrap_or(false)
        });
        assert!(held.count() > 0, "every memcached holds some of the keys");
    }
    if let Some(capable) = shoal_test_support::peer("memccapable", "libmemcached-tools") {
        let out = std::process::Command::new(capable)
            .args([
                "-b",
                "-h",
                "127.0.0.1",
                "-p",
                &proxy.pools[0].port().to_string(),
            ])
            .output()
            .expect("run memccapable");
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(
            text.contains("All tests passed"),
            "memccapable -b through shoal-proxy over memcached:\n{text}"
        );
    }
}
