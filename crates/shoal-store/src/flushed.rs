//! The keys the last `flush_all` removed, so that a read missing one of them is counted
//! as memcached's `get_flushed`.
//!
//! memcached's `flush_all` only moves a cut-off time: flushed items stay in memory until a
//! read finds one (counted in `get_flushed`, then unlinked) or the LRU crawler reclaims
//! it. The store here unlinks every item at the flush and frees its memory at once, so
//! nothing is left for a read to find; instead each shard remembers the hashes of the
//! first [`FLUSHED_KEYS_PER_SHARD`] keys it dropped. A key leaves the set when a read
//! counts it (once, as memcached unlinks the item it counted), when it is written again,
//! and at the next flush. The cap bounds the memory to a few KiB per shard, and only after
//! a flush: on a large cache the counter undercounts, as memcached's does once its
//! crawler has reclaimed the flushed items.

use std::collections::HashSet;

/// Keys remembered per index shard (256 shards: 65,536 keys in all).
pub(crate) const FLUSHED_KEYS_PER_SHARD: usize = 256;

/// One shard's flushed key hashes. Empty (and unallocated) until a flush removes items.
#[derive(Debug, Default)]
pub(crate) struct FlushedKeys {
    hashes: HashSet<u64>,
}

impl FlushedKeys {
    /// Forgets the previous flush's keys: a new flush starts a new set.
    pub(crate) fn clear(&mut self) {
        self.hashes = HashSet::new();
    }

    /// Whether another key may be remembered (the caller then hashes it).
    pub(crate) fn has_room(&self) -> bool {
        self.hashes.len() < FLUSHED_KEYS_PER_SHARD
    }

    /// Remembers a key the flush removed, if there is room.
    pub(crate) fn insert(&mut self, hash: u64) {
        if self.has_room() {
            self.hashes.insert(hash);
        }
    }

    /// Forgets `hash`; true if it was remembered. Free when nothing was flushed.
    #[inline]
    pub(crate) fn take(&mut self, hash: u64) -> bool {
        !self.hashes.is_empty() && self.hashes.remove(&hash)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_counted_once_and_the_set_stays_bounded() {
        let mut f = FlushedKeys::default();
        for h in 0..(FLUSHED_KEYS_PER_SHARD as u64 + 50) {
            f.insert(h);
        }
        assert!(!f.has_room());
        assert!(f.take(3));
        assert!(!f.take(3), "counted once");
        assert!(!f.take(FLUSHED_KEYS_PER_SHARD as u64 + 10), "past the cap");
        f.clear();
        assert!(!f.take(4));
    }
}
