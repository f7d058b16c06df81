//! The store's shared state and the operations on it that every public type builds on:
//! index lookups and accounting, segment acquisition and eviction, expiry sweeps.
//!
//! Kept apart from [`Store`](crate::Store) so that the types built on it ([`Entry`](crate::Entry),
//! [`Writer`](crate::Writer), the restart code) depend on this module and not on each
//! other.

use crate::class_stats::{bump, AllClassEvents};
use crate::clock::{is_expired, Clock};
use crate::config::{Geometry, StoreConfig};
use crate::ghost::Ghost;
use crate::index::{Items, Padded, Ref, Refs, Shard};
use crate::item::Item;
use crate::layout::{RawItem, ACTIVE, FETCHED, HAS_FLAGS};
use crate::queue_heads::Evictor;
use crate::segments::{SegId, Segments};
use crate::store_id::StoreId;
use parking_lot::{Mutex, MutexGuard};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// A callback told about each evicted item; see [`Store::on_evict`](crate::Store::on_evict).
pub type EvictObserver = Box<dyn Fn(&Item<'_>) + Send + Sync>;

pub(crate) const SHARDS: usize = 256;
/// Most sealed segments one maintenance call walks for expired items. Only segments
/// holding an item already expired are walked (each segment knows its earliest expiry),
/// so this bounds the work of a call when much expires at once, not the reach of a pass.
pub(crate) const CRAWL_BATCH: usize = 32;
/// Ghost slots per byte of memory limit: one per 256 bytes, about one per item at the
/// sizes caches usually hold, for 1/64 of the limit in memory.
const GHOST_BYTES_PER_SLOT: usize = 256;

/// Everything a store shares between its handles, writers and entries: the clock,
/// segment memory, the index shards and the accounting over them.
pub(crate) struct Inner {
    pub(crate) clock: Clock,
    pub(crate) segs: Segments,
    pub(crate) refs: Refs,
    pub(crate) shards: Box<[Padded<Mutex<Shard>>]>,
    pub(crate) hasher: foldhash::fast::RandomState,
    pub(crate) evict: bool,
    /// Rel time at which a delayed `flush_all` takes effect, 0 if none.
    pub(crate) pending_flush: AtomicU32,
    pub(crate) crawl_cursor: AtomicUsize,
    /// Where the `ext_item_age` walk goes on (see `tier`).
    pub(crate) age_cursor: AtomicUsize,
    pub(crate) limit_bytes: AtomicU64,
    /// Bytes counted as allocated without being so (see `Store::count_as_allocated`).
    pub(crate) counted_allocated: AtomicU64,
    /// Told about every item evicted to make room (memcached's `watch evictions`).
    pub(crate) evict_observer: std::sync::OnceLock<EvictObserver>,
    /// The memory file segments live in, for a warm restart (see `restart`).
    pub(crate) memory_file: std::sync::OnceLock<crate::memory_file::MemoryFile>,
    /// Eviction's state. Its lock is held while a sealed segment's items are walked
    /// (eviction, expiry sweeps), so that no walk ever reads a segment being reused.
    pub(crate) evictor: Mutex<Evictor>,
    /// Sealed segments that deletes and overwrites left mostly empty, oldest first, for
    /// eviction to compact before it evicts live items (see `Inner::note_if_holed`). A
    /// lock of its own: they are noted under a shard lock, which must not wait for the
    /// eviction lock.
    pub(crate) holed: Mutex<std::collections::VecDeque<SegId>>,
    /// Keys recently evicted unread from probation.
    pub(crate) ghost: Ghost,
    /// Size classes (bit per class) whose keys found in the ghost are stored as read
    /// once; set by eviction as it weighs the classes.
    pub(crate) ghost_classes: std::sync::atomic::AtomicU32,
    /// memcached's slab classes, which items are counted by.
    pub(crate) slab_classes: crate::SlabClasses,
    /// Their lookup table (`SlabClasses::lookup_table`).
    class_table: Box<[u8]>,
    /// What happened to each slab class's items (evictions, expiry, refusals).
    pub(crate) class_events: AllClassEvents,
    /// Told about what the flash tier does (`Store::on_flash_event`).
    pub(crate) flash_observer: std::sync::OnceLock<crate::flash::FlashObserver>,
    /// The flash tier, if the store has one (see `tier`).
    pub(crate) flash: std::sync::OnceLock<std::sync::Arc<crate::flash::Flash>>,
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
            segs: Segments::new(g.seg, g.segments, g.capacity, cfg.huge_pages),
            refs: g.refs,
            shards,
            hasher: foldhash::fast::RandomState::default(),
            evict: cfg.evict,
            pending_flush: AtomicU32::new(0),
            crawl_cursor: AtomicUsize::new(0),
            age_cursor: AtomicUsize::new(0),
            limit_bytes: AtomicU64::new(cfg.memory_limit as u64),
            counted_allocated: AtomicU64::new(0),
            evict_observer: std::sync::OnceLock::new(),
            memory_file: std::sync::OnceLock::new(),
            evictor: Mutex::new(Evictor::default()),
            holed: Mutex::new(std::collections::VecDeque::new()),
            ghost: Ghost::new(cfg.memory_limit / GHOST_BYTES_PER_SLOT),
            ghost_classes: std::sync::atomic::AtomicU32::new(u32::MAX),
            slab_classes: cfg.slab_classes,
            class_table: cfg.slab_classes.lookup_table(),
            class_events: AllClassEvents::default(),
            flash: std::sync::OnceLock::new(),
            flash_observer: std::sync::OnceLock::new(),
        }
    }

    /// This store's identity, which its items carry.
    pub(crate) fn id(&self) -> StoreId {
        StoreId::of(self)
    }

    /// The caller's view of the item at `loc` (read at rel time `now`), valid while the
    /// lock it was found under is held.
    pub(crate) fn view(&self, loc: Ref, raw: RawItem, now: u32) -> Item<'_> {
        let seg = self.refs.seg(loc);
        Item::new(
            self.id(),
            seg,
            raw,
            self.cas_of(loc, &raw),
            now,
            &self.segs.meta(seg).active_items,
        )
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

    /// The memcached slab class of an item, and its memcached footprint (see
    /// `slab_class`).
    #[inline]
    pub(crate) fn slab_class(&self, raw: &RawItem) -> (usize, u64) {
        let c = &self.slab_classes;
        let total = c.item_total(raw.key_len(), raw.value_len(), raw.bits() & HAS_FLAGS != 0);
        (self.class_of_total(total), total as u64)
    }

    /// The slab class of a memcached footprint of `total` bytes: a table lookup for all
    /// but large items.
    #[inline]
    pub(crate) fn class_of_total(&self, total: usize) -> usize {
        match self.class_table.get(total.div_ceil(8)) {
            Some(&class) => usize::from(class),
            None => self.slab_classes.class_of(total),
        }
    }

    /// Counts an item as live in its segment and shard.
    pub(crate) fn link_accounting(&self, shard: &mut Shard, r: Ref, size: usize) {
        let m = self.segs.meta(self.refs.seg(r));
        m.live_items.fetch_add(1, Ordering::Relaxed);
        m.live_bytes.fetch_add(size as u32, Ordering::Relaxed);
        shard.counters.bytes += size as u64;
        let raw = self.item_at(r);
        if raw.is_flash() {
            self.retain_stub(&raw);
        }
        let (class, total) = self.slab_class(&raw);
        shard.classes.link(class, total, size as u64);
    }

    /// Stops counting an item as live.
    pub(crate) fn unlink_accounting(&self, shard: &mut Shard, r: Ref) {
        let raw = self.item_at(r);
        let size = self.footprint(&raw);
        let m = self.segs.meta(self.refs.seg(r));
        // The segment's count of read items counts live ones only, so that space freed by
        // deletes, overwrites and expiry makes it cheaper to evict. (Readers set the bit
        // and raise the count under the shard lock the caller holds.)
        if raw.bits() & ACTIVE != 0 {
            m.active_items.fetch_sub(1, Ordering::Relaxed);
        }
        m.live_bytes.fetch_sub(size as u32, Ordering::Relaxed);
        m.live_items.fetch_sub(1, Ordering::Release);
        self.note_if_holed(self.refs.seg(r));
        shard.counters.bytes -= size as u64;
        if raw.is_flash() {
            self.release_stub(&raw);
        }
        let (class, total) = self.slab_class(&raw);
        shard.classes.unlink(class, total, size as u64);
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

    /// Unlinks the expired item `loc`, if it is linked, counting it as reclaimed in its
    /// slab class (and as the crawler's if `crawler`: the expiry sweep's).
    pub(crate) fn remove_expired(&self, shard: &mut Shard, hash: u64, loc: Ref, crawler: bool) {
        let raw = self.item_at(loc);
        if self.remove_loc(shard, hash, loc) {
            let e = self.class_events.of(self.slab_class(&raw).0);
            bump(&e.reclaimed);
            if crawler {
                bump(&e.crawler_reclaimed);
            }
            if raw.bits() & FETCHED == 0 {
                bump(&e.expired_unfetched);
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

    pub(crate) fn flush_now(&self) {
        for s in self.shards.iter() {
            let mut shard = s.0.lock();
            let mut removed = Vec::new();
            shard.drain(self, |r| removed.push(r));
            shard.flushed.clear();
            for r in removed {
                // Counted as reclaimed, as memcached counts a flushed item whose memory a
                // store reuses: here every flushed item's memory is freed at once.
                let raw = self.item_at(r);
                if shard.flushed.has_room() {
                    shard.flushed.insert(self.hash(raw.key()));
                }
                bump(&self.class_events.of(self.slab_class(&raw).0).reclaimed);
                self.unlink_accounting(&mut shard, r);
            }
        }
    }

    /// Calls `f` with the location of every item written in a sealed segment. The caller
    /// holds the eviction lock, so the segment is not reused meanwhile.
    pub(crate) fn walk(&self, id: SegId, mut f: impl FnMut(Ref, RawItem)) {
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

    /// Whether every item written to segment `id` has expired by now (false for an empty
    /// one, and for one holding an item that never expires).
    #[inline]
    pub(crate) fn all_expired(&self, id: SegId) -> bool {
        let latest = self.segs.meta(id).latest_expiry.load(Ordering::Relaxed);
        latest != u32::MAX && is_expired(latest, self.clock.now())
    }

    /// Whether sealed segment `id` may hold an item expired at `now` (its earliest
    /// expiry is past), so that an expiry sweep has something to do there.
    pub(crate) fn has_expired(&self, id: SegId, now: u32) -> bool {
        let meta = self.segs.meta(id);
        meta.live_items.load(Ordering::Acquire) != 0
            && meta.earliest_expiry.load(Ordering::Acquire) <= now
    }

    /// Unlinks the expired items of one sealed segment; `crawler`: for the expiry sweep
    /// (memcached's LRU crawler), whose reclaims are counted as the crawler's too.
    pub(crate) fn reclaim_expired_in(&self, id: SegId, now: u32, crawler: bool) {
        let mut ev = self.evictor.lock();
        let meta = self.segs.meta(id);
        // A head is walked too: only eviction appends to it, under the lock held here,
        // so every item up to its `used` is complete.
        if (meta.state.load(Ordering::Acquire) != crate::segments::SEALED && !ev.is_head(id))
            || meta.live_items.load(Ordering::Acquire) == 0
            // Nothing in it expires yet (0, "not known", never skips).
            || meta.earliest_expiry.load(Ordering::Acquire) > now
        {
            return;
        }
        // The walk recomputes the earliest expiry of what it leaves. A touch during the
        // walk either lands before this swap (and the walk reads its new expiry) or lowers
        // the fresh value itself, so the bound only ever errs early, never late.
        meta.earliest_expiry.swap(u32::MAX, Ordering::AcqRel);
        let mut earliest = u32::MAX;
        self.walk(id, |loc, raw| {
            let exptime = raw.exptime();
            if !is_expired(exptime, now) {
                if exptime != 0 {
                    earliest = earliest.min(exptime);
                }
                return;
            }
            let hash = self.hash(raw.key());
            let mut shard = self.shard(hash);
            self.remove_expired(&mut shard, hash, loc, crawler);
        });
        meta.earliest_expiry.fetch_min(earliest, Ordering::AcqRel);
        ev.note_sparse(id, self.is_sparse_after_expiry(id));
    }

    /// Notes that an item of segment `seg` expires at `exptime` (rel time; 0: never), so
    /// that the expiry sweep visits the segment by then.
    #[inline]
    pub(crate) fn expires_in(&self, seg: SegId, exptime: u32) {
        let meta = self.segs.meta(seg);
        if exptime != 0 {
            meta.earliest_expiry.fetch_min(exptime, Ordering::AcqRel);
        }
        meta.latest_expiry
            .fetch_max(expires_by(exptime), Ordering::AcqRel);
    }

    /// [`expires_in`](Self::expires_in) for an item just written to the writer's own
    /// active segment. The sweep visits only sealed segments, so no walk can race with
    /// this one: a plain check spares the atomic read-modify-write on the usual path,
    /// where a later write's expiry is no earlier than what the segment already holds.
    #[inline]
    pub(crate) fn expires_in_active(&self, seg: SegId, exptime: u32) {
        let meta = self.segs.meta(seg);
        let earliest = &meta.earliest_expiry;
        if exptime != 0 && earliest.load(Ordering::Relaxed) > exptime {
            earliest.fetch_min(exptime, Ordering::Relaxed);
        }
        // A touch in another thread may raise it meanwhile: hence fetch_max, not a store.
        let by = expires_by(exptime);
        if meta.latest_expiry.load(Ordering::Relaxed) < by {
            meta.latest_expiry.fetch_max(by, Ordering::AcqRel);
        }
    }

    /// Unlinks the expired items of a writer's own active segment (not reachable by the
    /// sweep, which walks sealed segments and eviction's heads; its writer has written
    /// every item up to its `used`, and no one else reuses it) and recomputes its
    /// [`latest_expiry`](crate::segments::SegMeta::latest_expiry) from what is left.
    /// Counted in `reclaimed`, as memcached counts an expired item whose memory a store
    /// reuses.
    pub(crate) fn reclaim_expired_in_active(&self, id: SegId, now: u32) {
        let meta = self.segs.meta(id);
        // As in `reclaim_expired_in`: a touch during the walk raises the fresh bound
        // itself, so it only ever errs late (one more walk), never early.
        meta.latest_expiry.swap(0, Ordering::AcqRel);
        let mut latest = 0;
        self.walk(id, |loc, raw| {
            let exptime = raw.exptime();
            if !is_expired(exptime, now) {
                latest = latest.max(expires_by(exptime));
                return;
            }
            let hash = self.hash(raw.key());
            let mut shard = self.shard(hash);
            self.remove_expired(&mut shard, hash, loc, false);
        });
        meta.latest_expiry.fetch_max(latest, Ordering::AcqRel);
    }
}

/// The time by which an item with expiry `exptime` is gone, for a segment's
/// `latest_expiry`: never (`u32::MAX`) for one without.
#[inline]
fn expires_by(exptime: u32) -> u32 {
    if exptime == 0 {
        u32::MAX
    } else {
        exptime
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
