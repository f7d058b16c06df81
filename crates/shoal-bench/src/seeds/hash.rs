//! Seeds 000 and 002: client-side placement over three local nodes.
//!
//! - Seed 000 (XMemcached): native (Java `String.hashCode` modulo), ketama and election
//!   placement, binary vs text protocol, half the connections setting and half getting
//!   20-256-byte values, 1000 operations each, at 200 and 2000 connections.
//! - Seed 002 (libmemcached testapp): hash-function speed; generate_data (set every key),
//!   get_read (get them one by one) and mget_read (pipelined multi-gets) with
//!   one_at_a_time, MD5 and Hsieh over modulo, and Hsieh over consistent hashing.
//! - Keys moved when a fourth node joins, for every placement.

use super::conn::SyncConn;
use super::{note, Env, ServerKind};
use crate::chart::{self, Series};
use crate::load::{self, Latency, LoadConfig};
use crate::proto::Protocol;
use crate::report::num;
use crate::report::Experiment;
use crate::text;
use crate::workload::ValueSize;
use crate::BenchError;
use serde::Serialize;
use shoal_ring::{Distribution, HashAlgorithm, Ring, RingConfig, Server};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One placement x protocol x concurrency run (seed 000's table).
#[derive(Clone, Debug, Serialize)]
pub struct PlacementRun {
    /// `text` or `binary`.
    pub protocol: String,
    /// `native`, `ketama` or `election`.
    pub placement: String,
    /// Concurrent connections (the seed's threads).
    pub conns: usize,
    /// Requests sent in total.
    pub requests: u64,
    /// Time to complete them (the seed's 耗时), ms.
    pub elapsed_ms: f64,
    /// Requests per second.
    pub ops_per_sec: f64,
    /// Latency percentiles.
    pub latency: Latency,
    /// Error replies.
    pub errors: u64,
}

/// Speed of one key hash (seed 002's hash choice).
#[derive(Clone, Debug, Serialize)]
pub struct HashSpeed {
    /// Hash name.
    pub hash: String,
    /// Nanoseconds per 12-byte key.
    pub ns_per_key: f64,
}

/// One libmemcached-testapp-style row (seed 002).
#[derive(Clone, Debug, Serialize)]
pub struct TestappRow {
    /// e.g. `hsieh modula`.
    pub config: String,
    /// Keys.
    pub keys: u64,
    /// Seconds to set every key, one at a time.
    pub generate_secs: f64,
    /// Seconds to get every key, one at a time.
    pub get_read_secs: f64,
    /// Seconds to get every key by pipelined multi-gets of 100.
    pub mget_read_secs: f64,
    /// Keys the multi-gets found (should be all).
    pub mget_hits: u64,
    /// Nanoseconds per key to compute the placement alone.
    pub locate_ns: f64,
}

/// Keys that change server when a fourth node joins three.
#[derive(Clone, Debug, Serialize)]
pub struct Moved {
    /// Placement name.
    pub placement: String,
    /// Fraction of keys moved (0.25 is the minimum: a quarter must move to the new node).
    pub fraction: f64,
}

/// Everything the `hash` experiment measured.
#[derive(Clone, Debug, Serialize)]
pub struct HashReport {
    /// The nodes (`shoald` or `memcached`).
    pub nodes: String,
    /// Seed 000's runs.
    pub placement_runs: Vec<PlacementRun>,
    /// Hash speeds.
    pub hash_speed: Vec<HashSpeed>,
    /// Seed 002's runs.
    pub testapp: Vec<TestappRow>,
    /// Node addition.
    pub moved: Vec<Moved>,
    /// What could not run, and why.
    pub skipped: Vec<String>,
}

/// Seed 000's published times (ms), averaged over its three batches:
/// (protocol, placement, 200 conns, 2000 conns).
const SEED_000: &[(&str, &str, f64, f64)] = &[
    ("binary", "native", 1541.3, 127_832.3),
    ("binary", "ketama", 2041.3, 167_643.0),
    ("binary", "election", 2661.3, 235_854.0),
    ("text", "native", 1573.0, 137_899.3),
    ("text", "ketama", 2068.0, 171_488.0),
    ("text", "election", 2791.7, 239_859.7),
];

/// Seed 002's published seconds: (config, generate_data, get_read, mget_read).
const SEED_002: &[(&str, f64, f64, f64)] = &[
    ("one_at_a_time modula", 14.183, 11.144, 1.992),
    ("md5 modula", 14.634, 12.253, 1.953),
    ("hsieh modula", 14.188, 10.700, 1.831),
    ("hsieh consistent", 14.121, 10.655, 1.832),
];

fn servers(addrs: &[SocketAddr]) -> Vec<Server> {
    addrs
        .iter()
        .map(|a| Server::new(a.ip().to_string(), a.port()))
        .collect()
}

/// The seed-000 placements: XMemcached's array (native hash), ketama and election.
fn placements() -> Vec<(&'static str, RingConfig)> {
    vec![
        (
            "native",
            RingConfig::new(Distribution::Modula).with_hash(HashAlgorithm::JavaNative),
        ),
        ("ketama", RingConfig::new(Distribution::XmemcachedKetama)),
        (
            "election",
            RingConfig::new(Distribution::XmemcachedElection { weighted: true }),
        ),
    ]
}

fn ring_err(e: shoal_ring::RingError) -> BenchError {
    BenchError::Config(format!("ring: {e}"))
}

/// Runs the experiment.
pub fn run(env: &Env) -> Result<HashReport, BenchError> {
    let mut skipped = Vec::new();
    // Running servers given with --target win; then shoald, then memcached.
    let kind = if env.targets.contains_key(&ServerKind::Shoald) {
        ServerKind::Shoald
    } else if env.targets.contains_key(&ServerKind::Memcached) || !env.has(ServerKind::Shoald) {
        ServerKind::Memcached
    } else {
        ServerKind::Shoald
    };
    let mut report = HashReport {
        nodes: kind.name().into(),
        placement_runs: Vec::new(),
        hash_speed: hash_speed(env.mode.pick(20_000, 500_000, 2_000_000)),
        testapp: Vec::new(),
        moved: moved(env.mode.pick(10_000, 100_000, 1_000_000))?,
        skipped: Vec::new(),
    };
    let Some(nodes) = env.nodes(kind, 3, &["-m", "16"], &mut skipped)? else {
        report.skipped = skipped;
        return Ok(report);
    };
    // Seed 000: every connection does the same number of operations.
    let conns: Vec<usize> = env.mode.pick(vec![4, 20], vec![200, 2000], vec![200, 2000]);
    let per_conn: u64 = env.mode.pick(5, 20, 1000);
    for proto in [Protocol::Binary, Protocol::Text] {
        for (name, rc) in placements() {
            let ring = Arc::new(Ring::new(rc, servers(&nodes.addrs)).map_err(ring_err)?);
            for &c in &conns {
                let mut cfg = LoadConfig::new(nodes.addrs[0]);
                cfg.servers = nodes.addrs.clone();
                cfg.placement = Some(ring.clone());
                cfg.placement_name = Some(name.into());
                cfg.protocol = proto;
                cfg.threads = env.threads.min(c);
                cfg.conns = c;
                cfg.keys = env.mode.pick(1000, 10_000, 10_000);
                cfg.value_size = ValueSize { min: 20, max: 256 };
                cfg.set_ratio = 0.5;
                cfg.requests = Some(per_conn * c as u64);
                cfg.prefill = true;
                cfg.warmup = Duration::ZERO;
                let r = load::run(&cfg)?;
                if r.failed() {
                    return Err(BenchError::Protocol(format!(
                        "hash {name} {}: {}",
                        proto.name(),
                        r.failures.join("; ")
                    )));
                }
                note(
                    "hash",
                    &format!(
                        "{} {name} {c} conns: {:.0} ms, {:.0} ops/s",
                        proto.name(),
                        r.window_secs * 1000.0,
                        r.ops_per_sec
                    ),
                );
                report.placement_runs.push(PlacementRun {
                    protocol: proto.name().into(),
                    placement: name.into(),
                    conns: c,
                    requests: r.measured.ops(),
                    elapsed_ms: r.window_secs * 1000.0,
                    ops_per_sec: r.ops_per_sec,
                    latency: r.latency.clone(),
                    errors: r.measured.errors,
                });
            }
        }
    }
    // Seed 002.
    let keys = env.mode.pick(300, 20_000, 100_000);
    for (label, rc) in [
        (
            "one_at_a_time modula",
            RingConfig::new(Distribution::Modula).with_hash(HashAlgorithm::OneAtATime),
        ),
        (
            "md5 modula",
            RingConfig::new(Distribution::Modula).with_hash(HashAlgorithm::Md5),
        ),
        (
            "hsieh modula",
            RingConfig::new(Distribution::Modula).with_hash(HashAlgorithm::Hsieh),
        ),
        (
            "hsieh consistent",
            RingConfig::new(Distribution::LibmemcachedKetama { weighted: false })
                .with_hash(HashAlgorithm::Hsieh),
        ),
    ] {
        let ring = Ring::new(rc, servers(&nodes.addrs)).map_err(ring_err)?;
        let row = testapp(&nodes.addrs, &ring, label, keys)?;
        note(
            "hash",
            &format!(
                "{label}: generate {:.2}s get_read {:.2}s mget_read {:.2}s",
                row.generate_secs, row.get_read_secs, row.mget_read_secs
            ),
        );
        report.testapp.push(row);
    }
    report.skipped = skipped;
    Ok(report)
}

fn hash_speed(keys: u64) -> Vec<HashSpeed> {
    let mut buf = Vec::with_capacity(keys as usize * 12);
    for i in 0..keys {
        text::push_key(&mut buf, b"key:", i, 8);
    }
    let algos = [
        ("one_at_a_time", HashAlgorithm::OneAtATime),
        ("md5", HashAlgorithm::Md5),
        ("hsieh", HashAlgorithm::Hsieh),
        ("fnv1a", HashAlgorithm::Fnv1a_32),
        ("murmur3", HashAlgorithm::Murmur3),
        ("crc", HashAlgorithm::Crc),
        ("java native (String.hashCode)", HashAlgorithm::JavaNative),
    ];
    algos
        .iter()
        .map(|&(name, h)| {
            let t = Instant::now();
            let mut acc = 0u32;
            for k in buf.chunks_exact(12) {
                acc = acc.wrapping_add(h.hash(std::hint::black_box(k)));
            }
            std::hint::black_box(acc);
            HashSpeed {
                hash: name.into(),
                ns_per_key: t.elapsed().as_nanos() as f64 / keys.max(1) as f64,
            }
        })
        .collect()
}

fn moved(keys: u64) -> Result<Vec<Moved>, BenchError> {
    let three: Vec<Server> = (0..3)
        .map(|i| Server::new("127.0.0.1", 11211 + i))
        .collect();
    let mut key = Vec::new();
    let mut all = placements();
    all.push((
        "libmemcached ketama",
        RingConfig::new(Distribution::LibmemcachedKetama { weighted: true }),
    ));
    all.push(("jump", RingConfig::new(Distribution::Jump)));
    all.push(("maglev", RingConfig::new(Distribution::Maglev)));
    let mut out = Vec::new();
    for (name, rc) in all {
        let before = Ring::new(rc, three.clone()).map_err(ring_err)?;
        let after = before
            .with_added(Server::new("127.0.0.1", 11214))
            .map_err(ring_err)?;
        let mut n = 0u64;
        for i in 0..keys {
            key.clear();
            text::push_key(&mut key, b"key:", i, 8);
            let a = before.locate(&key).map_err(ring_err)?;
            let b = after.locate(&key).map_err(ring_err)?;
            n += u64::from(a != b);
        }
        out.push(Moved {
            placement: name.into(),
            fraction: n as f64 / keys.max(1) as f64,
        });
    }
    Ok(out)
}

/// libmemcached testapp's generate_data / get_read / mget_read over `ring`.
fn testapp(
    addrs: &[SocketAddr],
    ring: &Ring,
    label: &str,
    keys: u64,
) -> Result<TestappRow, BenchError> {
    let mut conns = addrs
        .iter()
        .map(|&a| SyncConn::open(a))
        .collect::<Result<Vec<_>, _>>()?;
    let prefix = format!("{}:", label.replace(' ', "_"));
    let value = vec![b'd'; 400];
    let mut key = Vec::new();
    let mut req = Vec::new();
    let where_of = |key: &[u8]| ring.locate(key).unwrap_or(0);
    let t = Instant::now();
    for i in 0..keys {
        key.clear();
        text::push_key(&mut key, prefix.as_bytes(), i, 8);
        req.clear();
        text::encode_set_key(&mut req, &key, &value);
        let c = &mut conns[where_of(&key)];
        c.send(&req)?;
        c.read(|b| text::parse_reply(b, text::Op::Set))?;
    }
    let generate_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    for i in 0..keys {
        key.clear();
        text::push_key(&mut key, prefix.as_bytes(), i, 8);
        req.clear();
        req.extend_from_slice(b"get ");
        req.extend_from_slice(&key);
        req.extend_from_slice(b"\r\n");
        let c = &mut conns[where_of(&key)];
        c.send(&req)?;
        c.read(|b| text::parse_reply(b, text::Op::Get))?;
    }
    let get_read_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut hits = 0;
    let mut i = 0;
    while i < keys {
        let n = 100.min(keys - i);
        let mut reqs: Vec<Vec<u8>> = vec![b"get".to_vec(); conns.len()];
        for k in i..i + n {
            key.clear();
            text::push_key(&mut key, prefix.as_bytes(), k, 8);
            let r = &mut reqs[where_of(&key)];
            r.push(b' ');
            r.extend_from_slice(&key);
        }
        // Send to every server first, then read: the servers work in parallel.
        for (c, r) in conns.iter_mut().zip(reqs.iter_mut()) {
            if r.len() > 3 {
                r.extend_from_slice(b"\r\n");
                c.send(r)?;
            }
        }
        for (c, r) in conns.iter_mut().zip(reqs.iter()) {
            if r.len() > 3 {
                hits += c.read(text::parse_multi_get)?;
            }
        }
        i += n;
    }
    let mget_read_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut acc = 0;
    for i in 0..keys {
        key.clear();
        text::push_key(&mut key, prefix.as_bytes(), i, 8);
        acc += where_of(std::hint::black_box(&key));
    }
    std::hint::black_box(acc);
    Ok(TestappRow {
        config: label.into(),
        keys,
        generate_secs,
        get_read_secs,
        mget_read_secs,
        mget_hits: hits,
        locate_ns: t.elapsed().as_nanos() as f64 / keys.max(1) as f64,
    })
}

impl Experiment for HashReport {
    fn title(&self) -> &'static str {
        "hash: placement, hash functions and node addition (seeds 000 and 002)"
    }

    fn markdown(&self) -> String {
        let mut m = String::new();
        let _ = writeln!(
            m,
            "Three local {} nodes (`-m 16`, as seed 000). Half the connections' requests are \
             sets of 20-256-byte values, half gets; every connection sends the same number.\n",
            self.nodes
        );
        if !self.placement_runs.is_empty() {
            m.push_str("| protocol | placement | conns | requests | time (ms) | ops/s | p50 µs | p99 µs | p99.9 µs | seed 000 time (ms) |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
            for r in &self.placement_runs {
                let seed = SEED_000
                    .iter()
                    .find(|s| s.0 == r.protocol && s.1 == r.placement)
                    .map(|s| if r.conns >= 2000 { s.3 } else { s.2 });
                let seed = match seed {
                    Some(v) if r.conns == 200 || r.conns == 2000 => num(v),
                    _ => "-".into(),
                };
                let _ = writeln!(
                    m,
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    r.protocol,
                    r.placement,
                    r.conns,
                    r.requests,
                    num(r.elapsed_ms),
                    num(r.ops_per_sec),
                    num(r.latency.p50_us),
                    num(r.latency.p99_us),
                    num(r.latency.p999_us),
                    seed
                );
            }
            m.push_str("\nSeed 000 ran 1000 operations per thread from a Java client on a 2011 machine over a LAN (200 threads = 200,000 operations); the seed column is its time for the same thread count.\n\n");
        }
        m.push_str("Hash speed (12-byte keys `key:%08d`, this machine, one thread):\n\n| hash | ns/key |\n|---|---:|\n");
        for h in &self.hash_speed {
            let _ = writeln!(m, "| {} | {} |", h.hash, num(h.ns_per_key));
        }
        if !self.testapp.is_empty() {
            m.push_str("\nlibmemcached testapp style (seed 002): one connection per node, 400-byte values; seconds.\n\n| config | keys | generate_data | get_read | mget_read | mget hits | locate ns/key | seed 002: generate / get_read / mget_read |\n|---|---:|---:|---:|---:|---:|---:|---|\n");
            for r in &self.testapp {
                let seed = SEED_002
                    .iter()
                    .find(|s| s.0 == r.config)
                    .map_or("-".into(), |s| format!("{} / {} / {}", s.1, s.2, s.3));
                let _ = writeln!(
                    m,
                    "| {} | {} | {:.3} | {:.3} | {:.3} | {} | {} | {} |",
                    r.config,
                    r.keys,
                    r.generate_secs,
                    r.get_read_secs,
                    r.mget_read_secs,
                    r.mget_hits,
                    num(r.locate_ns),
                    seed
                );
            }
            m.push_str("\nSeed 002's key count is not stated, so compare ratios between rows, not the seconds.\n");
        }
        m.push_str("\nKeys moved when a fourth node joins three (about 25% is the ideal: the new node takes its share and nothing else moves):\n\n| placement | keys moved |\n|---|---:|\n");
        for mv in &self.moved {
            let _ = writeln!(m, "| {} | {:.1}% |", mv.placement, mv.fraction * 100.0);
        }
        m
    }

    fn charts(&self, dir: &Path) -> Result<Vec<String>, BenchError> {
        let mut out = Vec::new();
        if !self.placement_runs.is_empty() {
            let mut tput = Vec::new();
            let mut p99 = Vec::new();
            for proto in ["binary", "text"] {
                for (name, _) in placements() {
                    let rows: Vec<&PlacementRun> = self
                        .placement_runs
                        .iter()
                        .filter(|r| r.protocol == proto && r.placement == name)
                        .collect();
                    tput.push(Series::new(
                        format!("{proto} {name}"),
                        rows.iter()
                            .map(|r| (r.conns as f64, r.ops_per_sec))
                            .collect(),
                    ));
                    p99.push(Series::new(
                        format!("{proto} {name} p99"),
                        rows.iter()
                            .map(|r| (r.conns as f64, r.latency.p99_us))
                            .collect(),
                    ));
                }
            }
            out.push(chart::line_chart(
                dir,
                "hash_throughput.png",
                "hash: throughput vs connections (3 nodes)",
                "connections",
                "ops/s",
                &tput,
            )?);
            out.push(chart::line_chart(
                dir,
                "hash_latency.png",
                "hash: p99 latency vs connections",
                "connections",
                "p99 latency (µs)",
                &p99,
            )?);
        }
        out.push(chart::bar_chart(
            dir,
            "hash_speed.png",
            "hash functions: ns per 12-byte key",
            "ns/key",
            &self
                .hash_speed
                .iter()
                .map(|h| {
                    (
                        h.hash.split(' ').next().unwrap_or("").to_string(),
                        h.ns_per_key,
                    )
                })
                .collect::<Vec<_>>(),
        )?);
        out.push(chart::bar_chart(
            dir,
            "hash_moved.png",
            "keys moved when a 4th node joins 3 (%)",
            "% keys moved",
            &self
                .moved
                .iter()
                .map(|m| (m.placement.clone(), m.fraction * 100.0))
                .collect::<Vec<_>>(),
        )?);
        Ok(out)
    }

    fn skipped(&self) -> &[String] {
        &self.skipped
    }
}
