//! Get-family requests (`get`, `gets`, `gat`, `gats`, one key or many) through a target:
//! [`send_get`] forwards the first stage at once, so pipelined requests reach the
//! servers in the client's order; [`finish_get`] awaits it and runs the later stages
//! (failover, warm-up) the answers call for. The warm-up stage lives here too: it
//! sends further gets, and gets send it, so the two recurse as one state machine.

use std::sync::Arc;

use bytes::Bytes;

use super::keyed::{finish_keyed, send_keyed};
use super::keyed_op::add_op;
use super::keys::{flags_and_data, GetSpec};
use super::keys::{outcomes, KeyList, KeyOutcome};
use super::{shadow, Boxed, Kind, Router, Target};
use crate::pool::Pool;
use crate::pool_request::{finish_pool, pool_get, PoolFlight};

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
    Warmup(Box<WarmupGet>),
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
                GetFlight::Warmup(Box::new(WarmupGet::new(first, r.clone(), keys, spec)))
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

/// A get through a warm-up route whose cold stage is in flight.
pub(crate) struct WarmupGet {
    cold_flight: GetFlight,
    router: Arc<Router>,
    keys: KeyList,
    spec: GetSpec,
}

impl WarmupGet {
    pub(crate) fn new(
        cold_flight: GetFlight,
        router: Arc<Router>,
        keys: KeyList,
        spec: GetSpec,
    ) -> WarmupGet {
        WarmupGet {
            cold_flight,
            router,
            keys,
            spec,
        }
    }

    /// Awaits cold, reads what it lacked from warm, copies warm's hits into cold, and
    /// gives each key's outcome.
    pub(crate) async fn finish(self) -> Vec<KeyOutcome> {
        let mut out = finish_get(self.cold_flight).await;
        let Kind::Warmup {
            cold,
            warm,
            exptime,
        } = &self.router.kind
        else {
            return out;
        };
        let lacking: Vec<usize> = (0..out.len()).filter(|&i| !out[i].is_hit()).collect();
        if lacking.is_empty() {
            return out;
        }
        let plain = GetSpec {
            cmd: "get",
            exptime: None,
        };
        let warm_out = finish_get(send_get(warm, self.keys.subset(&lacking), plain).await).await;
        // A `gat` sets the key's expiration time: the copy gets the one asked for.
        let ttl = self.spec.exptime.unwrap_or(i64::from(*exptime));
        let with_cas = self.spec.with_cas();
        let mut copies = Vec::new();
        let mut hits = Vec::new();
        for (&i, o) in lacking.iter().zip(&warm_out) {
            let KeyOutcome::Hit(entry) = o else { continue };
            let Some((flags, data)) = flags_and_data(entry) else {
                continue;
            };
            let op = Arc::new(add_op(self.keys.get(i), flags, ttl, data, with_cas));
            // Sent now, in key order; without CAS nobody waits for the answer.
            copies.push(send_keyed(cold, &op).await);
            hits.push(i);
        }
        if !with_cas {
            drop(copies);
            for (i, o) in lacking.into_iter().zip(warm_out) {
                out[i] = o;
            }
            return out;
        }
        // gets/gats: the client needs cold's CAS token, so the copies are made first and
        // the keys read again from cold. Keys warm lacked keep cold's outcome.
        for c in copies {
            finish_keyed(c).await;
        }
        if hits.is_empty() {
            return out;
        }
        let again = finish_get(send_get(cold, self.keys.subset(&hits), self.spec).await).await;
        for (i, o) in hits.into_iter().zip(again) {
            out[i] = o;
        }
        out
    }
}
