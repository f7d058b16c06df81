//! Engine and per-queue configuration.

pub mod queue_config;

use queue_config::QueueOverrides;
use std::collections::HashMap;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// When written records are forced to stable storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// Never fsync. An acknowledged record has been handed to the kernel (`write(2)`), so
    /// it survives the process being killed, but not a power loss or kernel crash.
    Never,
    /// fsync before acknowledging. Concurrent writers share one fsync (group commit).
    /// An acknowledged record survives power loss.
    Always,
    /// fsync every interval in the background. Acknowledged records survive the process
    /// being killed; a power loss can lose at most about the last interval.
    Every(Duration),
}

impl FromStr for FsyncPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "never" => Ok(FsyncPolicy::Never),
            "always" => Ok(FsyncPolicy::Always),
            ms => {
                let ms = ms.strip_suffix("ms").unwrap_or(ms);
                match ms.parse::<u64>() {
                    Ok(0) => Ok(FsyncPolicy::Always),
                    Ok(n) if n <= 60_000 => Ok(FsyncPolicy::Every(Duration::from_millis(n))),
                    _ => Err(format!(
                        "invalid fsync policy {s:?}: expected always, never or milliseconds (1..=60000)"
                    )),
                }
            }
        }
    }
}

impl std::fmt::Display for FsyncPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FsyncPolicy::Never => write!(f, "never"),
            FsyncPolicy::Always => write!(f, "always"),
            FsyncPolicy::Every(d) => write!(f, "{}ms", d.as_millis()),
        }
    }
}

/// What an enqueue does when a queue is at one of its limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FullPolicy {
    /// Refuse the new message (the server answers `NOT_STORED`).
    #[default]
    Reject,
    /// Drop the oldest messages until the new one fits.
    DiscardOldest,
}

/// One queue's configuration (Kestrel's per-queue settings that mean something for this
/// engine). Zero means unlimited wherever a number is a limit.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueueLimits {
    /// Most messages the queue holds (Kestrel's `max_items`).
    pub max_items: u64,
    /// Most payload bytes the queue holds (Kestrel's `max_size`).
    pub max_bytes: u64,
    /// Seconds after which a message expires even if its own exptime is later (Kestrel's
    /// `max_age`).
    pub max_age_secs: u32,
    /// What to do when full (Kestrel's `discard_old_when_full`).
    pub full: FullPolicy,
    /// Largest payload this queue accepts, in bytes (Kestrel's `max_item_size`; 0: the
    /// engine's [`EngineConfig::max_item_size`], which also caps it).
    pub max_item_size: u64,
    /// Payload bytes this queue keeps in memory (Kestrel's `max_memory_size`; `None`: the
    /// engine's [`EngineConfig::memory_per_queue`]).
    pub max_memory: Option<u64>,
    /// Where expired messages go instead of being dropped (Kestrel's `expire_to`).
    pub expire_to: Option<String>,
    /// Most expired messages moved to `expire_to` per sweep (Kestrel's
    /// `max_expire_sweep`; 0: all).
    pub max_expire_sweep: u64,
    /// A fanout parent that stores nothing itself, only copies to its children (Kestrel's
    /// `fanout_only`; no effect on a child, as in Kestrel).
    pub fanout_only: bool,
    /// Seconds after its creation (or the server's start, for a queue found on disk)
    /// after which an empty queue is deleted (Kestrel's `max_queue_age`; 0: never).
    pub max_queue_age_secs: u32,
    /// When this queue's writes are fsynced (Kestrel's `sync_journal`; `None`: the
    /// engine's [`EngineConfig::fsync`]).
    pub fsync: Option<FsyncPolicy>,
    /// Kestrel's `keep_journal=false`: the queue writes no log at all and holds every
    /// message in memory (whatever `max_memory`), so nothing of it survives a restart;
    /// bound it with `max_items`/`max_bytes`. Fixed when the queue is opened: a `reload`
    /// that changes it applies at the next start, when a queue found on disk with it set
    /// has its files discarded, as Kestrel erases such a queue's journal.
    pub memory_only: bool,
}

/// Test hooks: log writes that fail as on a full disk, and a sync thread that panics, so
/// those paths can be exercised without filling a real disk or planting a bug.
/// Production code never sets it.
#[derive(Debug, Default)]
pub struct WriteFault {
    fail: AtomicBool,
    panic_sync: AtomicBool,
}

impl WriteFault {
    /// While `on`, every log write fails with `ENOSPC`.
    pub fn set(&self, on: bool) {
        self.fail.store(on, Ordering::SeqCst);
    }

    /// While `on`, the sync thread panics the next time it wakes to fsync.
    pub fn panic_sync_thread(&self, on: bool) {
        self.panic_sync.store(on, Ordering::SeqCst);
    }

    pub(crate) fn check(&self) -> std::io::Result<()> {
        if self.fail.load(Ordering::SeqCst) {
            Err(std::io::Error::from_raw_os_error(libc::ENOSPC))
        } else {
            Ok(())
        }
    }

    pub(crate) fn sync_should_panic(&self) -> bool {
        self.panic_sync.load(Ordering::SeqCst)
    }
}

/// Everything the engine needs to open a data directory.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Directory holding one subdirectory per queue.
    pub data_dir: PathBuf,
    /// Durability of acknowledged writes.
    pub fsync: FsyncPolicy,
    /// A segment is sealed and a new one started once it would exceed this many bytes.
    pub segment_size: u64,
    /// Largest message payload.
    pub max_item_size: usize,
    /// Payload bytes a queue keeps in memory; messages beyond it are read back from disk
    /// when dequeued, so a queue can be far larger than RAM.
    pub memory_per_queue: u64,
    /// Configuration of queues not named in `queue_limits`.
    pub default_limits: QueueLimits,
    /// Per-queue settings by name, applied over `default_limits`; a fanout child
    /// (`parent+child`) takes its parent's, then its own (see [`QueueOverrides`]).
    pub queue_limits: HashMap<String, QueueOverrides>,
    /// Failure injection for tests.
    pub fault: Option<Arc<WriteFault>>,
}

impl EngineConfig {
    /// Defaults: 5 ms fsync interval, 64 MiB segments, 1 MiB items, 64 MiB in memory per
    /// queue, no limits.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        EngineConfig {
            data_dir: data_dir.into(),
            fsync: FsyncPolicy::Every(Duration::from_millis(5)),
            segment_size: 64 << 20,
            max_item_size: 1 << 20,
            memory_per_queue: 64 << 20,
            default_limits: QueueLimits::default(),
            queue_limits: HashMap::new(),
            fault: None,
        }
    }

    /// The configuration that applies to `name`: the default, then (for a fanout child
    /// `parent+child`) the parent's settings, then the queue's own.
    pub fn limits_for(&self, name: &str) -> QueueLimits {
        queue_config::resolve(&self.default_limits, &self.queue_limits, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fsync_policy_parses() {
        assert_eq!("never".parse(), Ok(FsyncPolicy::Never));
        assert_eq!("always".parse(), Ok(FsyncPolicy::Always));
        assert_eq!(
            "5".parse(),
            Ok(FsyncPolicy::Every(Duration::from_millis(5)))
        );
        assert_eq!(
            "20ms".parse(),
            Ok(FsyncPolicy::Every(Duration::from_millis(20)))
        );
        assert!("sometimes".parse::<FsyncPolicy>().is_err());
        assert!("-1".parse::<FsyncPolicy>().is_err());
    }
}
