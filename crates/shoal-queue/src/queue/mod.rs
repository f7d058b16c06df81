//! One queue: its in-memory index, its segment files, consumption and reclamation.
//!
//! Every state change goes through [`Queue`]'s lock and is appended to the queue's log
//! before it becomes visible: a message is in the index only after its record has been
//! written, so a failed write (a full disk) leaves nothing half-stored. Consumption is
//! recorded as ack records (ranges of sequence numbers), written before the consumer's
//! reply goes out. A segment whose messages have all been consumed is deleted at once.
//!
//! The parts, one concept each: `index` (what is in memory), `produce` (enqueue),
//! `consume` (dequeue, open reads, acks), `log` (segment files), `carry` (moving open
//! reads off an old segment so it can be deleted), `durability`
//! (fsync and what waiters see), `recovery` (rebuilding from disk), and `expiry`
//! (memcached's and Kestrel's exptime rules, and setting expired messages aside for
//! `expire_to`).

mod carry;
mod consume;
mod durability;
mod expiry;
mod index;
mod log;
mod produce;
mod recovery;
mod sync_requests;

pub use consume::{Delivery, Take};
pub use durability::{SyncMetrics, Synced};
pub use expiry::{expiry_from_exptime, expiry_from_kestrel_exptime};
pub use recovery::RecoveryReport;
pub(crate) use sync_requests::SyncRequests;

use crate::config::{FsyncPolicy, QueueLimits, WriteFault};
use index::State;
use parking_lot::Mutex;
use std::fs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::{watch, Notify};

/// The parts of the engine configuration a queue needs.
#[derive(Debug)]
pub(crate) struct Ctx {
    pub fsync: FsyncPolicy,
    pub segment_size: u64,
    pub max_item_size: usize,
    pub memory_per_queue: u64,
    pub fault: Option<Arc<WriteFault>>,
    /// Where consumed segments are sent to be unlinked. Unlinking a 64 MiB file takes
    /// ~10-20 ms on ext4, far too long to hold a queue's lock or an event loop for.
    pub reclaim: Option<std::sync::mpsc::Sender<PathBuf>>,
    /// The sync thread's requests, to wake it when a roll leaves a sealed segment to fsync.
    pub sync: Arc<SyncRequests>,
}

impl Ctx {
    fn remove_segment(&self, path: PathBuf) {
        let path = match &self.reclaim {
            Some(tx) => match tx.send(path) {
                Ok(()) => return,
                Err(e) => e.0,
            },
            None => path,
        };
        if let Err(e) = fs::remove_file(&path) {
            tracing::warn!("removing {}: {e}", path.display());
        }
    }
}

/// A snapshot of a queue's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Messages waiting (not counting open reads).
    pub items: u64,
    /// Payload bytes of waiting and open messages.
    pub bytes: u64,
    /// Payload bytes of waiting messages only (Kestrel's `bytes`).
    pub waiting_bytes: u64,
    /// Age in seconds of the message at the head, 0 when empty.
    pub oldest_age_secs: u64,
    /// Age in milliseconds of the message at the head, 0 when empty.
    pub oldest_age_ms: u64,
    /// Kestrel's `age`: how long, in milliseconds, the last message taken (removed or
    /// opened) had waited in the queue; 0 when no message is waiting.
    pub last_read_age_ms: u64,
    /// Messages accepted since start.
    pub enqueued: u64,
    /// Kestrel's `total_items`: messages added since start, counting those recovered
    /// from the log at startup (Kestrel counts those its journal replay adds).
    pub total_items: u64,
    /// Messages consumed since start.
    pub dequeued: u64,
    /// Messages dropped because they expired.
    pub expired: u64,
    /// Messages dropped to make room (discard-oldest policy).
    pub discarded: u64,
    /// Reads opened and neither closed nor aborted.
    pub open_reads: u64,
    /// Bytes of this queue's segment files.
    pub disk_bytes: u64,
    /// Number of segment files.
    pub segments: u64,
    /// Payload bytes held in memory.
    pub mem_bytes: u64,
    /// Waiting messages whose payload is in memory (Kestrel's `mem_items`).
    pub mem_items: u64,
    /// Payload bytes of waiting messages held in memory (Kestrel's `mem_bytes`).
    pub waiting_mem_bytes: u64,
    /// Blocking reads (`get <q>/t=...`) waiting for a message now (Kestrel's `waiters`).
    pub waiters: u64,
    /// Open reads rewritten at the end of the log so that an old segment, kept only by
    /// them, could be deleted.
    pub carried: u64,
    /// Expired messages set aside for the queue's `expire_to`, not yet moved.
    pub expiring: u64,
    /// Reads opened since start (Kestrel's `transactions`).
    pub transactions: u64,
    /// Open reads given back by `/abort` or a disconnect (Kestrel's
    /// `canceled_transactions`).
    pub canceled_transactions: u64,
    /// Times this queue was flushed (Kestrel's `total_flushes`).
    pub total_flushes: u64,
}

/// One durable FIFO queue. All methods are safe to call from many threads.
#[derive(Debug)]
pub struct Queue {
    name: String,
    dir: PathBuf,
    ctx: Arc<Ctx>,
    limits: parking_lot::RwLock<Arc<QueueLimits>>,
    state: Mutex<State>,
    pub(crate) synced: watch::Sender<Synced>,
    pub(crate) sync_queued: AtomicBool,
    arrivals: Notify,
    /// `State::writes` as of the last fsync (only the sync thread writes it).
    synced_writes: AtomicU64,
    /// This queue's fsync latency and group-commit batch sizes.
    sync_metrics: SyncMetrics,
    /// Blocking reads waiting now (see [`Queue::waiting`]).
    waiters: AtomicU64,
    /// When this queue was created, or found on disk at startup (unix seconds): what
    /// `max_queue_age` counts from, as Kestrel's queue creation time.
    created: u32,
    /// Kestrel's `keep_journal=false`, as configured when the queue was opened: no log,
    /// every payload in memory (see [`QueueLimits::memory_only`]).
    memory_only: bool,
    /// When the sync thread last fsynced this queue on its interval (`None`: not yet).
    /// Only the sync thread touches it.
    pub(crate) interval_synced_at: Mutex<Option<std::time::Instant>>,
}

/// A blocking read counted in its queue's `waiters` while it lives (see
/// [`Queue::waiting`]).
#[derive(Debug)]
pub struct Waiting<'a>(&'a AtomicU64);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Queue {
    pub(crate) fn new(name: &str, dir: PathBuf, ctx: Arc<Ctx>, limits: QueueLimits) -> Queue {
        let limits_memory_only = limits.memory_only;
        Queue {
            name: name.to_string(),
            dir,
            ctx,
            limits: parking_lot::RwLock::new(Arc::new(limits)),
            state: Mutex::new(State {
                // A new queue's segment ids start at the current time in nanoseconds, so
                // they never collide with those of a deleted queue of the same name
                // whose files the reclaim thread may still be unlinking.
                next_seg: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX / 2)),
                ..State::default()
            }),
            synced: watch::Sender::new(Synced::default()),
            sync_queued: AtomicBool::new(false),
            arrivals: Notify::new(),
            synced_writes: AtomicU64::new(0),
            sync_metrics: SyncMetrics::default(),
            waiters: AtomicU64::new(0),
            created: crate::clock::unix_now(),
            memory_only: limits_memory_only,
            interval_synced_at: Mutex::new(None),
        }
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The configuration in force now.
    pub fn limits(&self) -> Arc<QueueLimits> {
        self.limits.read().clone()
    }

    /// Replaces the configuration (`reload`): new limits apply to the next enqueue, a new
    /// age cap to messages enqueued from then on; nothing already stored is dropped for
    /// it, except that expiry now moves to the new `expire_to`. A new fsync policy applies
    /// to the next acknowledgement; one that starts fsyncing a queue that did not fsync
    /// covers the segments written before it too. `memory_only` applies at the next start.
    pub fn set_limits(&self, limits: QueueLimits) {
        let was = self.fsync_policy();
        if limits.memory_only != self.memory_only {
            tracing::warn!(
                queue = %self.name,
                "keep_journal changed: applies when the server next starts"
            );
        }
        *self.limits.write() = Arc::new(limits);
        let now = self.fsync_policy();
        if now == FsyncPolicy::Never && was != FsyncPolicy::Never {
            // Nothing will fsync them now: their files (of segments maybe deleted since)
            // are closed rather than held open until a restart.
            self.state.lock().unsynced = index::Unsynced::default();
        }
        if was == FsyncPolicy::Never && now != FsyncPolicy::Never {
            // Segments sealed under `never` were never handed to the sync thread.
            let mut st = self.state.lock();
            let st = &mut *st;
            let sealed: Vec<_> = st
                .segments
                .iter()
                .map(|(&id, s)| (id, s.file.clone()))
                .collect();
            st.unsynced.sealed.extend(sealed);
            st.unsynced.dir |= st.dir_ready;
            st.unsynced.parent |= st.dir_ready;
        }
    }

    /// When this queue's writes are fsynced: its own `sync_journal`, else the engine's
    /// policy; `never` for a memory-only queue, which writes nothing.
    pub fn fsync_policy(&self) -> FsyncPolicy {
        if self.memory_only {
            return FsyncPolicy::Never;
        }
        self.limits.read().fsync.unwrap_or(self.ctx.fsync)
    }

    /// Whether the queue keeps no log (Kestrel's `keep_journal=false`, as opened).
    pub fn memory_only(&self) -> bool {
        self.memory_only
    }

    /// Whether an fsync of this queue's files has failed. From then on nothing written
    /// to the queue can be confirmed durable (the kernel may have dropped the dirty
    /// pages, and a later fsync that succeeds says nothing about them), so writes must be
    /// refused until a restart recovers the queue from what its files hold.
    pub fn sync_failed(&self) -> bool {
        self.synced.borrow().failed
    }

    /// Notified (all waiters) whenever a message becomes available or the queue is
    /// deleted; blocking reads wait on it instead of polling.
    pub fn arrivals(&self) -> &Notify {
        &self.arrivals
    }

    /// Counts a blocking read in the queue's `waiters` (Kestrel's stat) until the
    /// returned guard is dropped.
    pub fn waiting(&self) -> Waiting<'_> {
        self.waiters.fetch_add(1, Ordering::Relaxed);
        Waiting(&self.waiters)
    }

    /// This queue's fsync latency and group-commit batch histograms (empty under the
    /// `never` policy).
    pub fn sync_metrics(&self) -> &SyncMetrics {
        &self.sync_metrics
    }

    /// Counters and sizes now.
    pub fn stats(&self, now: u32) -> QueueStats {
        let st = self.state.lock();
        // Open reads are few (one per connection and queue): summed here rather than
        // kept in more counters on every path.
        let (mut open_bytes, mut open_mem_items, mut open_mem_bytes) = (0u64, 0u64, 0u64);
        for e in st.open.values().chain(st.expiring.iter()) {
            open_bytes += u64::from(e.len);
            if e.data.is_some() {
                open_mem_items += 1;
                open_mem_bytes += u64::from(e.len);
            }
        }
        let now_ms = index::now_ms();
        QueueStats {
            items: st.ready.len() as u64,
            bytes: st.bytes,
            waiting_bytes: st.bytes.saturating_sub(open_bytes),
            oldest_age_secs: st
                .ready
                .front()
                .map_or(0, |e| u64::from(now.saturating_sub(e.enq))),
            oldest_age_ms: st
                .ready
                .front()
                .map_or(0, |e| now_ms.saturating_sub(e.enqueued_ms())),
            last_read_age_ms: if st.ready.is_empty() {
                0
            } else {
                st.last_read_age_ms
            },
            enqueued: st.counters.enqueued,
            total_items: st.counters.recovered + st.counters.enqueued,
            dequeued: st.counters.dequeued,
            expired: st.counters.expired,
            discarded: st.counters.discarded,
            open_reads: st.open.len() as u64,
            disk_bytes: st.disk,
            segments: st.segments.len() as u64,
            mem_bytes: st.mem,
            mem_items: st.mem_items.saturating_sub(open_mem_items),
            waiting_mem_bytes: st.mem.saturating_sub(open_mem_bytes),
            waiters: self.waiters.load(Ordering::Relaxed),
            carried: st.counters.carried,
            expiring: st.expiring.len() as u64,
            transactions: st.counters.transactions,
            canceled_transactions: st.counters.canceled_transactions,
            total_flushes: st.counters.flushes,
        }
    }

    /// `stats reset`: the counters of events since start (enqueued, dequeued, expired,
    /// discarded, carried, `total_items`) start again from zero; sizes do not change.
    pub fn reset_counters(&self) {
        self.state.lock().counters = index::Counters::default();
    }

    /// Forgets everything (the engine deletes the files) and releases every waiter.
    pub(crate) fn mark_deleted(&self) {
        let mut st = self.state.lock();
        self.clear_deleted(&mut st);
        drop(st);
        self.release_deleted();
    }

    /// Kestrel's `max_queue_age`: if the queue is older than it and holds nothing (no
    /// message waiting, open or set aside), marks it deleted, in one hold of its lock so
    /// that no message slips in between: a set racing with it finds the queue deleted and
    /// is refused, never acknowledged and lost. True if it was.
    pub(crate) fn delete_if_aged_out(&self, now: u32) -> bool {
        if !self.old_enough_to_retire(now) {
            return false;
        }
        let mut st = self.state.lock();
        if st.deleted || !st.ready.is_empty() || !st.open.is_empty() || !st.expiring.is_empty() {
            return false;
        }
        self.clear_deleted(&mut st);
        drop(st);
        self.release_deleted();
        true
    }

    /// Whether `max_queue_age` is set and this queue is older (not looking at what it
    /// holds: cheap, no lock but the config's).
    pub(crate) fn old_enough_to_retire(&self, now: u32) -> bool {
        let age = self.limits.read().max_queue_age_secs;
        age > 0 && now >= self.created.saturating_add(age)
    }

    fn clear_deleted(&self, st: &mut index::State) {
        st.deleted = true;
        st.ready.clear();
        st.open.clear();
        st.expiring.clear();
        st.segments.clear();
        st.acks.clear();
        st.bytes = 0;
        st.mem = 0;
        st.mem_items = 0;
        st.disk = 0;
        // The files go with the directory: nothing of them needs to be durable now.
        st.unsynced = index::Unsynced::default();
    }

    fn release_deleted(&self) {
        self.synced.send_modify(|s| s.lsn = u64::MAX);
        self.arrivals.notify_waiters();
    }
}
