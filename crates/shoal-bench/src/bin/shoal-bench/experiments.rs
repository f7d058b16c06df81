//! The seed experiments (`shoal-bench hash`, `cas`, `compare`, `queue` and `all`): which
//! servers to start or use, and one report for the experiments run.

use crate::util::{command_line, resolve, which, workspace_bin};
use anyhow::{Context, Result};
use shoal_bench::machine::MachineInfo;
use shoal_bench::report::{self, Section};
use shoal_bench::seeds::{self, Env, Mode, ServerKind};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Options shared by the seed experiments.
#[derive(clap::Args, Clone)]
pub struct ExpArgs {
    /// A minute or two per experiment instead of the seed's full parameters.
    #[arg(long)]
    pub quick: bool,
    /// Seconds in total (for the test suite).
    #[arg(long, hide = true, conflicts_with = "quick")]
    pub smoke: bool,
    /// Write results.md, results.json and PNG charts here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Use running servers instead of starting them: NAME=ADDR[,ADDR...] with NAME one
    /// of shoald, memcached, redis, shoal-queued. Repeatable.
    #[arg(long, value_name = "NAME=ADDRS")]
    pub target: Vec<String>,
    /// The shoald binary (default: next to this program, else on PATH).
    #[arg(long)]
    pub shoald: Option<PathBuf>,
    /// The shoal-queued binary (default: next to this program, else on PATH).
    #[arg(long)]
    pub shoal_queued: Option<PathBuf>,
    /// The memcached binary.
    #[arg(long, default_value = "memcached")]
    pub memcached: PathBuf,
    /// The redis-server binary.
    #[arg(long, default_value = "redis-server")]
    pub redis_server: PathBuf,
    /// Client threads.
    #[arg(short = 'T', long, default_value_t = 2)]
    pub threads: usize,
    /// Memory per server node, MiB.
    #[arg(long, default_value_t = 1024)]
    pub memory_mib: u64,
    /// shoal-queued's --fsync (always, never, or an interval in ms).
    #[arg(long, default_value = "5")]
    pub queue_fsync: String,
}

/// One seed experiment.
#[derive(Clone, Copy)]
pub enum Exp {
    Hash,
    Cas,
    Compare,
    Queue,
}

/// `--target NAME=ADDR[,ADDR...]` values, each address resolved and checked reachable.
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

/// Runs `which_exps` against the servers `a` names or starts, and prints (and with
/// `--out` writes) one report for them all.
pub fn run(a: ExpArgs, which_exps: &[Exp]) -> Result<()> {
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
