//! Runs `load` for about a second against a shoald it starts and checks that the
//! generator counts exactly what the server counts.

mod common;

use shoal_bench::load::{self, LoadConfig, Refill};
use shoal_bench::server::{self, ServerProcess};
use std::path::PathBuf;
use std::time::Duration;

/// shoald from `SHOALD_BIN`, or from this test's target directory, rebuilt first if it is
/// missing or older than the workspace sources.
fn shoald() -> PathBuf {
    common::workspace_bin("SHOALD_BIN", "shoald")
}

fn cmd_total(addr: std::net::SocketAddr) -> u64 {
    let st = server::stats(addr).expect("stats");
    server::stat_u64(&st, "cmd_get").expect("cmd_get")
        + server::stat_u64(&st, "cmd_set").expect("cmd_set")
}

#[test]
fn load_counts_what_shoald_counts() {
    let srv = ServerProcess::start_shoald(
        &shoald(),
        &["-t".into(), "2".into(), "-m".into(), "64".into()],
    )
    .expect("shoald starts");
    for (depth, refill) in [(1, Refill::Batch), (8, Refill::Window)] {
        let before = cmd_total(srv.addr);
        let mut cfg = LoadConfig::new(srv.addr);
        cfg.conns = 8;
        cfg.depth = depth;
        cfg.refill = refill;
        cfg.keys = 1000;
        cfg.set_ratio = 0.2;
        cfg.duration = Duration::from_millis(400);
        cfg.warmup = Duration::from_millis(100);
        let r = load::run(&cfg).expect("load runs");
        let after = cmd_total(srv.addr);
        assert!(r.measured.ops() > 100, "{r:?}");
        assert_eq!(r.total_ops(), after - before, "{}", r.summary());
        assert_eq!(r.measured.errors, 0);
        // Every key was prefilled, so every get hits.
        assert_eq!(r.measured.misses, 0, "{}", r.summary());
        assert!(r.latency.p50_us > 0.0 && r.latency.p99_us >= r.latency.p50_us);
    }
}

/// Client-side placement over three servers with several requests in flight: every
/// request goes to the server the ring places its key on, each batch split by server, and
/// the three servers together count exactly what the generator counts.
#[test]
fn placed_batches_reach_the_servers_their_keys_belong_to() {
    let args = ["-t".into(), "1".into(), "-m".into(), "64".into()];
    let servers: Vec<ServerProcess> = (0..3)
        .map(|_| ServerProcess::start_shoald(&shoald(), &args).expect("shoald starts"))
        .collect();
    let addrs: Vec<_> = servers.iter().map(|s| s.addr).collect();
    let ring = shoal_ring::Ring::new(
        shoal_ring::RingConfig::new("ketama".parse().expect("distribution")),
        addrs
            .iter()
            .map(|a| shoal_ring::Server::new(a.ip().to_string(), a.port()))
            .collect(),
    )
    .expect("ring");
    let before: Vec<u64> = addrs.iter().map(|&a| cmd_total(a)).collect();
    let mut cfg = LoadConfig::new(addrs[0]);
    cfg.servers = addrs.clone();
    cfg.placement = Some(std::sync::Arc::new(ring));
    cfg.placement_name = Some("ketama".into());
    cfg.conns = 4;
    cfg.depth = 8;
    cfg.keys = 500;
    cfg.set_ratio = 0.2;
    cfg.duration = Duration::from_millis(400);
    cfg.warmup = Duration::from_millis(100);
    let r = load::run(&cfg).expect("load runs");
    let served: Vec<u64> = addrs
        .iter()
        .zip(&before)
        .map(|(&a, b)| cmd_total(a) - b)
        .collect();
    assert!(r.measured.ops() > 100, "{r:?}");
    assert_eq!(r.total_ops(), served.iter().sum::<u64>(), "{}", r.summary());
    assert!(
        served.iter().all(|&n| n > 0),
        "every server served some: {served:?}"
    );
    assert_eq!(r.measured.errors, 0);
    // Every key was prefilled on the server it is placed on, so every get hits there.
    assert_eq!(r.measured.misses, 0, "{}", r.summary());
}
