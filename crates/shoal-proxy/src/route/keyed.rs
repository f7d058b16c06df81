//! One-key requests other than the text get family (storage, `delete`, `incr`/`decr`,
//! `touch`, and the meta commands) through a target: [`send_keyed`] forwards the first
//! stage at once, [`finish_keyed`] awaits it and runs the later ones.

use std::sync::Arc;

use bytes::Bytes;

use super::keyed_op::KeyedOp;
use super::{shadow, Boxed, Kind, Target};
use crate::pool::Pool;
use crate::pool_request::{finish_pool, is_failure, pool_keyed, severity, PoolFlight};

/// A one-key request through a target, its first stage sent.
pub(crate) enum KeyedFlight {
    /// Sent to a server pool.
    Pool { pool: Arc<Pool>, flight: PoolFlight },
    /// Sent to the first of several pools, the rest for failover.
    Chain {
        first: Box<KeyedFlight>,
        rest: Vec<Target>,
        op: Arc<KeyedOp>,
        on_miss: bool,
    },
    /// Sent to every replica; the worst reply answers.
    All(Vec<KeyedFlight>),
}

/// Whether a read's reply is a miss: meta's `EN`, or nothing from a quiet one.
fn is_miss(reply: &[u8]) -> bool {
    reply.is_empty() || reply.starts_with(b"EN")
}

/// Sends `op` to `target` (its first stage).
pub(crate) fn send_keyed<'a>(target: &'a Target, op: &'a Arc<KeyedOp>) -> Boxed<'a, KeyedFlight> {
    Box::pin(async move {
        let r = match target {
            Target::Pool(pool) => {
                let flight = pool_keyed(pool, &op.key, op.bytes.clone(), op.kind, op.read).await;
                return KeyedFlight::Pool {
                    pool: pool.clone(),
                    flight,
                };
            }
            Target::Route(r) => r,
        };
        match &r.kind {
            Kind::Failover(pools) => chain(pools, op, op.read).await,
            Kind::Replicated { reads, all } => {
                if op.read {
                    chain(reads, op, false).await
                } else {
                    let mut flights = Vec::with_capacity(all.len());
                    for t in all {
                        flights.push(send_keyed(t, op).await);
                    }
                    KeyedFlight::All(flights)
                }
            }
            Kind::Warmup { cold, warm, .. } => {
                if op.read {
                    chain(&[cold.clone(), warm.clone()], op, true).await
                } else {
                    send_keyed(cold, op).await
                }
            }
            Kind::Shadow {
                main,
                shadow,
                range,
            } => {
                shadow::copy_keyed(shadow, op, *range);
                send_keyed(main, op).await
            }
            Kind::Prefix { default, .. } => {
                let t = r.prefix_target(&op.key).unwrap_or(default);
                send_keyed(t, op).await
            }
        }
    })
}

async fn chain(pools: &[Target], op: &Arc<KeyedOp>, on_miss: bool) -> KeyedFlight {
    let Some((first, rest)) = pools.split_first() else {
        return KeyedFlight::All(Vec::new());
    };
    KeyedFlight::Chain {
        first: Box::new(send_keyed(first, op).await),
        rest: rest.to_vec(),
        op: op.clone(),
        on_miss,
    }
}

/// Awaits a flight and its later stages: the reply for the client.
pub(crate) fn finish_keyed(f: KeyedFlight) -> Boxed<'static, Bytes> {
    Box::pin(async move {
        match f {
            KeyedFlight::Pool { pool, flight } => Bytes::from(finish_pool(&pool, flight).await),
            KeyedFlight::Chain {
                first,
                rest,
                op,
                on_miss,
            } => {
                let mut reply = finish_keyed(*first).await;
                for t in &rest {
                    if !(is_failure(&reply) || (on_miss && is_miss(&reply))) {
                        break;
                    }
                    reply = finish_keyed(send_keyed(t, &op).await).await;
                }
                reply
            }
            KeyedFlight::All(flights) => {
                let mut worst: Option<(u8, Bytes)> = None;
                for f in flights {
                    let r = finish_keyed(f).await;
                    let rank = severity(&r);
                    let worse = match &worst {
                        Some((w, _)) => rank > *w,
                        None => true,
                    };
                    if worse {
                        worst = Some((rank, r));
                    }
                }
                worst.map(|(_, r)| r).unwrap_or_default()
            }
        }
    })
}
