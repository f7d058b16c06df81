//! How one request reaches a pool's servers: which servers hold a key (and in which
//! order a read tries them), and the read, write and send primitives that put the request
//! on their backend connections. [`super::dispatch`] decides what a request is; this
//! module only places and sends it, so the multi-get and reply modules can share it
//! without depending on the dispatch above them.

use super::pending::{Attempt, Pending};
use crate::backend::ReplyRx;
use crate::error::BackendError;
use crate::frame::ReplyKind;
use crate::pool::Pool;
use crate::stats::incr;

pub(crate) fn route_error<S>(pool: &Pool, e: BackendError) -> Pending<S> {
    incr(&pool.stats.forward_error);
    Pending::Ready(e.reply())
}

/// Servers holding `key`: its ring server, then the other replicas (one server unless
/// replicated). Writes go to all of them.
pub(crate) fn servers_for(pool: &Pool, key: &[u8]) -> Result<Vec<usize>, BackendError> {
    let r = if pool.placement.replica_count() > 1 {
        pool.placement.replicas(key)
    } else {
        pool.placement.locate(key).map(|i| vec![i])
    };
    r.map_err(|_| BackendError::NoLiveServers)
}

/// The servers a read of `key` tries, in order: in a replicated pool, mcrouter's
/// LatestRoute order, which starts at the replica this proxy host prefers
/// ([`super::latest::host_seed`]) and fails over to the others; else the one
/// server.
pub(crate) fn read_order(pool: &Pool, key: &[u8]) -> Result<Vec<usize>, BackendError> {
    let mut servers = servers_for(pool, key)?;
    if servers.len() > 1 {
        let n = servers.len();
        servers.rotate_left((super::latest::host_seed() % n as u64) as usize);
    }
    Ok(servers)
}

pub(crate) async fn send(
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
pub(crate) async fn read<S>(
    pool: &Pool,
    servers: Vec<usize>,
    bytes: Vec<u8>,
    kind: ReplyKind,
) -> Pending<S> {
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

/// A write: to every server holding the key. In a replicated pool it waits for every
/// replica and answers the worst reply (mcrouter's AllSyncRoute).
pub(crate) async fn write<S>(
    pool: &Pool,
    servers: Vec<usize>,
    bytes: Vec<u8>,
    kind: ReplyKind,
) -> Pending<S> {
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
        Pending::Worst(rxs)
    }
}
