//! A server pool: placement, health and one [`Backend`] per server, built from a
//! [`PoolConfig`].

use std::sync::Arc;

use arc_swap::ArcSwap;
use shoal_client::health::HealthSink;

use shoal_ring::RingError;

use crate::backend::Backend;
use crate::config::PoolConfig;
use crate::health::Health;
use crate::placement::Placement;
use crate::stats::{PoolStats, ServerStats};
use crate::value_size::ValueSize;

/// What every worker's instance of a server pool shares: the configuration, where keys
/// go, failure counting and ejection, and the counters. Built (and its ring checked) once
/// per configuration, before anything is switched; [`Pool::instantiate`] then gives each
/// worker its own backend connections over it.
pub struct PoolShared {
    /// The configuration it was built from.
    pub config: PoolConfig,
    /// Where keys go.
    pub placement: Arc<Placement>,
    /// Failure counting and auto-eject, for the backends of every worker.
    pub health: Arc<Health>,
    /// Pool counters.
    pub stats: Arc<PoolStats>,
    /// Display names of the servers (configured name, else `host:port`).
    pub names: Vec<String>,
    /// Each server's counters, shared by every worker's connections to it.
    pub server_stats: Vec<Arc<ServerStats>>,
    /// How large retrieved values are lately: sizes multi-get batches and every
    /// connection's in-flight window (see [`crate::session`]).
    pub value_size: ValueSize,
}

impl PoolShared {
    /// Builds the ring and health tracking of a server pool. `stats` are the pool's
    /// counters (a reload passes the replaced pool's, so they carry on); each server
    /// whose display name `previous` has keeps its counters too. `timed`: the servers'
    /// replies are timed for the metrics page.
    pub fn new(
        config: PoolConfig,
        verbose: bool,
        timed: bool,
        stats: Arc<PoolStats>,
        previous: Option<&PoolShared>,
    ) -> Result<Arc<PoolShared>, RingError> {
        let placement = Arc::new(Placement::new(&config)?);
        let names: Vec<String> = config
            .servers
            .iter()
            .map(|s| s.name.clone().unwrap_or_else(|| s.host_port()))
            .collect();
        let server_stats: Vec<Arc<ServerStats>> = names
            .iter()
            .map(|n| previous.and_then(|p| p.server_stats(n)).unwrap_or_default())
            .collect();
        if timed {
            for s in &server_stats {
                s.set_timed(true);
            }
        }
        let health = Arc::new(crate::health::for_pool(
            &config,
            placement.clone(),
            stats.clone(),
            server_stats.clone(),
            names.clone(),
            verbose,
        ));
        Ok(Arc::new(PoolShared {
            config,
            placement,
            health,
            stats,
            names,
            server_stats,
            value_size: ValueSize::default(),
        }))
    }

    /// The counters of the server displayed as `name`, if the pool has one.
    pub fn server_stats(&self, name: &str) -> Option<Arc<ServerStats>> {
        let i = self.names.iter().position(|n| n == name)?;
        self.server_stats.get(i).cloned()
    }

    /// The pool's section of the stats document.
    pub fn stats_json(&self) -> serde_json::Value {
        crate::stats::pool_json(
            &self.stats,
            self.names
                .iter()
                .cloned()
                .zip(self.server_stats.iter().map(|s| &**s)),
        )
    }
}

/// A running server pool as one worker sees it: the shared part and this worker's
/// connections to the servers, one [`Backend`] per server. Cheap to share
/// (`Arc<Pool>`) between that worker's client sessions.
pub struct Pool {
    /// What every worker's instance shares (also reachable through `Deref`).
    pub shared: Arc<PoolShared>,
    /// One backend per server, in pool order (twemproxy's sorted order); shared with
    /// the pool this one replaced (on the same worker) for the servers a reload kept.
    pub backends: Vec<Arc<Backend>>,
    /// Where each backend reports its health.
    routes: Vec<Arc<HealthRoute>>,
}

impl std::ops::Deref for Pool {
    type Target = PoolShared;

    fn deref(&self) -> &PoolShared {
        &self.shared
    }
}

impl Pool {
    /// Builds a pool with fresh counters and starts its backends on the current runtime
    /// (lazily connecting unless `preconnect`). Must be called inside a tokio runtime.
    pub fn start(config: PoolConfig, verbose: bool) -> Result<Arc<Pool>, RingError> {
        let shared = PoolShared::new(config, verbose, false, Arc::default(), None)?;
        Ok(Pool::instantiate(shared, None))
    }

    /// One worker's instance of `shared`: starts its backend connection tasks on the
    /// current runtime (enter the worker's runtime first). For a pool replacing
    /// `previous` (the same worker's) on a reload, a server with the same name and
    /// address, in a pool whose `timeout`, `server_connections`, `preconnect` and
    /// `server_tls` are unchanged, keeps its backend and its open connections (a changed
    /// `server_tls`, a renewed certificate included, means new connections with the new
    /// one); it reports its health to
    /// this pool once [`Pool::adopt_backends`] is called. Other backends are new;
    /// `previous`'s close once the last request using them is done.
    pub fn instantiate(shared: Arc<PoolShared>, previous: Option<&Pool>) -> Arc<Pool> {
        let config = &shared.config;
        // Backend connections are sized and timed by these: any change means new ones.
        let reusable = previous.filter(|p| {
            p.config.timeout == config.timeout
                && p.config.server_connections == config.server_connections
                && p.config.preconnect == config.preconnect
                && p.config.server_tls == config.server_tls
        });
        let mut backends = Vec::with_capacity(config.servers.len());
        let mut routes = Vec::with_capacity(config.servers.len());
        for (i, (s, st)) in config.servers.iter().zip(&shared.server_stats).enumerate() {
            let kept = reusable.and_then(|p| {
                let j = p.config.servers.iter().zip(&p.names).position(|(o, n)| {
                    o.host_port() == s.host_port() && shared.names.get(i) == Some(n)
                })?;
                Some((p.backends.get(j)?.clone(), p.routes.get(j)?.clone()))
            });
            let (backend, route) = kept.unwrap_or_else(|| {
                let route = Arc::new(HealthRoute::new(shared.health.clone(), i));
                let backend = Backend::start_tls(
                    i,
                    s.host_port(),
                    config.server_connections,
                    config.timeout,
                    config.preconnect,
                    route.clone(),
                    st.clone(),
                    config.server_tls.as_ref().map(|t| t.for_server(&s.host)),
                );
                (Arc::new(backend), route)
            });
            backends.push(backend);
            routes.push(route);
        }
        Arc::new(Pool {
            shared,
            backends,
            routes,
        })
    }

    /// Makes every backend this pool kept from the pool it replaces report its health
    /// (failures, ejections) to this pool. Called when the pool starts serving, not when
    /// it is built, so a reload that is refused later leaves the old pool's health whole.
    pub fn adopt_backends(&self) {
        for (i, r) in self.routes.iter().enumerate() {
            r.point(self.health.clone(), i);
        }
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
