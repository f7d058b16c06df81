//! `shoal-bench fill`: set keys 0..N once, pipelined, then count how many are still
//! retrievable.

use crate::util::resolve;
use anyhow::Result;
use shoal_bench::fill::{self, FillConfig};

/// `fill`'s options.
#[derive(clap::Args)]
pub struct FillArgs {
    /// Server address.
    #[arg(short, long, default_value = "127.0.0.1:11211")]
    pub server: String,
    /// Keys to set.
    #[arg(short, long, default_value_t = 1_000_000)]
    pub keys: u64,
    /// Value size in bytes.
    #[arg(short, long, default_value_t = 100)]
    pub value_size: usize,
    /// Connections.
    #[arg(short, long, default_value_t = 2)]
    pub conns: usize,
    /// Sets per pipelined batch.
    #[arg(short, long, default_value_t = 100)]
    pub depth: usize,
    /// Also print the server's VmRSS (KiB) from /proc/PID/status.
    #[arg(long)]
    pub pid: Option<u32>,
}

/// Fills the server and prints how many keys are still retrievable.
pub fn run(a: FillArgs) -> Result<()> {
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
