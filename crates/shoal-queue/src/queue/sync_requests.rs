//! What the engine's sync thread is asked to do: the queues whose writers wait for an
//! fsync, whether a segment was sealed since its last pass, and whether the queues'
//! fsync policies must be looked at again. Queues post here and the
//! engine's thread takes the work, so the request list lives beside the queue rather than
//! in the engine that owns the thread.

use super::Queue;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex};

/// Work for the sync thread: queues with writers waiting for an fsync, and
/// whether a segment was sealed since it last looked. Its mutex is a leaf lock: it may be
/// taken under a queue's lock, so nothing else is locked while it is held.
#[derive(Debug, Default)]
pub(crate) struct SyncRequests {
    wanted: Mutex<Wanted>,
    /// Signalled when work is posted or the thread is told to stop.
    pub(crate) cv: Condvar,
    /// The engine is shutting down: the thread makes its last pass and exits.
    pub(crate) stop: AtomicBool,
    /// The sync thread has died (panicked): nothing will be fsynced any more.
    pub(crate) dead: AtomicBool,
}

/// The requests themselves, under [`SyncRequests`]'s lock.
#[derive(Debug, Default)]
pub(crate) struct Wanted {
    /// Queues with a writer waiting for its fsync.
    pub(crate) queues: Vec<Arc<Queue>>,
    /// Some queue has a sealed segment or a new directory entry awaiting its fsync.
    pub(crate) sealed: bool,
    /// A queue was created or the configuration reloaded: the interval queues (and the
    /// next time one is due) must be looked at again.
    pub(crate) rescan: bool,
}

impl SyncRequests {
    /// Its state, locked (a poisoned lock is taken over: the state stays consistent).
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Wanted> {
        self.wanted.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes the sync thread to fsync the segments sealed since its last pass, even if no
    /// writer is waiting.
    pub(crate) fn sealed(&self) {
        self.lock().sealed = true;
        self.cv.notify_one();
    }

    /// Wakes the sync thread to look at every queue's fsync policy again (a queue was
    /// created, or a reload may have changed policies).
    pub(crate) fn rescan(&self) {
        self.lock().rescan = true;
        self.cv.notify_one();
    }
}
