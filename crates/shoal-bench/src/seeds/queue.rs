//! Seed 004: a durable queue under MemcacheQ's load: 256-byte messages, set-only,
//! get-only and mixed, 1 to 100 connections; bytes on disk per message and after
//! draining. shoal-queued speaks the memcache protocol (`set <q>` enqueues, `get <q>`
//! dequeues); redis is driven with LPUSH/RPOP and an append-only file (fsync every
//! second) so it has a disk footprint too.

use super::{note, Env, ServerKind};
use crate::chart::{self, Series};
use crate::load::{self, Latency, LoadConfig};
use crate::proto::Protocol;
use crate::report::num;
use crate::report::Experiment;
use crate::server::dir_bytes;
use crate::workload::ValueSize;
use crate::BenchError;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

/// One phase at one connection count.
#[derive(Clone, Debug, Serialize)]
pub struct QueueRow {
    /// Server.
    pub server: String,
    /// `set-only`, `get-only` or `mixed`.
    pub phase: String,
    /// Connections.
    pub conns: usize,
    /// Requests sent.
    pub requests: u64,
    /// Requests per second.
    pub ops_per_sec: f64,
    /// Latency.
    pub latency: Latency,
    /// Gets that returned a message.
    pub dequeued: u64,
    /// Gets that found the queue empty.
    pub empty: u64,
    /// Error replies.
    pub errors: u64,
    /// Bytes on disk (allocated) after the phase, if the data directory is known.
    pub disk_bytes: Option<u64>,
    /// Disk growth per message enqueued in this phase (set-only), if known.
    pub disk_bytes_per_message: Option<f64>,
}

/// Everything the `queue` experiment measured.
#[derive(Clone, Debug, Serialize)]
pub struct QueueReport {
    /// Message size.
    pub message_bytes: usize,
    /// Messages per phase.
    pub messages: u64,
    /// shoal-queued's fsync setting.
    pub fsync: String,
    /// The runs.
    pub rows: Vec<QueueRow>,
    /// What could not run, and why.
    pub skipped: Vec<String>,
}

/// Seed 004 (MemcacheQ 0.2.0, BerkeleyDB, `-N`): mean ops/s by connections for set-only
/// and get-only.
const SEED_SET: &[(usize, f64)] = &[
    (1, 2956.0),
    (5, 3646.0),
    (10, 3786.0),
    (20, 3370.0),
    (25, 3371.0),
    (40, 3350.0),
    (50, 3381.0),
];
const SEED_GET: &[(usize, f64)] = &[
    (1, 4695.0),
    (5, 9455.0),
    (10, 9106.0),
    (20, 8144.0),
    (25, 8009.0),
    (40, 7265.0),
    (50, 6955.0),
    (100, 9420.0),
];

/// Runs the experiment.
pub fn run(env: &Env) -> Result<QueueReport, BenchError> {
    let mut skipped = Vec::new();
    let levels: Vec<usize> = env.mode.pick(
        vec![1, 4],
        vec![1, 10, 100],
        vec![1, 5, 10, 20, 25, 40, 50, 100],
    );
    let messages: u64 = env.mode.pick(200, 20_000, 1_000_000);
    let settle = Duration::from_millis(env.mode.pick(200, 1000, 2000));
    let mut rows = Vec::new();
    for kind in [ServerKind::ShoalQueued, ServerKind::Redis] {
        let extra: &[&str] = if kind == ServerKind::Redis {
            &["--appendonly", "yes", "--appendfsync", "everysec"]
        } else {
            &[]
        };
        let Some(nodes) = env.nodes(kind, 1, extra, &mut skipped)? else {
            continue;
        };
        let dir = nodes.data_dir().map(Path::to_path_buf);
        let disk = || dir.as_deref().map(|d| dir_bytes(d).1);
        for &c in &levels {
            for phase in ["set-only", "get-only", "mixed"] {
                let before = disk();
                let mut cfg = LoadConfig::new(nodes.addrs[0]);
                cfg.protocol = if kind == ServerKind::Redis {
                    Protocol::RespList
                } else {
                    Protocol::Text
                };
                cfg.threads = env.threads.min(c);
                cfg.conns = c;
                cfg.keys = 1;
                cfg.key_prefix = "benchq".into();
                cfg.key_width = 0;
                cfg.value_size = ValueSize::fixed(256);
                cfg.set_ratio = match phase {
                    "set-only" => 1.0,
                    "get-only" => 0.0,
                    _ => 0.5,
                };
                cfg.requests = Some(messages);
                cfg.warmup = Duration::ZERO;
                cfg.prefill = false;
                let r = load::run(&cfg)?;
                if r.failed() {
                    return Err(BenchError::Protocol(format!(
                        "{} {phase} x{c}: {}",
                        kind.name(),
                        r.failures.join("; ")
                    )));
                }
                std::thread::sleep(if phase == "get-only" {
                    settle
                } else {
                    Duration::ZERO
                });
                let after = disk();
                let per_msg = match (before, after) {
                    (Some(b), Some(a)) if phase == "set-only" && r.measured.sets > 0 => {
                        Some((a as f64 - b as f64) / r.measured.sets as f64)
                    }
                    _ => None,
                };
                note(
                    "queue",
                    &format!(
                        "{} {phase} x{c}: {:.0} ops/s, disk {}",
                        kind.name(),
                        r.ops_per_sec,
                        after.map_or("?".into(), |b| format!("{b} B"))
                    ),
                );
                rows.push(QueueRow {
                    server: kind.name().into(),
                    phase: phase.into(),
                    conns: c,
                    requests: r.measured.ops(),
                    ops_per_sec: r.ops_per_sec,
                    latency: r.latency.clone(),
                    dequeued: r.measured.hits,
                    empty: r.measured.misses,
                    errors: r.measured.errors,
                    disk_bytes: after,
                    disk_bytes_per_message: per_msg,
                });
            }
        }
    }
    Ok(QueueReport {
        message_bytes: 256,
        messages,
        fsync: env.queue_fsync.clone(),
        rows,
        skipped,
    })
}

impl Experiment for QueueReport {
    fn title(&self) -> &'static str {
        "queue: durable queue throughput and disk use (seed 004)"
    }

    fn markdown(&self) -> String {
        let mut m = String::new();
        let _ = writeln!(
            m,
            "{} messages of {} bytes per phase, one queue; shoal-queued with `--fsync {}` (ms interval, or always/never), redis with LPUSH/RPOP and `appendfsync everysec`. Set-only enqueues, get-only drains what it enqueued, mixed is half of each. Disk is bytes allocated in the server's data directory after the phase (after a short settle for get-only).\n",
            self.messages, self.message_bytes, self.fsync
        );
        m.push_str("| server | phase | conns | ops/s | p50 µs | p99 µs | dequeued | empty gets | disk after | disk/message | seed 004 ops/s |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for r in &self.rows {
            let seed = match r.phase.as_str() {
                "set-only" => SEED_SET.iter().find(|s| s.0 == r.conns).map(|s| num(s.1)),
                "get-only" => SEED_GET.iter().find(|s| s.0 == r.conns).map(|s| num(s.1)),
                _ => None,
            }
            .unwrap_or_else(|| "-".into());
            let _ = writeln!(
                m,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.server,
                r.phase,
                r.conns,
                num(r.ops_per_sec),
                num(r.latency.p50_us),
                num(r.latency.p99_us),
                r.dequeued,
                r.empty,
                r.disk_bytes
                    .map_or("-".into(), |b| format!("{} KiB", num(b as f64 / 1024.0))),
                r.disk_bytes_per_message.map_or("-".into(), num),
                seed
            );
        }
        m.push_str("\nSeed 004 (MemcacheQ on BerkeleyDB): about 1.75 GB of disk per million 256-byte messages (~1,800 bytes/message), and the files did not shrink after every message was dequeued.\n");
        m
    }

    fn charts(&self, dir: &Path) -> Result<Vec<String>, BenchError> {
        if self.rows.is_empty() {
            return Ok(Vec::new());
        }
        let mut servers: Vec<&str> = self.rows.iter().map(|r| r.server.as_str()).collect();
        servers.dedup();
        let mut tput = Vec::new();
        let mut disk = Vec::new();
        for s in &servers {
            for phase in ["set-only", "get-only", "mixed"] {
                let rows: Vec<&QueueRow> = self
                    .rows
                    .iter()
                    .filter(|r| r.server == *s && r.phase == phase)
                    .collect();
                tput.push(Series::new(
                    format!("{s} {phase}"),
                    rows.iter()
                        .map(|r| (r.conns as f64, r.ops_per_sec))
                        .collect(),
                ));
                if phase != "mixed" {
                    let pts: Vec<(f64, f64)> = rows
                        .iter()
                        .filter_map(|r| {
                            r.disk_bytes
                                .map(|b| (r.conns as f64, b as f64 / 1_048_576.0))
                        })
                        .collect();
                    if !pts.is_empty() {
                        disk.push(Series::new(format!("{s} after {phase}"), pts));
                    }
                }
            }
        }
        let mut out = vec![chart::line_chart(
            dir,
            "queue_throughput.png",
            "queue: 256-byte messages, ops/s vs connections",
            "connections",
            "ops/s",
            &tput,
        )?];
        if !disk.is_empty() {
            out.push(chart::line_chart(
                dir,
                "queue_disk.png",
                "queue: bytes on disk after each phase",
                "connections",
                "MiB on disk",
                &disk,
            )?);
        }
        Ok(out)
    }

    fn skipped(&self) -> &[String] {
        &self.skipped
    }
}
