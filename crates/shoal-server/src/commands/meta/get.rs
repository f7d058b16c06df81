//! `mg <key> <flags>*`: fetch with return flags, touch, vivify-on-miss and recache wins.
//!
//! As memcached 1.6.45 does, the flags act in the order they were sent, on the item
//! while its reply line is written: a `t` before a `T` shows the TTL from before the
//! touch, one after it the new TTL; `h` and `l` show the item as it was before this fetch
//! (the fetch marks it afterwards, unless `u`); an over-long opaque is found where it
//! stands, after the flags before it have acted.

use super::{cas, number, opaque, status, ttl_flag};
use crate::commands::{Flow, Out};
use crate::stats::ThreadStats;
use crate::worker::Worker;
use shoal_protocol::reply::{self, code as meta};
use shoal_protocol::{MetaFlags, ProtocolError};
use shoal_store::{EntryError, StoreOptions};

/// What an `mg` did.
enum Fetch {
    /// Served (found or created); the value's length, whether `T` touched it, and the
    /// item's memcached slab class.
    Hit {
        len: usize,
        touched: bool,
        class: usize,
    },
    /// No item, none created.
    Miss,
    /// The reply could not be written (an over-long opaque).
    Refused(ProtocolError),
}

/// `mg`. A value long enough is sent from segment memory (see [`Out`]).
/// [`Flow::Suspend`] with nothing written while the value is read from flash.
pub fn meta_get<'w>(
    w: &'w Worker,
    raw_key: &[u8],
    flags: MetaFlags<'_>,
    output: &mut Out<'w>,
) -> Flow {
    let mut buf = [0u8; 256];
    let Some(key) = super::key(raw_key, &flags, &mut buf, output.bytes()) else {
        return Flow::Continue;
    };
    let s = &w.stats;
    let store = &w.shared.store;
    let touch: Option<i64> = number(&flags, b'T');
    let vivify: Option<i64> = number(&flags, b'N');
    let recache: Option<i64> = number(&flags, b'R');
    let compare: Option<u64> = number(&flags, b'C');
    let new_cas: Option<u64> = number(&flags, b'E');
    let no_bump = flags.has(b'u');
    // The flags for which memcached locks the item and marks it fetched only once the
    // reply is written (so `h` and `l` see it as it was).
    let locked = [b'N', b'T', b'R', b'l', b'h'].iter().any(|&f| flags.has(f));
    // The expiry the flags leave, in request order: `T` for any item, `N` only for one
    // this fetch creates (which starts with none).
    let mut on_created = 0;
    for (f, _) in flags.iter() {
        match f {
            b'T' => on_created = store.clock().expiry(touch.unwrap_or(0)),
            b'N' => on_created = store.clock().expiry(vivify.unwrap_or(0)),
            _ => {}
        }
    }
    let base = output.bytes().len();
    let mut writer = w.writer.borrow_mut();
    let mut reads = w.flash_reads.borrow_mut();
    let found = store.update_fetching(
        &mut writer,
        key,
        &mut reads,
        |e| -> Result<Fetch, EntryError> {
            // The closure may run again (after room is made for a write); each run makes at
            // most one change, first, so a run that fails has changed nothing.
            output.bytes().truncate(base);
            if flags.has(b'v') {
                e.load_value()?;
            }
            let (created, was) = match e.item() {
                Some(item) => (false, item.exptime()),
                None if vivify.is_some() => (true, 0),
                None => {
                    e.read_missed();
                    return Ok(Fetch::Miss);
                }
            };
            if created {
                // An empty placeholder that this client wins the right to fill in.
                e.store(
                    &[],
                    StoreOptions {
                        exptime: on_created,
                        cas: new_cas,
                        ..StoreOptions::default()
                    },
                )?;
            } else if let Some(t) = touch {
                let exptime = e.expiry(t);
                e.set_exptime(exptime)?;
            }
            let Some(item) = e.item() else {
                return Ok(Fetch::Miss);
            };
            // A matching `C` means the client has this value already: no value is sent.
            let with_value =
                flags.has(b'v') && !matches!(compare, Some(c) if c == cas(w, item.cas()));
            let len = item.value_len();
            let start = output.bytes().len();
            let out = output.bytes();
            if with_value {
                reply::meta_value_header(out, len);
            } else {
                reply::meta_header(out, meta::HD);
            }
            let mut won = false;
            let mut touched = false;
            // The item's expiry as the flags read so far have left it.
            let mut exptime = was;
            for (f, tok) in flags.iter() {
                let out = output.bytes();
                match f {
                    b'T' => {
                        touched = true;
                        exptime = e.expiry(touch.unwrap_or(0));
                    }
                    b'N' if created => {
                        exptime = e.expiry(vivify.unwrap_or(0));
                        won = true;
                    }
                    b'R' => {
                        let at = e.expiry(recache.unwrap_or(0));
                        if !item.win_sent() && !created && exptime != 0 && exptime < at {
                            won = true;
                        }
                    }
                    b'O' => {
                        if let Err(err) = opaque(out, tok) {
                            out.truncate(start);
                            // Without a flag that makes memcached lock the item, it marked
                            // the item fetched when it looked it up, before the error.
                            if !locked && !no_bump {
                                item.mark_fetched();
                            }
                            return Ok(Fetch::Refused(err));
                        }
                    }
                    b'k' => reply::meta_key(out, key, flags.base64()),
                    b's' => reply::meta_flag_u64(out, b's', len as u64),
                    b't' => ttl_flag(out, exptime, e.now()),
                    b'c' => reply::meta_flag_u64(out, b'c', cas(w, item.cas())),
                    b'f' => reply::meta_flag_u64(out, b'f', u64::from(item.flags())),
                    b'l' => reply::meta_flag_u64(out, b'l', u64::from(item.idle_seconds())),
                    b'h' => reply::meta_flag_u64(out, b'h', u64::from(item.fetched())),
                    _ => {}
                }
            }
            // Z before W, so a client never sees both for one fetch.
            if item.win_sent() {
                reply::meta_flag(output.bytes(), b'Z', b"");
            }
            if item.stale() {
                reply::meta_flag(output.bytes(), b'X', b"");
                if !item.win_sent() {
                    won = true;
                }
            }
            if won {
                reply::meta_flag(output.bytes(), b'W', b"");
                item.take_win();
            }
            reply::crlf(output.bytes());
            if with_value {
                let value = item.value();
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
            let class = store.slab_class(&item);
            Ok(Fetch::Hit {
                len,
                touched,
                class,
            })
        },
    );
    drop((writer, reads));
    let found = match found {
        Ok(Some(f)) => f,
        Ok(None) => return Flow::Suspend,
        Err(_) => {
            output
                .bytes()
                .extend_from_slice(reply::OUT_OF_MEMORY_STORING);
            return Flow::Continue;
        }
    };
    // memcached counts nothing for a fetch whose reply failed.
    let (hit, touched, class) = match found {
        Fetch::Hit { touched, class, .. } => (true, touched, class),
        Fetch::Miss => (false, false, 0),
        Fetch::Refused(e) => {
            output.bytes().extend_from_slice(e.reply());
            return Flow::Continue;
        }
    };
    let len = match found {
        Fetch::Hit { len, .. } => Some(len),
        _ => None,
    };
    w.shared.watchers.fetched(key, len, w.current_conn.get());
    w.shared
        .prefixes
        .record(key, crate::detail::PrefixOp::Get { hit });
    // A touch is counted as one only on a hit: on a miss memcached never reaches the `T`.
    if touched {
        ThreadStats::incr(&s.cmd_touch);
        ThreadStats::incr(&s.class(class).touch_hits);
    } else {
        ThreadStats::incr(&s.cmd_get);
        ThreadStats::incr(if hit {
            &s.class(class).get_hits
        } else {
            &s.get_misses
        });
    }
    if !hit {
        // Quiet mode hides the miss, but not an over-long opaque in it.
        let start = output.bytes().len();
        status(output.bytes(), meta::EN, &flags, key);
        let refused = output
            .bytes()
            .get(start..)
            .is_some_and(|r| r.starts_with(b"CLIENT_ERROR"));
        if flags.quiet() && !refused {
            output.bytes().truncate(start);
        }
    }
    Flow::Continue
}
