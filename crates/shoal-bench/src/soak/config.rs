//! What a soak runs: the server, the load's shape, and the budget its RSS is judged by.

use crate::load::secs;
use crate::report::num;
use crate::seeds::ServerKind;
use crate::workload::ValueSize;
use crate::BenchError;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// Queues shoal-queued is driven through.
pub const QUEUES: u64 = 4;
/// The longest first and last windows compared for flatness.
const WINDOW_MAX: Duration = Duration::from_secs(60);
/// One MiB, the unit of `-m` and of every number reported.
const MIB: f64 = 1024.0 * 1024.0;

/// What to run.
#[derive(Clone, Debug, Serialize)]
pub struct SoakConfig {
    /// The server under test.
    pub server: ServerKind,
    /// Its binary.
    pub bin: PathBuf,
    /// How long the load runs.
    #[serde(serialize_with = "secs")]
    pub duration: Duration,
    /// The start of the run that is not judged (memory filling up).
    #[serde(serialize_with = "secs")]
    pub warmup: Duration,
    /// The server's memory limit in MiB (`-m`).
    pub memory_mb: u64,
    /// Connections in total, churners and slow readers.
    pub conns: usize,
    /// Fraction of the connections that are slow readers.
    pub slow_readers: f64,
    /// Client threads (each a single-threaded event loop).
    pub threads: usize,
    /// Server worker threads (`-t`).
    pub server_threads: usize,
    /// Value sizes, drawn log-uniformly from the range.
    pub value_size: ValueSize,
    /// The key space as a multiple of memory: keys x mean value = this x `memory_mb`.
    pub key_space: f64,
    /// Fraction of churner requests that are sets.
    pub set_ratio: f64,
    /// Keys in each slow reader's multi-get.
    pub multiget_keys: usize,
    /// Bytes a slow reader reads per 100 ms.
    pub slow_read_bytes: usize,
    /// The verdict's fixed allowance above `memory_mb`, MiB.
    pub overhead_mb: f64,
    /// The verdict's allowance per 100 connections, MiB.
    pub overhead_per_100_conns_mb: f64,
    /// shoal-queued's `--fsync`.
    pub queue_fsync: String,
    /// Random seed.
    pub seed: u64,
    /// Further flags for the server (e.g. `--io-uring`), after the soak's own.
    pub extra_args: Vec<String>,
}

impl SoakConfig {
    /// The defaults of `shoal-bench soak` for `server` started from `bin`.
    pub fn new(server: ServerKind, bin: PathBuf) -> Self {
        let duration = Duration::from_secs(600);
        SoakConfig {
            server,
            bin,
            duration,
            warmup: Self::auto_warmup(duration),
            memory_mb: 64,
            conns: 100,
            slow_readers: 0.1,
            threads: 2,
            server_threads: 2,
            value_size: ValueSize {
                min: 10,
                max: 500 * 1024,
            },
            key_space: 4.0,
            // Dequeues must keep up with enqueues; a cache needs sets to churn.
            set_ratio: if server == ServerKind::ShoalQueued {
                0.5
            } else {
                0.3
            },
            multiget_keys: 100,
            slow_read_bytes: 4 * 1024,
            overhead_mb: 64.0,
            overhead_per_100_conns_mb: 2.0,
            queue_fsync: "5".into(),
            seed: 0x50a6,
            extra_args: Vec::new(),
        }
    }

    /// The default warm-up: a fifth of the run, at most a minute.
    pub fn auto_warmup(duration: Duration) -> Duration {
        (duration / 5).min(WINDOW_MAX)
    }

    /// Checks the combination of options.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |m: &str| Err(BenchError::Config(m.to_string()));
        if self.server == ServerKind::Redis {
            return bad("soak drives shoald, memcached or shoal-queued (memcache protocol)");
        }
        if self.duration < Duration::from_secs(2) {
            return bad("--duration must be at least 2s");
        }
        if self.warmup + Duration::from_secs(1) > self.duration {
            return bad("--warmup must leave at least 1s of the run to judge");
        }
        if !(8..=1 << 20).contains(&self.memory_mb) {
            return bad("--memory-mb must be between 8 and 1048576");
        }
        if self.conns == 0 || self.threads == 0 || self.server_threads == 0 {
            return bad("--conns, --threads and --server-threads must be at least 1");
        }
        if !(0.0..=1.0).contains(&self.slow_readers) {
            return bad("--slow-readers must be between 0 and 1");
        }
        if !(0.0..=1.0).contains(&self.set_ratio) {
            return bad("--set-ratio must be between 0 and 1");
        }
        if self.value_size.min == 0 || self.value_size.max > 1000 * 1024 {
            return bad(
                "--value-size must be within 1 B and 1000 KiB (the servers' 1 MiB item limit)",
            );
        }
        if !(self.key_space.is_finite() && self.key_space > 0.0) {
            return bad("--key-space must be a positive multiple of memory");
        }
        if !(1..=1000).contains(&self.multiget_keys) {
            return bad("--multiget-keys must be between 1 and 1000");
        }
        if self.slow_read_bytes == 0 {
            return bad("--slow-read-kb must be positive");
        }
        if !(self.overhead_mb.is_finite()
            && self.overhead_mb >= 0.0
            && self.overhead_per_100_conns_mb.is_finite()
            && self.overhead_per_100_conns_mb >= 0.0)
        {
            return bad("the overhead allowances must be non-negative MiB");
        }
        Ok(())
    }

    /// The verdict's limit on RSS after warm-up, MiB: `-m` + fixed + per-connection.
    pub fn budget_mb(&self) -> f64 {
        self.memory_mb as f64
            + self.overhead_mb
            + self.overhead_per_100_conns_mb * self.conns as f64 / 100.0
    }

    /// The budget spelled out, for reports.
    pub fn budget_line(&self) -> String {
        format!(
            "{} MiB (-m) + {} MiB fixed + {} MiB per 100 connections x {} connections = {} MiB",
            self.memory_mb,
            self.overhead_mb,
            self.overhead_per_100_conns_mb,
            self.conns,
            num(self.budget_mb())
        )
    }

    /// Distinct keys: enough that they hold `key_space` times the memory limit (for a
    /// queue, the queue count).
    pub fn keys(&self) -> u64 {
        if self.server == ServerKind::ShoalQueued {
            return QUEUES;
        }
        let bytes = self.key_space * self.memory_mb as f64 * MIB;
        ((bytes / self.value_size.log_uniform_mean().max(1.0)).ceil() as u64).max(100)
    }

    /// Slow readers among the connections.
    pub fn slow_conns(&self) -> usize {
        ((self.conns as f64 * self.slow_readers).round() as usize).min(self.conns)
    }

    /// The window compared at each end of the judged part of the run.
    pub fn window(&self) -> Duration {
        (self.duration.saturating_sub(self.warmup) / 2).min(WINDOW_MAX)
    }

    /// The server's arguments (the port and address are added when starting it).
    pub fn server_args(&self) -> Vec<String> {
        let mut args = self.own_server_args();
        args.extend(self.extra_args.iter().cloned());
        args
    }

    fn own_server_args(&self) -> Vec<String> {
        let conn_limit = (self.conns * 2 + 64).max(1024).to_string();
        let threads = self.server_threads.to_string();
        match self.server {
            ServerKind::ShoalQueued => {
                // Its memory bound is per queue: split -m over the queues. The byte cap
                // (on disk) keeps a queue that producers get ahead of from growing forever.
                let share_kib = self.memory_mb * 1024 / QUEUES;
                vec![
                    "-t".into(),
                    threads,
                    "-c".into(),
                    conn_limit,
                    "--queue-memory".into(),
                    format!("{share_kib}k"),
                    "--max-bytes".into(),
                    format!("{}k", share_kib * 2),
                    "--discard-old".into(),
                ]
            }
            _ => vec![
                "-m".into(),
                self.memory_mb.to_string(),
                "-t".into(),
                threads,
                "-c".into(),
                conn_limit,
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(kind: ServerKind) -> SoakConfig {
        SoakConfig::new(kind, PathBuf::from("/bin/true"))
    }

    #[test]
    fn budget_and_key_space() {
        let c = cfg(ServerKind::Shoald);
        assert_eq!(c.budget_mb(), 64.0 + 64.0 + 2.0);
        assert!(c.budget_line().contains("= 130 MiB"), "{}", c.budget_line());
        // 4 x 64 MiB over a ~47 KB mean value.
        assert!((5_000..6_500).contains(&c.keys()), "{}", c.keys());
        assert_eq!(cfg(ServerKind::ShoalQueued).keys(), QUEUES);
        assert_eq!(c.slow_conns(), 10);
        assert_eq!(c.warmup, Duration::from_secs(60));
        assert_eq!(c.window(), Duration::from_secs(60));
        let q = cfg(ServerKind::ShoalQueued).server_args().join(" ");
        assert!(
            q.contains("--queue-memory 16384k --max-bytes 32768k"),
            "{q}"
        );
        assert!(c.server_args().join(" ").starts_with("-m 64 -t 2 -c 1024"));
    }

    #[test]
    fn refuses_bad_combinations() {
        let mut c = cfg(ServerKind::Shoald);
        c.validate().unwrap();
        c.duration = Duration::from_secs(5);
        c.warmup = SoakConfig::auto_warmup(c.duration);
        c.validate().unwrap();
        assert_eq!(c.window(), Duration::from_secs(2));
        c.warmup = Duration::from_secs(5);
        assert!(c.validate().is_err());
        let mut c = cfg(ServerKind::Memcached);
        c.slow_readers = 1.5;
        assert!(c.validate().is_err());
        assert!(cfg(ServerKind::Redis).validate().is_err());
    }
}
