//! The five field reports in `shared/seeds/`, one experiment each: [`hash`] (seeds 000
//! and 002), [`cas`] (001), [`versus`] (003) and [`queue`] (004). [`Env`] says which
//! servers to start (or which running ones to use) and how big a run is.

pub mod cas;
mod conn;
pub mod hash;
pub mod queue;
pub mod versus;

use crate::server::ServerProcess;
use crate::BenchError;
use serde::Serialize;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// How big a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Seconds in total: for the test suite.
    Smoke,
    /// A minute or two per experiment.
    Quick,
    /// The seed's own parameters (or as close as one machine allows).
    Full,
}

impl Mode {
    /// Picks the value for this mode.
    pub fn pick<T>(self, smoke: T, quick: T, full: T) -> T {
        match self {
            Mode::Smoke => smoke,
            Mode::Quick => quick,
            Mode::Full => full,
        }
    }
}

/// A kind of server an experiment can start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerKind {
    /// This workspace's memcached-compatible cache.
    Shoald,
    /// Debian's memcached.
    Memcached,
    /// Debian's redis-server.
    Redis,
    /// This workspace's durable queue.
    ShoalQueued,
}

impl ServerKind {
    /// The name used in reports and in `--target NAME=ADDR`.
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Shoald => "shoald",
            ServerKind::Memcached => "memcached",
            ServerKind::Redis => "redis",
            ServerKind::ShoalQueued => "shoal-queued",
        }
    }

    /// The kind named `name` (as [`ServerKind::name`] spells it), if any.
    pub fn from_name(name: &str) -> Option<Self> {
        [
            ServerKind::Shoald,
            ServerKind::Memcached,
            ServerKind::Redis,
            ServerKind::ShoalQueued,
        ]
        .into_iter()
        .find(|k| k.name() == name)
    }

    /// Where the binary comes from, for a "skipped" line.
    pub fn provider(self) -> &'static str {
        match self {
            ServerKind::Shoald => {
                "build it: cargo build --release -p shoal-server (or --shoald PATH)"
            }
            ServerKind::Memcached => "Debian package memcached (apt-get install memcached)",
            ServerKind::Redis => "Debian package redis-server (apt-get install redis-server)",
            ServerKind::ShoalQueued => {
                "build it: cargo build --release -p shoal-queued (or --shoal-queued PATH)"
            }
        }
    }
}

/// Which servers exist and how big runs are: shared by every experiment.
#[derive(Clone, Debug)]
pub struct Env {
    /// Run size.
    pub mode: Mode,
    /// Binaries found, by kind.
    pub bins: HashMap<ServerKind, PathBuf>,
    /// Running servers to use instead of starting them (`--target NAME=ADDR,ADDR`).
    pub targets: HashMap<ServerKind, Vec<SocketAddr>>,
    /// Client threads for the generator.
    pub threads: usize,
    /// Memory per server node in MiB (`-m`, redis `maxmemory`).
    pub memory_mib: u64,
    /// Server worker threads (`-t`; redis is single-threaded).
    pub server_threads: usize,
    /// Connection limit given to every server (`-c`, redis `maxclients`).
    pub conn_limit: usize,
    /// shoal-queued's `--fsync` (MemcacheQ ran with `-N`, no sync).
    pub queue_fsync: String,
}

/// Servers an experiment uses: the addresses, and the processes if it started them.
pub struct Nodes {
    /// What they are.
    pub kind: ServerKind,
    /// Where they listen.
    pub addrs: Vec<SocketAddr>,
    /// The processes started for this experiment (empty for `--target`), killed on drop.
    pub procs: Vec<ServerProcess>,
}

impl Nodes {
    /// The data directory of the first started node, if it has one.
    pub fn data_dir(&self) -> Option<&Path> {
        self.procs.first().and_then(|p| p.data_dir.as_deref())
    }
}

impl Env {
    /// An environment with the given binaries and sizes; no targets.
    pub fn new(mode: Mode) -> Self {
        Env {
            mode,
            bins: HashMap::new(),
            targets: HashMap::new(),
            threads: 2,
            memory_mib: 1024,
            server_threads: 2,
            conn_limit: 4096,
            queue_fsync: "5".into(),
        }
    }

    /// Whether servers of `kind` are available (a binary, or targets).
    pub fn has(&self, kind: ServerKind) -> bool {
        self.targets.contains_key(&kind) || self.bins.contains_key(&kind)
    }

    /// Why `kind` is skipped, if it is.
    pub fn skip_reason(&self, kind: ServerKind) -> Option<String> {
        (!self.has(kind)).then(|| format!("{}: not found; {}", kind.name(), kind.provider()))
    }

    /// `count` servers of `kind`: the `--target` addresses if given (at least `count`),
    /// else started here with the shared memory/thread/connection settings plus `extra`
    /// arguments. `Ok(None)` means skipped (no binary), with the reason in `skipped`.
    pub fn nodes(
        &self,
        kind: ServerKind,
        count: usize,
        extra: &[&str],
        skipped: &mut Vec<String>,
    ) -> Result<Option<Nodes>, BenchError> {
        if let Some(addrs) = self.targets.get(&kind) {
            if addrs.len() < count {
                return Err(BenchError::Config(format!(
                    "--target {} gives {} address(es); this experiment needs {count}",
                    kind.name(),
                    addrs.len()
                )));
            }
            return Ok(Some(Nodes {
                kind,
                addrs: addrs[..count].to_vec(),
                procs: Vec::new(),
            }));
        }
        let Some(bin) = self.bins.get(&kind) else {
            let why = format!("{}: not found; {}", kind.name(), kind.provider());
            if !skipped.contains(&why) {
                skipped.push(why);
            }
            return Ok(None);
        };
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let mem = self.memory_mib.to_string();
        let thr = self.server_threads.to_string();
        let conns = self.conn_limit.to_string();
        let mut procs = Vec::with_capacity(count);
        for _ in 0..count {
            let mut args: Vec<String> = match kind {
                ServerKind::Shoald | ServerKind::Memcached => {
                    vec![
                        "-m".into(),
                        mem.clone(),
                        "-t".into(),
                        thr.clone(),
                        "-c".into(),
                        conns.clone(),
                    ]
                }
                ServerKind::Redis => vec![
                    "--maxmemory".into(),
                    format!("{mem}mb"),
                    "--maxmemory-policy".into(),
                    "allkeys-lru".into(),
                    "--maxclients".into(),
                    conns.clone(),
                ],
                ServerKind::ShoalQueued => {
                    vec!["-t".into(), thr.clone(), "-c".into(), conns.clone()]
                }
            };
            args.extend(extra.iter().cloned());
            let p = match kind {
                ServerKind::Shoald => ServerProcess::start_shoald(bin, &args)?,
                ServerKind::Memcached => ServerProcess::start_memcached(bin, &args)?,
                ServerKind::Redis => ServerProcess::start_redis(bin, &args)?,
                ServerKind::ShoalQueued => {
                    ServerProcess::start_queued(bin, &self.queue_fsync, &args)?
                }
            };
            procs.push(p);
        }
        Ok(Some(Nodes {
            kind,
            addrs: procs.iter().map(|p| p.addr).collect(),
            procs,
        }))
    }
}

/// Prints a progress line on stderr.
pub fn note(experiment: &str, msg: &str) {
    eprintln!("[{experiment}] {msg}");
}
