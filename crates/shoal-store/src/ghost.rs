//! The ghost: fingerprints of keys recently evicted from probation without being read.
//!
//! S3-FIFO's insight (Yang et al., SOSP 2023) is that most objects are never read again
//! and should leave quickly, through a small probation queue; but an object whose reuse
//! distance is longer than probation's residence would then never get in. The ghost
//! remembers such evictions: when a key evicted unread from probation is written again
//! soon after (a miss followed by a fill), it is stored already counted as read once, so
//! that probation's eviction moves it to the main queues instead of dropping it again.
//!
//! It is a direct-mapped table of 32-bit fingerprints: one atomic word per slot, written
//! only by eviction (under its lock) and read and cleared by writers without a lock. A
//! slot keeps the latest fingerprint to land in it, so the table forgets in roughly FIFO
//! order, and a false hit costs one item a second chance, nothing more. Its memory, 4
//! bytes per slot, is outside the item limit, like the index.

use std::sync::atomic::{AtomicU32, Ordering};

/// Fewest slots, for small stores.
const MIN_SLOTS: usize = 1 << 12;

/// Fingerprints of recently evicted keys.
pub(crate) struct Ghost {
    slots: Box<[AtomicU32]>,
}

impl Ghost {
    /// A ghost of about `slots` entries (rounded up to a power of two).
    pub(crate) fn new(slots: usize) -> Ghost {
        let n = slots.max(MIN_SLOTS).next_power_of_two();
        Ghost {
            slots: (0..n).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    fn slot_and_print(&self, hash: u64) -> (&AtomicU32, u32) {
        // The index's shards and buckets use the hash's high and low bits; the slot takes
        // the middle ones, the fingerprint the top (never 0, which marks an empty slot).
        let slot = ((hash >> 16) as usize) & (self.slots.len() - 1);
        let print = ((hash >> 32) as u32) | 1;
        (&self.slots[slot], print)
    }

    /// Remembers the key with this hash.
    pub(crate) fn insert(&self, hash: u64) {
        let (slot, print) = self.slot_and_print(hash);
        slot.store(print, Ordering::Relaxed);
    }

    /// Whether the key with this hash was remembered; forgets it if so.
    pub(crate) fn take(&self, hash: u64) -> bool {
        let (slot, print) = self.slot_and_print(hash);
        slot.load(Ordering::Relaxed) == print
            && slot
                .compare_exchange(print, 0, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// Bytes of memory it takes.
    pub(crate) fn bytes(&self) -> usize {
        self.slots.len() * std::mem::size_of::<AtomicU32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_once_and_forgets_what_is_overwritten() {
        let g = Ghost::new(16);
        let a = 0x1234_5678_9abc_def0u64;
        assert!(!g.take(a));
        g.insert(a);
        assert!(g.take(a));
        assert!(!g.take(a), "a hit forgets the key");
        g.insert(a);
        // Another key in the same slot replaces it.
        let b = a ^ (1 << 40);
        g.insert(b);
        assert!(!g.take(a));
        assert!(g.take(b));
    }
}
