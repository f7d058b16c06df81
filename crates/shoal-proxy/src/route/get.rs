//! Get-family requests (`get`, `gets`, `gat`, `gats`, one key or many) through a target:
//! [`send_get`] forwards the first stage at once, so pipelined requests reach the
//! servers in the client's order; [`finish_get`] awaits it and runs the later stages
//! (failover, warm-up) the answers call for.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;

use super::keys::{outcomes, KeyList, KeyOutcome};
use super::{shadow, warmup, Kind, Router, Target};
use crate::pool::Pool;
use crate::session::{finish_pool, pool_get, PoolFlight};

/// A boxed future: routes nest, so their steps recurse.
pub(crate) type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How a get-family request asks for its keys.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GetSpec {
    /// `get`, `gets`, `gat` or `gats`.
    pub(crate) cmd: &'static str,
    /// `gat`/`gats`'s expiration time.
    pub(crate) exptime: Option<i64>,
}

impl GetSpec {
    /// Whether replies carry CAS tokens (`gets`, `gats`).
    pub(crate) fn with_cas(&self) -> bool {
        self.cmd == "gets" || self.cmd == "gats"
    }
}

/// A get-family request through a target, its first stage sent.
pub(crate) enum GetFlight {
    /// Sent to a server pool.
    Pool {
        pool: Arc<Pool>,
        flight: PoolFlight,
        keys: KeyList,
    },
    /// Sent to the first of several pools; the others are for keys that need them.
    Chain(Box<Chain>),
    /// Sent to a warm-up route's cold pool.
    Warmup(Box<warmup::WarmupGet>),
    /// Split over several targets (a prefix route): each part's key indexes and flight.
    Split {
        parts: Vec<(Vec<usize>, GetFlight)>,
        keys: usize,
    },
}

/// A failover or replicated read: the pools after the first, for the keys the earlier
/// ones did not answer.
pub(crate) struct Chain {
    first: GetFlight,
    rest: Vec<Target>,
    keys: KeyList,
    spec: GetSpec,
    /// Misses go on too (failover), not only errors (a replicated read).
    on_miss: bool,
}

/// Sends `keys` to `target` (its first stage).
pub(crate) fn send_get(target: &Target, keys: KeyList, spec: GetSpec) -> Boxed<'_, GetFlight> {
    Box::pin(async move {
        match target {
            Target::Pool(pool) => {
                let flight = pool_get(pool, &keys.refs(), spec.cmd, spec.exptime).await;
                GetFlight::Pool {
                    pool: pool.clone(),
                    flight,
                    keys,
                }
            }
            Target::Route(r) => send_route(r, keys, spec).await,
        }
    })
}

/// Sends `keys` through route `r`.
pub(crate) fn send_route(r: &Arc<Router>, keys: KeyList, spec: GetSpec) -> Boxed<'_, GetFlight> {
    Box::pin(async move {
        match &r.kind {
            Kind::Failover(pools) => chain(pools, keys, spec, true).await,
            Kind::Replicated { reads, .. } => chain(reads, keys, spec, false).await,
            Kind::Warmup { cold, .. } => {
                let first = send_get(cold, keys.clone(), spec).await;
                GetFlight::Warmup(Box::new(warmup::WarmupGet::new(
                    first,
                    r.clone(),
                    keys,
                    spec,
                )))
            }
            Kind::Shadow {
                main,
                shadow,
                range,
            } => {
                shadow::copy_get(shadow, &keys, spec, *range);
                send_get(main, keys, spec).await
            }
            Kind::Prefix { .. } => {
                // Group the keys by target, in order of first appearance.
                let mut groups: Vec<(&Target, Vec<usize>)> = Vec::new();
                for i in 0..keys.len() {
                    let Some(t) = r.prefix_target(keys.get(i)) else {
                        continue;
                    };
                    match groups.iter_mut().find(|(g, _)| same(g, t)) {
                        Some((_, idx)) => idx.push(i),
                        None => groups.push((t, vec![i])),
                    }
                }
                let mut parts = Vec::with_capacity(groups.len());
                for (t, idx) in groups {
                    let f = send_get(t, keys.subset(&idx), spec).await;
                    parts.push((idx, f));
                }
                GetFlight::Split {
                    parts,
                    keys: keys.len(),
                }
            }
        }
    })
}

/// Whether two targets are the same pool or route (of one worker).
pub(crate) fn same(a: &Target, b: &Target) -> bool {
    match (a, b) {
        (Target::Pool(x), Target::Pool(y)) => Arc::ptr_eq(x, y),
        (Target::Route(x), Target::Route(y)) => Arc::ptr_eq(x, y),
        _ => false,
    }
}

async fn chain(pools: &[Target], keys: KeyList, spec: GetSpec, on_miss: bool) -> GetFlight {
    let Some((first, rest)) = pools.split_first() else {
        // Validation guarantees two or more; an empty chain answers every key missing.
        return GetFlight::Split {
            parts: Vec::new(),
            keys: keys.len(),
        };
    };
    let first = send_get(first, keys.clone(), spec).await;
    GetFlight::Chain(Box::new(Chain {
        first,
        rest: rest.to_vec(),
        keys,
        spec,
        on_miss,
    }))
}

/// Awaits a flight and its later stages: the outcome of each of its keys, in order.
pub(crate) fn finish_get(f: GetFlight) -> Boxed<'static, Vec<KeyOutcome>> {
    Box::pin(async move {
        match f {
            GetFlight::Pool { pool, flight, keys } => {
                let reply = Bytes::from(finish_pool(&pool, flight).await);
                outcomes(reply, &keys)
            }
            GetFlight::Chain(c) => {
                let c = *c;
                let mut out = finish_get(c.first).await;
                for t in &c.rest {
                    let again: Vec<usize> = out
                        .iter()
                        .enumerate()
                        .filter(|(_, o)| match o {
                            KeyOutcome::Hit(_) => false,
                            KeyOutcome::Miss => c.on_miss,
                            KeyOutcome::Error(_) => true,
                        })
                        .map(|(i, _)| i)
                        .collect();
                    if again.is_empty() {
                        break;
                    }
                    let next = finish_get(send_get(t, c.keys.subset(&again), c.spec).await).await;
                    for (i, o) in again.into_iter().zip(next) {
                        if let Some(slot) = out.get_mut(i) {
                            *slot = o;
                        }
                    }
                }
                out
            }
            GetFlight::Warmup(w) => w.finish().await,
            GetFlight::Split { parts, keys } => {
                let mut out = vec![KeyOutcome::Miss; keys];
                for (idx, f) in parts {
                    let got = finish_get(f).await;
                    for (i, o) in idx.into_iter().zip(got) {
                        if let Some(slot) = out.get_mut(i) {
                            *slot = o;
                        }
                    }
                }
                out
            }
        }
    })
}
