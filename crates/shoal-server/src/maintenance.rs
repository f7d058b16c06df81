//! The maintenance thread: the store's clock, its background expiry crawl, and the
//! crawler controls operators reach through `lru_crawler`.
//!
//! memcached runs an LRU crawler thread that operators can stop, start and point at
//! classes. Shoal's equivalent is the store's segment sweep, run here a few times a
//! second; `lru_crawler disable` stops the sweep (the clock keeps ticking) and
//! `lru_crawler crawl` asks for one full pass over every segment on this thread rather
//! than on the worker that received the command.

use crate::worker::Shared;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the maintenance thread wakes.
const TICK: Duration = Duration::from_millis(100);

/// Starts the maintenance thread; it stops when the server begins shutting down.
pub fn start(shared: Arc<Shared>) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("shoal-maint".into())
        .spawn(move || {
            while !shared.stopping() {
                std::thread::sleep(TICK);
                let crawler = &shared.crawler;
                if !crawler.enabled() {
                    // A crawl asked for before `lru_crawler disable` is dropped with it.
                    crawler.full_pass.store(false, Ordering::Relaxed);
                    shared.store.clock().tick();
                    shared.store.maintain_flash();
                    continue;
                }
                shared.store.maintain();
                // The request stays set while the pass runs: `stats` shows
                // `lru_crawler_running 1` until the pass is over.
                if crawler.full_pass.load(Ordering::Relaxed) {
                    let n = shared.store.reclaim_all_expired();
                    crawler.full_pass.store(false, Ordering::Relaxed);
                    tracing::debug!("lru_crawler crawl: reclaimed {n} expired items");
                }
            }
        })
}
