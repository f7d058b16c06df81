//! Walking every item: listing the live ones for the operator commands that show them
//! (memcached's `lru_crawler metadump`/`mgdump` and `stats cachedump`), and sweeping out
//! the expired ones (`lru_crawler crawl`).
//!
//! The walk is split into parts, one per index shard, and each part runs under that
//! shard's lock only, so a dump of millions of items never stops the whole store: other
//! shards serve requests meanwhile, and a caller that must write its output before going
//! on (a client reading slowly) stops between parts and resumes at the next one. Like
//! memcached's crawler, the dump is not a snapshot: items stored or removed during it may
//! or may not appear, but every item live for the whole walk appears exactly once.

use crate::clock::is_expired;
use crate::inner::SHARDS;
use crate::item::Item;
use crate::store::Store;

impl Store {
    /// How many parts [`Store::walk_part`] splits a walk over every item into.
    pub fn walk_parts(&self) -> usize {
        SHARDS
    }

    /// Calls `f` with every live (unexpired) item of part `part` of the store, under that
    /// part's lock, so `f` should only copy what it needs. Items are not marked fetched.
    /// A `part` of [`Store::walk_parts`] or more visits nothing.
    pub fn walk_part(&self, part: usize, mut f: impl FnMut(&Item<'_>)) {
        let inner = &*self.inner;
        let Some(shard) = inner.shards.get(part) else {
            return;
        };
        let now = inner.clock.now();
        inner.check_flush(now);
        let shard = shard.0.lock();
        shard.for_each(inner, |r| {
            let raw = inner.item_at(r);
            if !is_expired(raw.exptime(), now) {
                f(&inner.view(r, raw, now));
            }
        });
    }
}

impl Store {
    /// Has `observe` called with every item evicted from now on (not expired items, not
    /// deletions), from whichever thread evicts, while the store's internal locks are
    /// held: it must be quick and must not call back into the store. Only one observer
    /// can be set; false if one already was.
    pub fn on_evict(&self, observe: impl Fn(&Item<'_>) + Send + Sync + 'static) -> bool {
        self.inner.evict_observer.set(Box::new(observe)).is_ok()
    }

    /// Unlinks every expired item now: the sealed segments' segment by segment (each under
    /// the scan lock only), rather than the few segments [`Store::maintain`] visits per
    /// call, then those still in segments being written, found through the index one
    /// shard at a time (memcached's `lru_crawler crawl`, whose reclaims are counted as the
    /// crawler's). Returns how many items it reclaimed. Meant for a background thread: it
    /// reads all of item memory.
    pub fn reclaim_all_expired(&self) -> u64 {
        let inner = &*self.inner;
        let now = inner.clock.now();
        inner.check_flush(now);
        let crawled = || inner.class_events.sum(|e| &e.crawler_reclaimed);
        let before = crawled();
        for id in inner.segs.sealed_snapshot() {
            inner.reclaim_expired_in(id, now, true);
        }
        let mut expired = Vec::new();
        for shard in inner.shards.iter() {
            let mut shard = shard.0.lock();
            shard.for_each(inner, |r| {
                if is_expired(inner.item_at(r).exptime(), now) {
                    expired.push(r);
                }
            });
            for r in expired.drain(..) {
                let hash = inner.hash(inner.item_at(r).key());
                inner.remove_expired(&mut shard, hash, r, true);
            }
        }
        // A `stats reset` meanwhile can only make this undercount.
        crawled().saturating_sub(before)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Store, StoreConfig, StoreOptions};
    use std::collections::BTreeSet;

    #[test]
    fn a_walk_visits_every_live_item_once() {
        let store = Store::new(StoreConfig::default()).expect("store");
        let mut w = store.writer();
        let mut expect = BTreeSet::new();
        for i in 0..5000u32 {
            let key = format!("key{i}");
            let exptime = if i % 10 == 0 {
                store.clock().now() + 1
            } else {
                0
            };
            let opts = StoreOptions {
                flags: i,
                exptime,
                ..StoreOptions::default()
            };
            store
                .update(&mut w, key.as_bytes(), |e| e.store(&[b"v"], opts))
                .expect("store");
            if exptime == 0 {
                expect.insert(key.into_bytes());
            }
        }
        store.clock().advance_for_test(5);
        let mut seen = BTreeSet::new();
        for part in 0..=store.walk_parts() {
            store.walk_part(part, |item| {
                assert!(seen.insert(item.key().to_vec()), "visited twice");
                assert!(!item.fetched());
            });
        }
        assert_eq!(seen, expect);
    }

    #[test]
    fn the_eviction_observer_sees_every_evicted_item() {
        use std::sync::atomic::{AtomicU64, Ordering};
        use std::sync::Arc;
        let store = Store::new(StoreConfig {
            memory_limit: 8 << 20,
            max_item_size: 64 << 10,
            writers: 1,
            ..StoreConfig::default()
        })
        .expect("store");
        let seen = Arc::new(AtomicU64::new(0));
        let counter = seen.clone();
        assert!(store.on_evict(move |item| {
            assert!(item.key().starts_with(b"k"));
            counter.fetch_add(1, Ordering::Relaxed);
        }));
        assert!(!store.on_evict(|_| {}), "one observer only");
        let mut w = store.writer();
        let value = vec![b'x'; 4000];
        for i in 0..10_000u32 {
            store
                .update(&mut w, format!("k{i}").as_bytes(), |e| {
                    e.store(&[&value], StoreOptions::default())
                })
                .expect("store");
        }
        let evictions = store.stats().evictions;
        assert!(evictions > 1000, "{evictions}");
        assert_eq!(seen.load(Ordering::Relaxed), evictions);
    }

    #[test]
    fn a_full_sweep_reclaims_every_expired_item() {
        let store = Store::new(StoreConfig {
            max_item_size: 64 << 10,
            ..StoreConfig::default()
        })
        .expect("store");
        let mut w = store.writer();
        let value = vec![b'x'; 1000];
        // Enough items to seal several segments.
        for i in 0..5000u32 {
            let opts = StoreOptions {
                exptime: store.clock().now() + 1,
                ..StoreOptions::default()
            };
            store
                .update(&mut w, format!("k{i}").as_bytes(), |e| {
                    e.store(&[&value], opts)
                })
                .expect("store");
        }
        drop(w);
        store.clock().advance_for_test(5);
        let reclaimed = store.reclaim_all_expired();
        assert!(reclaimed >= 4000, "reclaimed {reclaimed}");
        assert_eq!(store.stats().curr_items, 5000 - reclaimed);
    }
}
