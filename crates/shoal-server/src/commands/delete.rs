//! `delete` and binary `DELETE`/`DELETEQ`: one [`delete`] for both, answered per protocol.

use super::respond;
use crate::stats::ThreadStats;
use crate::worker::Worker;
use shoal_protocol::binary::{self, Attrs, Status};
use shoal_protocol::reply;

/// The outcome of a delete, whichever protocol asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deleted {
    /// The item was removed.
    Deleted,
    /// No such item.
    NotFound,
    /// The item's CAS unique differs from the one the request named (binary only).
    Exists,
    /// The store could not be updated.
    Failed,
}

/// Removes `key`, only if its CAS unique equals `compare_cas` when that is given.
/// Counts `delete_hits`/`delete_misses` (every outcome but a removal is a miss), tells
/// `watch deletions` about a removal and `stats detail` about every attempt.
pub fn delete(w: &Worker, key: &[u8], compare_cas: Option<u64>) -> Deleted {
    let cas_enabled = w.shared.settings.cas_enabled;
    let mut writer = w.writer.borrow_mut();
    let outcome = w
        .shared
        .store
        .update(&mut writer, key, |e| {
            let Some(item) = e.item() else {
                return Ok(Deleted::NotFound);
            };
            if let Some(expected) = compare_cas {
                let cas = if cas_enabled { item.cas() } else { 0 };
                if cas != expected {
                    return Ok(Deleted::Exists);
                }
            }
            Ok(if e.remove() {
                Deleted::Deleted
            } else {
                Deleted::NotFound
            })
        })
        .unwrap_or(Deleted::Failed);
    drop(writer);
    w.shared
        .prefixes
        .record(key, crate::detail::PrefixOp::Delete);
    if outcome == Deleted::Deleted {
        w.shared.watchers.deleted(key, "delete");
        ThreadStats::incr(&w.stats.delete_hits);
    } else {
        ThreadStats::incr(&w.stats.delete_misses);
    }
    outcome
}

/// `delete <key>`: DELETED or NOT_FOUND.
pub fn text(w: &Worker, key: &[u8], noreply: bool, out: &mut Vec<u8>) {
    let text = match delete(w, key, None) {
        Deleted::Deleted => reply::DELETED,
        Deleted::NotFound | Deleted::Exists | Deleted::Failed => reply::NOT_FOUND,
    };
    respond(out, noreply, text);
}

/// Binary `DELETE`/`DELETEQ`, conditional on a non-zero CAS attribute.
pub fn binary(w: &Worker, attrs: &Attrs, key: &[u8], out: &mut Vec<u8>) {
    let status = match delete(w, key, attrs.compare_cas()) {
        Deleted::Deleted => return binary::reply::ok(out, attrs, 0),
        Deleted::NotFound => Status::KeyNotFound,
        Deleted::Exists => Status::KeyExists,
        Deleted::Failed => Status::OutOfMemory,
    };
    binary::reply::status(out, attrs, status);
}
