//! The `shoal-bench` command line: one module per subcommand, each with its arguments and
//! the function that runs it; the work itself is in the `shoal_bench` library.

mod compare;
mod experiments;
mod fill;
mod hitratio;
mod load;
mod restart;
mod soak;
mod util;

use anyhow::Result;
use clap::{Parser, Subcommand};
use experiments::Exp;

#[derive(Parser)]
#[command(
    name = "shoal-bench",
    version,
    about = "Load generator and benchmarks for shoald and memcached"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Closed-loop get/set load against one server (memcached text protocol).
    Load(load::LoadArgs),
    /// Set keys 0..N once, pipelined, then count how many are still retrievable.
    Fill(fill::FillArgs),
    /// shoald vs memcached: same flags, same loads, alternating, repeated; memcaslap;
    /// memory efficiency.
    CompareMemcached(compare::CompareArgs),
    /// Seeds 000+002: native/ketama/election placement over 3 nodes, text vs binary;
    /// hash-function speed; modulo vs consistent; multi-get vs gets; keys moved.
    Hash(experiments::ExpArgs),
    /// Seed 001: gets+cas under contention, 1..100 connections; decr and meta ma.
    Cas(experiments::ExpArgs),
    /// Seed 003: shoald vs memcached vs redis, 1 and 4 nodes, 1/10/100 KB, 1/200/1000 conns.
    Compare(experiments::ExpArgs),
    /// Seed 004: shoal-queued (and redis lists), 256-byte messages, disk use.
    Queue(experiments::ExpArgs),
    /// Every seed experiment, one report.
    All(experiments::ExpArgs),
    /// Memory under abuse: starts a server with -m, runs mixed load with connection churn
    /// and slow readers, samples its RSS every second; fails when RSS after warm-up
    /// exceeds -m plus an overhead allowance.
    Soak(soak::SoakArgs),
    /// Hit ratio at equal memory: demand-fill replay of workload shapes or real traces
    /// (oracleGeneral, Twitter CSV) into shoald, memcached and redis; miss-ratio curves;
    /// libCacheSim's LRU, S3-FIFO, SIEVE and Belady beside them.
    Hitratio(hitratio::HitRatioArgs),
    /// Warm restart (-e memory file, SIGUSR1): exec-to-serving time with the whole cache
    /// back, shoald beside memcached, at several item counts.
    Restart(restart::RestartArgs),
}

fn main() -> Result<()> {
    shoal_bench::server::exit_cleanly_on_interrupt();
    match Cli::parse().cmd {
        Cmd::Load(a) => load::run(a),
        Cmd::Fill(a) => fill::run(a),
        Cmd::CompareMemcached(a) => compare::run(a),
        Cmd::Hash(a) => experiments::run(a, &[Exp::Hash]),
        Cmd::Cas(a) => experiments::run(a, &[Exp::Cas]),
        Cmd::Compare(a) => experiments::run(a, &[Exp::Compare]),
        Cmd::Queue(a) => experiments::run(a, &[Exp::Queue]),
        Cmd::All(a) => experiments::run(a, &[Exp::Hash, Exp::Cas, Exp::Compare, Exp::Queue]),
        Cmd::Soak(a) => soak::run(a),
        Cmd::Restart(a) => restart::run(a),
        Cmd::Hitratio(a) => hitratio::run(a),
    }
}
