//! Per-slab-class counters (see [`crate::slab_class`]): what is live in each memcached
//! class, kept per index shard under the shard lock the store already holds when it links
//! and unlinks an item, and what happened to the class's items (evictions, expiry), kept
//! as relaxed atomics that only the cold paths (eviction, expiry, refused stores) touch.

use crate::slab_class::MAX_CLASSES;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// One class's live items in one shard.
#[derive(Debug, Default, Clone, Copy)]
#[repr(align(32))]
pub(crate) struct ClassLive {
    /// Live items.
    pub(crate) items: u64,
    /// Their memcached footprints, summed (memcached's `mem_requested`).
    pub(crate) requested: u64,
    /// The segment bytes they take in this store.
    pub(crate) stored: u64,
}

/// A shard's live counts per class, and which classes it has ever linked an item of.
#[derive(Debug, Clone)]
pub(crate) struct ShardClasses {
    pub(crate) live: [ClassLive; MAX_CLASSES],
    /// Bit per class: an item of it was linked here since the store started.
    pub(crate) seen: u64,
}

impl Default for ShardClasses {
    fn default() -> Self {
        ShardClasses {
            live: [ClassLive::default(); MAX_CLASSES],
            seen: 0,
        }
    }
}

impl ShardClasses {
    /// Counts an item of class `class` as linked.
    #[inline]
    pub(crate) fn link(&mut self, class: usize, requested: u64, stored: u64) {
        if let Some(c) = self.live.get_mut(class) {
            c.items += 1;
            c.requested += requested;
            c.stored += stored;
            self.seen |= 1 << class;
        }
    }

    /// Stops counting an item of class `class` as linked.
    #[inline]
    pub(crate) fn unlink(&mut self, class: usize, requested: u64, stored: u64) {
        if let Some(c) = self.live.get_mut(class) {
            c.items -= 1;
            c.requested -= requested;
            c.stored -= stored;
        }
    }
}

/// What happened to one class's items, since the start or the last `stats reset`.
#[derive(Debug, Default)]
pub(crate) struct ClassEvents {
    pub(crate) evicted: AtomicU64,
    pub(crate) evicted_unfetched: AtomicU64,
    pub(crate) evicted_active: AtomicU64,
    pub(crate) evicted_nonzero: AtomicU64,
    /// Idle seconds of the class's last evicted item.
    pub(crate) evicted_time: AtomicU32,
    pub(crate) expired_unfetched: AtomicU64,
    pub(crate) reclaimed: AtomicU64,
    pub(crate) crawler_reclaimed: AtomicU64,
    pub(crate) outofmemory: AtomicU64,
}

/// Adds one to a class event counter.
#[inline]
pub(crate) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl ClassEvents {
    fn reset(&self) {
        for c in [
            &self.evicted,
            &self.evicted_unfetched,
            &self.evicted_active,
            &self.evicted_nonzero,
            &self.expired_unfetched,
            &self.reclaimed,
            &self.crawler_reclaimed,
            &self.outofmemory,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        self.evicted_time.store(0, Ordering::Relaxed);
    }
}

/// Every class's events.
#[derive(Debug)]
pub(crate) struct AllClassEvents(pub(crate) Box<[ClassEvents]>);

impl Default for AllClassEvents {
    fn default() -> Self {
        AllClassEvents((0..MAX_CLASSES).map(|_| ClassEvents::default()).collect())
    }
}

impl AllClassEvents {
    /// The events of class `class` (an id past the table reads as the last class's,
    /// which no item ever has).
    #[inline]
    pub(crate) fn of(&self, class: usize) -> &ClassEvents {
        &self.0[class.min(MAX_CLASSES - 1)]
    }

    /// memcached's `stats reset` of its per-class item counters.
    pub(crate) fn reset(&self) {
        for e in self.0.iter() {
            e.reset();
        }
    }

    /// The sum of one counter over every class.
    pub(crate) fn sum(&self, f: impl Fn(&ClassEvents) -> &AtomicU64) -> u64 {
        self.0.iter().map(|e| f(e).load(Ordering::Relaxed)).sum()
    }
}

/// One memcached slab class as this store sees it (see [`crate::slab_class`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ClassStats {
    /// The class id, 1 to the largest class.
    pub class: usize,
    /// memcached's chunk size for the class.
    pub chunk_size: u32,
    /// Chunks of the class a memcached slab page (1 MiB) holds.
    pub per_page: u32,
    /// Whether an item of the class has been stored since the store started (memcached
    /// keeps a class's pages, and lists the class, from its first item on).
    pub used: bool,
    /// Live items of the class.
    pub items: u64,
    /// Their memcached footprints, summed (memcached's `mem_requested`).
    pub requested: u64,
    /// The bytes of segment memory they take in this store (its own, smaller headers,
    /// with alignment).
    pub stored: u64,
    /// Live items of the class evicted.
    pub evicted: u64,
    /// Of those, the ones never read.
    pub evicted_unfetched: u64,
    /// Of those, the ones read since they arrived in their segment.
    pub evicted_active: u64,
    /// Of those, the ones that had an expiry time (memcached's `evicted_nonzero`).
    pub evicted_nonzero: u64,
    /// Idle seconds of the class's last evicted item.
    pub evicted_time: u32,
    /// Expired items of the class unlinked without ever being read.
    pub expired_unfetched: u64,
    /// Expired items of the class unlinked (by a read, a store, eviction or the crawler).
    pub reclaimed: u64,
    /// Of those, the ones the crawler (the expiry sweep, `lru_crawler crawl`) unlinked.
    pub crawler_reclaimed: u64,
    /// Stores of an item of the class refused for want of memory.
    pub outofmemory: u64,
}

impl ClassStats {
    /// Fills in the event counters from `e`.
    pub(crate) fn with_events(mut self, e: &ClassEvents) -> ClassStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        self.evicted = get(&e.evicted);
        self.evicted_unfetched = get(&e.evicted_unfetched);
        self.evicted_active = get(&e.evicted_active);
        self.evicted_nonzero = get(&e.evicted_nonzero);
        self.evicted_time = e.evicted_time.load(Ordering::Relaxed);
        self.expired_unfetched = get(&e.expired_unfetched);
        self.reclaimed = get(&e.reclaimed);
        self.crawler_reclaimed = get(&e.crawler_reclaimed);
        self.outofmemory = get(&e.outofmemory);
        self
    }
}
