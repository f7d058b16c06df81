//! The `shoal-bench` command line.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use shoal_bench::compare::{self, CompareConfig};
use shoal_bench::fill::{self, FillConfig};
use shoal_bench::load::{self, LoadConfig, Refill};
use shoal_bench::machine::MachineInfo;
use shoal_bench::parse_duration;
use shoal_bench::proto::Protocol;
use shoal_bench::report::{self, Section};
use shoal_bench::seeds::{self, Env, Mode, ServerKind};
use shoal_bench::soak::{self, SoakConfig};
use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "shoal-bench",
    version,
    about = "Load generator and benchmarks for shoald and memcached"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Closed-loop get/set load against one server (memcached text protocol).
    Load(LoadArgs),
    /// Set keys 0..N once, pipelined, then count how many are still retrievable.
    Fill(FillArgs),
    /// shoald vs memcached: same flags, same loads, alternating, repeated; memcaslap;
    /// memory efficiency.
    CompareMemcached(CompareArgs),
    /// Seeds 000+002: native/ketama/election placement over 3 nodes, text vs binary;
    /// hash-function speed; modulo vs consistent; multi-get vs gets; keys moved.
    Hash(ExpArgs),
    /// Seed 001: gets+cas under contention, 1..100 connections; decr and meta ma.
    Cas(ExpArgs),
    /// Seed 003: shoald vs memcached vs redis, 1 and 4 nodes, 1/10/100 KB, 1/200/1000 conns.
    Compare(ExpArgs),
    /// Seed 004: shoal-queued (and redis lists), 256-byte messages, disk use.
    Queue(ExpArgs),
    /// Every seed experiment, one report.
    All(ExpArgs),
    /// Memory under abuse: starts a server with -m, runs mixed load with connection churn
    /// and slow readers, samples its RSS every second; fails when RSS after warm-up
    /// exceeds -m plus an overhead allowance.
    Soak(SoakArgs),
    /// Warm restart (-e memory file, SIGUSR1): exec-to-serving time with the whole cache
    /// back, shoald beside memcached, at several item counts.
    Restart(RestartArgs),
}

#[derive(clap::Args)]
struct RestartArgs {
    /// Item counts (comma-separated; k/m suffixes).
    #[arg(long, default_value = "100k,1m,4m", value_delimiter = ',')]
    items: Vec<String>,
    /// Value size in bytes.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// -m in MiB.
    #[arg(short, long, default_value_t = 1024)]
    memory_mb: usize,
    /// Restarts per server and size; the median is reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Where the memory files go (tmpfs).
    #[arg(long, default_value = "/dev/shm")]
    dir: PathBuf,
    /// shoald binary [default: beside this program, else on PATH].
    #[arg(long)]
    shoald: Option<PathBuf>,
    /// memcached binary (must support -e: 1.5.18 or later).
    #[arg(long, default_value = "memcached")]
    memcached: PathBuf,
    /// Write restart.md and restart.json here.
    #[arg(long, default_value = "bench/results/restart")]
    out: PathBuf,
}

#[derive(clap::Args)]
struct SoakArgs {
    /// The server to start: shoald, memcached or shoal-queued.
    #[arg(long, value_parser = ["shoald", "memcached", "shoal-queued"])]
    server: String,
    /// Its binary (default: shoald and shoal-queued next to this program, else on PATH;
    /// memcached on PATH).
    #[arg(long)]
    bin: Option<PathBuf>,
    /// How long the load runs (600s, 10m, 5s).
    #[arg(short = 't', long, default_value = "600s", value_parser = dur)]
    duration: Duration,
    /// The start of the run that is not judged, while memory fills [default: a fifth of
    /// --duration, at most 60s].
    #[arg(short, long, value_parser = dur)]
    warmup: Option<Duration>,
    /// The server's memory limit, MiB: -m for shoald and memcached; for shoal-queued,
    /// split over its queues as --queue-memory.
    #[arg(short, long, default_value_t = 64)]
    memory_mb: u64,
    /// Connections in total (churners and slow readers).
    #[arg(short, long, default_value_t = 100)]
    conns: usize,
    /// Fraction of the connections that are slow readers.
    #[arg(long, default_value_t = 0.1)]
    slow_readers: f64,
    /// The verdict's fixed allowance above --memory-mb, MiB (code, hash table, thread
    /// stacks, allocator slack).
    #[arg(long, default_value_t = 64.0)]
    overhead_mb: f64,
    /// The verdict's allowance per 100 connections, MiB (their buffers).
    #[arg(long, default_value_t = 2.0)]
    overhead_per_100_conns_mb: f64,
    /// Value sizes, drawn log-uniformly from this range (k/m suffixes).
    #[arg(long, default_value = "10-500k")]
    value_size: String,
    /// Key space as a multiple of memory (keys x mean value size = this x -m).
    #[arg(long, default_value_t = 4.0)]
    key_space: f64,
    /// Fraction of churners' requests that are sets [default: 0.3; 0.5 for shoal-queued,
    /// so dequeues keep up with enqueues].
    #[arg(long)]
    set_ratio: Option<f64>,
    /// Keys in each slow reader's multi-get.
    #[arg(long, default_value_t = 100)]
    multiget_keys: usize,
    /// KiB a slow reader reads per 100 ms.
    #[arg(long, default_value_t = 4)]
    slow_read_kb: usize,
    /// Client threads.
    #[arg(short = 'T', long, default_value_t = 2)]
    threads: usize,
    /// Server worker threads (-t).
    #[arg(long, default_value_t = 2)]
    server_threads: usize,
    /// shoal-queued's --fsync (always, never, or an interval in ms).
    #[arg(long, default_value = "5")]
    queue_fsync: String,
    /// Random seed.
    #[arg(long, default_value_t = 0x50a6)]
    seed: u64,
    /// Write soak-SERVER.png, .json and .md here.
    #[arg(long, default_value = "bench/results/soak")]
    out: PathBuf,
    /// Further flags for the server, space-separated (e.g. "--io-uring"); they also
    /// name the result files (soak-shoald-io-uring.png).
    #[arg(long, allow_hyphen_values = true)]
    server_args: Option<String>,
}

#[derive(clap::Args, Clone)]
struct ExpArgs {
    /// A minute or two per experiment instead of the seed's full parameters.
    #[arg(long)]
    quick: bool,
    /// Seconds in total (for the test suite).
    #[arg(long, hide = true, conflicts_with = "quick")]
    smoke: bool,
    /// Write results.md, results.json and PNG charts here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Use running servers instead of starting them: NAME=ADDR[,ADDR...] with NAME one
    /// of shoald, memcached, redis, shoal-queued. Repeatable.
    #[arg(long, value_name = "NAME=ADDRS")]
    target: Vec<String>,
    /// The shoald binary (default: next to this program, else on PATH).
    #[arg(long)]
    shoald: Option<PathBuf>,
    /// The shoal-queued binary (default: next to this program, else on PATH).
    #[arg(long)]
    shoal_queued: Option<PathBuf>,
    /// The memcached binary.
    #[arg(long, default_value = "memcached")]
    memcached: PathBuf,
    /// The redis-server binary.
    #[arg(long, default_value = "redis-server")]
    redis_server: PathBuf,
    /// Client threads.
    #[arg(short = 'T', long, default_value_t = 2)]
    threads: usize,
    /// Memory per server node, MiB.
    #[arg(long, default_value_t = 1024)]
    memory_mib: u64,
    /// shoal-queued's --fsync (always, never, or an interval in ms).
    #[arg(long, default_value = "5")]
    queue_fsync: String,
}

#[derive(clap::Args)]
struct LoadArgs {
    /// Server address; several, comma-separated, with --placement.
    #[arg(short, long, default_value = "127.0.0.1:11211")]
    server: String,
    /// Protocol: text, meta, binary (memcached), resp (redis GET/SET), resp-list
    /// (redis LPUSH/RPOP).
    #[arg(short = 'P', long, value_enum, default_value_t = Protocol::Text)]
    protocol: Protocol,
    /// Client-side placement over several servers (a shoal-ring distribution name:
    /// modula, ketama, election, jump, ...).
    #[arg(long)]
    placement: Option<String>,
    /// Key distribution: uniform, zipfian, zipfian:THETA.
    #[arg(long, default_value = "uniform")]
    key_dist: String,
    /// Send this many requests in total instead of running for --duration.
    #[arg(short = 'n', long)]
    requests: Option<u64>,
    /// Cap requests per second over all connections.
    #[arg(long)]
    rate: Option<f64>,
    /// Client threads.
    #[arg(short = 'T', long, default_value_t = 2)]
    threads: usize,
    /// Connections in total.
    #[arg(short, long, default_value_t = 50)]
    conns: usize,
    /// Requests in flight per connection.
    #[arg(short, long, default_value_t = 1)]
    depth: usize,
    /// Distinct keys.
    #[arg(short, long, default_value_t = 10_000)]
    keys: u64,
    /// Key prefix (keys are prefix + zero-padded index).
    #[arg(long, default_value = "key:")]
    key_prefix: String,
    /// Digits the key index is padded to.
    #[arg(long, default_value_t = 8)]
    key_width: usize,
    /// Value size in bytes, or a range (20-256), k/m suffixes allowed.
    #[arg(short, long, default_value = "100")]
    value_size: String,
    /// Fraction of sets, 0 to 1 (0.1 = 1 set : 9 gets).
    #[arg(long, default_value_t = 0.1)]
    set_ratio: f64,
    /// Measured window (5s, 500ms, 2m).
    #[arg(short = 't', long, default_value = "5s", value_parser = dur)]
    duration: Duration,
    /// Warm-up before the measured window.
    #[arg(short, long, default_value = "1s", value_parser = dur)]
    warmup: Duration,
    /// Do not set every key before starting.
    #[arg(long)]
    no_prefill: bool,
    /// Random seed.
    #[arg(long, default_value_t = 0x5eed)]
    seed: u64,
    /// Pipeline refill: batch (write depth, await all) or window (keep depth in flight).
    #[arg(long, value_enum, default_value_t = Refill::Batch)]
    refill: Refill,
    /// Write the report as JSON here (`-` for stdout, replacing the summary).
    #[arg(long)]
    json: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
}

#[derive(clap::Args)]
struct FillArgs {
    /// Server address.
    #[arg(short, long, default_value = "127.0.0.1:11211")]
    server: String,
    /// Keys to set.
    #[arg(short, long, default_value_t = 1_000_000)]
    keys: u64,
    /// Value size in bytes.
    #[arg(short, long, default_value_t = 100)]
    value_size: usize,
    /// Connections.
    #[arg(short, long, default_value_t = 2)]
    conns: usize,
    /// Sets per pipelined batch.
    #[arg(short, long, default_value_t = 100)]
    depth: usize,
    /// Also print the server's VmRSS (KiB) from /proc/PID/status.
    #[arg(long)]
    pid: Option<u32>,
}

#[derive(clap::Args)]
struct CompareArgs {
    /// The shoald binary (default: next to this program, else on PATH).
    #[arg(long)]
    shoald: Option<PathBuf>,
    /// The memcached binary.
    #[arg(long, default_value = "memcached")]
    memcached: PathBuf,
    /// The memcaslap binary; `none` skips it.
    #[arg(long, default_value = "memcaslap")]
    memcaslap: String,
    /// Runs per scenario and server.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Measured window per run.
    #[arg(short = 't', long, default_value = "5s", value_parser = dur)]
    duration: Duration,
    /// memcaslap run length.
    #[arg(long, default_value = "10s", value_parser = dur)]
    memcaslap_time: Duration,
    /// Pipeline depths, one scenario each.
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    depths: Vec<usize>,
    /// Connections.
    #[arg(short, long, default_value_t = 50)]
    conns: usize,
    /// Client threads.
    #[arg(short = 'T', long, default_value_t = 2)]
    threads: usize,
    /// Value sizes in bytes (k suffix allowed), one scenario per depth and size.
    #[arg(long, value_delimiter = ',', default_value = "100")]
    value_sizes: Vec<String>,
    /// Fraction of sets.
    #[arg(long, default_value_t = 0.1)]
    set_ratio: f64,
    /// Keys.
    #[arg(short, long, default_value_t = 10_000)]
    keys: u64,
    /// A shoald configuration to compare as well: NAME=FLAGS (flags space-separated),
    /// e.g. `io_uring=--io-uring`. Repeatable.
    #[arg(
        long = "variant",
        value_name = "NAME=FLAGS",
        allow_hyphen_values = true
    )]
    variants: Vec<String>,
    /// Also run every server rate-limited at these fractions of memcached's median
    /// throughput (e.g. `0.5,0.8,0.95`), to compare latency at equal offered load.
    #[arg(long, value_delimiter = ',')]
    equal_load: Vec<f64>,
    /// Flags given to every server (replacing `-t 2 -m 256`), space-separated.
    #[arg(long, allow_hyphen_values = true)]
    server_args: Option<String>,
    /// Skip the memory benchmark.
    #[arg(long)]
    no_memory: bool,
    /// Small and fast: 1 repeat of 1 s, memcaslap 2 s, 100k keys for memory.
    #[arg(long)]
    quick: bool,
    /// Write results.json and results.md here.
    #[arg(long)]
    out: Option<PathBuf>,
}

fn dur(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

fn resolve(server: &str) -> Result<SocketAddr> {
    server
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {server}"))?
        .next()
        .with_context(|| format!("{server} has no address"))
}

/// `name` as given if it has a slash, else the first match on PATH.
fn which(name: &Path) -> Option<PathBuf> {
    if name.components().count() > 1 {
        return name.exists().then(|| name.to_path_buf());
    }
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    })
}

fn main() -> Result<()> {
    shoal_bench::server::exit_cleanly_on_interrupt();
    match Cli::parse().cmd {
        Cmd::Load(a) => cmd_load(a),
        Cmd::Fill(a) => cmd_fill(a),
        Cmd::CompareMemcached(a) => cmd_compare(a),
        Cmd::Hash(a) => cmd_seeds(a, &[Exp::Hash]),
        Cmd::Cas(a) => cmd_seeds(a, &[Exp::Cas]),
        Cmd::Compare(a) => cmd_seeds(a, &[Exp::Compare]),
        Cmd::Queue(a) => cmd_seeds(a, &[Exp::Queue]),
        Cmd::All(a) => cmd_seeds(a, &[Exp::Hash, Exp::Cas, Exp::Compare, Exp::Queue]),
        Cmd::Soak(a) => cmd_soak(a),
        Cmd::Restart(a) => cmd_restart(a),
    }
}

/// This command line for reports: the program's file name and its arguments.
fn command_line() -> String {
    std::env::args()
        .map(|a| a.rsplit('/').next().unwrap_or("").to_string())
        .take(1)
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ")
}

#[derive(Clone, Copy)]
enum Exp {
    Hash,
    Cas,
    Compare,
    Queue,
}

/// A workspace binary: the given path, else beside this program, else on PATH.
fn workspace_bin(given: Option<PathBuf>, name: &str) -> Result<Option<PathBuf>> {
    if let Some(p) = given {
        anyhow::ensure!(p.is_file(), "{} does not exist", p.display());
        return Ok(Some(p));
    }
    Ok(std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join(name)))
        .filter(|p| p.is_file())
        .or_else(|| which(Path::new(name))))
}

fn parse_targets(list: &[String]) -> Result<HashMap<ServerKind, Vec<SocketAddr>>> {
    let mut out = HashMap::new();
    for t in list {
        let (name, addrs) = t
            .split_once('=')
            .with_context(|| format!("--target {t:?}: expected NAME=ADDR[,ADDR...]"))?;
        let kind = ServerKind::from_name(name).with_context(|| {
            format!("--target {name:?}: the name must be shoald, memcached, redis or shoal-queued")
        })?;
        let addrs = addrs.split(',').map(resolve).collect::<Result<Vec<_>>>()?;
        for a in &addrs {
            std::net::TcpStream::connect_timeout(a, Duration::from_secs(3))
                .with_context(|| format!("--target {name}: {a} is not reachable"))?;
        }
        out.insert(kind, addrs);
    }
    Ok(out)
}

fn cmd_seeds(a: ExpArgs, which_exps: &[Exp]) -> Result<()> {
    let mode = if a.smoke {
        Mode::Smoke
    } else if a.quick {
        Mode::Quick
    } else {
        Mode::Full
    };
    anyhow::ensure!(a.threads >= 1, "--threads must be at least 1");
    anyhow::ensure!(a.memory_mib >= 16, "--memory-mib must be at least 16");
    let mut env = Env::new(mode);
    env.threads = a.threads;
    env.memory_mib = a.memory_mib;
    env.queue_fsync = a.queue_fsync.clone();
    env.targets = parse_targets(&a.target)?;
    if let Some(p) = workspace_bin(a.shoald.clone(), "shoald")? {
        env.bins.insert(ServerKind::Shoald, p);
    }
    if let Some(p) = workspace_bin(a.shoal_queued.clone(), "shoal-queued")? {
        env.bins.insert(ServerKind::ShoalQueued, p);
    }
    if let Some(p) = which(&a.memcached) {
        env.bins.insert(ServerKind::Memcached, p);
    }
    if let Some(p) = which(&a.redis_server) {
        env.bins.insert(ServerKind::Redis, p);
    }
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let machine = MachineInfo::detect();
    let mut sections = Vec::new();
    for e in which_exps {
        let section = match e {
            Exp::Hash => Section::new("hash", seeds::hash::run(&env).context("hash experiment")?),
            Exp::Cas => Section::new("cas", seeds::cas::run(&env).context("cas experiment")?),
            Exp::Compare => Section::new(
                "compare",
                seeds::versus::run(&env).context("compare experiment")?,
            ),
            Exp::Queue => Section::new(
                "queue",
                seeds::queue::run(&env).context("queue experiment")?,
            ),
        }?;
        for why in section.body.skipped() {
            eprintln!("skipped: {why}");
        }
        sections.push(section);
    }
    let command = command_line();
    let mode_name = match mode {
        Mode::Smoke => "smoke",
        Mode::Quick => "quick",
        Mode::Full => "full",
    };
    match &a.out {
        Some(dir) => {
            report::write(dir, &command, mode_name, &machine, &sections)?;
            println!("wrote {}", dir.join("results.md").display());
        }
        None => println!("{}", report::markdown(&command, &machine, &sections, &[])),
    }
    Ok(())
}

fn cmd_load(a: LoadArgs) -> Result<()> {
    let servers = a
        .server
        .split(',')
        .map(resolve)
        .collect::<Result<Vec<_>>>()?;
    let placement = match (&a.placement, servers.len()) {
        (None, 1) => None,
        (None, _) => anyhow::bail!("several servers need --placement (e.g. ketama)"),
        (Some(p), _) => {
            let d: shoal_ring::Distribution =
                p.parse().map_err(|e| anyhow::anyhow!("--placement: {e}"))?;
            let list = servers
                .iter()
                .map(|s| shoal_ring::Server::new(s.ip().to_string(), s.port()))
                .collect();
            Some(std::sync::Arc::new(
                shoal_ring::Ring::new(shoal_ring::RingConfig::new(d), list)
                    .map_err(|e| anyhow::anyhow!("--placement: {e}"))?,
            ))
        }
    };
    if a.protocol == Protocol::RespList && !a.no_prefill {
        anyhow::bail!("--protocol resp-list is a queue: add --no-prefill");
    }
    let cfg = LoadConfig {
        servers,
        protocol: a.protocol,
        placement_name: a.placement.clone(),
        placement,
        threads: a.threads,
        conns: a.conns,
        depth: a.depth,
        keys: a.keys,
        key_dist: a.key_dist.parse()?,
        key_prefix: a.key_prefix,
        key_width: a.key_width,
        value_size: a.value_size.parse()?,
        set_ratio: a.set_ratio,
        duration: a.duration,
        warmup: a.warmup,
        requests: a.requests,
        rate: a.rate,
        prefill: !a.no_prefill,
        seed: a.seed,
        refill: a.refill,
        progress: !a.no_progress,
    };
    let report = load::run(&cfg).context("load run failed")?;
    let json = serde_json::to_string_pretty(&report)?;
    match a.json.as_deref() {
        Some(p) if p == Path::new("-") => println!("{json}"),
        Some(p) => {
            std::fs::write(p, json).with_context(|| format!("writing {}", p.display()))?;
            println!("{}", report.summary());
        }
        None => println!("{}", report.summary()),
    }
    if report.failed() {
        anyhow::bail!(
            "the run stopped early (numbers above are up to that point): {}",
            report.failures.join("; ")
        );
    }
    if report.measured.ops() > 0 && report.measured.errors == report.measured.ops() {
        anyhow::bail!("the server answered every request with an error");
    }
    Ok(())
}

fn cmd_fill(a: FillArgs) -> Result<()> {
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

fn cmd_compare(a: CompareArgs) -> Result<()> {
    let shoald = match a.shoald {
        Some(p) => p,
        None => std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(|d| d.join("shoald")))
            .filter(|p| p.is_file())
            .or_else(|| which(Path::new("shoald")))
            .context(
                "shoald not found: build it (cargo build --release --bin shoald) or pass --shoald",
            )?,
    };
    let memcached = which(&a.memcached).with_context(|| {
        format!(
            "{} not found: apt-get install -y memcached",
            a.memcached.display()
        )
    })?;
    let mut cfg = CompareConfig::new(shoald, memcached);
    cfg.memcaslap = match a.memcaslap.as_str() {
        "none" => None,
        name => {
            let found = which(Path::new(name));
            if found.is_none() {
                eprintln!(
                    "memcaslap not found (apt-get install -y libmemcached-tools); skipping it"
                );
            }
            found
        }
    };
    cfg.repeats = a.repeats.max(1);
    cfg.value_sizes = a
        .value_sizes
        .iter()
        .map(|v| parse_size(v).with_context(|| format!("bad value size {v}")))
        .collect::<Result<_>>()?;
    cfg.set_ratio = a.set_ratio;
    cfg.keys = a.keys;
    cfg.equal_load = a.equal_load;
    for v in &a.variants {
        let (name, flags) = v
            .split_once('=')
            .with_context(|| format!("--variant {v}: expected NAME=FLAGS"))?;
        cfg.variants.push((
            name.to_string(),
            flags.split_whitespace().map(String::from).collect(),
        ));
    }
    if let Some(args) = &a.server_args {
        cfg.server_args = args.split_whitespace().map(String::from).collect();
    }
    cfg.duration_secs = a.duration.as_secs_f64();
    cfg.memcaslap_secs = a.memcaslap_time.as_secs().max(1);
    cfg.depths = a.depths;
    cfg.conns = a.conns;
    cfg.threads = a.threads;
    cfg.memory = !a.no_memory;
    if a.quick {
        cfg.repeats = 1;
        cfg.duration_secs = 1.0;
        cfg.warmup_secs = 0.2;
        cfg.memcaslap_secs = 2;
        cfg.memory_keys = 100_000;
    }
    let report = compare::run(&cfg)?;
    let md = report.markdown();
    println!("{md}");
    if let Some(dir) = a.out {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(
            dir.join("results.json"),
            serde_json::to_string_pretty(&report)?,
        )?;
        std::fs::write(dir.join("results.md"), md)?;
    }
    Ok(())
}

fn cmd_soak(a: SoakArgs) -> Result<()> {
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

fn cmd_restart(a: RestartArgs) -> Result<()> {
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

/// "100k" -> 100_000, "4m" -> 4_000_000.
fn parse_count(s: &str) -> Result<u64> {
    let s = s.trim().to_ascii_lowercase();
    let (num, mult) = match s.as_bytes().last() {
        Some(b'k') => (&s[..s.len() - 1], 1_000),
        Some(b'm') => (&s[..s.len() - 1], 1_000_000),
        _ => (s.as_str(), 1),
    };
    let n: u64 = num
        .parse()
        .with_context(|| format!("{s:?} is not a count"))?;
    n.checked_mul(mult).context("count too large")
}

/// A size in bytes: "100" -> 100, "10k" -> 10,240, "1m" -> 1,048,576.
fn parse_size(s: &str) -> Result<usize> {
    let s = s.trim().to_ascii_lowercase();
    let (num, mult) = match s.as_bytes().last() {
        Some(b'k') => (&s[..s.len() - 1], 1024),
        Some(b'm') => (&s[..s.len() - 1], 1024 * 1024),
        _ => (s.as_str(), 1),
    };
    let n: usize = num
        .parse()
        .with_context(|| format!("{s:?} is not a size"))?;
    n.checked_mul(mult).context("size too large")
}
