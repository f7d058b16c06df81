//! What the flash tier tells an observer (memcached's `watch` lines about extstore).

/// What the flash tier did, for memcached's `watch` lines (`extwrite` among evictions,
/// the `compact_*` ones among system events).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FlashEvent<'a> {
    /// An item's value was written to flash (`type=extwrite`).
    Write {
        /// Its key.
        key: &'a [u8],
        /// Whether it had been read.
        fetched: bool,
        /// Seconds it has left, `None` for no expiry.
        ttl: Option<u32>,
        /// Seconds since it was last read or stored.
        idle: u32,
    },
    /// Compaction looked for a page to compact (`type=compact_fraginfo`, what memcached
    /// logs at each check while any page is in use): the `max_frag` setting and the live
    /// bytes under which a page qualifies.
    FragInfo {
        /// `ext_max_frag`.
        ratio: f64,
        /// The page size times `ext_max_frag`.
        bytes: u64,
    },
    /// Compaction of a page starts (`compact_start`, then `compact_read_start`).
    CompactStart {
        /// The page.
        page: u32,
        /// Its version.
        version: u32,
    },
    /// Compaction of a page read it through (`compact_read_end`, then `compact_end`).
    CompactEnd {
        /// The page.
        page: u32,
        /// Bytes of it read.
        offset: u64,
        /// Values moved to another page.
        rescues: u64,
        /// Values dropped, never read (`drop_unread`, `drop_under`): memcached counts
        /// those it leaves out of the rewrite as skipped.
        skipped: u64,
    },
}

/// A callback told about every [`FlashEvent`]; see [`Store::on_flash_event`](crate::Store::on_flash_event).
pub type FlashObserver = Box<dyn Fn(&FlashEvent<'_>) + Send + Sync>;
