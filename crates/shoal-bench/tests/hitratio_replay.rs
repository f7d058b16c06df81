//! The demand-fill replay against a shoald it starts: hits and fills as a sequential
//! client would see them (fills travel with the next window), and every miss put down to
//! its cause: a key never written, a TTL run out, or the server dropping a live item.

mod common;

use shoal_bench::hitratio::replay::{replay, ReplayConfig, ReplayResult, Wire};
use shoal_bench::hitratio::{Op, Request};
use shoal_bench::server::ServerProcess;
use shoal_bench::BenchError;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

fn shoald() -> ServerProcess {
    let bin = common::workspace_bin("SHOALD_BIN", "shoald");
    ServerProcess::start_shoald(&bin, &["-m".into(), "64".into()]).expect("shoald starts")
}

fn get(key: u64, ttl: u32) -> Request {
    Request {
        time: 0,
        key,
        key_len: 16,
        value_len: 100,
        ttl,
        op: Op::Get,
    }
}

fn run(
    addr: SocketAddr,
    trace: impl IntoIterator<Item = Result<Request, BenchError>>,
) -> ReplayResult {
    let cfg = ReplayConfig {
        server: addr,
        wire: Wire::Memcache,
        window: 64,
        warmup: 0,
        rate: None,
        interval: 0,
    };
    replay(&cfg, trace, |_| {}).expect("replay runs")
}

/// Sends `flush_all` on a connection of its own and waits for `OK`.
fn flush_all(addr: SocketAddr) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s.write_all(b"flush_all\r\n").expect("write");
    let mut reply = [0u8; 4];
    s.read_exact(&mut reply).expect("reply");
    assert_eq!(&reply, b"OK\r\n");
}

#[test]
fn each_read_sees_every_fill_before_it_and_misses_are_new_keys() {
    let srv = shoald();
    // 50 keys read three times over: a window of 64 ends before the first repeat, so each
    // later window's reads go out in the same write as the previous window's fills, and
    // must see them.
    let trace = (0..150u64).map(|i| Ok(get(i % 50, 0)));
    let r = run(srv.addr, trace);
    assert_eq!(r.gets, 150);
    assert_eq!(r.hits, 100, "{r:?}");
    assert_eq!(r.sets, 50, "one fill per key");
    assert_eq!(
        (r.misses_new, r.misses_expired, r.misses_evicted),
        (50, 0, 0)
    );
    // A key read right after itself: the window ends before the repeat.
    let r = run(srv.addr, [Ok(get(9_999, 0)), Ok(get(9_999, 0))]);
    assert_eq!((r.hits, r.misses_new), (1, 1), "{r:?}");
}

#[test]
fn misses_are_put_down_to_ttls_and_to_dropped_items() {
    let srv = shoald();
    let addr = srv.addr;
    // Keys 0-99 live 2 s, 100-199 forever; all are read, then read again after 2.5 s (the
    // first lot has expired), then flushed by another client and read a third time.
    let round = |ttl_keys: bool| {
        (0..200u64).map(move |k| Ok(get(k, if ttl_keys && k < 100 { 2 } else { 0 })))
    };
    let trace = round(true)
        .chain(std::iter::once_with(|| {
            std::thread::sleep(Duration::from_millis(2500));
            Ok(get(500, 0))
        }))
        .chain(round(true))
        .chain(std::iter::once_with(move || {
            flush_all(addr);
            Ok(get(501, 0))
        }))
        .chain(round(false));
    let r = run(addr, trace);
    assert_eq!(r.gets, 602);
    // New: 200 keys and the two markers. Expired: the 100 TTL keys on their second read.
    // Dropped while live: everything written before the flush that was not expired (the
    // 100 refilled TTL keys, whose new TTL has not run out yet, and the 100 others).
    assert_eq!(r.misses_new, 202, "{r:?}");
    assert_eq!(r.misses_expired, 100, "{r:?}");
    assert_eq!(r.misses_evicted, 200, "{r:?}");
    assert_eq!(
        r.hits, 100,
        "the 100 keys without a TTL, read the second time"
    );
}
