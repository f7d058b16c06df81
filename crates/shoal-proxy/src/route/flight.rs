//! A client's request through a route pool: [`dispatch`] forwards its first stage (in the
//! connection's order), [`finish`] writes the client's reply once every stage is done.

use std::sync::Arc;

use shoal_protocol::{reply, Request};

use super::get::{finish_get, same, send_route, GetFlight};
use super::keyed::{finish_keyed, send_keyed, KeyedFlight};
use super::keyed_op::KeyedOp;
use super::keys::{GetSpec, KeyList, KeyOutcome};
use super::{Kind, Router, Target};
use crate::frame::ReplyKind;
use crate::pool::Pool;
use crate::pool_request::{
    finish_pool, get_command, is_failure, meta_forward, pool_flush, PoolFlight,
};
use crate::stats::incr;

/// A client's request through a route, on its way.
pub(crate) enum RouteFlight {
    /// A get-family request.
    Get {
        router: Arc<Router>,
        flight: GetFlight,
    },
    /// A one-key request.
    Keyed {
        router: Arc<Router>,
        flight: KeyedFlight,
    },
    /// `flush_all` to every server pool the route writes to.
    Flush(Vec<(Arc<Pool>, PoolFlight)>),
    /// Answered without forwarding.
    Ready(&'static [u8]),
    /// Nothing to answer (`noreply`).
    Nothing,
}

/// The command and expiration time of a get-family request.
fn get_spec(req: &Request<'_>) -> GetSpec {
    let (cmd, exptime) = get_command(req);
    GetSpec { cmd, exptime }
}

/// Forwards the first stage of `req` (whose bytes are `raw`) through `router`. Requests
/// the proxy answers itself never get here.
pub(crate) async fn dispatch(router: &Arc<Router>, req: &Request<'_>, raw: &[u8]) -> RouteFlight {
    let line_kind = |noreply: bool| {
        if noreply {
            ReplyKind::None
        } else {
            ReplyKind::Line
        }
    };
    match req {
        Request::Get { keys, .. } | Request::GetAndTouch { keys, .. } => {
            let list: Vec<&[u8]> = keys.iter().collect();
            if list.is_empty() {
                return RouteFlight::Ready(reply::END);
            }
            RouteFlight::Get {
                router: router.clone(),
                flight: send_route(router, KeyList::from_slices(&list), get_spec(req)).await,
            }
        }
        Request::Store { key, noreply, .. }
        | Request::Delete { key, noreply }
        | Request::Arithmetic { key, noreply, .. }
        | Request::Touch { key, noreply, .. } => {
            let op = Arc::new(KeyedOp {
                key: key.to_vec(),
                bytes: raw.to_vec(),
                kind: line_kind(*noreply),
                read: false,
            });
            keyed(router, &op).await
        }
        Request::FlushAll { noreply, .. } => {
            let mut pools = Vec::new();
            flush_pools(&Target::Route(router.clone()), &mut pools);
            let mut parts = Vec::with_capacity(pools.len());
            for p in pools {
                let f = pool_flush(&p, raw, *noreply).await;
                parts.push((p, f));
            }
            if *noreply {
                drop(parts);
                return RouteFlight::Nothing;
            }
            RouteFlight::Flush(parts)
        }
        _ => {
            let mut tmp = [0u8; 256];
            let m = match meta_forward(req, raw, &mut tmp) {
                Some(Ok(m)) => m,
                Some(Err(error)) => return RouteFlight::Ready(error),
                None => return RouteFlight::Ready(reply::ERROR),
            };
            let op = Arc::new(KeyedOp {
                key: m.key.to_vec(),
                bytes: m.bytes,
                kind: m.kind,
                read: m.read,
            });
            keyed(router, &op).await
        }
    }
}

async fn keyed(router: &Arc<Router>, op: &Arc<KeyedOp>) -> RouteFlight {
    RouteFlight::Keyed {
        router: router.clone(),
        flight: send_keyed(&Target::Route(router.clone()), op).await,
    }
}

/// The server pools `flush_all` reaches through `t` (those it writes to), once each.
fn flush_pools(t: &Target, out: &mut Vec<Arc<Pool>>) {
    let r = match t {
        Target::Pool(p) => {
            if !out.iter().any(|o| Arc::ptr_eq(o, p)) {
                out.push(p.clone());
            }
            return;
        }
        Target::Route(r) => r,
    };
    match &r.kind {
        Kind::Failover(all) | Kind::Replicated { all, .. } => {
            for t in all {
                flush_pools(t, out);
            }
        }
        Kind::Warmup { cold, .. } => flush_pools(cold, out),
        Kind::Shadow { main, .. } => flush_pools(main, out),
        Kind::Prefix { prefixes, default } => {
            let mut seen: Vec<&Target> = Vec::new();
            for t in prefixes.iter().map(|(_, t)| t).chain([default]) {
                if !seen.iter().any(|s| same(s, t)) {
                    seen.push(t);
                    flush_pools(t, out);
                }
            }
        }
    }
}

/// Awaits a routed request and appends the client's reply to `out`.
pub(crate) async fn finish(f: RouteFlight, out: &mut Vec<u8>) {
    match f {
        RouteFlight::Get { router, flight } => {
            if write_hits(&router, finish_get(flight).await, out) {
                out.extend_from_slice(reply::END);
            }
        }
        RouteFlight::Keyed { router, flight } => {
            let r = finish_keyed(flight).await;
            if is_failure(&r) {
                incr(&router.stats.forward_error);
            }
            out.extend_from_slice(&r);
        }
        RouteFlight::Flush(parts) => {
            let mut bad: Option<Vec<u8>> = None;
            for (pool, f) in parts {
                let r = finish_pool(&pool, f).await;
                if r != reply::OK && bad.is_none() {
                    bad = Some(r);
                }
            }
            out.extend_from_slice(bad.as_deref().unwrap_or(reply::OK));
        }
        RouteFlight::Ready(r) => out.extend_from_slice(r),
        RouteFlight::Nothing => {}
    }
}

/// Writes the hits of a get in key order (no `END`); if any key failed everywhere, only
/// the first error line instead, and returns false.
fn write_hits(router: &Router, got: Vec<KeyOutcome>, out: &mut Vec<u8>) -> bool {
    if let Some(KeyOutcome::Error(e)) = got.iter().find(|o| matches!(o, KeyOutcome::Error(_))) {
        incr(&router.stats.forward_error);
        out.extend_from_slice(e);
        return false;
    }
    let mut largest = 0;
    let mut count = 0;
    for o in &got {
        if let KeyOutcome::Hit(entry) = o {
            largest = largest.max(entry.len());
            count += 1;
            out.extend_from_slice(entry);
        }
    }
    router.value_size.observe(largest, count);
    true
}

/// Forwards one batch of a large multi-get through `router` (see the session's batching).
pub(crate) async fn send_get(
    router: &Arc<Router>,
    keys: &[&[u8]],
    cmd: &'static str,
    exptime: Option<i64>,
) -> GetFlight {
    send_route(router, KeyList::from_slices(keys), GetSpec { cmd, exptime }).await
}

/// Awaits a batch sent by [`send_get`] and writes its hits (no `END`), or its error line
/// and false.
pub(crate) async fn finish_get_into(router: &Router, f: GetFlight, out: &mut Vec<u8>) -> bool {
    write_hits(router, finish_get(f).await, out)
}

/// Awaits a get sent by [`send_get`] and gives the outcome of each of its keys, in key
/// order (a binary client's run of gets, answered request by request), feeding the
/// route's value-size estimate and counting every key that failed everywhere in
/// `forward_error`.
pub(crate) async fn finish_get_outcomes(router: &Router, f: GetFlight) -> Vec<KeyOutcome> {
    let got = finish_get(f).await;
    let mut largest = 0;
    let mut count = 0;
    for o in &got {
        match o {
            KeyOutcome::Hit(entry) => {
                largest = largest.max(entry.len());
                count += 1;
            }
            KeyOutcome::Error(_) => incr(&router.stats.forward_error),
            KeyOutcome::Miss => {}
        }
    }
    router.value_size.observe(largest, count);
    got
}

/// Sends a one-key write through `router` and lets it finish unobserved (removing the old
/// value of a key whose new one was refused): the first stage is sent, later stages are
/// not run.
pub(crate) async fn send_and_forget(
    router: &Arc<Router>,
    key: &[u8],
    bytes: Vec<u8>,
    kind: ReplyKind,
) {
    let op = Arc::new(KeyedOp {
        key: key.to_vec(),
        bytes,
        kind,
        read: false,
    });
    drop(send_keyed(&Target::Route(router.clone()), &op).await);
}
