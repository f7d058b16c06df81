//! `shoal-bench hitratio`: demand-fill replay of workload shapes or real traces into
//! shoald, memcached and redis at equal memory; object and byte hit ratios, miss-ratio
//! curves, and libCacheSim's policies beside them.

use crate::util::{command_line, which, workspace_bin};
use anyhow::{bail, Context, Result};
use shoal_bench::hitratio::curve::miss_ratio_chart;
use shoal_bench::hitratio::oracle::{self, OracleConfig, OracleResult};
use shoal_bench::hitratio::reference::{self, RefPoint};
use shoal_bench::hitratio::run::{measure, Contender, Point, PointConfig, ServerKind};
use shoal_bench::hitratio::shapes::{self, Shape};
use shoal_bench::hitratio::synth::{Scans, Shift, SynthSpec};
use shoal_bench::hitratio::trace_file::{self, TraceFormat};
use shoal_bench::hitratio::Request;
use shoal_bench::machine::MachineInfo;
use shoal_bench::BenchError;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Cache sizes of a miss-ratio curve, MiB.
const CURVE_MB: [u64; 7] = [16, 32, 64, 128, 256, 512, 1024];

/// `hitratio`'s options.
#[derive(clap::Args)]
pub struct HitRatioArgs {
    /// A named workload shape (repeatable); `list` prints them. Default: the six shapes
    /// of issue 24, unless --trace or --custom is given.
    #[arg(long)]
    pub shape: Vec<String>,
    /// Replay this trace file instead (`-` for stdin).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// The trace's format.
    #[arg(long, value_enum, default_value = "oracle")]
    pub format: TraceFormat,
    /// Key length for traces without key sizes (oracleGeneral), bytes.
    #[arg(long, default_value_t = 16)]
    pub key_len: u8,
    /// Requests of the trace to replay before counting (default: 30% of a synthetic
    /// trace; required with --trace as a count, since a file's length is not known).
    #[arg(long)]
    pub warmup: Option<u64>,
    /// A workload of your own: --keys, --requests, --popularity, --sizes, --ttl,
    /// --scan, --shift, --seed.
    #[arg(long)]
    pub custom: bool,
    /// Custom: distinct keys.
    #[arg(long, default_value_t = 1_000_000)]
    pub keys: u64,
    /// Requests (custom shapes; for named shapes it overrides the shape's count).
    #[arg(long)]
    pub requests: Option<u64>,
    /// Custom: popularity (`zipf:1.0`, `uniform`).
    #[arg(long, default_value = "zipf:1.0")]
    pub popularity: String,
    /// Custom: value sizes (`100`, `lognormal:230:1.2`, `loguniform:10:500k`,
    /// `mix:1k,10k,100k`).
    #[arg(long, default_value = "100")]
    pub sizes: String,
    /// Custom: TTL mix (`none`, `0.5:2` = half the keys live 2 s).
    #[arg(long, default_value = "none")]
    pub ttl: String,
    /// Custom: scans, `EVERY:LEN` (a burst of LEN one-time keys after every EVERY
    /// requests).
    #[arg(long)]
    pub scan: Option<String>,
    /// Custom: a moving hot set, `EVERY:BY`.
    #[arg(long)]
    pub shift: Option<String>,
    /// Seed of synthetic traces.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Cache sizes to measure, MiB (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "64,256")]
    pub memory: Vec<u64>,
    /// Measure a miss-ratio curve: 16 MiB to 1 GiB, one trace for every size (the shape
    /// scaled by --scale).
    #[arg(long)]
    pub curve: bool,
    /// Scale of the trace for --curve: keys and requests times this (a shape is defined
    /// for 64 MiB; 4 makes it a 256 MiB shape).
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// A server to measure (repeatable): `shoald`, `memcached`, `redis`, or
    /// `LABEL=KIND:PATH` (e.g. `memcached 1.6.45=memcached:/opt/mc/memcached`).
    /// Default: shoald and memcached.
    #[arg(long = "server")]
    pub servers: Vec<String>,
    /// Extra arguments for every shoald started (space-separated).
    #[arg(long, allow_hyphen_values = true)]
    pub shoald_args: Option<String>,
    /// Extra arguments for every memcached started (space-separated), e.g. its
    /// `-o ext_path=...` beside shoald's for a flash-tier comparison.
    #[arg(long, allow_hyphen_values = true)]
    pub memcached_args: Option<String>,
    /// Server threads (-t).
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Requests per pipelined window.
    #[arg(long, default_value_t = 64)]
    pub window: usize,
    /// Pace in requests per second (default: the shape's own, or as fast as possible).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Replay a quarter of each shape's requests (a quick look, not a report).
    #[arg(long)]
    pub quick: bool,
    /// Python (of a venv with PyPI `libcachesim`) to simulate LRU, S3-FIFO, SIEVE and
    /// Belady on the same trace at the same sizes; scripts/bench-hitratio.sh makes one.
    #[arg(long)]
    pub reference_python: Option<PathBuf>,
    /// The reference script.
    #[arg(long, default_value = "bench/hitratio/reference.py")]
    pub reference_script: PathBuf,
    /// Also compute, per size, two offline references on the same trace
    /// (`shoal_bench::hitratio::oracle`): a cache that never evicts (the ceiling of every
    /// policy) and a popularity oracle of that many bytes of shoald items (the best an
    /// online cache can do when requests are independent, as in the synthetic shapes).
    #[arg(long)]
    pub oracle: bool,
    /// Compute only the offline references: replay nothing.
    #[arg(long)]
    pub oracle_only: bool,
    /// Write the (first) trace as oracleGeneral to this file and stop.
    #[arg(long)]
    pub write_trace: Option<PathBuf>,
    /// Write results.md, results.json and the charts here.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// A workload to replay: a synthetic shape or a trace file.
#[derive(Clone)]
enum Workload {
    Synthetic(Shape),
    File {
        path: PathBuf,
        format: TraceFormat,
        key_len: u8,
    },
}

impl Workload {
    fn name(&self) -> String {
        match self {
            Workload::Synthetic(s) => s.name.to_string(),
            Workload::File { path, .. } => path
                .file_name()
                .map_or("trace".into(), |n| n.to_string_lossy().into_owned()),
        }
    }

    fn title(&self) -> String {
        match self {
            Workload::Synthetic(s) => s.title.to_string(),
            Workload::File { path, format, .. } => {
                format!("{} ({format:?} trace)", path.display())
            }
        }
    }

    /// This workload for a cache of `memory_mb` (shapes scale; files do not).
    fn for_memory(&self, memory_mb: u64) -> Workload {
        match self {
            Workload::Synthetic(s) => Workload::Synthetic(s.for_memory(memory_mb)),
            Workload::File { .. } => self.clone(),
        }
    }

    /// This workload scaled by `factor` (shapes only).
    fn scaled(&self, factor: f64) -> Workload {
        match self {
            Workload::Synthetic(s) => Workload::Synthetic(Shape {
                spec: s.spec.scaled(factor),
                ..s.clone()
            }),
            Workload::File { .. } => self.clone(),
        }
    }

    fn requests(
        &self,
    ) -> Result<Box<dyn Iterator<Item = Result<Request, BenchError>> + Send>, BenchError> {
        match self {
            Workload::Synthetic(s) => Ok(Box::new(s.spec.generate().map(Ok))),
            Workload::File {
                path,
                format,
                key_len,
            } => trace_file::open(path, *format, *key_len),
        }
    }
}

/// Results of one workload.
#[derive(serde::Serialize)]
struct WorkloadResult {
    name: String,
    title: String,
    /// Requests replayed before counting, per replayed trace: one for a curve or a trace
    /// file, one per cache size for a shape (it grows with the cache).
    warmups: Vec<u64>,
    points: Vec<Point>,
    references: Vec<RefPoint>,
    oracles: Vec<OraclePoint>,
}

/// The offline references at one cache size.
#[derive(serde::Serialize)]
struct OraclePoint {
    memory_mb: u64,
    #[serde(flatten)]
    result: OracleResult,
}

fn parse_pair(s: &str, what: &str) -> Result<(u64, u64)> {
    let (a, b) = s
        .split_once(':')
        .with_context(|| format!("--{what} takes EVERY:N, not {s:?}"))?;
    Ok((a.parse()?, b.parse()?))
}

fn workloads(a: &HitRatioArgs) -> Result<Vec<Workload>> {
    if let Some(path) = &a.trace {
        return Ok(vec![Workload::File {
            path: path.clone(),
            format: a.format,
            key_len: a.key_len,
        }]);
    }
    let mut out = Vec::new();
    if a.custom {
        let mut spec = SynthSpec::new(a.keys, a.requests.unwrap_or(4_000_000));
        spec.popularity = a.popularity.parse()?;
        spec.sizes = a.sizes.parse()?;
        spec.ttl = a.ttl.parse()?;
        spec.seed = a.seed;
        if let Some(s) = &a.scan {
            let (every, len) = parse_pair(s, "scan")?;
            spec.scans = Some(Scans { every, len });
        }
        if let Some(s) = &a.shift {
            let (every, by) = parse_pair(s, "shift")?;
            spec.shift = Some(Shift { every, by });
        }
        out.push(Workload::Synthetic(Shape {
            name: "custom",
            title: "custom workload",
            spec,
            rate: None,
        }));
        return Ok(out);
    }
    let names: Vec<String> = if a.shape.is_empty() {
        shapes::ISSUE_SHAPES.iter().map(|s| s.to_string()).collect()
    } else {
        a.shape.clone()
    };
    for n in names {
        let mut shape = shapes::by_name(&n).with_context(|| {
            let known: Vec<&str> = shapes::all().iter().map(|s| s.name).collect();
            format!("no shape {n:?}; known: {}", known.join(", "))
        })?;
        shape.spec.seed = a.seed;
        if let Some(r) = a.requests {
            shape.spec.requests = r;
        } else if a.quick {
            shape.spec.requests /= 4;
        }
        out.push(Workload::Synthetic(shape));
    }
    Ok(out)
}

fn contenders(a: &HitRatioArgs) -> Result<Vec<Contender>> {
    let specs: Vec<String> = if a.servers.is_empty() {
        vec!["shoald".into(), "memcached".into()]
    } else {
        a.servers.clone()
    };
    let split = |s: &Option<String>| -> Vec<String> {
        s.as_deref()
            .map(|s| s.split_whitespace().map(String::from).collect())
            .unwrap_or_default()
    };
    let shoald_args = split(&a.shoald_args);
    let memcached_args = split(&a.memcached_args);
    let mut out = Vec::new();
    for s in specs {
        let (label, kind, path) = match s.split_once('=') {
            Some((label, rest)) => {
                let (kind, path) = rest
                    .split_once(':')
                    .with_context(|| format!("--server {s:?}: expected LABEL=KIND:PATH"))?;
                (
                    label.to_string(),
                    kind.to_string(),
                    Some(PathBuf::from(path)),
                )
            }
            None => (s.clone(), s.clone(), None),
        };
        let (kind, default_bin) = match kind.as_str() {
            "shoald" => (ServerKind::Shoald, "shoald"),
            "memcached" => (ServerKind::Memcached, "memcached"),
            "redis" => (ServerKind::Redis, "redis-server"),
            other => bail!("unknown server kind {other:?} (shoald, memcached, redis)"),
        };
        let bin = match (kind, path) {
            (_, Some(p)) => p,
            (ServerKind::Shoald, None) => workspace_bin(None, "shoald")?
                .context("shoald not found (cargo build --release)")?,
            (_, None) => which(Path::new(default_bin))
                .with_context(|| format!("{default_bin} not found on PATH"))?,
        };
        anyhow::ensure!(bin.is_file(), "{} does not exist", bin.display());
        let args = match kind {
            ServerKind::Shoald => shoald_args.clone(),
            ServerKind::Memcached => memcached_args.clone(),
            ServerKind::Redis => Vec::new(),
        };
        out.push(Contender {
            label,
            kind,
            bin,
            args,
        });
    }
    Ok(out)
}

/// Runs the hit-ratio benchmark.
pub fn run(a: HitRatioArgs) -> Result<()> {
    if a.shape.iter().any(|s| s == "list") {
        for s in shapes::all() {
            println!("{:<20} {}", s.name, s.title);
        }
        return Ok(());
    }
    let loads = workloads(&a)?;
    if let Some(path) = &a.write_trace {
        let w = loads.first().context("no workload")?.scaled(a.scale);
        let reqs: Vec<Request> = w.requests()?.collect::<Result<_, _>>()?;
        let mut f = std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| path.display().to_string())?,
        );
        let n = trace_file::write_oracle(&mut f, reqs)?;
        eprintln!("wrote {n} requests of {} to {}", w.name(), path.display());
        return Ok(());
    }
    let servers = if a.oracle_only {
        Vec::new()
    } else {
        contenders(&a)?
    };
    let memory: Vec<u64> = if a.curve {
        CURVE_MB.to_vec()
    } else {
        a.memory.clone()
    };
    anyhow::ensure!(!memory.is_empty(), "no cache size to measure");
    if let Some(out) = &a.out {
        std::fs::create_dir_all(out).with_context(|| out.display().to_string())?;
    }
    let mut results = Vec::new();
    for w in &loads {
        eprintln!("== {}: {}", w.name(), w.title());
        let mut points = Vec::new();
        let mut references = Vec::new();
        let mut oracles = Vec::new();
        let mut warmups = Vec::new();
        // A miss-ratio curve replays one trace at every size; otherwise a shape grows with
        // the cache, so that each size holds the same share of its working set.
        let per_size: Vec<(Vec<u64>, Workload)> = if a.curve || !matches!(w, Workload::Synthetic(_))
        {
            vec![(memory.clone(), w.scaled(a.scale))]
        } else {
            memory
                .iter()
                .map(|&mb| (vec![mb], w.for_memory(mb)))
                .collect()
        };
        for (sizes, load) in &per_size {
            let (warmup, rate) = match load {
                Workload::Synthetic(s) => (
                    a.warmup.unwrap_or(s.spec.requests * 3 / 10),
                    a.rate.or(s.rate),
                ),
                Workload::File { .. } => (
                    a.warmup
                        .context("--trace needs --warmup (requests before counting)")?,
                    a.rate,
                ),
            };
            warmups.push(warmup);
            let cfg = PointConfig {
                threads: a.threads,
                window: a.window,
                warmup,
                rate,
                interval: 0,
            };
            if a.oracle || a.oracle_only {
                oracles.extend(oracle_points(load, sizes, rate, warmup)?);
            }
            // With --oracle-only there are no servers to replay into.
            for &mb in sizes {
                for c in &servers {
                    let started = std::time::Instant::now();
                    let p = measure(c, mb, &cfg, load.requests()?, |_| {})
                        .with_context(|| format!("{} at {mb} MiB", c.label))?;
                    eprintln!(
                        "{:>5} MiB {:<22} hit {:.4} byte hit {:.4} evicted-miss {:.4} \
                         evictions {} ({:.1}s)",
                        mb,
                        c.label,
                        p.result.hit_ratio(),
                        p.result.byte_hit_ratio(),
                        p.result.eviction_miss_ratio(),
                        p.stats.get("evictions").copied().unwrap_or(0),
                        started.elapsed().as_secs_f64()
                    );
                    points.push(p);
                }
            }
            if let Some(python) = &a.reference_python {
                references.extend(simulate_references(&a, python, load, sizes, warmup)?);
            }
        }
        results.push(WorkloadResult {
            name: w.name(),
            title: w.title(),
            warmups,
            points,
            references,
            oracles,
        });
    }
    let md = markdown(&results, &servers, a.curve);
    println!("{md}");
    if let Some(out) = &a.out {
        let mut md = md;
        for r in &results {
            if memory.len() >= 3 {
                let file = format!("mrc-{}.png", r.name);
                miss_ratio_chart(out, &file, &r.title, &r.points, &r.references)?;
                let _ = writeln!(md, "![{file}]({file})\n");
            }
        }
        let json = serde_json::json!({
            "command": command_line(),
            "machine": MachineInfo::detect(),
            "workloads": results,
        });
        std::fs::write(
            out.join("results.json"),
            serde_json::to_string_pretty(&json)?,
        )?;
        std::fs::write(out.join("results.md"), md)?;
        eprintln!("wrote {}", out.display());
    }
    Ok(())
}

/// The offline references of `load` at every size in `sizes`.
fn oracle_points(
    load: &Workload,
    sizes: &[u64],
    rate: Option<f64>,
    warmup: u64,
) -> Result<Vec<OraclePoint>> {
    let mut out = Vec::new();
    for &mb in sizes {
        let result = oracle::references(
            || load.requests(),
            &OracleConfig {
                capacity: mb << 20,
                item_overhead: reference::SHOALD_ITEM_OVERHEAD,
                rate,
                warmup,
            },
        )?;
        eprintln!(
            "{:>5} MiB popularity oracle hit {:.4} ({:.4} with TTL items free), \
             never evicting {:.4}",
            mb,
            result.popularity_oracle(),
            result.popularity_oracle_free_ttl(),
            result.never_evicting()
        );
        out.push(OraclePoint {
            memory_mb: mb,
            result,
        });
    }
    Ok(out)
}

/// libCacheSim's reference policies over `load` (written as oracleGeneral unless it is
/// one already) at `sizes`.
fn simulate_references(
    a: &HitRatioArgs,
    python: &Path,
    load: &Workload,
    sizes: &[u64],
    warmup: u64,
) -> Result<Vec<RefPoint>> {
    if let Workload::File {
        path,
        format: TraceFormat::Oracle,
        ..
    } = load
    {
        return Ok(reference::simulate(
            python,
            &a.reference_script,
            path,
            sizes,
            warmup,
        )?);
    }
    let tmp = std::env::temp_dir().join(format!(
        "shoal-hitratio-{}-{}.oracleGeneral",
        load.name(),
        std::process::id()
    ));
    let reqs: Vec<Request> = load.requests()?.collect::<Result<_, _>>()?;
    let mut f = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
    trace_file::write_oracle(&mut f, reqs)?;
    drop(f);
    let refs = reference::simulate(python, &a.reference_script, &tmp, sizes, warmup);
    let _ = std::fs::remove_file(&tmp);
    Ok(refs?)
}

/// The report: per workload, a row per cache size with every contender's object and byte
/// hit ratio, shoald's miss ratio against every other server's, and the references.
fn markdown(results: &[WorkloadResult], servers: &[Contender], _curve: bool) -> String {
    let mut m = String::new();
    let _ = writeln!(m, "# Hit ratio: demand-fill replay\n");
    let _ = writeln!(m, "Command: `{}`  ", command_line());
    let _ = writeln!(m, "Machine: {}\n", MachineInfo::detect().line());
    for r in results {
        let _ = writeln!(m, "## {}\n", r.title);
        let warmups: Vec<String> = r.warmups.iter().map(u64::to_string).collect();
        let _ = writeln!(
            m,
            "Counted after the first {} requests{}.\n",
            warmups.join(" / "),
            if warmups.len() > 1 {
                " (per cache size, in order)"
            } else {
                ""
            }
        );
        if !r.points.is_empty() {
            hit_ratio_table(&mut m, r, servers);
            misses_by_cause(&mut m, r);
        }
        oracle_references(&mut m, r);
    }
    m
}

/// Per size, every contender's object and byte hit ratio, shoald's miss ratio against
/// every other server's, and the libCacheSim references.
fn hit_ratio_table(m: &mut String, r: &WorkloadResult, servers: &[Contender]) {
    let shoald = servers.iter().find(|c| c.kind == ServerKind::Shoald);
    let mut head = String::from("| MiB |");
    let mut rule = String::from("|---:|");
    for c in servers {
        let _ = write!(head, " {} hit (byte hit) |", c.label);
        rule.push_str("---:|");
    }
    if let Some(s) = shoald {
        for c in servers.iter().filter(|c| c.kind != ServerKind::Shoald) {
            let _ = write!(head, " {} miss / {} miss |", s.label, c.label);
            rule.push_str("---:|");
        }
    }
    let algos: Vec<String> = {
        // In first-seen order, each once (the points come size by size).
        let mut v: Vec<String> = Vec::new();
        for x in &r.references {
            if !v.contains(&x.algorithm) {
                v.push(x.algorithm.clone());
            }
        }
        v
    };
    for a in &algos {
        let _ = write!(head, " libCacheSim {a} |");
        rule.push_str("---:|");
    }
    let _ = writeln!(m, "{head}\n{rule}");
    let mut sizes: Vec<u64> = r.points.iter().map(|p| p.memory_mb).collect();
    sizes.dedup();
    for mb in sizes {
        let at = |label: &str| {
            r.points
                .iter()
                .find(|p| p.memory_mb == mb && p.contender == label)
        };
        let _ = write!(m, "| {mb} |");
        for c in servers {
            match at(&c.label) {
                Some(p) => {
                    let _ = write!(
                        m,
                        " {:.3} ({:.3}) |",
                        p.result.hit_ratio(),
                        p.result.byte_hit_ratio()
                    );
                }
                None => m.push_str(" - |"),
            }
        }
        if let Some(s) = shoald {
            for c in servers.iter().filter(|c| c.kind != ServerKind::Shoald) {
                match (at(&s.label), at(&c.label)) {
                    (Some(a), Some(b)) if b.result.miss_ratio() > 0.0 => {
                        let _ = write!(
                            m,
                            " {:.2}x |",
                            a.result.miss_ratio() / b.result.miss_ratio()
                        );
                    }
                    _ => m.push_str(" - |"),
                }
            }
        }
        for a in &algos {
            match r
                .references
                .iter()
                .find(|x| x.memory_mb == mb && &x.algorithm == a)
            {
                Some(x) => {
                    let _ = write!(m, " {:.3} |", x.hit_ratio);
                }
                None => m.push_str(" - |"),
            }
        }
        m.push('\n');
    }
    m.push('\n');
}

/// Per size and server, the counted reads that missed by cause: a key the replay never
/// wrote (no cache avoids it), a TTL that ran out (the trace's), or an eviction of a live
/// item (the server's). Only the last is the eviction policy's doing.
fn misses_by_cause(m: &mut String, r: &WorkloadResult) {
    let _ = writeln!(
        m,
        "Misses by cause, as shares of counted reads (new key / TTL run out / evicted \
         while live):\n\n| MiB | server | new | expired | evicted |\n|---:|---|---:|---:|---:|"
    );
    for p in &r.points {
        let r = &p.result;
        let _ = writeln!(
            m,
            "| {} | {} | {:.4} | {:.4} | {:.4} |",
            p.memory_mb,
            p.contender,
            r.share_of_reads(r.misses_new),
            r.share_of_reads(r.misses_expired),
            r.eviction_miss_ratio()
        );
    }
    m.push('\n');
}

/// Per size, the offline references: the popularity oracle and the cache that never
/// evicts.
fn oracle_references(m: &mut String, r: &WorkloadResult) {
    if r.oracles.is_empty() {
        return;
    }
    let _ = writeln!(
        m,
        "Offline references (`shoal_bench::hitratio::oracle`): a cache of these bytes of \
         shoald items that knows every key's popularity in advance, and one that never \
         evicts (the oracle keeps items with a TTL while live, in room set aside for their \
         peak; \"TTL free\" gives them no room at all):\n\n\
         | MiB | popularity oracle hit | oracle, TTL free | never evicting hit | TTL items' peak MiB |\n\
         |---:|---:|---:|---:|---:|"
    );
    for o in &r.oracles {
        let _ = writeln!(
            m,
            "| {} | {:.4} | {:.4} | {:.4} | {:.1} |",
            o.memory_mb,
            o.result.popularity_oracle(),
            o.result.popularity_oracle_free_ttl(),
            o.result.never_evicting(),
            o.result.ttl_bytes_peak as f64 / f64::from(1 << 20)
        );
    }
    m.push('\n');
}
