//! `get`, `gets`, `gat`, `gats`.
//!
//! These are the commands one short line can turn into hundreds of megabytes of replies,
//! so they generate replies only while the connection's [`ReplyWindow`] has room: past
//! the high-water mark they stop, remember the next key, and return [`Flow::Suspend`];
//! the connection writes what is pending and runs the same request again from there.
//! Every key is counted (and touched, for `gat`) exactly once.

use super::{visible_cas, Flow};
use crate::detail::PrefixOp;
use crate::reply_window::{ReplyWindow, Room};
use crate::stats::ThreadStats;
use crate::worker::Worker;
use shoal_protocol::{reply, Keys};

/// Bytes a `VALUE <key> <flags> <bytes> [<cas>]\r\n` header and the data's `\r\n` add at
/// most to a value of `key`.
fn reply_len(key: &[u8], value_len: usize) -> usize {
    const FIXED: usize = b"VALUE ".len() + 1 + 10 + 1 + 20 + 1 + 20 + 2 + 2;
    FIXED + key.len() + value_len
}

/// What serving one key did.
enum Served {
    /// Found; the value's length.
    Hit(usize),
    Miss,
    /// Not served: no room now (`Later`) or ever (`Never`).
    NoRoom(Room),
}

/// Tells `watch fetchers` and `stats detail` about one key served.
#[inline]
fn watch_fetch(w: &Worker, key: &[u8], served: &Served) {
    let found = match served {
        Served::Hit(len) => Some(*len),
        _ => None,
    };
    w.shared.watchers.fetched(key, found, w.current_conn.get());
    let hit = found.is_some();
    w.shared.prefixes.record(key, PrefixOp::Get { hit });
}

/// Ends a retrieval that stopped on `room` at the key starting at `at`.
fn stop(window: &mut ReplyWindow, room: Room, at: usize, out: &mut Vec<u8>) -> Flow {
    if room == Room::Never {
        window.resume_at = 0;
        out.extend_from_slice(reply::OUT_OF_MEMORY_WRITING_GET);
        Flow::Continue
    } else {
        window.resume_at = at;
        Flow::Suspend
    }
}

/// `get`/`gets`: one VALUE block per key found, then END.
pub fn get(
    w: &Worker,
    keys: Keys<'_>,
    with_cas: bool,
    window: &mut ReplyWindow,
    out: &mut Vec<u8>,
) -> Flow {
    let store = &w.shared.store;
    let s = &w.stats;
    for (at, key) in keys.iter_from(window.resume_at) {
        let served = store.get(key, |item| {
            match window.room(out, reply_len(key, item.value().len())) {
                Room::Now => {
                    let cas = with_cas.then(|| visible_cas(w, item.cas()));
                    reply::value(out, key, item.flags(), item.value(), cas);
                    Served::Hit(item.value().len())
                }
                room => Served::NoRoom(room),
            }
        });
        let served = served.unwrap_or(Served::Miss);
        if let Served::NoRoom(room) = served {
            return stop(window, room, at, out);
        }
        ThreadStats::incr(&s.cmd_get);
        ThreadStats::incr(match served {
            Served::Hit(_) => &s.get_hits,
            _ => &s.get_misses,
        });
        watch_fetch(w, key, &served);
    }
    window.resume_at = 0;
    reply::end(out);
    Flow::Continue
}

/// `gat`/`gats`: like get, also setting each found item's expiry. Counted as touches only
/// (cmd_touch, touch_hits/misses), not gets, as memcached does.
pub fn get_and_touch(
    w: &Worker,
    exptime: i64,
    keys: Keys<'_>,
    with_cas: bool,
    window: &mut ReplyWindow,
    out: &mut Vec<u8>,
) -> Flow {
    let store = &w.shared.store;
    let s = &w.stats;
    let expiry = store.clock().expiry(exptime);
    let mut writer = w.writer.borrow_mut();
    for (at, key) in keys.iter_from(window.resume_at) {
        let served = store.update(&mut writer, key, |e| {
            // Room is checked before the touch, so a key put off for later is touched
            // exactly once, when it is served.
            let Some(item) = e.item() else {
                return Ok(Served::Miss);
            };
            match window.room(out, reply_len(key, item.value().len())) {
                Room::Now => {}
                room => return Ok(Served::NoRoom(room)),
            }
            if !e.set_exptime(expiry)? {
                return Ok(Served::Miss);
            }
            let Some(item) = e.item() else {
                return Ok(Served::Miss);
            };
            let cas = with_cas.then(|| visible_cas(w, item.cas()));
            reply::value(out, key, item.flags(), item.value(), cas);
            item.mark_fetched();
            Ok(Served::Hit(item.value().len()))
        });
        let served = served.unwrap_or(Served::Miss);
        if let Served::NoRoom(room) = served {
            return stop(window, room, at, out);
        }
        ThreadStats::incr(&s.cmd_touch);
        ThreadStats::incr(match served {
            Served::Hit(_) => &s.touch_hits,
            _ => &s.touch_misses,
        });
        watch_fetch(w, key, &served);
    }
    window.resume_at = 0;
    reply::end(out);
    Flow::Continue
}
