//! A snapshot of the store's counters.

/// Store-level statistics, in memcached's terms where it has them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StoreStats {
    /// Items currently stored.
    pub curr_items: u64,
    /// Bytes used by stored items (keys, values and headers).
    pub bytes: u64,
    /// Items ever stored.
    pub total_items: u64,
    /// Live items removed to free memory.
    pub evictions: u64,
    /// Evicted items that were never read.
    pub evicted_unfetched: u64,
    /// Expired items removed without ever being read.
    pub expired_unfetched: u64,
    /// Expired items whose memory was reclaimed.
    pub reclaimed: u64,
    /// Reads that found only an expired item.
    pub get_expired: u64,
    /// The memory limit for items, in bytes.
    pub limit_maxbytes: u64,
    /// Segment size in bytes.
    pub segment_size: u64,
    /// Segments with memory allocated.
    pub segments_allocated: u64,
    /// Segments free for writing.
    pub segments_free: u64,
    /// Full segments awaiting eviction.
    pub segments_sealed: u64,
    /// Memory used by the key index (outside the item limit, like memcached's hash table).
    pub index_bytes: u64,
}
