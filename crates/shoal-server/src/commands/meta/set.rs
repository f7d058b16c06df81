//! `ms <key> <datalen> <flags>*`: store with modes, compare-and-swap, invalidation.
//!
//! The modes map to the shared storage path as in memcached 1.6.45: a `C` turns a set or
//! a replace into a compare-and-swap (so a missing key is `NF`), makes an append or
//! prepend conditional on a matching item (a missing key stays `NS`, or is created with
//! `N`), and means nothing to an add.

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
        MetaMode::Replace if compare.is_some() => StoreKind::Cas,
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
    let appending = matches!(kind, StoreKind::Append | StoreKind::Prepend);
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
        // An add does not look at the CAS.
        compare_cas: compare.filter(|_| kind != StoreKind::Add),
        // Only a compare-and-swap may land as a stale value.
        invalidate: flags.has(b'I') && kind == StoreKind::Cas,
        vivify: number::<i64>(&flags, b'N')
            .filter(|_| appending)
            .map(|n| clock.expiry(n)),
        accounting: Accounting::Meta,
    };
    let (code, new, size) = match storage::store(w, &spec) {
        Ok(Stored::Stored(c, size)) => (meta::HD, Some(c), Some(size)),
        Ok(Stored::NotStored) => (meta::NS, None, None),
        Ok(Stored::Exists) => (meta::EX, None, None),
        Ok(Stored::NotFound) => (meta::NF, None, None),
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
            // The value's size: after an append or prepend, the whole value's.
            b's' => reply::meta_flag_u64(out, b's', size.unwrap_or(data.len()) as u64),
            _ => {}
        }
    }
    reply::crlf(out);
}
