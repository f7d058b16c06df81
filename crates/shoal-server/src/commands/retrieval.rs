//! `get`, `gets`, `gat`, `gats`, and binary `GET`/`GAT`/`TOUCH` in all their forms:
//! [`serve_key`] looks up, touches, counts and reports every key for every protocol;
//! only writing a hit ([`Emit`]) and framing a miss differ.
//!
//! These are the commands one short line can turn into hundreds of megabytes of replies,
//! so they generate replies only while the connection's [`ReplyWindow`] has room: past
//! the high-water mark they stop, remember the next key, and return [`Flow::Suspend`];
//! the connection writes what is pending and runs the same request again from there.
//! Every key is counted (and touched, for `gat`) exactly once.

use super::{visible_cas, Flow, Out};
use crate::detail::PrefixOp;
use crate::reply_window::{ReplyWindow, Room};
use crate::stats::ThreadStats;
use crate::worker::Worker;
use shoal_protocol::binary::{self, Attrs};
use shoal_protocol::{reply, Keys};
use shoal_store::{Fetch, Item};

/// Bytes a `VALUE <key> <flags> <bytes> [<cas>]\r\n` header and the data's `\r\n` add at
/// most to a value of `key`.
fn reply_len(key: &[u8], value_len: usize) -> usize {
    const FIXED: usize = b"VALUE ".len() + 1 + 10 + 1 + 20 + 1 + 20 + 2 + 2;
    FIXED + key.len() + value_len
}

/// What serving one key did.
pub enum Served {
    /// Found; the value's length and the item's memcached slab class.
    Hit(usize, usize),
    /// Not found (or expired, or the touch could not be stored).
    Miss,
    /// Not served: no room now (`Later`) or ever (`Never`).
    NoRoom(Room),
    /// Not served: the value is on flash, and its read is recorded in the worker's
    /// `flash_reads` for the connection to run (see `conn`). Nothing was touched or
    /// counted; the key is served when the request runs again.
    Reading,
}

/// How one protocol writes a retrieval hit: the only part of serving a key that depends
/// on the protocol. Implementations append to a reply buffer they hold, so serving a key
/// allocates nothing; a value long enough is not copied but referred to in place (pinned
/// in its segment until the reply is written, see [`Out`]).
pub trait Emit {
    /// Whether the reply to `item` fits now. Checked before a touch, so a key put off
    /// for later is touched (and counted) exactly once, when it is served.
    fn room(&mut self, key: &[u8], item: &Item<'_>) -> Room;
    /// Appends the reply to a hit.
    fn hit(&mut self, key: &[u8], item: &Item<'_>);
}

/// Serves one key of a retrieval for every protocol: looks it up (setting its expiry
/// first when `touch` is an expiry, for gat and touch), lets `emit` write a hit, then
/// counts it (`cmd_get`/`get_hits`/`get_misses`, or for touches only `cmd_touch`/
/// `touch_hits`/`touch_misses`, as memcached does) and tells `watch fetchers` and
/// `stats detail`. A key not served for want of room is neither touched nor counted.
pub fn serve_key(w: &Worker, key: &[u8], touch: Option<u32>, emit: &mut impl Emit) -> Served {
    let store = &w.shared.store;
    let s = &w.stats;
    let mut reads = w.flash_reads.borrow_mut();
    let served = match touch {
        None => match store.fetch(key, &mut reads, |item| match emit.room(key, item) {
            Room::Now => {
                emit.hit(key, item);
                Served::Hit(item.value_len(), store.slab_class(item))
            }
            room => Served::NoRoom(room),
        }) {
            Fetch::Found(served) => Some(served),
            Fetch::Missing => None,
            Fetch::Reading => return Served::Reading,
        },
        Some(expiry) => {
            let mut writer = w.writer.borrow_mut();
            let updated = store.update_fetching(&mut writer, key, &mut reads, |e| {
                e.load_value()?;
                let Some(item) = e.item() else {
                    e.read_missed();
                    return Ok(Served::Miss);
                };
                match emit.room(key, &item) {
                    Room::Now => {}
                    room => return Ok(Served::NoRoom(room)),
                }
                if !e.set_exptime(expiry)? {
                    return Ok(Served::Miss);
                }
                let Some(item) = e.item() else {
                    return Ok(Served::Miss);
                };
                emit.hit(key, &item);
                item.mark_fetched();
                Ok(Served::Hit(item.value_len(), store.slab_class(&item)))
            });
            match updated {
                Ok(Some(served)) => Some(served),
                Ok(None) => return Served::Reading,
                Err(_) => None,
            }
        }
    };
    drop(reads);
    let served = served.unwrap_or(Served::Miss);
    if matches!(served, Served::NoRoom(_)) {
        return served;
    }
    let (cmd, misses) = match touch {
        None => (&s.cmd_get, &s.get_misses),
        Some(_) => (&s.cmd_touch, &s.touch_misses),
    };
    ThreadStats::incr(cmd);
    ThreadStats::incr(match (&served, touch) {
        (Served::Hit(_, class), None) => &s.class(*class).get_hits,
        (Served::Hit(_, class), Some(_)) => &s.class(*class).touch_hits,
        _ => misses,
    });
    watch_fetch(w, key, &served);
    served
}

/// The text protocol's `VALUE` blocks, within the connection's reply window.
struct TextEmit<'a, 'w> {
    w: &'w Worker,
    with_cas: bool,
    window: &'a mut ReplyWindow,
    out: &'a mut Out<'w>,
}

impl Emit for TextEmit<'_, '_> {
    fn room(&mut self, key: &[u8], item: &Item<'_>) -> Room {
        self.window
            .room(self.out.len(), reply_len(key, item.value_len()))
    }

    fn hit(&mut self, key: &[u8], item: &Item<'_>) {
        let w = self.w;
        let cas = self.with_cas.then(|| visible_cas(w, item.cas()));
        let value = item.value();
        if self.out.refers(value.len()) {
            reply::value_header(self.out.bytes(), key, item.flags(), value.len(), cas);
            self.out.push_value(w.shared.store.pin(item));
            reply::crlf(self.out.bytes());
        } else {
            reply::value(self.out.bytes(), key, item.flags(), value, cas);
        }
    }
}

/// Binary get/gat replies: one packet per request, never held back.
struct BinaryEmit<'a, 'w> {
    w: &'w Worker,
    attrs: &'a Attrs,
    /// `TOUCH` answers with the flags only.
    value: bool,
    out: &'a mut Out<'w>,
}

impl Emit for BinaryEmit<'_, '_> {
    fn room(&mut self, _key: &[u8], _item: &Item<'_>) -> Room {
        Room::Now
    }

    fn hit(&mut self, key: &[u8], item: &Item<'_>) {
        let w = self.w;
        let value: &[u8] = if self.value { item.value() } else { &[] };
        let cas = visible_cas(w, item.cas());
        if self.out.refers(value.len()) {
            let a = self.attrs;
            binary::reply::hit_header(self.out.bytes(), a, cas, item.flags(), key, value.len());
            self.out.push_value(w.shared.store.pin(item));
        } else {
            binary::reply::hit(self.out.bytes(), self.attrs, cas, item.flags(), key, value);
        }
    }
}

/// Tells `watch fetchers` and `stats detail` about one key served.
#[inline]
fn watch_fetch(w: &Worker, key: &[u8], served: &Served) {
    let found = match served {
        Served::Hit(len, _) => Some(*len),
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
pub fn get<'w>(
    w: &'w Worker,
    keys: Keys<'_>,
    with_cas: bool,
    window: &mut ReplyWindow,
    out: &mut Out<'w>,
) -> Flow {
    text(w, None, keys, with_cas, window, out)
}

/// `gat`/`gats`: like get, also setting each found item's expiry. Counted as touches only
/// (cmd_touch, touch_hits/misses), not gets, as memcached does.
pub fn get_and_touch<'w>(
    w: &'w Worker,
    exptime: i64,
    keys: Keys<'_>,
    with_cas: bool,
    window: &mut ReplyWindow,
    out: &mut Out<'w>,
) -> Flow {
    let expiry = w.shared.store.clock().expiry(exptime);
    text(w, Some(expiry), keys, with_cas, window, out)
}

/// The text retrievals: every key through [`serve_key`], then `END`.
fn text<'w>(
    w: &'w Worker,
    touch: Option<u32>,
    keys: Keys<'_>,
    with_cas: bool,
    window: &mut ReplyWindow,
    out: &mut Out<'w>,
) -> Flow {
    for (at, key) in keys.iter_from(window.resume_at) {
        let mut emit = TextEmit {
            w,
            with_cas,
            window: &mut *window,
            out: &mut *out,
        };
        match serve_key(w, key, touch, &mut emit) {
            Served::NoRoom(room) => return stop(window, room, at, out.bytes()),
            Served::Reading => {
                window.resume_at = at;
                return Flow::Suspend;
            }
            Served::Hit(..) | Served::Miss => {}
        }
    }
    window.resume_at = 0;
    reply::end(out.bytes());
    Flow::Continue
}

/// Binary `GET`/`GETK`/`GAT`/`GATK` (and quiet forms), and `TOUCH` (`value: false`,
/// which memcached serves as a gat whose reply carries only the flags): the same
/// [`serve_key`] as text, one packet for a hit, a miss framed by [`binary::reply::miss`].
/// [`Flow::Suspend`] with nothing written while the value is read from flash.
pub fn binary<'w>(
    w: &'w Worker,
    attrs: &Attrs,
    key: &[u8],
    touch: Option<i64>,
    value: bool,
    out: &mut Out<'w>,
) -> Flow {
    let expiry = touch.map(|t| w.shared.store.clock().expiry(t));
    let mut emit = BinaryEmit {
        w,
        attrs,
        value,
        out: &mut *out,
    };
    match serve_key(w, key, expiry, &mut emit) {
        Served::Hit(..) => {}
        Served::Reading => return Flow::Suspend,
        Served::Miss | Served::NoRoom(_) => binary::reply::miss(out.bytes(), attrs, key),
    }
    Flow::Continue
}
