//! The key index: shards of chained hash tables whose chains run through the items.
//!
//! Each shard has its own lock, so threads only contend when they touch keys of the same
//! shard at the same moment. A shard is an array of 32-bit bucket heads; each item's
//! header holds the reference of the next item in its bucket (memcached's layout), so the
//! index costs 4 to 8 bytes per item outside the item memory (one bucket per item at most). Keys live only in the
//! segments, never twice.

use crate::layout::{RawItem, NO_LINK};

/// A 32-bit item reference: segment and offset, packed by [`Refs`].
pub type Ref = u32;

// Shards grow their bucket arrays when they hold more items than buckets. memcached
// expands its table at 1.5 items per bucket; at 1.0 a hit walks 1.25-1.5 items on
// average rather than 1.375-1.75, and every item walked is a likely cache miss, while the
// buckets still cost 4-8 bytes per item (memcached's 8-byte pointers, 5-11).
/// Buckets a shard starts with.
const MIN_BUCKETS: usize = 16;

/// How references are packed: `segment << seg_bits | offset >> align_shift`.
///
/// Items start on `1 << align_shift` byte boundaries: 4 bytes for stores up to 16 GiB of
/// addressable segments, coarser beyond, so that every item fits a 32-bit reference.
#[derive(Debug, Clone, Copy)]
pub struct Refs {
    seg_bits: u32,
    align_shift: u32,
}

impl Refs {
    /// Packing for `segments` segments of `1 << seg_shift` bytes.
    pub fn new(seg_shift: u32, segments: usize) -> Refs {
        let seg_count_bits = usize::BITS - segments.saturating_sub(1).leading_zeros();
        let total_bits = seg_shift + seg_count_bits;
        let align_shift = total_bits.saturating_sub(32).max(2).min(seg_shift);
        Refs {
            seg_bits: seg_shift - align_shift,
            align_shift,
        }
    }

    /// Item alignment in bytes.
    #[inline]
    pub fn align(&self) -> usize {
        1 << self.align_shift
    }

    /// `size` rounded up to the item alignment.
    #[inline]
    pub fn aligned(&self, size: usize) -> usize {
        (size + self.align() - 1) & !(self.align() - 1)
    }

    /// The reference of the item at `off` in segment `seg`.
    #[inline]
    pub fn make(&self, seg: u16, off: u32) -> Ref {
        (u32::from(seg) << self.seg_bits) | (off >> self.align_shift)
    }

    /// The segment of a reference.
    #[inline]
    pub fn seg(&self, r: Ref) -> u16 {
        (r >> self.seg_bits) as u16
    }

    /// The byte offset of a reference within its segment.
    #[inline]
    pub fn off(&self, r: Ref) -> u32 {
        (r & ((1 << self.seg_bits) - 1)) << self.align_shift
    }
}

/// What the index needs from the store: item views and key hashes.
pub trait Items {
    /// The item a reference points at.
    fn item(&self, r: Ref) -> RawItem;
    /// The hash of a key.
    fn hash(&self, key: &[u8]) -> u64;
}

/// Counters a shard keeps under its lock (summed for `stats`).
#[derive(Debug, Default, Clone, Copy)]
pub struct ShardCounters {
    /// Bytes of live items (segment bytes, headers included).
    pub bytes: u64,
    /// Items ever stored.
    pub total_items: u64,
    /// Reads that found an expired item.
    pub get_expired: u64,
    /// Reads that missed a key the last `flush_all` removed (see `flushed`).
    pub get_flushed: u64,
    /// New keys written soon after being evicted unread from probation (found in the
    /// ghost).
    pub ghost_hits: u64,
}

impl ShardCounters {
    /// Adds another shard's counters.
    pub fn add(&mut self, o: &ShardCounters) {
        self.bytes += o.bytes;
        self.total_items += o.total_items;
        self.get_expired += o.get_expired;
        self.get_flushed += o.get_flushed;
        self.ghost_hits += o.ghost_hits;
    }
}

/// One shard: bucket heads, its item count and its counters. Always used under its lock.
pub struct Shard {
    heads: Vec<Ref>,
    len: usize,
    /// Counters.
    pub counters: ShardCounters,
    /// Live items per memcached slab class (see `class_stats`).
    pub(crate) classes: crate::class_stats::ShardClasses,
    /// Keys the last flush removed, for `get_flushed` (see `flushed`).
    pub(crate) flushed: crate::flushed::FlushedKeys,
}

impl Shard {
    /// An empty shard sized for `capacity` items.
    pub fn with_capacity(capacity: usize) -> Shard {
        let buckets = capacity.next_power_of_two().max(MIN_BUCKETS);
        Shard {
            heads: vec![NO_LINK; buckets],
            len: 0,
            counters: ShardCounters::default(),
            classes: Default::default(),
            flushed: Default::default(),
        }
    }

    /// Items in the shard.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Buckets (a power of two).
    pub fn buckets(&self) -> usize {
        self.heads.len()
    }

    /// Bytes of bucket array.
    pub fn index_bytes(&self) -> usize {
        self.heads.len() * std::mem::size_of::<Ref>()
    }

    #[inline]
    fn bucket(&self, hash: u64) -> usize {
        (hash as usize) & (self.heads.len() - 1)
    }

    /// The item with this key, if linked.
    #[inline]
    pub fn find(&self, items: &impl Items, hash: u64, key: &[u8]) -> Option<Ref> {
        let mut r = self.heads[self.bucket(hash)];
        while r != NO_LINK {
            let item = items.item(r);
            item.prefetch_body();
            if item.key_len() == key.len() && item.key() == key {
                return Some(r);
            }
            r = item.link();
        }
        None
    }

    /// Whether `r` is linked (the index points at it, not at another copy of its key).
    /// Walks `r`'s chain comparing references only, never keys.
    pub fn links(&self, items: &impl Items, hash: u64, r: Ref) -> bool {
        let mut at = self.heads[self.bucket(hash)];
        while at != NO_LINK {
            if at == r {
                return true;
            }
            at = items.item(at).link();
        }
        false
    }

    /// Links a new item (its key must not be linked already).
    pub fn insert(&mut self, items: &impl Items, hash: u64, r: Ref) {
        let b = self.bucket(hash);
        items.item(r).set_link(self.heads[b]);
        self.heads[b] = r;
        self.len += 1;
        if self.len > self.heads.len() {
            self.grow(items);
        }
    }

    /// Makes whatever points at `old` point at `new`, which takes `old`'s place in the chain.
    /// Returns false if `old` is not linked.
    pub fn replace(&mut self, items: &impl Items, hash: u64, old: Ref, new: Ref) -> bool {
        let b = self.bucket(hash);
        let next = items.item(old).link();
        items.item(new).set_link(next);
        self.relink(items, b, old, new)
    }

    /// Unlinks `r`. Returns false if it is not linked.
    pub fn remove(&mut self, items: &impl Items, hash: u64, r: Ref) -> bool {
        let b = self.bucket(hash);
        let next = items.item(r).link();
        let found = self.relink(items, b, r, next);
        if found {
            self.len -= 1;
        }
        found
    }

    /// Replaces the pointer to `target` in bucket `b`'s chain with `with`.
    fn relink(&mut self, items: &impl Items, b: usize, target: Ref, with: Ref) -> bool {
        if self.heads[b] == target {
            self.heads[b] = with;
            return true;
        }
        let mut r = self.heads[b];
        while r != NO_LINK {
            let item = items.item(r);
            let next = item.link();
            if next == target {
                item.set_link(with);
                return true;
            }
            r = next;
        }
        false
    }

    fn grow(&mut self, items: &impl Items) {
        let old = std::mem::replace(&mut self.heads, vec![NO_LINK; 0]);
        self.heads = vec![NO_LINK; old.len() * 2];
        for mut r in old {
            while r != NO_LINK {
                let item = items.item(r);
                let next = item.link();
                let b = self.bucket(items.hash(item.key()));
                item.set_link(self.heads[b]);
                self.heads[b] = r;
                r = next;
            }
        }
    }

    /// Calls `f` with every linked item, in bucket order.
    pub fn for_each(&self, items: &impl Items, mut f: impl FnMut(Ref)) {
        for &head in &self.heads {
            let mut r = head;
            while r != NO_LINK {
                let next = items.item(r).link();
                f(r);
                r = next;
            }
        }
    }

    /// Unlinks every item, calling `f` with each; the bucket array keeps its size.
    pub fn drain(&mut self, items: &impl Items, mut f: impl FnMut(Ref)) {
        // The bucket array keeps its size, as memcached's table does after `flush_all`:
        // a cache flushed is usually refilled to the same size.
        for head in self.heads.iter_mut() {
            let mut r = std::mem::replace(head, NO_LINK);
            while r != NO_LINK {
                let next = items.item(r).link();
                f(r);
                r = next;
            }
        }
        self.len = 0;
    }
}

/// Pads a value to its own cache lines so neighbouring shard locks do not false-share.
#[repr(align(128))]
pub struct Padded<T>(pub T);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_pack_and_unpack() {
        let refs = Refs::new(20, 256);
        assert_eq!(refs.align(), 4);
        let r = refs.make(255, (1 << 20) - 16);
        assert_eq!((refs.seg(r), refs.off(r)), (255, (1 << 20) - 16));
        assert_ne!(r, NO_LINK);
        // 64 GiB of 1 MiB segments: 36 bits of address, so 16-byte alignment.
        let big = Refs::new(20, 65536);
        assert_eq!(big.align(), 16);
        let r = big.make(65535, (1 << 20) - 32);
        assert_eq!((big.seg(r), big.off(r)), (65535, (1 << 20) - 32));
        assert_eq!(big.aligned(17), 32);
        // With 16-byte alignment the smallest item at the end of the highest segment id
        // packs to the chain terminator: why `Store::new` leaves that id unused.
        assert_eq!(big.make(65535, (1 << 20) - 16), NO_LINK);
    }
}
