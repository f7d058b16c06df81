//! `shoal-bench restart`: warm restart (`-e` memory file, SIGUSR1), exec-to-serving time
//! with the whole cache back, shoald beside memcached.

use crate::util::{command_line, parse_count, which, workspace_bin};
use anyhow::{Context, Result};
use std::path::PathBuf;

/// `restart`'s options.
#[derive(clap::Args)]
pub struct RestartArgs {
    /// Item counts (comma-separated; k/m suffixes).
    #[arg(long, default_value = "100k,1m,4m", value_delimiter = ',')]
    pub items: Vec<String>,
    /// Value size in bytes.
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// -m in MiB.
    #[arg(short, long, default_value_t = 1024)]
    pub memory_mb: usize,
    /// Restarts per server and size; the median is reported.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Where the memory files go (tmpfs).
    #[arg(long, default_value = "/dev/shm")]
    pub dir: PathBuf,
    /// shoald binary [default: beside this program, else on PATH].
    #[arg(long)]
    pub shoald: Option<PathBuf>,
    /// memcached binary (must support -e: 1.5.18 or later).
    #[arg(long, default_value = "memcached")]
    pub memcached: PathBuf,
    /// Write restart.md and restart.json here.
    #[arg(long, default_value = "bench/results/restart")]
    pub out: PathBuf,
}

/// Measures warm restarts at each item count and writes the report.
pub fn run(a: RestartArgs) -> Result<()> {
    use shoal_bench::restart::{self, Contender, RestartConfig};
    let shoald = workspace_bin(a.shoald, "shoald")?.context(
        "shoald not found: build it (cargo build --release --bin shoald) or pass --shoald",
    )?;
    let memcached = which(&a.memcached).with_context(|| {
        format!(
            "{} not found: apt-get install -y memcached",
            a.memcached.display()
        )
    })?;
    let items = a
        .items
        .iter()
        .map(|s| parse_count(s))
        .collect::<Result<Vec<u64>>>()?;
    let cfg = RestartConfig {
        items,
        value_size: a.value_size,
        memory_mb: a.memory_mb,
        repeats: a.repeats,
        dir: a.dir,
    };
    let results = restart::run(
        &cfg,
        &[
            Contender {
                name: "shoald",
                bin: &shoald,
            },
            Contender {
                name: "memcached",
                bin: &memcached,
            },
        ],
    )?;
    let table = restart::markdown(&results);
    std::fs::create_dir_all(&a.out)?;
    let md = format!(
        "# Warm restart: exec to serving, whole cache back\n\n`{}`\n\n{} B values, -m {}, -t 2, memory files in {}; median of {} restarts after a SIGUSR1 stop.\n\n{table}",
        command_line(),
        cfg.value_size,
        cfg.memory_mb,
        cfg.dir.display(),
        cfg.repeats
    );
    std::fs::write(a.out.join("restart.md"), &md)?;
    std::fs::write(
        a.out.join("restart.json"),
        serde_json::to_string_pretty(&results)?,
    )?;
    print!("{md}");
    Ok(())
}
