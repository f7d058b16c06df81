//! Multi-gets over several servers: splitting the keys into one fragment per server, and
//! putting the fragments' replies back in the request's key order.

use super::fanout::{read, read_order, route_error};
use super::pending::{MultiGet, Pending};
use crate::error::BackendError;
use crate::frame::ReplyKind;
use crate::pool::Pool;
use crate::stats::incr;
use bytes::Bytes;
use std::convert::Infallible;

/// A multi-get's keys grouped by server.
pub(crate) struct Plan {
    /// The keys, concatenated.
    pub(crate) keys: Vec<u8>,
    /// (start, end, fragment) for each key in request order.
    pub(crate) spans: Vec<(usize, usize, usize)>,
    /// Per fragment: its servers (failover order).
    pub(crate) servers: Vec<Vec<usize>>,
    /// Per fragment: its keys, each preceded by a space.
    pub(crate) keys_of: Vec<Vec<u8>>,
}

/// Groups `list` by the server each key lives on (one fragment per key when replicated,
/// so each can fail over on its own).
pub(crate) fn plan(pool: &Pool, list: &[&[u8]]) -> Result<Plan, BackendError> {
    let replicated = pool.placement.replica_count() > 1;
    let mut p = Plan {
        keys: Vec::with_capacity(list.iter().map(|k| k.len()).sum()),
        spans: Vec::with_capacity(list.len()),
        servers: Vec::new(),
        keys_of: Vec::new(),
    };
    for key in list {
        let servers = read_order(pool, key)?;
        let f = if replicated {
            None
        } else {
            p.servers.iter().position(|s| s.first() == servers.first())
        };
        let f = match f {
            Some(f) => f,
            None => {
                p.servers.push(servers);
                p.keys_of.push(Vec::new());
                p.servers.len() - 1
            }
        };
        let start = p.keys.len();
        p.keys.extend_from_slice(key);
        p.spans.push((start, p.keys.len(), f));
        if let Some(fk) = p.keys_of.get_mut(f) {
            fk.push(b' ');
            fk.extend_from_slice(key);
        }
    }
    Ok(p)
}

/// Sends one request per fragment of `plan`; the error reply if one cannot be sent.
pub(crate) async fn send_plan(
    pool: &Pool,
    plan: Plan,
    cmd: &str,
    exptime: Option<i64>,
) -> Result<MultiGet, Vec<u8>> {
    let mut frags = Vec::with_capacity(plan.servers.len());
    for (servers, fkeys) in plan.servers.into_iter().zip(plan.keys_of) {
        let mut bytes = Vec::with_capacity(fkeys.len() + 24);
        bytes.extend_from_slice(cmd.as_bytes());
        if let Some(t) = exptime {
            bytes.push(b' ');
            bytes.extend_from_slice(t.to_string().as_bytes());
        }
        bytes.extend_from_slice(&fkeys);
        bytes.extend_from_slice(b"\r\n");
        incr(&pool.stats.fragments);
        match read::<Infallible>(pool, servers, bytes, ReplyKind::Retrieval).await {
            Pending::One(a) => frags.push(a),
            Pending::Ready(r) => return Err(r),
            Pending::Static(r) => return Err(r.to_vec()),
            _ => return Err(BackendError::NoLiveServers.reply()),
        }
    }
    Ok(MultiGet {
        keys: plan.keys,
        spans: plan.spans,
        frags,
    })
}

/// A multi-get small enough to forward at once.
pub(crate) async fn multi_get<S>(
    pool: &Pool,
    list: &[&[u8]],
    raw: &[u8],
    cmd: &str,
    exptime: Option<i64>,
) -> Pending<S> {
    let mut plan = match plan(pool, list) {
        Ok(p) => p,
        Err(e) => return route_error(pool, e),
    };
    if plan.servers.len() == 1 {
        // Every key on one server: forward the request as it came.
        let servers = plan.servers.pop().unwrap_or_default();
        return read(pool, servers, raw.to_vec(), ReplyKind::Retrieval).await;
    }
    match send_plan(pool, plan, cmd, exptime).await {
        Ok(m) => Pending::Multi(Box::new(m)),
        Err(r) => Pending::Ready(r),
    }
}

/// One `VALUE` entry of a fragment reply: the key's and the whole entry's byte ranges.
pub(crate) struct Entry {
    pub(crate) key: (usize, usize),
    pub(crate) all: (usize, usize),
}

/// The entries of a framed retrieval reply, in order (stops at `END` or anything else).
pub(crate) fn entries(b: &[u8]) -> impl Iterator<Item = Entry> + '_ {
    let mut pos = 0;
    std::iter::from_fn(move || {
        let rest = b.get(pos..)?;
        let nl = memchr::memchr(b'\n', rest)?;
        let line = &rest[..nl.saturating_sub(1)];
        let fields = line.strip_prefix(b"VALUE ")?;
        let mut toks = fields.split(|&c| c == b' ');
        let key = toks.next().unwrap_or_default();
        let len = toks
            .nth(1)
            .and_then(|t| std::str::from_utf8(t).ok())
            .and_then(|t| t.parse::<usize>().ok())
            .unwrap_or(0);
        let key_start = pos + 6;
        let end = pos
            .saturating_add(nl + 1)
            .saturating_add(len)
            .saturating_add(2);
        let entry = Entry {
            key: (key_start, key_start + key.len()),
            all: (pos, end.min(b.len())),
        };
        pos = end;
        Some(entry)
    })
}

/// Writes the hits of every fragment in the request's key order (without `END`).
pub(crate) fn reassemble(
    keys: &[u8],
    spans: &[(usize, usize, usize)],
    replies: &[Bytes],
    out: &mut Vec<u8>,
) {
    let parsed: Vec<Vec<Entry>> = replies.iter().map(|b| entries(b).collect()).collect();
    let mut next = vec![0usize; replies.len()];
    for &(s, e, f) in spans {
        let (Some(reply), Some(list), Some(i)) = (replies.get(f), parsed.get(f), next.get_mut(f))
        else {
            continue;
        };
        if let Some(entry) = list.get(*i) {
            if reply.get(entry.key.0..entry.key.1) == keys.get(s..e) {
                out.extend_from_slice(reply.get(entry.all.0..entry.all.1).unwrap_or_default());
                *i += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_of_a_retrieval_reply() {
        let b = b"VALUE a 0 1\r\n1\r\nVALUE bb 5 3 99\r\nxyz\r\nEND\r\n";
        let e: Vec<Entry> = entries(b).collect();
        assert_eq!(e.len(), 2);
        assert_eq!(&b[e[0].key.0..e[0].key.1], b"a");
        assert_eq!(&b[e[1].key.0..e[1].key.1], b"bb");
        assert_eq!(&b[e[1].all.0..e[1].all.1], b"VALUE bb 5 3 99\r\nxyz\r\n");
        // A truncated or lying length never reads past the end.
        let short = b"VALUE a 0 100\r\nxy";
        let e: Vec<Entry> = entries(short).collect();
        assert_eq!(e[0].all, (0, short.len()));
        assert_eq!(entries(b"END\r\n").count(), 0);
    }

    #[test]
    fn reassembles_in_key_order_with_duplicates() {
        let keys = b"abcab".to_vec();
        // keys a(f0) b(f1) c(f0) a(f0) b(f1); c misses.
        let spans = vec![(0, 1, 0), (1, 2, 1), (2, 3, 0), (3, 4, 0), (4, 5, 1)];
        let f0 = Bytes::from_static(b"VALUE a 0 1\r\n1\r\nVALUE a 0 1\r\n1\r\nEND\r\n");
        let f1 = Bytes::from_static(b"VALUE b 0 2\r\n22\r\nVALUE b 0 2\r\n22\r\nEND\r\n");
        let mut out = Vec::new();
        reassemble(&keys, &spans, &[f0, f1], &mut out);
        assert_eq!(
            out,
            b"VALUE a 0 1\r\n1\r\nVALUE b 0 2\r\n22\r\nVALUE a 0 1\r\n1\r\nVALUE b 0 2\r\n22\r\n"
        );
    }
}
