//! `shoal-bench compare-memcached`: shoald and Debian's memcached side by side, started
//! with the same flags, under the same loads, alternating, repeated; then memcaslap
//! against each for an independent number; memtier_benchmark, if asked, against every
//! server in every scenario, with the server's user and system CPU per request; then the
//! memory-efficiency benchmark.

use crate::fill::{self, FillConfig};
use crate::load::{self, LoadConfig, LoadReport};
use crate::memtier::{MemtierConfig, MemtierSummary};
use crate::server::{self, ServerProcess};
use crate::user_sampler::UserSampler;
use crate::BenchError;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// What to compare and how hard.
#[derive(Clone, Debug, Serialize)]
pub struct CompareConfig {
    /// The shoald binary.
    pub shoald: PathBuf,
    /// The memcached binary.
    pub memcached: PathBuf,
    /// memcaslap, if it is to be run.
    pub memcaslap: Option<PathBuf>,
    /// memtier_benchmark and its load, if it is to be run (every scenario, every server,
    /// `repeats` alternating runs).
    pub memtier: Option<MemtierConfig>,
    /// Only memtier: skip this program's own load (and its prefill and equal-load runs).
    pub memtier_only: bool,
    /// `perf`, to sample each server's user-space CPU over every memtier run as well
    /// ([`crate::user_sampler`]).
    pub perf: Option<PathBuf>,
    /// Flags given to both servers for the throughput runs.
    pub server_args: Vec<String>,
    /// Runs per scenario and server.
    pub repeats: usize,
    /// Client threads.
    pub threads: usize,
    /// Connections.
    pub conns: usize,
    /// Pipeline depths, one scenario each.
    pub depths: Vec<usize>,
    /// Keys.
    pub keys: u64,
    /// Value sizes in bytes, one scenario per depth and size.
    pub value_sizes: Vec<usize>,
    /// shoald configurations compared besides plain shoald: a name and the extra flags
    /// (for example `io_uring` with `--io-uring`).
    pub variants: Vec<(String, Vec<String>)>,
    /// Fractions of memcached's median saturation throughput at which every server is
    /// also run rate-limited, to compare latency at equal offered load (empty: none).
    pub equal_load: Vec<f64>,
    /// Fraction of sets.
    pub set_ratio: f64,
    /// Measured window per run, seconds.
    pub duration_secs: f64,
    /// Warm-up per run, seconds.
    pub warmup_secs: f64,
    /// memcaslap run length, seconds.
    pub memcaslap_secs: u64,
    /// Run the memory benchmark.
    pub memory: bool,
    /// Flags for the memory benchmark's servers.
    pub memory_args: Vec<String>,
    /// Keys set by the memory benchmark.
    pub memory_keys: u64,
}

impl CompareConfig {
    /// The defaults: `-t 2 -m 256`, 50 connections, depths 1 and 16, 90% gets, 100-byte
    /// values, 10k keys, 3 repeats of 5 s; memory at `-m 64 -t 2` with 1M keys.
    pub fn new(shoald: PathBuf, memcached: PathBuf) -> Self {
        CompareConfig {
            shoald,
            memcached,
            memcaslap: None,
            memtier: None,
            memtier_only: false,
            perf: None,
            server_args: ["-t", "2", "-m", "256"].map(String::from).to_vec(),
            repeats: 3,
            threads: 2,
            conns: 50,
            depths: vec![1, 16],
            keys: 10_000,
            value_sizes: vec![100],
            variants: Vec::new(),
            equal_load: Vec::new(),
            set_ratio: 0.1,
            duration_secs: 5.0,
            warmup_secs: 1.0,
            memcaslap_secs: 10,
            memory: true,
            memory_args: ["-t", "2", "-m", "64"].map(String::from).to_vec(),
            memory_keys: 1_000_000,
        }
    }
}

/// One server's runs of one scenario.
#[derive(Clone, Debug, Serialize)]
pub struct ServerRuns {
    /// `memcached`, `shoald` or `shoald <variant>`.
    pub server: String,
    /// ops/s of each run.
    pub ops_per_sec: Vec<f64>,
    /// The server's CPU time (user + system, all threads) per request of each run, in
    /// microseconds.
    pub cpu_us_per_request: Vec<f64>,
    /// Median CPU time per request (us).
    pub median_cpu_us_per_request: f64,
    /// Lowest and highest ops/s of the runs (the spread).
    pub ops_range: (f64, f64),
    /// p99 (us) of each run.
    pub p99_us: Vec<f64>,
    /// Median ops/s.
    pub median_ops_per_sec: f64,
    /// Median p99 (us).
    pub median_p99_us: f64,
    /// Median p50 (us).
    pub median_p50_us: f64,
    /// Median p99.9 (us).
    pub median_p999_us: f64,
    /// Every run's full report.
    pub runs: Vec<LoadReport>,
}

/// One scenario: every server under the same load.
#[derive(Clone, Debug, Serialize)]
pub struct Scenario {
    /// A label, e.g. `50 conns, depth 1, 100 B`.
    pub name: String,
    /// Pipeline depth.
    pub depth: usize,
    /// Value size in bytes.
    pub value_size: usize,
    /// memcached's runs.
    pub memcached: ServerRuns,
    /// shoald's runs, then each variant's.
    pub shoald: Vec<ServerRuns>,
    /// Each shoald's median ops/s over memcached's.
    pub ratio: Vec<f64>,
    /// Each shoald's median CPU per request over memcached's.
    pub cpu_ratio: Vec<f64>,
    /// Latency at equal offered load, if asked for.
    pub equal_load: Vec<EqualLoad>,
}

/// Every server at one offered load (a fraction of memcached's saturation throughput).
#[derive(Clone, Debug, Serialize)]
pub struct EqualLoad {
    /// The fraction of memcached's median saturation throughput.
    pub fraction: f64,
    /// The offered load, requests per second.
    pub rate: f64,
    /// Per server (memcached first): name, achieved ops/s, p50, p99 and p99.9 (us).
    pub servers: Vec<(String, f64, f64, f64, f64)>,
}

/// memcaslap's TPS for both servers.
#[derive(Clone, Debug, Serialize)]
pub struct MemcaslapResult {
    /// The command line, with `ADDR` for the server.
    pub command: String,
    /// memcached's TPS per run.
    pub memcached_tps: Vec<f64>,
    /// shoald's TPS per run.
    pub shoald_tps: Vec<f64>,
    /// Median memcached TPS.
    pub memcached_median: f64,
    /// Median shoald TPS.
    pub shoald_median: f64,
    /// shoald over memcached.
    pub ratio: f64,
}

/// The memory benchmark for one server.
#[derive(Clone, Debug, Serialize)]
pub struct MemoryResult {
    /// `shoald` or `memcached`.
    pub server: String,
    /// Sets sent.
    pub sets: u64,
    /// Sets answered `STORED`.
    pub stored: u64,
    /// Keys still returned by multi-get afterwards.
    pub retrievable: u64,
    /// `curr_items` from `stats`.
    pub curr_items: u64,
    /// `evictions` from `stats`.
    pub evictions: u64,
    /// VmRSS after the fill, KiB.
    pub rss_kib: u64,
    /// Seconds the fill took.
    pub fill_secs: f64,
}

/// One server's memtier runs of one scenario.
#[derive(Clone, Debug, Serialize)]
pub struct MemtierRuns {
    /// `memcached`, `shoald` or `shoald <variant>`.
    pub server: String,
    /// ops/s of each run (requests over the run length).
    pub ops_per_sec: Vec<f64>,
    /// The server's CPU time (user + system, every thread) per request of each run, us.
    pub cpu_us_per_request: Vec<f64>,
    /// The server's user-space CPU time per request of each run, us.
    pub user_us_per_request: Vec<f64>,
    /// The server's kernel CPU time per request of each run, us.
    pub system_us_per_request: Vec<f64>,
    /// Median ops/s.
    pub median_ops_per_sec: f64,
    /// Lowest and highest ops/s (the spread).
    pub ops_range: (f64, f64),
    /// Median CPU per request, us.
    pub median_cpu_us_per_request: f64,
    /// Lowest and highest CPU per request, us.
    pub cpu_range: (f64, f64),
    /// Median user CPU per request, us.
    pub median_user_us_per_request: f64,
    /// Median system CPU per request, us.
    pub median_system_us_per_request: f64,
    /// The server's user-space CPU per request of each run as `perf` sampled it, us
    /// (empty unless asked for).
    pub sampled_user_us_per_request: Vec<f64>,
    /// Their median.
    pub median_sampled_user_us_per_request: Option<f64>,
    /// Median fraction of gets that hit.
    pub median_get_hit_ratio: f64,
    /// Median p50 latency (us), as memtier measured it.
    pub median_p50_us: f64,
    /// Median p99 latency (us).
    pub median_p99_us: f64,
    /// Every run's summary.
    pub runs: Vec<MemtierSummary>,
}

impl MemtierRuns {
    /// Summarises `runs` with the server CPU time each took and, when sampled, the
    /// user-space microseconds per request `perf` counted in runs of their own
    /// (`sampled_user`: empty, or one per sampled run).
    pub fn new(
        server: &str,
        runs: Vec<MemtierSummary>,
        cpu: &[server::CpuTimes],
        sampled_user: Vec<f64>,
    ) -> Self {
        let per_request = |f: &dyn Fn(&server::CpuTimes) -> f64| -> Vec<f64> {
            runs.iter()
                .zip(cpu)
                .map(|(r, c)| f(c) * 1e6 / r.requests.max(1) as f64)
                .collect()
        };
        let cpu_us = per_request(&|c| c.total_secs());
        let user = per_request(&|c| c.user_secs);
        let system = per_request(&|c| c.system_secs);
        let ops: Vec<f64> = runs.iter().map(|r| r.ops_per_sec).collect();
        let of = |f: &dyn Fn(&MemtierSummary) -> f64| -> Vec<f64> { runs.iter().map(f).collect() };
        MemtierRuns {
            server: server.into(),
            median_ops_per_sec: median(&ops),
            ops_range: range(&ops),
            median_cpu_us_per_request: median(&cpu_us),
            cpu_range: range(&cpu_us),
            median_user_us_per_request: median(&user),
            median_system_us_per_request: median(&system),
            median_sampled_user_us_per_request: (!sampled_user.is_empty())
                .then(|| median(&sampled_user)),
            sampled_user_us_per_request: sampled_user,
            median_get_hit_ratio: median(&of(&|r| r.get_hit_ratio.unwrap_or(0.0))),
            median_p50_us: median(&of(&|r| r.p50_us)),
            median_p99_us: median(&of(&|r| r.p99_us)),
            ops_per_sec: ops,
            cpu_us_per_request: cpu_us,
            user_us_per_request: user,
            system_us_per_request: system,
            runs,
        }
    }
}

/// One scenario under memtier: every server, the same command line.
#[derive(Clone, Debug, Serialize)]
pub struct MemtierScenario {
    /// A label, e.g. `16 conns, depth 1, 100 B`.
    pub name: String,
    /// Pipeline depth (`--pipeline`).
    pub depth: usize,
    /// Value size in bytes.
    pub value_size: usize,
    /// The command line, with `ADDR` and `PORT` for the server.
    pub command: String,
    /// memcached's runs.
    pub memcached: MemtierRuns,
    /// shoald's runs, then each variant's.
    pub shoald: Vec<MemtierRuns>,
    /// Each shoald's median ops/s over memcached's.
    pub ratio: Vec<f64>,
    /// Each shoald's median CPU per request over memcached's.
    pub cpu_ratio: Vec<f64>,
    /// Each shoald's median user CPU per request over memcached's.
    pub user_cpu_ratio: Vec<f64>,
    /// The same from `perf`'s samples, when taken.
    pub sampled_user_cpu_ratio: Vec<Option<f64>>,
    /// Each shoald's ratios round by round (its run over memcached's run of the same
    /// round), which cancel what the machine does between rounds.
    pub paired: Vec<PairedRatios>,
}

/// A shoald's ratios to memcached taken round by round: each round runs every server
/// once, back to back, so a slow or fast spell of the machine (on this 2-vCPU VM the
/// same server's CPU per request moves by a fifth between runs) touches both sides of
/// a round's ratio, where a ratio of medians can pair one server's fast runs with the
/// other's slow ones.
#[derive(Clone, Debug, Serialize)]
pub struct PairedRatios {
    /// ops/s over memcached's.
    pub ops: Spread,
    /// CPU per request over memcached's.
    pub cpu: Spread,
    /// perf's user-space CPU per request over memcached's, when sampled.
    pub sampled_user: Option<Spread>,
}

/// The median of some values, with their lowest and highest.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct Spread {
    /// The median.
    pub median: f64,
    /// The lowest.
    pub min: f64,
    /// The highest.
    pub max: f64,
}

impl Spread {
    /// The spread of `v` (all 0 when empty).
    pub fn of(v: &[f64]) -> Spread {
        let (min, max) = range(v);
        Spread {
            median: median(v),
            min,
            max,
        }
    }

    /// The spread of `ours[i] / theirs[i]` over the pairs both have.
    fn of_ratios(ours: &[f64], theirs: &[f64]) -> Spread {
        let ratios: Vec<f64> = ours
            .iter()
            .zip(theirs)
            .map(|(a, b)| a / b.max(1e-9))
            .collect();
        Spread::of(&ratios)
    }
}

impl PairedRatios {
    fn new(ours: &MemtierRuns, memcached: &MemtierRuns) -> PairedRatios {
        let sampled = (!ours.sampled_user_us_per_request.is_empty()
            && !memcached.sampled_user_us_per_request.is_empty())
        .then(|| {
            Spread::of_ratios(
                &ours.sampled_user_us_per_request,
                &memcached.sampled_user_us_per_request,
            )
        });
        PairedRatios {
            ops: Spread::of_ratios(&ours.ops_per_sec, &memcached.ops_per_sec),
            cpu: Spread::of_ratios(&ours.cpu_us_per_request, &memcached.cpu_us_per_request),
            sampled_user: sampled,
        }
    }
}

impl MemtierScenario {
    /// Compares every shoald's runs with memcached's.
    pub fn new(
        name: String,
        depth: usize,
        value_size: usize,
        command: String,
        memcached: MemtierRuns,
        shoald: Vec<MemtierRuns>,
    ) -> Self {
        let over = |f: &dyn Fn(&MemtierRuns) -> f64| -> Vec<f64> {
            shoald
                .iter()
                .map(|s| f(s) / f(&memcached).max(1e-9))
                .collect()
        };
        MemtierScenario {
            ratio: over(&|r| r.median_ops_per_sec),
            cpu_ratio: over(&|r| r.median_cpu_us_per_request),
            user_cpu_ratio: over(&|r| r.median_user_us_per_request),
            sampled_user_cpu_ratio: shoald
                .iter()
                .map(|s| {
                    let ours = s.median_sampled_user_us_per_request?;
                    let theirs = memcached.median_sampled_user_us_per_request?;
                    Some(ours / theirs.max(1e-9))
                })
                .collect(),
            paired: shoald
                .iter()
                .map(|s| PairedRatios::new(s, &memcached))
                .collect(),
            name,
            depth,
            value_size,
            command,
            memcached,
            shoald,
        }
    }
}

/// Everything `compare-memcached` measured.
#[derive(Clone, Debug, Serialize)]
pub struct CompareReport {
    /// What was run.
    pub config: CompareConfig,
    /// The machine.
    pub machine: Machine,
    /// One entry per pipeline depth.
    pub scenarios: Vec<Scenario>,
    /// memcaslap, per depth-1 scenario, if run.
    pub memcaslap: Option<MemcaslapResult>,
    /// `memtier_benchmark --version`, if memtier was run.
    pub memtier_version: Option<String>,
    /// memtier, per scenario, if run.
    pub memtier: Vec<MemtierScenario>,
    /// memcached then shoald.
    pub memory: Vec<MemoryResult>,
}

/// The machine the numbers come from.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// Online CPUs.
    pub cpus: usize,
    /// `model name` from /proc/cpuinfo.
    pub cpu_model: String,
    /// `memcached -V`.
    pub memcached_version: String,
}

impl Machine {
    /// Describes this machine.
    pub fn detect(memcached: &Path) -> Self {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("model name"))
                    .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let memcached_version = Command::new(memcached)
            .arg("-V")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        Machine {
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu_model,
            memcached_version,
        }
    }
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// Lowest and highest (0, 0 when empty).
fn range(v: &[f64]) -> (f64, f64) {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if lo.is_finite() {
        (lo, hi)
    } else {
        (0.0, 0.0)
    }
}

fn runs(server: &str, reports: Vec<LoadReport>, cpu: Vec<f64>) -> ServerRuns {
    let ops: Vec<f64> = reports.iter().map(|r| r.ops_per_sec).collect();
    let lo = ops.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ops.iter().copied().fold(0.0, f64::max);
    let p99: Vec<f64> = reports.iter().map(|r| r.latency.p99_us).collect();
    let p50: Vec<f64> = reports.iter().map(|r| r.latency.p50_us).collect();
    let p999: Vec<f64> = reports.iter().map(|r| r.latency.p999_us).collect();
    ServerRuns {
        server: server.into(),
        median_ops_per_sec: median(&ops),
        median_p99_us: median(&p99),
        median_p50_us: median(&p50),
        median_p999_us: median(&p999),
        median_cpu_us_per_request: median(&cpu),
        cpu_us_per_request: cpu,
        ops_range: (if lo.is_finite() { lo } else { 0.0 }, hi),
        ops_per_sec: ops,
        p99_us: p99,
        runs: reports,
    }
}

/// Runs every server rate-limited at each fraction of memcached's median throughput.
fn equal_load(
    cfg: &CompareConfig,
    memcached: &ServerRuns,
    servers: &[ServerProcess],
    names: &[String],
    load: &dyn Fn(&ServerProcess, bool, Option<f64>) -> LoadConfig,
) -> Result<Vec<EqualLoad>, BenchError> {
    let mut out = Vec::new();
    for &fraction in &cfg.equal_load {
        let rate = memcached.median_ops_per_sec * fraction;
        let mut row = Vec::new();
        for (srv, name) in servers.iter().zip(names) {
            let r = load::run(&load(srv, false, Some(rate)))?;
            progress(&format!(
                "{name} at {:.0}% of memcached's saturation ({rate:.0}/s): p99 {:.0} us",
                fraction * 100.0,
                r.latency.p99_us
            ));
            row.push((
                name.clone(),
                r.ops_per_sec,
                r.latency.p50_us,
                r.latency.p99_us,
                r.latency.p999_us,
            ));
        }
        out.push(EqualLoad {
            fraction,
            rate,
            servers: row,
        });
    }
    Ok(out)
}

/// CPU seconds (user + system, every thread) process `pid` has used, from /proc (0 if
/// it cannot be read).
fn cpu_seconds(pid: u32) -> f64 {
    server::cpu_times(pid).map_or(0.0, |c| c.total_secs())
}

fn progress(msg: &str) {
    eprintln!("[compare] {msg}");
}

/// Runs the whole comparison.
pub fn run(cfg: &CompareConfig) -> Result<CompareReport, BenchError> {
    let machine = Machine::detect(&cfg.memcached);
    let mut scenarios = Vec::new();
    let mut memtier = Vec::new();
    {
        // memcached first, then shoald, then each shoald variant; all started once.
        let mut servers = vec![ServerProcess::start_memcached(
            &cfg.memcached,
            &cfg.server_args,
        )?];
        let mut names = vec!["memcached".to_string(), "shoald".to_string()];
        servers.push(ServerProcess::start_shoald(&cfg.shoald, &cfg.server_args)?);
        for (name, extra) in &cfg.variants {
            let mut args = cfg.server_args.clone();
            args.extend(extra.iter().cloned());
            servers.push(ServerProcess::start_shoald(&cfg.shoald, &args)?);
            names.push(format!("shoald {name}"));
        }
        for &value_size in &cfg.value_sizes {
            let mut prefilled = false;
            let mut memtier_filled = false;
            for &depth in &cfg.depths {
                let load = |srv: &ServerProcess, prefill: bool, rate: Option<f64>| {
                    let mut l = LoadConfig::new(srv.addr);
                    l.threads = cfg.threads;
                    l.conns = cfg.conns;
                    l.depth = depth;
                    l.keys = cfg.keys;
                    l.value_size = crate::workload::ValueSize::fixed(value_size);
                    l.set_ratio = cfg.set_ratio;
                    l.duration = Duration::from_secs_f64(cfg.duration_secs);
                    l.warmup = Duration::from_secs_f64(cfg.warmup_secs);
                    l.prefill = prefill;
                    l.rate = rate;
                    l
                };
                if let Some(mt) = &cfg.memtier {
                    if !memtier_filled {
                        // memtier's keys (`memtier-N`) set once, outside the measured runs.
                        for (srv, name) in servers.iter().zip(&names) {
                            mt.fill(srv.addr, value_size)
                                .map_err(|e| against(e, &format!("{name} (filling)")))?;
                        }
                        memtier_filled = true;
                    }
                    memtier.push(memtier_scenario(
                        mt,
                        cfg.perf.as_deref(),
                        cfg.repeats,
                        &servers,
                        &names,
                        value_size,
                        depth,
                    )?);
                }
                if cfg.memtier_only {
                    continue;
                }
                let n = servers.len();
                if !prefilled {
                    // Every key set once, outside the measured runs (and their CPU time).
                    for srv in &servers {
                        load::prefill(&load(srv, true, None))?;
                    }
                    prefilled = true;
                }
                let mut per: Vec<Vec<LoadReport>> = vec![Vec::new(); n];
                let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); n];
                for rep in 0..cfg.repeats {
                    // Rotate which server goes first, so none always runs on a machine
                    // warmed (or slowed) by the one before.
                    for k in 0..n {
                        let i = (k + rep) % n;
                        let srv = &servers[i];
                        let before = cpu_seconds(srv.pid());
                        let r = load::run(&load(srv, false, None))?;
                        let spent = cpu_seconds(srv.pid()) - before;
                        let requests = (r.total.gets + r.total.sets).max(1) as f64;
                        let us = spent * 1e6 / requests;
                        progress(&format!(
                            "{value_size} B depth {depth} run {} {}: {:.0} ops/s p99 {:.0} us, {us:.2} us CPU/request",
                            rep + 1,
                            names[i],
                            r.ops_per_sec,
                            r.latency.p99_us
                        ));
                        per[i].push(r);
                        cpu[i].push(us);
                    }
                }
                let mut all: Vec<ServerRuns> = per
                    .into_iter()
                    .zip(cpu)
                    .zip(&names)
                    .map(|((reports, cpu), name)| runs(name, reports, cpu))
                    .collect();
                let memcached = all.remove(0);
                let equal_load = equal_load(cfg, &memcached, &servers, &names, &load)?;
                let ratio = all
                    .iter()
                    .map(|s| s.median_ops_per_sec / memcached.median_ops_per_sec.max(1e-9))
                    .collect();
                let cpu_ratio = all
                    .iter()
                    .map(|s| {
                        s.median_cpu_us_per_request / memcached.median_cpu_us_per_request.max(1e-9)
                    })
                    .collect();
                scenarios.push(Scenario {
                    name: format!("{} conns, depth {depth}, {value_size} B", cfg.conns),
                    depth,
                    value_size,
                    memcached,
                    shoald: all,
                    ratio,
                    cpu_ratio,
                    equal_load,
                });
            }
        }
    }
    let memcaslap = match &cfg.memcaslap {
        // memcaslap failing is reported, not fatal: the other numbers still stand.
        Some(bin) => match run_memcaslap(cfg, bin) {
            Ok(r) => Some(r),
            Err(e) => {
                progress(&format!("memcaslap skipped: {e}"));
                None
            }
        },
        None => None,
    };
    let mut memory = Vec::new();
    if cfg.memory {
        for name in ["memcached", "shoald"] {
            let p = if name == "memcached" {
                ServerProcess::start_memcached(&cfg.memcached, &cfg.memory_args)?
            } else {
                ServerProcess::start_shoald(&cfg.shoald, &cfg.memory_args)?
            };
            let m = memory_one(&p, cfg.memory_keys)?;
            progress(&format!(
                "memory {name}: {} of {} retrievable, RSS {} KiB",
                m.retrievable, m.sets, m.rss_kib
            ));
            memory.push(m);
        }
    }
    Ok(CompareReport {
        config: cfg.clone(),
        machine,
        scenarios,
        memcaslap,
        memtier_version: cfg.memtier.as_ref().map(MemtierConfig::version),
        memtier,
        memory,
    })
}

/// Names the server a failed tool ran against.
fn against(e: BenchError, server: &str) -> BenchError {
    match e {
        BenchError::Tool { tool, reason } => BenchError::Tool {
            tool: format!("{tool} against {server}"),
            reason,
        },
        e => e,
    }
}

/// memtier against every server in turn (the first server rotating), `repeats` times,
/// with each server's CPU time over each run.
fn memtier_scenario(
    mt: &MemtierConfig,
    perf: Option<&Path>,
    repeats: usize,
    servers: &[ServerProcess],
    names: &[String],
    value_size: usize,
    depth: usize,
) -> Result<MemtierScenario, BenchError> {
    let n = servers.len();
    let mut per: Vec<Vec<MemtierSummary>> = vec![Vec::new(); n];
    let mut cpu: Vec<Vec<server::CpuTimes>> = vec![Vec::new(); n];
    let mut sampled: Vec<Vec<f64>> = vec![Vec::new(); n];
    let perf_data = std::env::temp_dir().join(format!("shoal-bench-{}.perf", std::process::id()));
    for rep in 0..repeats {
        for k in 0..n {
            let i = (k + rep) % n;
            let srv = &servers[i];
            let timed_run = || -> Result<(MemtierSummary, server::CpuTimes), BenchError> {
                let before = srv.cpu_times()?;
                let r = mt
                    .run(srv.addr, value_size, depth)
                    .map_err(|e| against(e, &names[i]))?;
                Ok((r, srv.cpu_times()?.since(&before)))
            };
            let (r, spent) = timed_run()?;
            let requests = r.requests.max(1) as f64;
            progress(&format!(
                "memtier {value_size} B depth {depth} run {} {}: {:.0} ops/s, {:.2} us CPU/request ({:.2} user), {:.1}% get hits",
                rep + 1,
                names[i],
                r.ops_per_sec,
                spent.total_secs() * 1e6 / requests,
                spent.user_secs * 1e6 / requests,
                r.get_hit_ratio.unwrap_or(0.0) * 100.0
            ));
            if let Some(perf) = perf {
                // A run of its own: with perf attached the server's CPU per request
                // rises (see `user_sampler`), so the plain run above gives throughput
                // and CPU, and this one only perf's user-space figure.
                let sampler = UserSampler::start(perf, srv.pid(), &perf_data)?;
                let (under_perf, spent_under_perf) = timed_run()?;
                let requests = under_perf.requests.max(1) as f64;
                let user = sampler.finish()? * 1e6 / requests;
                progress(&format!(
                    "memtier {value_size} B depth {depth} run {} {} under perf: {:.0} ops/s, {:.2} us CPU/request, {:.3} us user/request sampled",
                    rep + 1,
                    names[i],
                    under_perf.ops_per_sec,
                    spent_under_perf.total_secs() * 1e6 / requests,
                    user
                ));
                sampled[i].push(user);
            }
            per[i].push(r);
            cpu[i].push(spent);
        }
    }
    let _ = std::fs::remove_file(&perf_data);
    let mut all: Vec<MemtierRuns> = per
        .into_iter()
        .zip(&cpu)
        .zip(sampled)
        .zip(names)
        .map(|(((runs, cpu), sampled), name)| MemtierRuns::new(name, runs, cpu, sampled))
        .collect();
    let memcached = all.remove(0);
    Ok(MemtierScenario::new(
        format!(
            "{} conns, depth {depth}, {value_size} B",
            mt.threads * mt.conns
        ),
        depth,
        value_size,
        mt.command(value_size, depth),
        memcached,
        all,
    ))
}

/// Fills `p` with `keys` 12-byte keys (`key:%08d`) and 100-byte values, then counts.
pub fn memory_one(p: &ServerProcess, keys: u64) -> Result<MemoryResult, BenchError> {
    let f = fill::fill(&FillConfig {
        server: p.addr,
        keys,
        key_prefix: "key:".into(),
        key_width: 8,
        value_size: 100,
        conns: 2,
        depth: 100,
    })?;
    // Let a background maintenance pass settle before measuring.
    std::thread::sleep(Duration::from_millis(500));
    let rss_kib = p.rss_kib()?;
    let st = server::stats(p.addr)?;
    let retrievable = fill::count_present(p.addr, keys, "key:", 8, 100)?;
    Ok(MemoryResult {
        server: p.name.clone(),
        sets: f.sets,
        stored: f.stored,
        retrievable,
        curr_items: server::stat_u64(&st, "curr_items")?,
        evictions: server::stat_u64(&st, "evictions").unwrap_or(0),
        rss_kib,
        fill_secs: f.secs,
    })
}

/// memcaslap's config: 16-byte keys (its minimum), fixed-size values, the set:get mix.
fn memcaslap_config(cfg: &CompareConfig) -> String {
    format!(
        "key\n16 16 1\nvalue\n{v} {v} 1\ncmd\n0 {s}\n1 {g}\n",
        v = cfg.value_sizes.first().copied().unwrap_or(100),
        s = cfg.set_ratio,
        g = 1.0 - cfg.set_ratio
    )
}

/// The `TPS: N` figure from memcaslap's final summary.
pub fn parse_memcaslap_tps(out: &str) -> Option<f64> {
    out.lines()
        .rev()
        .filter(|l| l.starts_with("Run time:"))
        .filter_map(|l| {
            let rest = &l[l.find("TPS:")? + 4..];
            rest.split_whitespace().next()?.parse().ok()
        })
        .next()
}

fn run_memcaslap(cfg: &CompareConfig, bin: &Path) -> Result<MemcaslapResult, BenchError> {
    let cfg_path =
        std::env::temp_dir().join(format!("shoal-bench-memcaslap-{}.cfg", std::process::id()));
    std::fs::write(&cfg_path, memcaslap_config(cfg))
        .map_err(|e| BenchError::io(cfg_path.display().to_string(), e))?;
    let args = |addr: &str| -> Vec<String> {
        vec![
            "-s".into(),
            addr.into(),
            "-t".into(),
            format!("{}s", cfg.memcaslap_secs),
            "-c".into(),
            cfg.conns.to_string(),
            "-T".into(),
            cfg.threads.to_string(),
            "-F".into(),
            cfg_path.display().to_string(),
        ]
    };
    let command = format!("{} {}", bin.display(), args("ADDR").join(" "));
    let mut tps: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mc = ServerProcess::start_memcached(&cfg.memcached, &cfg.server_args)?;
    let sh = ServerProcess::start_shoald(&cfg.shoald, &cfg.server_args)?;
    for rep in 0..cfg.repeats {
        let order: [usize; 2] = if rep % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let srv = if i == 0 { &mc } else { &sh };
            let out = Command::new(bin)
                .args(args(&srv.addr.to_string()))
                .output()
                .map_err(|e| spawn_err_io(bin, e))?;
            let text = String::from_utf8_lossy(&out.stdout);
            let t = parse_memcaslap_tps(&text).ok_or_else(|| {
                BenchError::Protocol(format!(
                    "no TPS in memcaslap output: {}",
                    text.lines().last().unwrap_or("")
                ))
            })?;
            progress(&format!(
                "memcaslap run {} {}: {t:.0} TPS",
                rep + 1,
                srv.name
            ));
            tps[i].push(t);
        }
    }
    let _ = std::fs::remove_file(&cfg_path);
    let [m, s] = tps;
    let (mm, sm) = (median(&m), median(&s));
    Ok(MemcaslapResult {
        command,
        memcached_tps: m,
        shoald_tps: s,
        memcached_median: mm,
        shoald_median: sm,
        ratio: sm / mm.max(1e-9),
    })
}

fn spawn_err_io(bin: &Path, e: std::io::Error) -> BenchError {
    BenchError::Spawn {
        name: bin.display().to_string(),
        reason: e.to_string(),
    }
}

impl CompareReport {
    /// Markdown tables for a person (and the README).
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let m = &self.machine;
        let _ = writeln!(
            s,
            "Machine: {} CPUs, {}; {}.\n",
            m.cpus, m.cpu_model, m.memcached_version
        );
        if !self.scenarios.is_empty() {
            let _ = writeln!(
                s,
                "| scenario | server | ops/s (median) | ops/s min-max | ops/s vs memcached | CPU us/request | CPU vs memcached | p50 / p99 / p99.9 (us) |"
            );
            let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|");
        }
        for sc in &self.scenarios {
            let rows = std::iter::once((&sc.memcached, 1.0, 1.0)).chain(
                sc.shoald
                    .iter()
                    .zip(sc.ratio.iter().zip(&sc.cpu_ratio))
                    .map(|(r, (&o, &c))| (r, o, c)),
            );
            for (r, ops_ratio, cpu_ratio) in rows {
                let _ = writeln!(
                    s,
                    "| {} | {} | {:.0} | {:.0}-{:.0} | {:.2}x | {:.2} | {:.2}x | {:.0} / {:.0} / {:.0} |",
                    sc.name,
                    r.server,
                    r.median_ops_per_sec,
                    r.ops_range.0,
                    r.ops_range.1,
                    ops_ratio,
                    r.median_cpu_us_per_request,
                    cpu_ratio,
                    r.median_p50_us,
                    r.median_p99_us,
                    r.median_p999_us
                );
            }
        }
        let equal: Vec<&Scenario> = self
            .scenarios
            .iter()
            .filter(|sc| !sc.equal_load.is_empty())
            .collect();
        if !equal.is_empty() {
            let _ = writeln!(
                s,
                "\n| scenario | offered load | server | ops/s | p50 / p99 / p99.9 (us) |"
            );
            let _ = writeln!(s, "|---|---|---|---:|---:|");
            for sc in equal {
                for e in &sc.equal_load {
                    for (name, ops, p50, p99, p999) in &e.servers {
                        let _ = writeln!(
                            s,
                            "| {} | {:.0}% of memcached's max ({:.0}/s) | {name} | {ops:.0} | {p50:.0} / {p99:.0} / {p999:.0} |",
                            sc.name,
                            e.fraction * 100.0,
                            e.rate
                        );
                    }
                }
            }
        }
        if let Some(c) = &self.memcaslap {
            let _ = writeln!(
                s,
                "| memcaslap, {} conns | {:.0} | {:.0} | {:.2} | - | - |",
                self.config.conns, c.memcached_median, c.shoald_median, c.ratio
            );
        }
        if !self.memtier.is_empty() {
            let _ = writeln!(
                s,
                "\nmemtier_benchmark ({}), {} alternating runs per server, medians; server CPU from /proc/PID/stat. Commands:\n",
                self.memtier_version.as_deref().unwrap_or("unknown version"),
                self.config.repeats
            );
            for sc in &self.memtier {
                let _ = writeln!(s, "- {}: `{}`", sc.name, sc.command);
            }
            let _ = writeln!(
                s,
                "\n| memtier scenario | server | ops/s (median) | ops/s min-max | ops/s vs memcached | CPU us/request (min-max) | user / system us/request | CPU vs memcached | user CPU vs memcached | get hits | p50 / p99 (us) |"
            );
            let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
            for sc in &self.memtier {
                let rows = std::iter::once((&sc.memcached, 1.0, 1.0, 1.0)).chain(
                    sc.shoald
                        .iter()
                        .zip(
                            sc.ratio
                                .iter()
                                .zip(sc.cpu_ratio.iter().zip(&sc.user_cpu_ratio)),
                        )
                        .map(|(r, (&o, (&c, &u)))| (r, o, c, u)),
                );
                for (r, ops_ratio, cpu_ratio, user_ratio) in rows {
                    let _ = writeln!(
                        s,
                        "| {} | {} | {:.0} | {:.0}-{:.0} | {:.2}x | {:.2} ({:.2}-{:.2}) | {:.2} / {:.2} | {:.2}x | {:.2}x | {:.1}% | {:.0} / {:.0} |",
                        sc.name,
                        r.server,
                        r.median_ops_per_sec,
                        r.ops_range.0,
                        r.ops_range.1,
                        ops_ratio,
                        r.median_cpu_us_per_request,
                        r.cpu_range.0,
                        r.cpu_range.1,
                        r.median_user_us_per_request,
                        r.median_system_us_per_request,
                        cpu_ratio,
                        user_ratio,
                        r.median_get_hit_ratio * 100.0,
                        r.median_p50_us,
                        r.median_p99_us
                    );
                }
            }
        }
        if self
            .memtier
            .iter()
            .any(|sc| sc.memcached.median_sampled_user_us_per_request.is_some())
        {
            let _ = writeln!(
                s,
                "\nUser-space CPU per request sampled by `perf record -e cpu-clock:u` (2,000 samples a second) in a second run of each pair, right after the plain one: with perf attached a server's system time per request rises, so throughput and CPU above come from the plain runs. /proc's user time comes from 250 ticks a second, so its per-run figures move far more.\n\n| memtier scenario | server | user us/request, perf (median) | min-max | vs memcached |\n|---|---|---:|---:|---:|"
            );
            for sc in &self.memtier {
                let rows = std::iter::once((&sc.memcached, Some(1.0))).chain(
                    sc.shoald
                        .iter()
                        .zip(sc.sampled_user_cpu_ratio.iter().copied()),
                );
                for (r, ratio) in rows {
                    let (Some(m), Some(x)) = (r.median_sampled_user_us_per_request, ratio) else {
                        continue;
                    };
                    let (lo, hi) = range(&r.sampled_user_us_per_request);
                    let _ = writeln!(
                        s,
                        "| {} | {} | {m:.3} | {lo:.3}-{hi:.3} | {x:.2}x |",
                        sc.name, r.server
                    );
                }
            }
        }
        if !self.memtier.is_empty() {
            let _ = writeln!(
                s,
                "
The same as ratios taken round by round (each shoald run over memcached's run of the same round), median (min-max): a slow or fast spell of the machine then touches both sides of a ratio.

| memtier scenario | server | ops/s vs memcached | CPU/request vs memcached | user CPU vs memcached, perf |
|---|---|---:|---:|---:|"
            );
            let cell = |x: &Spread| format!("{:.2}x ({:.2}-{:.2})", x.median, x.min, x.max);
            for sc in &self.memtier {
                for (r, p) in sc.shoald.iter().zip(&sc.paired) {
                    let _ = writeln!(
                        s,
                        "| {} | {} | {} | {} | {} |",
                        sc.name,
                        r.server,
                        cell(&p.ops),
                        cell(&p.cpu),
                        p.sampled_user.as_ref().map_or("-".to_string(), cell)
                    );
                }
            }
        }
        if !self.memory.is_empty() {
            let _ = writeln!(
                s,
                "\n| memory (-m 64, 1M x 12-byte keys, 100-byte values) | stored | retrievable | curr_items | evictions | VmRSS (MiB) |"
            );
            let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|");
            for r in &self.memory {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} | {:.1} |",
                    r.server,
                    r.stored,
                    r.retrievable,
                    r.curr_items,
                    r.evictions,
                    r.rss_kib as f64 / 1024.0
                );
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn memtier_ratios() {
        let sample =
            crate::memtier::parse_json(include_str!("../testdata/memtier-depth1-memcached.json"))
                .unwrap();
        let with_ops = |ops: f64| MemtierSummary {
            requests: (ops * 2.0) as u64,
            ops_per_sec: ops,
            ..sample.clone()
        };
        let cpu = |user: f64, system: f64| server::CpuTimes {
            user_secs: user,
            system_secs: system,
        };
        // memcached: 100k requests per run at 2 s of CPU (0.5 s user): 20 us, 5 us user.
        let mc = MemtierRuns::new(
            "memcached",
            vec![with_ops(50_000.0), with_ops(40_000.0), with_ops(60_000.0)],
            &[cpu(0.4, 1.2), cpu(0.4, 1.2), cpu(0.6, 1.8)],
            vec![4.0, 5.0, 6.0],
        );
        assert_eq!(mc.median_ops_per_sec, 50_000.0);
        assert_eq!(mc.ops_range, (40_000.0, 60_000.0));
        assert!((mc.median_cpu_us_per_request - 20.0).abs() < 1e-9);
        assert!((mc.median_user_us_per_request - 5.0).abs() < 1e-9);
        assert!((mc.median_system_us_per_request - 15.0).abs() < 1e-9);
        // perf's user time per request in the sampled runs: 4, 5 and 6 us.
        assert_eq!(
            mc.median_sampled_user_us_per_request.map(|u| u.round()),
            Some(5.0)
        );
        // shoald: 110k requests per run at 1.98 s of CPU (0.33 s user): 18 us, 3 us user;
        // sampled: 2 us.
        let sh = MemtierRuns::new(
            "shoald",
            vec![with_ops(55_000.0); 3],
            &[cpu(0.33, 1.65); 3],
            vec![2.0; 3],
        );
        let sc = MemtierScenario::new("x".into(), 1, 100, "cmd".into(), mc, vec![sh]);
        assert!((sc.ratio[0] - 1.1).abs() < 1e-9);
        assert!((sc.cpu_ratio[0] - 0.9).abs() < 1e-9, "{:?}", sc.cpu_ratio);
        assert!(
            (sc.user_cpu_ratio[0] - 0.6).abs() < 1e-9,
            "{:?}",
            sc.user_cpu_ratio
        );
        let sampled = sc.sampled_user_cpu_ratio[0].unwrap_or(0.0);
        assert!((sampled - 0.4).abs() < 1e-9, "{sampled}");
        // Round by round: 55k over 50k, 40k and 60k ops/s; 18 us over 20, 16 and 20 us.
        let p = &sc.paired[0];
        assert!((p.ops.median - 1.1).abs() < 1e-9, "{:?}", p.ops);
        assert!((p.ops.min - 55.0 / 60.0).abs() < 1e-9, "{:?}", p.ops);
        assert!((p.ops.max - 55.0 / 40.0).abs() < 1e-9, "{:?}", p.ops);
        assert!((p.cpu.median - 0.9).abs() < 1e-9, "{:?}", p.cpu);
        assert!((p.cpu.max - 18.0 / 16.0).abs() < 1e-9, "{:?}", p.cpu);
        let user = p.sampled_user.map(|u| (u.median * 100.0).round());
        assert_eq!(user, Some(40.0));
        // Without samples there is no sampled ratio.
        let plain =
            |name: &str| MemtierRuns::new(name, vec![with_ops(1.0)], &[cpu(0.1, 0.1)], Vec::new());
        let sc = MemtierScenario::new(
            "y".into(),
            1,
            100,
            "cmd".into(),
            plain("m"),
            vec![plain("s")],
        );
        assert_eq!(sc.sampled_user_cpu_ratio, vec![None]);
        assert_eq!(sc.paired[0].sampled_user, None);
        assert_eq!(range(&[]), (0.0, 0.0));
    }

    #[test]
    fn reads_memcaslap_tps() {
        let out = "servers : 127.0.0.1:1\n...\nRun time: 10.0s Ops: 1234567 TPS: 123456 Net_rate: 15.3M/s\n";
        assert_eq!(parse_memcaslap_tps(out), Some(123456.0));
        assert_eq!(parse_memcaslap_tps("nothing"), None);
    }
}
