//! Expiration as memcached does it: 0 never, up to 30 days relative, larger an absolute Unix
//! time, negative already expired. Tests that need an expiry to pass sleep past it, each
//! doing all its waiting at once.

mod common;

use common::Server;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn unix_now() -> i64 {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970");
    i64::try_from(d.as_secs()).expect("fits")
}

/// The TTL `mg <key> t` reports (-1 = never), or None on a miss.
fn ttl(c: &mut common::Conn, key: &str) -> Option<i64> {
    c.send(format!("mg {key} t\r\n").as_bytes());
    let line = c.read_line();
    let text = common::show(&line);
    if text == "EN\r\n" {
        return None;
    }
    let t = text
        .trim_end()
        .strip_prefix("HD t")
        .unwrap_or_else(|| panic!("unexpected {text:?}"));
    Some(t.parse().expect("ttl"))
}

#[test]
fn negative_and_absolute_times_take_effect_immediately() {
    let s = Server::start();
    let mut c = s.conn();
    // Negative: stored, but already expired.
    c.rt(b"set neg 0 -1 1\r\nx\r\n", b"STORED\r\n");
    c.rt(b"get neg\r\n", b"END\r\n");
    // Absolute time in the past (over 30 days, so absolute).
    let past = unix_now() - 10;
    c.rt(
        format!("set past 0 {past} 1\r\nx\r\n").as_bytes(),
        b"STORED\r\n",
    );
    c.rt(b"get past\r\n", b"END\r\n");
    // 30 days + 1 second is an absolute time in 1970: long gone.
    c.rt(b"set old 0 2592001 1\r\nx\r\n", b"STORED\r\n");
    c.rt(b"get old\r\n", b"END\r\n");
    // Exactly 30 days is still relative.
    c.rt(b"set month 0 2592000 1\r\nx\r\n", b"STORED\r\n");
    c.rt(b"get month\r\n", b"VALUE month 0 1\r\nx\r\nEND\r\n");
    let t = ttl(&mut c, "month").expect("hit");
    assert!((2_591_990..=2_592_000).contains(&t), "ttl {t}");
    // Absolute time in the future.
    let future = unix_now() + 100;
    c.rt(
        format!("set fut 0 {future} 1\r\nx\r\n").as_bytes(),
        b"STORED\r\n",
    );
    c.rt(b"get fut\r\n", b"VALUE fut 0 1\r\nx\r\nEND\r\n");
    let t = ttl(&mut c, "fut").expect("hit");
    assert!((95..=101).contains(&t), "ttl {t}");
    // 0 never expires.
    c.rt(b"set never 0 0 1\r\nx\r\n", b"STORED\r\n");
    assert_eq!(ttl(&mut c, "never"), Some(-1));
    // add over an expired item succeeds.
    c.rt(b"add neg 0 0 1\r\ny\r\n", b"STORED\r\n");
    c.rt(b"get neg\r\n", b"VALUE neg 0 1\r\ny\r\nEND\r\n");
    // Expired items are not counted as present.
    assert_eq!(c.stat("curr_items"), 4);
}

#[test]
fn relative_expiry_touch_and_delayed_flush() {
    let s = Server::start();
    let mut c = s.conn();
    c.rt(b"set short 0 1 1\r\na\r\n", b"STORED\r\n");
    c.rt(b"set touched 0 1 1\r\nb\r\n", b"STORED\r\n");
    c.rt(b"set gatted 0 1 1\r\nc\r\n", b"STORED\r\n");
    c.rt(b"set long 0 100 1\r\nd\r\n", b"STORED\r\n");
    c.rt(b"set counter 0 1 1\r\n5\r\n", b"STORED\r\n");
    c.rt(b"set unfetched 0 1 1\r\ne\r\n", b"STORED\r\n");
    c.rt(b"get short\r\n", b"VALUE short 0 1\r\na\r\nEND\r\n");
    c.rt(b"touch touched 100\r\n", b"TOUCHED\r\n");
    c.rt(b"gat 100 gatted\r\n", b"VALUE gatted 0 1\r\nc\r\nEND\r\n");
    // incr keeps the item's expiry.
    c.rt(b"incr counter 1\r\n", b"6\r\n");
    // A delayed flush: everything stored before it goes at the deadline.
    c.rt(b"flush_all 2\r\n", b"OK\r\n");
    c.rt(b"get long\r\n", b"VALUE long 0 1\r\nd\r\nEND\r\n");

    // Deliberately lets time pass: the 1 s expiries and the 2 s flush deadline.
    std::thread::sleep(Duration::from_millis(3100));

    c.rt(b"get short\r\n", b"END\r\n");
    c.rt(b"get counter\r\n", b"END\r\n");
    c.rt(b"incr counter 1\r\n", b"NOT_FOUND\r\n");
    // Touched items outlived their first expiry but not the flush.
    c.rt(b"get touched gatted long\r\n", b"END\r\n");
    // Items stored after the flush deadline live.
    c.rt(b"set after 0 0 1\r\nf\r\n", b"STORED\r\n");
    c.rt(b"get after\r\n", b"VALUE after 0 1\r\nf\r\nEND\r\n");
    // Expired items are reclaimed without a read.
    let st = c.stats("");
    assert_eq!(st["curr_items"], "1", "{st:?}");
}

#[test]
fn touch_extends_life() {
    let s = Server::start();
    let mut c = s.conn();
    c.rt(b"set a 0 1 1\r\na\r\n", b"STORED\r\n");
    c.rt(b"set b 0 1 1\r\nb\r\n", b"STORED\r\n");
    c.rt(b"touch a 100\r\n", b"TOUCHED\r\n");
    c.rt(b"mg b T100\r\n", b"HD\r\n");
    // Deliberately lets the original 1 s expiry pass.
    std::thread::sleep(Duration::from_millis(2100));
    c.rt(
        b"get a b\r\n",
        b"VALUE a 0 1\r\na\r\nVALUE b 0 1\r\nb\r\nEND\r\n",
    );
}

#[test]
fn debugtime_moves_the_clock_only_when_turned_on() {
    // memcached-debug's `debugtime`: off unless the operator asks for it, and then an
    // unknown command, as in release memcached.
    let s = Server::start();
    let mut c = s.conn();
    c.rt(b"debugtime 100\r\n", b"ERROR\r\n");
    c.rt(b"set k 0 100 1\r\nx\r\n", b"STORED\r\n");
    c.rt(b"get k\r\n", b"VALUE k 0 1\r\nx\r\nEND\r\n");

    // Given before other -o options, as the t/ suite's wrapper gives it.
    let s = Server::with_args(&["-o", "debug_time", "-o", "no_lru_crawler"]);
    let mut c = s.conn();
    c.rt(b"set k 0 100 1\r\nx\r\n", b"STORED\r\n");
    let time = c.stat("time");
    c.rt(b"debugtime 99\r\n", b"OK\r\n");
    c.rt(b"get k\r\n", b"VALUE k 0 1\r\nx\r\nEND\r\n");
    c.rt(b"debugtime 1\r\n", b"OK\r\n");
    c.rt(b"get k\r\n", b"END\r\n");
    // The shift lasts: the server's time runs 100 s ahead from now on.
    std::thread::sleep(Duration::from_millis(1200));
    assert!(
        c.stat("time") >= time + 100,
        "time {time} -> {}",
        c.stat("time")
    );
    // Paused, the clock stays; resumed, it follows the wall clock again.
    c.rt(b"debugtime p\r\n", b"OK\r\n");
    let paused = c.stat("time");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(c.stat("time"), paused);
    c.rt(b"debugtime r\r\n", b"OK\r\n");
    std::thread::sleep(Duration::from_millis(300));
    assert!(c.stat("time") > paused);
    for bad in [
        &b"debugtime\r\n"[..],
        b"debugtime x\r\n",
        b"debugtime -5\r\n",
    ] {
        c.rt(bad, b"ERROR\r\n");
    }
}
