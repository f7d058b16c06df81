//! The generator counts what the server counts, for every protocol: text, meta and
//! binary against shoald and memcached (if installed) via `stats`, and RESP against a
//! real redis-server (if installed) via `INFO commandstats`.

mod common;

use shoal_bench::load::{self, LoadConfig};
use shoal_bench::proto::Protocol;
use shoal_bench::resp;
use shoal_bench::server::{self, ServerProcess};
use shoal_bench::workload::{KeyDist, ValueSize};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

fn mc_total(addr: SocketAddr) -> (u64, u64) {
    let st = server::stats(addr).expect("stats");
    (
        server::stat_u64(&st, "cmd_get").expect("cmd_get"),
        server::stat_u64(&st, "cmd_set").expect("cmd_set"),
    )
}

fn redis_total(addr: SocketAddr) -> (u64, u64) {
    let info = server::redis_info(addr, "commandstats").expect("INFO");
    (
        resp::command_calls(&info, "get"),
        resp::command_calls(&info, "set"),
    )
}

fn config(addr: SocketAddr, protocol: Protocol, depth: usize) -> LoadConfig {
    let mut cfg = LoadConfig::new(addr);
    cfg.protocol = protocol;
    cfg.conns = 6;
    cfg.depth = depth;
    cfg.keys = 500;
    cfg.key_dist = KeyDist::Zipfian { theta: 0.9 };
    cfg.value_size = ValueSize { min: 20, max: 256 };
    cfg.set_ratio = 0.3;
    cfg.duration = Duration::from_millis(300);
    cfg.warmup = Duration::from_millis(50);
    cfg
}

/// Runs `cfg` (time mode, then count mode) and checks gets and sets against `total`.
fn check(name: &str, mut cfg: LoadConfig, total: impl Fn() -> (u64, u64)) {
    for requests in [None, Some(1234)] {
        cfg.requests = requests;
        let (g0, s0) = total();
        let r = load::run(&cfg).expect("load runs");
        let (g1, s1) = total();
        assert!(!r.failed(), "{name}: {}", r.summary());
        assert_eq!(r.measured.errors, 0, "{name}: {}", r.summary());
        assert_eq!(r.total.gets, g1 - g0, "{name} gets: {}", r.summary());
        assert_eq!(r.total.sets, s1 - s0, "{name} sets: {}", r.summary());
        assert_eq!(r.measured.misses, 0, "{name}: prefilled, so every get hits");
        if let Some(n) = requests {
            assert_eq!(r.measured.ops(), n, "{name}: count mode sends exactly n");
        } else {
            assert!(r.measured.ops() > 100, "{name}: {}", r.summary());
        }
        cfg.prefill = false;
    }
}

#[test]
fn memcache_protocols_count_what_shoald_counts() {
    let bin = common::workspace_bin("SHOALD_BIN", "shoald");
    let srv = ServerProcess::start_shoald(&bin, &["-t".into(), "2".into()]).expect("shoald");
    for (p, depth) in [
        (Protocol::Text, 4),
        (Protocol::Meta, 1),
        (Protocol::Binary, 8),
    ] {
        check(p.name(), config(srv.addr, p, depth), || mc_total(srv.addr));
    }
}

#[test]
fn memcache_protocols_count_what_memcached_counts() {
    let Some(bin) = shoal_test_support::peer("memcached", "memcached") else {
        return;
    };
    let srv = ServerProcess::start_memcached(&bin, &["-t".into(), "2".into()]).expect("memcached");
    for (p, depth) in [
        (Protocol::Text, 4),
        (Protocol::Meta, 4),
        (Protocol::Binary, 1),
    ] {
        check(p.name(), config(srv.addr, p, depth), || mc_total(srv.addr));
    }
}

#[test]
fn resp_counts_what_redis_counts() {
    let Some(bin) = shoal_test_support::peer("redis-server", "redis-server") else {
        return;
    };
    let srv = ServerProcess::start_redis(&bin, &[]).expect("redis-server");
    check("resp", config(srv.addr, Protocol::Resp, 4), || {
        redis_total(srv.addr)
    });
}

#[test]
fn a_server_dying_mid_run_is_reported_with_what_was_measured() {
    let bin = common::workspace_bin("SHOALD_BIN", "shoald");
    let mut srv = ServerProcess::start_shoald(&bin, &[]).expect("shoald");
    let mut cfg = config(srv.addr, Protocol::Text, 1);
    cfg.duration = Duration::from_secs(5);
    cfg.prefill = false;
    let addr = srv.addr;
    let ops = || {
        let (g, s) = mc_total(addr);
        g + s
    };
    let until_more_than = |n: u64| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while ops() <= n {
            assert!(Instant::now() < deadline, "no requests arrived");
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    let r = std::thread::scope(|s| {
        let h = s.spawn(|| load::run(&cfg));
        // Kill the server once requests are being measured: the run has started, its
        // warmup (a stretch of time by definition) has passed, and requests arrive after.
        until_more_than(0);
        std::thread::sleep(cfg.warmup);
        until_more_than(ops());
        srv.kill();
        h.join().expect("no panic")
    })
    .expect("a mid-run death is a report, not an error");
    assert!(r.failed(), "{}", r.summary());
    assert!(r.measured.ops() > 0, "{}", r.summary());
    assert!(r.window_secs < 1.0, "{}", r.summary());
}

#[test]
fn an_unreachable_server_is_an_error() {
    let port = server::free_port().expect("port");
    let mut cfg = LoadConfig::new(SocketAddr::from(([127, 0, 0, 1], port)));
    cfg.prefill = false;
    cfg.duration = Duration::from_millis(100);
    let e = load::run(&cfg).expect_err("nobody listens there");
    assert!(e.to_string().contains("connect to"), "{e}");
}
