//! The maintenance thread: the store's clock, its background expiry crawl, and the
//! crawler controls operators reach through `lru_crawler`.
//!
//! memcached runs an LRU crawler thread that operators can stop, start and point at
//! classes. Shoal's equivalent is the store's segment sweep, run here a few times a
//! second; `lru_crawler disable` stops the sweep (the clock keeps ticking) and
//! `lru_crawler crawl` asks for one full pass over every segment on this thread rather
//! than on the worker that received the command.

use crate::server::Shared;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the maintenance thread wakes.
const TICK: Duration = Duration::from_millis(100);

/// The crawler's run-time controls.
#[derive(Debug)]
pub struct LruCrawler {
    enabled: AtomicBool,
    full_pass: AtomicBool,
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
}

/// Starts the maintenance thread; it stops when the server begins shutting down.
pub fn start(shared: Arc<Shared>) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("shoal-maint".into())
        .spawn(move || {
            while !shared.stopping() {
                std::thread::sleep(TICK);
                let crawler = &shared.crawler;
                if !crawler.enabled() {
                    shared.store.clock().tick();
                    continue;
                }
                shared.store.maintain();
                if crawler.full_pass.swap(false, Ordering::Relaxed) {
                    let n = shared.store.reclaim_all_expired();
                    tracing::debug!("lru_crawler crawl: reclaimed {n} expired items");
                }
            }
        })
}
