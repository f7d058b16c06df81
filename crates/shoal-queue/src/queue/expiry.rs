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
