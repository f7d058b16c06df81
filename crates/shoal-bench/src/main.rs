//! The `shoal-bench` command line.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use shoal_bench::compare::{self, CompareConfig};
use shoal_bench::fill::{self, FillConfig};
use shoal_bench::load::{self, LoadConfig, Refill};
use shoal_bench::parse_duration;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "shoal-bench",
    version,
    about = "Load generator and benchmarks for shoald and memcached"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Closed-loop get/set load against one server (memcached text protocol).
    Load(LoadArgs),
    /// Set keys 0..N once, pipelined, then count how many are still retrievable.
    Fill(FillArgs),
    /// shoald vs memcached: same flags, same loads, alternating, repeated; memcaslap;
    /// memory efficiency.
    CompareMemcached(CompareArgs),
}

#[derive(clap::Args)]
struct LoadArgs {
    /// Server address.
    #[arg(short, long, default_value = "127.0.0.1:11211")]
    server: String,
    /// Client threads.
    #[arg(short = 'T', long, default_value_t = 2)]
    threads: usize,
    /// Connections in total.
    #[arg(short, long, default_value_t = 50)]
    conns: usize,
    /// Requests in flight per connection.
    #[arg(short, long, default_value_t = 1)]
    depth: usize,
    /// Distinct keys (chosen uniformly).
    #[arg(short, long, default_value_t = 10_000)]
    keys: u64,
    /// Key prefix (keys are prefix + zero-padded index).
    #[arg(long, default_value = "key:")]
    key_prefix: String,
    /// Digits the key index is padded to.
    #[arg(long, default_value_t = 8)]
    key_width: usize,
    /// Value size in bytes.
    #[arg(short, long, default_value_t = 100)]
    value_size: usize,
    /// Fraction of sets, 0 to 1 (0.1 = 1 set : 9 gets).
    #[arg(long, default_value_t = 0.1)]
    set_ratio: f64,
    /// Measured window (5s, 500ms, 2m).
    #[arg(short = 't', long, default_value = "5s", value_parser = dur)]
    duration: Duration,
    /// Warm-up before the measured window.
    #[arg(short, long, default_value = "1s", value_parser = dur)]
    warmup: Duration,
    /// Do not set every key before starting.
    #[arg(long)]
    no_prefill: bool,
    /// Random seed.
    #[arg(long, default_value_t = 0x5eed)]
    seed: u64,
    /// Pipeline refill: batch (write depth, await all) or window (keep depth in flight).
    #[arg(long, value_enum, default_value_t = Refill::Batch)]
    refill: Refill,
    /// Write the report as JSON here (`-` for stdout, replacing the summary).
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(clap::Args)]
struct FillArgs {
    /// Server address.
    #[arg(short, long, default_value = "127.0.0.1:11211")]
    server: String,
    /// Keys to set.
    #[arg(short, long, default_value_t = 1_000_000)]
    keys: u64,
    /// Value size in bytes.
    #[arg(short, long, default_value_t = 100)]
    value_size: usize,
    /// Connections.
    #[arg(short, long, default_value_t = 2)]
    conns: usize,
    /// Sets per pipelined batch.
    #[arg(short, long, default_value_t = 100)]
    depth: usize,
    /// Also print the server's VmRSS (KiB) from /proc/PID/status.
    #[arg(long)]
    pid: Option<u32>,
}

#[derive(clap::Args)]
struct CompareArgs {
    /// The shoald binary (default: next to this program, else on PATH).
    #[arg(long)]
    shoald: Option<PathBuf>,
    /// The memcached binary.
    #[arg(long, default_value = "memcached")]
    memcached: PathBuf,
    /// The memcaslap binary; `none` skips it.
    #[arg(long, default_value = "memcaslap")]
    memcaslap: String,
    /// Runs per scenario and server.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Measured window per run.
    #[arg(short = 't', long, default_value = "5s", value_parser = dur)]
    duration: Duration,
    /// memcaslap run length.
    #[arg(long, default_value = "10s", value_parser = dur)]
    memcaslap_time: Duration,
    /// Pipeline depths, one scenario each.
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    depths: Vec<usize>,
    /// Connections.
    #[arg(short, long, default_value_t = 50)]
    conns: usize,
    /// Client threads.
    #[arg(short = 'T', long, default_value_t = 2)]
    threads: usize,
    /// Skip the memory benchmark.
    #[arg(long)]
    no_memory: bool,
    /// Small and fast: 1 repeat of 1 s, memcaslap 2 s, 100k keys for memory.
    #[arg(long)]
    quick: bool,
    /// Write results.json and results.md here.
    #[arg(long)]
    out: Option<PathBuf>,
}

fn dur(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

fn resolve(server: &str) -> Result<SocketAddr> {
    server
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {server}"))?
        .next()
        .with_context(|| format!("{server} has no address"))
}

/// `name` as given if it has a slash, else the first match on PATH.
fn which(name: &Path) -> Option<PathBuf> {
    if name.components().count() > 1 {
        return name.exists().then(|| name.to_path_buf());
    }
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    })
}

fn main() -> Result<()> {
    match Cli::parse().cmd {
        Cmd::Load(a) => cmd_load(a),
        Cmd::Fill(a) => cmd_fill(a),
        Cmd::CompareMemcached(a) => cmd_compare(a),
    }
}

fn cmd_load(a: LoadArgs) -> Result<()> {
    let cfg = LoadConfig {
        server: resolve(&a.server)?,
        threads: a.threads,
        conns: a.conns,
        depth: a.depth,
        keys: a.keys,
        key_prefix: a.key_prefix,
        key_width: a.key_width,
        value_size: a.value_size,
        set_ratio: a.set_ratio,
        duration: a.duration,
        warmup: a.warmup,
        prefill: !a.no_prefill,
        seed: a.seed,
        refill: a.refill,
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
    Ok(())
}

fn cmd_fill(a: FillArgs) -> Result<()> {
    let server = resolve(&a.server)?;
    let f = fill::fill(&FillConfig {
        server,
        keys: a.keys,
        key_prefix: "key:".into(),
        key_width: 8,
        value_size: a.value_size,
        conns: a.conns,
        depth: a.depth,
    })?;
    let present = fill::count_present(server, a.keys, "key:", 8, 100)?;
    println!(
        "sets {} stored {} errors {} in {:.2}s; retrievable {present}",
        f.sets, f.stored, f.errors, f.secs
    );
    if let Some(pid) = a.pid {
        println!("VmRSS {} KiB", shoal_bench::server::rss_kib(pid)?);
    }
    Ok(())
}

fn cmd_compare(a: CompareArgs) -> Result<()> {
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
    cfg.repeats = a.repeats.max(1);
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
