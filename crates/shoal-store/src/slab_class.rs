//! memcached's slab classes, as a way to describe items, not to store them.
//!
//! Shoal stores items of every size in the same segments; memcached allocates each item a
//! chunk of the smallest slab class it fits. Operators and tools (`stats slabs`, `stats
//! items`, memcached-tool, memcached's own tests) read memcached's per-class figures, so
//! the store counts every item in the class memcached 1.6.45 would give it: the class of
//! its *memcached footprint* (`ITEM_ntotal`: the 48-byte item header, key and its
//! terminating byte, 4 bytes of client flags when they are not 0, the value with its
//! `\r\n`, and 8 bytes of CAS unique when CAS is on).
//!
//! The class table is memcached's `slabs_init`: class 1's chunk is the header plus `-n`
//! (`chunk_size`, 48 by default), each next class the previous one times `-f` (1.25),
//! rounded up to 8 bytes, until a chunk would reach `slab_chunk_max / factor`; the last
//! class is `slab_chunk_max` itself (half a page, 512 KiB, by default; a page with
//! `-o no_chunked_items` or `no_modern`). `-o slab_sizes` lists the classes instead.
//! Items larger than `slab_chunk_max` (memcached stores them chunked) belong to the last
//! class, as in memcached.

/// memcached's `sizeof(item)` on 64-bit builds: the header every item carries.
pub const ITEM_HEADER: usize = 48;
/// memcached's `MAX_NUMBER_OF_SLAB_CLASSES`: class ids are below this (0 is "none").
pub const MAX_CLASSES: usize = 64;
/// memcached's `CHUNK_ALIGN_BYTES`.
const CHUNK_ALIGN: u32 = 8;
/// memcached's default slab page size (`slab_page_size`).
pub const SLAB_PAGE_SIZE: u32 = 1 << 20;
/// Footprints up to this many bytes are classed by a table lookup
/// ([`SlabClasses::lookup_table`]), larger ones by a binary search.
pub(crate) const LOOKUP_MAX: usize = 16 << 10;

/// memcached's slab class table, and the class of an item by its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlabClasses {
    /// `sizes[i]` is the chunk size of class `i + 1`, for the first `len`; ascending, the
    /// last one `slab_chunk_max`.
    sizes: [u32; MAX_CLASSES - 1],
    /// Classes in use (memcached's `power_largest`).
    len: usize,
    /// memcached's `slab_page_size`, for `chunks_per_page`.
    page_size: u32,
    /// Whether items carry an 8-byte CAS unique in memcached (CAS on, no `-C`).
    cas: bool,
}

impl Default for SlabClasses {
    /// memcached 1.6.45's classes with its default options (`-n 48 -f 1.25`, 512 KiB
    /// `slab_chunk_max`, CAS on).
    fn default() -> Self {
        SlabClasses::new(48, 1.25, SLAB_PAGE_SIZE / 2, &[], true)
    }
}

impl SlabClasses {
    /// The classes memcached 1.6.45 builds from `-n` (`chunk_size`), `-f` (`factor`),
    /// `slab_chunk_max` and `-o slab_sizes` (`custom`, empty for none), with CAS on or off
    /// (`-C`). The options are taken as memcached validated them; out-of-range values
    /// (a factor of 1 or less, a zero chunk size) still give a usable, ascending table.
    pub fn new(
        chunk_size: u32,
        factor: f64,
        slab_chunk_max: u32,
        custom: &[u32],
        cas: bool,
    ) -> SlabClasses {
        let slab_chunk_max = slab_chunk_max.max(CHUNK_ALIGN);
        let mut sizes: Vec<u32> = Vec::with_capacity(MAX_CLASSES - 1);
        let mut size = (ITEM_HEADER as u32).saturating_add(chunk_size);
        // memcached fills classes 1 to 62 in this loop, leaving the last for
        // slab_chunk_max.
        while sizes.len() < MAX_CLASSES - 2 {
            if !custom.is_empty() {
                match custom.get(sizes.len()) {
                    Some(&s) if s != 0 => size = s,
                    _ => break,
                }
            } else if f64::from(size) >= f64::from(slab_chunk_max) / factor {
                break;
            }
            if !size.is_multiple_of(CHUNK_ALIGN) {
                size = size.saturating_add(CHUNK_ALIGN - size % CHUNK_ALIGN);
            }
            // Kept ascending whatever the options (memcached's validation ensures it).
            if sizes.last().is_some_and(|&last| size <= last) || size >= slab_chunk_max {
                break;
            }
            sizes.push(size);
            if custom.is_empty() {
                // C's `size *= factor` on an unsigned int: multiply, then truncate.
                size = (f64::from(size) * factor) as u32;
            }
        }
        sizes.push(slab_chunk_max);
        let mut table = [0; MAX_CLASSES - 1];
        table[..sizes.len()].copy_from_slice(&sizes);
        SlabClasses {
            sizes: table,
            len: sizes.len(),
            page_size: SLAB_PAGE_SIZE,
            cas,
        }
    }

    /// The largest class id (memcached's `power_largest`).
    pub fn largest(&self) -> usize {
        self.len
    }

    /// The chunk size of class `class` (1 to [`largest`](Self::largest)), 0 for any
    /// other id.
    pub fn chunk_size(&self, class: usize) -> u32 {
        class
            .checked_sub(1)
            .and_then(|i| self.sizes[..self.len].get(i))
            .copied()
            .unwrap_or(0)
    }

    /// Chunks of class `class` one memcached slab page holds (`perslab`), 0 for an id
    /// with no class.
    pub fn per_page(&self, class: usize) -> u32 {
        match self.chunk_size(class) {
            0 => 0,
            size => self.page_size / size,
        }
    }

    /// The memcached footprint (`ITEM_ntotal`) of an item with a key of `key_len` bytes
    /// and a value of `value_len` bytes (without its `\r\n`), with client flags other
    /// than 0 if `has_flags`.
    #[inline]
    pub fn item_total(&self, key_len: usize, value_len: usize, has_flags: bool) -> usize {
        ITEM_HEADER
            + key_len
            + 1
            + if has_flags { 4 } else { 0 }
            + value_len
            + 2
            + if self.cas { 8 } else { 0 }
    }

    /// The class of every footprint up to [`LOOKUP_MAX`], in 8-byte steps: entry `i`
    /// is the class of footprints from `8 * i - 7` to `8 * i` bytes, which share one,
    /// as every class boundary is a multiple of 8 (memcached aligns chunk sizes).
    pub(crate) fn lookup_table(&self) -> Box<[u8]> {
        (0..=LOOKUP_MAX / CHUNK_ALIGN as usize)
            .map(|i| self.class_of(i * CHUNK_ALIGN as usize) as u8)
            .collect()
    }

    /// The class memcached gives an item of footprint `total` (`slabs_clsid`): the
    /// smallest class whose chunk holds it, the largest class for anything bigger.
    #[inline]
    pub fn class_of(&self, total: usize) -> usize {
        let sizes = &self.sizes[..self.len];
        let i = sizes.partition_point(|&s| (s as usize) < total);
        (i + 1).min(self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `memcached -vv` (1.6.45, 64-bit) with default options: `slab class N: chunk size S`.
    const MEMCACHED_DEFAULT: [u32; 39] = [
        96, 120, 152, 192, 240, 304, 384, 480, 600, 752, 944, 1184, 1480, 1856, 2320, 2904, 3632,
        4544, 5680, 7104, 8880, 11104, 13880, 17352, 21696, 27120, 33904, 42384, 52984, 66232,
        82792, 103496, 129376, 161720, 202152, 252696, 315872, 394840, 524288,
    ];

    #[test]
    fn default_classes_are_memcacheds() {
        let c = SlabClasses::default();
        assert_eq!(c.largest(), 39);
        for (i, &size) in MEMCACHED_DEFAULT.iter().enumerate() {
            assert_eq!(c.chunk_size(i + 1), size, "class {}", i + 1);
        }
        // perslab as memcached prints it.
        assert_eq!(c.per_page(1), 10922);
        assert_eq!(c.per_page(31), 12);
        assert_eq!(c.per_page(39), 2);
        assert_eq!((c.chunk_size(0), c.chunk_size(40)), (0, 0));
    }

    #[test]
    fn no_modern_and_other_factors_match_memcached() {
        // `-o no_modern`: slab_chunk_max is a whole page; memcached -vv ends
        // `40: 616944, 41: 771184, 42: 1048576`.
        let c = SlabClasses::new(48, 1.25, SLAB_PAGE_SIZE, &[], true);
        assert_eq!(c.largest(), 42);
        assert_eq!(c.chunk_size(40), 616_944);
        assert_eq!(c.chunk_size(41), 771_184);
        assert_eq!(c.chunk_size(42), 1 << 20);
        // `-n 64 -f 1.5`: 112, 168, 256 (252 rounded up), 384, ...
        let c = SlabClasses::new(64, 1.5, SLAB_PAGE_SIZE / 2, &[], true);
        assert_eq!(
            (1..=4).map(|k| c.chunk_size(k)).collect::<Vec<_>>(),
            [112, 168, 256, 384]
        );
        // `-o slab_sizes=100-200-300`: rounded to 8, then slab_chunk_max.
        let c = SlabClasses::new(48, 1.25, SLAB_PAGE_SIZE / 2, &[100, 200, 300], true);
        assert_eq!(
            (1..=4).map(|k| c.chunk_size(k)).collect::<Vec<_>>(),
            [104, 200, 304, 524_288]
        );
    }

    #[test]
    fn items_fall_in_memcacheds_classes() {
        let c = SlabClasses::default();
        // t/issue_29.t: `set issue29 0 0 0`: 48 + 8 + 2 + 8 = 66 bytes, class 1.
        let total = c.item_total(7, 0, false);
        assert_eq!(total, 66);
        assert_eq!(c.class_of(total), 1);
        // t/issue_22.t: key3 with a 66560-byte value: 66622 bytes, past class 30's 66232.
        assert_eq!(c.class_of(c.item_total(4, 66560, false)), 31);
        // Boundaries: a chunk holds exactly its size.
        assert_eq!(c.class_of(96), 1);
        assert_eq!(c.class_of(97), 2);
        assert_eq!(c.class_of(66_232), 30);
        assert_eq!(c.class_of(66_233), 31);
        // Chunked items (beyond slab_chunk_max) are the largest class's.
        assert_eq!(c.class_of(524_288), 39);
        assert_eq!(c.class_of(1 << 20), 39);
        // Flags and CAS count as in memcached.
        assert_eq!(c.item_total(3, 10, true), 48 + 4 + 4 + 12 + 8);
        let no_cas = SlabClasses::new(48, 1.25, SLAB_PAGE_SIZE / 2, &[], false);
        assert_eq!(no_cas.item_total(3, 10, false), 48 + 4 + 12);
    }

    #[test]
    fn the_lookup_table_agrees_with_the_search() {
        for c in [
            SlabClasses::default(),
            SlabClasses::new(64, 1.5, SLAB_PAGE_SIZE / 2, &[], false),
            SlabClasses::new(48, 1.25, SLAB_PAGE_SIZE / 2, &[100, 200, 300], true),
            SlabClasses::new(48, 1.25, 1024, &[], true),
        ] {
            let table = c.lookup_table();
            for total in 1..=LOOKUP_MAX {
                let looked = usize::from(table[total.div_ceil(8)]);
                assert_eq!(looked, c.class_of(total), "{total}");
            }
        }
    }

    #[test]
    fn odd_options_still_give_an_ascending_table() {
        for (n, f) in [(1, 1.01), (48, 1.0), (0, 2.0), (1 << 30, 1.25)] {
            let c = SlabClasses::new(n, f, SLAB_PAGE_SIZE / 2, &[], true);
            assert!(c.largest() >= 1 && c.largest() < MAX_CLASSES);
            for k in 2..=c.largest() {
                assert!(c.chunk_size(k) > c.chunk_size(k - 1));
            }
        }
    }
}
