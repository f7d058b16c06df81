//! Routing one parsed request: which servers it goes to, and what the connection then
//! waits for.

use super::get_command;
use super::multiget::multi_get;
use super::pending::{Attempt, Pending};
use crate::backend::ReplyRx;
use crate::error::BackendError;
use crate::frame::ReplyKind;
use crate::pool::Pool;
use crate::stats::incr;
use shoal_protocol::{decode_key, reply, Request};

pub(super) fn route_error(pool: &Pool, e: BackendError) -> Pending {
    incr(&pool.stats.forward_error);
    Pending::Ready(e.reply())
}

/// Servers for `key`: the replicas in failover order (one server unless replicated).
pub(super) fn servers_for(pool: &Pool, key: &[u8]) -> Result<Vec<usize>, BackendError> {
    let r = if pool.placement.replica_count() > 1 {
        pool.placement.replicas(key)
    } else {
        pool.placement.locate(key).map(|i| vec![i])
    };
    r.map_err(|_| BackendError::NoLiveServers)
}

pub(super) async fn send(
    pool: &Pool,
    server: usize,
    bytes: Vec<u8>,
    kind: ReplyKind,
) -> Option<ReplyRx> {
    match pool.backends.get(server) {
        Some(b) => b.send(bytes, kind).await,
        None => None,
    }
}

/// A read: to the first server, failing over to the others.
pub(super) async fn read(
    pool: &Pool,
    servers: Vec<usize>,
    bytes: Vec<u8>,
    kind: ReplyKind,
) -> Pending {
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
pub(super) async fn write(
    pool: &Pool,
    servers: Vec<usize>,
    bytes: Vec<u8>,
    kind: ReplyKind,
) -> Pending {
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

pub(super) async fn dispatch(pool: &Pool, req: &Request<'_>, raw: &[u8]) -> Pending {
    match req {
        Request::Get { keys, .. } | Request::GetAndTouch { keys, .. } => {
            let (cmd, exptime) = get_command(req);
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
        // Server administration (`stats`, `cache_memlimit`, `lru_crawler`, `watch`, and
        // whatever the parser learns next) has no meaning across a pool: twemproxy
        // answers ERROR.
        _ => Pending::Static(reply::ERROR),
    }
}
