//! `get`, `gets`, `gat`, `gats`.

use super::visible_cas;
use crate::server::Worker;
use crate::stats::ThreadStats;
use shoal_protocol::{reply, Keys};

/// `get`/`gets`: one VALUE block per key found, then END.
pub fn get(w: &Worker, keys: Keys<'_>, with_cas: bool, out: &mut Vec<u8>) {
    let store = &w.shared.store;
    let s = &w.stats;
    for key in keys.iter() {
        ThreadStats::incr(&s.cmd_get);
        let hit = store.get(key, |item| {
            let cas = with_cas.then(|| visible_cas(w, item.cas()));
            reply::value(out, key, item.flags(), item.value(), cas);
        });
        ThreadStats::incr(if hit.is_some() {
            &s.get_hits
        } else {
            &s.get_misses
        });
    }
    reply::end(out);
}

/// `gat`/`gats`: like get, also setting each found item's expiry. Counted as touches only
/// (cmd_touch, touch_hits/misses), not gets, as memcached does.
pub fn get_and_touch(w: &Worker, exptime: i64, keys: Keys<'_>, with_cas: bool, out: &mut Vec<u8>) {
    let store = &w.shared.store;
    let s = &w.stats;
    let expiry = store.clock().expiry(exptime);
    let mut writer = w.writer.borrow_mut();
    for key in keys.iter() {
        ThreadStats::incr(&s.cmd_touch);
        let hit = store.update(&mut writer, key, |e| {
            if !e.set_exptime(expiry)? {
                return Ok(false);
            }
            if let Some(item) = e.item() {
                let cas = with_cas.then(|| visible_cas(w, item.cas()));
                reply::value(out, key, item.flags(), item.value(), cas);
                item.mark_fetched();
            }
            Ok(true)
        });
        ThreadStats::incr(if hit == Ok(true) {
            &s.touch_hits
        } else {
            &s.touch_misses
        });
    }
    reply::end(out);
}
