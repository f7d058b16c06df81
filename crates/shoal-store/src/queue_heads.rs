//! Eviction's own state: the queues' open heads that eviction copies kept items into,
//! the sparse segments waiting for compaction, and what eviction has done. It lives
//! behind the eviction lock; the decisions are in [`crate::evict`].

use crate::segments::{SegId, Segments, QUEUES};
use std::sync::atomic::Ordering;

/// Most sparse segments remembered for compaction.
const SPARSE_MAX: usize = 64;

/// A queue's open segment, which eviction appends copies to.
#[derive(Debug, Clone, Copy)]
struct Head {
    seg: SegId,
    off: u32,
}

/// What eviction has done, for `stats`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EvictCounters {
    /// Items moved from probation to a main queue.
    pub(crate) promoted: u64,
    /// Their bytes.
    pub(crate) promoted_bytes: u64,
    /// Items copied forward within a main queue.
    pub(crate) retained: u64,
    /// Their bytes.
    pub(crate) retained_bytes: u64,
    /// Seconds since the last access of the most recently evicted item.
    pub(crate) evicted_time: u32,
    /// Segments compacted (mostly expired, deleted or overwritten).
    pub(crate) compactions: u64,
    /// Items they moved.
    pub(crate) compacted: u64,
}

/// Eviction's own state, behind the eviction lock: the main queues' open segments and
/// the counters.
#[derive(Debug, Default)]
pub(crate) struct Evictor {
    heads: [Option<Head>; QUEUES],
    /// Segments an expiry sweep left mostly empty, to compact first.
    sparse: std::collections::VecDeque<SegId>,
    pub(crate) counters: EvictCounters,
}

impl Evictor {
    /// Room for `size` bytes at the head of `queue`, opening a new head (from any free
    /// segment, the reserve included) when the current one is full. `None` if no segment
    /// can be had, or the store cannot spare another open head.
    pub(crate) fn alloc(
        &mut self,
        segs: &Segments,
        queue: usize,
        size: usize,
    ) -> Option<(SegId, u32)> {
        let seg_size = segs.seg_size();
        if size > seg_size {
            return None;
        }
        if let Some(h) = self.heads[queue] {
            if h.off as usize + size <= seg_size {
                return Some(self.bump(segs, queue, h, size));
            }
            segs.seal(h.seg, h.off);
            self.heads[queue] = None;
        }
        // Open heads cannot be evicted: in a store of few segments they would leave
        // nothing to evict, so they are capped at a quarter of memory.
        let open = self.heads.iter().flatten().count();
        if open + 1 > (segs.limit() / 4).saturating_sub(1) {
            return None;
        }
        let seg = segs.take_free(queue).or_else(|| segs.take_spare(queue))?;
        let h = Head { seg, off: 0 };
        self.heads[queue] = Some(h);
        Some(self.bump(segs, queue, h, size))
    }

    /// Remembers sealed segment `id` for compaction if `sparse` (its live items fill
    /// little of it), forgetting the oldest one remembered when there are too many.
    pub(crate) fn note_sparse(&mut self, id: SegId, sparse: bool) {
        if sparse && !self.sparse.contains(&id) {
            if self.sparse.len() >= SPARSE_MAX {
                self.sparse.pop_front();
            }
            self.sparse.push_back(id);
        }
    }

    /// Seals every open head, so that its items can be evicted: for when nothing else can
    /// be. Returns whether there was any.
    pub(crate) fn seal_heads(&mut self, segs: &Segments) -> bool {
        let mut any = false;
        for h in self.heads.iter_mut().filter_map(Option::take) {
            segs.seal(h.seg, h.off);
            any = true;
        }
        any
    }

    /// The next sparse segment to compact, oldest noted first.
    pub(crate) fn pop_sparse(&mut self) -> Option<SegId> {
        self.sparse.pop_front()
    }

    /// Whether `queue` has an open head.
    pub(crate) fn has_head(&self, queue: usize) -> bool {
        self.heads[queue].is_some()
    }

    /// The segments open as heads now (eviction appends to them under its lock).
    pub(crate) fn head_segments(&self) -> Vec<SegId> {
        self.heads.iter().flatten().map(|h| h.seg).collect()
    }

    /// Whether `id` is open as a head.
    pub(crate) fn is_head(&self, id: SegId) -> bool {
        self.heads.iter().flatten().any(|h| h.seg == id)
    }

    fn bump(&mut self, segs: &Segments, queue: usize, h: Head, size: usize) -> (SegId, u32) {
        let off = h.off;
        let end = off + size as u32;
        self.heads[queue] = Some(Head {
            seg: h.seg,
            off: end,
        });
        // Kept current, as writers do, for a warm-restart save of an open head.
        segs.meta(h.seg).used.store(end, Ordering::Relaxed);
        (h.seg, off)
    }
}
