//! What the engine's sync thread is asked to do: the queues whose writers wait for an
//! fsync, and whether a segment was sealed since its last pass. Queues post here and the
//! engine's thread takes the work, so the request list lives beside the queue rather than
//! in the engine that owns the thread.

use super::Queue;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex};

/// Work for the sync thread under `always`: queues with writers waiting for an fsync, and
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
}
