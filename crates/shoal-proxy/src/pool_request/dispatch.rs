//! Dispatching one parsed request within a server pool: which servers it goes to, and
//! what the connection then waits for. Also the same, one request at a time, for the
//! routes of [`crate::route`] ([`pool_get`], [`pool_keyed`], [`pool_flush`],
//! [`finish_pool`]).

use super::fanout::{read, read_order, route_error, send, servers_for, write};
use super::multiget::multi_get;
use super::pending::Pending;
use super::reply_rank::meta_reads;
use super::resolve::resolve;
use crate::frame::ReplyKind;
use crate::pool::Pool;
use crate::stats::incr;
use shoal_protocol::{decode_key, reply, Request};
use std::convert::Infallible;

/// The command and expiration time of a `get`-family request.
pub(crate) fn get_command(req: &Request<'_>) -> (&'static str, Option<i64>) {
    match req {
        Request::Get { with_cas, .. } => (if *with_cas { "gets" } else { "get" }, None),
        Request::GetAndTouch {
            with_cas, exptime, ..
        } => (if *with_cas { "gats" } else { "gat" }, Some(*exptime)),
        _ => ("get", None),
    }
}

pub(crate) async fn dispatch<S>(pool: &Pool, req: &Request<'_>, raw: &[u8]) -> Pending<S> {
    match req {
        Request::Get { keys, .. } | Request::GetAndTouch { keys, .. } => {
            let (cmd, exptime) = get_command(req);
            let list: Vec<&[u8]> = keys.iter().collect();
            match list.as_slice() {
                [] => Pending::Static(reply::END),
                [key] => match read_order(pool, key) {
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
            keyed(pool, key, raw.to_vec(), kind, false).await
        }
        Request::FlushAll { noreply, .. } => flush_all(pool, raw, *noreply).await,
        _ => {
            let mut tmp = [0u8; 256];
            match meta_forward(req, raw, &mut tmp) {
                Some(Ok(m)) => keyed(pool, m.key, m.bytes, m.kind, m.read).await,
                Some(Err(error)) => Pending::Static(error),
                None => local_reply(req).unwrap_or(Pending::Static(reply::ERROR)),
            }
        }
    }
}

/// A meta command as it is forwarded to a server.
pub(crate) struct MetaForward<'k> {
    /// The key that places it (decoded, for a base64 key).
    pub(crate) key: &'k [u8],
    /// The command's bytes. A quiet one is followed by `mn`, so that its end is seen
    /// even when it answers nothing.
    pub(crate) bytes: Vec<u8>,
    /// The reply it expects.
    pub(crate) kind: ReplyKind,
    /// A read ([`meta_reads`]): one replica with failover, never replicated.
    pub(crate) read: bool,
}

/// How `req` (whose line is `raw`) is forwarded if it is a keyed meta command (`mg`,
/// `ms`, `md`, `ma`, `me`), or the error reply for a key that does not decode; `None`
/// for any other request. Pools and routes both forward meta commands this way.
pub(crate) fn meta_forward<'k>(
    req: &Request<'_>,
    raw: &[u8],
    tmp: &'k mut [u8; 256],
) -> Option<Result<MetaForward<'k>, &'static [u8]>> {
    let (key, flags) = match req {
        Request::MetaGet { key, flags }
        | Request::MetaSet { key, flags, .. }
        | Request::MetaDelete { key, flags }
        | Request::MetaArithmetic { key, flags }
        | Request::MetaDebug { key, flags } => (key, flags),
        _ => return None,
    };
    let Ok(key) = decode_key(key, flags.base64(), tmp) else {
        return Some(Err(b"CLIENT_ERROR error decoding key\r\n"));
    };
    // A meta debug command (`me`) always answers, so it gets no `mn` behind it.
    let quiet = flags.quiet() && !matches!(req, Request::MetaDebug { .. });
    let mut bytes = raw.to_vec();
    let kind = if quiet {
        bytes.extend_from_slice(b"mn\r\n");
        ReplyKind::MetaQuiet
    } else {
        ReplyKind::Meta
    };
    Some(Ok(MetaForward {
        key,
        bytes,
        kind,
        read: meta_reads(req),
    }))
}

/// `flush_all` to every live server of the pool: `OK` if all say so.
async fn flush_all<S>(pool: &Pool, raw: &[u8], noreply: bool) -> Pending<S> {
    let kind = if noreply {
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
    if noreply {
        Pending::Nothing
    } else {
        Pending::All(rxs)
    }
}

/// The reply to a request the proxy answers itself, whatever its pool (`None` for a
/// request that goes to servers).
pub(crate) fn local_reply<S>(req: &Request<'_>) -> Option<Pending<S>> {
    Some(match req {
        Request::MetaNoop => Pending::Static(reply::MN),
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
        Request::Shutdown | Request::ShutdownGraceful | Request::ShutdownInvalidMode => {
            Pending::Static(reply::SHUTDOWN_NOT_ENABLED)
        }
        // Answered here, as the parser used to: a pool has no delay to read.
        Request::FlushAllInvalidDelay { noreply } => {
            if *noreply {
                Pending::Nothing
            } else {
                Pending::Static(b"CLIENT_ERROR invalid exptime argument\r\n")
            }
        }
        Request::Get { .. }
        | Request::GetAndTouch { .. }
        | Request::Store { .. }
        | Request::Delete { .. }
        | Request::Arithmetic { .. }
        | Request::Touch { .. }
        | Request::MetaGet { .. }
        | Request::MetaSet { .. }
        | Request::MetaDelete { .. }
        | Request::MetaArithmetic { .. }
        | Request::MetaDebug { .. }
        | Request::FlushAll { .. } => return None,
        // Server administration (`stats`, `cache_memlimit`, `lru_crawler`, `watch`, and
        // whatever the parser learns next) has no meaning across a pool: twemproxy
        // answers ERROR.
        _ => Pending::Static(reply::ERROR),
    })
}

/// A request forwarded within one server pool on a route's behalf, not yet answered.
pub(crate) struct PoolFlight(Pending<Infallible>);

/// Sends `cmd [exptime] keys...` (a get-family request) to `pool`, split over its
/// servers as a client's multi-get is.
pub(crate) async fn pool_get(
    pool: &Pool,
    keys: &[&[u8]],
    cmd: &str,
    exptime: Option<i64>,
) -> PoolFlight {
    let mut raw = Vec::with_capacity(keys.iter().map(|k| k.len() + 1).sum::<usize>() + 24);
    raw.extend_from_slice(cmd.as_bytes());
    if let Some(t) = exptime {
        raw.push(b' ');
        raw.extend_from_slice(t.to_string().as_bytes());
    }
    for k in keys {
        raw.push(b' ');
        raw.extend_from_slice(k);
    }
    raw.extend_from_slice(b"\r\n");
    PoolFlight(match keys {
        [] => Pending::Static(reply::END),
        [key] => match read_order(pool, key) {
            Ok(s) => read(pool, s, raw, ReplyKind::Retrieval).await,
            Err(e) => route_error(pool, e),
        },
        _ => multi_get(pool, keys, &raw, cmd, exptime).await,
    })
}

/// Sends a one-key request (`bytes`, complete, expecting a `kind` reply) to the server(s)
/// of `key` in `pool`: a read to its first replica with failover, a write to all.
pub(crate) async fn pool_keyed(
    pool: &Pool,
    key: &[u8],
    bytes: Vec<u8>,
    kind: ReplyKind,
    is_read: bool,
) -> PoolFlight {
    PoolFlight(keyed(pool, key, bytes, kind, is_read).await)
}

/// Sends a one-key request (`bytes`, expecting a `kind` reply) to the server(s) of `key`:
/// a read to its first replica with failover, a write to every replica. A key that
/// cannot be placed is an error reply, or nothing (counted) if no reply is expected.
async fn keyed<S>(
    pool: &Pool,
    key: &[u8],
    bytes: Vec<u8>,
    kind: ReplyKind,
    is_read: bool,
) -> Pending<S> {
    let found = if is_read {
        read_order(pool, key)
    } else {
        servers_for(pool, key)
    };
    match found {
        Ok(s) if is_read => read(pool, s, bytes, kind).await,
        Ok(s) => write(pool, s, bytes, kind).await,
        Err(_) if kind == ReplyKind::None => {
            incr(&pool.stats.forward_error);
            Pending::Nothing
        }
        Err(e) => route_error(pool, e),
    }
}

/// Sends `flush_all` (`raw`) to every live server of `pool`.
pub(crate) async fn pool_flush(pool: &Pool, raw: &[u8], noreply: bool) -> PoolFlight {
    PoolFlight(flush_all(pool, raw, noreply).await)
}

/// Waits for a [`PoolFlight`]'s reply: the bytes a client of `pool` would have got
/// (a transport failure as `SERVER_ERROR <reason>`).
pub(crate) async fn finish_pool(pool: &Pool, f: PoolFlight) -> Vec<u8> {
    let mut out = Vec::new();
    resolve(pool, f.0, &mut out).await;
    out
}
