//! The store's side of the flash tier (see `flash`): stubs in, values out.
//!
//! - **Flushing.** Eviction, about to drop an item whose value is at least
//!   `ext_item_size`, writes the value to flash instead and moves a *stub* into memory:
//!   the item's header, key and a 16-byte locator in place of the value (the FLASH bit
//!   says which). Stubs have a queue of their own, apart from the size classes: up to an
//!   eighth of memory no stub is dropped for being unread (it stands for a value worth a
//!   disk read, and dropping it would leave a hole on flash); beyond that the oldest
//!   go first, those read since their last trip kept.
//! - **Accounting.** Every stub linked into the index counts its value live on its page,
//!   every stub unlinked (delete, overwrite, expiry, flush, eviction) uncounts it:
//!   `link_accounting` and `unlink_accounting` do both, so copies of a stub (moves,
//!   touches) balance. None of it does IO.
//! - **Reading.** A read of a stub leaves the shard lock, reads the record (from a write
//!   buffer or the file, checked), and takes the lock again to serve what the index then
//!   holds: the same stub (perhaps moved), or whatever replaced it meanwhile.

use crate::flash::{Disk, Flash, FlashEvent, FlashMiss, Locator, Rescue, LOCATOR_LEN};
use crate::index::{Ref, Shard};
use crate::inner::Inner;
use crate::layout::{RawItem, FETCHED};
use crate::queue_heads::Evictor;
use std::ops::Range;
use std::sync::atomic::Ordering;

/// Items one call of [`Inner::flush_aged`] looks at, at most (whole shards, at least
/// one): with maintenance ten times a second, a cache of up to this many items is
/// walked whole every tick, a larger one in turns, without a full walk per tick.
const AGE_ITEMS_PER_CALL: usize = 1 << 16;

/// A stub's value read from flash: the buffer it was read into and where in it.
#[derive(Debug)]
pub(crate) struct Loaded {
    /// The stub it was read for, and that stub's locator (a stub at the same place
    /// later may be another write of the key).
    pub(crate) loc: Ref,
    pub(crate) locator: Locator,
    pub(crate) buf: Vec<u8>,
    pub(crate) range: Range<usize>,
}

impl Loaded {
    /// Whether this is the value of the stub at `current` now.
    pub(crate) fn is_for(&self, inner: &Inner, current: Option<Ref>) -> bool {
        current == Some(self.loc) && {
            let raw = inner.item_at(self.loc);
            raw.is_flash() && Inner::locator(&raw) == Some(self.locator)
        }
    }

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
        let now = self.clock.now();
        let ttl = match raw.exptime() {
            0 => None,
            e => Some(e.saturating_sub(now)),
        };
        let mut written = None;
        let attempted = std::cell::Cell::new(false);
        let mut write = || {
            attempted.set(true);
            written = flash.write(raw.key(), raw.value(), ttl);
            written
        };
        let mut place = |queue| {
            self.move_item(
                ev,
                shard,
                hash,
                (old, raw),
                (queue, freq),
                room,
                crate::evict::Payload::Stub(&mut write),
            )
        };
        // Stubs have a queue of their own; in a store of few segments its head may not
        // get a segment (open heads are capped), and then the stub goes with the small
        // items of its size rather than the value being dropped. `write` runs only once a
        // place is taken, so the second try is made only if the first wrote nothing.
        let moved = match place(crate::segments::STUBS) {
            None if !attempted.get() => place(crate::evict::class_of(stub_size)),
            moved => moved,
        };
        // `write` counted the record live until a stub holds it; the stub now counts it.
        if let Some(loc) = written {
            flash.release(loc, raw.key_len());
        }
        if moved.is_some() {
            if let Some(observe) = self.flash_observer.get() {
                let now = self.clock.now();
                observe(&FlashEvent::Write {
                    key: raw.key(),
                    fetched: raw.bits() & FETCHED != 0,
                    ttl: match raw.exptime() {
                        0 => None,
                        e => Some(e.saturating_sub(now)),
                    },
                    idle: now.saturating_sub(raw.atime()),
                });
            }
        }
        moved
    }

    /// Brings a value read from flash back into memory (memcached's recache), if the
    /// stub with `locator` is still the key's item: the item is moved, with everything
    /// but its value as it was, to the head of its size class's main queue, as a kept
    /// item is. Gives up rather than wait when eviction is busy: a read never waits on
    /// another's eviction.
    pub(crate) fn recache(&self, key: &[u8], hash: u64, locator: Locator, value: &[u8]) {
        let Some(mut ev) = self.evictor.try_lock() else {
            return;
        };
        let mut shard = self.shard(hash);
        let Some(loc) = self.same_stub(&mut shard, hash, key, locator) else {
            return;
        };
        let raw = self.item_at(loc);
        let spec = crate::layout::ItemSpec {
            key_len: raw.key_len(),
            value_len: value.len(),
            flags: raw.flags(),
            exptime: raw.exptime(),
            cas: Some(0),
            state: 0,
        };
        let queue = crate::evict::class_of(self.refs.aligned(spec.size()));
        let moved = self.move_item(
            &mut ev,
            &mut shard,
            hash,
            (loc, raw),
            (queue, raw.freq()),
            usize::MAX,
            crate::evict::Payload::Value(value),
        );
        if let (Some(_), Some(flash)) = (moved, self.flash()) {
            flash.counters.recache.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Bytes the stub of `raw` takes in a segment.
    fn stub_footprint(&self, raw: &RawItem) -> usize {
        // The unique's value does not change the size; only whether one is kept does.
        let spec = crate::layout::ItemSpec::moved(raw, LOCATOR_LEN, || 0, crate::layout::FLASH);
        self.refs.aligned(spec.size())
    }

    /// Reads the value of the stub `raw` (at `loc`) for `key`, waiting for the disk or
    /// not as `disk` says (see [`Flash::read`]). The caller does not hold the shard lock.
    pub(crate) fn load_stub(
        &self,
        loc: Ref,
        locator: Locator,
        key: &[u8],
        disk: Disk,
    ) -> Result<Loaded, FlashMiss> {
        let flash = self.flash().ok_or(FlashMiss::Gone)?;
        let mut buf = Vec::new();
        let range = flash.read(locator, key, &mut buf, disk)?;
        Ok(Loaded {
            loc,
            locator,
            buf,
            range,
        })
    }

    /// After a failed read of `locator` for `key`: unlinks the stub if the index still
    /// holds it with that locator (the item is gone, as memcached's extstore misses make
    /// it), and returns true. False when the stub changed meanwhile (compaction moved its
    /// value, or the item was replaced): the caller looks again instead.
    pub(crate) fn drop_unreadable(&self, hash: u64, key: &[u8], locator: Locator) -> bool {
        let mut shard = self.shard(hash);
        match self.same_stub(&mut shard, hash, key, locator) {
            Some(loc) => {
                self.remove_loc(&mut shard, hash, loc);
                true
            }
            None => false,
        }
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

    /// memcached's `ext_item_age`: values of items unread for that long move to flash
    /// without waiting for memory pressure. Walks the index, a few shards per call (a
    /// rotating cursor), so that items still in a writer's open segment are found too
    /// (a segment a writer appends to is never walked); each item moved leaves a hole
    /// that compaction turns into free memory. A no-op unless `item_age` is set.
    pub(crate) fn flush_aged(&self) {
        let Some(flash) = self.flash() else {
            return;
        };
        let age = flash.item_age();
        if age == u32::MAX {
            return;
        }
        let now = self.clock.now();
        let mut ev = self.evictor.lock();
        let start = self.age_cursor.load(Ordering::Relaxed);
        let mut flushed = 0u64;
        // At most a page's worth per call: compaction, which runs first on every call,
        // then frees fragmented pages as this fills free ones, instead of this flush
        // (which nothing presses for) evicting live pages once the free ones are gone.
        let mut budget = flash.config().page_size;
        let mut old = Vec::new();
        let mut visited = 0;
        let mut walked = 0;
        while walked < self.shards.len() && visited < AGE_ITEMS_PER_CALL && budget > 0 {
            let mut shard = self.shards[(start + walked) % self.shards.len()].0.lock();
            walked += 1;
            visited += shard.len();
            old.clear();
            shard.for_each(self, |r| {
                let raw = self.item_at(r);
                if self.flushable(&raw) && now.saturating_sub(raw.atime()) >= age {
                    old.push(r);
                }
            });
            for &loc in &old {
                let raw = self.item_at(loc);
                if crate::clock::is_expired(raw.exptime(), now) {
                    continue;
                }
                let hash = self.hash(raw.key());
                let len = raw.value().len() as u64;
                let moved = self.flush_to_flash(
                    &mut ev,
                    &mut shard,
                    hash,
                    (loc, raw),
                    raw.freq(),
                    usize::MAX,
                );
                if moved.is_none() {
                    break;
                }
                flushed += 1;
                let seg = self.refs.seg(loc);
                if self.segs.meta(seg).state.load(Ordering::Acquire) == crate::segments::SEALED {
                    ev.note_sparse(seg, self.is_sparse(seg, true));
                }
                budget = budget.saturating_sub(len);
                if budget == 0 {
                    // The next call goes on in this shard.
                    walked -= 1;
                    break;
                }
            }
        }
        self.age_cursor.store(start + walked, Ordering::Relaxed);
        if flushed > 0 {
            flash
                .counters
                .flushed_by_age
                .fetch_add(flushed, Ordering::Relaxed);
        }
    }

    /// Compaction, one page per call from maintenance: when free pages run short, the
    /// live values of the page [`Flash::compaction_candidate`] picks move to an open
    /// page (their stubs repointed in place), those nobody read to the `coldcompact`
    /// file's pages when one is given (else dropped when the pass drops unread values),
    /// the others of an old page to the `old` file's; so the page frees. Returns whether
    /// a page was compacted.
    pub(crate) fn compact_flash(&self) -> bool {
        let Some(flash) = self.flash() else {
            return false;
        };
        let observe = self.flash_observer.get();
        if let Some(observe) = observe {
            if flash.pages_used() > 0 {
                let ratio = flash.max_frag();
                observe(&FlashEvent::FragInfo {
                    ratio,
                    bytes: (flash.config().page_size as f64 * ratio) as u64,
                });
            }
        }
        let Some(pass) = flash.compaction_candidate() else {
            return false;
        };
        let (page, version) = (pass.page, pass.version);
        let has_cold = flash.has_bucket(crate::flash::bucket::COLD_COMPACT);
        if let Some(observe) = observe {
            observe(&FlashEvent::CompactStart { page, version });
        }
        let (mut rescues, mut skipped, mut offset_end) = (0u64, 0u64, 0u64);
        let whole = flash.for_each_record(page, version, |offset, key, value| {
            offset_end =
                u64::from(offset) + crate::flash::record_len(key.len(), value.len()) as u64;
            let hash = self.hash(key);
            let mut shard = self.shard(hash);
            let Some(loc) = shard.find(self, hash, key) else {
                return true;
            };
            let raw = self.item_at(loc);
            let Some(locator) = Self::locator(&raw).filter(|_| raw.is_flash()) else {
                return true;
            };
            if locator.page != page
                || locator.version != version
                || locator.offset != offset
                || locator.len as usize != value.len()
            {
                return true;
            }
            let counters = &flash.counters;
            // Never read, and not used since its value went to flash: what memcached
            // finds in its COLD LRU, and moves to `coldcompact` pages or leaves out of
            // the rewrite (counted as skipped).
            let cold = raw.bits() & (FETCHED | crate::layout::ACTIVE) == 0;
            let to = match (cold, has_cold, pass.drop_unread, pass.to_old) {
                (true, true, _, _) => Rescue::Cold,
                (true, false, true, _) => {
                    counters.compact_skipped.fetch_add(1, Ordering::Relaxed);
                    skipped += 1;
                    self.remove_loc(&mut shard, hash, loc);
                    return true;
                }
                (_, _, _, true) => Rescue::Old,
                _ => Rescue::Compact,
            };
            let ttl = match raw.exptime() {
                0 => None,
                e => Some(e.saturating_sub(self.clock.now())),
            };
            let Some(moved) = flash.rescue(key, value, ttl, to) else {
                // Every write buffer is busy: the page is left for the next call.
                return false;
            };
            rescues += 1;
            // The new record is counted live by `write`; the old one is let go.
            raw.set_locator(&moved.to_bytes());
            flash.release(locator, key.len());
            counters.compact_rescues.fetch_add(1, Ordering::Relaxed);
            match to {
                Rescue::Cold => counters.compact_resc_cold.fetch_add(1, Ordering::Relaxed),
                Rescue::Old => counters.compact_resc_old.fetch_add(1, Ordering::Relaxed),
                Rescue::Compact => 0,
            };
            true
        });
        if whole {
            // Every record was visited and each one a stub pointed at has moved or
            // gone: what the page still counts has no stub behind it (an item that
            // expired while the server was down, say), and the page is free.
            flash.forget_page(page, version);
        }
        if let Some(observe) = observe {
            observe(&FlashEvent::CompactEnd {
                page,
                offset: offset_end,
                rescues,
                skipped,
            });
        }
        true
    }
}
