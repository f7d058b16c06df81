//! The store: index shards over segment memory, and the operations on them.

use crate::class_stats::{bump, ClassLive, ClassStats};
use crate::clock::{is_expired, Clock};
use crate::config::{Geometry, StoreConfig};
use crate::entry::{Entry, EntryError, EntryErrorKind};
use crate::error::{ConfigError, StoreError};
use crate::flash::{Disk, FlashMiss};
use crate::flash_reads::{Fetch, FlashReads};
use crate::index::ShardCounters;
use crate::inner::{Inner, CRAWL_BATCH};
use crate::item::Item;
use crate::slab_class::MAX_CLASSES;
use crate::stats::StoreStats;
use crate::writer::Writer;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A memory-bounded key-value store for cache items. Cheap to clone (shared handle);
/// every method is safe to call from any thread.
#[derive(Clone)]
pub struct Store {
    pub(crate) inner: Arc<Inner>,
}

impl Store {
    /// Creates a store. Memory is reserved lazily, segment by segment.
    pub fn new(cfg: StoreConfig) -> Result<Store, ConfigError> {
        let g = Geometry::of(&cfg)?;
        let inner = Inner::new(&cfg, &g, Clock::new());
        if cfg.preallocate {
            inner.segs.prefault(g.segments);
        }
        Ok(Store::from_inner(inner))
    }

    /// Whether segment memory is one anonymous reservation advised for transparent huge
    /// pages (false on the heap fallback and for a memory file).
    pub fn huge_page_advised(&self) -> bool {
        self.inner.segs.huge_page_advised()
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
    /// A value on flash is read here, waiting for the disk ([`fetch`](Self::fetch) leaves
    /// that to the caller).
    pub fn get<R>(&self, key: &[u8], f: impl FnOnce(&Item<'_>) -> R) -> Option<R> {
        match self.fetch_with(key, None, f) {
            Fetch::Found(r) => Some(r),
            Fetch::Missing | Fetch::Reading => None,
        }
    }

    /// [`get`](Self::get) without waiting for the disk: an item whose value is on flash
    /// is served from a read done in `reads` ([`FlashReads::done`]) if there is one for
    /// it, else a [`FlashRead`](crate::FlashRead) is recorded there and the answer is
    /// [`Fetch::Reading`], with nothing marked or counted (see `flash_reads`). With
    /// [`FlashReads::set_blocking`] it reads in place as `get` does.
    pub fn fetch<R>(
        &self,
        key: &[u8],
        reads: &mut FlashReads,
        f: impl FnOnce(&Item<'_>) -> R,
    ) -> Fetch<R> {
        self.fetch_with(key, Some(reads), f)
    }

    fn fetch_with<R>(
        &self,
        key: &[u8],
        mut reads: Option<&mut FlashReads>,
        f: impl FnOnce(&Item<'_>) -> R,
    ) -> Fetch<R> {
        let inner = &*self.inner;
        let now = inner.clock.now();
        inner.check_flush(now);
        let hash = inner.hash(key);
        // A value in the page cache is read here once (a copy, cheaper than a trip to a
        // reader thread); only one that needs the disk is left to the caller.
        let mut tried_cache = false;
        loop {
            let mut shard = inner.shard(hash);
            let Some(loc) = shard.find(inner, hash, key) else {
                if shard.flushed.take(hash) {
                    shard.counters.get_flushed += 1;
                }
                return Fetch::Missing;
            };
            let raw = inner.item_at(loc);
            if is_expired(raw.exptime(), now) {
                inner.remove_expired(&mut shard, hash, loc, false);
                shard.counters.get_expired += 1;
                return Fetch::Missing;
            }
            if raw.is_flash() {
                let Some(locator) = Inner::locator(&raw) else {
                    return Fetch::Missing;
                };
                let found = match reads.as_deref_mut().filter(|r| !r.blocking()) {
                    None => {
                        drop(shard);
                        self.get_from_flash(key, hash, (loc, locator), now, f)
                    }
                    Some(reads) => match reads.take(key, locator) {
                        Some(Ok(loaded)) => {
                            self.serve_loaded(shard, key, hash, (loc, locator), &loaded, now, f)
                        }
                        Some(Err(_)) => {
                            // Unreadable and still the item: it is gone, as memcached's
                            // extstore misses make it.
                            inner.remove_loc(&mut shard, hash, loc);
                            None
                        }
                        None if !tried_cache => {
                            drop(shard);
                            tried_cache = true;
                            match inner.load_stub(loc, locator, key, Disk::CacheOnly) {
                                Err(FlashMiss::WouldBlock) => {
                                    reads.want(key, loc, locator, false);
                                    return Fetch::Reading;
                                }
                                read => reads.done_for(key, locator, read),
                            }
                            continue;
                        }
                        None => {
                            reads.want(key, loc, locator, false);
                            return Fetch::Reading;
                        }
                    },
                };
                return found.map_or(Fetch::Missing, Fetch::Found);
            }
            let item = inner.view(loc, raw, now);
            let r = f(&item);
            item.record_read();
            return Fetch::Found(r);
        }
    }

    /// Runs a read [`fetch`](Self::fetch) recorded: reads the value (waiting for the
    /// disk) and checks it, for [`FlashReads::done`]. Counted as a read from flash
    /// (`get_extstore`), hit or miss. Any thread may run it.
    pub fn run_flash_read(&self, read: crate::FlashRead) -> crate::FlashReadDone {
        read.run_with(|loc, locator, key| self.inner.load_stub(loc, locator, key, Disk::Wait))
    }

    /// Records in `reads` a read of `key`'s value if it is on flash and not read or
    /// wanted there yet, within [`READ_AHEAD_BYTES`](crate::READ_AHEAD_BYTES):
    /// for a request still to come, so that its read goes with the ones wanted now.
    /// Marks and counts nothing. Returns whether a read was recorded.
    pub fn want_read(&self, key: &[u8], reads: &mut FlashReads) -> bool {
        let inner = &*self.inner;
        if inner.flash().is_none() {
            return false;
        }
        let now = inner.clock.now();
        let hash = inner.hash(key);
        let shard = inner.shard(hash);
        let Some(loc) = shard.find(inner, hash, key) else {
            return false;
        };
        let raw = inner.item_at(loc);
        if !raw.is_flash() || is_expired(raw.exptime(), now) {
            return false;
        }
        match Inner::locator(&raw) {
            Some(locator) => reads.want(key, loc, locator, true),
            None => false,
        }
    }

    /// [`get`](Self::get) of a stub: reads the value without the shard lock, then serves
    /// what the index holds for the key by then (the same stub, perhaps moved, or what
    /// replaced it).
    fn get_from_flash<R>(
        &self,
        key: &[u8],
        hash: u64,
        (loc, locator): (crate::index::Ref, crate::flash::Locator),
        now: u32,
        f: impl FnOnce(&Item<'_>) -> R,
    ) -> Option<R> {
        let inner = &*self.inner;
        let (mut loc, mut locator) = (loc, locator);
        // The stub may change while the disk is read (compaction moves its value,
        // eviction moves the stub, a client replaces the item): the value read is served
        // only if the stub still points at it; a stub pointing elsewhere is read again
        // there, a few times, then it is a miss.
        let mut tries = 0;
        loop {
            let read = inner.load_stub(loc, locator, key, Disk::Wait);
            let mut shard = inner.shard(hash);
            if let Ok(loaded) = &read {
                if let Some(now_loc) = inner.same_stub(&mut shard, hash, key, locator) {
                    break self.serve_loaded(shard, key, hash, (now_loc, locator), loaded, now, f);
                }
            } else if let Some(stub) = inner.same_stub(&mut shard, hash, key, locator) {
                // Unreadable and still the item: it is gone, as memcached's extstore
                // misses make it.
                inner.remove_loc(&mut shard, hash, stub);
                return None;
            }
            let l = shard.find(inner, hash, key)?;
            let raw = inner.item_at(l);
            if !raw.is_flash() {
                // Replaced by a value in memory: serve that.
                if is_expired(raw.exptime(), now) {
                    return None;
                }
                let item = inner.view(l, raw, now);
                let r = f(&item);
                item.record_read();
                return Some(r);
            }
            tries += 1;
            if tries == 3 {
                return None;
            }
            (loc, locator) = (l, Inner::locator(&raw)?);
        }
    }

    /// Serves a value read from flash for the stub at `loc` (still the key's item, under
    /// `shard`), and recaches it now and then.
    #[allow(clippy::too_many_arguments)]
    fn serve_loaded<R>(
        &self,
        shard: parking_lot::MutexGuard<'_, crate::index::Shard>,
        key: &[u8],
        hash: u64,
        (now_loc, locator): (crate::index::Ref, crate::flash::Locator),
        loaded: &crate::tier::Loaded,
        now: u32,
        f: impl FnOnce(&Item<'_>) -> R,
    ) -> Option<R> {
        let inner = &*self.inner;
        let raw = inner.item_at(now_loc);
        if is_expired(raw.exptime(), now) {
            return None;
        }
        let item = inner
            .view(now_loc, raw, now)
            .with_flash_value(loaded.value());
        let r = f(&item);
        item.record_read();
        drop(shard);
        if inner.flash().is_some_and(|fl| fl.recache_due()) {
            inner.recache(key, hash, locator, loaded.value());
        }
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
        f: impl FnMut(&mut Entry<'_>) -> Result<R, EntryError>,
    ) -> Result<R, StoreError> {
        match self.update_with(writer, key, None, f)? {
            Some(r) => Ok(r),
            // Without `reads` every value is read in place: never "reading".
            None => Err(StoreError::OutOfMemory),
        }
    }

    /// [`update`](Self::update) without waiting for the disk: when `f` asks for a value
    /// on flash ([`Entry::load_value`]) that `reads` has no read done for, a
    /// [`FlashRead`](crate::FlashRead) is recorded there and the answer is `Ok(None)`,
    /// with nothing changed (see `flash_reads`; [`fetch`](Self::fetch) is the same for
    /// plain reads).
    pub fn update_fetching<R>(
        &self,
        writer: &mut Writer,
        key: &[u8],
        reads: &mut FlashReads,
        f: impl FnMut(&mut Entry<'_>) -> Result<R, EntryError>,
    ) -> Result<Option<R>, StoreError> {
        self.update_with(writer, key, Some(reads), f)
    }

    fn update_with<R>(
        &self,
        writer: &mut Writer,
        key: &[u8],
        mut reads: Option<&mut FlashReads>,
        mut f: impl FnMut(&mut Entry<'_>) -> Result<R, EntryError>,
    ) -> Result<Option<R>, StoreError> {
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
        let mut class = 0;
        let mut loaded: Option<crate::tier::Loaded> = None;
        // Room is made at most 8 times; values read from flash (the closure runs again
        // after each) are not counted there, but bounded too.
        let (mut room_tries, mut loads) = (0, 0);
        while room_tries < 8 && loads < 64 {
            let needed = {
                let mut shard = inner.shard(hash);
                let mut current = shard.find(inner, hash, key);
                if let Some(loc) = current {
                    if is_expired(inner.item_at(loc).exptime(), now) {
                        inner.remove_expired(&mut shard, hash, loc, false);
                        current = None;
                    }
                }
                let value = loaded
                    .as_ref()
                    .filter(|l| l.is_for(inner, current))
                    .map(|l| l.value());
                let mut entry =
                    Entry::new(inner, &mut shard, writer, hash, key, now, current, value);
                match f(&mut entry) {
                    Ok(r) => return Ok(Some(r)),
                    Err(EntryError(EntryErrorKind::NeedSpace(n, c))) => {
                        class = c;
                        n
                    }
                    Err(EntryError(EntryErrorKind::NeedValue(loc, locator))) => {
                        drop(shard);
                        loads += 1;
                        let read = match reads.as_deref_mut().filter(|r| !r.blocking()) {
                            None => inner.load_stub(loc, locator, key, Disk::Wait),
                            Some(reads) => match reads.take(key, locator) {
                                Some(read) => read,
                                // In the page cache: read here (see `fetch_with`).
                                None => match inner.load_stub(loc, locator, key, Disk::CacheOnly) {
                                    Err(FlashMiss::WouldBlock) => {
                                        reads.want(key, loc, locator, false);
                                        return Ok(None);
                                    }
                                    read => read,
                                },
                            },
                        };
                        match read {
                            // Read for the stub with this locator, wherever eviction has
                            // moved it since: it is for the stub where it is now.
                            Ok(mut l) => {
                                l.loc = loc;
                                loaded = Some(l);
                            }
                            // Unreadable: the item is gone (or its value moved), and the
                            // closure runs again on what the index holds now.
                            Err(_) => {
                                inner.drop_unreadable(hash, key, locator);
                            }
                        }
                        continue;
                    }
                    Err(EntryError(EntryErrorKind::Store(e))) => return Err(e),
                }
            };
            room_tries += 1;
            if let Err(e) = writer.make_room(needed) {
                if e == StoreError::OutOfMemory {
                    bump(&inner.class_events.of(class).outofmemory);
                }
                return Err(e);
            }
        }
        bump(&inner.class_events.of(class).outofmemory);
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
        // Every segment with an item already expired is swept, up to CRAWL_BATCH per
        // call, going on where the last call stopped: expired memory is found within a
        // tick or two at any size, as memcached's LRU crawler finds it, where visiting a
        // fixed few segments per tick left expired items for seconds in a large cache.
        if !sealed.is_empty() {
            let start = inner.crawl_cursor.load(Ordering::Relaxed);
            let mut walked = 0;
            for i in 0..sealed.len() {
                let id = sealed[(start + i) % sealed.len()];
                if !inner.has_expired(id, now) {
                    continue;
                }
                inner.reclaim_expired_in(id, now, true);
                walked += 1;
                if walked == CRAWL_BATCH {
                    inner.crawl_cursor.store(start + i + 1, Ordering::Relaxed);
                    break;
                }
            }
        }
        // Eviction's open heads (items it kept, stubs of flash values) fill slowly and
        // are not sealed yet: their expired items are reclaimed too, so that expired
        // memory (and the flash pages of expired stubs) is not held until they fill.
        let heads = inner.evictor.lock().head_segments();
        for id in heads {
            if inner.has_expired(id, now) {
                inner.reclaim_expired_in(id, now, true);
            }
        }
        // The ghost remembers half as many evictions as the cache holds items.
        let items: usize = inner.shards.iter().map(|s| s.0.lock().len()).sum();
        inner.ghost.set_window(items / 2);
        // Flash compaction reads a page and takes shard locks; not under the eviction lock.
        self.maintain_flash();
        let mut ev = inner.evictor.lock();
        inner.segs.reclaim_dead();
        // Shrinking to a lowered limit evicts without keeping anything: it must free
        // whole segments, not move items around.
        while inner.segs.over_limit() {
            if inner.evict_one(&mut ev, false) == crate::evict::Evicted::Nothing {
                break;
            }
        }
    }

    /// Seconds since the least recently accessed live item of the segment eviction takes
    /// next was last read or stored: what memcached reports as the age of its LRU tail
    /// (`items:N:age`), since that segment's items are the next to be evicted or kept.
    /// 0 while no segment is sealed. Walks one segment, so it is for `stats items`, not
    /// hot paths.
    pub fn tail_age(&self) -> u32 {
        self.tail_ages().0
    }

    /// [`tail_age`](Self::tail_age), and the same for each memcached slab class: the idle
    /// seconds of the least recently accessed live item of the class in the segment
    /// eviction takes next, 0 for a class with no live item there (indexed by class id).
    pub fn tail_ages(&self) -> (u32, [u32; MAX_CLASSES]) {
        let mut ages = [0u32; MAX_CLASSES];
        let inner = &*self.inner;
        let _scan = inner.evictor.lock();
        let Some(queue) = inner.victim_queue() else {
            return (0, ages);
        };
        let Some(id) = inner.segs.fronts().0[queue] else {
            return (0, ages);
        };
        let now = inner.clock.now();
        if inner.segs.meta(id).state.load(Ordering::Acquire) != crate::segments::SEALED {
            return (0, ages);
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
                let idle = now.saturating_sub(atime);
                if let Some(age) = ages.get_mut(inner.slab_class(&raw).0) {
                    *age = (*age).max(idle);
                }
            }
        });
        (oldest.map_or(0, |a| now.saturating_sub(a)), ages)
    }

    /// Every memcached slab class (1 to the largest; see [`SlabClasses`](crate::SlabClasses))
    /// as this store sees it: its live items, their footprints, and what happened to the
    /// class's items. Locks each index shard in turn, for `stats`, not hot paths.
    pub fn class_stats(&self) -> Vec<ClassStats> {
        let inner = &*self.inner;
        let mut live = [ClassLive::default(); MAX_CLASSES];
        let mut seen = 0u64;
        for s in inner.shards.iter() {
            let s = s.0.lock();
            for (sum, c) in live.iter_mut().zip(s.classes.live.iter()) {
                sum.items += c.items;
                sum.requested += c.requested;
                sum.stored += c.stored;
            }
            seen |= s.classes.seen;
        }
        let classes = &inner.slab_classes;
        (1..=classes.largest().min(MAX_CLASSES - 1))
            .map(|k| {
                ClassStats {
                    class: k,
                    chunk_size: classes.chunk_size(k),
                    per_page: classes.per_page(k),
                    used: seen & (1 << k) != 0,
                    items: live[k].items,
                    requested: live[k].requested,
                    stored: live[k].stored,
                    ..ClassStats::default()
                }
                .with_events(inner.class_events.of(k))
            })
            .collect()
    }

    /// The memcached slab class an item is counted in.
    #[inline]
    pub fn slab_class(&self, item: &Item<'_>) -> usize {
        self.inner.slab_class(&item.raw).0
    }

    /// The memcached slab class of an item with a key of `key_len` bytes, a value of
    /// `value_len` bytes (without `\r\n`) and client flags `flags`.
    #[inline]
    pub fn slab_class_for(&self, key_len: usize, value_len: usize, flags: u32) -> usize {
        let inner = &*self.inner;
        inner.class_of_total(
            inner
                .slab_classes
                .item_total(key_len, value_len, flags != 0),
        )
    }

    /// memcached's `stats reset` for the store: the counters of what happened to items
    /// (evictions, expiry, refused stores; per class and in total) start again from 0.
    pub fn reset_stats(&self) {
        self.inner.class_events.reset();
        // memcached's per-thread read counters, which its `stats reset` zeroes too.
        for s in self.inner.shards.iter() {
            let mut shard = s.0.lock();
            shard.counters.get_expired = 0;
            shard.counters.get_flushed = 0;
        }
    }

    /// Changes the memory limit at run time (memcached's `cache_memlimit`).
    pub fn set_memory_limit(&self, bytes: usize) {
        let inner = &*self.inner;
        inner.limit_bytes.store(bytes as u64, Ordering::Relaxed);
        let counted = inner.counted_allocated.load(Ordering::Relaxed) as usize;
        let segments = bytes.saturating_sub(counted) / inner.segs.seg_size();
        inner.segs.set_limit(segments.max(1));
    }

    /// Counts `bytes` as memory already allocated: the segments the limit allows are fewer
    /// by that much (at least one remains), and [`StoreStats::counted_allocated`] reports
    /// it, for `total_malloced`. This is memcached's `T_MEMD_INITIAL_MALLOC`, which every
    /// memcached build honours "for the test suite" (its t/64bit.t tests a limit above
    /// 4 GiB without allocating 4 GiB); nothing else should call it.
    pub fn count_as_allocated(&self, bytes: u64) {
        let inner = &*self.inner;
        inner.counted_allocated.store(bytes, Ordering::Relaxed);
        self.set_memory_limit(inner.limit_bytes.load(Ordering::Relaxed) as usize);
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> StoreStats {
        let inner = &*self.inner;
        let mut c = ShardCounters::default();
        let mut items = 0u64;
        let mut index_bytes = 0u64;
        let mut index_buckets = 0u64;
        for s in inner.shards.iter() {
            let s = s.0.lock();
            c.add(&s.counters);
            items += s.len() as u64;
            index_bytes += s.index_bytes() as u64;
            index_buckets += s.buckets() as u64;
        }
        let (allocated, _limit, free, probation, main, stubs) = inner.segs.counts();
        let ev = inner.evictor.lock().counters;
        let events = &inner.class_events;
        StoreStats {
            curr_items: items,
            bytes: c.bytes,
            total_items: c.total_items,
            evictions: events.sum(|e| &e.evicted),
            evicted_unfetched: events.sum(|e| &e.evicted_unfetched),
            evicted_active: events.sum(|e| &e.evicted_active),
            evicted_time: ev.evicted_time,
            evict_promoted: ev.promoted,
            evict_promoted_bytes: ev.promoted_bytes,
            evict_retained: ev.retained,
            evict_retained_bytes: ev.retained_bytes,
            compactions: ev.compactions,
            compacted_items: ev.compacted,
            ghost_hits: c.ghost_hits,
            ghost_bytes: inner.ghost.bytes() as u64,
            expired_unfetched: events.sum(|e| &e.expired_unfetched),
            reclaimed: events.sum(|e| &e.reclaimed),
            crawler_reclaimed: events.sum(|e| &e.crawler_reclaimed),
            outofmemory: events.sum(|e| &e.outofmemory),
            get_expired: c.get_expired,
            get_flushed: c.get_flushed,
            limit_maxbytes: inner.limit_bytes.load(Ordering::Relaxed),
            segment_size: inner.segs.seg_size() as u64,
            segments_allocated: allocated as u64,
            counted_allocated: inner.counted_allocated.load(Ordering::Relaxed),
            segments_free: free as u64,
            segments_sealed: (probation + main + stubs) as u64,
            segments_probation: probation as u64,
            segments_main: main as u64,
            segments_stubs: stubs as u64,
            index_bytes,
            index_buckets,
            memory_file_full: inner.segs.memory_file_full(),
        }
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

/// The flash tier's side of the store's API (see `tier`).
impl Store {
    /// Gives the store a flash tier: from now on eviction sends values of at least
    /// `ext_item_size` there instead of dropping them. Once per store; a second call
    /// returns false and changes nothing.
    pub fn attach_flash(&self, flash: Arc<crate::flash::Flash>) -> bool {
        self.inner.flash.set(flash).is_ok()
    }

    /// The store's flash tier, if it has one.
    pub fn flash(&self) -> Option<&crate::flash::Flash> {
        self.inner.flash()
    }

    /// The flash tier's background work alone (compaction, `ext_item_age` flushing),
    /// which [`maintain`](Store::maintain) also does: for a server whose expiry sweep is
    /// turned off (memcached's `no_lru_crawler`), whose flash tier must go on working.
    pub fn maintain_flash(&self) {
        self.inner.compact_flash();
        self.inner.flush_aged();
    }

    /// Registers the callback told about every [`FlashEvent`](crate::flash::FlashEvent) (memcached's `watch`
    /// lines). It runs on the thread that acted, some under a shard lock: it must be
    /// quick and must not call back into the store. Once per store; false if one is set.
    pub fn on_flash_event(
        &self,
        observe: impl Fn(&crate::flash::FlashEvent<'_>) + Send + Sync + 'static,
    ) -> bool {
        self.inner.flash_observer.set(Box::new(observe)).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absurd_item_limit_is_not_an_overflow() {
        let s = Store::new(StoreConfig {
            max_item_size: usize::MAX,
            ..StoreConfig::default()
        })
        .expect("a smaller item limit, as for any limit above memory");
        assert!(s.max_item_bytes() >= crate::config::MIN_SEGMENT);
    }
}
