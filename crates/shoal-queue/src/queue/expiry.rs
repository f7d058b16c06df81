//! memcached's exptime rule, as queues apply it to a message's expiry.

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
