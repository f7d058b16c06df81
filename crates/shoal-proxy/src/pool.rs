//! A server pool: placement, health and one [`Backend`] per server, built from a
//! [`PoolConfig`].

use std::sync::atomic::{
    AtomicU64,
    Ordering::{Acquire, Release},
};
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::RwLock;
use shoal_client::health::HealthSink;

use shoal_ring::RingError;

use crate::backend::Backend;
use crate::config::PoolConfig;
use crate::health::Health;
use crate::placement::Placement;
use crate::session::ValueSize;
use crate::stats::{PoolStats, ServerStats};

/// A running pool. Cheap to share (`Arc<Pool>`) between client sessions.
pub struct Pool {
    /// The configuration it was built from.
    pub config: PoolConfig,
    /// Where keys go.
    pub placement: Arc<Placement>,
    /// Failure counting and auto-eject.
    pub health: Arc<Health>,
    /// One backend per server, in pool order (twemproxy's sorted order); shared with
    /// the pool this one replaced for the servers a reload kept.
    pub backends: Vec<Arc<Backend>>,
    /// Where each backend reports its health.
    routes: Vec<Arc<HealthRoute>>,
    /// Pool counters.
    pub stats: Arc<PoolStats>,
    /// Display names of the servers (configured name, else `host:port`).
    pub names: Vec<String>,
    /// How large retrieved values are lately: sizes multi-get batches and every
    /// connection's in-flight window (see [`crate::session`]).
    pub value_size: ValueSize,
}

impl Pool {
    /// Builds the ring and starts the backend connection tasks (lazily connecting unless
    /// `preconnect`). Must be called inside a tokio runtime.
    pub fn start(config: PoolConfig, verbose: bool) -> Result<Arc<Pool>, RingError> {
        Pool::start_after(config, verbose, None)
    }

    /// Like [`Pool::start`], for a pool replacing `previous` on a reload: the pool's
    /// counters, and the counters of every server whose display name is unchanged, carry
    /// on from `previous` (so stats never go backwards across a reload). A server with the
    /// same name and address, in a pool whose `timeout`, `server_connections` and
    /// `preconnect` are unchanged, keeps its backend and its open connections; it reports
    /// its health to this pool once [`Pool::adopt_backends`] is called. Other backends are
    /// new; `previous`'s close once the last request using them is done.
    pub fn start_after(
        config: PoolConfig,
        verbose: bool,
        previous: Option<&Pool>,
    ) -> Result<Arc<Pool>, RingError> {
        let placement = Arc::new(Placement::new(&config)?);
        let stats = previous.map_or_else(Arc::default, |p| p.stats.clone());
        let names: Vec<String> = config
            .servers
            .iter()
            .map(|s| s.name.clone().unwrap_or_else(|| s.host_port()))
            .collect();
        let server_stats: Vec<Arc<ServerStats>> = names
            .iter()
            .map(|n| previous.and_then(|p| p.server_stats(n)).unwrap_or_default())
            .collect();
        let health = Arc::new(crate::health::for_pool(
            &config,
            placement.clone(),
            stats.clone(),
            server_stats.clone(),
            names.clone(),
            verbose,
        ));
        // Backend connections are sized and timed by these: any change means new ones.
        let reusable = previous.filter(|p| {
            p.config.timeout == config.timeout
                && p.config.server_connections == config.server_connections
                && p.config.preconnect == config.preconnect
                && p.config.server_tls == config.server_tls
        });
        let mut backends = Vec::with_capacity(config.servers.len());
        let mut routes = Vec::with_capacity(config.servers.len());
        for (i, (s, st)) in config.servers.iter().zip(&server_stats).enumerate() {
            let kept = reusable.and_then(|p| {
                let j =
                    p.config.servers.iter().zip(&p.names).position(|(o, n)| {
                        o.host_port() == s.host_port() && names.get(i) == Some(n)
                    })?;
                Some((p.backends.get(j)?.clone(), p.routes.get(j)?.clone()))
            });
            let (backend, route) = kept.unwrap_or_else(|| {
                let route = Arc::new(HealthRoute::new(health.clone(), i));
                let backend = Backend::start_tls(
                    i,
                    s.host_port(),
                    config.server_connections,
                    config.timeout,
                    config.preconnect,
                    route.clone(),
                    st.clone(),
                    config
                        .server_tls
                        .as_ref()
                        .and_then(|t| t.for_server(&s.host)),
                );
                (Arc::new(backend), route)
            });
            backends.push(backend);
            routes.push(route);
        }
        Ok(Arc::new(Pool {
            config,
            placement,
            health,
            backends,
            routes,
            stats,
            names,
            value_size: ValueSize::default(),
        }))
    }

    /// Makes every backend this pool kept from the pool it replaces report its health
    /// (failures, ejections) to this pool. Called when the pool starts serving, not when
    /// it is built, so a reload that is refused later leaves the old pool's health whole.
    pub fn adopt_backends(&self) {
        for (i, r) in self.routes.iter().enumerate() {
            r.point(self.health.clone(), i);
        }
    }

    /// The counters of the server displayed as `name`, if the pool has one.
    pub fn server_stats(&self, name: &str) -> Option<Arc<ServerStats>> {
        let i = self.names.iter().position(|n| n == name)?;
        self.backends.get(i).map(|b| b.stats().clone())
    }

    /// The pool's section of the stats document.
    pub fn stats_json(&self) -> serde_json::Value {
        crate::stats::pool_json(
            &self.stats,
            self.names
                .iter()
                .cloned()
                .zip(self.backends.iter().map(|b| &**b.stats())),
        )
    }
}

/// Where a listening pool's current [`Pool`] lives, so a reload can swap it while client
/// connections stay open. Sessions check [`PoolSlot::generation`] (one atomic load) and
/// take the lock only when a reload has happened since they last looked.
pub struct PoolSlot {
    generation: AtomicU64,
    pool: RwLock<Arc<Pool>>,
}

impl PoolSlot {
    /// A slot holding `pool`.
    pub fn new(pool: Arc<Pool>) -> PoolSlot {
        PoolSlot {
            generation: AtomicU64::new(0),
            pool: RwLock::new(pool),
        }
    }

    /// The pool new requests should use.
    pub fn load(&self) -> Arc<Pool> {
        self.pool.read().clone()
    }

    /// Bumped by every [`PoolSlot::store`]: an unchanged value means the pool loaded with
    /// it is still current.
    pub fn generation(&self) -> u64 {
        self.generation.load(Acquire)
    }

    /// Makes `pool` the one new requests use; requests already holding the old one
    /// finish on it.
    pub fn store(&self, pool: Arc<Pool>) {
        *self.pool.write() = pool;
        self.generation.fetch_add(1, Release);
    }
}

/// Where one backend reports successes and failures: the health tracker of the pool
/// serving with it, and its index there. A reload that keeps the backend re-points it at
/// the new pool, whose ring may have it at another index.
struct HealthRoute(ArcSwap<(Arc<Health>, usize)>);

impl HealthRoute {
    fn new(health: Arc<Health>, index: usize) -> HealthRoute {
        HealthRoute(ArcSwap::from_pointee((health, index)))
    }

    fn point(&self, health: Arc<Health>, index: usize) {
        self.0.store(Arc::new((health, index)));
    }
}

impl HealthSink for HealthRoute {
    fn success(&self, _: usize) {
        let r = self.0.load();
        r.0.success(r.1);
    }

    fn failure(&self, _: usize) {
        let r = self.0.load();
        r.0.failure(r.1);
    }
}
