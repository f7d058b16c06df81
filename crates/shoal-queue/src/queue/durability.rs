//! Durability: what has reached stable storage, published to waiting connections, and
//! the sync thread's fsync of a queue.

use super::index::Unsynced;
use super::Queue;
use crate::fsync;
use shoal_net::metrics::Histogram;
use std::fs::File;
use std::io;
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
    /// position, recording each fsync in the queue's [`SyncMetrics`]. Called by the sync
    /// thread, never on a connection's thread.
    ///
    /// Order: segments sealed since the last pass (oldest first), the queues directory if
    /// this queue's directory is new, the queue's directory if a segment was created in
    /// it, then the active segment. The position is published only when all have
    /// succeeded, so a write acknowledged under `always` is durable whichever segment it
    /// went to, and so is the directory entry of the segment it is in.
    pub(crate) fn sync_now(&self) {
        let (unsynced, active, lsn, writes) = {
            let mut st = self.state.lock();
            if st.deleted || (st.written <= self.synced.borrow().lsn && st.unsynced.is_empty()) {
                return;
            }
            let Some((&id, s)) = st.segments.iter().next_back() else {
                return;
            };
            let active = (id, s.file.clone());
            (
                std::mem::take(&mut st.unsynced),
                active,
                st.written,
                st.writes,
            )
        };
        let res = self.fsync_files(&unsynced, active.0, &active.1);
        let before = self.synced_writes.swap(writes, Ordering::Relaxed);
        if writes > before {
            self.sync_metrics.batch_writes.record(writes - before);
        }
        match res {
            Ok(()) => {
                self.synced.send_if_modified(|s| {
                    let adv = lsn > s.lsn;
                    s.lsn = s.lsn.max(lsn);
                    adv
                });
                if unsynced.carried {
                    // The copies of carried open reads are durable now: their old
                    // segments may go without waiting for the queue's next dequeue.
                    let mut st = self.state.lock();
                    if !st.deleted {
                        self.gc(&mut st);
                    }
                }
            }
            // A queue deleted meanwhile took its files, and its waiters were released.
            Err(_) if self.state.lock().deleted => {}
            Err(e) => {
                // After a failed fsync the kernel may have dropped the dirty pages, so
                // nothing written since the last good fsync may be acknowledged.
                tracing::error!(queue = %self.name, "fsync failed: {e}");
                self.synced.send_modify(|s| s.failed = true);
            }
        }
    }

    /// The fsyncs of one pass, in the order `sync_now` describes; stops at the first
    /// failure.
    fn fsync_files(&self, unsynced: &Unsynced, active: u64, file: &File) -> io::Result<()> {
        let h = &self.sync_metrics.fsync_ns;
        for (id, sealed) in &unsynced.sealed {
            timed(h, || fsync::segment(sealed, &self.dir, *id))?;
        }
        if let Some(parent) = self.dir.parent().filter(|_| unsynced.parent) {
            timed(h, || fsync::directory(parent))?;
        }
        if unsynced.dir {
            timed(h, || fsync::directory(&self.dir))?;
        }
        timed(h, || fsync::segment(file, &self.dir, active))
    }

    /// Whether a sealed segment or a directory entry awaits the sync thread.
    pub(crate) fn has_unsynced_files(&self) -> bool {
        !self.state.lock().unsynced.is_empty()
    }
}

fn timed(h: &Histogram, fsync: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
    let start = Instant::now();
    let res = fsync();
    h.record_duration(start.elapsed());
    res
}

/// One queue's fsync figures: how long each fsync of its segment files and directory took,
/// and how many writes each pass of the sync thread made durable (the group commit's
/// batch; a pass fsyncs the active segment, after any sealed segment and directory). Kept per queue because each fsync is of
/// one queue's file; only the sync thread records (relaxed atomic adds, no lock), and
/// scrapes read. They go away with the queue.
#[derive(Debug)]
pub struct SyncMetrics {
    /// Durations of each fsync of a segment (fdatasync) or of a directory, in nanoseconds.
    pub fsync_ns: Histogram,
    /// Writes made durable by each pass of the sync thread that made any.
    pub batch_writes: Histogram,
}

impl Default for SyncMetrics {
    fn default() -> SyncMetrics {
        SyncMetrics {
            fsync_ns: Histogram::latency(),
            batch_writes: Histogram::new(&shoal_net::metrics::COUNT_BOUNDS),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::fsync::testlog::{self, Event, Target};
    use crate::{unix_now, Engine, EngineConfig, FsyncPolicy, Queue, Take};
    use std::path::Path;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    const SYNC_THREAD: &str = "shoal-queue-sync";

    fn engine(dir: &Path, fsync: FsyncPolicy) -> Engine {
        let mut c = EngineConfig::new(dir);
        c.fsync = fsync;
        // The smallest segment: a roll every ~15 messages of 200 bytes.
        c.segment_size = 4096;
        c.memory_per_queue = 0;
        Engine::open(c).expect("open")
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    fn durable(rt: &tokio::runtime::Runtime, e: &Engine, q: &Arc<Queue>, lsn: u64) {
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(10), e.durable(q, lsn)).await
        })
        .expect("the wait ends")
        .expect("durable");
    }

    fn segment_ids(q: &Queue) -> Vec<u64> {
        q.state.lock().segments.keys().copied().collect()
    }

    fn synced_segments(events: &[Event]) -> Vec<u64> {
        events
            .iter()
            .filter_map(|e| match e.target {
                Target::Segment(id) => Some(id),
                Target::Directory => None,
            })
            .collect()
    }

    fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !cond() {
            assert!(Instant::now() < deadline, "timed out waiting: {what}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Under `always` a roll (on the writer's thread, which is an event loop in the
    /// server) fsyncs nothing itself; the sync thread fsyncs the sealed segment and the
    /// directory, and the writes after the roll are acknowledged only once both are done.
    #[test]
    fn a_roll_under_always_fsyncs_on_the_sync_thread_before_the_ack() {
        let t = tempfile::tempdir().expect("tempdir");
        let e = engine(t.path(), FsyncPolicy::Always);
        let rt = runtime();
        let q = e.queue_or_create("q").expect("queue");
        let qdir = t.path().join("queues").join("q");
        let mut created: Vec<u64> = Vec::new();
        for i in 0..150u32 {
            let body = format!("{i:04}{}", "x".repeat(196));
            let lsn = q
                .enqueue(0, 0, body.as_bytes(), unix_now())
                .expect("enqueue");
            for id in segment_ids(&q) {
                if !created.contains(&id) {
                    created.push(id);
                }
            }
            durable(&rt, &e, &q, lsn);
            // Acknowledged: every segment sealed so far is durable, and the directory was
            // fsynced once per segment created in it (the writes are one at a time, so no
            // two rolls share a directory fsync).
            let events = testlog::under(&qdir);
            let synced = synced_segments(&events);
            for id in &created[..created.len() - 1] {
                assert!(
                    synced.contains(id),
                    "write {i} acknowledged before sealed {id:x} was fsynced"
                );
            }
            let dir_syncs = events
                .iter()
                .filter(|e| e.target == Target::Directory && e.dir == qdir)
                .count();
            assert_eq!(dir_syncs, created.len(), "write {i}: directory fsyncs");
        }
        assert!(
            created.len() >= 5,
            "only {} segments: too few rolls to mean anything",
            created.len()
        );

        let me = std::thread::current().id();
        let events = testlog::under(t.path());
        // The queues directory once (the queue's directory was created in it), the queue's
        // directory once per segment, every sealed segment once, the active one per write.
        assert_eq!(
            events
                .iter()
                .filter(|e| e.dir == t.path().join("queues"))
                .count(),
            1,
            "{events:?}"
        );
        for e in &events {
            assert_ne!(e.thread, me, "fsync on the writer's thread: {e:?}");
            assert_eq!(e.thread_name.as_deref(), Some(SYNC_THREAD), "{e:?}");
        }
        // Each one is in the queue's fsync histogram.
        assert_eq!(
            q.sync_metrics().fsync_ns.snapshot().count(),
            events.len() as u64
        );
        assert_eq!(q.sync_metrics().batch_writes.snapshot().sum(), 150);

        // A restart finds every acknowledged message, in order, read back from disk.
        drop(e);
        let e = engine(t.path(), FsyncPolicy::Always);
        let q = e.queue("q").expect("recovered");
        for i in 0..150u32 {
            let d = q
                .dequeue(Take::Remove, unix_now())
                .expect("dequeue")
                .expect("a message");
            assert!(
                d.data.starts_with(format!("{i:04}").as_bytes()),
                "message {i}"
            );
        }
        assert!(q.dequeue(Take::Peek, unix_now()).expect("peek").is_none());
    }

    /// Consumers read messages out of sealed segments whose fsync is still pending, and
    /// those segments are deleted when consumed, pending or not: the sync thread still
    /// fsyncs what it was handed, nothing fails, and the files are closed afterwards.
    #[test]
    fn sealed_segments_pending_fsync_are_read_and_deleted() {
        let t = tempfile::tempdir().expect("tempdir");
        let e = engine(t.path(), FsyncPolicy::Always);
        let rt = runtime();
        let q = e.queue_or_create("q").expect("queue");
        for i in 0..100u32 {
            let body = format!("{i:04}{}", "y".repeat(196));
            q.enqueue(0, 0, body.as_bytes(), unix_now())
                .expect("enqueue");
        }
        assert!(segment_ids(&q).len() >= 5);
        for i in 0..100u32 {
            let d = q
                .dequeue(Take::Remove, unix_now())
                .expect("dequeue")
                .expect("message");
            assert!(d.data.starts_with(format!("{i:04}").as_bytes()));
        }
        let lsn = q.commit().expect("commit");
        durable(&rt, &e, &q, lsn);
        assert_eq!(segment_ids(&q).len(), 1, "consumed segments deleted");
        assert!(!q.synced.borrow().failed);

        // A queue deleted with sealed segments awaiting their fsync: the sync thread
        // neither fails nor stops serving the others.
        let doomed = e.queue_or_create("doomed").expect("queue");
        for _ in 0..60 {
            doomed
                .enqueue(0, 0, &[b'z'; 200], unix_now())
                .expect("enqueue");
        }
        assert!(e.delete("doomed"));
        assert!(!doomed.has_unsynced_files());
        assert!(!doomed.synced.borrow().failed);
        let lsn = q.enqueue(0, 0, b"after", unix_now()).expect("enqueue");
        durable(&rt, &e, &q, lsn);
        assert!(!t.path().join("queues").join("doomed").exists());
    }

    /// A roll with no write after it (a drained queue swapping its large segment for a
    /// fresh one on a dequeue) still gets its fsyncs under `always`, so the sealed
    /// segment, deleted at once, does not stay open holding its disk space.
    #[test]
    fn a_drained_roll_under_always_is_fsynced_without_a_waiter() {
        let t = tempfile::tempdir().expect("tempdir");
        let e = engine(t.path(), FsyncPolicy::Always);
        let rt = runtime();
        let q = e.queue_or_create("q").expect("queue");
        let mut lsn = 0;
        for _ in 0..12 {
            lsn = q.enqueue(0, 0, &[b'd'; 200], unix_now()).expect("enqueue");
        }
        durable(&rt, &e, &q, lsn);
        let [old] = segment_ids(&q)[..] else {
            panic!("one segment expected");
        };
        // Over half a segment: draining it rolls to a fresh one and deletes it.
        while q
            .dequeue(Take::Remove, unix_now())
            .expect("dequeue")
            .is_some()
        {}
        let new = segment_ids(&q);
        assert!(new.len() == 1 && new[0] != old, "{new:?}");
        let qdir = t.path().join("queues").join("q");
        wait_until("the sealed segment fsynced", || {
            synced_segments(&testlog::under(&qdir)).contains(&old) && !q.has_unsynced_files()
        });
        let name = crate::segment::segment_path(&qdir, old);
        let name = name.to_string_lossy().into_owned();
        wait_until("the deleted segment closed", || {
            std::fs::read_dir("/proc/self/fd").expect("fds").all(|fd| {
                fd.ok()
                    .and_then(|fd| std::fs::read_link(fd.path()).ok())
                    .map_or(true, |p| !p.to_string_lossy().starts_with(&name))
            })
        });
    }

    /// Under an interval policy the sealed segments and the directory are fsynced on the
    /// next tick, by the sync thread; under `never`, nothing is fsynced at all.
    #[test]
    fn interval_syncs_sealed_segments_on_the_tick_and_never_not_at_all() {
        let t = tempfile::tempdir().expect("tempdir");
        let e = engine(t.path(), FsyncPolicy::Every(Duration::from_millis(10)));
        let q = e.queue_or_create("q").expect("queue");
        for _ in 0..60 {
            q.enqueue(0, 0, &[b'i'; 200], unix_now()).expect("enqueue");
        }
        let ids = segment_ids(&q);
        assert!(ids.len() >= 3);
        let qdir = t.path().join("queues").join("q");
        wait_until("every sealed segment fsynced", || {
            let synced = synced_segments(&testlog::under(&qdir));
            ids.iter().all(|id| synced.contains(id)) && !q.has_unsynced_files()
        });
        let events = testlog::under(t.path());
        assert!(events
            .iter()
            .any(|e| e.target == Target::Directory && e.dir == qdir));
        assert!(events
            .iter()
            .all(|e| e.thread_name.as_deref() == Some(SYNC_THREAD)));
        assert_eq!(
            q.sync_metrics().fsync_ns.snapshot().count(),
            events.len() as u64
        );
        drop(e);

        let t = tempfile::tempdir().expect("tempdir");
        let e = engine(t.path(), FsyncPolicy::Never);
        let q = e.queue_or_create("q").expect("queue");
        for _ in 0..60 {
            q.enqueue(0, 0, &[b'n'; 200], unix_now()).expect("enqueue");
        }
        assert!(segment_ids(&q).len() >= 3);
        assert!(!q.has_unsynced_files());
        drop(e);
        assert!(testlog::under(t.path()).is_empty());
    }

    /// Per-queue policies (`sync_journal`) under an engine that never fsyncs: `always`
    /// queues are fsynced before each acknowledgement, interval queues on their own
    /// tick, and the rest never; a reload that turns fsync on for a queue covers the
    /// segments it sealed before.
    #[test]
    fn each_queue_its_own_policy() {
        let t = tempfile::tempdir().expect("tempdir");
        let mut c = EngineConfig::new(t.path());
        c.fsync = FsyncPolicy::Never;
        c.segment_size = 4096;
        c.memory_per_queue = 0;
        c.queue_limits = crate::queue_config::parse(
            "now sync_journal=always\ntick sync_journal=10ms\nlater sync_journal=never\n",
        )
        .expect("parses");
        let e = Engine::open(c).expect("open");
        let rt = runtime();
        let root = t.path().join("queues");
        let now_q = e.queue_or_create("now").expect("queue");
        let tick = e.queue_or_create("tick").expect("queue");
        let none = e.queue_or_create("none").expect("queue");
        assert_eq!(now_q.fsync_policy(), FsyncPolicy::Always);
        assert_eq!(none.fsync_policy(), FsyncPolicy::Never);
        for i in 0..40u32 {
            let body = format!("{i:04}{}", "a".repeat(196));
            let lsn = now_q
                .enqueue(0, 0, body.as_bytes(), unix_now())
                .expect("enqueue");
            let before = synced_segments(&testlog::under(&root.join("now"))).len();
            durable(&rt, &e, &now_q, lsn);
            assert!(
                synced_segments(&testlog::under(&root.join("now"))).len() > before,
                "write {i} acknowledged without an fsync"
            );
            tick.enqueue(0, 0, body.as_bytes(), unix_now())
                .expect("enqueue");
            none.enqueue(0, 0, body.as_bytes(), unix_now())
                .expect("enqueue");
        }
        let tick_ids = segment_ids(&tick);
        assert!(tick_ids.len() >= 2);
        wait_until("the interval queue fsynced on its tick", || {
            let synced = synced_segments(&testlog::under(&root.join("tick")));
            tick_ids.iter().all(|id| synced.contains(id)) && !tick.has_unsynced_files()
        });
        assert!(
            testlog::under(&root.join("none")).is_empty(),
            "a queue under never was fsynced"
        );

        // A reload turning fsync on for `none`: the segments it sealed under `never`
        // are fsynced on the next pass too, not only the active one.
        let none_ids = segment_ids(&none);
        assert!(none_ids.len() >= 2);
        e.reload(
            e.config().default_limits.clone(),
            crate::queue_config::parse("none sync_journal=always\n").expect("parses"),
        );
        let lsn = none.enqueue(0, 0, b"after", unix_now()).expect("enqueue");
        durable(&rt, &e, &none, lsn);
        let synced = synced_segments(&testlog::under(&root.join("none")));
        for id in none_ids {
            assert!(synced.contains(&id), "segment {id:x} sealed under never");
        }
        // The dropped engine's last pass leaves `later` (never) alone.
        let later = e.queue_or_create("later").expect("queue");
        later.enqueue(0, 0, b"x", unix_now()).expect("enqueue");
        drop(e);
        assert!(testlog::under(&root.join("later")).is_empty());
    }
}
