//! The read-modify-write handle of [`Store::update`](crate::Store::update).

use crate::error::StoreError;
use crate::index::{Ref as Loc, Shard};
use crate::inner::Inner;
use crate::item::Item;
use crate::layout::{self, with_freq, ItemSpec, CAS_SEEN, FETCHED, FLASH, STALE, WIN_SENT};
use crate::writer::Writer;

/// Options for storing a new value.
#[derive(Debug, Clone, Copy, Default)]
pub struct StoreOptions {
    /// Client flags.
    pub flags: u32,
    /// Rel expiry time (from [`Clock::expiry`](crate::Clock::expiry)), 0 for never.
    pub exptime: u32,
    /// An explicit CAS unique (meta `E`); `None` derives a fresh one.
    pub cas: Option<u64>,
    /// Store the item already marked stale (meta invalidation keeps serving it).
    pub stale: bool,
    /// Store the item with the recache token already handed out.
    pub win_sent: bool,
    /// The caller will not hand the new item's CAS unique to a client (text-protocol
    /// storage replies do not carry it), so the store may give the item another when it
    /// moves it during eviction, saving the 8 bytes of keeping it. Left false, the unique
    /// is treated as seen and kept for the item's life.
    pub private_cas: bool,
}

/// An error from an [`Entry`] method; propagate it out of the `update` closure with `?`.
#[derive(Debug)]
pub struct EntryError(pub(crate) EntryErrorKind);

#[derive(Debug)]
pub(crate) enum EntryErrorKind {
    /// The writer's segment lacks room for this many bytes (an item of this memcached
    /// slab class, counted there if no room can be made): `update` makes room and re-runs
    /// the closure.
    NeedSpace(usize, usize),
    /// The live item is a stub and the closure needs its value: `update` reads it from
    /// flash without the lock and re-runs the closure with it.
    NeedValue(Loc, crate::flash::Locator),
    Store(StoreError),
}

impl From<StoreError> for EntryError {
    fn from(e: StoreError) -> Self {
        EntryError(EntryErrorKind::Store(e))
    }
}

/// One key, locked, inside [`Store::update`](crate::Store::update).
pub struct Entry<'a> {
    inner: &'a Inner,
    shard: &'a mut Shard,
    writer: &'a mut Writer,
    hash: u64,
    key: &'a [u8],
    now: u32,
    current: Option<Loc>,
    /// The value of the stub at `current`, read from flash by `update`.
    loaded: Option<&'a [u8]>,
}

impl<'a> Entry<'a> {
    // The key's place in the index and its item, unpacked: one call site, in `update`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        inner: &'a Inner,
        shard: &'a mut Shard,
        writer: &'a mut Writer,
        hash: u64,
        key: &'a [u8],
        now: u32,
        current: Option<Loc>,
        loaded: Option<&'a [u8]>,
    ) -> Self {
        Entry {
            inner,
            shard,
            writer,
            hash,
            key,
            now,
            current,
            loaded,
        }
    }

    /// Makes the live item's value readable through [`item`](Self::item) when it is on
    /// flash (a no-op otherwise). Call it, and propagate its error with `?`, before
    /// reading the value: the store then reads the value from flash without the lock and
    /// runs the closure again. Replacing, deleting or touching an item never needs it.
    pub fn load_value(&self) -> Result<(), EntryError> {
        match self.current {
            Some(loc) if self.loaded.is_none() => {
                let raw = self.inner.item_at(loc);
                match Inner::locator(&raw).filter(|_| raw.is_flash()) {
                    Some(locator) => Err(EntryError(EntryErrorKind::NeedValue(loc, locator))),
                    None => Ok(()),
                }
            }
            _ => Ok(()),
        }
    }

    /// The key.
    pub fn key(&self) -> &[u8] {
        self.key
    }

    /// Current rel time.
    pub fn now(&self) -> u32 {
        self.now
    }

    /// Converts a protocol exptime to rel time (see [`Clock::expiry`](crate::Clock::expiry)).
    pub fn expiry(&self, exptime: i64) -> u32 {
        self.inner.clock.expiry(exptime)
    }

    /// Tells the store that a read (`gat`, `touch`, `mg`) found no item here: counted in
    /// `get_flushed` if the last `flush_all` removed this key, as [`Store::get`]'s misses
    /// are. Call at most once per request, and only when [`item`](Self::item) is `None`.
    ///
    /// [`Store::get`]: crate::Store::get
    pub fn read_missed(&mut self) {
        if self.current.is_none() && self.shard.flushed.take(self.hash) {
            self.shard.counters.get_flushed += 1;
        }
    }

    /// The live item, if any.
    /// Its value is empty for an item on flash until [`load_value`](Self::load_value)
    /// has been called ([`Item::value_len`] is right either way).
    pub fn item(&self) -> Option<Item<'_>> {
        self.current.map(|loc| {
            let raw = self.inner.item_at(loc);
            let item = self.inner.view(loc, raw, self.now);
            match self.loaded {
                Some(v) if raw.is_flash() => item.with_flash_value(v),
                _ => item,
            }
        })
    }

    /// Stores a value (given in parts, concatenated) for the key, replacing any item.
    /// Returns the new CAS unique.
    pub fn store(&mut self, value: &[&[u8]], opts: StoreOptions) -> Result<u64, EntryError> {
        let value_len = value.iter().map(|p| p.len()).sum();
        self.write(value, value_len, opts, 0)
    }

    /// Appends (or prepends) `data` to the live item's value, keeping its flags and expiry.
    /// Returns the new CAS unique, or `None` if there is no item.
    pub fn append(&mut self, data: &[u8], prepend: bool) -> Result<Option<u64>, EntryError> {
        let Some(loc) = self.current else {
            return Ok(None);
        };
        self.load_value()?;
        let old = self.inner.item_at(loc);
        let opts = StoreOptions {
            flags: old.flags(),
            exptime: old.exptime(),
            ..StoreOptions::default()
        };
        let old_value = match self.loaded {
            Some(v) if old.is_flash() => v,
            _ => old.value(),
        };
        let parts: [&[u8]; 2] = if prepend {
            [data, old_value]
        } else {
            [old_value, data]
        };
        let state = old.bits() & FETCHED;
        self.write(&parts, old_value.len() + data.len(), opts, state)
            .map(Some)
    }

    /// Changes the live item's expiry (rel time), keeping its CAS unique. Returns false if
    /// there is no item.
    pub fn set_exptime(&mut self, exptime: u32) -> Result<bool, EntryError> {
        let Some(loc) = self.current else {
            return Ok(false);
        };
        let old = self.inner.item_at(loc);
        if old.has_exptime_field() || exptime == 0 {
            if old.has_exptime_field() {
                old.set_exptime(exptime);
                self.inner.expires_in(self.inner.refs.seg(loc), exptime);
            }
            return Ok(true);
        }
        // No room for an expiry in the old header: write a copy that has one, carrying the
        // CAS unique over so that touch does not change it (as in memcached).
        let opts = StoreOptions {
            flags: old.flags(),
            exptime,
            cas: Some(self.inner.cas_of(loc, &old)),
            ..StoreOptions::default()
        };
        // A stub is copied as a stub: its value stays where it is on flash.
        let state = old.bits() & (FETCHED | STALE | WIN_SENT | FLASH);
        let value = old.value();
        self.write(&[value], value.len(), opts, state)?;
        Ok(true)
    }

    /// Rewrites the live item with new options, keeping its value (or dropping it when
    /// `keep_value` is false), without copying the value out first: meta delete's `I`
    /// and `x` modes. Returns the new CAS unique, or `None` if there is no item.
    pub fn rewrite(
        &mut self,
        keep_value: bool,
        opts: StoreOptions,
    ) -> Result<Option<u64>, EntryError> {
        let Some(loc) = self.current else {
            return Ok(None);
        };
        // The old item stays readable in its segment while the new one is written, as in
        // `set_exptime`.
        let old = self.inner.item_at(loc);
        let value: &[u8] = if keep_value { old.value() } else { &[] };
        // A stub whose value is kept is rewritten as a stub of the same flash record.
        let state = if keep_value { old.bits() & FLASH } else { 0 };
        self.write(&[value], value.len(), opts, state).map(Some)
    }

    /// Removes the live item. Returns false if there was none.
    pub fn remove(&mut self) -> bool {
        match self.current.take() {
            Some(loc) => self.inner.remove_loc(self.shard, self.hash, loc),
            None => false,
        }
    }

    fn write(
        &mut self,
        value: &[&[u8]],
        value_len: usize,
        opts: StoreOptions,
        mut state: u32,
    ) -> Result<u64, EntryError> {
        if self.key.is_empty() || self.key.len() > layout::MAX_KEY {
            return Err(StoreError::TooLarge.into());
        }
        if opts.stale {
            state |= STALE;
        }
        if opts.win_sent {
            state |= WIN_SENT;
        }
        if !opts.private_cas {
            state |= CAS_SEEN;
        }
        let mut spec = ItemSpec {
            key_len: self.key.len(),
            value_len,
            flags: opts.flags,
            exptime: opts.exptime,
            cas: opts.cas,
            state,
        };
        let size = self.inner.refs.aligned(spec.size());
        if size > self.inner.segs.seg_size() {
            return Err(StoreError::TooLarge.into());
        }
        let Some((seg, off)) = self.writer.alloc(size) else {
            let total =
                self.inner
                    .slab_classes
                    .item_total(spec.key_len, value_len, spec.flags != 0);
            let class = self.inner.class_of_total(total);
            return Err(EntryError(EntryErrorKind::NeedSpace(size, class)));
        };
        // How often the key has been read carries over to its new value; a new key that
        // was evicted unread from probation a moment ago starts as read once, so that
        // probation keeps it this time (see `ghost`). Decided only once room is found,
        // since `update` re-runs the closure when it is not.
        if self.current.is_none() {
            // Written again: a later miss is no longer a read of what the flush removed.
            self.shard.flushed.take(self.hash);
        }
        let freq = match self.current {
            Some(loc) => self.inner.item_at(loc).freq(),
            None if self.inner.ghost.take(self.hash) => {
                self.shard.counters.ghost_hits += 1;
                u32::from(self.inner.ghost_counts(size))
            }
            None => 0,
        };
        spec.state = with_freq(spec.state, freq);
        // SAFETY: the writer owns [off, off + size) of its active segment exclusively; the
        // item is published below under the shard lock.
        unsafe {
            let dst = self.inner.segs.base(seg).add(off as usize);
            layout::write(dst, &spec, self.key, value, self.now);
        }
        self.inner.expires_in_active(seg, opts.exptime);
        let loc = self.inner.refs.make(seg, off);
        self.inner.link_accounting(self.shard, loc, size);
        match self.current {
            Some(old) => {
                self.shard.replace(self.inner, self.hash, old, loc);
                self.inner.unlink_accounting(self.shard, old);
            }
            None => self.shard.insert(self.inner, self.hash, loc),
        }
        self.shard.counters.total_items += 1;
        self.current = Some(loc);
        let raw = self.inner.item_at(loc);
        Ok(self.inner.cas_of(loc, &raw))
    }
}
