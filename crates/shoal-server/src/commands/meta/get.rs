//! `mg <key> <flags>*`: fetch with return flags, touch, vivify-on-miss and recache wins.

use super::{cas, number, status};
use crate::commands::Out;
use crate::stats::ThreadStats;
use crate::worker::Worker;
use shoal_protocol::reply::{self, code as meta};
use shoal_protocol::MetaFlags;
use shoal_store::StoreOptions;

/// `mg`. A value long enough is sent from segment memory (see [`Out`]).
pub fn meta_get<'w>(w: &'w Worker, raw_key: &[u8], flags: MetaFlags<'_>, output: &mut Out<'w>) {
    let mut buf = [0u8; 256];
    let Some(key) = super::key(raw_key, &flags, &mut buf, output.bytes()) else {
        return;
    };
    let s = &w.stats;
    let store = &w.shared.store;
    let touch: Option<i64> = number(&flags, b'T');
    let vivify: Option<i64> = number(&flags, b'N');
    let recache: Option<i64> = number(&flags, b'R');
    let with_value = flags.has(b'v');
    let no_bump = flags.has(b'u');
    let mut writer = w.writer.borrow_mut();
    let found = store.update(&mut writer, key, |e| {
        let mut won = false;
        if e.item().is_none() {
            let Some(ttl) = vivify else {
                return Ok(None);
            };
            // An empty placeholder: this client wins the right to fill it in.
            let exptime = e.expiry(ttl);
            e.store(
                &[],
                StoreOptions {
                    exptime,
                    ..StoreOptions::default()
                },
            )?;
            won = true;
        } else if let Some(ttl) = touch {
            let exptime = e.expiry(ttl);
            e.set_exptime(exptime)?;
        }
        let recache_at = recache.map(|r| e.expiry(r));
        let Some(item) = e.item() else {
            return Ok(None);
        };
        if let Some(at) = recache_at {
            if !won && !item.win_sent() && item.exptime() != 0 && item.exptime() < at {
                won = true;
            }
        }
        let value = item.value();
        let out = output.bytes();
        if with_value {
            reply::meta_value_header(out, value.len());
        } else {
            reply::meta_header(out, meta::HD);
        }
        for (f, tok) in flags.iter() {
            match f {
                b's' => reply::meta_flag_u64(out, b's', value.len() as u64),
                b't' => match item.ttl() {
                    None => reply::meta_flag_i64(out, b't', -1),
                    Some(t) => reply::meta_flag_u64(out, b't', u64::from(t)),
                },
                b'c' => reply::meta_flag_u64(out, b'c', cas(w, item.cas())),
                b'f' => reply::meta_flag_u64(out, b'f', u64::from(item.flags())),
                b'l' => reply::meta_flag_u64(out, b'l', u64::from(item.idle_seconds())),
                b'h' => reply::meta_flag_u64(out, b'h', u64::from(item.fetched())),
                b'O' => reply::meta_opaque(out, tok),
                b'k' => reply::meta_key(out, key, flags.base64()),
                _ => {}
            }
        }
        // Z before W, so a client never sees both for one fetch.
        if item.win_sent() {
            reply::meta_flag(out, b'Z', b"");
        }
        if item.stale() {
            reply::meta_flag(out, b'X', b"");
            if !item.win_sent() {
                won = true;
            }
        }
        if won {
            reply::meta_flag(out, b'W', b"");
            item.take_win();
        }
        reply::crlf(out);
        if with_value {
            if output.refers(value.len()) {
                output.push_value(store.pin(&item));
            } else {
                output.bytes().extend_from_slice(value);
            }
            reply::crlf(output.bytes());
        }
        if !no_bump {
            item.mark_fetched();
        }
        Ok(Some(value.len()))
    });
    let hit = matches!(found, Ok(Some(_)));
    w.shared
        .watchers
        .fetched(key, found.ok().flatten(), w.current_conn.get());
    let op = crate::detail::PrefixOp::Get { hit };
    w.shared.prefixes.record(key, op);
    if touch.is_some() {
        ThreadStats::incr(&s.cmd_touch);
        ThreadStats::incr(if hit { &s.touch_hits } else { &s.touch_misses });
    } else {
        ThreadStats::incr(&s.cmd_get);
        ThreadStats::incr(if hit { &s.get_hits } else { &s.get_misses });
    }
    match found {
        Ok(Some(_)) => {}
        Ok(None) => {
            if !flags.quiet() {
                status(output.bytes(), meta::EN, &flags, key);
            }
        }
        Err(_) => output
            .bytes()
            .extend_from_slice(reply::OUT_OF_MEMORY_STORING),
    }
}
