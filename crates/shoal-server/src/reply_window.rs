//! How much reply a multi-key retrieval may generate before it must wait for the client.
//!
//! One `get` of 5,000 keys of 100 KB values asks for 500 MB of replies. Rather than build
//! them all, a retrieval stops at the connection's high-water mark, records where it
//! stopped, and is run again (the request stays in the read buffer) once the client has
//! read what was generated. A client that never reads thus costs at most the high-water
//! mark plus one value; a value larger than the free allowance is charged to the
//! process-wide buffer budget, and refused with memcached's
//! `SERVER_ERROR out of memory writing get response` when the budget is spent.

use shoal_net::{Reservation, OUTPUT_HIGH_WATER};

/// Reply bytes a connection may hold without charging the buffer budget: the high-water
/// mark plus room for the value that crosses it.
pub const FREE_REPLY_BYTES: usize = 2 * OUTPUT_HIGH_WATER;

/// A connection's reply allowance and where a suspended multi-key retrieval continues.
#[derive(Debug)]
pub struct ReplyWindow {
    /// Byte offset in the key list of the key to serve next (0: from the start).
    pub resume_at: usize,
    /// Budget held for a reply buffer grown past [`FREE_REPLY_BYTES`].
    pub reservation: Reservation,
}

/// Whether one more value fits in the reply now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Room {
    /// Append it.
    Now,
    /// Write what is pending first, then try again.
    Later,
    /// It can never fit: the budget cannot cover it even on its own.
    Never,
}

impl ReplyWindow {
    /// A window with nothing reserved.
    pub fn new(reservation: Reservation) -> ReplyWindow {
        ReplyWindow {
            resume_at: 0,
            reservation,
        }
    }

    /// Whether `len` more bytes may be appended to a reply of `pending` bytes. A reply
    /// that would cross the high-water mark waits for the pending ones to be written,
    /// unless there are none, so every call on an empty reply makes progress or fails for
    /// good.
    pub fn room(&mut self, pending: usize, len: usize) -> Room {
        let total = pending.saturating_add(len);
        if total <= OUTPUT_HIGH_WATER {
            return Room::Now;
        }
        if pending != 0 {
            return Room::Later;
        }
        if total <= FREE_REPLY_BYTES || self.reservation.grow_to(total - FREE_REPLY_BYTES) {
            Room::Now
        } else {
            Room::Never
        }
    }

    /// Called once the reply buffer has been written and emptied: gives the budget back,
    /// shrinking `out` if it grew past the free allowance.
    pub fn written(&mut self, out: &mut Vec<u8>) {
        if out.capacity() > FREE_REPLY_BYTES {
            out.shrink_to(OUTPUT_HIGH_WATER);
        }
        self.reservation.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_net::Budget;

    #[test]
    fn small_replies_fit_until_the_high_water_mark() {
        let budget = Budget::new(0);
        let mut w = ReplyWindow::new(budget.empty());
        assert_eq!(w.room(0, 100), Room::Now);
        let out = vec![0u8; OUTPUT_HIGH_WATER - 10];
        assert_eq!(w.room(out.len(), 10), Room::Now);
        assert_eq!(w.room(out.len(), 11), Room::Later);
    }

    #[test]
    fn a_large_value_on_its_own_is_charged_or_refused() {
        let budget = Budget::new(1 << 20);
        let mut w = ReplyWindow::new(budget.empty());
        assert_eq!(w.room(0, FREE_REPLY_BYTES), Room::Now);
        assert_eq!(budget.used(), 0);
        assert_eq!(w.room(0, FREE_REPLY_BYTES + 1000), Room::Now);
        assert_eq!(budget.used(), 1000);
        assert_eq!(w.room(0, FREE_REPLY_BYTES + (2 << 20)), Room::Never);
        let mut out = Vec::with_capacity(FREE_REPLY_BYTES * 2);
        w.written(&mut out);
        assert_eq!(budget.used(), 0);
        assert!(out.capacity() <= FREE_REPLY_BYTES);
    }
}
