//! The background expiry crawl's run-time controls (memcached's `lru_crawler` settings),
//! read by the maintenance thread and set by the `lru_crawler` commands.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// The crawler's run-time controls.
#[derive(Debug)]
pub struct LruCrawler {
    enabled: AtomicBool,
    pub(crate) full_pass: AtomicBool,
    /// `lru_crawler sleep` / `-o lru_crawler_sleep`, microseconds: shown in `stats
    /// settings`; the sweep paces itself by segments, not items, so it has no effect.
    pub sleep_us: AtomicU32,
    /// `lru_crawler tocrawl` / `-o lru_crawler_tocrawl`, shown in `stats settings` (as
    /// above, no effect: a segment is swept whole).
    pub tocrawl: AtomicU32,
}

impl LruCrawler {
    /// Controls with the crawler on or off and memcached's per-item pacing values (from
    /// `-o lru_crawler_sleep` and `-o lru_crawler_tocrawl`).
    pub fn new(enabled: bool, sleep_us: u32, tocrawl: u32) -> LruCrawler {
        LruCrawler {
            enabled: AtomicBool::new(enabled),
            full_pass: AtomicBool::new(false),
            sleep_us: AtomicU32::new(sleep_us),
            tocrawl: AtomicU32::new(tocrawl),
        }
    }

    /// Whether the background sweep runs.
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Turns the sweep on or off; false if it already was (memcached refuses to start a
    /// running crawler).
    pub fn set_enabled(&self, on: bool) -> bool {
        self.enabled.swap(on, Ordering::Relaxed) != on
    }

    /// Asks for one full pass over every segment at the next tick.
    pub fn request_full_pass(&self) {
        self.full_pass.store(true, Ordering::Relaxed);
    }

    /// Whether a full pass (`lru_crawler crawl`) is asked for or under way: memcached's
    /// `lru_crawler_running`.
    pub fn running(&self) -> bool {
        self.full_pass.load(Ordering::Relaxed)
    }
}
