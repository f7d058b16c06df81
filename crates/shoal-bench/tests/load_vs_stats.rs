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
