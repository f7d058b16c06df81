//! Eviction ahead of writers, for a store with a flash tier.
//!
//! A writer that needs a segment when none is free empties one itself (`evict`), on
//! the request's path. In memory that costs moving a few read items; with a flash tier
//! it also copies every value worth a disk read into a write buffer, up to a segment
//! (a megabyte) of copies, which a `set` and every request queued behind it on that
//! worker wait for (memcached flushes to extstore from a background thread for the same
//! reason). So a store with a flash tier keeps a few segments free from a thread of its
//! own: writers take those, and wake it when they run low; only when it falls behind
//! does a writer evict for itself. The free segments cost that much memory not holding
//! items: [`AHEAD_SEGMENTS`] of them, at most an eighth of the store.

use crate::evict::Evicted;
use crate::inner::Inner;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Segments kept free ahead of writers (fewer in a store of few segments).
pub(crate) const AHEAD_SEGMENTS: usize = 2;

/// How long the thread sleeps when no writer wakes it: it checks anyway, so a lost
/// wake-up costs at most this.
const IDLE: Duration = Duration::from_millis(50);

impl Inner {
    /// Segments a writer can take without evicting: on the free list, or memory not
    /// allocated yet below the limit.
    pub(crate) fn free_segments(&self) -> usize {
        let (allocated, limit, free, _, _) = self.segs.counts();
        free + limit.saturating_sub(allocated)
    }

    /// The free segments eviction ahead keeps (0: none, eviction is the writers').
    pub(crate) fn ahead_target(&self) -> usize {
        if self.ahead.get().is_none() {
            return 0;
        }
        AHEAD_SEGMENTS.min(self.segs.limit() / 8)
    }

    /// Tells the eviction thread, if there is one, that a writer took a segment.
    pub(crate) fn took_segment(&self) {
        if let Some(thread) = self.ahead.get() {
            if self.free_segments() < self.ahead_target() {
                thread.unpark();
            }
        }
    }

    /// Evicts until [`ahead_target`](Self::ahead_target) segments are free, or nothing
    /// more can be (bounded: a segment a reply still reads is left draining and counted
    /// as a try).
    fn evict_ahead(&self) {
        let target = self.ahead_target();
        for _ in 0..2 * target.max(1) {
            let outcome = {
                let mut ev = self.evictor.lock();
                if self.free_segments() >= target {
                    return;
                }
                self.evict_one(&mut ev, true)
            };
            if outcome == Evicted::Nothing {
                return;
            }
        }
    }
}

/// Starts the eviction thread of `inner`'s store (once). It ends when the store does.
pub(crate) fn start(inner: &Arc<Inner>) -> std::io::Result<()> {
    if !inner.evict || inner.ahead.get().is_some() {
        return Ok(());
    }
    let weak: Weak<Inner> = Arc::downgrade(inner);
    let handle = std::thread::Builder::new()
        .name("shoal-evict".into())
        .spawn(move || {
            // Wait for the handle to be published (a wake-up before that is not lost:
            // the loop checks on its own every IDLE).
            std::thread::park_timeout(IDLE);
            while let Some(inner) = weak.upgrade() {
                inner.evict_ahead();
                drop(inner);
                std::thread::park_timeout(IDLE);
            }
        })?;
    let _ = inner.ahead.set(handle.thread().clone());
    Ok(())
}
