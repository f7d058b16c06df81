//! A thread's write handle: the segment it appends to.

use crate::error::StoreError;
use crate::inner::Inner;
use crate::segments::SegId;
use std::sync::atomic::Ordering;
use std::sync::Arc;

struct Active {
    seg: SegId,
    off: u32,
}

/// Appends items for one thread. Not shared: each thread (each event loop) owns one, which
/// is what lets writes proceed without a global lock.
pub struct Writer {
    pub(crate) inner: Arc<Inner>,
    active: Option<Active>,
}

impl Writer {
    pub(crate) fn new(inner: Arc<Inner>) -> Self {
        Writer {
            inner,
            active: None,
        }
    }

    /// Reserves `size` bytes in the active segment, if they fit and the segment is not
    /// all expired items (then [`make_room`](Self::make_room) reclaims it first).
    pub(crate) fn alloc(&mut self, size: usize) -> Option<(SegId, u32)> {
        let seg_size = self.inner.segs.seg_size();
        let a = self.active.as_mut()?;
        if a.off as usize + size <= seg_size && !self.inner.all_expired(a.seg) {
            let off = a.off;
            a.off += size as u32;
            // Kept current (a plain store on x86) so that a warm-restart save sees how far
            // a segment a writer still holds is written.
            self.inner
                .segs
                .meta(a.seg)
                .used
                .store(a.off, Ordering::Relaxed);
            Some((a.seg, off))
        } else {
            None
        }
    }

    /// Ensures the next `size` bytes fit, sealing the active segment and taking a new one
    /// (evicting if memory is full) when they do not.
    pub(crate) fn make_room(&mut self, size: usize) -> Result<(), StoreError> {
        let seg_size = self.inner.segs.seg_size();
        if size > seg_size {
            return Err(StoreError::TooLarge);
        }
        self.recycle_expired();
        if let Some(a) = &self.active {
            if a.off as usize + size <= seg_size {
                return Ok(());
            }
        }
        if self.inner.evict {
            // Seal the old segment first, so that no writer ever holds two: then a store
            // with more segments than writers always has one sealed or free to take. Taken
            // the other way round, writers switching at the same moment each hold two and
            // can empty the eviction queue, failing stores that eviction should make room
            // for (seen with 4 writers in 6 segments).
            if let Some(old) = self.active.take() {
                self.inner.seal_written(old.seg, old.off);
            }
            let seg = self.inner.acquire_segment()?;
            self.active = Some(Active { seg, off: 0 });
        } else {
            // Without eviction, take the new segment before sealing the old one, so that
            // when memory is exhausted the old one stays usable for smaller items.
            let seg = self.inner.acquire_segment()?;
            if let Some(old) = self.active.replace(Active { seg, off: 0 }) {
                self.inner.seal_written(old.seg, old.off);
            }
        }
        Ok(())
    }

    /// When every item in the active segment has expired (a quiet writer of short-lived
    /// items), unlinks them and, if the segment is then empty and no reply reads from it,
    /// hands it back to take a fresh one, most likely itself: its memory is written again
    /// from the start instead of being filled with more items behind garbage that only a
    /// sweep after sealing would free. memcached likewise reuses an expired item's memory
    /// before allocating more (its t/issue_14.t checks `total_malloced` stays put).
    fn recycle_expired(&mut self) {
        let Some(a) = &self.active else { return };
        if a.off == 0 || !self.inner.all_expired(a.seg) {
            return;
        }
        let now = self.inner.clock.now();
        self.inner.reclaim_expired_in_active(a.seg, now);
        let meta = self.inner.segs.meta(a.seg);
        if meta.live_items.load(Ordering::Acquire) == 0 && meta.pins.load(Ordering::Acquire) == 0 {
            if let Some(a) = self.active.take() {
                // The items are unlinked and nothing pins it: it goes to the free list
                // (with its memory) rather than the eviction queues.
                self.inner.segs.give_back(a.seg);
            }
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if let Some(a) = self.active.take() {
            if a.off == 0 {
                self.inner.segs.give_back(a.seg);
            } else {
                self.inner.seal_written(a.seg, a.off);
            }
        }
    }
}
