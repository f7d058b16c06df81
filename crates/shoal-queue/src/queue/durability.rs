//! Durability: what has reached stable storage, published to waiting connections, and
//! the sync thread's fsync of a queue.

use super::Queue;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Durability progress, published to waiting connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Synced {
    /// Every write up to this log sequence number is on stable storage.
    pub lsn: u64,
    /// An fsync failed: later waits cannot be satisfied.
    pub failed: bool,
}

impl Queue {
    /// Forces everything written so far to stable storage and publishes the new durable
    /// position, recording the fsync in the queue's [`SyncMetrics`]. Called by the sync
    /// thread, never on a connection's thread.
    pub(crate) fn sync_now(&self) {
        let metrics = &self.sync_metrics;
        let (file, lsn, writes) = {
            let st = self.state.lock();
            if st.written <= self.synced.borrow().lsn {
                return;
            }
            match st.segments.values().next_back() {
                Some(s) => (s.file.clone(), st.written, st.writes),
                None => return,
            }
        };
        let start = Instant::now();
        let res = file.sync_data();
        metrics.fsync_ns.record_duration(start.elapsed());
        let before = self.synced_writes.swap(writes, Ordering::Relaxed);
        metrics.batch_writes.record(writes.saturating_sub(before));
        match res {
            Ok(()) => {
                self.synced.send_if_modified(|s| {
                    let adv = lsn > s.lsn;
                    s.lsn = s.lsn.max(lsn);
                    adv
                });
            }
            Err(e) => {
                // After a failed fsync the kernel may have dropped the dirty pages, so
                // nothing written since the last good fsync may be acknowledged.
                tracing::error!(queue = %self.name, "fsync failed: {e}");
                self.synced.send_modify(|s| s.failed = true);
            }
        }
    }
}

/// One queue's fsync figures: how long each fsync of its active segment took and how many
/// writes it covered (the group commit's batch). Kept per queue because each fsync is of
/// one queue's file; only the sync thread records (relaxed atomic adds, no lock), and
/// scrapes read. They go away with the queue.
#[derive(Debug)]
pub struct SyncMetrics {
    /// fsync (fdatasync) durations, in nanoseconds.
    pub fsync_ns: shoal_net::metrics::Histogram,
    /// Writes made durable by each fsync.
    pub batch_writes: shoal_net::metrics::Histogram,
}

impl Default for SyncMetrics {
    fn default() -> SyncMetrics {
        SyncMetrics {
            fsync_ns: shoal_net::metrics::Histogram::latency(),
            batch_writes: shoal_net::metrics::Histogram::new(&shoal_net::metrics::COUNT_BOUNDS),
        }
    }
}
