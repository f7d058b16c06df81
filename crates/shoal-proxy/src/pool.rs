//! A server pool: placement, health and one [`Backend`] per server, built from a
//! [`PoolConfig`].

use std::sync::Arc;

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
    /// One backend per server, in pool order (twemproxy's sorted order).
    pub backends: Vec<Backend>,
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
        let placement = Arc::new(Placement::new(&config)?);
        let stats = Arc::new(PoolStats::default());
        let server_stats: Vec<Arc<ServerStats>> = config
            .servers
            .iter()
            .map(|_| Arc::new(ServerStats::default()))
            .collect();
        let names: Vec<String> = config
            .servers
            .iter()
            .map(|s| s.name.clone().unwrap_or_else(|| s.host_port()))
            .collect();
        let health = Arc::new(crate::health::for_pool(
            &config,
            placement.clone(),
            stats.clone(),
            server_stats.clone(),
            names.clone(),
            verbose,
        ));
        let backends = config
            .servers
            .iter()
            .zip(&server_stats)
            .enumerate()
            .map(|(i, (s, st))| {
                Backend::start(
                    i,
                    s.host_port(),
                    config.server_connections,
                    config.timeout,
                    config.preconnect,
                    health.clone(),
                    st.clone(),
                )
            })
            .collect();
        Ok(Arc::new(Pool {
            config,
            placement,
            health,
            backends,
            stats,
            names,
            value_size: ValueSize::default(),
        }))
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
