//! The ghost: fingerprints of keys recently evicted from probation without being read.
//!
//! S3-FIFO's insight (Yang et al., SOSP 2023) is that most objects are never read again
//! and should leave quickly, through a small probation queue; but an object whose reuse
//! distance is longer than probation's residence would then never get in. The ghost
//! remembers such evictions: when a key evicted unread from probation is written again
//! soon after (a miss followed by a fill), it is stored already counted as read once, so
//! that probation's eviction moves it to the main queues instead of dropping it again.
//!
//! "Soon" is a window of the most recent evictions, as many as half the items the cache
//! holds (S3-FIFO's ghost is as large as its main queue; measured here on mixed sizes, a
//! ghost half the item count keeps more of what is small and read again, at the cost of
//! slightly less resistance to long scans). The window therefore grows and shrinks with
//! the item count, which differs a hundredfold between caches of small and large values.
//!
//! It is a direct-mapped table of 32-bit words, one per slot: 24 bits of the key's hash
//! and the 8-bit *epoch* of its eviction. Epochs advance every 1/16 of the window, and an
//! entry counts while it is less than 16 epochs old, so the table needs no clearing and
//! forgets in FIFO order. Eviction writes it under its lock; writers read and clear it
//! without one. A false hit costs one item a second chance, nothing more. Its memory is
//! outside the item limit, like the index's.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Fewest slots, for small stores.
const MIN_SLOTS: usize = 1 << 12;
/// Epochs an entry stays valid.
const EPOCHS: u32 = 16;

/// Fingerprints of recently evicted keys.
pub(crate) struct Ghost {
    slots: Box<[AtomicU32]>,
    /// The current epoch (low 8 bits are stored in entries).
    epoch: AtomicU32,
    /// Insertions since the epoch began (written by eviction only).
    in_epoch: AtomicU64,
    /// Insertions per epoch: the window over [`EPOCHS`].
    epoch_len: AtomicU64,
}

impl Ghost {
    /// A ghost of about `slots` entries (rounded up to a power of two).
    pub(crate) fn new(slots: usize) -> Ghost {
        let n = slots.max(MIN_SLOTS).next_power_of_two();
        Ghost {
            slots: (0..n).map(|_| AtomicU32::new(0)).collect(),
            epoch: AtomicU32::new(0),
            in_epoch: AtomicU64::new(0),
            epoch_len: AtomicU64::new((n / 2 / EPOCHS as usize).max(1) as u64),
        }
    }

    /// Sets the window: the ghost remembers about the last `evictions` evictions (at
    /// most half its slots, beyond which collisions would forget them anyway).
    pub(crate) fn set_window(&self, evictions: usize) {
        let w = evictions.clamp(EPOCHS as usize, self.slots.len() / 2);
        self.epoch_len
            .store((w / EPOCHS as usize) as u64, Ordering::Relaxed);
    }

    fn slot_and_print(&self, hash: u64) -> (&AtomicU32, u32) {
        // The index's shards and buckets use the hash's high and low bits; the slot takes
        // the middle ones, the fingerprint the top 24.
        let slot = ((hash >> 16) as usize) & (self.slots.len() - 1);
        let print = ((hash >> 40) as u32) << 8;
        (&self.slots[slot], print)
    }

    /// Remembers the key with this hash. Called by eviction only (under its lock).
    pub(crate) fn insert(&self, hash: u64) {
        let n = self.in_epoch.load(Ordering::Relaxed) + 1;
        let mut epoch = self.epoch.load(Ordering::Relaxed);
        if n >= self.epoch_len.load(Ordering::Relaxed) {
            epoch = epoch.wrapping_add(1);
            self.epoch.store(epoch, Ordering::Relaxed);
            self.in_epoch.store(0, Ordering::Relaxed);
        } else {
            self.in_epoch.store(n, Ordering::Relaxed);
        }
        let (slot, print) = self.slot_and_print(hash);
        // Epoch 0 mod 256 with print 0 would look empty; an empty slot is never a hit
        // anyway, since entries are compared whole below.
        slot.store(print | (epoch & 0xff), Ordering::Relaxed);
    }

    /// Whether the key with this hash was evicted within the window; forgets it if so.
    pub(crate) fn take(&self, hash: u64) -> bool {
        let (slot, print) = self.slot_and_print(hash);
        let entry = slot.load(Ordering::Relaxed);
        if entry == 0 || entry & !0xff != print {
            return false;
        }
        let age = self.epoch.load(Ordering::Relaxed).wrapping_sub(entry) & 0xff;
        age < EPOCHS
            && slot
                .compare_exchange(entry, 0, Ordering::Relaxed, Ordering::Relaxed)
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

    const A: u64 = 0x1234_5678_9abc_def0;

    #[test]
    fn remembers_once_and_forgets_what_is_overwritten() {
        let g = Ghost::new(16);
        assert!(!g.take(A));
        g.insert(A);
        assert!(g.take(A));
        assert!(!g.take(A), "a hit forgets the key");
        g.insert(A);
        // Another key in the same slot replaces it.
        let b = A ^ (1 << 50);
        g.insert(b);
        assert!(!g.take(A));
        assert!(g.take(b));
    }

    #[test]
    fn entries_older_than_the_window_do_not_count() {
        let g = Ghost::new(1 << 12);
        g.set_window(160);
        g.insert(A);
        // 10 insertions per epoch: 150 more leave A 15 epochs old, still remembered.
        for i in 0..150u64 {
            g.insert(i << 20);
        }
        assert!(g.take(A));
        g.insert(A);
        for i in 0..170u64 {
            g.insert(i << 20);
        }
        assert!(!g.take(A), "17 epochs old");
    }
}
