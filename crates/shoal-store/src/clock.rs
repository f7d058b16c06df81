//! The server clock: whole seconds since start, as memcached keeps it.
//!
//! memcached stores expiration times relative to process start ("rel time") so they fit in
//! 32 bits, and it reads the clock from a variable a timer updates, not from a syscall per
//! request. We do the same: [`Clock::tick`] is called by a maintenance thread and every
//! request reads one atomic.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Relative times below this are never reached by the clock, so rel time 1 always means
/// "already expired" (memcached starts its clock a little above zero for the same reason).
const START: u32 = 2;

/// memcached's boundary between relative and absolute expiration times: 30 days.
pub const MAX_RELATIVE_EXPTIME: i64 = 60 * 60 * 24 * 30;

/// A coarse clock in seconds since the store started.
#[derive(Debug)]
pub struct Clock {
    started: Instant,
    /// Unix time at which rel time 0 would have been.
    epoch_unix: i64,
    now: AtomicU32,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    /// Starts a clock at the current wall time.
    pub fn new() -> Self {
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        Clock {
            started: Instant::now(),
            epoch_unix: unix - i64::from(START),
            now: AtomicU32::new(START),
        }
    }

    /// Current rel time in seconds, as of the last [`tick`](Self::tick).
    #[inline]
    pub fn now(&self) -> u32 {
        self.now.load(Ordering::Relaxed)
    }

    /// Re-reads the monotonic clock; call at least a few times a second.
    pub fn tick(&self) {
        let secs = self.started.elapsed().as_secs();
        let rel = u32::try_from(secs)
            .unwrap_or(u32::MAX - START)
            .saturating_add(START);
        self.now.store(rel, Ordering::Relaxed);
    }

    /// Moves the clock forward by `secs` (tests only: lets expiry be tested without sleeping).
    pub fn advance_for_test(&self, secs: u32) {
        self.now.fetch_add(secs, Ordering::Relaxed);
    }

    /// Unix time of the current rel time (memcached's `time` stat).
    pub fn unix_now(&self) -> i64 {
        self.epoch_unix + i64::from(self.now())
    }

    /// Seconds since start (memcached's `uptime` stat).
    pub fn uptime(&self) -> u32 {
        self.now() - START
    }

    /// Converts a protocol expiration time into a rel time exactly as memcached does:
    /// 0 never expires (returns 0); negative is already expired; up to 30 days is relative
    /// to now; anything larger is an absolute Unix time (already past if before start).
    pub fn expiry(&self, exptime: i64) -> u32 {
        if exptime == 0 {
            0
        } else if exptime < 0 {
            1
        } else if exptime > MAX_RELATIVE_EXPTIME {
            if exptime <= self.epoch_unix {
                1
            } else {
                u32::try_from(exptime - self.epoch_unix).unwrap_or(u32::MAX)
            }
        } else {
            // exptime <= 30 days, so this cannot overflow a u32 unless the server has run
            // for ~136 years.
            self.now().saturating_add(exptime as u32)
        }
    }
}

/// Whether an item with rel expiry `exptime` is expired at rel time `now` (0 = never).
#[inline]
pub fn is_expired(exptime: u32, now: u32) -> bool {
    exptime != 0 && exptime <= now
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_rules_match_memcached() {
        let c = Clock::new();
        let now = c.now();
        assert_eq!(c.expiry(0), 0);
        assert!(is_expired(c.expiry(-1), now));
        assert_eq!(c.expiry(10), now + 10);
        assert_eq!(
            c.expiry(MAX_RELATIVE_EXPTIME),
            now + MAX_RELATIVE_EXPTIME as u32
        );
        // An absolute time in the past is already expired.
        assert!(is_expired(c.expiry(MAX_RELATIVE_EXPTIME + 1), now));
        // An absolute time an hour from now is ~3600 s away.
        let abs = c.unix_now() + 3600;
        assert_eq!(c.expiry(abs), now + 3600);
        assert!(!is_expired(c.expiry(abs), now));
    }

    #[test]
    fn advance_moves_time() {
        let c = Clock::new();
        let e = c.expiry(5);
        assert!(!is_expired(e, c.now()));
        c.advance_for_test(5);
        assert!(is_expired(e, c.now()));
    }
}
