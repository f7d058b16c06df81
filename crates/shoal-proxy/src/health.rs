//! Failure detection and auto-eject with twemproxy's semantics: shoal-client's
//! [`shoal_client::health::Health`] over a pool's [`Placement`].
//!
//! Every failed backend connection (connect error, reset, timeout, garbage) counts one
//! failure; a valid reply resets the count. With `auto_eject_hosts`, the
//! `server_failure_limit`-th consecutive failure takes the server out of the ring (its keys
//! move to the remaining servers exactly as twemproxy moves them) and the count restarts;
//! after `server_retry_timeout` the server rejoins the ring and is tried again.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use shoal_client::health::{EjectPolicy, Ejectable};

use crate::config::PoolConfig;
use crate::placement::Placement;
use crate::stats::{incr, unix_now, PoolStats, ServerStats};

/// A pool's health tracker.
pub type Health = shoal_client::health::Health<Placement>;

impl Ejectable for Placement {
    fn eject(&self, index: usize) -> bool {
        Placement::eject(self, index)
    }

    fn restore(&self, index: usize) -> bool {
        Placement::restore(self, index)
    }
}

/// Builds the health tracker of a pool: ejections are counted in the pool's and the
/// server's stats and, when `verbose`, logged.
pub fn for_pool(
    config: &PoolConfig,
    placement: Arc<Placement>,
    pool_stats: Arc<PoolStats>,
    server_stats: Vec<Arc<ServerStats>>,
    names: Vec<String>,
    verbose: bool,
) -> Health {
    let policy = EjectPolicy {
        auto_eject: config.auto_eject_hosts,
        failure_limit: config.server_failure_limit,
        retry_timeout: config.server_retry_timeout,
    };
    let retry = config.server_retry_timeout;
    let n = config.servers.len();
    Health::new(
        placement,
        n,
        policy,
        Box::new(move |i| {
            incr(&pool_stats.server_ejects);
            if let Some(s) = server_stats.get(i) {
                s.server_ejected_at.store(unix_now(), Relaxed);
                incr(&s.ejections);
            }
            if verbose {
                let name = names.get(i).map_or("?", String::as_str);
                tracing::warn!("shoal-proxy: ejected server {name} for {retry:?}");
            }
        }),
    )
}
