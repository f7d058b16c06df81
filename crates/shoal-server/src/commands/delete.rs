//! `delete`.

use super::respond;
use crate::stats::ThreadStats;
use crate::worker::Worker;
use shoal_protocol::reply;

/// `delete <key>`: DELETED or NOT_FOUND.
pub fn delete(w: &Worker, key: &[u8], noreply: bool, out: &mut Vec<u8>) {
    let mut writer = w.writer.borrow_mut();
    let removed = w
        .shared
        .store
        .update(&mut writer, key, |e| Ok(e.remove()))
        .unwrap_or(false);
    w.shared
        .prefixes
        .record(key, crate::detail::PrefixOp::Delete);
    if removed {
        w.shared.watchers.deleted(key, "delete");
        ThreadStats::incr(&w.stats.delete_hits);
        respond(out, noreply, reply::DELETED);
    } else {
        ThreadStats::incr(&w.stats.delete_misses);
        respond(out, noreply, reply::NOT_FOUND);
    }
}
