//! `shoal-bench compare-memcached`: shoald against memcached with the same flags and
//! loads, alternating and repeated; memcaslap; memtier_benchmark; memory efficiency.

use crate::util::{dur, parse_size, which};
use anyhow::{Context, Result};
use shoal_bench::compare::{self, CompareConfig};
use shoal_bench::memtier::MemtierConfig;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `compare-memcached`'s options.
#[derive(clap::Args)]
pub struct CompareArgs {
    /// The shoald binary (default: next to this program, else on PATH).
    #[arg(long)]
    pub shoald: Option<PathBuf>,
    /// The memcached binary.
    #[arg(long, default_value = "memcached")]
    pub memcached: PathBuf,
    /// The memcaslap binary; `none` skips it.
    #[arg(long, default_value = "memcaslap")]
    pub memcaslap: String,
    /// memtier_benchmark (scripts/memtier.sh builds it): run it too, against every server
    /// in every scenario (`--repeats` alternating runs), with the server's user and system
    /// CPU per request. Fails the comparison if it fails.
    #[arg(long, value_name = "PATH")]
    pub memtier: Option<PathBuf>,
    /// Only memtier: skip shoal-bench's own load in every scenario.
    #[arg(long, requires = "memtier")]
    pub memtier_only: bool,
    /// memtier run length (whole seconds).
    #[arg(long, default_value = "5s", value_parser = dur)]
    pub memtier_time: Duration,
    /// memtier connections per thread.
    #[arg(long, default_value_t = 16)]
    pub memtier_conns: usize,
    /// memtier threads.
    #[arg(long, default_value_t = 1)]
    pub memtier_threads: usize,
    /// memtier's keys (`--key-maximum`).
    #[arg(long, default_value_t = 100_000)]
    pub memtier_keys: u64,
    /// Also sample each server's user-space CPU with `perf record -e cpu-clock:u` (a
    /// steadier figure than /proc's tick-based user time; needs perf and the right to
    /// attach to the servers), in a second memtier run after each plain one, since
    /// perf's presence raises the server's system time.
    #[arg(long, requires = "memtier")]
    pub perf_user: bool,
    /// Runs per scenario and server.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Measured window per run.
    #[arg(short = 't', long, default_value = "5s", value_parser = dur)]
    pub duration: Duration,
    /// memcaslap run length.
    #[arg(long, default_value = "10s", value_parser = dur)]
    pub memcaslap_time: Duration,
    /// Pipeline depths, one scenario each.
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    pub depths: Vec<usize>,
    /// Connections.
    #[arg(short, long, default_value_t = 50)]
    pub conns: usize,
    /// Client threads.
    #[arg(short = 'T', long, default_value_t = 2)]
    pub threads: usize,
    /// Value sizes in bytes (k suffix allowed), one scenario per depth and size.
    #[arg(long, value_delimiter = ',', default_value = "100")]
    pub value_sizes: Vec<String>,
    /// Fraction of sets.
    #[arg(long, default_value_t = 0.1)]
    pub set_ratio: f64,
    /// Keys.
    #[arg(short, long, default_value_t = 10_000)]
    pub keys: u64,
    /// A shoald configuration to compare as well: NAME=FLAGS (flags space-separated),
    /// e.g. `io_uring=--io-uring`. Repeatable.
    #[arg(
        long = "variant",
        value_name = "NAME=FLAGS",
        allow_hyphen_values = true
    )]
    pub variants: Vec<String>,
    /// Also run every server rate-limited at these fractions of memcached's median
    /// throughput (e.g. `0.5,0.8,0.95`), to compare latency at equal offered load.
    #[arg(long, value_delimiter = ',')]
    pub equal_load: Vec<f64>,
    /// Flags given to every server (replacing `-t 2 -m 256`), space-separated.
    #[arg(long, allow_hyphen_values = true)]
    pub server_args: Option<String>,
    /// Skip the memory benchmark.
    #[arg(long)]
    pub no_memory: bool,
    /// Small and fast: 1 repeat of 1 s, memcaslap 2 s, 100k keys for memory.
    #[arg(long)]
    pub quick: bool,
    /// Write results.json and results.md here.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Runs the comparison and writes its report; an error names what could not be started
/// or measured.
pub fn run(a: CompareArgs) -> Result<()> {
    let shoald = match a.shoald {
        Some(p) => p,
        None => std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(|d| d.join("shoald")))
            .filter(|p| p.is_file())
            .or_else(|| which(Path::new("shoald")))
            .context(
                "shoald not found: build it (cargo build --release --bin shoald) or pass --shoald",
            )?,
    };
    let memcached = which(&a.memcached).with_context(|| {
        format!(
            "{} not found: apt-get install -y memcached",
            a.memcached.display()
        )
    })?;
    let mut cfg = CompareConfig::new(shoald, memcached);
    cfg.memcaslap = match a.memcaslap.as_str() {
        "none" => None,
        name => {
            let found = which(Path::new(name));
            if found.is_none() {
                eprintln!(
                    "memcaslap not found (apt-get install -y libmemcached-tools); skipping it"
                );
            }
            found
        }
    };
    if let Some(bin) = &a.memtier {
        let bin = which(bin).with_context(|| {
            format!(
                "{} not found: bash scripts/memtier.sh builds it",
                bin.display()
            )
        })?;
        let mut mt = MemtierConfig::new(bin);
        mt.secs = a.memtier_time.as_secs_f64().round().max(1.0) as u64;
        mt.conns = a.memtier_conns.max(1);
        mt.threads = a.memtier_threads.max(1);
        mt.key_maximum = a.memtier_keys;
        cfg.memtier = Some(mt);
        cfg.memtier_only = a.memtier_only;
        if a.perf_user {
            cfg.perf = Some(
                which(Path::new("perf"))
                    .context("perf not found (apt-get install -y linux-perf)")?,
            );
        }
    }
    cfg.repeats = a.repeats.max(1);
    cfg.value_sizes = a
        .value_sizes
        .iter()
        .map(|v| parse_size(v).with_context(|| format!("bad value size {v}")))
        .collect::<Result<_>>()?;
    cfg.set_ratio = a.set_ratio;
    cfg.keys = a.keys;
    cfg.equal_load = a.equal_load;
    for v in &a.variants {
        let (name, flags) = v
            .split_once('=')
            .with_context(|| format!("--variant {v}: expected NAME=FLAGS"))?;
        cfg.variants.push((
            name.to_string(),
            flags.split_whitespace().map(String::from).collect(),
        ));
    }
    if let Some(args) = &a.server_args {
        cfg.server_args = args.split_whitespace().map(String::from).collect();
    }
    cfg.duration_secs = a.duration.as_secs_f64();
    cfg.memcaslap_secs = a.memcaslap_time.as_secs().max(1);
    cfg.depths = a.depths;
    cfg.conns = a.conns;
    cfg.threads = a.threads;
    cfg.memory = !a.no_memory;
    if a.quick {
        cfg.repeats = 1;
        cfg.duration_secs = 1.0;
        cfg.warmup_secs = 0.2;
        cfg.memcaslap_secs = 2;
        if let Some(mt) = &mut cfg.memtier {
            mt.secs = 1;
        }
        cfg.memory_keys = 100_000;
    }
    let report = compare::run(&cfg)?;
    let md = report.markdown();
    println!("{md}");
    if let Some(dir) = a.out {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(
            dir.join("results.json"),
            serde_json::to_string_pretty(&report)?,
        )?;
        std::fs::write(dir.join("results.md"), md)?;
    }
    Ok(())
}
