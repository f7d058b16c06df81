//! `ms <key> <datalen> <flags>*`: store with modes, compare-and-swap, invalidation.

use super::{cas, number};
use crate::commands::storage::{self, Accounting, StoreSpec, Stored};
use crate::worker::Worker;
use shoal_protocol::reply::{self, code as meta};
use shoal_protocol::{MetaFlags, MetaMode, ProtocolError, StoreKind};
use shoal_store::{StoreError, StoreOptions};

/// `ms`: every mode is a [`StoreSpec`] for the shared storage path, with meta's
/// accounting; only the reply is meta's own.
pub fn meta_set(w: &Worker, raw_key: &[u8], flags: MetaFlags<'_>, data: &[u8], out: &mut Vec<u8>) {
    let mut buf = [0u8; 256];
    let Some(key) = super::key(raw_key, &flags, &mut buf, out) else {
        return;
    };
    let mode = flags.mode().ok().flatten().unwrap_or(MetaMode::Set);
    let compare: Option<u64> = number(&flags, b'C');
    let kind = match mode {
        MetaMode::Add => StoreKind::Add,
        MetaMode::Replace => StoreKind::Replace,
        MetaMode::Append => StoreKind::Append,
        MetaMode::Prepend => StoreKind::Prepend,
        // `watch mutations` names a set with a CAS `cas`, as memcached does.
        MetaMode::Set if compare.is_some() => StoreKind::Cas,
        MetaMode::Set => StoreKind::Set,
        // The parser accepts only E, A, P, R and S modes for `ms`.
        MetaMode::Incr | MetaMode::Decr => {
            out.extend_from_slice(ProtocolError::InvalidMsMode.reply());
            return;
        }
    };
    let clock = w.shared.store.clock();
    let ttl: i64 = number(&flags, b'T').unwrap_or(0);
    let spec = StoreSpec {
        kind,
        key,
        data,
        opts: StoreOptions {
            flags: number(&flags, b'F').unwrap_or(0),
            exptime: clock.expiry(ttl),
            cas: number(&flags, b'E'),
            // Only the `c` flag returns the new CAS unique.
            private_cas: !flags.has(b'c'),
            ..StoreOptions::default()
        },
        compare_cas: compare,
        invalidate: flags.has(b'I'),
        vivify: number::<i64>(&flags, b'N').map(|n| clock.expiry(n)),
        accounting: Accounting::Meta,
    };
    let result = storage::store(w, &spec);
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
