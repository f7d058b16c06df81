//! `ma <key> <flags>*`: incr/decr with auto-create, CAS and TTL.

use super::{cas, number, status};
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
    let vivify = number::<i64>(&flags, b'N').map(|ttl| {
        (
            initial,
            StoreOptions {
                exptime: clock.expiry(ttl),
                ..StoreOptions::default()
            },
        )
    });
    let opts = DeltaOptions {
        vivify,
        compare_cas: number(&flags, b'C'),
        new_cas: number(&flags, b'E'),
        new_exptime: number::<i64>(&flags, b'T').map(|t| clock.expiry(t)),
    };
    let (value, new_cas, exptime) = match incr_decr(w, key, delta, incr, opts) {
        Ok(Delta::Value(v, c, e)) | Ok(Delta::Created(v, c, e)) => (v, c, e),
        Ok(Delta::NotFound) => {
            if !flags.quiet() {
                status(out, meta::NF, &flags, key);
            }
            return;
        }
        Ok(Delta::Exists) => {
            status(out, meta::EX, &flags, key);
            return;
        }
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
    if flags.quiet() && !with_value {
        return;
    }
    if with_value {
        let digits = value.checked_ilog10().map_or(1, |d| d as usize + 1);
        reply::meta_value_header(out, digits);
    } else {
        reply::meta_header(out, meta::HD);
    }
    // The expiry the update itself wrote, rather than a second lookup (which costs a
    // shard lock and could see a later writer's item).
    let ttl = match exptime {
        0 => None,
        e => Some(e.saturating_sub(clock.now())),
    };
    for (f, tok) in flags.iter() {
        match f {
            b'c' => reply::meta_flag_u64(out, b'c', cas(w, new_cas)),
            b't' => match ttl {
                None => reply::meta_flag_i64(out, b't', -1),
                Some(t) => reply::meta_flag_u64(out, b't', u64::from(t)),
            },
            b'O' => reply::meta_opaque(out, tok),
            b'k' => reply::meta_key(out, key, flags.base64()),
            _ => {}
        }
    }
    reply::crlf(out);
    if with_value {
        reply::push_u64(out, value);
        reply::crlf(out);
    }
}
