//! How a store is sized: the caller's [`StoreConfig`] and the segment geometry derived
//! from it.

use crate::error::ConfigError;
use crate::index::Refs;
use crate::layout::NO_LINK;
use crate::segments::{SegId, MAX_SEGMENTS};

/// How a store is sized and behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreConfig {
    /// Bytes available for items (keys, values and item headers).
    pub memory_limit: usize,
    /// Largest item (key + value + header) that must fit.
    pub max_item_size: usize,
    /// Evict old items when memory is full (memcached's default; `-M` turns it off).
    pub evict: bool,
    /// How many writers (threads) will write at once; each holds one segment open.
    pub writers: usize,
    /// Items the index is sized for up front (memcached's `hashpower`); 0 grows on demand.
    /// Pre-sizing avoids rehash pauses while a large cache warms up.
    pub index_capacity: usize,
    /// Make the whole memory limit resident at startup (memcached's `-L`) instead of as
    /// segments are first written: no page faults while the cache fills, at the cost of
    /// the full limit in RSS from the start.
    pub preallocate: bool,
    /// Reserve segment memory in one mapping advised for transparent huge pages (see
    /// `anon_region`; memcached's `-L`); false (the default): allocate each segment from
    /// the heap.
    pub huge_pages: bool,
    /// memcached's slab classes, which `stats slabs`/`stats items` report items by (see
    /// [`SlabClasses`](crate::SlabClasses)); they do not change how items are stored.
    pub slab_classes: crate::SlabClasses,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            memory_limit: 64 << 20,
            max_item_size: 1 << 20,
            evict: true,
            writers: 4,
            index_capacity: 0,
            preallocate: false,
            huge_pages: false,
            slab_classes: crate::SlabClasses::default(),
        }
    }
}

/// Smallest segment: below this, per-segment bookkeeping outweighs the items.
pub(crate) const MIN_SEGMENT: usize = 64 << 10;
/// Segment size unless the item limit asks for larger ones.
const DEFAULT_SEGMENT: usize = 1 << 20;

/// How a store's memory is carved up, derived from its config alone (apart from `Store::new`
/// so that the arithmetic can be checked without building stores).
pub(crate) struct Geometry {
    /// Segment size in bytes, a power of two.
    pub(crate) seg: usize,
    /// Segments the memory limit allows.
    pub(crate) segments: usize,
    /// Segment ids that exist (room to raise the limit).
    pub(crate) capacity: usize,
    /// How item references are packed.
    pub(crate) refs: Refs,
}

impl Geometry {
    pub(crate) fn of(cfg: &StoreConfig) -> Result<Geometry, ConfigError> {
        let limit = cfg.memory_limit;
        // Segments are a power of two (references pack offsets with shifts) and at least
        // the item limit, so any item fits one segment.
        // (`checked_`: an absurd item limit must not overflow; it then falls to the
        // small-limit rule below like any item limit larger than memory.)
        let mut seg = cfg
            .max_item_size
            .max(1)
            .checked_next_power_of_two()
            .unwrap_or(usize::MAX)
            .max(DEFAULT_SEGMENT);
        // Every writer holds a segment open and eviction needs one sealed segment, so a
        // small limit gets smaller segments (and a lower effective item limit) rather than
        // a store that cannot evict.
        let min_segments = cfg.writers.max(1) + 2;
        if limit / seg < min_segments {
            let fit = (limit / min_segments).max(1);
            seg = (1usize << (usize::BITS - 1 - fit.leading_zeros())).max(MIN_SEGMENT);
        }
        while limit / seg > MAX_SEGMENTS {
            seg *= 2;
        }
        if seg > u32::MAX as usize || limit < seg {
            return Err(ConfigError::MemoryTooSmall(limit));
        }
        let segments = limit / seg;
        let mut capacity = (segments * 2).clamp(64, MAX_SEGMENTS);
        let refs = Refs::new(seg.trailing_zeros(), capacity);
        // When references use all of their 32 bits, the last item slot of the highest
        // segment id can pack to `NO_LINK`, the chain terminator (it does from 64 GiB of
        // addressable segments, where items are 16-byte aligned): linking such an item
        // would cut its bucket's chain off and lose the items behind it. Not using that
        // one segment id rules it out at the cost of one segment in thousands.
        let last = (capacity - 1) as SegId;
        if refs.make(last, (seg - refs.align()) as u32) == NO_LINK {
            capacity -= 1;
        }
        // (A limit of exactly `MAX_SEGMENTS` segments thus loses that one.)
        let segments = segments.min(capacity);
        Ok(Geometry {
            seg,
            segments,
            capacity,
            refs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No item a store can ever write packs to the chain terminator, whatever its size.
    #[test]
    fn no_reachable_reference_is_the_chain_terminator() {
        let gib = 1usize << 30;
        for (memory_limit, max_item_size) in [
            (64 << 20, 1 << 20),
            (4 * gib, 1 << 20),
            (64 * gib, 1 << 20),
            (100 * gib, 1 << 20),
            (64 * gib, gib),
            (128 * gib, 2 * gib),
        ] {
            let g = Geometry::of(&StoreConfig {
                memory_limit,
                max_item_size,
                ..StoreConfig::default()
            })
            .expect("config");
            let last = (g.capacity - 1) as SegId;
            // The smallest item (12-byte header, 1-byte key) at the very end of the segment.
            let smallest = g.refs.aligned(16);
            let r = g.refs.make(last, (g.seg - smallest) as u32);
            assert_ne!(r, NO_LINK, "limit {memory_limit}, item {max_item_size}");
            assert_eq!(
                (g.refs.seg(r), g.refs.off(r) as usize),
                (last, g.seg - smallest)
            );
            assert!(g.segments <= g.capacity);
        }
    }
}
