//! The key index: shards of open-addressing hash tables mapping keys to item locations.
//!
//! Each shard has its own lock, so threads only contend when they touch keys of the same
//! shard at the same moment. An entry is one packed `u64`: a 16-bit tag from the key's
//! hash (so a lookup compares keys in segment memory almost only on a true match), the
//! segment id and the offset. Keys live only in the segments, never twice.

use hashbrown::HashTable;

/// A packed item location: tag:16 | segment:16 | offset:32.
pub type Loc = u64;

/// Packs a location.
#[inline]
pub fn pack(tag: u16, seg: u16, off: u32) -> Loc {
    (u64::from(tag) << 48) | (u64::from(seg) << 32) | u64::from(off)
}

/// The tag of a location.
#[inline]
pub fn tag(loc: Loc) -> u16 {
    (loc >> 48) as u16
}

/// The segment of a location.
#[inline]
pub fn seg(loc: Loc) -> u16 {
    (loc >> 32) as u16
}

/// The offset of a location within its segment.
#[inline]
pub fn off(loc: Loc) -> u32 {
    loc as u32
}

/// The tag for a key hash: bits that neither the shard choice nor hashbrown's own
/// control byte (top 7 bits) use, so it adds real discrimination.
#[inline]
pub fn tag_of(hash: u64) -> u16 {
    (hash >> 16) as u16
}

/// Counters a shard keeps under its lock (summed for `stats`).
#[derive(Debug, Default, Clone, Copy)]
pub struct ShardCounters {
    /// Bytes of live items (segment bytes, headers included).
    pub bytes: u64,
    /// Items ever stored.
    pub total_items: u64,
    /// Live items removed to make room.
    pub evictions: u64,
    /// Evicted items that were never read.
    pub evicted_unfetched: u64,
    /// Expired items removed, never having been read.
    pub expired_unfetched: u64,
    /// Expired items whose memory was reclaimed (by a scan, eviction or access).
    pub reclaimed: u64,
    /// Reads that found an expired item.
    pub get_expired: u64,
}

impl ShardCounters {
    /// Adds another shard's counters.
    pub fn add(&mut self, o: &ShardCounters) {
        self.bytes += o.bytes;
        self.total_items += o.total_items;
        self.evictions += o.evictions;
        self.evicted_unfetched += o.evicted_unfetched;
        self.expired_unfetched += o.expired_unfetched;
        self.reclaimed += o.reclaimed;
        self.get_expired += o.get_expired;
    }
}

/// One shard: a table and its counters. Always used under its lock.
#[derive(Default)]
pub struct Shard {
    /// Key hash -> location.
    pub table: HashTable<Loc>,
    /// Counters.
    pub counters: ShardCounters,
}

/// Pads a value to its own cache lines so neighbouring shard locks do not false-share.
#[repr(align(128))]
pub struct Padded<T>(pub T);
