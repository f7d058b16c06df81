//! `ma <key> <flags>*`: incr/decr with auto-create, CAS and TTL.
//!
//! As memcached 1.6.45 does, the operation happens first and the reply flags are then
//! read in request order: a `t` before a `T` (or, for a created counter, before the `N`)
//! shows the expiry from before it; an over-long opaque is found only then, after the
//! counter has changed. Quiet mode hides a successful reply, value and all.

use super::{cas, number, opaque, status};
use crate::commands::arithmetic::{incr_decr, Delta, DeltaOptions};
use crate::worker::Worker;
use shoal_protocol::reply::{self, code as meta};
use shoal_protocol::{MetaFlags, MetaMode};
use shoal_store::StoreOptions;

/// `ma`.
pub fn meta_arithmetic(w: &Worker, raw_key: &[u8], flags: MetaFlags<'_>, out: &mut Vec<u8>) {
    let mut buf = [0u8; 256];
    let Some(key) = super::key(raw_key, &flags, &mut buf, out) else {
        return;
    };
    let incr = !matches!(flags.mode(), Ok(Some(MetaMode::Decr)));
    let delta: u64 = number(&flags, b'D').unwrap_or(1);
    let initial: u64 = number(&flags, b'J').unwrap_or(0);
    let clock = w.shared.store.clock();
    let touch = number::<i64>(&flags, b'T').map(|t| clock.expiry(t));
    let vivify = number::<i64>(&flags, b'N').map(|t| clock.expiry(t));
    // The expiry the flags leave, in order: `T` for any counter, `N` only for a created
    // one (which starts with none).
    let mut on_created = 0;
    for (f, _) in flags.iter() {
        match f {
            b'T' => on_created = touch.unwrap_or(0),
            b'N' => on_created = vivify.unwrap_or(0),
            _ => {}
        }
    }
    let new_cas: Option<u64> = number(&flags, b'E');
    let opts = DeltaOptions {
        vivify: vivify.map(|_| {
            (
                initial,
                StoreOptions {
                    exptime: on_created,
                    cas: new_cas,
                    ..StoreOptions::default()
                },
            )
        }),
        compare_cas: number(&flags, b'C'),
        new_cas,
        new_exptime: touch,
    };
    let (counter, created) = match incr_decr(w, key, delta, incr, opts) {
        Ok(Delta::Value(c)) => (c, false),
        Ok(Delta::Created(c)) => (c, true),
        Ok(Delta::NotFound) => return status(out, meta::NF, &flags, key),
        Ok(Delta::Exists) => return status(out, meta::EX, &flags, key),
        Ok(Delta::NonNumeric) => {
            out.extend_from_slice(reply::NON_NUMERIC);
            return;
        }
        Err(_) => {
            out.extend_from_slice(b"SERVER_ERROR out of memory\r\n");
            return;
        }
    };
    let with_value = flags.has(b'v');
    let start = out.len();
    if with_value {
        let digits = counter.value.checked_ilog10().map_or(1, |d| d as usize + 1);
        reply::meta_value_header(out, digits);
    } else {
        reply::meta_header(out, meta::HD);
    }
    let now = clock.now();
    let mut exptime = counter.was;
    for (f, tok) in flags.iter() {
        match f {
            b'c' => reply::meta_flag_u64(out, b'c', cas(w, counter.cas)),
            b't' => super::ttl_flag(out, exptime, now),
            b'T' => exptime = touch.unwrap_or(0),
            b'N' if created => exptime = vivify.unwrap_or(0),
            b'O' => {
                if let Err(e) = opaque(out, tok) {
                    out.truncate(start);
                    out.extend_from_slice(e.reply());
                    return;
                }
            }
            b'k' => reply::meta_key(out, key, flags.base64()),
            _ => {}
        }
    }
    if flags.quiet() {
        out.truncate(start);
        return;
    }
    reply::crlf(out);
    if with_value {
        reply::push_u64(out, counter.value);
        reply::crlf(out);
    }
}
