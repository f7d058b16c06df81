//! `shoal-bench load`: closed-loop get/set load against one server (or several, with
//! `--placement`).

use crate::util::{dur, resolve};
use anyhow::{Context, Result};
use shoal_bench::load::{self, LoadConfig, Refill};
use shoal_bench::proto::Protocol;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `load`'s options.
#[derive(clap::Args)]
pub struct LoadArgs {
    /// Server address; several, comma-separated, with --placement.
    #[arg(short, long, default_value = "127.0.0.1:11211")]
    pub server: String,
    /// Protocol: text, meta, binary (memcached), resp (redis GET/SET), resp-list
    /// (redis LPUSH/RPOP).
    #[arg(short = 'P', long, value_enum, default_value_t = Protocol::Text)]
    pub protocol: Protocol,
    /// Client-side placement over several servers (a shoal-ring distribution name:
    /// modula, ketama, election, jump, ...).
    #[arg(long)]
    pub placement: Option<String>,
    /// Key distribution: uniform, zipfian, zipfian:THETA.
    #[arg(long, default_value = "uniform")]
    pub key_dist: String,
    /// Send this many requests in total instead of running for --duration.
    #[arg(short = 'n', long)]
    pub requests: Option<u64>,
    /// Cap requests per second over all connections.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Client threads.
    #[arg(short = 'T', long, default_value_t = 2)]
    pub threads: usize,
    /// Connections in total.
    #[arg(short, long, default_value_t = 50)]
    pub conns: usize,
    /// Requests in flight per connection.
    #[arg(short, long, default_value_t = 1)]
    pub depth: usize,
    /// Distinct keys.
    #[arg(short, long, default_value_t = 10_000)]
    pub keys: u64,
    /// Key prefix (keys are prefix + zero-padded index).
    #[arg(long, default_value = "key:")]
    pub key_prefix: String,
    /// Digits the key index is padded to.
    #[arg(long, default_value_t = 8)]
    pub key_width: usize,
    /// Value size in bytes, or a range (20-256), k/m suffixes allowed.
    #[arg(short, long, default_value = "100")]
    pub value_size: String,
    /// Fraction of sets, 0 to 1 (0.1 = 1 set : 9 gets).
    #[arg(long, default_value_t = 0.1)]
    pub set_ratio: f64,
    /// Measured window (5s, 500ms, 2m).
    #[arg(short = 't', long, default_value = "5s", value_parser = dur)]
    pub duration: Duration,
    /// Warm-up before the measured window.
    #[arg(short, long, default_value = "1s", value_parser = dur)]
    pub warmup: Duration,
    /// Do not set every key before starting.
    #[arg(long)]
    pub no_prefill: bool,
    /// Random seed.
    #[arg(long, default_value_t = 0x5eed)]
    pub seed: u64,
    /// Pipeline refill: batch (write depth, await all) or window (keep depth in flight).
    #[arg(long, value_enum, default_value_t = Refill::Batch)]
    pub refill: Refill,
    /// Write the report as JSON here (`-` for stdout, replacing the summary).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

/// Runs the load and prints its report; fails, after printing what was measured, if the
/// run stopped early (a server died or closed connections) or every request got an error.
pub fn run(a: LoadArgs) -> Result<()> {
    let servers = a
        .server
        .split(',')
        .map(resolve)
        .collect::<Result<Vec<_>>>()?;
    let placement = match (&a.placement, servers.len()) {
        (None, 1) => None,
        (None, _) => anyhow::bail!("several servers need --placement (e.g. ketama)"),
        (Some(p), _) => {
            let d: shoal_ring::Distribution =
                p.parse().map_err(|e| anyhow::anyhow!("--placement: {e}"))?;
            let list = servers
                .iter()
                .map(|s| shoal_ring::Server::new(s.ip().to_string(), s.port()))
                .collect();
            Some(std::sync::Arc::new(
                shoal_ring::Ring::new(shoal_ring::RingConfig::new(d), list)
                    .map_err(|e| anyhow::anyhow!("--placement: {e}"))?,
            ))
        }
    };
    if a.protocol == Protocol::RespList && !a.no_prefill {
        anyhow::bail!("--protocol resp-list is a queue: add --no-prefill");
    }
    let cfg = LoadConfig {
        servers,
        protocol: a.protocol,
        placement_name: a.placement.clone(),
        placement,
        threads: a.threads,
        conns: a.conns,
        depth: a.depth,
        keys: a.keys,
        key_dist: a.key_dist.parse()?,
        key_prefix: a.key_prefix,
        key_width: a.key_width,
        value_size: a.value_size.parse()?,
        set_ratio: a.set_ratio,
        duration: a.duration,
        warmup: a.warmup,
        requests: a.requests,
        rate: a.rate,
        prefill: !a.no_prefill,
        seed: a.seed,
        refill: a.refill,
        progress: !a.no_progress,
    };
    let report = load::run(&cfg).context("load run failed")?;
    let json = serde_json::to_string_pretty(&report)?;
    match a.json.as_deref() {
        Some(p) if p == Path::new("-") => println!("{json}"),
        Some(p) => {
            std::fs::write(p, json).with_context(|| format!("writing {}", p.display()))?;
            println!("{}", report.summary());
        }
        None => println!("{}", report.summary()),
    }
    if report.failed() {
        anyhow::bail!(
            "the run stopped early (numbers above are up to that point): {}",
            report.failures.join("; ")
        );
    }
    if report.measured.ops() > 0 && report.measured.errors == report.measured.ops() {
        anyhow::bail!("the server answered every request with an error");
    }
    Ok(())
}
