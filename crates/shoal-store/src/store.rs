//! The store: index shards over segment memory, and the operations on them.

use crate::clock::{is_expired, Clock};
use crate::entry::{Entry, EntryError, EntryErrorKind, Item};
use crate::index::{Items, Padded, Ref, Refs, Shard, ShardCounters};
use crate::layout::{RawItem, FETCHED, NO_LINK};
use crate::segments::{Acquired, SegId, Segments, MAX_SEGMENTS};
use crate::stats::StoreStats;
use crate::writer::Writer;
use parking_lot::{Mutex, MutexGuard};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// A callback told about each evicted item; see [`Store::on_evict`].
pub type EvictObserver = Box<dyn Fn(&Item<'_>) + Send + Sync>;

/// Why a store operation could not complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The item is larger than a segment can hold.
    #[error("object too large for cache")]
    TooLarge,
    /// The memory limit is reached and eviction is disabled (or nothing can be evicted).
    #[error("out of memory storing object")]
    OutOfMemory,
}

/// Errors in a [`StoreConfig`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The memory limit is below what one segment needs.
    #[error("memory limit of {0} bytes is too small")]
    MemoryTooSmall(usize),
}

/// How a store is sized and behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreConfig {
    /// Bytes available for items (keys, values and item headers).
    pub memory_limit: usize,
    /// Largest item (key + value + header) that must fit.
    pub max_item_size: usize,
    /// Evict old items when memory is full (memcached's default; `-M` turns it off).
    pub evict: bool,
    /// How many writers (threads) will write at once; each holds one segment open.
    pub writers: usize,
    /// Items the index is sized for up front (memcached's `hashpower`); 0 grows on demand.
    /// Pre-sizing avoids rehash pauses while a large cache warms up.
    pub index_capacity: usize,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            memory_limit: 64 << 20,
            max_item_size: 1 << 20,
            evict: true,
            writers: 4,
            index_capacity: 0,
        }
    }
}

pub(crate) const SHARDS: usize = 256;
const MIN_SEGMENT: usize = 64 << 10;
const DEFAULT_SEGMENT: usize = 1 << 20;
/// Sealed segments scanned for expired items per maintenance call.
const CRAWL_BATCH: usize = 4;

/// A memory-bounded key-value store for cache items. Cheap to clone (shared handle);
/// every method is safe to call from any thread.
#[derive(Clone)]
pub struct Store {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) clock: Clock,
    pub(crate) segs: Segments,
    pub(crate) refs: Refs,
    pub(crate) shards: Box<[Padded<Mutex<Shard>>]>,
    hasher: foldhash::fast::RandomState,
    pub(crate) evict: bool,
    /// Rel time at which a delayed `flush_all` takes effect, 0 if none.
    pending_flush: AtomicU32,
    crawl_cursor: AtomicUsize,
    limit_bytes: AtomicU64,
    /// Told about every item evicted to make room (memcached's `watch evictions`).
    pub(crate) evict_observer: std::sync::OnceLock<EvictObserver>,
    /// The memory file segments live in, for a warm restart (see `restart`).
    pub(crate) memory_file: std::sync::OnceLock<crate::restart::MemoryFile>,
}

impl Store {
    /// Creates a store. Memory is reserved lazily, segment by segment.
    pub fn new(cfg: StoreConfig) -> Result<Store, ConfigError> {
        let g = Geometry::of(&cfg)?;
        Ok(Store::from_inner(Inner::new(&cfg, &g, Clock::new())))
    }

    pub(crate) fn from_inner(inner: Inner) -> Store {
        Store {
            inner: Arc::new(inner),
        }
    }

    /// The store's clock (rel seconds); the server ticks it through [`maintain`](Self::maintain).
    pub fn clock(&self) -> &Clock {
        &self.inner.clock
    }

    /// A writer for one thread. Each writer keeps one segment open for appends.
    pub fn writer(&self) -> Writer {
        Writer::new(self.inner.clone())
    }

    /// Largest item size (header + key + value) a store can hold.
    pub fn max_item_bytes(&self) -> usize {
        self.inner.segs.seg_size()
    }

    /// Reads a live item and marks it fetched. `f` runs under the key's shard lock, so it
    /// should only copy what it needs. Expired items read as absent (and are reclaimed).
    pub fn get<R>(&self, key: &[u8], f: impl FnOnce(&Item<'_>) -> R) -> Option<R> {
        let inner = &*self.inner;
        let now = inner.clock.now();
        inner.check_flush(now);
        let hash = inner.hash(key);
        let mut shard = inner.shard(hash);
        let loc = shard.find(inner, hash, key)?;
        let raw = inner.item_at(loc);
        if is_expired(raw.exptime(), now) {
            inner.remove_expired(&mut shard, hash, loc);
            shard.counters.get_expired += 1;
            return None;
        }
        let item = Item::new(raw, inner.cas_of(loc, &raw), now);
        let r = f(&item);
        raw.set_state(FETCHED);
        raw.set_atime(now);
        Some(r)
    }

    /// Runs a read-modify-write on one key under its shard lock. `f` sees the live item (if
    /// any) through the [`Entry`] and may store, touch or remove it. `f` may be called more
    /// than once (when the writer needs a fresh segment it is re-run after the lock is
    /// dropped and room is made), so it must not have side effects before its last call
    /// returns; errors from `Entry` methods must be propagated with `?`.
    ///
    /// `f` runs under the key's shard lock: calling back into the store from `f` (or from a
    /// [`get`](Self::get) callback) may deadlock, though it cannot corrupt memory.
    ///
    /// # Panics
    ///
    /// If `writer` was made by a different store (one not sharing this store's memory, i.e.
    /// not a clone of it). A writer's segment belongs to its own store, so writing through
    /// it here would link another store's memory into this index; like a `RefCell` borrow
    /// conflict this is a contract violation, refused in every build.
    pub fn update<R>(
        &self,
        writer: &mut Writer,
        key: &[u8],
        mut f: impl FnMut(&mut Entry<'_>) -> Result<R, EntryError>,
    ) -> Result<R, StoreError> {
        // A real check, not a debug one: `Entry::write` resolves the writer's segment id in
        // *this* store's segment table, so a foreign writer would write into memory it does
        // not own (another writer's segment, or a null base) and the index would then point
        // into it. One pointer comparison per update is cheap next to the shard lock.
        assert!(
            Arc::ptr_eq(&writer.inner, &self.inner),
            "Store::update: the Writer belongs to a different Store (make it with this store's writer())"
        );
        let inner = &*self.inner;
        let now = inner.clock.now();
        inner.check_flush(now);
        let hash = inner.hash(key);
        for _ in 0..8 {
            let needed = {
                let mut shard = inner.shard(hash);
                let mut current = shard.find(inner, hash, key);
                if let Some(loc) = current {
                    if is_expired(inner.item_at(loc).exptime(), now) {
                        inner.remove_expired(&mut shard, hash, loc);
                        current = None;
                    }
                }
                let mut entry = Entry::new(inner, &mut shard, writer, hash, key, now, current);
                match f(&mut entry) {
                    Ok(r) => return Ok(r),
                    Err(EntryError(EntryErrorKind::NeedSpace(n))) => n,
                    Err(EntryError(EntryErrorKind::Store(e))) => return Err(e),
                }
            };
            writer.make_room(needed)?;
        }
        Err(StoreError::OutOfMemory)
    }

    /// Invalidates every item now (`delay` 0) or `delay` seconds from now.
    pub fn flush_all(&self, delay: u32) {
        let inner = &*self.inner;
        if delay == 0 {
            inner.pending_flush.store(0, Ordering::Relaxed);
            inner.flush_now();
        } else {
            let at = inner.clock.now().saturating_add(delay);
            inner.pending_flush.store(at, Ordering::Relaxed);
        }
    }

    /// Housekeeping, to be called a few times a second from one thread: advances the clock,
    /// applies a due delayed flush, reclaims expired items from a few sealed segments, frees
    /// segments that hold nothing, and shrinks to a lowered memory limit.
    pub fn maintain(&self) {
        self.inner.clock.tick();
        self.maintain_at_current_time();
    }

    fn maintain_at_current_time(&self) {
        let inner = &*self.inner;
        let now = inner.clock.now();
        inner.check_flush(now);
        let sealed = inner.segs.sealed_snapshot();
        if !sealed.is_empty() {
            let start = inner.crawl_cursor.fetch_add(CRAWL_BATCH, Ordering::Relaxed);
            for i in 0..CRAWL_BATCH.min(sealed.len()) {
                let id = sealed[(start + i) % sealed.len()];
                inner.reclaim_expired_in(id, now);
            }
        }
        let _scan = inner.segs.scan_lock.lock();
        inner.segs.reclaim_dead();
        while let Some(id) = inner.segs.take_excess() {
            inner.evict_segment(id);
            inner.segs.give_back(id);
        }
    }

    /// Seconds since the least recently accessed live item of the segment eviction takes
    /// next was last read or stored: what memcached reports as the age of its LRU tail
    /// (`items:N:age`), since that segment's items are the next to go. 0 while no segment
    /// is sealed. Walks one segment, so it is for `stats items`, not hot paths.
    pub fn tail_age(&self) -> u32 {
        let inner = &*self.inner;
        let Some(id) = inner.segs.eviction_candidate() else {
            return 0;
        };
        let now = inner.clock.now();
        let _scan = inner.segs.scan_lock.lock();
        if inner.segs.meta(id).state.load(Ordering::Acquire) != crate::segments::SEALED {
            return 0;
        }
        let mut oldest: Option<u32> = None;
        inner.walk(id, |loc, raw| {
            if is_expired(raw.exptime(), now) {
                return;
            }
            let hash = inner.hash(raw.key());
            // Live only if the index still points at this copy.
            if inner.shard(hash).find(inner, hash, raw.key()) == Some(loc) {
                let atime = raw.atime();
                oldest = Some(oldest.map_or(atime, |o| o.min(atime)));
            }
        });
        oldest.map_or(0, |a| now.saturating_sub(a))
    }

    /// Changes the memory limit at run time (memcached's `cache_memlimit`).
    pub fn set_memory_limit(&self, bytes: usize) {
        let inner = &*self.inner;
        inner.limit_bytes.store(bytes as u64, Ordering::Relaxed);
        inner.segs.set_limit((bytes / inner.segs.seg_size()).max(1));
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> StoreStats {
        let inner = &*self.inner;
        let mut c = ShardCounters::default();
        let mut items = 0u64;
        let mut index_bytes = 0u64;
        for s in inner.shards.iter() {
            let s = s.0.lock();
            c.add(&s.counters);
            items += s.len() as u64;
            index_bytes += s.index_bytes() as u64;
        }
        let (allocated, _limit, free, sealed) = inner.segs.counts();
        StoreStats {
            curr_items: items,
            bytes: c.bytes,
            total_items: c.total_items,
            evictions: c.evictions,
            evicted_unfetched: c.evicted_unfetched,
            expired_unfetched: c.expired_unfetched,
            reclaimed: c.reclaimed,
            get_expired: c.get_expired,
            limit_maxbytes: inner.limit_bytes.load(Ordering::Relaxed),
            segment_size: inner.segs.seg_size() as u64,
            segments_allocated: allocated as u64,
            segments_free: free as u64,
            segments_sealed: sealed as u64,
            index_bytes,
        }
    }
}

/// How a store's memory is carved up, derived from its config alone (apart from `Store::new`
/// so that the arithmetic can be checked without building stores).
pub(crate) struct Geometry {
    /// Segment size in bytes, a power of two.
    pub(crate) seg: usize,
    /// Segments the memory limit allows.
    pub(crate) segments: usize,
    /// Segment ids that exist (room to raise the limit).
    pub(crate) capacity: usize,
    /// How item references are packed.
    pub(crate) refs: Refs,
}

impl Geometry {
    pub(crate) fn of(cfg: &StoreConfig) -> Result<Geometry, ConfigError> {
        let limit = cfg.memory_limit;
        // Segments are a power of two (references pack offsets with shifts) and at least
        // the item limit, so any item fits one segment.
        // (`checked_`: an absurd item limit must not overflow; it then falls to the
        // small-limit rule below like any item limit larger than memory.)
        let mut seg = cfg
            .max_item_size
            .max(1)
            .checked_next_power_of_two()
            .unwrap_or(usize::MAX)
            .max(DEFAULT_SEGMENT);
        // Every writer holds a segment open and eviction needs one sealed segment, so a
        // small limit gets smaller segments (and a lower effective item limit) rather than
        // a store that cannot evict.
        let min_segments = cfg.writers.max(1) + 2;
        if limit / seg < min_segments {
            let fit = (limit / min_segments).max(1);
            seg = (1usize << (usize::BITS - 1 - fit.leading_zeros())).max(MIN_SEGMENT);
        }
        while limit / seg > MAX_SEGMENTS {
            seg *= 2;
        }
        if seg > u32::MAX as usize || limit < seg {
            return Err(ConfigError::MemoryTooSmall(limit));
        }
        let segments = limit / seg;
        let mut capacity = (segments * 2).clamp(64, MAX_SEGMENTS);
        let refs = Refs::new(seg.trailing_zeros(), capacity);
        // When references use all of their 32 bits, the last item slot of the highest
        // segment id can pack to `NO_LINK`, the chain terminator (it does from 64 GiB of
        // addressable segments, where items are 16-byte aligned): linking such an item
        // would cut its bucket's chain off and lose the items behind it. Not using that
        // one segment id rules it out at the cost of one segment in thousands.
        let last = (capacity - 1) as SegId;
        if refs.make(last, (seg - refs.align()) as u32) == NO_LINK {
            capacity -= 1;
        }
        // (A limit of exactly `MAX_SEGMENTS` segments thus loses that one.)
        let segments = segments.min(capacity);
        Ok(Geometry {
            seg,
            segments,
            capacity,
            refs,
        })
    }
}

impl Inner {
    /// An empty store's state, with segment memory still to be chosen (heap by default).
    pub(crate) fn new(cfg: &StoreConfig, g: &Geometry, clock: Clock) -> Inner {
        let per_shard = cfg.index_capacity.div_ceil(SHARDS);
        let shards = (0..SHARDS)
            .map(|_| Padded(Mutex::new(Shard::with_capacity(per_shard))))
            .collect();
        Inner {
            clock,
            segs: Segments::new(g.seg, g.segments, g.capacity),
            refs: g.refs,
            shards,
            hasher: foldhash::fast::RandomState::default(),
            evict: cfg.evict,
            pending_flush: AtomicU32::new(0),
            crawl_cursor: AtomicUsize::new(0),
            limit_bytes: AtomicU64::new(cfg.memory_limit as u64),
            evict_observer: std::sync::OnceLock::new(),
            memory_file: std::sync::OnceLock::new(),
        }
    }

    /// Rel time of a pending delayed `flush_all`, 0 if none.
    pub(crate) fn pending_flush(&self) -> u32 {
        self.pending_flush.load(Ordering::Relaxed)
    }

    /// Restores a pending delayed `flush_all` (warm restart).
    pub(crate) fn set_pending_flush(&self, at: u32) {
        self.pending_flush.store(at, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    #[inline]
    pub(crate) fn shard(&self, hash: u64) -> MutexGuard<'_, Shard> {
        self.shards[((hash >> 32) as usize) & (SHARDS - 1)].0.lock()
    }

    #[inline]
    pub(crate) fn item_at(&self, r: Ref) -> RawItem {
        // SAFETY: `r` came from the index (under the shard lock) or from walking a sealed
        // segment under the scan lock; in both cases the segment has memory and the item
        // is complete (see `layout::RawItem`).
        unsafe {
            RawItem::at(
                self.segs
                    .base(self.refs.seg(r))
                    .add(self.refs.off(r) as usize),
            )
        }
    }

    /// Bytes an item occupies in its segment, alignment padding included.
    #[inline]
    pub(crate) fn footprint(&self, raw: &RawItem) -> usize {
        self.refs.aligned(raw.size())
    }

    /// The CAS unique of the item at `r`: explicit if stored, else derived from the
    /// segment's generation and the offset, which no other write ever reuses.
    #[inline]
    pub(crate) fn cas_of(&self, r: Ref, raw: &RawItem) -> u64 {
        raw.explicit_cas().unwrap_or_else(|| {
            let gen = self.segs.meta(self.refs.seg(r)).gen.load(Ordering::Relaxed);
            (u64::from(gen) << 32) | u64::from(self.refs.off(r))
        })
    }

    /// Counts an item as live in its segment and shard.
    pub(crate) fn link_accounting(&self, shard: &mut Shard, r: Ref, size: usize) {
        let m = self.segs.meta(self.refs.seg(r));
        m.live_items.fetch_add(1, Ordering::Relaxed);
        m.live_bytes.fetch_add(size as u32, Ordering::Relaxed);
        shard.counters.bytes += size as u64;
    }

    /// Stops counting an item as live.
    pub(crate) fn unlink_accounting(&self, shard: &mut Shard, r: Ref) {
        let size = self.footprint(&self.item_at(r));
        let m = self.segs.meta(self.refs.seg(r));
        m.live_bytes.fetch_sub(size as u32, Ordering::Relaxed);
        m.live_items.fetch_sub(1, Ordering::Release);
        shard.counters.bytes -= size as u64;
    }

    /// Unlinks the item `r` from the index, if it is linked.
    pub(crate) fn remove_loc(&self, shard: &mut Shard, hash: u64, r: Ref) -> bool {
        if shard.remove(self, hash, r) {
            self.unlink_accounting(shard, r);
            true
        } else {
            false
        }
    }

    fn remove_expired(&self, shard: &mut Shard, hash: u64, loc: Ref) {
        let fetched = self.item_at(loc).bits() & FETCHED != 0;
        if self.remove_loc(shard, hash, loc) {
            shard.counters.reclaimed += 1;
            if !fetched {
                shard.counters.expired_unfetched += 1;
            }
        }
    }

    pub(crate) fn check_flush(&self, now: u32) {
        let at = self.pending_flush.load(Ordering::Relaxed);
        if at != 0
            && now >= at
            && self
                .pending_flush
                .compare_exchange(at, 0, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            self.flush_now();
        }
    }

    fn flush_now(&self) {
        for s in self.shards.iter() {
            let mut shard = s.0.lock();
            let mut removed = Vec::new();
            shard.drain(self, |r| removed.push(r));
            for r in removed {
                self.unlink_accounting(&mut shard, r);
            }
        }
    }

    /// Finds a fresh segment for a writer, evicting the oldest one if memory is full.
    pub(crate) fn acquire_segment(&self) -> Result<SegId, StoreError> {
        for attempt in 0..2 {
            match self.segs.acquire(self.evict) {
                Acquired::Ready(id) => return Ok(id),
                Acquired::MustEvict(id) => {
                    let _scan = self.segs.scan_lock.lock();
                    self.evict_segment(id);
                    return Ok(self.segs.reopen(id));
                }
                Acquired::Exhausted if attempt == 0 => {
                    // Without eviction, expired items are still fair game (memcached -M
                    // reclaims them too): sweep every sealed segment once and retry.
                    let now = self.clock.now();
                    for id in self.segs.sealed_snapshot() {
                        self.reclaim_expired_in(id, now);
                    }
                    let _scan = self.segs.scan_lock.lock();
                    self.segs.reclaim_dead();
                }
                Acquired::Exhausted => break,
            }
        }
        Err(StoreError::OutOfMemory)
    }

    /// Calls `f` with the location of every item written in a sealed segment. The caller
    /// holds the scan lock, so the segment is not reused meanwhile.
    fn walk(&self, id: SegId, mut f: impl FnMut(Ref, RawItem)) {
        let used = self.segs.meta(id).used.load(Ordering::Acquire) as usize;
        let mut off = 0usize;
        while off + 12 <= used {
            let r = self.refs.make(id, off as u32);
            let raw = self.item_at(r);
            let size = self.footprint(&raw);
            f(r, raw);
            off += size;
        }
    }

    /// Unlinks every item of a segment taken out of the eviction queue. The caller holds
    /// the scan lock.
    pub(crate) fn evict_segment(&self, id: SegId) {
        if self.segs.meta(id).live_items.load(Ordering::Acquire) == 0 {
            return;
        }
        let now = self.clock.now();
        self.walk(id, |loc, raw| {
            let hash = self.hash(raw.key());
            let mut shard = self.shard(hash);
            let fetched = raw.bits() & FETCHED != 0;
            let expired = is_expired(raw.exptime(), now);
            if self.remove_loc(&mut shard, hash, loc) {
                let c = &mut shard.counters;
                if expired {
                    c.reclaimed += 1;
                    if !fetched {
                        c.expired_unfetched += 1;
                    }
                } else {
                    c.evictions += 1;
                    if !fetched {
                        c.evicted_unfetched += 1;
                    }
                    if let Some(observe) = self.evict_observer.get() {
                        // The segment is not reused before this walk ends, so the item's
                        // bytes are still intact although it is unlinked.
                        observe(&Item::new(raw, self.cas_of(loc, &raw), now));
                    }
                }
            }
        });
    }

    /// Unlinks the expired items of one sealed segment.
    pub(crate) fn reclaim_expired_in(&self, id: SegId, now: u32) {
        let _scan = self.segs.scan_lock.lock();
        if self.segs.meta(id).state.load(Ordering::Acquire) != crate::segments::SEALED
            || self.segs.meta(id).live_items.load(Ordering::Acquire) == 0
        {
            return;
        }
        self.walk(id, |loc, raw| {
            if !is_expired(raw.exptime(), now) {
                return;
            }
            let hash = self.hash(raw.key());
            let mut shard = self.shard(hash);
            self.remove_expired(&mut shard, hash, loc);
        });
    }
}

impl Items for Inner {
    #[inline]
    fn item(&self, r: Ref) -> RawItem {
        self.item_at(r)
    }

    #[inline]
    fn hash(&self, key: &[u8]) -> u64 {
        Inner::hash(self, key)
    }
}

impl Store {
    /// [`maintain`](Self::maintain) without re-reading the real clock, so tests that moved
    /// the clock forward keep their time.
    #[doc(hidden)]
    pub fn maintain_without_tick_for_test(&self) {
        self.maintain_at_current_time();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No item a store can ever write packs to the chain terminator, whatever its size.
    #[test]
    fn no_reachable_reference_is_the_chain_terminator() {
        let gib = 1usize << 30;
        for (memory_limit, max_item_size) in [
            (64 << 20, 1 << 20),
            (4 * gib, 1 << 20),
            (64 * gib, 1 << 20),
            (100 * gib, 1 << 20),
            (64 * gib, gib),
            (128 * gib, 2 * gib),
        ] {
            let g = Geometry::of(&StoreConfig {
                memory_limit,
                max_item_size,
                ..StoreConfig::default()
            })
            .expect("config");
            let last = (g.capacity - 1) as SegId;
            // The smallest item (12-byte header, 1-byte key) at the very end of the segment.
            let smallest = g.refs.aligned(16);
            let r = g.refs.make(last, (g.seg - smallest) as u32);
            assert_ne!(r, NO_LINK, "limit {memory_limit}, item {max_item_size}");
            assert_eq!(
                (g.refs.seg(r), g.refs.off(r) as usize),
                (last, g.seg - smallest)
            );
            assert!(g.segments <= g.capacity);
        }
    }

    #[test]
    fn absurd_item_limit_is_not_an_overflow() {
        let s = Store::new(StoreConfig {
            max_item_size: usize::MAX,
            ..StoreConfig::default()
        })
        .expect("a smaller item limit, as for any limit above memory");
        assert!(s.max_item_bytes() >= MIN_SEGMENT);
    }
}
