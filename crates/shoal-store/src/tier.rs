//! The store's side of the flash tier (see `flash`): stubs in, values out.
//!
//! - **Flushing.** Eviction, about to drop an item whose value is at least
//!   `ext_item_size`, writes the value to flash instead and moves a *stub* into memory:
//!   the item's header, key and a 16-byte locator in place of the value (the FLASH bit
//!   says which). A stub is a small item like any other: it is read, retained and
//!   evicted by the same policy, so memory goes to the stubs that are read.
//! - **Accounting.** Every stub linked into the index counts its value live on its page,
//!   every stub unlinked (delete, overwrite, expiry, flush, eviction) uncounts it:
//!   `link_accounting` and `unlink_accounting` do both, so copies of a stub (moves,
//!   touches) balance. None of it does IO.
//! - **Reading.** A read of a stub leaves the shard lock, reads the record (from a write
//!   buffer or the file, checked), and takes the lock again to serve what the index then
//!   holds: the same stub (perhaps moved), or whatever replaced it meanwhile.

use crate::flash::{Flash, FlashMiss, Locator, LOCATOR_LEN};
use crate::index::{Ref, Shard};
use crate::inner::Inner;
use crate::layout::{RawItem, FETCHED};
use crate::queue_heads::Evictor;
use crate::store::Store;
use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A stub's value read from flash: the buffer it was read into and where in it.
pub(crate) struct Loaded {
    /// The stub it was read for.
    pub(crate) loc: Ref,
    pub(crate) buf: Vec<u8>,
    pub(crate) range: Range<usize>,
}

impl Loaded {
    pub(crate) fn value(&self) -> &[u8] {
        self.buf.get(self.range.clone()).unwrap_or(&[])
    }
}

impl Inner {
    /// The flash tier, if the store has one.
    #[inline]
    pub(crate) fn flash(&self) -> Option<&Flash> {
        self.flash.get().map(|f| &**f)
    }

    /// The locator a stub carries.
    pub(crate) fn locator(raw: &RawItem) -> Option<Locator> {
        Locator::from_bytes(raw.value())
    }

    /// Counts a stub being linked (see the module docs).
    pub(crate) fn retain_stub(&self, raw: &RawItem) {
        if let (Some(flash), Some(loc)) = (self.flash(), Self::locator(raw)) {
            flash.retain(loc, raw.key_len());
        }
    }

    /// Uncounts a stub being unlinked.
    pub(crate) fn release_stub(&self, raw: &RawItem) {
        if let (Some(flash), Some(loc)) = (self.flash(), Self::locator(raw)) {
            flash.release(loc, raw.key_len());
        }
    }

    /// Whether eviction sends this item's value to flash rather than dropping it.
    pub(crate) fn flushable(&self, raw: &RawItem) -> bool {
        !raw.is_flash()
            && self
                .flash()
                .is_some_and(|f| raw.value_len() >= f.item_size().max(LOCATOR_LEN * 2))
    }

    /// Writes the linked item `old`'s value to flash and replaces the item by a stub at
    /// the head of `queue`, with read count `freq`. `None`, with nothing changed, when
    /// flash cannot take the value now or the stub does not fit in `room` bytes. The
    /// caller holds the item's shard lock and the eviction lock.
    pub(crate) fn flush_to_flash(
        &self,
        ev: &mut Evictor,
        shard: &mut Shard,
        hash: u64,
        (old, raw): (Ref, RawItem),
        freq: u32,
        room: usize,
    ) -> Option<usize> {
        let flash = self.flash()?;
        let stub_size = self.stub_footprint(&raw);
        if stub_size > room {
            return None;
        }
        let loc = flash.write(raw.key(), raw.value())?;
        let queue = crate::evict::class_of(stub_size);
        let moved = self.move_item(
            ev,
            shard,
            hash,
            (old, raw),
            (queue, freq),
            room,
            Some(&loc.to_bytes()),
        );
        // `write` counted the record live until a stub holds it; the stub now counts it
        // (or, not moved, nothing does).
        flash.release(loc, raw.key_len());
        moved
    }

    /// Bytes the stub of `raw` takes in a segment.
    fn stub_footprint(&self, raw: &RawItem) -> usize {
        let spec = crate::layout::ItemSpec {
            key_len: raw.key_len(),
            value_len: LOCATOR_LEN,
            flags: raw.flags(),
            exptime: raw.exptime(),
            // As `move_item` decides: a unique a client may hold is kept.
            cas: (raw.bits() & (crate::layout::HAS_CAS | crate::layout::CAS_SEEN) != 0)
                .then_some(0),
            state: crate::layout::FLASH,
        };
        self.refs.aligned(spec.size())
    }

    /// Reads the value of the stub `raw` (at `loc`) for `key`. The caller does not hold
    /// the shard lock: this may wait for the disk.
    pub(crate) fn load_stub(
        &self,
        loc: Ref,
        locator: Locator,
        key: &[u8],
    ) -> Result<Loaded, FlashMiss> {
        let flash = self.flash().ok_or(FlashMiss::Gone)?;
        flash.counters.gets.fetch_add(1, Ordering::Relaxed);
        let mut buf = Vec::new();
        let range = flash.read(locator, key, &mut buf)?;
        Ok(Loaded { loc, buf, range })
    }

    /// Unlinks a stub whose value could not be read, if the index still points at it:
    /// the item is gone, as memcached's extstore misses make it.
    pub(crate) fn drop_unreadable(&self, hash: u64, loc: Ref) {
        let mut shard = self.shard(hash);
        self.remove_loc(&mut shard, hash, loc);
    }

    /// Where the index points for `key` now, if that is a stub with `locator` (the one
    /// read), perhaps moved by eviction since.
    pub(crate) fn same_stub(
        &self,
        shard: &mut Shard,
        hash: u64,
        key: &[u8],
        locator: Locator,
    ) -> Option<Ref> {
        let loc = shard.find(self, hash, key)?;
        let raw = self.item_at(loc);
        (raw.is_flash() && Self::locator(&raw) == Some(locator)).then_some(loc)
    }

    /// Compaction, one page per call from maintenance: when free pages run short, the
    /// live values of the most fragmented sealed page move to the open page (their stubs
    /// repointed in place), or are dropped as `drop_unread`/`drop_under` say, so the page
    /// frees. Returns whether a page was compacted.
    pub(crate) fn compact_flash(&self) -> bool {
        let Some(flash) = self.flash() else {
            return false;
        };
        let Some((page, version)) = flash.compaction_candidate() else {
            return false;
        };
        let drop_all_unread = flash.drop_unread_now();
        flash.for_each_record(page, version, |offset, key, value| {
            let hash = self.hash(key);
            let mut shard = self.shard(hash);
            let Some(loc) = shard.find(self, hash, key) else {
                return true;
            };
            let raw = self.item_at(loc);
            let Some(locator) = Self::locator(&raw).filter(|_| raw.is_flash()) else {
                return true;
            };
            if locator.page != page || locator.version != version || locator.offset != offset {
                return true;
            }
            let counters = &flash.counters;
            if drop_all_unread && raw.bits() & FETCHED == 0 {
                counters.compact_lost.fetch_add(1, Ordering::Relaxed);
                self.remove_loc(&mut shard, hash, loc);
                return true;
            }
            let Some(moved) = flash.write(key, value) else {
                counters.compact_skipped.fetch_add(1, Ordering::Relaxed);
                return false;
            };
            // The new record is counted live by `write`; the old one is let go.
            raw.set_locator(&moved.to_bytes());
            flash.release(locator, key.len());
            counters.compact_rescues.fetch_add(1, Ordering::Relaxed);
            if raw.bits() & FETCHED == 0 {
                counters.compact_resc_old.fetch_add(1, Ordering::Relaxed);
            }
            true
        });
        true
    }
}

impl Store {
    /// Gives the store a flash tier: from now on eviction sends values of at least
    /// `ext_item_size` there instead of dropping them. Once per store; a second call
    /// returns false and changes nothing.
    pub fn attach_flash(&self, flash: Arc<Flash>) -> bool {
        self.inner.flash.set(flash).is_ok()
    }

    /// The store's flash tier, if it has one.
    pub fn flash(&self) -> Option<&Flash> {
        self.inner.flash()
    }
}
