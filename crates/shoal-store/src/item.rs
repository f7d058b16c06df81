//! A view of one live item, as the store hands it to callers.

use crate::layout::{RawItem, CAS_SEEN, FETCHED, HAS_CAS, STALE, WIN_SENT};
use crate::segments::SegId;
use crate::store_id::StoreId;
use std::sync::atomic::{AtomicU32, Ordering};

/// A live item, valid while the shard lock that produced it is held.
pub struct Item<'e> {
    pub(crate) raw: RawItem,
    cas: u64,
    now: u32,
    /// The store the item is in, so that [`Store::pin`](crate::Store::pin) can refuse an
    /// item of another store.
    pub(crate) owner: StoreId,
    /// The segment it is in.
    pub(crate) seg: SegId,
    /// Its segment's count of items read since they arrived (raised at the first read).
    active_items: &'e AtomicU32,
    /// For a stub of a flash-resident value: the value, once read from flash.
    pub(crate) flash_value: Option<&'e [u8]>,
}

impl<'e> Item<'e> {
    /// The item `raw` in segment `seg` of the store `owner`, read at rel time `now`;
    /// `active_items` is the segment's count of items read since they arrived.
    pub(crate) fn new(
        owner: StoreId,
        seg: SegId,
        raw: RawItem,
        cas: u64,
        now: u32,
        active_items: &'e AtomicU32,
    ) -> Self {
        Item {
            raw,
            cas,
            now,
            owner,
            seg,
            active_items,
            flash_value: None,
        }
    }

    /// The same item with its flash-resident value read into `value`.
    pub(crate) fn with_flash_value(mut self, value: &'e [u8]) -> Self {
        self.flash_value = Some(value);
        self
    }

    /// The key.
    pub fn key(&self) -> &[u8] {
        self.raw.key()
    }

    /// The value. For an item whose value is on flash, this is the value read back
    /// ([`Store::get`](crate::Store::get) reads it before calling back;
    /// [`Entry::load_value`](crate::Entry::load_value) inside an update), and empty until it is read.
    pub fn value(&self) -> &[u8] {
        match (self.flash_value, self.raw.is_flash()) {
            (Some(v), _) => v,
            (None, true) => &[],
            (None, false) => self.raw.value(),
        }
    }

    /// The value's length, without reading a flash-resident value.
    pub fn value_len(&self) -> usize {
        if self.raw.is_flash() {
            crate::flash::Locator::from_bytes(self.raw.value()).map_or(0, |l| l.len as usize)
        } else {
            self.raw.value_len()
        }
    }

    /// Whether the value is on flash (the item in memory is a stub).
    pub fn on_flash(&self) -> bool {
        self.raw.is_flash()
    }

    /// Client flags.
    pub fn flags(&self) -> u32 {
        self.raw.flags()
    }

    /// The CAS unique. Asking for it records that a client may now hold it, so that it
    /// survives the item being moved by eviction (an unseen one may change then, which
    /// no client can tell).
    pub fn cas(&self) -> u64 {
        if self.raw.bits() & (HAS_CAS | CAS_SEEN) == 0 {
            self.raw.set_state(CAS_SEEN);
        }
        self.cas
    }

    /// Rel expiry time, 0 for never.
    pub fn exptime(&self) -> u32 {
        self.raw.exptime()
    }

    /// Seconds left to live, or `None` if the item never expires.
    pub fn ttl(&self) -> Option<u32> {
        match self.raw.exptime() {
            0 => None,
            e => Some(e.saturating_sub(self.now)),
        }
    }

    /// Seconds since the item was last read or stored.
    pub fn idle_seconds(&self) -> u32 {
        self.now.saturating_sub(self.raw.atime())
    }

    /// Whether the item has been read since it was stored.
    pub fn fetched(&self) -> bool {
        self.raw.bits() & FETCHED != 0
    }

    /// Whether the item was invalidated (served as stale).
    pub fn stale(&self) -> bool {
        self.raw.bits() & STALE != 0
    }

    /// Whether a recache token was already handed out for this item.
    pub fn win_sent(&self) -> bool {
        self.raw.bits() & WIN_SENT != 0
    }

    /// Marks the item read now: fetched, and counted as read for eviction.
    pub fn mark_fetched(&self) {
        self.record_read();
    }

    /// Records a read: memcached's fetched flag, the access time, and the read count
    /// eviction keeps items by.
    pub(crate) fn record_read(&self) {
        if self.raw.mark_read() {
            self.active_items.fetch_add(1, Ordering::Relaxed);
        }
        self.raw.set_atime(self.now);
    }

    /// Records an access that is not a read (memcached's LRU bump of an `add` that finds
    /// the key): eviction and flash compaction count it as the item being used, but
    /// memcached's fetched flag (`mg ... h`) is left as it was.
    pub fn bump(&self) {
        if self.raw.mark_accessed(0) {
            self.active_items.fetch_add(1, Ordering::Relaxed);
        }
        self.raw.set_atime(self.now);
    }

    /// Hands out the recache token: true if the caller is the first to get it.
    pub fn take_win(&self) -> bool {
        self.raw.set_state(WIN_SENT) & WIN_SENT == 0
    }

    /// Marks the item stale (invalidated but still served).
    pub fn mark_stale(&self) {
        self.raw.set_state(STALE);
    }

    /// Bytes the item occupies in memory.
    pub fn size(&self) -> usize {
        self.raw.size()
    }
}
