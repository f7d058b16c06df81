//! Segment memory and the pool that hands segments to writers.
//!
//! Memory is carved into equal segments. A writer owns one *active* segment and appends
//! items to it without any lock; when it is full the segment is *sealed* into a queue
//! and the writer takes a free one. Sealed segments wait in one of several FIFO queues:
//! the probation queue, where every writer's segments go, and one main queue per item
//! size class, filled by eviction as it moves the items worth keeping (see `evict`, which
//! decides which segment to empty next and what to keep of it). No per-item allocator,
//! no fragmentation, and eviction cost amortised over a segment.
//!
//! Segment memory is allocated lazily (zeroed pages are not resident until written), so a
//! store that never fills does not cost its whole limit in RSS. It comes from the heap,
//! segment by segment; from one anonymous reservation advised for huge pages
//! ([`AnonRegion`]) when the store is configured for them; or, for a warm restart, from a
//! shared mapping of a memory file ([`MemoryMap`]) whose contents outlive the process.

use crate::anon_region::AnonRegion;
use crate::memory_file::MemoryMap;
use parking_lot::Mutex;
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};

/// Identifies a segment; fits the index's 16-bit field.
pub type SegId = u16;

/// Most segments a store can address (the index packs ids into 16 bits).
pub const MAX_SEGMENTS: usize = 1 << 16;

/// Segment states, kept in [`SegMeta::state`].
pub const FREE: u32 = 0;
/// Owned by a writer (or by eviction, as a queue's head) that appends to it.
pub const ACTIVE: u32 = 1;
/// Full; in an eviction queue.
pub const SEALED: u32 = 2;
/// Emptied of items but still read by a reply in flight ([`SegMeta::pins`]): reused once
/// the last pin is dropped.
pub const DRAINING: u32 = 3;

/// Set in [`SegMeta::pins`] once the segment's memory is wanted back: the pin dropped
/// while it is set and the count falls to zero hands the segment to the free list.
const DRAIN: u32 = 1 << 31;

/// Per-segment bookkeeping, readable without the pool lock.
#[derive(Debug, Default)]
pub struct SegMeta {
    /// Generation of the segment's current use; derived CAS uniques include it, so a
    /// reused segment never repeats an old unique.
    pub gen: AtomicU32,
    /// Bytes written (valid once sealed).
    pub used: AtomicU32,
    /// Items in this segment that the index still points at.
    pub live_items: AtomicU32,
    /// Bytes of those items.
    pub live_bytes: AtomicU32,
    /// FREE, ACTIVE, SEALED or DRAINING.
    pub state: AtomicU32,
    /// Replies in flight that read values in place from this segment (see
    /// [`crate::ValueRef`]), plus the `DRAIN` bit once the segment's memory is wanted back.
    /// A segment is only reused or freed at zero pins, so a reply never sees its bytes
    /// change under it.
    pub pins: AtomicU32,
    /// No item in this segment expires before this rel time: the earliest expiry of the
    /// items written to it or touched in it (`u32::MAX`: none has one; 0: not known, as
    /// after a restart). Lets the expiry sweep skip segments with nothing to reclaim
    /// instead of walking every item of every sealed segment (most caches set no TTL,
    /// or long ones). Only ever lowered while the segment is in use, except by the sweep
    /// itself (see `Inner::reclaim_expired_in`).
    pub earliest_expiry: AtomicU32,
    /// Every item written to this segment (or touched in it) expires by this rel time:
    /// 0 while nothing with an expiry is written, `u32::MAX` once an item that never
    /// expires is. Only ever raised while the segment is in use, except by the walk that
    /// recomputes it (see `Writer::recycle_expired`). Lets a writer tell at a glance that
    /// everything in its segment has expired, and write from the start of a fresh one
    /// rather than fill a segment of garbage.
    pub latest_expiry: AtomicU32,
    /// The queue the segment belongs to (0: probation; a size class otherwise), set when
    /// it is opened.
    pub queue: AtomicU32,
    /// Items read since they arrived in this segment (each counted once, at its first
    /// read): with the segment's size and age, how much its contents are still wanted.
    pub active_items: AtomicU32,
    /// The pool's count of segments opened when this one was opened, then sealed: its
    /// age, in segments written since, is the current count minus this.
    pub born: AtomicU64,
    /// Handed to eviction as holed since it was opened (see `Inner::note_if_holed`):
    /// each segment is queued for compaction at most once per use.
    pub holed_noted: AtomicBool,
}

/// Queues of sealed segments: index [`PROBATION`] for writers' segments, then one per
/// size class (1 to [`CLASSES`]), then [`STUBS`].
pub const QUEUES: usize = CLASSES + 2;
/// The queue writers seal their segments into.
pub const PROBATION: usize = 0;
/// Size classes of the main queues.
pub const CLASSES: usize = 12;
/// The queue of flash stubs (items whose value is on flash): apart from the size classes,
/// so that a stub's few bytes are not weighed against items held in memory whole.
pub const STUBS: usize = CLASSES + 1;

struct Pool {
    free: Vec<SegId>,
    /// Sealed segments per queue, oldest first.
    queues: [VecDeque<SegId>; QUEUES],
    never_allocated: Vec<SegId>,
    /// Segments with memory allocated, the spare not included.
    allocated: usize,
    /// A free segment beyond the limit whose memory is kept for eviction's next copies
    /// ([`Segments::take_spare`]): giving it back to the kernel and faulting it in again
    /// on every eviction cost a page fault per 4 KiB written, which halved throughput
    /// with large values.
    spare: Option<SegId>,
    /// Most segments the memory limit allows.
    limit: usize,
    next_gen: u32,
    /// Segments emptied but still pinned by replies in flight (state DRAINING).
    draining: usize,
    /// Segments opened so far: the clock segment ages are measured in.
    opened: u64,
}

/// One segment's state as saved for a warm restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SavedSegment {
    /// FREE, ACTIVE or SEALED.
    pub state: u32,
    /// The queue it belongs to.
    pub queue: u32,
    /// Generation (derived CAS uniques include it).
    pub gen: u32,
    /// Bytes written.
    pub used: u32,
    /// Whether the segment has memory (was ever taken into use).
    pub has_memory: bool,
}

/// The pool's state as saved for a warm restart.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SavedPool {
    /// Per segment id, in id order.
    pub segments: Vec<SavedSegment>,
    /// Sealed segments of each queue, oldest first.
    pub queues: Vec<Vec<SegId>>,
    /// Free segments with memory.
    pub free: Vec<SegId>,
    /// The next generation to hand out.
    pub next_gen: u32,
}

/// The segment table and pool.
pub struct Segments {
    seg_size: usize,
    /// Where segment memory comes from for a warm restart (`-e`).
    mapped: Option<MemoryMap>,
    /// Segments the memory file's filesystem had no room for (see [`MemoryMap::reserve`]).
    file_full: AtomicU64,
    /// Where it comes from otherwise, when the address space could be reserved.
    anon: Option<AnonRegion>,
    ptrs: Box<[AtomicPtr<u8>]>,
    meta: Box<[SegMeta]>,
    pool: Mutex<Pool>,
}

// SAFETY: segment memory is shared by design; all access goes through the publication
// protocol documented in `layout::RawItem` and in the store.
unsafe impl Sync for Segments {}
// SAFETY: as for Sync: the raw segment pointers are owned by the table, not by a thread.
unsafe impl Send for Segments {}

impl Segments {
    /// A table of segments of `seg_size` bytes, allowing `limit` of them and addressing up to
    /// `capacity` (for later raises of the limit). With `huge_pages`, memory for every
    /// segment id is reserved up front in one mapping advised for transparent huge pages
    /// (falling back to the heap if that fails); without, each segment is a heap allocation.
    ///
    /// # Panics
    /// If `seg_size` is not a power of two between 8 bytes and 2 GiB: item offsets are
    /// `u32`, references pack offsets with shifts, and every allocation uses this size.
    pub fn new(seg_size: usize, limit: usize, capacity: usize, huge_pages: bool) -> Self {
        // Checked here, once, because `layout` and every write into a segment rely on it.
        assert!(
            seg_size.is_power_of_two() && (8..=1 << 31).contains(&seg_size),
            "invalid segment size {seg_size}"
        );
        let capacity = capacity.clamp(1, MAX_SEGMENTS);
        let limit = limit.clamp(1, capacity);
        let ptrs = (0..capacity)
            .map(|_| AtomicPtr::new(std::ptr::null_mut()))
            .collect();
        let meta = (0..capacity).map(|_| SegMeta::default()).collect();
        let never_allocated = (0..capacity as u32).rev().map(|i| i as SegId).collect();
        // Miri cannot run mmap/madvise; its runs use the heap path.
        let anon = if cfg!(miri) || !huge_pages {
            None
        } else {
            capacity
                .checked_mul(seg_size)
                .and_then(|len| AnonRegion::reserve(len).ok())
        };
        Segments {
            seg_size,
            mapped: None,
            file_full: AtomicU64::new(0),
            anon,
            ptrs,
            meta,
            pool: Mutex::new(Pool {
                free: Vec::new(),
                queues: Default::default(),
                never_allocated,
                allocated: 0,
                spare: None,
                limit,
                next_gen: 1,
                draining: 0,
                opened: 0,
            }),
        }
    }

    /// Takes segment memory from `map` instead of the heap. Called before any segment is
    /// used; the mapping must cover every segment id.
    pub fn use_mapping(&mut self, map: MemoryMap) {
        assert!(
            map.len >= self.ptrs.len() * self.seg_size,
            "memory file mapping too small"
        );
        self.mapped = Some(map);
        self.anon = None;
    }

    /// Makes the memory of the first `segments` segments resident now (memcached's `-L`
    /// allocates its whole cache at startup) rather than as each is first written. Only
    /// for anonymous segment memory; a memory file is the caller's to size.
    pub fn prefault(&self, segments: usize) {
        if let Some(anon) = &self.anon {
            anon.prefault(segments.saturating_mul(self.seg_size));
        }
    }

    /// Whether segment memory is the anonymous reservation advised for huge pages.
    pub fn huge_page_advised(&self) -> bool {
        self.anon.is_some()
    }

    /// Times a segment could not be taken into use because the memory file's filesystem
    /// had no room for it.
    pub fn memory_file_full(&self) -> u64 {
        self.file_full.load(Ordering::Relaxed)
    }

    /// The mapping segment memory lives in, if any.
    pub fn mapping(&self) -> Option<&MemoryMap> {
        self.mapped.as_ref()
    }

    /// Memory for segment `id`: its slice of the memory file's mapping or of the
    /// anonymous reservation, or a zeroed heap allocation.
    fn memory_for(&self, id: SegId) -> *mut u8 {
        if let Some(m) = &self.mapped {
            let offset = id as usize * self.seg_size;
            if m.reserve(offset, self.seg_size).is_err() {
                // No room on the file's filesystem: as if memory were full, so the store
                // evicts instead of growing (a write to the hole would be a SIGBUS).
                self.file_full.fetch_add(1, Ordering::Relaxed);
                return std::ptr::null_mut();
            }
            // SAFETY: `use_mapping` checked that every id's segment lies in the mapping.
            return unsafe { m.base.add(offset) };
        }
        if let Some(a) = &self.anon {
            // SAFETY: the reservation covers every segment id (`new`).
            return unsafe { a.base().add(id as usize * self.seg_size) };
        }
        // SAFETY: layout has non-zero size.
        unsafe { alloc_zeroed(self.layout()) }
    }

    /// Gives segment memory back: a heap allocation is freed, a slice of the anonymous
    /// reservation returns its pages to the kernel, a memory file's slice stays.
    fn free_memory(&self, mem: *mut u8) {
        if self.mapped.is_some() {
            return;
        }
        if let Some(a) = &self.anon {
            a.release(mem as usize - a.base() as usize, self.seg_size);
            return;
        }
        // SAFETY: allocated in `memory_for` with the same layout; no index entry points
        // into a segment whose memory is freed.
        unsafe { dealloc(mem, self.layout()) };
    }

    /// A copy of the pool and segment table, for the restart metadata. Writers must have
    /// stopped (their active segments are recorded as they are).
    pub fn save(&self) -> SavedPool {
        let pool = self.pool.lock();
        let segments = self
            .meta
            .iter()
            .zip(self.ptrs.iter())
            .map(|(m, p)| SavedSegment {
                state: m.state.load(Ordering::Acquire),
                queue: m.queue.load(Ordering::Relaxed),
                gen: m.gen.load(Ordering::Relaxed),
                used: m.used.load(Ordering::Relaxed),
                has_memory: !p.load(Ordering::Acquire).is_null(),
            })
            .collect();
        SavedPool {
            segments,
            queues: pool
                .queues
                .iter()
                .map(|q| q.iter().copied().collect())
                .collect(),
            free: pool.free.clone(),
            next_gen: pool.next_gen,
        }
    }

    /// Rebuilds the pool from saved state over a mapping that holds the saved segments.
    /// Every segment that held items comes back sealed in its queue (oldest first, as
    /// saved; segments that writers or eviction held open go last), with its live counts
    /// zeroed for the caller to recount as it relinks items. Returns false (leaving the
    /// table unchanged) if the saved state does not describe this table.
    pub fn restore(&self, saved: &SavedPool) -> bool {
        // A state saved before the stubs' queue was added has one queue fewer: the same
        // layout with that queue empty (its stubs stay in their size classes).
        if self.mapped.is_none()
            || saved.segments.len() != self.ptrs.len()
            || !(STUBS..=QUEUES).contains(&saved.queues.len())
        {
            return false;
        }
        let mut seen = vec![false; self.ptrs.len()];
        let mut queues: [Vec<SegId>; QUEUES] = Default::default();
        let mut free = Vec::new();
        let lists = saved
            .queues
            .iter()
            .zip(queues.iter_mut())
            .chain(std::iter::once((&saved.free, &mut free)));
        for (list, out) in lists {
            for &id in list {
                let i = id as usize;
                if i >= seen.len() || seen[i] || !saved.segments[i].has_memory {
                    return false;
                }
                seen[i] = true;
                out.push(id);
            }
        }
        for (i, s) in saved.segments.iter().enumerate() {
            if s.used as usize > self.seg_size || s.queue as usize >= QUEUES {
                return false;
            }
            // A segment a writer or eviction still held: its items are complete up to
            // `used`.
            if s.state == ACTIVE && !seen[i] && s.has_memory {
                seen[i] = true;
                queues[s.queue as usize].push(i as SegId);
            }
        }
        let mut pool = self.pool.lock();
        if pool.allocated != 0 {
            return false;
        }
        let mut allocated = 0;
        for (i, s) in saved.segments.iter().enumerate() {
            let m = &self.meta[i];
            m.live_items.store(0, Ordering::Relaxed);
            m.live_bytes.store(0, Ordering::Relaxed);
            m.active_items.store(0, Ordering::Relaxed);
            m.born.store(0, Ordering::Relaxed);
            m.queue.store(s.queue, Ordering::Relaxed);
            if seen[i] {
                self.ptrs[i].store(self.memory_for(i as SegId), Ordering::Release);
                m.gen.store(s.gen, Ordering::Relaxed);
                m.used.store(s.used, Ordering::Relaxed);
                allocated += 1;
            }
        }
        for q in &queues {
            for &id in q {
                self.meta(id).state.store(SEALED, Ordering::Release);
            }
        }
        for &id in &free {
            self.meta(id).state.store(FREE, Ordering::Release);
        }
        pool.never_allocated = (0..self.ptrs.len())
            .rev()
            .filter(|&i| !seen[i])
            .map(|i| i as SegId)
            .collect();
        pool.allocated = allocated;
        pool.queues = queues.map(VecDeque::from);
        pool.free = free;
        pool.next_gen = saved.next_gen.max(1);
        true
    }

    /// Segment ids that exist.
    pub fn capacity(&self) -> usize {
        self.ptrs.len()
    }

    /// Size of every segment in bytes.
    pub fn seg_size(&self) -> usize {
        self.seg_size
    }

    fn layout(&self) -> Layout {
        // Never a fallback layout: a smaller allocation than `seg_size` would make every
        // write near a segment's end go out of bounds. `new` checked the size, so this
        // cannot fail.
        Layout::from_size_align(self.seg_size, 8).expect("segment size checked in new")
    }

    /// Base address of a segment with memory. Only called for ids reached through the index
    /// or owned by the caller, which always have memory.
    #[inline]
    pub fn base(&self, id: SegId) -> *mut u8 {
        self.ptrs[id as usize].load(Ordering::Acquire)
    }

    /// Bookkeeping of a segment.
    #[inline]
    pub fn meta(&self, id: SegId) -> &SegMeta {
        &self.meta[id as usize]
    }

    fn open(&self, pool: &mut Pool, id: SegId, queue: usize) -> SegId {
        let gen = pool.next_gen;
        pool.next_gen = pool.next_gen.wrapping_add(1).max(1);
        pool.opened += 1;
        let m = self.meta(id);
        m.queue.store(queue as u32, Ordering::Relaxed);
        m.active_items.store(0, Ordering::Relaxed);
        m.born.store(pool.opened, Ordering::Relaxed);
        m.gen.store(gen, Ordering::Relaxed);
        m.used.store(0, Ordering::Relaxed);
        m.live_items.store(0, Ordering::Relaxed);
        m.live_bytes.store(0, Ordering::Relaxed);
        // Claimed (or never used): no pin can exist, and the drain mark goes.
        m.pins.store(0, Ordering::Relaxed);
        m.holed_noted.store(false, Ordering::Relaxed);
        m.earliest_expiry.store(u32::MAX, Ordering::Relaxed);
        m.latest_expiry.store(0, Ordering::Relaxed);
        m.state.store(ACTIVE, Ordering::Release);
        id
    }

    /// A segment to write for `queue` (the probation queue for a writer, a size class for
    /// eviction's copies): a free one, or new memory while the limit allows. `None` when
    /// neither exists: memory is full and something must be evicted first.
    pub fn take_free(&self, queue: usize) -> Option<SegId> {
        self.take(queue, 0)
    }

    /// A segment for eviction's copies when [`take_free`](Self::take_free) has none: one
    /// segment of memory beyond the limit, which the next segment eviction empties gives
    /// back (see `release`). Eviction needs somewhere to copy the items it keeps before
    /// the segment it empties is free; borrowing for that moment costs memory one
    /// segment over the limit at times, where keeping a segment free for it would cost
    /// one segment of items all the time. Once borrowed, the segment's memory stays
    /// allocated as the spare (RSS is the limit plus one segment), so later evictions
    /// reuse it without faulting pages in.
    pub fn take_spare(&self, queue: usize) -> Option<SegId> {
        self.take(queue, 1)
    }

    /// A segment to write for `queue` from the free list only: memory already in use,
    /// never a segment not allocated yet. `None` when the free list is empty.
    pub fn take_reused(&self, queue: usize) -> Option<SegId> {
        let mut pool = self.pool.lock();
        let id = pool.free.pop()?;
        Some(self.open(&mut pool, id, queue))
    }

    fn take(&self, queue: usize, beyond_limit: usize) -> Option<SegId> {
        let mut pool = self.pool.lock();
        if let Some(id) = pool.free.pop() {
            return Some(self.open(&mut pool, id, queue));
        }
        if beyond_limit > 0 {
            if let Some(id) = pool.spare.take() {
                pool.allocated += 1;
                return Some(self.open(&mut pool, id, queue));
            }
        }
        if pool.allocated < pool.limit + beyond_limit {
            if let Some(id) = pool.never_allocated.pop() {
                let mem = self.memory_for(id);
                if mem.is_null() {
                    pool.never_allocated.push(id);
                    return None;
                }
                self.ptrs[id as usize].store(mem, Ordering::Release);
                pool.allocated += 1;
                return Some(self.open(&mut pool, id, queue));
            }
        }
        None
    }

    /// Takes a sealed segment out of the queues whose items are all gone (reusing it
    /// costs nothing), looking only at the front of each queue to bound the time under
    /// the lock.
    pub fn take_dead(&self) -> Option<SegId> {
        let mut pool = self.pool.lock();
        for q in pool.queues.iter_mut() {
            let dead = q
                .iter()
                .take(16)
                .position(|&id| self.meta(id).live_items.load(Ordering::Acquire) == 0);
            if let Some(pos) = dead {
                return q.remove(pos);
            }
        }
        None
    }

    /// Takes sealed segment `id` out of `queue`, if it is still there.
    pub fn take_sealed(&self, id: SegId, queue: usize) -> bool {
        let mut pool = self.pool.lock();
        let q = &mut pool.queues[queue];
        match q.iter().position(|&s| s == id) {
            Some(pos) => q.remove(pos).is_some(),
            None => false,
        }
    }

    /// Takes the oldest segment of `queue` that no reply is reading from (evicting a
    /// pinned one would drop its items and still not free its memory until the reply is
    /// written; pins last one write, so the search rarely goes past the front), or the
    /// oldest if every one looked at is pinned.
    pub fn take_oldest(&self, queue: usize) -> Option<SegId> {
        let mut pool = self.pool.lock();
        let q = &mut pool.queues[queue];
        let unpinned = q
            .iter()
            .take(64)
            .position(|&id| self.meta(id).pins.load(Ordering::Relaxed) == 0)
            .unwrap_or(0);
        q.remove(unpinned)
    }

    /// The oldest segment and the length of each queue (`None` and 0 for an empty one),
    /// and the pool's count of segments opened, for eviction's choice of queue.
    pub fn fronts(&self) -> ([Option<SegId>; QUEUES], [usize; QUEUES], u64) {
        let pool = self.pool.lock();
        let mut fronts = [None; QUEUES];
        let mut lens = [0; QUEUES];
        for (i, q) in pool.queues.iter().enumerate() {
            fronts[i] = q.front().copied();
            lens[i] = q.len();
        }
        (fronts, lens, pool.opened)
    }

    /// Hands a segment emptied by eviction back to the pool: to the free list, or, while a
    /// reply still reads from it, draining (it joins the free list when the last pin is
    /// dropped). Returns false in the second case.
    pub fn release_evicted(&self, id: SegId) -> bool {
        let mut pool = self.pool.lock();
        if self.claim(id) {
            self.release(&mut pool, id);
            true
        } else {
            self.meta(id).state.store(DRAINING, Ordering::Release);
            pool.draining += 1;
            false
        }
    }

    /// Takes a reference to segment `id` for a reply that will read a value in place.
    ///
    /// Only for a segment holding an item the index points at, with that item's shard lock
    /// held: every path that reuses a segment first unlinks its items under their shard
    /// locks and then [`claim`](Self::claim)s it, so a pin taken this way is always seen.
    #[inline]
    pub fn pin(&self, id: SegId) {
        self.meta(id).pins.fetch_add(1, Ordering::Relaxed);
    }

    /// Drops a reference taken with [`pin`](Self::pin). The last one dropped from a
    /// draining segment gives it to the free list.
    #[inline]
    pub fn unpin(&self, id: SegId) {
        let prev = self.meta(id).pins.fetch_sub(1, Ordering::AcqRel);
        if prev == DRAIN | 1 {
            let mut pool = self.pool.lock();
            pool.draining -= 1;
            self.release(&mut pool, id);
        }
    }

    /// Claims an emptied segment's memory for reuse: true if no reply reads from it. Else
    /// the segment is marked so that the last [`unpin`](Self::unpin) frees it, and it must
    /// not be touched until then. Exactly one of the two parties gets it: the claim and
    /// each unpin are read-modify-writes of one word.
    fn claim(&self, id: SegId) -> bool {
        let prev = self.meta(id).pins.fetch_or(DRAIN, Ordering::AcqRel);
        prev & !DRAIN == 0
    }

    /// Hands an emptied segment to the free list, or leaves it draining while replies
    /// read from it.
    fn retire(&self, pool: &mut Pool, id: SegId) {
        if self.claim(id) {
            self.release(pool, id);
        } else {
            self.meta(id).state.store(DRAINING, Ordering::Release);
            pool.draining += 1;
        }
    }

    /// Queues a full segment in the queue it was opened for, recording how many bytes it
    /// holds.
    pub fn seal(&self, id: SegId, used: u32) {
        let m = self.meta(id);
        m.used.store(used, Ordering::Relaxed);
        let queue = (m.queue.load(Ordering::Relaxed) as usize).min(QUEUES - 1);
        let mut pool = self.pool.lock();
        // Its age counts from now: a segment that took long to fill is not old for it.
        m.born.store(pool.opened, Ordering::Relaxed);
        m.state.store(SEALED, Ordering::Release);
        pool.queues[queue].push_back(id);
    }

    /// Moves sealed segments with no live items to the free list (or frees their memory if
    /// the limit was lowered). The caller holds the eviction lock. Returns how many were
    /// freed.
    pub fn reclaim_dead(&self) -> usize {
        let mut pool = self.pool.lock();
        let mut dead = Vec::new();
        for q in pool.queues.iter_mut() {
            q.retain(|&id| {
                let is_dead = self.meta(id).live_items.load(Ordering::Acquire) == 0;
                if is_dead {
                    dead.push(id);
                }
                !is_dead
            });
        }
        let n = dead.len();
        for id in dead {
            self.retire(&mut pool, id);
        }
        n
    }

    fn release(&self, pool: &mut Pool, id: SegId) {
        self.meta(id).state.store(FREE, Ordering::Release);
        if pool.allocated > pool.limit {
            // Parked outside the count, so that it never takes the place of a
            // segment the limit allows.
            if pool.spare.is_none() {
                pool.spare = Some(id);
                pool.allocated -= 1;
                return;
            }
            let mem = self.ptrs[id as usize].swap(std::ptr::null_mut(), Ordering::AcqRel);
            if !mem.is_null() {
                self.free_memory(mem);
            }
            pool.allocated -= 1;
            pool.never_allocated.push(id);
        } else {
            pool.free.push(id);
        }
    }

    /// Returns an emptied segment (from `MustEvict`, or a writer's unused one) that the
    /// caller does not want to write.
    pub fn give_back(&self, id: SegId) {
        let mut pool = self.pool.lock();
        self.retire(&mut pool, id);
    }

    /// Changes how many segments may exist. Excess memory is released as segments become
    /// free; lowering the limit makes eviction start sooner.
    pub fn set_limit(&self, limit: usize) {
        let mut pool = self.pool.lock();
        pool.limit = limit.clamp(1, self.ptrs.len());
        while pool.allocated > pool.limit {
            let Some(id) = pool.free.pop() else { break };
            self.release(&mut pool, id);
        }
        if pool.allocated > pool.limit {
            if let Some(id) = pool.spare.take() {
                let mem = self.ptrs[id as usize].swap(std::ptr::null_mut(), Ordering::AcqRel);
                if !mem.is_null() {
                    self.free_memory(mem);
                }
                pool.never_allocated.push(id);
            }
        }
    }

    /// Most segments the memory limit allows.
    pub fn limit(&self) -> usize {
        self.pool.lock().limit
    }

    /// Whether more segments have memory than the limit allows (it was lowered), so the
    /// caller should evict to shrink.
    pub fn over_limit(&self) -> bool {
        let pool = self.pool.lock();
        pool.allocated > pool.limit
    }

    /// Sealed segment ids of every queue, each queue oldest first (a snapshot).
    pub fn sealed_snapshot(&self) -> Vec<SegId> {
        self.pool
            .lock()
            .queues
            .iter()
            .flat_map(|q| q.iter().copied())
            .collect()
    }

    /// (allocated, limit, free, sealed in the probation queue, sealed in the size-class
    /// queues, sealed in the stubs' queue) counts.
    pub fn counts(&self) -> (usize, usize, usize, usize, usize, usize) {
        let pool = self.pool.lock();
        let main: usize = pool.queues[PROBATION + 1..=CLASSES]
            .iter()
            .map(|q| q.len())
            .sum();
        (
            pool.allocated,
            pool.limit,
            pool.free.len(),
            pool.queues[PROBATION].len(),
            main,
            pool.queues[STUBS].len(),
        )
    }

    /// Segments emptied but still read by replies in flight.
    pub fn draining(&self) -> usize {
        self.pool.lock().draining
    }
}

impl Drop for Segments {
    fn drop(&mut self) {
        if self.mapped.is_some() || self.anon.is_some() {
            // Unmapped whole when the mapping drops, after this.
            return;
        }
        for p in self.ptrs.iter() {
            let mem = p.swap(std::ptr::null_mut(), Ordering::AcqRel);
            if !mem.is_null() {
                self.free_memory(mem);
            }
        }
    }
}
