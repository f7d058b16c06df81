//! One client connection: parse requests with shoal-protocol, route each to its
//! backend(s), and write the replies back in request order.
//!
//! Guarantees: replies are written in the order requests arrived, whatever order the
//! backends answer in; a multi-get whose keys live on several servers is split into one
//! fragment per server, sent in parallel, and reassembled in the request's key order; a
//! malformed request gets memcached's error reply (from the shared parser) and affects no
//! other client; a backend failure becomes `SERVER_ERROR ...` for the requests it held.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use shoal_protocol::{decode_key, parse, reply, Limits, Parsed, Request};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::backend::{Reply, ReplyRx};
use crate::error::BackendError;
use crate::frame::ReplyKind;
use crate::pool::Pool;
use crate::stats::{decr, incr};

/// Largest value a client may send through the proxy (backends enforce their own limit).
pub const MAX_VALUE: usize = 64 * 1024 * 1024;
/// Requests dispatched before their replies are collected.
const MAX_PENDING: usize = 1024;
/// Reply bytes buffered before a write.
const WRITE_CHUNK: usize = 256 * 1024;

/// One forwarded request and how to retry it elsewhere.
struct Attempt {
    rx: Option<ReplyRx>,
    bytes: Vec<u8>,
    kind: ReplyKind,
    /// Replicas to try, in order, if this attempt fails at the transport level.
    rest: Vec<usize>,
}

enum Pending {
    /// A reply the proxy makes itself.
    Ready(Vec<u8>),
    Static(&'static [u8]),
    /// Nothing to send (noreply).
    Nothing,
    /// Forwarded; the backend's reply goes to the client verbatim.
    One(Attempt),
    /// A multi-get split over several fragments.
    Multi(Box<MultiGet>),
    /// Sent to several servers (replicated write): the first successful reply in order.
    First(Vec<ReplyRx>),
    /// `flush_all` to every server: `OK` if all say so, else the first other reply.
    All(Vec<ReplyRx>),
}

struct MultiGet {
    /// The original keys, concatenated.
    keys: Vec<u8>,
    /// (start, end, fragment) for each key in request order.
    spans: Vec<(usize, usize, usize)>,
    frags: Vec<Attempt>,
}

/// Serves one client until it quits, disconnects, or sends something that closes the
/// connection (as memcached would). Never panics on client input.
pub async fn serve<S>(mut stream: S, pool: Arc<Pool>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    incr(&pool.stats.client_connections);
    let limits = Limits {
        max_value_len: MAX_VALUE,
    };
    let mut rbuf = BytesMut::with_capacity(16 * 1024);
    let mut wbuf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut pending: VecDeque<Pending> = VecDeque::new();
    let mut swallow = 0usize;
    let mut closing = false;
    let mut client_err = false;
    'conn: loop {
        // Dispatch every complete request in the buffer.
        while !closing && pending.len() < MAX_PENDING {
            if swallow > 0 {
                let n = swallow.min(rbuf.len());
                rbuf.advance(n);
                swallow -= n;
                if swallow > 0 {
                    break;
                }
            }
            if rbuf.is_empty() {
                break;
            }
            let (p, used, skip, close) = match parse(&rbuf, &limits) {
                Parsed::Incomplete { .. } => break,
                Parsed::Request { request, consumed } => {
                    let quit = matches!(request, Request::Quit);
                    let p = dispatch(&pool, &request, &rbuf[..consumed]).await;
                    (p, consumed, 0, quit)
                }
                Parsed::Error {
                    error,
                    consumed,
                    swallow,
                    close,
                    silent,
                } => {
                    let p = if silent {
                        Pending::Nothing
                    } else {
                        Pending::Static(error.reply())
                    };
                    if close {
                        client_err = true;
                    }
                    (p, consumed, swallow, close)
                }
                Parsed::TooLarge {
                    consumed,
                    swallow,
                    noreply,
                    ..
                } => {
                    let p = if noreply {
                        Pending::Nothing
                    } else {
                        Pending::Static(reply::OBJECT_TOO_LARGE)
                    };
                    (p, consumed, swallow, false)
                }
            };
            rbuf.advance(used.min(rbuf.len()));
            swallow = skip;
            pending.push_back(p);
            if close {
                closing = true;
            }
        }
        // Collect replies in order.
        while let Some(p) = pending.pop_front() {
            resolve(&pool, p, &mut wbuf).await;
            if wbuf.len() >= WRITE_CHUNK {
                if stream.write_all(&wbuf).await.is_err() {
                    client_err = true;
                    break 'conn;
                }
                wbuf.clear();
            }
        }
        if !wbuf.is_empty() {
            if stream.write_all(&wbuf).await.is_err() {
                client_err = true;
                break;
            }
            wbuf.clear();
        }
        if closing {
            break;
        }
        if rbuf.capacity() - rbuf.len() < 4096 {
            rbuf.reserve(16 * 1024);
        }
        match stream.read_buf(&mut rbuf).await {
            Ok(0) => {
                incr(&pool.stats.client_eof);
                break;
            }
            Ok(_) => {}
            Err(_) => {
                client_err = true;
                break;
            }
        }
    }
    if client_err {
        incr(&pool.stats.client_err);
    }
    let _ = stream.shutdown().await;
    decr(&pool.stats.client_connections);
}

fn route_error(pool: &Pool, e: BackendError) -> Pending {
    incr(&pool.stats.forward_error);
    Pending::Ready(e.reply())
}

/// Servers for `key`: the replicas in failover order (one server unless replicated).
fn servers_for(pool: &Pool, key: &[u8]) -> Result<Vec<usize>, BackendError> {
    let r = if pool.placement.replica_count() > 1 {
        pool.placement.replicas(key)
    } else {
        pool.placement.locate(key).map(|i| vec![i])
    };
    r.map_err(|_| BackendError::NoLiveServers)
}

async fn send(pool: &Pool, server: usize, bytes: Vec<u8>, kind: ReplyKind) -> Option<ReplyRx> {
    match pool.backends.get(server) {
        Some(b) => b.send(bytes, kind).await,
        None => None,
    }
}

/// A read: to the first server, failing over to the others.
async fn read(pool: &Pool, servers: Vec<usize>, bytes: Vec<u8>, kind: ReplyKind) -> Pending {
    let mut it = servers.into_iter();
    let Some(first) = it.next() else {
        return route_error(pool, BackendError::NoLiveServers);
    };
    let rest: Vec<usize> = it.collect();
    let keep = if rest.is_empty() {
        Vec::new()
    } else {
        bytes.clone()
    };
    let rx = send(pool, first, bytes, kind).await;
    Pending::One(Attempt {
        rx,
        bytes: keep,
        kind,
        rest,
    })
}

/// A write: to every server holding the key.
async fn write(pool: &Pool, servers: Vec<usize>, bytes: Vec<u8>, kind: ReplyKind) -> Pending {
    if servers.len() == 1 {
        let rx = send(pool, servers[0], bytes, kind).await;
        return match rx {
            Some(rx) => Pending::One(Attempt {
                rx: Some(rx),
                bytes: Vec::new(),
                kind,
                rest: Vec::new(),
            }),
            None => Pending::Nothing,
        };
    }
    let mut rxs = Vec::with_capacity(servers.len());
    for s in servers {
        if let Some(rx) = send(pool, s, bytes.clone(), kind).await {
            rxs.push(rx);
        }
    }
    if kind == ReplyKind::None {
        Pending::Nothing
    } else {
        Pending::First(rxs)
    }
}

async fn dispatch(pool: &Pool, req: &Request<'_>, raw: &[u8]) -> Pending {
    match req {
        Request::Get { keys, .. } | Request::GetAndTouch { keys, .. } => {
            let (cmd, exptime) = match req {
                Request::Get { with_cas, .. } => (if *with_cas { "gets" } else { "get" }, None),
                Request::GetAndTouch {
                    with_cas, exptime, ..
                } => (if *with_cas { "gats" } else { "gat" }, Some(*exptime)),
                _ => ("get", None),
            };
            let list: Vec<&[u8]> = keys.iter().collect();
            match list.as_slice() {
                [] => Pending::Static(reply::END),
                [key] => match servers_for(pool, key) {
                    Ok(s) => read(pool, s, raw.to_vec(), ReplyKind::Retrieval).await,
                    Err(e) => route_error(pool, e),
                },
                _ => multi_get(pool, &list, raw, cmd, exptime).await,
            }
        }
        Request::Store { key, noreply, .. }
        | Request::Delete { key, noreply }
        | Request::Arithmetic { key, noreply, .. }
        | Request::Touch { key, noreply, .. } => {
            let kind = if *noreply {
                ReplyKind::None
            } else {
                ReplyKind::Line
            };
            match servers_for(pool, key) {
                Ok(s) => write(pool, s, raw.to_vec(), kind).await,
                Err(e) if *noreply => {
                    incr(&pool.stats.forward_error);
                    let _ = e;
                    Pending::Nothing
                }
                Err(e) => route_error(pool, e),
            }
        }
        Request::MetaGet { key, flags }
        | Request::MetaSet { key, flags, .. }
        | Request::MetaDelete { key, flags }
        | Request::MetaArithmetic { key, flags }
        | Request::MetaDebug { key, flags } => {
            let mut tmp = [0u8; 256];
            let Ok(real) = decode_key(key, flags.base64(), &mut tmp) else {
                return Pending::Static(b"CLIENT_ERROR error decoding key\r\n");
            };
            let servers = match servers_for(pool, real) {
                Ok(s) => s,
                Err(e) => return route_error(pool, e),
            };
            let quiet = flags.quiet() && !matches!(req, Request::MetaDebug { .. });
            let mut bytes = raw.to_vec();
            let kind = if quiet {
                bytes.extend_from_slice(b"mn\r\n");
                ReplyKind::MetaQuiet
            } else {
                ReplyKind::Meta
            };
            match req {
                Request::MetaGet { .. } | Request::MetaDebug { .. } => {
                    read(pool, servers, bytes, kind).await
                }
                _ => write(pool, servers, bytes, kind).await,
            }
        }
        Request::MetaNoop => Pending::Static(reply::MN),
        Request::FlushAll { noreply, .. } => {
            let kind = if *noreply {
                ReplyKind::None
            } else {
                ReplyKind::Line
            };
            let mut rxs = Vec::new();
            for s in pool.placement.live() {
                if let Some(rx) = send(pool, s, raw.to_vec(), kind).await {
                    rxs.push(rx);
                }
            }
            if *noreply {
                Pending::Nothing
            } else {
                Pending::All(rxs)
            }
        }
        Request::Version => Pending::Ready(
            format!("VERSION {} shoal-proxy\r\n", env!("CARGO_PKG_VERSION")).into_bytes(),
        ),
        Request::Verbosity { noreply, .. } => {
            if *noreply {
                Pending::Nothing
            } else {
                Pending::Static(reply::OK)
            }
        }
        Request::Quit => Pending::Nothing,
        Request::Shutdown | Request::ShutdownGraceful => {
            Pending::Static(reply::SHUTDOWN_NOT_ENABLED)
        }
        Request::CacheMemlimit { .. } | Request::Stats(_) => Pending::Static(reply::ERROR),
    }
}

async fn multi_get(
    pool: &Pool,
    list: &[&[u8]],
    raw: &[u8],
    cmd: &str,
    exptime: Option<i64>,
) -> Pending {
    let replicated = pool.placement.replica_count() > 1;
    let mut keys = Vec::with_capacity(raw.len());
    let mut spans = Vec::with_capacity(list.len());
    // Per fragment: its servers (failover order) and the keys' bytes for its request.
    let mut frag_servers: Vec<Vec<usize>> = Vec::new();
    let mut frag_keys: Vec<Vec<u8>> = Vec::new();
    for key in list {
        let servers = match servers_for(pool, key) {
            Ok(s) => s,
            Err(e) => return route_error(pool, e),
        };
        let f = if replicated {
            None
        } else {
            frag_servers.iter().position(|s| s[0] == servers[0])
        };
        let f = match f {
            Some(f) => f,
            None => {
                frag_servers.push(servers);
                frag_keys.push(Vec::new());
                frag_servers.len() - 1
            }
        };
        let start = keys.len();
        keys.extend_from_slice(key);
        spans.push((start, keys.len(), f));
        frag_keys[f].push(b' ');
        frag_keys[f].extend_from_slice(key);
    }
    if frag_servers.len() == 1 {
        // Every key on one server: forward the request as it came.
        let servers = frag_servers.pop().unwrap_or_default();
        return read(pool, servers, raw.to_vec(), ReplyKind::Retrieval).await;
    }
    let mut frags = Vec::with_capacity(frag_servers.len());
    for (servers, fkeys) in frag_servers.into_iter().zip(frag_keys) {
        let mut bytes = Vec::with_capacity(fkeys.len() + 24);
        bytes.extend_from_slice(cmd.as_bytes());
        if let Some(t) = exptime {
            bytes.push(b' ');
            bytes.extend_from_slice(t.to_string().as_bytes());
        }
        bytes.extend_from_slice(&fkeys);
        bytes.extend_from_slice(b"\r\n");
        incr(&pool.stats.fragments);
        match read(pool, servers, bytes, ReplyKind::Retrieval).await {
            Pending::One(a) => frags.push(a),
            other => return other,
        }
    }
    Pending::Multi(Box::new(MultiGet { keys, spans, frags }))
}

async fn await_rx(rx: Option<ReplyRx>) -> Reply {
    match rx {
        Some(rx) => rx.await.unwrap_or(Err(BackendError::Closed)),
        None => Err(BackendError::Closed),
    }
}

/// Waits for an attempt, failing over to the remaining replicas on transport errors.
async fn finish(pool: &Pool, a: Attempt) -> Reply {
    let mut r = await_rx(a.rx).await;
    for s in a.rest {
        if r.is_ok() {
            break;
        }
        r = await_rx(send(pool, s, a.bytes.clone(), a.kind).await).await;
    }
    r
}

fn push_reply(pool: &Pool, r: Reply, out: &mut Vec<u8>) {
    match r {
        Ok(b) => out.extend_from_slice(&b),
        Err(e) => {
            incr(&pool.stats.forward_error);
            out.extend_from_slice(&e.reply());
        }
    }
}

async fn resolve(pool: &Pool, p: Pending, out: &mut Vec<u8>) {
    match p {
        Pending::Ready(v) => out.extend_from_slice(&v),
        Pending::Static(s) => out.extend_from_slice(s),
        Pending::Nothing => {}
        Pending::One(a) => {
            let r = finish(pool, a).await;
            push_reply(pool, r, out);
        }
        Pending::First(rxs) => {
            let mut first_err = None;
            let mut done = false;
            for rx in rxs {
                let r = rx.await.unwrap_or(Err(BackendError::Closed));
                if done {
                    continue;
                }
                match r {
                    Ok(b) => {
                        out.extend_from_slice(&b);
                        done = true;
                    }
                    Err(e) => {
                        first_err.get_or_insert(e);
                    }
                }
            }
            if !done {
                push_reply(
                    pool,
                    Err(first_err.unwrap_or(BackendError::NoLiveServers)),
                    out,
                );
            }
        }
        Pending::All(rxs) => {
            let mut bad: Option<Reply> = None;
            for rx in rxs {
                let r = rx.await.unwrap_or(Err(BackendError::Closed));
                let ok = matches!(&r, Ok(b) if &b[..] == reply::OK);
                if !ok && bad.is_none() {
                    bad = Some(r);
                }
            }
            match bad {
                None => out.extend_from_slice(reply::OK),
                Some(r) => push_reply(pool, r, out),
            }
        }
        Pending::Multi(m) => {
            let m = *m;
            let mut replies: Vec<Bytes> = Vec::with_capacity(m.frags.len());
            let mut err: Option<Reply> = None;
            for a in m.frags {
                match finish(pool, a).await {
                    Ok(b) if b.starts_with(b"VALUE ") || b.starts_with(b"END") => replies.push(b),
                    other => {
                        if err.is_none() {
                            err = Some(other);
                        }
                        replies.push(Bytes::new());
                    }
                }
            }
            if let Some(r) = err {
                push_reply(pool, r, out);
                return;
            }
            reassemble(&m.keys, &m.spans, &replies, out);
        }
    }
}

/// One `VALUE` entry of a fragment reply: the key's and the whole entry's byte ranges.
struct Entry {
    key: (usize, usize),
    all: (usize, usize),
}

/// Splits a framed retrieval reply into its entries.
fn entries(b: &[u8]) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some(rest) = b.get(pos..) {
        let Some(nl) = memchr::memchr(b'\n', rest) else {
            break;
        };
        let line = &rest[..nl.saturating_sub(1)];
        let Some(fields) = line.strip_prefix(b"VALUE ") else {
            break;
        };
        let mut toks = fields.split(|&c| c == b' ');
        let key = toks.next().unwrap_or_default();
        let len = toks
            .nth(1)
            .and_then(|t| std::str::from_utf8(t).ok())
            .and_then(|t| t.parse::<usize>().ok())
            .unwrap_or(0);
        let key_start = pos + 6;
        let end = pos + nl + 1 + len + 2;
        out.push(Entry {
            key: (key_start, key_start + key.len()),
            all: (pos, end.min(b.len())),
        });
        pos = end;
    }
    out
}

/// Writes the hits of every fragment in the request's key order, then `END`.
fn reassemble(keys: &[u8], spans: &[(usize, usize, usize)], replies: &[Bytes], out: &mut Vec<u8>) {
    let parsed: Vec<Vec<Entry>> = replies.iter().map(|b| entries(b)).collect();
    let mut next = vec![0usize; replies.len()];
    for &(s, e, f) in spans {
        let (Some(reply), Some(list), Some(i)) = (replies.get(f), parsed.get(f), next.get_mut(f))
        else {
            continue;
        };
        if let Some(entry) = list.get(*i) {
            if reply.get(entry.key.0..entry.key.1) == keys.get(s..e) {
                out.extend_from_slice(&reply[entry.all.0..entry.all.1]);
                *i += 1;
            }
        }
    }
    out.extend_from_slice(reply::END);
}

#[cfg(test)]
mod tests {
    use super::*;

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
            b"VALUE a 0 1\r\n1\r\nVALUE b 0 2\r\n22\r\nVALUE a 0 1\r\n1\r\nVALUE b 0 2\r\n22\r\nEND\r\n"
        );
    }
}
