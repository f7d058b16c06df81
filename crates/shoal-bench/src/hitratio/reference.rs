//! Reference hit ratios from libCacheSim's simulators (LRU, S3-FIFO, SIEVE, Belady), run
//! by `bench/hitratio/reference.py` in a Python virtual environment over the same trace
//! written as oracleGeneral. A benchmark-time tool only: nothing in Shoal runs Python.

use crate::BenchError;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::process::Command;

/// Bytes a shoald item takes beyond its key and value (its fixed header; sizes round up
/// to 4): S3-FIFO also runs with it added to every object, as `S3FIFO+hdr`, to compare
/// policy and server at the same bytes of memory.
pub const SHOALD_ITEM_OVERHEAD: u32 = 12;

/// One simulated policy at one cache size.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RefPoint {
    /// The policy (`LRU`, `S3FIFO`, `Sieve`, `Belady`, and `S3FIFO+hdr`: S3-FIFO with
    /// objects as large as shoald's items).
    pub algorithm: String,
    /// The cache size in MiB (bytes of key + value).
    pub memory_mb: u64,
    /// Share of counted reads that hit.
    pub hit_ratio: f64,
    /// Share of counted bytes that hit.
    pub byte_hit_ratio: f64,
}

/// Runs `script` with `python` over the oracleGeneral trace at `trace`, for every size
/// in `memory_mb`, counting after `warmup` requests.
pub fn simulate(
    python: &Path,
    script: &Path,
    trace: &Path,
    memory_mb: &[u64],
    warmup: u64,
) -> Result<Vec<RefPoint>, BenchError> {
    let sizes: Vec<String> = memory_mb.iter().map(u64::to_string).collect();
    let out = Command::new(python)
        .arg(script)
        .arg(trace)
        .args(["--sizes-mb", &sizes.join(",")])
        .args(["--warmup", &warmup.to_string()])
        .args(["--item-overhead", &SHOALD_ITEM_OVERHEAD.to_string()])
        .output()
        .map_err(|e| BenchError::io(format!("run {}", python.display()), e))?;
    if !out.status.success() {
        return Err(BenchError::Config(format!(
            "{} failed: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    serde_json::from_slice(&out.stdout)
        .map_err(|e| BenchError::Protocol(format!("reference output: {e}")))
}
