//! The set of queues in one data directory, and the thread that fsyncs them.
//!
//! Layout: `<data_dir>/LOCK` (held with `flock` so two processes never share a
//! directory) and `<data_dir>/queues/<name>/<id>.seg`.

pub(crate) mod fanout;

use self::fanout::Fanout;
use crate::clock::unix_now;
use crate::config::{EngineConfig, FsyncPolicy, QueueLimits};
use crate::error::{EngineError, QueueError};
use crate::name::validate_name;
use crate::queue::{Ctx, Queue, RecoveryReport};
use crate::queue_config::{fanout_parent, QueueOverrides};
use parking_lot::RwLock;
use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

/// Where a deleted queue's directory is moved before its removal (see `Engine::entomb`).
const TOMBSTONE_PREFIX: &str = ".deleted-";

/// The default queue configuration and the queue config file's lines.
struct Configs {
    default: QueueLimits,
    lines: HashMap<String, QueueOverrides>,
}

impl Configs {
    fn limits_for(&self, name: &str) -> QueueLimits {
        crate::queue_config::resolve(&self.default, &self.lines, name)
    }
}

struct Inner {
    cfg: EngineConfig,
    ctx: Arc<Ctx>,
    queues_dir: PathBuf,
    queues: RwLock<HashMap<String, Arc<Queue>>>,
    quarantined: parking_lot::Mutex<Vec<PathBuf>>,
    /// Queues whose directory could not be read at startup.
    broken: HashSet<String>,
    /// The queue config in force (replaced by [`Engine::reload`]).
    configs: RwLock<Configs>,
    /// Fanout parents' children.
    fanout: Fanout,
    /// Queues created (recovered at startup included) and deleted: Kestrel's
    /// `queue_creates` and `queue_deletes`.
    creates: AtomicU64,
    deletes: AtomicU64,
    /// Queues deleted by `max_queue_age` (Kestrel's `queue_expires`; also in `deletes`).
    expires: AtomicU64,
    /// Held by whoever moves expired messages to `expire_to` queues: one mover at a time,
    /// since a move takes the batch at the head of the set-aside list and consumes it
    /// only once the copies are durable.
    expiry_mover: tokio::sync::Mutex<()>,
    _lock: File,
}

/// All queues of one data directory. Dropping it stops the sync thread after a final
/// fsync of every queue (but those whose policy is `never`).
pub struct Engine {
    inner: Arc<Inner>,
    syncer: Option<JoinHandle<()>>,
}

fn dir_err(path: &Path) -> impl FnOnce(std::io::Error) -> EngineError + '_ {
    move |source| EngineError::DataDir {
        path: path.to_path_buf(),
        source,
    }
}

impl Engine {
    /// Opens (creating if needed) a data directory and recovers every queue in it. A
    /// queue directory with an invalid name is ignored; a corrupt segment is quarantined
    /// and reported in the log and by [`Engine::quarantined`], and the others serve.
    pub fn open(cfg: EngineConfig) -> Result<Engine, EngineError> {
        let queues_dir = cfg.data_dir.join("queues");
        fs::create_dir_all(&queues_dir).map_err(dir_err(&cfg.data_dir))?;
        let lock_path = cfg.data_dir.join("LOCK");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(dir_err(&cfg.data_dir))?;
        // SAFETY: flock on a descriptor we own; no memory is involved.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(EngineError::Locked(cfg.data_dir.clone()));
        }
        let (reclaim_tx, reclaim_rx) = std::sync::mpsc::channel::<PathBuf>();
        // Detached: it ends when the last queue (holding a sender) is dropped, and an
        // unlink lost at exit is redone by the next recovery.
        let reclaim = std::thread::Builder::new()
            .name("shoal-queue-reclaim".into())
            .spawn(move || {
                for path in reclaim_rx {
                    if let Err(e) = fs::remove_file(&path) {
                        tracing::warn!("removing {}: {e}", path.display());
                    }
                }
            })
            .map(|_| reclaim_tx)
            .map_err(EngineError::Thread)?;
        let ctx = Arc::new(Ctx {
            fsync: cfg.fsync,
            segment_size: cfg.segment_size.max(4096),
            max_item_size: cfg.max_item_size,
            memory_per_queue: cfg.memory_per_queue,
            fault: cfg.fault.clone(),
            reclaim: Some(reclaim),
            sync: Arc::default(),
        });
        let mut queues = HashMap::new();
        let mut quarantined = Vec::new();
        let mut broken = HashSet::new();
        let fanout = Fanout::default();
        for ent in fs::read_dir(&queues_dir).map_err(dir_err(&queues_dir))? {
            let ent = ent.map_err(dir_err(&queues_dir))?;
            let Some(name) = ent.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if name.starts_with(TOMBSTONE_PREFIX) {
                // A deleted queue's files, left by a crash before their removal.
                if let Err(e) = fs::remove_dir_all(ent.path()) {
                    tracing::warn!("removing {}: {e}", ent.path().display());
                }
                continue;
            }
            if !validate_name(name.as_bytes()) || !ent.path().is_dir() {
                tracing::warn!("ignoring {} in the data directory", ent.path().display());
                continue;
            }
            match Queue::recover(&name, ent.path(), ctx.clone(), cfg.limits_for(&name)) {
                Ok((q, report)) => {
                    log_report(&name, &report);
                    quarantined.extend(report.quarantined.into_iter().map(|(p, _)| p));
                    fanout.add(&name);
                    queues.insert(name, Arc::new(q));
                }
                Err(e) => {
                    // One unreadable queue must not take the others down: it is fenced
                    // off (refused, its files left untouched) and the rest serve.
                    tracing::error!(queue = %name, "cannot recover, queue unavailable: {e}");
                    broken.insert(name);
                }
            }
        }
        let queues_len = queues.len() as u64;
        let inner = Arc::new(Inner {
            ctx,
            queues_dir,
            queues: RwLock::new(queues),
            quarantined: parking_lot::Mutex::new(quarantined),
            broken,
            configs: RwLock::new(Configs {
                default: cfg.default_limits.clone(),
                lines: cfg.queue_limits.clone(),
            }),
            creates: AtomicU64::new(queues_len),
            deletes: AtomicU64::new(0),
            expires: AtomicU64::new(0),
            fanout,
            expiry_mover: tokio::sync::Mutex::new(()),
            _lock: lock,
            cfg,
        });
        // Started whatever `--fsync` says: a queue's `sync_journal` may ask for fsyncs
        // under `never` (and a reload may add one later).
        let syncer = {
            let inner = inner.clone();
            std::thread::Builder::new()
                .name("shoal-queue-sync".into())
                .spawn(move || {
                    // Caught here rather than at the join (at exit) because connections
                    // waiting for an fsync would otherwise wait forever, and the
                    // operator should hear of it now.
                    let run = std::panic::AssertUnwindSafe(|| sync_main(&inner));
                    if let Err(panic) = std::panic::catch_unwind(run) {
                        tracing::error!(
                            "the fsync thread panicked: {}; no more writes will be fsynced, \
                             and writes waiting for an fsync are refused",
                            shoal_net::panic_message(&*panic)
                        );
                        inner.sync_died();
                    }
                })
                .map_err(EngineError::Thread)?
        };
        Ok(Engine {
            inner,
            syncer: Some(syncer),
        })
    }

    /// The engine's configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.inner.cfg
    }

    /// The queue `name`, if it exists.
    pub fn queue(&self, name: &str) -> Option<Arc<Queue>> {
        self.inner.queues.read().get(name).cloned()
    }

    /// The queue `name`, created (in memory; its directory appears with its first
    /// write) if it does not exist. Fails for an invalid name, and for a queue whose
    /// directory could not be recovered at startup.
    pub fn queue_or_create(&self, name: &str) -> Result<Arc<Queue>, QueueError> {
        if let Some(q) = self.queue(name) {
            return Ok(q);
        }
        if !validate_name(name.as_bytes()) {
            return Err(QueueError::BadName);
        }
        if self.inner.broken.contains(name) {
            return Err(QueueError::Unavailable);
        }
        let mut map = self.inner.queues.write();
        // Resolved under the map's lock: a `reload` either sees this queue or has
        // already replaced the config read here.
        let limits = self.inner.configs.read().limits_for(name);
        let mut created = false;
        let q = map
            .entry(name.to_string())
            .or_insert_with(|| {
                created = true;
                Arc::new(Queue::new(
                    name,
                    self.inner.queues_dir.join(name),
                    self.inner.ctx.clone(),
                    limits,
                ))
            })
            .clone();
        drop(map);
        if created {
            self.inner.creates.fetch_add(1, Ordering::Relaxed);
            // Its fsync interval, if it has one, starts now.
            self.inner.ctx.sync.rescan();
        }
        if created && fanout_parent(name).is_some() {
            // A child exists from its first use, and must still exist after a restart
            // even if nothing was written to it: its directory is what says so. Should
            // that fail (a full disk), its first write creates it.
            self.inner.fanout.add(name);
            if let Err(e) = q.create_dir() {
                tracing::warn!(queue = name, "creating the fanout child's directory: {e}");
            }
        }
        Ok(q)
    }

    pub(crate) fn fanout(&self) -> &Fanout {
        &self.inner.fanout
    }

    pub(crate) fn expiry_mover(&self) -> &tokio::sync::Mutex<()> {
        &self.inner.expiry_mover
    }

    /// The destinations of `name`'s line in the queue config, if it is an alias (looked
    /// up on every set: nothing is cloned unless it is one).
    pub(crate) fn destinations_of(&self, name: &str) -> Option<Vec<String>> {
        self.inner
            .configs
            .read()
            .lines
            .get(name)
            .and_then(|o| o.destination_queues.clone())
    }

    /// The configuration `name` gets now (default, fanout parent, own line).
    pub fn limits_for(&self, name: &str) -> QueueLimits {
        self.inner.configs.read().limits_for(name)
    }

    /// Replaces the queue configuration (Kestrel's `reload`) and applies it to every
    /// existing queue: limits hold from the next enqueue on, nothing stored is dropped.
    pub fn reload(&self, default: QueueLimits, lines: HashMap<String, QueueOverrides>) {
        *self.inner.configs.write() = Configs { default, lines };
        // The config lock is never held while taking the queue map's (creation takes
        // them the other way round).
        for q in self.queues() {
            let limits = self.inner.configs.read().limits_for(q.name());
            q.set_limits(limits);
        }
        self.inner.ctx.sync.rescan();
    }

    /// Deletes a queue and its files. False if it did not exist.
    pub fn delete(&self, name: &str) -> bool {
        let (q, tomb) = {
            let mut map = self.inner.queues.write();
            let Some(q) = map.remove(name) else {
                return false;
            };
            (q, self.entomb(name))
        };
        q.mark_deleted();
        self.forget(name, tomb);
        true
    }

    /// Renames a deleted queue's directory out of the way, under the queue map's lock:
    /// a `set` that recreates the queue the moment the lock is released then starts in a
    /// directory of its own, rather than in the old one the removal is about to unlink,
    /// which would lose its acknowledged messages. The tombstone's name starts with `.`,
    /// which no queue name does, so recovery never takes it for a queue (and clears any
    /// left by a crash).
    fn entomb(&self, name: &str) -> Option<PathBuf> {
        let dir = self.inner.queues_dir.join(name);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let tomb = self
            .inner
            .queues_dir
            .join(format!("{TOMBSTONE_PREFIX}{name}-{nanos}"));
        match fs::rename(&dir, &tomb) {
            Ok(()) => Some(tomb),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                tracing::warn!("moving {} aside: {e}", dir.display());
                None
            }
        }
    }

    /// Deletes the queues that `max_queue_age` says are empty and old enough (Kestrel's
    /// queue expiry). Returns how many.
    pub fn delete_aged_out(&self, now: u32) -> u64 {
        let mut n = 0;
        for q in self.queues() {
            if !q.old_enough_to_retire(now) {
                continue;
            }
            let gone = {
                let mut map = self.inner.queues.write();
                // Checked and removed under the map's lock, so that a set cannot find the
                // queue after its check and store into a queue no longer in the map.
                let here = map.get(q.name()).is_some_and(|m| Arc::ptr_eq(m, &q));
                let gone = here && q.delete_if_aged_out(now);
                if gone {
                    map.remove(q.name());
                }
                gone.then(|| self.entomb(q.name()))
            };
            if let Some(tomb) = gone {
                tracing::info!(
                    queue = q.name(),
                    "deleted: empty and older than max_queue_age"
                );
                self.forget(q.name(), tomb);
                self.inner.expires.fetch_add(1, Ordering::Relaxed);
                n += 1;
            }
        }
        n
    }

    /// After a queue left the map: out of its parent's fanout, counted, its files (moved
    /// to `tomb` by [`Engine::entomb`]) removed.
    fn forget(&self, name: &str, tomb: Option<PathBuf>) {
        self.inner.fanout.remove(name);
        self.inner.deletes.fetch_add(1, Ordering::Relaxed);
        if let Some(dir) = tomb {
            if let Err(e) = fs::remove_dir_all(&dir) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!("removing {}: {e}", dir.display());
                }
            }
        }
    }

    /// Kestrel's `queue_creates`, `queue_deletes` and `queue_expires`: queues created
    /// since start (those recovered at startup included), deleted (by `delete` or
    /// `max_queue_age`), and deleted by `max_queue_age`.
    pub fn queue_counts(&self) -> (u64, u64, u64) {
        (
            self.inner.creates.load(Ordering::Relaxed),
            self.inner.deletes.load(Ordering::Relaxed),
            self.inner.expires.load(Ordering::Relaxed),
        )
    }

    /// `stats reset`: [`Engine::queue_counts`] start again from zero.
    pub fn reset_queue_counts(&self) {
        self.inner.creates.store(0, Ordering::Relaxed);
        self.inner.deletes.store(0, Ordering::Relaxed);
        self.inner.expires.store(0, Ordering::Relaxed);
    }

    /// Every queue, sorted by name.
    pub fn queues(&self) -> Vec<Arc<Queue>> {
        let mut v: Vec<_> = self.inner.queues.read().values().cloned().collect();
        v.sort_by(|a, b| a.name().cmp(b.name()));
        v
    }

    /// Empties every queue of its waiting messages (open reads stay, as [`Queue::flush`]
    /// says).
    pub fn flush_all(&self) -> Result<(), QueueError> {
        for q in self.queues() {
            q.flush()?;
        }
        Ok(())
    }

    /// Drops expired messages at the head of every queue (or sets them aside for
    /// `expire_to`), and deletes the queues `max_queue_age` retires; call about once a
    /// second.
    pub fn tick(&self) {
        let now = unix_now();
        for q in self.queues() {
            q.expire(now);
        }
        self.delete_aged_out(now);
    }

    /// Queues that could not be recovered at startup and are refused.
    pub fn unavailable(&self) -> Vec<String> {
        let mut v: Vec<String> = self.inner.broken.iter().cloned().collect();
        v.sort();
        v
    }

    /// Segments quarantined as corrupt during recovery.
    pub fn quarantined(&self) -> Vec<PathBuf> {
        self.inner.quarantined.lock().clone()
    }

    /// Waits until the write that returned `lsn` on `q` is as durable as the fsync policy
    /// promises: immediately for `never` and interval policies (the write already reached
    /// the kernel), after an fsync shared with every concurrent writer for `always`.
    pub async fn durable(&self, q: &Arc<Queue>, lsn: u64) -> Result<(), QueueError> {
        if q.fsync_policy() != FsyncPolicy::Always {
            return Ok(());
        }
        let mut rx = q.synced.subscribe();
        {
            let s = *rx.borrow();
            if s.lsn >= lsn {
                return Ok(());
            }
            if s.failed {
                return Err(QueueError::SyncFailed);
            }
        }
        // Checked after subscribing: `sync_died` sets the flag before it fails the
        // queues' waiters, so either this sees it or `rx` sees the failure.
        let sync = &self.inner.ctx.sync;
        if sync.dead.load(Ordering::SeqCst) {
            return Err(QueueError::SyncFailed);
        }
        if !q.sync_queued.swap(true, Ordering::AcqRel) {
            sync.lock().queues.push(q.clone());
            sync.cv.notify_one();
        }
        let s = match rx.wait_for(|s| s.lsn >= lsn || s.failed).await {
            Ok(s) => *s,
            Err(_) => return Err(QueueError::SyncFailed),
        };
        if s.lsn >= lsn {
            Ok(())
        } else {
            Err(QueueError::SyncFailed)
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let sync = &self.inner.ctx.sync;
        sync.stop.store(true, Ordering::SeqCst);
        sync.cv.notify_all();
        if let Some(h) = self.syncer.take() {
            // The thread catches its own panics; one escaping that (from the logging
            // itself) is still reported rather than dropped.
            if let Err(panic) = h.join() {
                tracing::error!(
                    "the fsync thread panicked: {}",
                    shoal_net::panic_message(&*panic)
                );
            }
        }
        // Queues left in the request list (after a panic of the sync thread) hold the
        // context that holds the list: a cycle that would keep them, and the reclaim
        // thread, alive for good.
        sync.lock().queues.clear();
    }
}

impl Inner {
    /// After the sync thread died: every durability wait, present and future, fails
    /// (the connection is closed without its replies) instead of waiting forever.
    fn sync_died(&self) {
        self.ctx.sync.dead.store(true, Ordering::SeqCst);
        for q in self.queues.read().values() {
            q.synced.send_modify(|s| s.failed = true);
        }
    }
}

fn log_report(name: &str, r: &RecoveryReport) {
    for (p, n) in &r.torn {
        tracing::warn!(
            queue = name,
            "cut a torn tail of {n} bytes off {}",
            p.display()
        );
    }
    for (p, n) in &r.quarantined {
        tracing::error!(
            queue = name,
            "corrupt segment quarantined as {} ({n} messages before the damage are kept there, not served)",
            p.display()
        );
    }
    if r.discarded_segments > 0 {
        tracing::warn!(
            queue = name,
            "keep_journal=false: discarded {} segment files unread (a memory-only queue starts empty)",
            r.discarded_segments
        );
    }
    if r.messages > 0 {
        tracing::info!(queue = name, "recovered {} messages", r.messages);
    }
}

/// The sync thread. Each queue has its own policy (its `sync_journal`, else the engine's
/// `--fsync`):
/// - `always`: fsyncs a queue when it has waiters, sharing one fsync among every write
///   that arrived before it started (group commit: the writes that arrive during an
///   fsync share the next), and when it sealed a segment;
/// - an interval: fsyncs the queue (its unsynced writes and sealed segments) once per
///   interval, timed per queue;
/// - `never`: never, not even at shutdown.
fn sync_main(inner: &Inner) {
    let sync = &inner.ctx.sync;
    // When the next interval queue is due (`None`: no interval queue). Starts due, so the
    // first pass finds the queues recovered at startup.
    let mut next_due = Some(Instant::now());
    loop {
        let mut g = sync.lock();
        loop {
            if !g.queues.is_empty() || g.sealed || g.rescan || sync.stop.load(Ordering::SeqCst) {
                break;
            }
            match next_due {
                None => g = sync.cv.wait(g).unwrap_or_else(|e| e.into_inner()),
                Some(due) => {
                    let now = Instant::now();
                    if now >= due {
                        break;
                    }
                    g = sync
                        .cv
                        .wait_timeout(g, due - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        }
        let stop = sync.stop.load(Ordering::SeqCst);
        let sealed = std::mem::take(&mut g.sealed);
        let rescan = std::mem::take(&mut g.rescan);
        // No waiting for more writes to gather: writes that arrive during this fsync are
        // covered by the next one, which starts the moment this one ends. (Gathering by
        // sleeping cost a lone writer a timer wake-up, ~150 µs here, on top of a ~200 µs
        // fdatasync, and lost throughput at every connection count measured.)
        let mut batch = std::mem::take(&mut g.queues);
        // The request list's lock is released before the queue map's is taken (see
        // `SyncRequests`).
        drop(g);
        let now = Instant::now();
        if sealed || rescan || next_due.is_some_and(|due| now >= due) {
            next_due = None;
            for q in inner.queues.read().values() {
                let wanted = match q.fsync_policy() {
                    FsyncPolicy::Never => false,
                    FsyncPolicy::Always => (sealed || rescan) && q.has_unsynced_files(),
                    FsyncPolicy::Every(d) => {
                        let mut at = q.interval_synced_at.lock();
                        let due = at.map_or(now, |t| t + d);
                        let is_due = due <= now;
                        if is_due {
                            *at = Some(now);
                        }
                        let next = if is_due { now + d } else { due };
                        next_due = Some(next_due.map_or(next, |n: Instant| n.min(next)));
                        is_due
                    }
                };
                if wanted && !batch.iter().any(|b| Arc::ptr_eq(b, q)) {
                    batch.push(q.clone());
                }
            }
        }
        if inner
            .cfg
            .fault
            .as_ref()
            .is_some_and(|f| f.sync_should_panic())
        {
            panic!("injected fault: the sync thread panics");
        }
        for q in batch {
            // Cleared before the fsync, so a write landing during it queues another.
            q.sync_queued.store(false, Ordering::Release);
            q.sync_now();
        }
        if stop {
            // One last pass so everything written before shutdown is durable.
            for q in inner.queues.read().values() {
                if q.fsync_policy() != FsyncPolicy::Never {
                    q.sync_now();
                }
            }
            return;
        }
    }
}
