//! Values read in place: a reply that refers to an item's bytes in segment memory instead
//! of copying them.
//!
//! Copying a 100 KB value into a reply buffer costs a pass over memory the kernel then
//! reads again to send it; memcached and Segcache both write values straight from item
//! memory. A [`ValueRef`] makes that safe here: it *pins* the item's segment (a count per
//! segment, see `Segments::pin`), and no segment is reused or freed while pinned. Eviction
//! passes over pinned segments, and a segment emptied while pinned waits, draining, for its
//! last pin. Items are never rewritten in place (every update writes a new copy), so the
//! bytes a reference sees stay exactly the value that was read.
//!
//! Pins are meant to last one write. A connection whose client stops reading copies what
//! its references point at and drops them (shoal-net's reply buffer does), so a slow
//! client never holds segment memory back from eviction.

use crate::inner::Inner;
use crate::item::Item;
use crate::segments::SegId;
use crate::store::Store;
use std::ptr::NonNull;

/// An item's value, read in place from segment memory, valid as long as this reference
/// lives (the segment cannot be reused before it is dropped). Costs one atomic increment
/// to take and one decrement to drop.
pub struct ValueRef<'s> {
    inner: &'s Inner,
    /// The pinned segment, or `None` for a value read from flash (held in `owned`).
    seg: Option<SegId>,
    ptr: NonNull<u8>,
    len: usize,
    owned: Option<Box<[u8]>>,
}

// SAFETY: a ValueRef is a shared, immutable view of bytes that no one writes while the
// pin is held (see the module docs); dropping it from another thread only decrements an
// atomic counter (and may take the pool's mutex).
unsafe impl Send for ValueRef<'_> {}
// SAFETY: as for Send: the bytes are immutable while pinned.
unsafe impl Sync for ValueRef<'_> {}

impl ValueRef<'_> {
    /// The value's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the value is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl AsRef<[u8]> for ValueRef<'_> {
    #[inline]
    fn as_ref(&self) -> &[u8] {
        if let Some(owned) = &self.owned {
            return owned;
        }
        // SAFETY: `ptr..ptr+len` was the value of a published item when the pin was taken
        // (under its shard lock), and the segment holding it is neither reused nor freed
        // nor written at those bytes until the pin is dropped in `drop`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::fmt::Debug for ValueRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValueRef")
            .field("seg", &self.seg)
            .field("len", &self.len)
            .finish()
    }
}

impl Drop for ValueRef<'_> {
    fn drop(&mut self) {
        if let Some(seg) = self.seg {
            self.inner.segs.unpin(seg);
        }
    }
}

impl Store {
    /// A reference to `item`'s value that outlives the lock `item` was read under: for
    /// replies written straight from segment memory. Call it inside the
    /// [`get`](Store::get) or [`update`](Store::update) callback that produced `item`.
    ///
    /// # Panics
    /// If `item` is not an item of this store (one not sharing this store's memory), as
    /// [`Store::update`] refuses a foreign writer.
    pub fn pin(&self, item: &Item<'_>) -> ValueRef<'_> {
        let inner = &*self.inner;
        // A real check: pinning another store's item would count the pin in this store's
        // segment table and leave the real segment unprotected.
        assert!(
            item.owner == inner.id(),
            "Store::pin: the item belongs to a different Store"
        );
        if let Some(value) = item.flash_value {
            // Read from flash into a buffer that dies with the callback: the reply keeps
            // a copy (a disk read's cost dwarfs it).
            return ValueRef {
                inner,
                seg: None,
                ptr: NonNull::dangling(),
                len: value.len(),
                owned: Some(value.into()),
            };
        }
        inner.segs.pin(item.seg);
        let value = item.value();
        ValueRef {
            inner,
            seg: Some(item.seg),
            // A slice's pointer is never null (an empty one is dangling but non-null).
            ptr: NonNull::from(value).cast(),
            len: value.len(),
            owned: None,
        }
    }

    /// Segments emptied of items but still read by replies in flight (they are reused
    /// as soon as those replies are written).
    pub fn draining_segments(&self) -> usize {
        self.inner.segs.draining()
    }
}
