//! The wall clock as the engine stores times.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the unix epoch, as the engine stores times (0 before the epoch, the
/// largest value after 2106).
pub fn unix_now() -> u32 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u32::try_from(d.as_secs()).unwrap_or(u32::MAX))
}
