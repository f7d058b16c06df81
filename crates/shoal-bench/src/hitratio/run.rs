//! One measurement: a fresh server of a given kind and memory, one trace replayed into
//! it, its hit ratios and its eviction counters.

use super::replay::{replay, ReplayConfig, ReplayResult, Wire};
use super::Request;
use crate::server::{stats, stats_group, ServerProcess};
use crate::BenchError;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Which kind of server a contender is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ServerKind {
    /// shoald (`-m MB -t N`).
    Shoald,
    /// memcached (`-m MB -t N`).
    Memcached,
    /// redis-server (`maxmemory MB`, `allkeys-lru`).
    Redis,
}

/// A server to measure: what it is, which binary, any extra arguments.
#[derive(Clone, Debug, Serialize)]
pub struct Contender {
    /// Its name in reports (`shoald`, `memcached 1.6.45`, ...).
    pub label: String,
    /// Its kind.
    pub kind: ServerKind,
    /// The binary.
    pub bin: PathBuf,
    /// Arguments added to the memory and thread options.
    pub args: Vec<String>,
}

/// One contender at one memory size on one trace.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    /// The contender's label.
    pub contender: String,
    /// Its memory limit in MiB.
    pub memory_mb: u64,
    /// What the replay counted.
    pub result: ReplayResult,
    /// The server's eviction and item counters at the end (memcached's `stats` names).
    pub stats: BTreeMap<String, u64>,
    /// Its resident memory at the end, KiB.
    pub rss_kib: u64,
    /// Bytes it wrote to storage during the run (a flash tier's writes; 0 without one).
    #[serde(default)]
    pub disk_write_bytes: u64,
}

/// The `stats` counters worth keeping beside a hit ratio, as numbers.
fn numeric(stats: std::collections::HashMap<String, String>) -> BTreeMap<String, u64> {
    stats
        .into_iter()
        .filter(|(k, _)| kept(k))
        .filter_map(|(k, v)| v.parse::<u64>().ok().map(|v| (k, v)))
        .collect()
}

/// `stats` counters worth keeping beside a hit ratio.
fn kept(name: &str) -> bool {
    name.starts_with("evict")
        || name.starts_with("extstore_")
        || name.ends_with("_extstore")
        || name.starts_with("retain")
        || name.starts_with("ghost")
        || name.starts_with("segments_")
        || name.starts_with("promot")
        || matches!(
            name,
            "curr_items"
                | "total_items"
                | "bytes"
                | "limit_maxbytes"
                | "expired_unfetched"
                | "reclaimed"
                | "get_hits"
                | "get_misses"
                | "bytes_read"
                | "get_expired"
                | "slab_reassign_busy_items"
                | "slabs_moved"
                | "evicted_time"
        )
}

impl Contender {
    /// Starts this contender with `memory_mb` of item memory and `threads` threads.
    pub fn start(&self, memory_mb: u64, threads: usize) -> Result<ServerProcess, BenchError> {
        let mut args: Vec<String> = Vec::new();
        let server = match self.kind {
            ServerKind::Shoald => {
                args.extend(["-m".into(), memory_mb.to_string()]);
                args.extend(["-t".into(), threads.to_string()]);
                args.extend(self.args.iter().cloned());
                ServerProcess::start_shoald(&self.bin, &args)?
            }
            ServerKind::Memcached => {
                args.extend(["-m".into(), memory_mb.to_string()]);
                args.extend(["-t".into(), threads.to_string()]);
                args.extend(self.args.iter().cloned());
                ServerProcess::start_memcached(&self.bin, &args)?
            }
            ServerKind::Redis => {
                args.extend(["--maxmemory".into(), format!("{memory_mb}mb")]);
                args.extend(["--maxmemory-policy".into(), "allkeys-lru".into()]);
                args.extend(self.args.iter().cloned());
                ServerProcess::start_redis(&self.bin, &args)?
            }
        };
        Ok(server)
    }

    /// The wire protocol it speaks.
    pub fn wire(&self) -> Wire {
        match self.kind {
            ServerKind::Redis => Wire::Redis,
            _ => Wire::Memcache,
        }
    }
}

/// How every point of a run replays.
#[derive(Clone, Debug)]
pub struct PointConfig {
    /// Server threads.
    pub threads: usize,
    /// Requests per pipelined window.
    pub window: usize,
    /// Requests before hits count.
    pub warmup: u64,
    /// Pace, requests per second.
    pub rate: Option<f64>,
    /// Timeline interval, requests.
    pub interval: u64,
}

/// Starts `c` fresh with `memory_mb`, replays `trace` into it, reads its counters and
/// stops it.
pub fn measure(
    c: &Contender,
    memory_mb: u64,
    cfg: &PointConfig,
    trace: impl IntoIterator<Item = Result<Request, BenchError>>,
    progress: impl FnMut(u64),
) -> Result<Point, BenchError> {
    let server = c.start(memory_mb, cfg.threads)?;
    let result = replay(
        &ReplayConfig {
            server: server.addr,
            wire: c.wire(),
            window: cfg.window,
            warmup: cfg.warmup,
            rate: cfg.rate,
            interval: cfg.interval,
        },
        trace,
        progress,
    )?;
    let stats = match c.kind {
        ServerKind::Redis => BTreeMap::new(),
        ServerKind::Memcached => numeric(stats(server.addr)?),
        // shoald's own eviction counters (promoted, retained, ghost hits) say where its
        // misses come from; they are a `stats` group of their own.
        ServerKind::Shoald => {
            let mut all = numeric(stats(server.addr)?);
            all.extend(numeric(stats_group(server.addr, "eviction")?));
            all
        }
    };
    let rss_kib = server.rss_kib().unwrap_or(0);
    let disk_write_bytes = server.disk_write_bytes().unwrap_or(0);
    Ok(Point {
        contender: c.label.clone(),
        memory_mb,
        result,
        stats,
        rss_kib,
        disk_write_bytes,
    })
}
