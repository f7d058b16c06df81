//! The server clock: whole seconds since start, as memcached keeps it.
//!
//! memcached stores expiration times relative to process start ("rel time") so they fit in
//! 32 bits, and it reads the clock from a variable a timer updates, not from a syscall per
//! request. We do the same: [`Clock::tick`] is called by a maintenance thread and every
//! request reads one atomic.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
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
    /// Rel time at `started` (START for a new clock; later for one resumed after a warm
    /// restart, so that stored rel times keep their meaning).
    base: u32,
    /// Unix time at which rel time 0 would have been.
    epoch_unix: i64,
    now: AtomicU32,
    /// Seconds [`shift`](Self::shift) moved the clock forward (memcached-debug's
    /// `debugtime`).
    shifted: AtomicU32,
    /// Whether [`tick`](Self::tick) leaves the clock where it is (`debugtime p`).
    paused: AtomicBool,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    /// Starts a clock at the current wall time.
    pub fn new() -> Self {
        Clock {
            started: Instant::now(),
            base: START,
            epoch_unix: unix_time() - i64::from(START),
            now: AtomicU32::new(START),
            shifted: AtomicU32::new(0),
            paused: AtomicBool::new(false),
        }
    }

    /// Continues a clock that a previous process kept, whose rel time 0 was Unix time
    /// `epoch_unix` and which last read `last_now`: rel times stored by that process keep
    /// their meaning, and the time spent down counts (as memcached's restart does), so
    /// items whose expiry passed meanwhile read as expired. A wall clock that went
    /// backwards does not move rel time back.
    pub fn resume(epoch_unix: i64, last_now: u32) -> Self {
        let wall = u32::try_from(unix_time().saturating_sub(epoch_unix)).unwrap_or(u32::MAX);
        let base = wall.max(last_now).max(START);
        Clock {
            started: Instant::now(),
            base,
            epoch_unix,
            now: AtomicU32::new(base),
            shifted: AtomicU32::new(0),
            paused: AtomicBool::new(false),
        }
    }

    /// Unix time at which rel time 0 would have been (saved for a warm restart).
    pub fn epoch_unix(&self) -> i64 {
        self.epoch_unix
    }

    /// Current rel time in seconds, as of the last [`tick`](Self::tick).
    #[inline]
    pub fn now(&self) -> u32 {
        self.now.load(Ordering::Relaxed)
    }

    /// Re-reads the monotonic clock; call at least a few times a second.
    pub fn tick(&self) {
        if self.paused.load(Ordering::Relaxed) {
            return;
        }
        let secs = self.started.elapsed().as_secs();
        let rel = u32::try_from(secs)
            .unwrap_or(u32::MAX)
            .saturating_add(self.base)
            .saturating_add(self.shifted.load(Ordering::Relaxed));
        self.now.store(rel, Ordering::Relaxed);
    }

    /// Moves the clock `secs` forward for good, as memcached-debug's `debugtime <secs>`
    /// does: items expire and delayed flushes fall due as if the time had passed, and the
    /// `time` stat runs ahead of the wall clock by as much.
    pub fn shift(&self, secs: u32) {
        self.shifted.fetch_add(secs, Ordering::Relaxed);
        self.now.fetch_add(secs, Ordering::Relaxed);
    }

    /// Stops the clock (`true`, memcached-debug's `debugtime p`) or lets it follow the
    /// monotonic clock again (`false`, `debugtime r`; it then jumps to where it would be).
    pub fn pause(&self, paused: bool) {
        self.paused.store(paused, Ordering::Relaxed);
        if !paused {
            self.tick();
        }
    }

    /// Moves the clock forward by `secs` (tests only: lets expiry be tested without sleeping).
    pub fn advance_for_test(&self, secs: u32) {
        self.now.fetch_add(secs, Ordering::Relaxed);
    }

    /// Unix time of the current rel time (memcached's `time` stat).
    pub fn unix_now(&self) -> i64 {
        self.epoch_unix + i64::from(self.now())
    }

    /// Seconds since this process started its clock (memcached's `uptime` stat).
    pub fn uptime(&self) -> u32 {
        self.now().saturating_sub(self.base)
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

fn unix_time() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
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
    fn resumed_clock_counts_time_spent_down() {
        let c = Clock::new();
        let ttl = c.expiry(100);
        // The previous process started 1,000 s ago and stopped 60 s ago.
        let epoch = c.epoch_unix() - 1000;
        let resumed = Clock::resume(epoch, 940);
        assert!((1000..=1003).contains(&resumed.now()), "{}", resumed.now());
        assert_eq!(resumed.uptime(), 0);
        assert_eq!(resumed.epoch_unix(), epoch);
        // An item stored then with 100 s to live (rel 2 + 100 on the old clock) is gone.
        assert!(is_expired(ttl, resumed.now()));
        // A wall clock behind the saved time does not move rel time back.
        let behind = Clock::resume(c.epoch_unix(), 5_000);
        assert_eq!(behind.now(), 5_000);
    }

    #[test]
    fn shift_and_pause_move_time_as_memcached_debug() {
        let c = Clock::new();
        let e = c.expiry(5);
        c.shift(5);
        assert!(is_expired(e, c.now()));
        // A shift lasts past the next tick.
        c.tick();
        assert!(c.now() >= START + 5, "{}", c.now());
        c.pause(true);
        let stopped = c.now();
        c.tick();
        assert_eq!(c.now(), stopped);
        c.shift(10);
        assert_eq!(c.now(), stopped + 10);
        c.pause(false);
        assert!(c.now() >= START + 15, "{}", c.now());
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
