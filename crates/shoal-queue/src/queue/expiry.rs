//! Expiry: memcached's and Kestrel's exptime rules, and `expire_to` (Kestrel's delay and
//! dead-letter queues): a queue configured with it sets its expired messages aside instead
//! of dropping them, and the engine moves them (see `crate::expire_to`) with
//! [`Queue::expired_batch`] and [`Queue::finish_expired`].

use super::index::State;
use super::Queue;
use crate::error::QueueError;
use bytes::Bytes;
use std::io;
use std::os::unix::fs::FileExt;

/// An expired message to be moved to another queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expired {
    /// Client flags given at enqueue.
    pub flags: u32,
    /// The payload.
    pub data: Bytes,
}

impl Queue {
    /// Moves the expired messages at the head to the set-aside list (under the lock).
    pub(super) fn set_aside_expired(&self, st: &mut State, now: u32) {
        while st.ready.front().is_some_and(|e| e.expired(now)) {
            if let Some(e) = st.ready.pop_front() {
                st.expiring.push_back(e);
            }
        }
    }

    /// The first `max` (0: all) expired messages set aside for `expire_to`, oldest first,
    /// after setting aside those expired at the head now. They stay in this queue (and its
    /// log) until [`Queue::finish_expired`]: a crash before then moves them again, so a
    /// move is at-least-once, never lost.
    pub fn expired_batch(&self, now: u32, max: u64) -> Result<Vec<Expired>, QueueError> {
        let mut st = self.state.lock();
        if st.deleted {
            return Ok(Vec::new());
        }
        self.set_aside_expired(&mut st, now);
        let n = match max {
            0 => st.expiring.len(),
            m => st
                .expiring
                .len()
                .min(usize::try_from(m).unwrap_or(usize::MAX)),
        };
        let mut out = Vec::with_capacity(n);
        for e in st.expiring.iter().take(n) {
            let data = match &e.data {
                Some(d) => d.clone(),
                None => {
                    let seg = st
                        .segments
                        .get(&e.seg)
                        .ok_or_else(|| QueueError::Read(io::Error::other("segment missing")))?;
                    let mut buf = vec![0u8; e.len as usize];
                    seg.file
                        .read_exact_at(&mut buf, e.off)
                        .map_err(QueueError::Read)?;
                    Bytes::from(buf)
                }
            };
            out.push(Expired {
                flags: e.flags,
                data,
            });
        }
        Ok(out)
    }

    /// Consumes the first `n` set-aside expired messages (their copies are stored
    /// elsewhere) and writes it. Returns the log position to wait on.
    pub fn finish_expired(&self, n: usize) -> Result<u64, QueueError> {
        let mut st = self.state.lock();
        let mut done = false;
        for _ in 0..n {
            let Some(e) = st.expiring.pop_front() else {
                break;
            };
            Self::consume(&mut st, e);
            st.counters.expired += 1;
            done = true;
        }
        if done {
            self.gc(&mut st);
        }
        drop(st);
        self.commit()
    }

    /// Expired messages set aside and not yet moved.
    pub fn expiring(&self) -> u64 {
        self.state.lock().expiring.len() as u64
    }
}

/// memcached's rule: an exptime up to 30 days is relative, larger is a unix time.
const RELATIVE_EXPTIME_MAX: i64 = 60 * 60 * 24 * 30;

/// Converts a memcached exptime into an absolute expiry in unix seconds (0 = never).
/// A negative exptime, or an absolute one in the past, yields a time `<= now`: expired.
pub fn expiry_from_exptime(exptime: i64, now: u32) -> u32 {
    match exptime {
        0 => 0,
        e if e < 0 => now.max(1),
        e if e <= RELATIVE_EXPTIME_MAX => now.saturating_add(e as u32),
        e => u32::try_from(e).unwrap_or(u32::MAX),
    }
}

/// Kestrel's rule: an exptime under 1,000,000 seconds is relative, larger is a unix time.
const KESTREL_RELATIVE_MAX: i64 = 1_000_000;

/// Converts an exptime by Kestrel 2.4's rule into an absolute expiry in unix seconds
/// (0 = never): under [`KESTREL_RELATIVE_MAX`] seconds it is relative to `now`, from it on a
/// unix time. A negative exptime yields a time `<= now`: expired.
pub fn expiry_from_kestrel_exptime(exptime: i64, now: u32) -> u32 {
    match exptime {
        0 => 0,
        e if e < 0 => now.max(1),
        e if e < KESTREL_RELATIVE_MAX => now.saturating_add(e as u32),
        e => u32::try_from(e).unwrap_or(u32::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memcached_and_kestrel_rules() {
        let now = 1_700_000_000;
        assert_eq!(expiry_from_exptime(0, now), 0);
        assert_eq!(expiry_from_kestrel_exptime(0, now), 0);
        assert_eq!(expiry_from_exptime(10, now), now + 10);
        assert_eq!(expiry_from_kestrel_exptime(10, now), now + 10);
        // 20 days: relative for memcached, a unix time in 1970 for Kestrel.
        let d20 = 20 * 86_400;
        assert_eq!(expiry_from_exptime(d20, now), now + d20 as u32);
        assert_eq!(expiry_from_kestrel_exptime(d20, now), d20 as u32);
        assert_eq!(expiry_from_kestrel_exptime(999_999, now), now + 999_999);
        assert_eq!(
            expiry_from_kestrel_exptime(2_000_000_000, now),
            2_000_000_000
        );
        assert!(expiry_from_kestrel_exptime(-1, now) <= now);
    }
}
