//! `ms <key> <datalen> <flags>*`: store with modes, compare-and-swap, invalidation.

use super::{cas, number};
use crate::commands::storage::{fits, too_large, watch_store, Stored};
use crate::stats::ThreadStats;
use crate::worker::Worker;
use shoal_protocol::reply::{self, code as meta};
use shoal_protocol::{MetaFlags, MetaMode, StoreKind};
use shoal_store::{StoreError, StoreOptions};

/// `ms`.
pub fn meta_set(w: &Worker, raw_key: &[u8], flags: MetaFlags<'_>, data: &[u8], out: &mut Vec<u8>) {
    let mut buf = [0u8; 256];
    let Some(key) = super::key(raw_key, &flags, &mut buf, out) else {
        return;
    };
    let s = &w.stats;
    if !fits(w, key.len(), data.len()) {
        too_large(w, key, false, true);
        out.extend_from_slice(reply::OBJECT_TOO_LARGE);
        return;
    }
    let mode = flags.mode().ok().flatten().unwrap_or(MetaMode::Set);
    let client_flags: u32 = number(&flags, b'F').unwrap_or(0);
    let ttl: i64 = number(&flags, b'T').unwrap_or(0);
    let compare: Option<u64> = number(&flags, b'C');
    let new_cas: Option<u64> = number(&flags, b'E');
    let vivify: Option<i64> = number(&flags, b'N');
    let invalidate = flags.has(b'I');
    let cas_enabled = w.shared.settings.cas_enabled;
    let store = &w.shared.store;
    let mut writer = w.writer.borrow_mut();
    let result = store.update(&mut writer, key, |e| {
        let opts = StoreOptions {
            flags: client_flags,
            exptime: e.expiry(ttl),
            cas: new_cas,
            ..StoreOptions::default()
        };
        let current = e.item().map(|i| {
            (
                if cas_enabled { i.cas() } else { 0 },
                i.exptime(),
                i.win_sent(),
            )
        });
        if let Some(expected) = compare {
            let Some((cur_cas, cur_exp, win)) = current else {
                return Ok(Stored::NotFound);
            };
            if cur_cas != expected {
                // With I, an older CAS still lands, but as a stale value that keeps the
                // item's expiry and win state, so a slow writer cannot resurrect data.
                if invalidate
                    && expected < cur_cas
                    && matches!(mode, MetaMode::Set | MetaMode::Replace)
                {
                    let stale = StoreOptions {
                        exptime: cur_exp,
                        stale: true,
                        win_sent: win,
                        ..opts
                    };
                    return Ok(Stored::Stored(e.store(&[data], stale)?));
                }
                return Ok(Stored::Exists);
            }
        }
        let exists = current.is_some();
        Ok(match mode {
            MetaMode::Set => Stored::Stored(e.store(&[data], opts)?),
            MetaMode::Add if exists => Stored::NotStored,
            MetaMode::Replace if !exists => Stored::NotStored,
            MetaMode::Add | MetaMode::Replace => Stored::Stored(e.store(&[data], opts)?),
            MetaMode::Append | MetaMode::Prepend if !exists => match vivify {
                Some(n) => {
                    let viv = StoreOptions {
                        exptime: e.expiry(n),
                        ..opts
                    };
                    Stored::Stored(e.store(&[data], viv)?)
                }
                None => Stored::NotStored,
            },
            MetaMode::Append | MetaMode::Prepend => {
                match e.append(data, mode == MetaMode::Prepend)? {
                    Some(c) => Stored::Stored(c),
                    None => Stored::NotStored,
                }
            }
            MetaMode::Incr | MetaMode::Decr => Stored::NotStored,
        })
    });
    // Released before `counted` may remove the old value (memcached removes it after a
    // refusal in every mode: "avoid stale data persisting in cache").
    drop(writer);
    crate::commands::storage::counted(w, key, &result, true);
    w.shared.prefixes.record(key, crate::detail::PrefixOp::Set);
    if w.shared.watchers.watching(crate::watch::kind::MUTATIONS) {
        let kind = match mode {
            MetaMode::Add => StoreKind::Add,
            MetaMode::Replace => StoreKind::Replace,
            MetaMode::Append => StoreKind::Append,
            MetaMode::Prepend => StoreKind::Prepend,
            _ if compare.is_some() => StoreKind::Cas,
            _ => StoreKind::Set,
        };
        let exptime = store.clock().expiry(ttl);
        watch_store(w, kind, key, data.len(), exptime, &result);
    }
    let (code, new) = match result {
        Ok(Stored::Stored(c)) => (meta::HD, Some(c)),
        Ok(Stored::NotStored) => (meta::NS, None),
        Ok(Stored::Exists) => (meta::EX, None),
        Ok(Stored::NotFound) => (meta::NF, None),
        Err(StoreError::TooLarge) => {
            out.extend_from_slice(reply::OBJECT_TOO_LARGE);
            return;
        }
        Err(StoreError::OutOfMemory) => {
            out.extend_from_slice(reply::OUT_OF_MEMORY_STORING);
            return;
        }
    };
    if compare.is_some() {
        ThreadStats::incr(match code {
            c if c == meta::HD => &s.cas_hits,
            c if c == meta::EX => &s.cas_badval,
            _ => &s.cas_misses,
        });
    }
    if code == meta::HD && flags.quiet() {
        return;
    }
    reply::meta_header(out, code);
    for (f, tok) in flags.iter() {
        match f {
            b'O' => reply::meta_opaque(out, tok),
            b'k' => reply::meta_key(out, key, flags.base64()),
            // memcached reports the stored item's CAS, and 0 when nothing was stored.
            b'c' => reply::meta_flag_u64(out, b'c', new.map_or(0, |c| cas(w, c))),
            _ => {}
        }
    }
    reply::crlf(out);
}
