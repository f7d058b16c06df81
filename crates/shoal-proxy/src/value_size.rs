//! The pool-wide estimate of a retrieved value's size that sizes multi-get batches.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Most keys one multi-get batch asks for, whatever the estimate says: what bounds a
/// batch when values turn out far larger than the estimate (at most this many items).
pub const MAX_BATCH_KEYS: usize = 256;

/// Smallest per-value estimate, so tiny values cannot make a batch unbounded.
const MIN_VALUE_COST: usize = 64;
/// The per-value estimate before any value has been seen: a guess that keeps a fresh
/// proxy's first batches at a few MB even if every value is 1 MB.
const INITIAL_VALUE_ESTIMATE: usize = 16 * 1024;

/// A pool-wide estimate of the bytes one retrieved value takes in a reply (its `VALUE`
/// line, data and `\r\n`), which sizes multi-get batches and the in-flight window. It
/// rises at once to any larger value seen, so a burst of large values shrinks every
/// connection's batches immediately, and falls back slowly (1/16 of the gap per smaller
/// value), so a few small values do not re-open the window to a size large values would
/// overflow.
#[derive(Debug)]
pub struct ValueSize(AtomicUsize);

impl Default for ValueSize {
    fn default() -> ValueSize {
        ValueSize(AtomicUsize::new(INITIAL_VALUE_ESTIMATE))
    }
}

impl ValueSize {
    /// The current estimate in bytes (at least 64).
    pub fn get(&self) -> usize {
        self.0.load(Relaxed).max(MIN_VALUE_COST)
    }

    /// Records a reply carrying `count` values, the largest of `bytes`: the estimate
    /// rises to `bytes` if that is larger, else falls 1/16 of the way towards it per value.
    pub fn observe(&self, bytes: usize, count: usize) {
        if count == 0 {
            return;
        }
        // 15/16 to the power of `count` (which is at most 64 steps from nothing left).
        let keep = (15.0f64 / 16.0).powi(count.min(64) as i32);
        // A compare-and-swap loop rather than load-then-store, so a concurrent rise is not
        // overwritten by a decay; unchanged estimates (the common case) write nothing.
        let _ = self.0.fetch_update(Relaxed, Relaxed, |cur| {
            let next = if bytes >= cur {
                bytes
            } else {
                bytes + ((cur - bytes) as f64 * keep) as usize
            };
            (next != cur).then_some(next)
        });
    }

    /// How many keys a batch may ask for when `room` bytes of the in-flight limit are
    /// left: at least one, at most [`MAX_BATCH_KEYS`].
    pub fn keys_for(&self, room: usize) -> usize {
        (room / self.get()).clamp(1, MAX_BATCH_KEYS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::IN_FLIGHT_LIMIT;

    #[test]
    fn value_size_rises_at_once_and_falls_slowly() {
        let v = ValueSize::default();
        assert_eq!(v.get(), INITIAL_VALUE_ESTIMATE);
        v.observe(1 << 20, 1);
        assert_eq!(v.get(), 1 << 20);
        assert_eq!(v.keys_for(IN_FLIGHT_LIMIT), 1, "never below one key");
        // One small value moves it 1/16 of the way; many small values most of the way.
        v.observe(100, 1);
        assert!(v.get() > 900 * 1024, "{}", v.get());
        v.observe(100, 64);
        assert!(v.get() < 32 * 1024, "{}", v.get());
        v.observe(0, 0);
        assert!(v.get() >= MIN_VALUE_COST);
        for _ in 0..100 {
            v.observe(10, 64);
        }
        assert_eq!(
            v.get(),
            MIN_VALUE_COST,
            "tiny values are counted as the minimum"
        );
        assert_eq!(v.keys_for(IN_FLIGHT_LIMIT), MAX_BATCH_KEYS, "capped");
    }
}
