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
    /// Live items removed to free memory. This and the other counters of what happened to
    /// items (evictions, expiry, refusals) restart from 0 at [`Store::reset_stats`](crate::Store::reset_stats).
    pub evictions: u64,
    /// Evicted items that were never read.
    pub evicted_unfetched: u64,
    /// Evicted items that had been read since they arrived in their segment, evicted
    /// all the same (eviction could keep no more of that segment).
    pub evicted_active: u64,
    /// Seconds since the last access of the most recently evicted item.
    pub evicted_time: u32,
    /// Items eviction moved from probation to a size class's main queue (read while in
    /// probation, or of a class worth keeping).
    pub evict_promoted: u64,
    /// Their bytes.
    pub evict_promoted_bytes: u64,
    /// Items eviction copied forward within a main queue (read since they arrived).
    pub evict_retained: u64,
    /// Their bytes.
    pub evict_retained_bytes: u64,
    /// Main-queue segments compacted because expiry, deletes or overwrites had left them
    /// mostly empty.
    pub compactions: u64,
    /// Items those compactions moved.
    pub compacted_items: u64,
    /// New keys written soon after being evicted unread from probation (found in the
    /// ghost, so stored as already read once).
    pub ghost_hits: u64,
    /// Memory taken by the ghost's fingerprints (outside the item limit).
    pub ghost_bytes: u64,
    /// Expired items removed without ever being read.
    pub expired_unfetched: u64,
    /// Expired items unlinked (by a read, a store, eviction or the expiry sweep).
    pub reclaimed: u64,
    /// Of those, the ones the expiry sweep (memcached's LRU crawler) unlinked.
    pub crawler_reclaimed: u64,
    /// Stores refused for want of memory.
    pub outofmemory: u64,
    /// Reads that found only an expired item.
    pub get_expired: u64,
    /// Reads that missed a key the last `flush_all` removed, once per key (memcached's
    /// `get_flushed`; up to 65,536 keys are remembered per flush, see the `flushed` module).
    pub get_flushed: u64,
    /// The memory limit for items, in bytes.
    pub limit_maxbytes: u64,
    /// Segment size in bytes.
    pub segment_size: u64,
    /// Segments with memory allocated.
    pub segments_allocated: u64,
    /// Bytes counted as allocated besides the segments (memcached's test-suite hook, see
    /// [`Store::count_as_allocated`](crate::Store::count_as_allocated)); 0 otherwise.
    pub counted_allocated: u64,
    /// Segments free for writing.
    pub segments_free: u64,
    /// Full segments awaiting eviction, in every queue.
    pub segments_sealed: u64,
    /// Of which in the probation queue.
    pub segments_probation: u64,
    /// Of which in the size classes' main queues.
    pub segments_main: u64,
    /// Of which in the flash stubs' queue (0 without a flash tier).
    pub segments_stubs: u64,
    /// Memory used by the key index (outside the item limit, like memcached's hash table).
    pub index_bytes: u64,
    /// Buckets of the key index, over all its shards (each a power of two).
    pub index_buckets: u64,
    /// Times a segment could not be taken into use because the memory file's (`-e`)
    /// filesystem was full: the cache then evicts within the segments it has.
    pub memory_file_full: u64,
}
