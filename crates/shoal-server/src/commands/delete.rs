//! `delete`, binary `DELETE`/`DELETEQ` and meta `md`: one [`delete`] for all three,
//! answered per protocol.

use super::respond;
use super::storage::Accounting;
use crate::stats::ThreadStats;
use crate::worker::Worker;
use shoal_protocol::binary::{self, Attrs, Status};
use shoal_protocol::reply;
use shoal_store::StoreOptions;

/// The outcome of a delete, whichever protocol asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deleted {
    /// The item was removed.
    Deleted,
    /// `md I`/`md x`: the item was kept, marked stale and/or emptied.
    Marked,
    /// No such item.
    NotFound,
    /// The item's CAS unique differs from the one the request named.
    Exists,
    /// The store could not be updated.
    Failed,
}

/// `md I` and `md x`: keep the item instead of removing it, as memcached 1.6.45 does.
///
/// `x` replaces the item with an empty one: client flags from `F` (else 0), expiry from
/// `T` (else none), the old CAS unique (or `E`'s), nothing fetched, stale or won. `I`
/// marks the item stale so the next fetch wins the right to recache it: a new CAS unique
/// (or `E`'s), expiry from `T` (else the item's), the win handed back; the value, flags
/// and fetched state stay. Both: `x`'s item, marked as `I` marks.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mark {
    /// `I`: mark the item stale.
    pub stale: bool,
    /// `x`: drop the value.
    pub clear_value: bool,
    /// `T`: the new expiry (already absolute).
    pub expiry: Option<u32>,
    /// `E`: the new CAS unique.
    pub new_cas: Option<u64>,
    /// `F`: the client flags of `x`'s empty item.
    pub flags: Option<u32>,
}

/// One delete as every protocol asks for it.
#[derive(Debug, Clone, Copy)]
pub struct DeleteSpec<'a> {
    /// The key (decoded, for base64 meta keys).
    pub key: &'a [u8],
    /// Delete only if the item's CAS unique equals this (binary CAS field, `md C`).
    pub compare_cas: Option<u64>,
    /// `md I`/`md x`: mark instead of removing.
    pub mark: Option<Mark>,
    /// Whose counting rules apply: `md` leaves a failed update out of `delete_misses`
    /// and names itself `md` to `watch deletions`.
    pub accounting: Accounting,
}

/// The delete of every protocol (text `delete`, binary `DELETE`, meta `md`): removes the
/// key, or marks it for `md I`/`x`, only if its CAS unique equals `compare_cas` when that
/// is given. As memcached, only a removal is a `delete_hits`; a miss and a CAS mismatch
/// are `delete_misses`, a mark neither. Tells `watch deletions` about a removal and
/// `stats detail` about every attempt.
pub fn delete(w: &Worker, spec: &DeleteSpec<'_>) -> Deleted {
    let cas_enabled = w.shared.settings.cas_enabled;
    let mut writer = w.writer.borrow_mut();
    // memcached's lookup before the delete is an `item_get` line for `watch fetchers`,
    // and its `deleted` line carries the value's size.
    let before = std::cell::Cell::new(None);
    let class = std::cell::Cell::new(0);
    let store = &w.shared.store;
    let outcome = store
        .update(&mut writer, spec.key, |e| {
            before.set(e.item().map(|i| i.value_len()));
            class.set(e.item().map_or(0, |i| store.slab_class(&i)));
            let Some(item) = e.item() else {
                return Ok(Deleted::NotFound);
            };
            if let Some(expected) = spec.compare_cas {
                let cas = if cas_enabled { item.cas() } else { 0 };
                if cas != expected {
                    return Ok(Deleted::Exists);
                }
            }
            if let Some(mark) = spec.mark {
                let fetched = item.fetched();
                let opts = if mark.clear_value {
                    StoreOptions {
                        flags: mark.flags.unwrap_or(0),
                        exptime: mark.expiry.unwrap_or(0),
                        // The empty item takes the old CAS unique, unless `I` then gives
                        // it a new one.
                        cas: mark.new_cas.or((!mark.stale).then(|| item.cas())),
                        stale: mark.stale,
                        ..StoreOptions::default()
                    }
                } else {
                    StoreOptions {
                        flags: item.flags(),
                        exptime: mark.expiry.unwrap_or(item.exptime()),
                        cas: mark.new_cas,
                        stale: true,
                        ..StoreOptions::default()
                    }
                };
                // Rewritten in place from the old item: no copy of the value per request.
                e.rewrite(!mark.clear_value, opts)?;
                if fetched && !mark.clear_value {
                    if let Some(marked) = e.item() {
                        marked.mark_fetched();
                    }
                }
                return Ok(Deleted::Marked);
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
        .watchers
        .fetched(spec.key, before.get(), w.current_conn.get());
    if outcome == Deleted::Failed && spec.accounting == Accounting::Meta {
        return outcome;
    }
    w.shared
        .prefixes
        .record(spec.key, crate::detail::PrefixOp::Delete);
    match outcome {
        Deleted::Deleted => {
            let cmd = match spec.accounting {
                Accounting::Classic => "delete",
                Accounting::Meta => "md",
            };
            w.shared
                .watchers
                .deleted(spec.key, cmd, before.get().unwrap_or(0));
            ThreadStats::incr(&w.stats.class(class.get()).delete_hits);
        }
        Deleted::Marked => {}
        Deleted::NotFound | Deleted::Exists | Deleted::Failed => {
            ThreadStats::incr(&w.stats.delete_misses)
        }
    }
    outcome
}

/// A classic (text or binary) delete of `key`.
fn classic(key: &[u8], compare_cas: Option<u64>) -> DeleteSpec<'_> {
    DeleteSpec {
        key,
        compare_cas,
        mark: None,
        accounting: Accounting::Classic,
    }
}

/// `delete <key>`: DELETED or NOT_FOUND.
pub fn text(w: &Worker, key: &[u8], noreply: bool, out: &mut Vec<u8>) {
    let text = match delete(w, &classic(key, None)) {
        Deleted::Deleted => reply::DELETED,
        Deleted::Marked | Deleted::NotFound | Deleted::Exists | Deleted::Failed => reply::NOT_FOUND,
    };
    respond(out, noreply, text);
}

/// Binary `DELETE`/`DELETEQ`, conditional on a non-zero CAS attribute.
pub fn binary(w: &Worker, attrs: &Attrs, key: &[u8], out: &mut Vec<u8>) {
    let status = match delete(w, &classic(key, attrs.compare_cas())) {
        Deleted::Deleted | Deleted::Marked => return binary::reply::ok(out, attrs, 0),
        Deleted::NotFound => Status::KeyNotFound,
        Deleted::Exists => Status::KeyExists,
        Deleted::Failed => Status::OutOfMemory,
    };
    binary::reply::status(out, attrs, status);
}
