//! `md <key> <flags>*`: delete, compare-and-delete, invalidate (mark stale).

use super::{number, status};
use crate::stats::ThreadStats;
use crate::worker::Worker;
use shoal_protocol::reply::{self, code as meta};
use shoal_protocol::MetaFlags;
use shoal_store::StoreOptions;

/// `md`.
pub fn meta_delete(w: &Worker, raw_key: &[u8], flags: MetaFlags<'_>, out: &mut Vec<u8>) {
    let mut buf = [0u8; 256];
    let Some(key) = super::key(raw_key, &flags, &mut buf, out) else {
        return;
    };
    let compare: Option<u64> = number(&flags, b'C');
    let new_cas: Option<u64> = number(&flags, b'E');
    let ttl: Option<i64> = number(&flags, b'T');
    let invalidate = flags.has(b'I');
    let clear_value = flags.has(b'x');
    let cas_enabled = w.shared.settings.cas_enabled;
    let store = &w.shared.store;
    let mut writer = w.writer.borrow_mut();
    let result = store.update(&mut writer, key, |e| {
        let Some(item) = e.item() else {
            return Ok((meta::NF, false));
        };
        let cur_cas = if cas_enabled { item.cas() } else { 0 };
        if compare.is_some_and(|c| c != cur_cas) {
            return Ok((meta::EX, false));
        }
        if invalidate || clear_value {
            // Keep the item but mark it stale (I) and/or drop its value (x); the next
            // fetch wins the right to recache it. A new CAS unique is issued.
            let exptime = match ttl {
                Some(t) => e.expiry(t),
                None => item.exptime(),
            };
            let opts = StoreOptions {
                flags: if clear_value { 0 } else { item.flags() },
                exptime,
                cas: new_cas,
                stale: invalidate || item.stale(),
                win_sent: false,
            };
            // Rewritten in place from the old item: no copy of the value per request.
            e.rewrite(!clear_value, opts)?;
            return Ok((meta::HD, false));
        }
        e.remove();
        Ok((meta::HD, true))
    });
    let (code, removed) = match result {
        Ok(c) => c,
        Err(_) => {
            out.extend_from_slice(reply::OUT_OF_MEMORY_STORING);
            return;
        }
    };
    let s = &w.stats;
    // As memcached: only a removal is a delete hit; misses, CAS mismatches and a stale
    // mark (I) are not.
    w.shared
        .prefixes
        .record(key, crate::detail::PrefixOp::Delete);
    if removed {
        w.shared.watchers.deleted(key, "md");
        ThreadStats::incr(&s.delete_hits);
    } else if code != meta::HD {
        ThreadStats::incr(&s.delete_misses);
    }
    if flags.quiet() && (code == meta::HD || code == meta::NF) {
        return;
    }
    status(out, code, &flags, key);
}
