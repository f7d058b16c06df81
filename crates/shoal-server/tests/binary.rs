//! The binary protocol against a real shoald, packet by packet: every opcode, quiet forms,
//! opaque/CAS echo, stats framing, protocol switching and hostile input.

mod common;

use common::binproto::{self as bp, op, status};
use common::{show, Server};
use std::time::{Duration, Instant};

#[test]
fn get_set_echo_opaque_and_cas() {
    let s = Server::start();
    let mut c = s.conn();
    let miss = bp::rt(
        &mut c,
        &bp::packet(op::GET, &[], b"nokey", &[], 0xdead_beef, 0),
    );
    assert_eq!(
        (miss.opcode, miss.status, miss.opaque),
        (op::GET, status::NOT_FOUND, 0xdead_beef)
    );
    assert_eq!(miss.text(), "Not found");
    assert!(miss.key.is_empty() && miss.extras.is_empty());

    let r = bp::rt(
        &mut c,
        &bp::store(op::SET, b"k", b"hello", 0x1234_5678, 77, 0),
    );
    assert_eq!((r.opcode, r.status, r.opaque), (op::SET, status::OK, 77));
    assert_ne!(r.cas, 0, "set returns the new CAS");
    assert!(r.value.is_empty());
    let cas = r.cas;

    let g = bp::rt(&mut c, &bp::packet(op::GET, &[], b"k", &[], 78, 0));
    assert_eq!((g.status, g.opaque, g.cas), (status::OK, 78, cas));
    assert_eq!(
        (g.flags(), g.value.as_slice(), g.key.len()),
        (0x1234_5678, &b"hello"[..], 0)
    );

    // CAS: wrong unique -> exists; right unique -> stored with a new unique.
    bp::expect_status(
        &mut c,
        &bp::store(op::SET, b"k", b"x", 0, 1, cas + 1000),
        status::EXISTS,
    );
    let r = bp::expect_status(
        &mut c,
        &bp::store(op::SET, b"k", b"v2", 0, 1, cas),
        status::OK,
    );
    assert_ne!(r.cas, cas);
    // CAS on a missing key -> not found.
    bp::expect_status(
        &mut c,
        &bp::store(op::SET, b"missing", b"x", 0, 1, 5),
        status::NOT_FOUND,
    );
    // Text and binary see the same item and CAS.
    assert_eq!(common::gets_cas(&mut c, "k"), r.cas);
    assert_eq!(c.get("k").as_deref(), Some(&b"v2"[..]));
}

#[test]
fn add_replace_append_prepend_delete() {
    let s = Server::start();
    let mut c = s.conn();
    bp::expect_status(
        &mut c,
        &bp::store(op::REPLACE, b"a", b"1", 0, 0, 0),
        status::NOT_FOUND,
    );
    bp::expect_status(&mut c, &bp::store(op::ADD, b"a", b"1", 5, 0, 0), status::OK);
    let e = bp::expect_status(
        &mut c,
        &bp::store(op::ADD, b"a", b"2", 0, 0, 0),
        status::EXISTS,
    );
    assert_eq!(e.text(), "Data exists for key.");
    bp::expect_status(
        &mut c,
        &bp::store(op::REPLACE, b"a", b"3", 6, 0, 0),
        status::OK,
    );
    bp::expect_status(
        &mut c,
        &bp::packet(op::APPEND, &[], b"a", b"45", 0, 0),
        status::OK,
    );
    bp::expect_status(
        &mut c,
        &bp::packet(op::PREPEND, &[], b"a", b"12", 0, 0),
        status::OK,
    );
    assert_eq!(
        bp::get(&mut c, b"a"),
        Some((6, b"12345".to_vec(), bp::get(&mut c, b"a").unwrap().2))
    );
    let e = bp::expect_status(
        &mut c,
        &bp::packet(op::APPEND, &[], b"zz", b"x", 0, 0),
        status::NOT_STORED,
    );
    assert_eq!(e.text(), "Not stored.");
    bp::expect_status(
        &mut c,
        &bp::packet(op::PREPEND, &[], b"zz", b"x", 0, 0),
        status::NOT_STORED,
    );
    // Delete with a stale CAS is refused, with the right one succeeds.
    let cas = bp::get(&mut c, b"a").unwrap().2;
    bp::expect_status(
        &mut c,
        &bp::packet(op::DELETE, &[], b"a", &[], 0, cas + 1),
        status::EXISTS,
    );
    bp::expect_status(
        &mut c,
        &bp::packet(op::DELETE, &[], b"a", &[], 0, cas),
        status::OK,
    );
    bp::expect_status(&mut c, &bp::simple(op::DELETE, b"a"), status::NOT_FOUND);
    assert_eq!(bp::get(&mut c, b"a"), None);
}

#[test]
fn quiet_commands_are_quiet_on_success_and_report_errors() {
    let s = Server::start();
    let mut c = s.conn();
    // Successes: nothing until the noop.
    let mut batch = Vec::new();
    batch.extend(bp::store(op::SETQ, b"q1", b"v1", 1, 1, 0));
    batch.extend(bp::store(op::ADDQ, b"q2", b"v2", 2, 2, 0));
    batch.extend(bp::store(op::REPLACEQ, b"q2", b"v2b", 2, 3, 0));
    batch.extend(bp::packet(op::APPENDQ, &[], b"q1", b"+", 4, 0));
    batch.extend(bp::packet(op::PREPENDQ, &[], b"q1", b"-", 5, 0));
    batch.extend(bp::packet(
        op::INCRQ,
        &bp::arith_extras(1, 10, 0),
        b"n",
        &[],
        6,
        0,
    ));
    batch.extend(bp::packet(
        op::DECRQ,
        &bp::arith_extras(3, 0, 0),
        b"n",
        &[],
        7,
        0,
    ));
    batch.extend(bp::simple(op::GETQ, b"absent"));
    batch.extend(bp::simple(op::GETKQ, b"absent"));
    batch.extend(bp::packet(
        op::GATQ,
        &0u32.to_be_bytes(),
        b"absent",
        &[],
        8,
        0,
    ));
    batch.extend(bp::packet(
        op::GATKQ,
        &0u32.to_be_bytes(),
        b"absent",
        &[],
        8,
        0,
    ));
    batch.extend(bp::store(op::SETQ, b"d", b"x", 0, 9, 0));
    batch.extend(bp::simple(op::DELETEQ, b"d"));
    c.send(&batch);
    bp::expect_only_noop(&mut c);
    assert_eq!(bp::get(&mut c, b"q1").map(|v| v.1), Some(b"-v1+".to_vec()));
    assert_eq!(bp::get(&mut c, b"q2").map(|v| v.1), Some(b"v2b".to_vec()));
    // memcached rewrites a shrinking counter in place, padded with spaces.
    assert_eq!(bp::get(&mut c, b"n").map(|v| v.1), Some(b"7 ".to_vec()));
    assert_eq!(bp::get(&mut c, b"d"), None);

    // Hits of quiet gets do answer; getkq carries the key.
    let mut batch = bp::simple(op::GETQ, b"q1");
    batch.extend(bp::packet(op::GETKQ, &[], b"q2", &[], 11, 0));
    batch.extend(bp::packet(
        op::GATKQ,
        &0u32.to_be_bytes(),
        b"q2",
        &[],
        12,
        0,
    ));
    c.send(&batch);
    let r = bp::read(&mut c);
    assert_eq!(
        (r.opcode, r.value.as_slice(), r.key.len()),
        (op::GETQ, &b"-v1+"[..], 0)
    );
    let r = bp::read(&mut c);
    assert_eq!(
        (r.opcode, r.opaque, r.key.as_slice(), r.value.as_slice()),
        (op::GETKQ, 11, &b"q2"[..], &b"v2b"[..])
    );
    let r = bp::read(&mut c);
    assert_eq!(
        (r.opcode, r.opaque, r.key.as_slice()),
        (op::GATKQ, 12, &b"q2"[..])
    );
    bp::expect_only_noop(&mut c);

    // Failures of quiet commands are reported, with their opaque.
    let failures: Vec<(Vec<u8>, u8, u16)> = vec![
        (
            bp::store(op::ADDQ, b"q1", b"x", 0, 21, 0),
            op::ADDQ,
            status::EXISTS,
        ),
        (
            bp::store(op::REPLACEQ, b"none", b"x", 0, 22, 0),
            op::REPLACEQ,
            status::NOT_FOUND,
        ),
        (
            bp::store(op::SETQ, b"q1", b"x", 0, 23, 1),
            op::SETQ,
            status::EXISTS,
        ),
        (
            bp::packet(op::APPENDQ, &[], b"none", b"x", 24, 0),
            op::APPENDQ,
            status::NOT_STORED,
        ),
        (
            bp::packet(op::PREPENDQ, &[], b"none", b"x", 25, 0),
            op::PREPENDQ,
            status::NOT_STORED,
        ),
        (
            bp::packet(op::DELETEQ, &[], b"none", &[], 26, 0),
            op::DELETEQ,
            status::NOT_FOUND,
        ),
        (
            bp::packet(op::INCRQ, &bp::arith_extras(1, 0, 0), b"q1", &[], 27, 0),
            op::INCRQ,
            status::NON_NUMERIC,
        ),
        (
            bp::packet(
                op::DECRQ,
                &bp::arith_extras(1, 0, 0xffff_ffff),
                b"none",
                &[],
                28,
                0,
            ),
            op::DECRQ,
            status::NOT_FOUND,
        ),
    ];
    for (req, _, _) in &failures {
        c.send(req);
    }
    for (i, (_, opcode, st)) in failures.iter().enumerate() {
        let r = bp::read(&mut c);
        assert_eq!(
            (r.opcode, r.status, r.opaque),
            (*opcode, *st, 21 + i as u32),
            "{r:?}"
        );
        assert!(!r.value.is_empty(), "error text missing: {r:?}");
    }
    bp::expect_only_noop(&mut c);
}

#[test]
fn getk_miss_and_hit() {
    let s = Server::start();
    let mut c = s.conn();
    let r = bp::rt(&mut c, &bp::packet(op::GETK, &[], b"gone", &[], 3, 0));
    assert_eq!(
        (r.status, r.opaque, r.key.as_slice()),
        (status::NOT_FOUND, 3, &b"gone"[..])
    );
    assert!(
        r.value.is_empty(),
        "memcached sends no error text with a getk miss: {r:?}"
    );
    bp::set(&mut c, b"here", b"v", 9);
    let r = bp::rt(&mut c, &bp::simple(op::GETK, b"here"));
    assert_eq!(
        (r.status, r.flags(), r.key.as_slice(), r.value.as_slice()),
        (status::OK, 9, &b"here"[..], &b"v"[..])
    );
}

#[test]
fn incr_decr_with_initial_value_and_no_create() {
    let s = Server::start();
    let mut c = s.conn();
    // 0xffffffff: do not create.
    let r = bp::rt(
        &mut c,
        &bp::packet(
            op::INCR,
            &bp::arith_extras(1, 5, 0xffff_ffff),
            b"c",
            &[],
            1,
            0,
        ),
    );
    assert_eq!(r.status, status::NOT_FOUND);
    assert_eq!(bp::get(&mut c, b"c"), None);
    // Otherwise a missing counter starts at the initial value (not initial + delta).
    let r = bp::expect_status(
        &mut c,
        &bp::packet(op::INCR, &bp::arith_extras(7, 100, 0), b"c", &[], 2, 0),
        status::OK,
    );
    assert_eq!((r.counter(), r.opaque), (100, 2));
    assert_ne!(r.cas, 0);
    let r = bp::expect_status(
        &mut c,
        &bp::packet(op::INCR, &bp::arith_extras(7, 100, 0), b"c", &[], 3, 0),
        status::OK,
    );
    assert_eq!(r.counter(), 107);
    let r = bp::expect_status(
        &mut c,
        &bp::packet(op::DECR, &bp::arith_extras(200, 0, 0), b"c", &[], 4, 0),
        status::OK,
    );
    assert_eq!(r.counter(), 0, "decr stops at zero");
    let r = bp::expect_status(
        &mut c,
        &bp::packet(op::DECR, &bp::arith_extras(1, 42, 0), b"d", &[], 4, 0),
        status::OK,
    );
    assert_eq!(r.counter(), 42);
    // 64-bit wrap on incr.
    bp::set(&mut c, b"big", u64::MAX.to_string().as_bytes(), 0);
    let r = bp::expect_status(
        &mut c,
        &bp::packet(op::INCR, &bp::arith_extras(2, 0, 0), b"big", &[], 5, 0),
        status::OK,
    );
    assert_eq!(r.counter(), 1);
    // Non-numeric value.
    bp::set(&mut c, b"txt", b"abc", 0);
    let r = bp::expect_status(
        &mut c,
        &bp::packet(op::INCR, &bp::arith_extras(1, 0, 0), b"txt", &[], 6, 0),
        status::NON_NUMERIC,
    );
    assert_eq!(r.text(), "Non-numeric server-side value for incr or decr");
    // The counter is visible to text gets.
    assert_eq!(c.get("d").as_deref(), Some(&b"42"[..]));
}

#[test]
fn flush_with_delay_and_immediately() {
    let s = Server::start();
    let mut c = s.conn();
    bp::set(&mut c, b"f1", b"v", 0);
    // flush in 2 s: still there now, gone after.
    bp::expect_status(
        &mut c,
        &bp::packet(op::FLUSH, &2u32.to_be_bytes(), &[], &[], 0, 0),
        status::OK,
    );
    assert!(
        bp::get(&mut c, b"f1").is_some(),
        "delayed flush must not flush now"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while bp::get(&mut c, b"f1").is_some() {
        assert!(Instant::now() < deadline, "delayed flush never happened");
        std::thread::sleep(Duration::from_millis(200));
    }
    bp::set(&mut c, b"f2", b"v", 0);
    c.send(&bp::simple(op::FLUSHQ, b""));
    bp::expect_only_noop(&mut c);
    assert_eq!(bp::get(&mut c, b"f2"), None);
    bp::set(&mut c, b"f3", b"v", 0);
    bp::expect_status(&mut c, &bp::simple(op::FLUSH, b""), status::OK);
    assert_eq!(bp::get(&mut c, b"f3"), None);
}

/// Reads `stat` packets up to the empty terminator, as (name, value) pairs.
fn read_stats(c: &mut common::Conn, group: &[u8]) -> Vec<(String, String)> {
    c.send(&bp::packet(op::STAT, &[], group, &[], 0x5747, 0));
    let mut out = Vec::new();
    loop {
        let r = bp::read(c);
        assert_eq!(
            (r.opcode, r.status, r.opaque),
            (op::STAT, status::OK, 0x5747),
            "{r:?}"
        );
        if r.key.is_empty() && r.value.is_empty() {
            return out;
        }
        out.push((show(&r.key), r.text()));
        assert!(out.len() < 100_000, "stats never end");
    }
}

#[test]
fn stat_groups_end_with_an_empty_packet() {
    let s = Server::start();
    let mut c = s.conn();
    bp::set(&mut c, b"s", b"v", 0);
    let general = read_stats(&mut c, b"");
    let names: Vec<&str> = general.iter().map(|(n, _)| n.as_str()).collect();
    for want in [
        "pid",
        "uptime",
        "version",
        "curr_items",
        "cmd_get",
        "cmd_set",
        "get_hits",
    ] {
        assert!(names.contains(&want), "no {want} in {names:?}");
    }
    let pid = general.iter().find(|(n, _)| n == "pid").unwrap();
    assert_eq!(pid.1, s.pid().to_string());
    for group in [&b"settings"[..], b"items", b"slabs", b"conns", b"sizes"] {
        let stats = read_stats(&mut c, group);
        if group != b"sizes" {
            assert!(!stats.is_empty(), "group {} is empty", show(group));
        }
    }
    let settings = read_stats(&mut c, b"settings");
    assert!(
        settings
            .iter()
            .any(|(n, v)| n == "item_size_max" && v == "1048576"),
        "{settings:?}"
    );
    // reset zeroes the counters.
    assert!(read_stats(&mut c, b"reset").is_empty());
    let after = read_stats(&mut c, b"");
    let cmd_set = after.iter().find(|(n, _)| n == "cmd_set").unwrap();
    assert_eq!(cmd_set.1, "0");
    // An unknown group is an error, and the connection goes on.
    let r = bp::rt(&mut c, &bp::packet(op::STAT, &[], b"nonsense", &[], 1, 0));
    assert_ne!(r.status, status::OK);
    bp::expect_only_noop(&mut c);
}

#[test]
fn version_noop_verbosity_quit() {
    let s = Server::start();
    let mut c = s.conn();
    let v = bp::expect_status(
        &mut c,
        &bp::packet(op::VERSION, &[], &[], &[], 4, 0),
        status::OK,
    );
    assert_eq!(v.opaque, 4);
    let text = c.request_until(b"version\r\n", b"\r\n");
    assert_eq!(format!("VERSION {}\r\n", v.text()), show(&text));
    // memcached 1.6.45 no longer serves VERBOSITY.
    bp::expect_status(
        &mut c,
        &bp::packet(op::VERBOSITY, &1u32.to_be_bytes(), &[], &[], 0, 0),
        status::UNKNOWN,
    );
    let q = bp::expect_status(
        &mut c,
        &bp::packet(op::QUIT, &[], &[], &[], 9, 0),
        status::OK,
    );
    assert_eq!((q.opcode, q.opaque), (op::QUIT, 9));
    c.expect_closed();
    // quitq closes without a word.
    let mut c = s.conn();
    c.send(&bp::simple(op::QUITQ, b""));
    c.expect_closed();
}

#[test]
fn touch_gat_gatk() {
    let s = Server::start();
    let mut c = s.conn();
    let exp = |secs: u32| secs.to_be_bytes();
    bp::expect_status(
        &mut c,
        &bp::packet(op::TOUCH, &exp(10), b"none", &[], 0, 0),
        status::NOT_FOUND,
    );
    bp::expect_status(
        &mut c,
        &bp::packet(op::GAT, &exp(10), b"none", &[], 0, 0),
        status::NOT_FOUND,
    );
    let r = bp::rt(&mut c, &bp::packet(op::GATK, &exp(10), b"none", &[], 0, 0));
    assert_eq!(
        (r.status, r.key.as_slice()),
        (status::NOT_FOUND, &b"none"[..])
    );

    bp::set(&mut c, b"t", b"val", 3);
    let r = bp::expect_status(
        &mut c,
        &bp::packet(op::TOUCH, &exp(1), b"t", &[], 5, 0),
        status::OK,
    );
    assert!(r.value.is_empty(), "touch returns no value: {r:?}");
    assert_eq!(r.opaque, 5);
    let r = bp::expect_status(
        &mut c,
        &bp::packet(op::GAT, &exp(1), b"t", &[], 6, 0),
        status::OK,
    );
    assert_eq!(
        (r.flags(), r.value.as_slice(), r.key.len()),
        (3, &b"val"[..], 0)
    );
    let r = bp::expect_status(
        &mut c,
        &bp::packet(op::GATK, &exp(1), b"t", &[], 7, 0),
        status::OK,
    );
    assert_eq!(
        (r.key.as_slice(), r.value.as_slice()),
        (&b"t"[..], &b"val"[..])
    );
    // The touch took effect: the item expires in about a second.
    let deadline = Instant::now() + Duration::from_secs(5);
    while bp::get(&mut c, b"t").is_some() {
        assert!(Instant::now() < deadline, "touched item never expired");
        std::thread::sleep(Duration::from_millis(200));
    }
    // And gat can extend a life: 0 means never expire.
    bp::set(&mut c, b"u", b"v", 0);
    bp::expect_status(
        &mut c,
        &bp::packet(op::GAT, &exp(0), b"u", &[], 0, 0),
        status::OK,
    );
    let stats = c.stats("");
    assert!(
        stats["touch_hits"].parse::<u64>().unwrap() >= 4,
        "{stats:?}"
    );
}

#[test]
fn text_and_binary_on_one_connection() {
    let s = Server::start();
    let mut c = s.conn();
    c.set("mix", b"from-text");
    assert_eq!(
        bp::get(&mut c, b"mix").map(|v| v.1),
        Some(b"from-text".to_vec())
    );
    bp::set(&mut c, b"mix2", b"from-binary", 4);
    c.rt(
        b"get mix2\r\n",
        b"VALUE mix2 4 11\r\nfrom-binary\r\nEND\r\n",
    );
    // Pipelined, in one write: text, binary, text, binary.
    let mut batch = b"set p 0 0 1\r\nA\r\n".to_vec();
    batch.extend(bp::packet(op::GET, &[], b"p", &[], 1, 0));
    batch.extend_from_slice(b"append p 0 0 1\r\nB\r\n");
    batch.extend(bp::packet(op::GET, &[], b"p", &[], 2, 0));
    batch.extend_from_slice(b"mn\r\n");
    c.send(&batch);
    c.expect(b"STORED\r\n");
    let r = bp::read(&mut c);
    assert_eq!((r.opaque, r.value.as_slice()), (1, &b"A"[..]));
    c.expect(b"STORED\r\n");
    let r = bp::read(&mut c);
    assert_eq!((r.opaque, r.value.as_slice()), (2, &b"AB"[..]));
    c.expect(b"MN\r\n");
}

#[test]
fn pipelined_multiget_with_getkq_and_noop() {
    let s = Server::start();
    let mut c = s.conn();
    let mut batch = Vec::new();
    for i in 0..200u32 {
        batch.extend(bp::store(
            op::SETQ,
            format!("key{i}").as_bytes(),
            format!("value{i}").as_bytes(),
            i,
            i,
            0,
        ));
    }
    c.send(&batch);
    bp::expect_only_noop(&mut c);
    let mut batch = Vec::new();
    for i in 0..400u32 {
        batch.extend(bp::packet(
            op::GETKQ,
            &[],
            format!("key{i}").as_bytes(),
            &[],
            i,
            0,
        ));
    }
    batch.extend(bp::packet(op::NOOP, &[], &[], &[], 999, 0));
    c.send(&batch);
    for i in 0..200u32 {
        let r = bp::read(&mut c);
        assert_eq!((r.opcode, r.opaque, r.flags()), (op::GETKQ, i, i));
        assert_eq!(show(&r.key), format!("key{i}"));
        assert_eq!(r.text(), format!("value{i}"));
    }
    let r = bp::read(&mut c);
    assert_eq!((r.opcode, r.opaque), (op::NOOP, 999));
}

#[test]
fn unknown_opcode_is_reported_and_connection_continues() {
    let s = Server::start();
    let mut c = s.conn();
    for opcode in [0x50u8, 0x25, 0xfe] {
        let r = bp::rt(&mut c, &bp::packet(opcode, &[], &[], &[], 31, 0));
        assert_eq!(
            (r.opcode, r.status, r.opaque),
            (opcode, status::UNKNOWN, 31),
            "{r:?}"
        );
        assert_eq!(r.text(), "Unknown command");
    }
    // Without -S the SASL opcodes are unknown too (memcached).
    let r = bp::rt(&mut c, &bp::simple(op::SASL_LIST_MECHS, b""));
    assert_eq!(r.status, status::UNKNOWN, "{r:?}");
    let r = bp::rt(
        &mut c,
        &bp::packet(op::SASL_AUTH, &[], b"PLAIN", b"\0u\0p", 0, 0),
    );
    assert_eq!(r.status, status::UNKNOWN, "{r:?}");
    bp::set(&mut c, b"after", b"ok", 0);
    assert!(bp::get(&mut c, b"after").is_some());
}

#[test]
fn truncated_header_then_disconnect() {
    let s = Server::start();
    let mut c = s.conn();
    let pkt = bp::simple(op::GET, b"key");
    c.send(&pkt[..10]);
    // The server waits for the rest: nothing comes back, the connection stays open.
    let (got, closed) = c.drain_for(Duration::from_millis(300));
    assert!(got.is_empty() && !closed, "got {got:?}, closed {closed}");
    drop(c);
    // A truncated body, then a reset.
    let mut c = s.conn();
    c.send(&bp::store(op::SET, b"key", &[b'x'; 100], 0, 0, 0)[..60]);
    c.reset();
    // The server lives on.
    let mut c = s.conn();
    bp::set(&mut c, b"alive", b"yes", 0);
    assert_eq!(
        bp::get(&mut c, b"key"),
        None,
        "a truncated set must store nothing"
    );
}

#[test]
fn body_shorter_than_key_and_extras_is_invalid_and_closes() {
    let s = Server::start();
    let mut c = s.conn();
    let mut pkt = bp::store(op::SET, b"key", b"", 0, 0x77, 0);
    pkt[8..12].copy_from_slice(&5u32.to_be_bytes()); // < 8 extras + 3 key
    c.send(&pkt);
    let r = bp::read(&mut c);
    assert_eq!((r.status, r.opaque), (status::INVALID, 0x77), "{r:?}");
    assert_eq!(r.text(), "Invalid arguments");
    c.expect_closed();
    // Wrong extras for the opcode: also invalid and closed.
    let mut c = s.conn();
    let r = bp::rt(&mut c, &bp::packet(op::GET, &[0, 0, 0, 0], b"k", &[], 1, 0));
    assert_eq!(r.status, status::INVALID);
    c.expect_closed();
    let mut c = s.conn();
    let r = bp::rt(
        &mut c,
        &bp::packet(op::SET, &[0, 0, 0, 0], b"k", b"v", 1, 0),
    );
    assert_eq!(r.status, status::INVALID);
    c.expect_closed();
    s.conn().assert_alive();
}

#[test]
fn key_over_250_bytes_is_invalid() {
    let s = Server::start();
    let mut c = s.conn();
    let ok = vec![b'k'; 250];
    bp::set(&mut c, &ok, b"v", 0);
    assert!(bp::get(&mut c, &ok).is_some());
    let long = vec![b'k'; 251];
    let r = bp::rt(&mut c, &bp::simple(op::GET, &long));
    assert_eq!(r.status, status::INVALID);
    c.expect_closed();
    let mut c = s.conn();
    let r = bp::rt(&mut c, &bp::store(op::SET, &long, b"v", 0, 0, 0));
    assert_eq!(r.status, status::INVALID);
    c.expect_closed();
}

#[test]
fn huge_body_length_on_a_get_is_closed_not_buffered() {
    let s = Server::start();
    let mut c = s.conn();
    let mut pkt = bp::simple(op::GET, b"k");
    pkt[8..12].copy_from_slice(&(1u32 << 30).to_be_bytes());
    c.send(&pkt);
    // Some garbage follows; the server must not wait for a gigabyte of it.
    c.send_lossy(&[0u8; 4096]);
    let started = Instant::now();
    let (got, closed) = c.drain_for(Duration::from_secs(3));
    assert!(closed, "connection left open waiting for a 1 GiB body");
    assert!(started.elapsed() < Duration::from_secs(3));
    if !got.is_empty() {
        assert_eq!(got[0], bp::RES);
        assert_eq!(u16::from_be_bytes([got[6], got[7]]), status::INVALID);
    }
    s.conn().assert_alive();
}

#[test]
fn value_over_item_limit_is_too_large_and_connection_goes_on() {
    let s = Server::with_args(&["-I", "2k"]);
    let mut c = s.conn();
    bp::set(&mut c, b"big", b"old", 0);
    let value = vec![b'v'; 4096];
    let r = bp::rt(&mut c, &bp::store(op::SET, b"big", &value, 0, 0x99, 0));
    assert_eq!(
        (r.opcode, r.status, r.opaque),
        (op::SET, status::TOO_LARGE, 0x99),
        "{r:?}"
    );
    assert_eq!(r.text(), "Too large.");
    // memcached drops the old value of a key whose set was too large.
    assert_eq!(bp::get(&mut c, b"big"), None);
    // The next packet on the same connection works, even if the big value arrives slowly.
    let pkt = bp::store(op::SETQ, b"big2", &value, 0, 0x9a, 0);
    c.send(&pkt[..1000]);
    // Not synchronisation: a pause so the rest reaches the server in a later read.
    std::thread::sleep(Duration::from_millis(100));
    c.send(&pkt[1000..]);
    let r = bp::read(&mut c);
    assert_eq!(
        (r.opcode, r.status, r.opaque),
        (op::SETQ, status::TOO_LARGE, 0x9a),
        "quiet sets report errors"
    );
    bp::set(&mut c, b"small", &value[..1000], 0);
    assert_eq!(bp::get(&mut c, b"small").map(|v| v.1.len()), Some(1000));
    c.assert_alive();
    // Both refusals count in store_too_large; cmd_set counts only the stores tried
    // (memcached's allocation fails before the command is counted).
    let mut t = s.conn();
    assert_eq!(t.stat("store_too_large"), 2);
    assert_eq!(t.stat("cmd_set"), 2);
}

/// Text and binary share one implementation per command: the same requests in either
/// protocol move the same counters (a binary `FLUSH` refused by `-F` aside, which
/// memcached leaves out of `cmd_flush`). A CAS on a binary `ADD` of a present key is
/// refused for the add, counting in no CAS counter.
#[test]
fn text_and_binary_count_alike() {
    let counters = [
        "cmd_get",
        "get_hits",
        "get_misses",
        "cmd_set",
        "cmd_touch",
        "touch_hits",
        "touch_misses",
        "delete_hits",
        "delete_misses",
        "incr_hits",
        "incr_misses",
        "decr_hits",
        "cas_hits",
        "cas_badval",
        "cas_misses",
    ];
    let text = Server::start();
    let mut t = text.conn();
    t.rt(b"set a 0 0 1\r\n1\r\n", b"STORED\r\n");
    t.rt(b"get a\r\n", b"VALUE a 0 1\r\n1\r\nEND\r\n");
    t.rt(b"get b\r\n", b"END\r\n");
    t.rt(b"gat 100 a\r\n", b"VALUE a 0 1\r\n1\r\nEND\r\n");
    t.rt(b"gat 100 b\r\n", b"END\r\n");
    t.rt(b"incr a 2\r\n", b"3\r\n");
    t.rt(b"incr b 2\r\n", b"NOT_FOUND\r\n");
    t.rt(b"decr a 1\r\n", b"2\r\n");
    let cas = common::gets_cas(&mut t, "a");
    t.rt(
        format!("cas a 0 0 1 {}\r\nx\r\n", cas + 1).as_bytes(),
        b"EXISTS\r\n",
    );
    t.rt(
        format!("cas a 0 0 1 {cas}\r\nx\r\n").as_bytes(),
        b"STORED\r\n",
    );
    t.rt(b"cas b 0 0 1 5\r\nx\r\n", b"NOT_FOUND\r\n");
    t.rt(b"delete a\r\n", b"DELETED\r\n");
    t.rt(b"delete a\r\n", b"NOT_FOUND\r\n");
    let text_stats = t.stats("");

    let bin = Server::start();
    let mut b = bin.conn();
    bp::expect_status(&mut b, &bp::store(op::SET, b"a", b"1", 0, 0, 0), status::OK);
    bp::expect_status(
        &mut b,
        &bp::packet(op::GET, &[], b"a", &[], 0, 0),
        status::OK,
    );
    let miss = bp::packet(op::GET, &[], b"b", &[], 0, 0);
    bp::expect_status(&mut b, &miss, status::NOT_FOUND);
    let ttl = 100u32.to_be_bytes();
    bp::expect_status(
        &mut b,
        &bp::packet(op::GAT, &ttl, b"a", &[], 0, 0),
        status::OK,
    );
    let gat_miss = bp::packet(op::GAT, &ttl, b"b", &[], 0, 0);
    bp::expect_status(&mut b, &gat_miss, status::NOT_FOUND);
    let arith = |delta: u64| {
        let mut e = Vec::new();
        e.extend_from_slice(&delta.to_be_bytes());
        e.extend_from_slice(&0u64.to_be_bytes());
        e.extend_from_slice(&u32::MAX.to_be_bytes());
        e
    };
    bp::expect_status(
        &mut b,
        &bp::packet(op::INCR, &arith(2), b"a", &[], 0, 0),
        status::OK,
    );
    let incr_miss = bp::packet(op::INCR, &arith(2), b"b", &[], 0, 0);
    bp::expect_status(&mut b, &incr_miss, status::NOT_FOUND);
    bp::expect_status(
        &mut b,
        &bp::packet(op::DECR, &arith(1), b"a", &[], 0, 0),
        status::OK,
    );
    // As text's `gets`: a get that reads the CAS.
    let r = bp::expect_status(
        &mut b,
        &bp::packet(op::GET, &[], b"a", &[], 0, 0),
        status::OK,
    );
    let cas = r.cas;
    bp::expect_status(
        &mut b,
        &bp::store(op::SET, b"a", b"x", 0, 0, cas + 1),
        status::EXISTS,
    );
    bp::expect_status(
        &mut b,
        &bp::store(op::SET, b"a", b"x", 0, 0, cas),
        status::OK,
    );
    bp::expect_status(
        &mut b,
        &bp::store(op::SET, b"b", b"x", 0, 0, 5),
        status::NOT_FOUND,
    );
    bp::expect_status(
        &mut b,
        &bp::packet(op::DELETE, &[], b"a", &[], 0, 0),
        status::OK,
    );
    let del_miss = bp::packet(op::DELETE, &[], b"a", &[], 0, 0);
    bp::expect_status(&mut b, &del_miss, status::NOT_FOUND);
    let bin_stats = b.stats("");
    for name in counters {
        assert_eq!(text_stats[name], bin_stats[name], "{name}");
    }
    assert_eq!(bin_stats["cas_hits"], "1");

    // A CAS makes an ADD a compare-and-swap, as in memcached: it stores over the present
    // key whose CAS it names, and counts as a CAS hit.
    let r = bp::expect_status(&mut b, &bp::store(op::SET, b"c", b"1", 0, 0, 0), status::OK);
    bp::expect_status(
        &mut b,
        &bp::store(op::ADD, b"c", b"2", 0, 0, r.cas),
        status::OK,
    );
    let after = b.stats("");
    assert_eq!(after["cas_hits"], "2");
    for name in ["cas_badval", "cas_misses"] {
        assert_eq!(after[name], bin_stats[name], "{name}");
    }
}
