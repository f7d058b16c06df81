//! `shoal-bench soak`: memory under abuse, judged against `-m` plus an overhead
//! allowance.

use crate::util::{command_line, dur, which, workspace_bin};
use anyhow::{Context, Result};
use shoal_bench::seeds::ServerKind;
use shoal_bench::soak::{self, SoakConfig};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `soak`'s options.
#[derive(clap::Args)]
pub struct SoakArgs {
    /// The server to start: shoald, memcached or shoal-queued.
    #[arg(long, value_parser = ["shoald", "memcached", "shoal-queued"])]
    pub server: String,
    /// Its binary (default: shoald and shoal-queued next to this program, else on PATH;
    /// memcached on PATH).
    #[arg(long)]
    pub bin: Option<PathBuf>,
    /// How long the load runs (600s, 10m, 5s).
    #[arg(short = 't', long, default_value = "600s", value_parser = dur)]
    pub duration: Duration,
    /// The start of the run that is not judged, while memory fills [default: a fifth of
    /// --duration, at most 60s].
    #[arg(short, long, value_parser = dur)]
    pub warmup: Option<Duration>,
    /// The server's memory limit, MiB: -m for shoald and memcached; for shoal-queued,
    /// split over its queues as --queue-memory.
    #[arg(short, long, default_value_t = 64)]
    pub memory_mb: u64,
    /// Connections in total (churners and slow readers).
    #[arg(short, long, default_value_t = 100)]
    pub conns: usize,
    /// Fraction of the connections that are slow readers.
    #[arg(long, default_value_t = 0.1)]
    pub slow_readers: f64,
    /// The verdict's fixed allowance above --memory-mb, MiB (code, hash table, thread
    /// stacks, allocator slack).
    #[arg(long, default_value_t = 64.0)]
    pub overhead_mb: f64,
    /// The verdict's allowance per 100 connections, MiB (their buffers).
    #[arg(long, default_value_t = 2.0)]
    pub overhead_per_100_conns_mb: f64,
    /// Value sizes, drawn log-uniformly from this range (k/m suffixes).
    #[arg(long, default_value = "10-500k")]
    pub value_size: String,
    /// Key space as a multiple of memory (keys x mean value size = this x -m).
    #[arg(long, default_value_t = 4.0)]
    pub key_space: f64,
    /// Fraction of churners' requests that are sets [default: 0.3; 0.5 for shoal-queued,
    /// so dequeues keep up with enqueues].
    #[arg(long)]
    pub set_ratio: Option<f64>,
    /// Keys in each slow reader's multi-get.
    #[arg(long, default_value_t = 100)]
    pub multiget_keys: usize,
    /// KiB a slow reader reads per 100 ms.
    #[arg(long, default_value_t = 4)]
    pub slow_read_kb: usize,
    /// Client threads.
    #[arg(short = 'T', long, default_value_t = 2)]
    pub threads: usize,
    /// Server worker threads (-t).
    #[arg(long, default_value_t = 2)]
    pub server_threads: usize,
    /// shoal-queued's --fsync (always, never, or an interval in ms).
    #[arg(long, default_value = "5")]
    pub queue_fsync: String,
    /// Random seed.
    #[arg(long, default_value_t = 0x50a6)]
    pub seed: u64,
    /// Write soak-SERVER.png, .json and .md here.
    #[arg(long, default_value = "bench/results/soak")]
    pub out: PathBuf,
    /// Further flags for the server, space-separated (e.g. "--io-uring"); they also
    /// name the result files (soak-shoald-io-uring.png).
    #[arg(long, allow_hyphen_values = true)]
    pub server_args: Option<String>,
}

/// Runs the soak, writes its chart, JSON and markdown, and fails on a FAIL verdict.
pub fn run(a: SoakArgs) -> Result<()> {
    let kind = ServerKind::from_name(&a.server)
        .with_context(|| format!("--server {:?}: shoald, memcached or shoal-queued", a.server))?;
    let bin = match kind {
        ServerKind::Memcached => which(a.bin.as_deref().unwrap_or(Path::new("memcached"))),
        _ => workspace_bin(a.bin, kind.name())?,
    }
    .with_context(|| format!("{} not found; {}", kind.name(), kind.provider()))?;
    let mut cfg = SoakConfig::new(kind, bin);
    cfg.duration = a.duration;
    cfg.warmup = a
        .warmup
        .unwrap_or_else(|| SoakConfig::auto_warmup(a.duration));
    cfg.memory_mb = a.memory_mb;
    cfg.conns = a.conns;
    cfg.slow_readers = a.slow_readers;
    cfg.overhead_mb = a.overhead_mb;
    cfg.overhead_per_100_conns_mb = a.overhead_per_100_conns_mb;
    cfg.value_size = a.value_size.parse()?;
    cfg.key_space = a.key_space;
    if let Some(r) = a.set_ratio {
        cfg.set_ratio = r;
    }
    cfg.multiget_keys = a.multiget_keys;
    cfg.slow_read_bytes = a
        .slow_read_kb
        .checked_mul(1024)
        .context("--slow-read-kb is too large")?;
    cfg.threads = a.threads;
    cfg.server_threads = a.server_threads;
    cfg.queue_fsync = a.queue_fsync;
    cfg.seed = a.seed;
    cfg.extra_args = a
        .server_args
        .as_deref()
        .unwrap_or_default()
        .split_whitespace()
        .map(String::from)
        .collect();
    cfg.validate()?;
    eprintln!(
        "soak: {} for {:.0}s, warm-up {:.0}s; budget {}",
        kind.name(),
        cfg.duration.as_secs_f64(),
        cfg.warmup.as_secs_f64(),
        cfg.budget_line()
    );
    let mut report = soak::run(&cfg).context("soak run failed")?;
    report.command = command_line();
    let files = report
        .write(&a.out)
        .with_context(|| format!("writing results to {}", a.out.display()))?;
    println!("{}", report.markdown());
    for f in files {
        eprintln!("wrote {}", f.display());
    }
    if !report.pass {
        anyhow::bail!("soak failed: {}", report.reasons.join("; "));
    }
    Ok(())
}
