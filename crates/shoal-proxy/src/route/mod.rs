//! mcrouter's routes, over twemproxy's pools: a pool with a `route:` (see [`crate::config`])
//! has no servers of its own and sends each request to other pools of the file.
//!
//! What each route does with each request (mcrouter's semantics, except where noted):
//!
//! - **failover** (mcrouter's FailoverRoute, plus MissFailoverRoute for reads): a request
//!   goes to the first pool. A *get-family* request (`get`, `gets`, `gat`, `gats`, meta
//!   `mg` and `me`) goes on to the next pool for every key that **missed or failed**
//!   there; every other request (storage, `delete`, `incr`/`decr`, `touch`, meta `ms`,
//!   `md`, `ma`, and an `mg` that only touches: see `meta_reads`) goes on only on an **error**: a transport failure or a `SERVER_ERROR`
//!   reply (`CLIENT_ERROR` and `ERROR` are the request's fault and come back as they
//!   are). A multi-get asks the next pool only for the keys still missing. The answer
//!   for a key is the last pool's that was asked (so a miss after errors is a miss, as
//!   in mcrouter). Requests with `noreply` cannot see errors and go to the first pool
//!   only.
//! - **warmup** (WarmUpRoute): gets go to `cold`; keys that miss (or fail) there are
//!   read from `warm` with a plain `get`, answered from it, and each hit is copied into
//!   `cold` with `add` (which never overwrites a value set meanwhile), carrying the
//!   value's flags and the route's `exptime` (for `gat`/`gats`, the request's). For
//!   `gets`/`gats` the copy is made before answering and the key is then read again from
//!   `cold`, so the CAS token is cold's, as mcrouter does. Meta `mg` tries cold then
//!   warm, without copying (mcrouter's metaget). Everything else, **`set` and `delete`
//!   included, goes to `cold` only**: as in mcrouter the warm pool is the client's to
//!   keep consistent, so a key deleted through the route still exists in warm and a
//!   later get that misses cold brings the old value back (until it expires in warm).
//! - **shadow** (mcrouter's PoolRoute `shadows` with a `key_fraction_range`): every
//!   request goes to `pool`, which answers; requests whose key hashes into the fraction
//!   (FNV-1a 64 of the key, finished with splitmix64's mixer, mapped onto `[0, 1)`, so a
//!   key is always or never copied) are also copied to the `shadow` pool, without
//!   waiting and with the answers discarded. A copy is dropped rather than queued when
//!   the shadow server's connection is backed up, so a slow or dead shadow pool never
//!   slows or fails a client. A multi-get copies the keys in the fraction. Key-less
//!   requests (`flush_all`) are not copied.
//! - **prefix** (PrefixSelectorRoute): the longest prefix of `prefixes` that starts the
//!   key picks the pool; keys matching none go to `default`. A multi-get is split by pool
//!   and put back in key order.
//! - **replicated** (mcrouter's replicated pools): writes go to every pool, every reply
//!   is awaited and the worst one answered (AllSyncRoute: an error over `NOT_STORED` /
//!   `NOT_FOUND` / `EXISTS` over success, the first of equals in pool order); reads go to
//!   one pool and fail over on errors, never on misses, to at most `failover_count`
//!   pools, in an order this proxy host picks pseudo-randomly from its host name and
//!   keeps (LatestRoute; see [`crate::pool_request::latest`]).
//!
//! `flush_all` goes to every server pool a route writes to: all of a failover's or a
//! replicated route's pools, a warmup's cold pool, a shadow route's main pool, every pool
//! of a prefix route. A route may send to another route pool; loops are refused when the
//! configuration is read.

mod flight;
mod get;
mod keyed;
mod keyed_op;
mod keys;
mod shadow;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

pub(crate) use flight::{
    dispatch, finish, finish_get_into, finish_get_outcomes, send_and_forget, send_get, RouteFlight,
};
pub(crate) use get::GetFlight;
pub(crate) use keys::KeyOutcome;

use crate::config::route::{KeyFraction, RouteConfig};
use crate::config::PoolConfig;
use crate::pool::Pool;
use crate::stats::PoolStats;
use crate::value_size::ValueSize;

/// A boxed future: routes nest, so their steps recurse.
pub(crate) type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a listening pool (or a route) sends requests to: a server pool, or a route.
#[derive(Clone)]
pub enum Target {
    /// A pool with servers (one worker's instance of it).
    Pool(Arc<Pool>),
    /// A route over other pools.
    Route(Arc<Router>),
}

impl Target {
    /// The pool's name.
    pub fn name(&self) -> &str {
        match self {
            Target::Pool(p) => &p.config.name,
            Target::Route(r) => &r.config.name,
        }
    }

    /// The pool's configuration.
    pub fn config(&self) -> &PoolConfig {
        match self {
            Target::Pool(p) => &p.config,
            Target::Route(r) => &r.config,
        }
    }

    /// The pool's counters (twemproxy's pool stats).
    pub fn stats(&self) -> &Arc<PoolStats> {
        match self {
            Target::Pool(p) => &p.stats,
            Target::Route(r) => &r.stats,
        }
    }

    /// The pool's section of the stats document (a route pool has no servers).
    pub fn stats_json(&self) -> serde_json::Value {
        match self {
            Target::Pool(p) => p.stats_json(),
            Target::Route(r) => crate::stats::pool_json(&r.stats, std::iter::empty()),
        }
    }

    /// The estimate of retrieved values' size that sizes this target's multi-get batches.
    pub fn value_size(&self) -> &ValueSize {
        match self {
            Target::Pool(p) => &p.value_size,
            Target::Route(r) => &r.value_size,
        }
    }
}

/// A running route: its configuration and the targets it sends to, all of one worker.
pub struct Router {
    /// The route pool's configuration.
    pub config: PoolConfig,
    /// The route pool's counters: its clients, and the requests it answered with an
    /// error (`forward_error`).
    pub stats: Arc<PoolStats>,
    /// Retrieved values' size through this route.
    pub value_size: ValueSize,
    kind: Kind,
}

/// A route's targets, resolved.
enum Kind {
    Failover(Vec<Target>),
    Warmup {
        cold: Target,
        warm: Target,
        exptime: u32,
    },
    Shadow {
        main: Target,
        shadow: Arc<Pool>,
        range: KeyFraction,
    },
    Prefix {
        /// Longest prefix first.
        prefixes: Vec<(Vec<u8>, Target)>,
        default: Target,
    },
    Replicated {
        /// Every replica, for writes, in configuration order.
        all: Vec<Target>,
        /// The replicas reads try, in this host's order.
        reads: Vec<Target>,
    },
}

impl Router {
    /// Builds the route of `config` (a pool with a `route`), with `lookup` giving the
    /// target of every pool it names (of the same worker). `None` if `config` has no
    /// route or names a pool `lookup` does not know, which a validated configuration
    /// never does.
    pub fn build(
        config: &PoolConfig,
        stats: Arc<PoolStats>,
        lookup: &dyn Fn(&str) -> Option<Target>,
    ) -> Option<Arc<Router>> {
        let list =
            |names: &[String]| -> Option<Vec<Target>> { names.iter().map(|n| lookup(n)).collect() };
        let kind = match config.route.as_ref()? {
            RouteConfig::Failover { pools } => Kind::Failover(list(pools)?),
            RouteConfig::Warmup {
                cold,
                warm,
                exptime,
            } => Kind::Warmup {
                cold: lookup(cold)?,
                warm: lookup(warm)?,
                exptime: *exptime,
            },
            RouteConfig::Shadow {
                pool,
                shadow,
                range,
            } => Kind::Shadow {
                main: lookup(pool)?,
                shadow: match lookup(shadow)? {
                    Target::Pool(p) => p,
                    Target::Route(_) => return None,
                },
                range: *range,
            },
            RouteConfig::Prefix { prefixes, default } => Kind::Prefix {
                prefixes: prefixes
                    .iter()
                    .map(|(p, n)| Some((p.clone(), lookup(n)?)))
                    .collect::<Option<Vec<_>>>()?,
                default: lookup(default)?,
            },
            RouteConfig::Replicated {
                pools,
                failover_count,
            } => {
                let all = list(pools)?;
                let reads = crate::pool_request::latest::order(&all, *failover_count);
                Kind::Replicated { all, reads }
            }
        };
        Some(Arc::new(Router {
            config: config.clone(),
            stats,
            value_size: ValueSize::default(),
            kind,
        }))
    }

    /// The target of `key` in a prefix route: the longest matching prefix's, else the
    /// default. (Other routes have no per-key choice; `None`.)
    fn prefix_target(&self, key: &[u8]) -> Option<&Target> {
        let Kind::Prefix { prefixes, default } = &self.kind else {
            return None;
        };
        Some(
            prefixes
                .iter()
                .find(|(p, _)| key.starts_with(p))
                .map_or(default, |(_, t)| t),
        )
    }
}
