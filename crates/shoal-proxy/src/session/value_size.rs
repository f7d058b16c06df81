//! The pool-wide estimate of a retrieved value's size that sizes multi-get batches.

use super::{INITIAL_VALUE_ESTIMATE, MAX_BATCH_KEYS, MIN_VALUE_COST};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

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
