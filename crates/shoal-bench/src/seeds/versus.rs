//! Seed 003: shoald, memcached and redis side by side, one node and four (client-side
//! ketama), sets and gets of 1 KB, 10 KB and 100 KB values, from one client and from
//! 200 and 1000 concurrent connections.

use super::{note, Env, ServerKind};
use crate::chart::{self, Series};
use crate::load::{self, Latency, LoadConfig};
use crate::proto::Protocol;
use crate::report::num;
use crate::report::Experiment;
use crate::workload::ValueSize;
use crate::BenchError;
use serde::Serialize;
use shoal_ring::{Distribution, Ring, RingConfig, Server};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// One cell: server x nodes x size x op x concurrency.
#[derive(Clone, Debug, Serialize)]
pub struct VersusRow {
    /// Server.
    pub server: String,
    /// Nodes (1 or 4).
    pub nodes: usize,
    /// Value size in bytes.
    pub value_size: usize,
    /// `set` or `get`.
    pub op: String,
    /// Concurrent connections.
    pub conns: usize,
    /// Requests per second.
    pub ops_per_sec: f64,
    /// Latency.
    pub latency: Latency,
    /// Gets that found their key, as a fraction of gets.
    pub hit_rate: f64,
    /// Error replies.
    pub errors: u64,
    /// Why connections stopped early, if they did (e.g. a server refusing connections).
    pub failures: Vec<String>,
}

/// Everything the `compare` experiment measured.
#[derive(Clone, Debug, Serialize)]
pub struct VersusReport {
    /// The cells.
    pub rows: Vec<VersusRow>,
    /// How each cell ran (`requests` or seconds).
    pub run_length: String,
    /// What could not run, and why.
    pub skipped: Vec<String>,
}

/// Seed 003's published ops/s: (nodes, op, conns, size KB, memcached, redis, tair);
/// NaN where the seed timed out.
const SEED_003: &[(usize, &str, usize, usize, f64, f64, f64)] = &[
    (1, "set", 1, 1, 905.0, 1179.0, 634.0),
    (1, "set", 1, 10, 390.7, 451.0, 350.0),
    (1, "set", 1, 100, 406.0, 88.0, 271.0),
    (1, "get", 1, 1, 850.0, 1260.0, 285.0),
    (1, "get", 1, 10, 201.0, 452.0, 285.0),
    (1, "get", 1, 100, 393.0, 96.0, 230.0),
    (1, "set", 1000, 1, 9510.0, 10835.0, 8857.0),
    (1, "set", 1000, 10, 7500.0, 5651.0, 3940.0),
    (1, "set", 1000, 100, 3470.0, f64::NAN, 1890.0),
    (1, "get", 1000, 1, 10239.0, 11430.0, 9932.0),
    (1, "get", 1000, 10, 6758.0, 5392.0, 4392.0),
    (1, "get", 1000, 100, 3483.0, 983.0, 1012.0),
    (4, "set", 1, 1, 850.0, 979.0, 697.0),
    (4, "set", 1, 10, 472.0, 426.0, 363.0),
    (4, "set", 1, 100, 259.0, 178.0, 184.0),
    (4, "get", 1, 1, 840.0, 978.0, 701.0),
    (4, "get", 1, 10, 345.0, 590.0, 307.0),
    (4, "get", 1, 100, 385.0, 436.0, 283.0),
    (4, "set", 1000, 1, 25783.0, 28457.0, 17382.0),
    (4, "set", 1000, 10, 22893.0, 15279.0, 14890.0),
    (4, "set", 1000, 100, 19826.0, 2826.0, 4930.0),
    (4, "get", 1000, 1, 25783.0, 39991.0, 15432.0),
    (4, "get", 1000, 10, 20893.0, 18735.0, 13723.0),
    (4, "get", 1000, 100, 9676.0, 2794.0, 3214.0),
];

fn seed(
    nodes: usize,
    op: &str,
    conns: usize,
    size: usize,
) -> Option<&'static (usize, &'static str, usize, usize, f64, f64, f64)> {
    SEED_003
        .iter()
        .find(|s| s.0 == nodes && s.1 == op && s.2 == conns && s.3 * 1024 == size)
}

/// Runs the experiment.
pub fn run(env: &Env) -> Result<VersusReport, BenchError> {
    let mut skipped = Vec::new();
    let sizes: Vec<usize> = env.mode.pick(
        vec![1024, 10 * 1024],
        vec![1024, 10 * 1024, 100 * 1024],
        vec![1024, 10 * 1024, 100 * 1024],
    );
    let concurrency: Vec<usize> = env
        .mode
        .pick(vec![1, 8], vec![1, 200, 1000], vec![1, 200, 1000]);
    let topologies: Vec<usize> = vec![1, 4];
    // Like the seed, every cell is a request count: one client sends `one_client`
    // requests; N connections send `per_conn` each, capped at `budget` bytes of values.
    let one_client: u64 = env.mode.pick(200, 2000, 10_000);
    let per_conn: u64 = env.mode.pick(3, 10, 100);
    let budget: u64 = env.mode.pick(16, 256, 4096) << 20;
    let mut rows = Vec::new();
    for kind in [ServerKind::Shoald, ServerKind::Memcached, ServerKind::Redis] {
        for &n in &topologies {
            let Some(nodes) = env.nodes(kind, n, &[], &mut skipped)? else {
                break;
            };
            let servers: Vec<Server> = nodes
                .addrs
                .iter()
                .map(|a| Server::new(a.ip().to_string(), a.port()))
                .collect();
            let ring = Arc::new(
                Ring::new(
                    RingConfig::new(Distribution::LibmemcachedKetama { weighted: true }),
                    servers,
                )
                .map_err(|e| BenchError::Config(format!("ring: {e}")))?,
            );
            for &size in &sizes {
                // Keep each size's key set around 256 MiB at most.
                let keys = (256 * 1024 * 1024 / size as u64).min(10_000);
                for op in ["set", "get"] {
                    for &c in &concurrency {
                        let mut cfg = LoadConfig::new(nodes.addrs[0]);
                        cfg.servers = nodes.addrs.clone();
                        if n > 1 {
                            cfg.placement = Some(ring.clone());
                            cfg.placement_name = Some("ketama".into());
                        }
                        cfg.protocol = if kind == ServerKind::Redis {
                            Protocol::Resp
                        } else {
                            Protocol::Text
                        };
                        cfg.threads = env.threads.min(c);
                        cfg.conns = c;
                        cfg.keys = keys;
                        cfg.value_size = ValueSize::fixed(size);
                        cfg.set_ratio = if op == "set" { 1.0 } else { 0.0 };
                        cfg.prefill = op == "get" && c == concurrency[0];
                        cfg.warmup = Duration::ZERO;
                        cfg.requests = Some(if c == 1 {
                            one_client
                        } else {
                            (per_conn * c as u64)
                                .min(budget / size as u64)
                                .max(2 * c as u64)
                        });
                        let r = load::run(&cfg)?;
                        note(
                            "compare",
                            &format!(
                                "{} x{n} {op} {}B {c} conns: {:.0} ops/s p99 {:.0} us{}",
                                kind.name(),
                                size,
                                r.ops_per_sec,
                                r.latency.p99_us,
                                if r.failed() { " (stopped early)" } else { "" }
                            ),
                        );
                        rows.push(VersusRow {
                            server: kind.name().into(),
                            nodes: n,
                            value_size: size,
                            op: op.into(),
                            conns: c,
                            ops_per_sec: r.ops_per_sec,
                            latency: r.latency.clone(),
                            hit_rate: if r.measured.gets > 0 {
                                r.measured.hits as f64 / r.measured.gets as f64
                            } else {
                                0.0
                            },
                            errors: r.measured.errors,
                            failures: r.failures.clone(),
                        });
                    }
                }
            }
        }
    }
    Ok(VersusReport {
        rows,
        run_length: format!(
            "one client: {one_client} requests; N connections: {per_conn} requests each, \
             at most {} MiB of values per cell (at least 2 requests per connection)",
            budget >> 20
        ),
        skipped,
    })
}

impl Experiment for VersusReport {
    fn title(&self) -> &'static str {
        "compare: shoald, memcached and redis, one node and four (seed 003)"
    }

    fn markdown(&self) -> String {
        let mut m = String::new();
        let _ = writeln!(
            m,
            "Every server gets the same settings (1024 MiB, 2 threads where it has threads, 4096 connections). Four nodes are four processes on this machine with client-side ketama. Text protocol for shoald and memcached, RESP for redis. Run length: {}.\n",
            self.run_length
        );
        m.push_str("| server | nodes | value | op | conns | ops/s | p50 µs | p99 µs | p99.9 µs | hit rate | seed 003 ops/s (memcached / redis / tair) |\n|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---|\n");
        for r in &self.rows {
            let s = seed(r.nodes, &r.op, r.conns, r.value_size).map_or("-".into(), |s| {
                format!("{} / {} / {}", num(s.4), num(s.5), num(s.6))
            });
            let hit = if r.op == "get" {
                format!("{:.1}%", r.hit_rate * 100.0)
            } else {
                "-".into()
            };
            let mut ops = num(r.ops_per_sec);
            if !r.failures.is_empty() {
                ops.push_str(" (stopped early)");
            }
            let _ = writeln!(
                m,
                "| {} | {} | {} KB | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.server,
                r.nodes,
                r.value_size / 1024,
                r.op,
                r.conns,
                ops,
                num(r.latency.p50_us),
                num(r.latency.p99_us),
                num(r.latency.p999_us),
                hit,
                s
            );
        }
        m.push_str("\nThe seed's 1000-connection runs were 1000 client threads; its redis 100 KB set timed out (shown as -).\n");
        m
    }

    fn charts(&self, dir: &Path) -> Result<Vec<String>, BenchError> {
        let mut out = Vec::new();
        if self.rows.is_empty() {
            return Ok(out);
        }
        let mut servers: Vec<&str> = self.rows.iter().map(|r| r.server.as_str()).collect();
        servers.dedup();
        for op in ["set", "get"] {
            let mut tput = Vec::new();
            let mut p99 = Vec::new();
            for s in &servers {
                for nodes in [1, 4] {
                    let rows: Vec<&VersusRow> = self
                        .rows
                        .iter()
                        .filter(|r| {
                            r.server == *s && r.nodes == nodes && r.op == op && r.value_size == 1024
                        })
                        .collect();
                    if rows.is_empty() {
                        continue;
                    }
                    tput.push(Series::new(
                        format!("{s} x{nodes}"),
                        rows.iter()
                            .map(|r| (r.conns as f64, r.ops_per_sec))
                            .collect(),
                    ));
                    p99.push(Series::new(
                        format!("{s} x{nodes}"),
                        rows.iter()
                            .map(|r| (r.conns as f64, r.latency.p99_us))
                            .collect(),
                    ));
                }
            }
            out.push(chart::line_chart(
                dir,
                &format!("compare_{op}_throughput.png"),
                &format!("compare: 1 KB {op} ops/s vs connections"),
                "connections",
                "ops/s",
                &tput,
            )?);
            out.push(chart::line_chart(
                dir,
                &format!("compare_{op}_p99.png"),
                &format!("compare: 1 KB {op} p99 latency vs connections"),
                "connections",
                "p99 latency (µs)",
                &p99,
            )?);
        }
        // Percentiles side by side at the busiest 1 KB get cell on one node.
        let busiest = self.rows.iter().map(|r| r.conns).max().unwrap_or(1);
        let mut bars = Vec::new();
        for s in &servers {
            if let Some(r) = self.rows.iter().find(|r| {
                r.server == *s
                    && r.nodes == 1
                    && r.op == "get"
                    && r.value_size == 1024
                    && r.conns == busiest
            }) {
                bars.push((format!("{s} p50"), r.latency.p50_us / 1000.0));
                bars.push((format!("{s} p99"), r.latency.p99_us / 1000.0));
                bars.push((format!("{s} p99.9"), r.latency.p999_us / 1000.0));
            }
        }
        if !bars.is_empty() {
            out.push(chart::bar_chart(
                dir,
                "compare_latency_percentiles.png",
                &format!("compare: 1 KB get latency percentiles, 1 node, {busiest} conns"),
                "latency (ms)",
                &bars,
            )?);
        }
        Ok(out)
    }

    fn skipped(&self) -> &[String] {
        &self.skipped
    }
}
