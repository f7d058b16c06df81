//! Consecutive binary gets (`GET`, `GETQ`, `GETK`, `GETKQ`, and `GAT`s with one expiry),
//! the shape of a client's multi-get (`GETKQ GETKQ ... NOOP`), sent as one text `gets`
//! (or `gats <exptime>`) per server instead of one request per key, and answered key by
//! key in request order.
//!
//! On a route pool the run is one group ([`ROUTE_GROUP`]), sent as one multi-get through
//! the route ([`crate::route::send_get`]), exactly as a text client's `gets k1 k2 ...`
//! would be: the route splits it over its pools (by prefix, failing over the keys that
//! missed, warming a cold pool, copying to a shadow) and each pool over its servers. The
//! route answers key by key ([`KeyOutcome`]), so a key that failed everywhere gets its
//! error packet and the others their hits and misses, as on a server pool.
//!
//! Guarantees:
//! - every request of a run is answered exactly as if it had been sent alone: a hit with
//!   its flags, CAS unique and (for the `GETK` family) key; a miss by `Not found` (with the
//!   key for `GETK`) or, for a quiet opcode, nothing;
//! - a server that fails fails only the requests whose keys it holds (each gets the error
//!   packet), never the rest of the run; through a route, only the keys that failed on
//!   every pool the route tried;
//! - a key never appears twice in one server's `gets`, so each hit is matched to the
//!   request that asked for it even when a key is asked for twice while it changes;
//! - a run holds at most [`MAX_BATCH_KEYS`] keys and as many expected bytes as the
//!   connection's in-flight window has room for, so it is bounded like any request.

use std::sync::Arc;

use shoal_protocol::binary::{reply, Attrs};

use super::translate::error_line;
use super::wait::Pending;
use super::MAX_BATCH_KEYS;
use crate::pool_request::resolve;
use crate::route::{GetFlight, KeyOutcome, Router, Target};

/// The one group of a run gathered on a route pool (which has no servers to group by).
pub(super) const ROUTE_GROUP: usize = usize::MAX;

/// One request of a run.
struct Entry {
    attrs: Attrs,
    /// The key's range in [`GetRun::keys`].
    key: (usize, usize),
    /// Its server's group.
    group: usize,
}

/// The keys of a run bound for one server.
pub(super) struct Group {
    /// The server the keys were grouped by (the ring's first choice).
    server: usize,
    /// `gets k1 k2 ...` (or `gats <exptime> ...`), then `\r\n` once the run is sent.
    pub(super) line: Vec<u8>,
    /// Hashes of the keys already in `line`, to keep a key from appearing twice.
    hashes: Vec<u64>,
    /// What the sent `line` waits for.
    pub(super) pending: Pending,
}

/// Binary gets gathered to be sent together.
pub(super) struct GetRun {
    /// `None` for `gets`; the expiry of a `gats` run.
    exptime: Option<i64>,
    keys: Vec<u8>,
    entries: Vec<Entry>,
    pub(super) groups: Vec<Group>,
    /// Bytes the run counts against the in-flight window.
    pub(super) cost: usize,
    /// On a route pool: the run sent through the route (`groups` then holds the one
    /// group, unsent).
    routed: Option<GetFlight>,
}

fn fnv1a(key: &[u8]) -> u64 {
    key.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl GetRun {
    /// An empty run of `gets` (`exptime: None`) or `gats <exptime>`.
    pub(super) fn new(exptime: Option<i64>) -> GetRun {
        GetRun {
            exptime,
            keys: Vec::new(),
            entries: Vec::new(),
            groups: Vec::new(),
            cost: 0,
            routed: None,
        }
    }

    /// Sends the run as one multi-get through `router` (a `gets`, or `gats <exptime>`,
    /// of every key in request order).
    pub(super) async fn send_routed(&mut self, router: &Arc<Router>) {
        let keys: Vec<&[u8]> = self
            .entries
            .iter()
            .map(|e| self.keys.get(e.key.0..e.key.1).unwrap_or_default())
            .collect();
        let cmd = if self.exptime.is_some() {
            "gats"
        } else {
            "gets"
        };
        let flight = crate::route::send_get(router, &keys, cmd, self.exptime).await;
        self.routed = Some(flight);
    }

    /// Awaits the run's replies (on `target`, the pool or route it was sent on) and
    /// appends every request's binary reply to `out`, in request order; `text` is
    /// scratch space for the servers' text replies.
    pub(super) async fn resolve(mut self, target: &Target, text: &mut Vec<u8>, out: &mut Vec<u8>) {
        match (self.routed.take(), target) {
            (Some(flight), Target::Route(router)) => {
                let got = crate::route::finish_get_outcomes(router, flight).await;
                self.respond_outcomes(&got, out);
            }
            (_, Target::Pool(pool)) => {
                let mut spans = Vec::with_capacity(self.groups.len());
                for g in &mut self.groups {
                    let p = std::mem::replace(&mut g.pending, Pending::Nothing);
                    let start = text.len();
                    resolve(pool, p, text).await;
                    spans.push((start, text.len()));
                }
                self.respond(text, &spans, out);
            }
            // A session changes target only with nothing in flight, so a run is resolved
            // on what it was sent on; answered rather than assumed.
            _ => {
                for e in &self.entries {
                    error_line(out, &e.attrs, b"SERVER_ERROR pool changed");
                }
            }
        }
    }

    /// Appends the binary replies of every request, in request order, given the outcome
    /// of each request's key through a route (in request order).
    fn respond_outcomes(&self, got: &[KeyOutcome], out: &mut Vec<u8>) {
        for (i, e) in self.entries.iter().enumerate() {
            let key = self.keys.get(e.key.0..e.key.1).unwrap_or_default();
            match got.get(i) {
                Some(KeyOutcome::Hit(entry)) => match value_at(entry, 0) {
                    Some(v) if entry.get(v.key.0..v.key.1) == Some(key) => {
                        let data = entry.get(v.data.0..v.data.1).unwrap_or_default();
                        reply::hit(out, &e.attrs, v.cas, v.flags, key, data);
                    }
                    _ => error_line(out, &e.attrs, b"SERVER_ERROR unreadable server reply"),
                },
                Some(KeyOutcome::Error(line)) => {
                    let line = line.split(|&b| b == b'\r').next().unwrap_or_default();
                    error_line(out, &e.attrs, line);
                }
                // A missing outcome cannot happen (one per key); a miss is the safe answer.
                Some(KeyOutcome::Miss) | None => reply::miss(out, &e.attrs, key),
            }
        }
    }

    /// How many requests the run answers.
    pub(super) fn len(&self) -> u64 {
        self.entries.len() as u64
    }

    /// Whether a request with this expiry may join.
    pub(super) fn accepts(&self, exptime: Option<i64>) -> bool {
        self.exptime == exptime && self.entries.len() < MAX_BATCH_KEYS
    }

    /// Adds a request for `key` (text-safe) on `server`, costing `cost`; false (nothing
    /// added) when the key is already in that server's group: the run must be sent first.
    pub(super) fn add(&mut self, attrs: Attrs, key: &[u8], server: usize, cost: usize) -> bool {
        let hash = fnv1a(key);
        let g = match self.groups.iter().position(|g| g.server == server) {
            Some(g) => g,
            None => {
                let mut line = Vec::with_capacity(64);
                match self.exptime {
                    None => line.extend_from_slice(b"gets"),
                    Some(t) => {
                        use std::io::Write;
                        let _ = write!(line, "gats {t}");
                    }
                }
                self.groups.push(Group {
                    server,
                    line,
                    hashes: Vec::new(),
                    pending: Pending::Nothing,
                });
                self.groups.len() - 1
            }
        };
        let group = &mut self.groups[g];
        let keys = &self.keys;
        let entries = &self.entries;
        let dup = group
            .hashes
            .iter()
            .zip(entries.iter().filter(|e| e.group == g))
            .any(|(&h, e)| h == hash && keys.get(e.key.0..e.key.1) == Some(key));
        if dup {
            return false;
        }
        group.hashes.push(hash);
        group.line.push(b' ');
        group.line.extend_from_slice(key);
        let start = self.keys.len();
        self.keys.extend_from_slice(key);
        self.entries.push(Entry {
            attrs,
            key: (start, self.keys.len()),
            group: g,
        });
        self.cost = self.cost.saturating_add(cost);
        true
    }

    /// Appends the binary replies of every request, in request order, given each group's
    /// text reply (`replies[g]`: `VALUE`s then `END`, or an error line).
    pub(super) fn respond(&self, text: &[u8], spans: &[(usize, usize)], out: &mut Vec<u8>) {
        // Where each group's next unmatched `VALUE` starts.
        let mut cursor: Vec<usize> = spans.iter().map(|s| s.0).collect();
        for e in &self.entries {
            let key = self.keys.get(e.key.0..e.key.1).unwrap_or_default();
            let (Some(&(start, end)), Some(pos)) = (spans.get(e.group), cursor.get_mut(e.group))
            else {
                continue;
            };
            let reply = text.get(start..end).unwrap_or_default();
            if !(reply.starts_with(b"VALUE ") || reply.starts_with(b"END")) {
                let line = reply.split(|&b| b == b'\r').next().unwrap_or_default();
                error_line(out, &e.attrs, line);
                continue;
            }
            match value_at(text.get(..end).unwrap_or_default(), *pos) {
                Some(v) if text.get(v.key.0..v.key.1) == Some(key) => {
                    let data = text.get(v.data.0..v.data.1).unwrap_or_default();
                    reply::hit(out, &e.attrs, v.cas, v.flags, key, data);
                    *pos = v.next;
                }
                _ => reply::miss(out, &e.attrs, key),
            }
        }
    }
}

/// One `VALUE <key> <flags> <bytes> <cas>` entry of a text reply.
struct Value {
    key: (usize, usize),
    flags: u32,
    cas: u64,
    data: (usize, usize),
    /// Where the next entry starts.
    next: usize,
}

/// The entry at `pos` of `b`, if one starts there and is whole.
fn value_at(b: &[u8], pos: usize) -> Option<Value> {
    let rest = b.get(pos..)?;
    let nl = memchr::memchr(b'\n', rest)?;
    let line = rest.get(..nl)?.strip_suffix(b"\r")?;
    let fields = line.strip_prefix(b"VALUE ")?;
    let mut toks = fields.split(|&c| c == b' ');
    let key = toks.next()?;
    let num = |t: Option<&[u8]>| -> Option<u64> { std::str::from_utf8(t?).ok()?.parse().ok() };
    let flags = u32::try_from(num(toks.next())?).ok()?;
    let len = usize::try_from(num(toks.next())?).ok()?;
    let cas = num(toks.next()).unwrap_or(0);
    let key_start = pos + 6;
    let data_start = pos + nl + 1;
    let data_end = data_start.checked_add(len)?;
    if b.get(data_end..data_end + 2)? != b"\r\n" {
        return None;
    }
    Some(Value {
        key: (key_start, key_start + key.len()),
        flags,
        cas,
        data: (data_start, data_end),
        next: data_end + 2,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_protocol::binary::opcode as op;

    fn attrs(opcode: u8, opaque: u32, quiet: bool, key_return: bool) -> Attrs {
        Attrs {
            opcode,
            opaque,
            cas: 0,
            quiet,
            key_return,
        }
    }

    #[test]
    fn groups_keys_and_answers_in_request_order() {
        let mut run = GetRun::new(None);
        assert!(run.add(attrs(op::GETKQ, 1, true, true), b"a", 0, 10));
        assert!(run.add(attrs(op::GETKQ, 2, true, true), b"b", 1, 10));
        assert!(run.add(attrs(op::GETK, 3, false, true), b"c", 0, 10));
        assert!(run.add(attrs(op::GETQ, 4, true, false), b"d", 1, 10));
        assert!(
            !run.add(attrs(op::GETQ, 5, true, false), b"a", 0, 10),
            "a twice"
        );
        assert!(
            run.add(attrs(op::GETQ, 5, true, false), b"a", 1, 10),
            "another server"
        );
        assert_eq!(run.cost, 50);
        assert_eq!(run.groups[0].line, b"gets a c");
        assert_eq!(run.groups[1].line, b"gets b d a");
        assert!(!run.accepts(Some(5)));
        // Group 0 answers a (c misses); group 1 fails.
        let g0 = b"VALUE a 7 2 99\r\nhi\r\nEND\r\n";
        let g1 = b"SERVER_ERROR Connection refused\r\n";
        let text = [&g0[..], &g1[..]].concat();
        let spans = [(0, g0.len()), (g0.len(), text.len())];
        let mut out = Vec::new();
        run.respond(&text, &spans, &mut out);
        let mut packets = Vec::new();
        let mut p = &out[..];
        while p.len() >= 24 {
            let body = u32::from_be_bytes([p[8], p[9], p[10], p[11]]) as usize;
            let status = u16::from_be_bytes([p[6], p[7]]);
            let opaque = u32::from_be_bytes([p[12], p[13], p[14], p[15]]);
            packets.push((opaque, status));
            p = &p[24 + body..];
        }
        // a hit; b failed; c missed out loud; d failed; a (group 1) failed.
        assert_eq!(
            packets,
            vec![(1, 0), (2, 0x86), (3, 1), (4, 0x86), (5, 0x86)]
        );
        assert_eq!(&out[16..24], &99u64.to_be_bytes(), "the CAS unique");
    }

    #[test]
    fn route_outcomes_answer_each_request() {
        let mut run = GetRun::new(None);
        for (i, k) in [&b"a"[..], b"b", b"c", b"d"].iter().enumerate() {
            let quiet = i != 2;
            let opcode = if quiet { op::GETKQ } else { op::GETK };
            assert!(run.add(attrs(opcode, i as u32, quiet, true), k, ROUTE_GROUP, 1));
        }
        assert!(
            !run.add(attrs(op::GETKQ, 9, true, true), b"a", ROUTE_GROUP, 1),
            "a repeated key ends the run"
        );
        let got = [
            KeyOutcome::Hit(bytes::Bytes::from_static(b"VALUE a 3 2 42\r\nhi\r\n")),
            KeyOutcome::Miss,
            KeyOutcome::Miss,
            KeyOutcome::Error(bytes::Bytes::from_static(b"SERVER_ERROR timed out\r\n")),
        ];
        let mut out = Vec::new();
        run.respond_outcomes(&got, &mut out);
        let mut packets = Vec::new();
        let mut p = &out[..];
        while p.len() >= 24 {
            let body = u32::from_be_bytes([p[8], p[9], p[10], p[11]]) as usize;
            let status = u16::from_be_bytes([p[6], p[7]]);
            let opaque = u32::from_be_bytes([p[12], p[13], p[14], p[15]]);
            packets.push((opaque, status, p[24..24 + body].to_vec()));
            p = &p[24 + body..];
        }
        // a hit (flags, key, value); b a quiet miss (nothing); c a loud miss with its key;
        // d failed, with the reason.
        assert_eq!(
            packets,
            vec![
                (0, 0, b"\x00\x00\x00\x03ahi".to_vec()),
                (2, 1, b"c".to_vec()),
                (3, 0x86, b"timed out".to_vec()),
            ]
        );
        assert_eq!(&out[16..24], &42u64.to_be_bytes(), "the CAS unique");
    }

    #[test]
    fn truncated_or_lying_values_are_misses_not_panics() {
        assert!(value_at(b"VALUE a 0 5\r\nab\r\n", 0).is_none());
        assert!(value_at(b"VALUE a 0 99999999999999999999\r\n", 0).is_none());
        assert!(value_at(b"VALUE a x 1\r\nb\r\n", 0).is_none());
        let v = value_at(b"VALUE a 1 1 2\r\nb\r\nEND\r\n", 0).expect("whole");
        assert_eq!((v.flags, v.cas, v.data, v.next), (1, 2, (15, 16), 18));
    }
}
