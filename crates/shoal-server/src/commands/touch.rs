//! Text `touch`.
//!
//! Binary `TOUCH` is served by [`super::retrieval::serve_key`], as memcached serves it: a
//! gat whose reply carries only the flags. Text `touch` stays apart because it behaves
//! differently where clients and dashboards can see it: a touch that cannot be stored is
//! answered `SERVER_ERROR out of memory` and counted as neither hit nor miss, and it
//! reports nothing to `stats detail`. Routing it through `serve_key` would change all
//! three. Its lookup is an `item_get` line for `watch fetchers`, as memcached 1.6.45
//! logs it.

use super::respond;
use crate::stats::ThreadStats;
use crate::worker::Worker;
use shoal_protocol::reply;

/// `touch <key> <exptime>`: TOUCHED or NOT_FOUND.
pub fn touch(w: &Worker, key: &[u8], exptime: i64, noreply: bool, out: &mut Vec<u8>) {
    ThreadStats::incr(&w.stats.cmd_touch);
    let store = &w.shared.store;
    let expiry = store.clock().expiry(exptime);
    let mut writer = w.writer.borrow_mut();
    // memcached's touch reads the item as a fetch does, so it counts as fetched.
    let before = std::cell::Cell::new(None);
    let class = std::cell::Cell::new(0);
    let touched = store.update(&mut writer, key, |e| {
        before.set(e.item().map(|i| i.value_len()));
        if e.item().is_none() {
            e.read_missed();
        }
        class.set(e.item().map_or(0, |i| store.slab_class(&i)));
        if !e.set_exptime(expiry)? {
            return Ok(false);
        }
        if let Some(item) = e.item() {
            item.mark_fetched();
        }
        Ok(true)
    });
    drop(writer);
    w.shared
        .watchers
        .fetched(key, before.get(), w.current_conn.get());
    match touched {
        Ok(true) => {
            ThreadStats::incr(&w.stats.class(class.get()).touch_hits);
            respond(out, noreply, reply::TOUCHED);
        }
        Ok(false) => {
            ThreadStats::incr(&w.stats.touch_misses);
            respond(out, noreply, reply::NOT_FOUND);
        }
        Err(_) => respond(out, noreply, reply::OUT_OF_MEMORY_STORING),
    }
}
