//! The byte layout of one item inside a segment.
//!
//! Items are packed back to back, each starting on a 4-byte boundary so that the fields
//! other threads may change in place (the flag bits, the access time, the chain link and
//! the expiry) can be read and written as `AtomicU32`. Optional fields cost nothing when
//! unused: an item with no client flags, no expiry, a value under 4 KiB and a derived CAS
//! has a 12-byte header (memcached's is 48-56 bytes plus slab-class rounding).
//!
//! The hash index is chained through the items themselves, as memcached's is: `link` is
//! the reference of the next item in the same bucket. That keeps the index outside the
//! items down to one 4-byte bucket head per item at most.
//!
//! ```text
//! +0  word0   u32  bits:12 | key_len:8 | value_len_low:12
//! +4  atime   u32  last access, rel seconds
//! +8  link    u32  next item in the hash chain (written only under the shard lock)
//! [+  len_hi  u32] present if BIG_LEN: value_len >> 12
//! [+  flags   u32] present if HAS_FLAGS
//! [+  exptime u32] present if HAS_EXPTIME
//! [+  cas     u64] present if HAS_CAS (two little-endian u32 words)
//!  +  key, value, zero padding to a multiple of 4
//! ```
//!
//! The twelve bits hold the shape (which optional fields exist, fixed at write time) and
//! the state readers change in place: memcached's fetched, stale and win flags, and what
//! eviction reads (see `evict`): a 2-bit count of reads since the item was written or
//! last moved, a bit for "read since it arrived in this segment", and a bit recording that
//! a client has been given its CAS unique, without which a move may give it a new one.

use std::sync::atomic::{AtomicU32, Ordering};

/// Client flags are stored (they are not 0).
pub const HAS_FLAGS: u32 = 1;
/// An expiry is stored (the item does not live forever).
pub const HAS_EXPTIME: u32 = 1 << 1;
/// An explicit CAS unique is stored instead of the one derived from the item's location.
pub const HAS_CAS: u32 = 1 << 2;
/// The value is 4 KiB or longer; its high bits are in an extra word.
pub const BIG_LEN: u32 = 1 << 3;
/// The item has been read since it was stored.
pub const FETCHED: u32 = 1 << 4;
/// The item was invalidated by a meta command and is served as stale.
pub const STALE: u32 = 1 << 5;
/// A meta client has been handed the win token for recaching this item.
pub const WIN_SENT: u32 = 1 << 6;
/// The low bit of the read count (two bits: 0 to [`FREQ_MAX`]).
const FREQ_SHIFT: u32 = 7;
/// The read-count field.
const FREQ_MASK: u32 = 0b11 << FREQ_SHIFT;
/// Highest read count: reads beyond it are not counted.
pub const FREQ_MAX: u32 = 3;
/// The item has been read since it arrived in its segment (set with the first read, so
/// that its segment's count of such items is raised exactly once per item).
pub const ACTIVE: u32 = 1 << 9;
/// The item's CAS unique has been handed to a client, so it must survive a move.
pub const CAS_SEEN: u32 = 1 << 10;
/// The item is a stub: its value is on flash, and the bytes stored in its place are a
/// [`Locator`](crate::flash::Locator) (see `flash`). Fixed at write time.
pub const FLASH: u32 = 1 << 11;

/// Bits of flags in word0.
const BITS_MASK: u32 = 0xfff;
/// Where the key length starts in word0.
const KEY_SHIFT: u32 = 12;
/// Where the low value-length bits start in word0.
const VLEN_SHIFT: u32 = 20;
/// Values up to this length fit in word0.
const VLEN_LOW_MAX: usize = 0xfff;

/// Bits that describe which optional fields exist; fixed once the item is written.
const SHAPE: u32 = HAS_FLAGS | HAS_EXPTIME | HAS_CAS | BIG_LEN | FLASH;

/// Longest key the layout can hold.
pub const MAX_KEY: usize = 255;

/// State bits with the read count set to `freq` (at most [`FREQ_MAX`]).
pub fn with_freq(state: u32, freq: u32) -> u32 {
    (state & !FREQ_MASK) | (freq.min(FREQ_MAX) << FREQ_SHIFT)
}

/// The read count in state bits.
pub fn freq_of(bits: u32) -> u32 {
    (bits & FREQ_MASK) >> FREQ_SHIFT
}

/// Everything needed to write an item.
#[derive(Debug, Clone, Copy)]
pub struct ItemSpec {
    /// Key length in bytes (1..=255).
    pub key_len: usize,
    /// Value length in bytes.
    pub value_len: usize,
    /// Client flags.
    pub flags: u32,
    /// Rel expiry, 0 for never.
    pub exptime: u32,
    /// Explicit CAS unique to store, if any.
    pub cas: Option<u64>,
    /// Initial state bits (FETCHED, STALE, WIN_SENT, CAS_SEEN, a read count), and FLASH
    /// for a stub.
    pub state: u32,
}

impl ItemSpec {
    /// The spec of `raw` moved to a new place (by eviction, compaction or a trip to or
    /// from flash) with a value of `value_len` bytes and `state` bits: key, flags and
    /// expiry are kept. A CAS unique a client may hold (or one set explicitly) must not
    /// change, so it is kept (`cas()` gives it); one no client has seen is derived afresh
    /// from the new place, saving 8 bytes.
    pub(crate) fn moved(
        raw: &RawItem,
        value_len: usize,
        cas: impl FnOnce() -> u64,
        state: u32,
    ) -> ItemSpec {
        ItemSpec {
            key_len: raw.key_len(),
            value_len,
            flags: raw.flags(),
            exptime: raw.exptime(),
            cas: (raw.bits() & (HAS_CAS | CAS_SEEN) != 0).then(cas),
            state,
        }
    }

    /// Shape bits for this spec.
    fn shape(&self) -> u32 {
        let mut bits = 0;
        if self.flags != 0 {
            bits |= HAS_FLAGS;
        }
        if self.exptime != 0 {
            bits |= HAS_EXPTIME;
        }
        if self.cas.is_some() {
            bits |= HAS_CAS;
        }
        if self.value_len > VLEN_LOW_MAX {
            bits |= BIG_LEN;
        }
        bits | (self.state & FLASH)
    }

    /// Total bytes the item occupies in a segment, padding included.
    pub fn size(&self) -> usize {
        total_size(self.shape(), self.key_len, self.value_len)
    }
}

/// Bytes of the fixed part of the header.
const FIXED_HEADER: usize = 12;

/// Marks the end of a hash chain.
pub const NO_LINK: u32 = u32::MAX;

fn header_len(bits: u32) -> usize {
    FIXED_HEADER
        + if bits & BIG_LEN != 0 { 4 } else { 0 }
        + if bits & HAS_FLAGS != 0 { 4 } else { 0 }
        + if bits & HAS_EXPTIME != 0 { 4 } else { 0 }
        + if bits & HAS_CAS != 0 { 8 } else { 0 }
}

fn total_size(bits: u32, key_len: usize, value_len: usize) -> usize {
    (header_len(bits) + key_len + value_len + 3) & !3
}

/// A view of one item in segment memory.
///
/// # Safety contract
/// A `RawItem` is only created for an address where a complete item was written and
/// published (through the index, under its shard lock, or by being in a sealed segment),
/// and the memory stays allocated and is not rewritten while the view is used: the store
/// guarantees this by removing every index entry of a segment, each under its shard lock,
/// before the segment is reused, and by never reusing a segment while it is scanned.
#[derive(Clone, Copy)]
pub struct RawItem {
    ptr: *mut u8,
}

impl RawItem {
    /// Wraps an item address. See the type's safety contract.
    ///
    /// # Safety
    /// `ptr` must point at a published item that outlives every use of the view.
    pub unsafe fn at(ptr: *mut u8) -> Self {
        RawItem { ptr }
    }

    /// Starts loading the cache lines after the item's first, where a short value lies,
    /// without waiting for them.
    ///
    /// Why: a lookup's first touch of an item (its header and key) is a cache miss, and
    /// a hit then copies the value, which a second and third miss would stall on. Issued
    /// as the header is first touched, those loads run alongside its miss instead of after
    /// it. A hint only: a prefetch never faults, whatever the address.
    #[inline]
    pub fn prefetch_body(&self) {
        #[cfg(target_arch = "x86_64")]
        for line in 1..=3 {
            // SAFETY: a prefetch reads nothing architecturally and cannot fault; the
            // address is formed with wrapping arithmetic, so it need not be in bounds.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    self.ptr.wrapping_add(64 * line).cast_const().cast(),
                )
            };
        }
    }

    #[inline]
    fn word(&self, byte_offset: usize) -> &AtomicU32 {
        // SAFETY: items are 4-aligned and segments 8-aligned; the offset is inside the
        // item's header per the layout (checked by the callers' bit tests).
        unsafe { &*(self.ptr.add(byte_offset) as *const AtomicU32) }
    }

    #[inline]
    fn word0(&self) -> u32 {
        self.word(0).load(Ordering::Relaxed)
    }

    /// All bit flags (shape and state).
    #[inline]
    pub fn bits(&self) -> u32 {
        self.word0() & BITS_MASK
    }

    /// Key length in bytes.
    #[inline]
    pub fn key_len(&self) -> usize {
        ((self.word0() >> KEY_SHIFT) & 0xff) as usize
    }

    /// Whether the item is a stub of a flash-resident value.
    #[inline]
    pub fn is_flash(&self) -> bool {
        self.word0() & FLASH != 0
    }

    /// Length in bytes of what is stored in the value's place: the value, or a stub's
    /// locator.
    #[inline]
    pub fn value_len(&self) -> usize {
        let w = self.word0();
        let low = (w >> VLEN_SHIFT) as usize;
        if w & BIG_LEN != 0 {
            low | ((self.word(FIXED_HEADER).load(Ordering::Relaxed) as usize) << 12)
        } else {
            low
        }
    }

    /// How many times the item was read since it was written or last moved (0 to
    /// [`FREQ_MAX`]).
    #[inline]
    pub fn freq(&self) -> u32 {
        freq_of(self.word0())
    }

    /// Records a read: sets FETCHED and ACTIVE and counts it (up to [`FREQ_MAX`]), in one
    /// atomic update, skipped when nothing would change (a hot item read again costs a
    /// load, not a write to a shared cache line). Returns true if this was the item's
    /// first read since it arrived in its segment.
    #[inline]
    pub fn mark_read(&self) -> bool {
        self.mark_accessed(FETCHED)
    }

    /// [`mark_read`](Self::mark_read) without memcached's FETCHED flag (`fetched` 0): an
    /// access that is not a read, such as the LRU bump of an `add` that finds the key.
    #[inline]
    pub fn mark_accessed(&self, fetched: u32) -> bool {
        let word = self.word(0);
        let mut w = word.load(Ordering::Relaxed);
        loop {
            let freq = freq_of(w);
            let mut next = w | (fetched & FETCHED) | ACTIVE;
            if freq < FREQ_MAX {
                next = (next & !FREQ_MASK) | ((freq + 1) << FREQ_SHIFT);
            }
            if next == w {
                return false;
            }
            match word.compare_exchange_weak(w, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return w & ACTIVE == 0,
                Err(now) => w = now,
            }
        }
    }

    fn field_offset(&self, bits: u32, field: u32) -> usize {
        let mut off = FIXED_HEADER;
        for f in [BIG_LEN, HAS_FLAGS, HAS_EXPTIME] {
            if f == field {
                return off;
            }
            if bits & f != 0 {
                off += 4;
            }
        }
        off // HAS_CAS
    }

    /// Client flags (0 when none were stored).
    #[inline]
    pub fn flags(&self) -> u32 {
        let bits = self.bits();
        if bits & HAS_FLAGS == 0 {
            return 0;
        }
        self.word(self.field_offset(bits, HAS_FLAGS))
            .load(Ordering::Relaxed)
    }

    /// Rel expiry (0 = never).
    #[inline]
    pub fn exptime(&self) -> u32 {
        let bits = self.bits();
        if bits & HAS_EXPTIME == 0 {
            return 0;
        }
        self.word(self.field_offset(bits, HAS_EXPTIME))
            .load(Ordering::Relaxed)
    }

    /// Whether the expiry can be changed in place (the field exists).
    pub fn has_exptime_field(&self) -> bool {
        self.bits() & HAS_EXPTIME != 0
    }

    /// Changes the expiry in place. The caller has checked [`has_exptime_field`] and that
    /// `exptime` is not 0 (0 would read as "never" only if the field were absent).
    pub fn set_exptime(&self, exptime: u32) {
        let bits = self.bits();
        debug_assert!(bits & HAS_EXPTIME != 0);
        self.word(self.field_offset(bits, HAS_EXPTIME))
            .store(exptime, Ordering::Relaxed);
    }

    /// The explicitly stored CAS unique, if any.
    pub fn explicit_cas(&self) -> Option<u64> {
        let bits = self.bits();
        if bits & HAS_CAS == 0 {
            return None;
        }
        let off = self.field_offset(bits, HAS_CAS);
        let lo = self.word(off).load(Ordering::Relaxed) as u64;
        let hi = self.word(off + 4).load(Ordering::Relaxed) as u64;
        Some(lo | (hi << 32))
    }

    /// The next item in this item's hash chain, or [`NO_LINK`].
    #[inline]
    pub fn link(&self) -> u32 {
        self.word(8).load(Ordering::Relaxed)
    }

    /// Points this item's hash chain at `next`. Only under the item's shard lock.
    #[inline]
    pub fn set_link(&self, next: u32) {
        self.word(8).store(next, Ordering::Relaxed);
    }

    /// Last access time (rel seconds).
    pub fn atime(&self) -> u32 {
        self.word(4).load(Ordering::Relaxed)
    }

    /// Records an access at rel time `now`.
    pub fn set_atime(&self, now: u32) {
        self.word(4).store(now, Ordering::Relaxed);
    }

    /// Sets state bits (FETCHED, STALE, WIN_SENT, CAS_SEEN); returns the bits before.
    pub fn set_state(&self, state: u32) -> u32 {
        debug_assert_eq!(state & SHAPE, 0);
        self.word(0).fetch_or(state, Ordering::Relaxed)
    }

    fn data_offset(&self) -> usize {
        header_len(self.bits())
    }

    /// The key bytes.
    #[inline]
    pub fn key(&self) -> &[u8] {
        // SAFETY: per the type's contract the item is complete and immutable in this range.
        unsafe { std::slice::from_raw_parts(self.ptr.add(self.data_offset()), self.key_len()) }
    }

    /// The bytes stored in the value's place: the value, or a stub's locator.
    #[inline]
    pub fn value(&self) -> &[u8] {
        let start = self.data_offset() + self.key_len();
        // SAFETY: as for `key`.
        unsafe { std::slice::from_raw_parts(self.ptr.add(start), self.value_len()) }
    }

    /// Overwrites a stub's locator in place (compaction moved its value). Only under the
    /// item's shard lock, under which every reader of a stub's locator reads it.
    pub fn set_locator(&self, bytes: &[u8]) {
        debug_assert!(self.is_flash() && bytes.len() == self.value_len());
        let start = self.data_offset() + self.key_len();
        let len = bytes.len().min(self.value_len());
        // SAFETY: the stub's stored value is `value_len` bytes at `start`, inside the
        // item; the caller holds the shard lock, so no reader sees the bytes change.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.add(start), len) }
    }

    /// Bytes the item occupies in its segment.
    #[inline]
    pub fn size(&self) -> usize {
        total_size(self.bits(), self.key_len(), self.value_len())
    }
}

/// Writes an item at `dst` and returns its size.
///
/// # Safety
/// `dst` must be 4-aligned with `spec.size()` writable bytes that no other thread reads
/// until the item is published. `key.len()` must equal `spec.key_len` and the value parts
/// must add up to `spec.value_len`.
pub unsafe fn write(dst: *mut u8, spec: &ItemSpec, key: &[u8], value: &[&[u8]], now: u32) -> usize {
    let bits = spec.shape() | spec.state;
    let size = spec.size();
    let word0 = bits
        | ((spec.key_len as u32) << KEY_SHIFT)
        | (((spec.value_len & VLEN_LOW_MAX) as u32) << VLEN_SHIFT);
    let mut off = 0usize;
    let mut put = |v: u32| {
        // SAFETY: the caller gives `size` writable, 4-aligned bytes at `dst`; the header
        // words come first and `off` stays inside the header's length.
        unsafe { (dst.add(off) as *mut u32).write(v) };
        off += 4;
    };
    put(word0);
    put(now);
    put(NO_LINK);
    if bits & BIG_LEN != 0 {
        put((spec.value_len >> 12) as u32);
    }
    if bits & HAS_FLAGS != 0 {
        put(spec.flags);
    }
    if bits & HAS_EXPTIME != 0 {
        put(spec.exptime);
    }
    if let Some(cas) = spec.cas {
        put(cas as u32);
        put((cas >> 32) as u32);
    }
    // SAFETY: header + key + value parts + padding is exactly `size` (the caller's spec
    // matches `key` and `value`), all within the `size` bytes the caller provides; the
    // sources are caller slices, never segment memory being written.
    unsafe {
        std::ptr::copy_nonoverlapping(key.as_ptr(), dst.add(off), key.len());
        off += key.len();
        for part in value {
            std::ptr::copy_nonoverlapping(part.as_ptr(), dst.add(off), part.len());
            off += part.len();
        }
        while off < size {
            dst.add(off).write(0);
            off += 1;
        }
    }
    size
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(spec: ItemSpec, key: &[u8], value: &[u8]) {
        let mut buf = vec![0u32; spec.size() / 4 + 1];
        let ptr = buf.as_mut_ptr() as *mut u8;
        // SAFETY: `buf` holds more than `spec.size()` 4-aligned bytes.
        let n = unsafe { write(ptr, &spec, key, &[value], 7) };
        assert_eq!(n, spec.size());
        assert_eq!(n % 4, 0);
        // SAFETY: a complete item was just written there and `buf` outlives `item`.
        let item = unsafe { RawItem::at(ptr) };
        assert_eq!(item.key(), key);
        assert_eq!(item.value(), value);
        assert_eq!(item.flags(), spec.flags);
        assert_eq!(item.exptime(), spec.exptime);
        assert_eq!(item.explicit_cas(), spec.cas);
        assert_eq!(item.atime(), 7);
        assert_eq!(item.link(), NO_LINK);
        item.set_link(12345);
        assert_eq!(item.link(), 12345);
        assert_eq!(item.key(), key, "link is outside the key");
        assert_eq!(item.size(), n);
    }

    #[test]
    fn minimal_item_has_twelve_byte_header() {
        let spec = ItemSpec {
            key_len: 12,
            value_len: 100,
            flags: 0,
            exptime: 0,
            cas: None,
            state: 0,
        };
        assert_eq!(spec.size(), 124);
        roundtrip(spec, b"key:00000001", &[7u8; 100]);
    }

    #[test]
    fn every_optional_field_roundtrips() {
        let value = vec![3u8; 70_000];
        let spec = ItemSpec {
            key_len: 3,
            value_len: value.len(),
            flags: 0xdead_beef,
            exptime: 99,
            cas: Some(u64::MAX - 5),
            state: STALE,
        };
        roundtrip(spec, b"abc", &value);
    }

    #[test]
    fn reads_are_counted_up_to_the_maximum_and_activate_once() {
        let spec = ItemSpec {
            key_len: 1,
            value_len: 5000,
            flags: 0,
            exptime: 0,
            cas: None,
            state: with_freq(0, 0),
        };
        let mut buf = vec![0u32; spec.size() / 4 + 1];
        let ptr = buf.as_mut_ptr() as *mut u8;
        // SAFETY: `buf` holds the item's bytes, 4-aligned, and outlives the view.
        unsafe { write(ptr, &spec, b"k", &[&[9u8; 5000]], 1) };
        // SAFETY: a complete item was just written there.
        let item = unsafe { RawItem::at(ptr) };
        assert_eq!(item.value_len(), 5000, "long values keep their length");
        assert_eq!(item.freq(), 0);
        assert!(item.mark_read(), "first read activates");
        assert!(!item.mark_read());
        assert!(!item.mark_read());
        assert!(!item.mark_read());
        assert_eq!(item.freq(), FREQ_MAX);
        assert_eq!(item.bits() & (FETCHED | ACTIVE), FETCHED | ACTIVE);
        assert_eq!(item.value(), &[9u8; 5000][..]);
        assert_eq!(freq_of(with_freq(STALE, 9)), FREQ_MAX);
        assert_eq!(with_freq(STALE, 2) & STALE, STALE);
    }

    #[test]
    fn state_bits_do_not_disturb_shape() {
        let spec = ItemSpec {
            key_len: 1,
            value_len: 1,
            flags: 5,
            exptime: 9,
            cas: None,
            state: 0,
        };
        let mut buf = [0u32; 8];
        let ptr = buf.as_mut_ptr() as *mut u8;
        // SAFETY: 32 4-aligned bytes hold this 20-byte item; it is complete before it is
        // viewed, and `buf` outlives the view.
        unsafe { write(ptr, &spec, b"k", &[b"v"], 1) };
        // SAFETY: see above.
        let item = unsafe { RawItem::at(ptr) };
        assert_eq!(item.set_state(FETCHED | WIN_SENT) & FETCHED, 0);
        assert_eq!(item.flags(), 5);
        item.set_exptime(42);
        assert_eq!(item.exptime(), 42);
        assert_eq!(item.bits() & (FETCHED | WIN_SENT), FETCHED | WIN_SENT);
        assert_eq!(item.value(), b"v");
    }
}
