//! Failure detection and auto-eject with twemproxy's semantics.
//!
//! Every failed backend connection (connect error, reset, timeout, garbage) counts one
//! failure; a valid reply resets the count. With `auto_eject_hosts`, the
//! `server_failure_limit`-th consecutive failure takes the server out of the ring (its keys
//! move to the remaining servers exactly as twemproxy moves them) and the count restarts;
//! after `server_retry_timeout` the server rejoins the ring and is tried again.

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use crate::placement::Placement;
use crate::stats::{incr, unix_now, PoolStats, ServerStats};

/// A pool's failure counters and eject policy.
pub struct Health {
    placement: Arc<Placement>,
    failures: Vec<AtomicU32>,
    auto_eject: bool,
    limit: u32,
    retry: Duration,
    pool_stats: Arc<PoolStats>,
    server_stats: Vec<Arc<ServerStats>>,
    verbose: bool,
    names: Vec<String>,
}

impl Health {
    /// Health tracking for the servers of `placement`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        placement: Arc<Placement>,
        auto_eject: bool,
        limit: u32,
        retry: Duration,
        pool_stats: Arc<PoolStats>,
        server_stats: Vec<Arc<ServerStats>>,
        names: Vec<String>,
        verbose: bool,
    ) -> Health {
        Health {
            failures: (0..server_stats.len()).map(|_| AtomicU32::new(0)).collect(),
            placement,
            auto_eject,
            limit: limit.max(1),
            retry,
            pool_stats,
            server_stats,
            verbose,
            names,
        }
    }

    /// A valid reply arrived from server `index`: its consecutive-failure count restarts.
    #[inline]
    pub fn success(&self, index: usize) {
        if let Some(f) = self.failures.get(index) {
            if f.load(Relaxed) != 0 {
                f.store(0, Relaxed);
            }
        }
    }

    /// Server `index` failed once. Ejects it when auto-eject is on and the limit is
    /// reached, and schedules its return after the retry timeout. Must be called inside a
    /// tokio runtime.
    pub fn failure(self: &Arc<Self>, index: usize) {
        let Some(f) = self.failures.get(index) else {
            return;
        };
        let n = f.fetch_add(1, Relaxed).saturating_add(1);
        if self.verbose {
            eprintln!(
                "shoal-proxy: server {} failed ({n} consecutive)",
                self.name(index)
            );
        }
        if !self.auto_eject || n < self.limit {
            return;
        }
        f.store(0, Relaxed);
        if !self.placement.eject(index) {
            return;
        }
        incr(&self.pool_stats.server_ejects);
        if let Some(s) = self.server_stats.get(index) {
            s.server_ejected_at.store(unix_now(), Relaxed);
        }
        if self.verbose {
            eprintln!(
                "shoal-proxy: ejected server {} for {:?}",
                self.name(index),
                self.retry
            );
        }
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(me.retry).await;
            if me.placement.restore(index) && me.verbose {
                eprintln!("shoal-proxy: server {} back in the ring", me.name(index));
            }
        });
    }

    fn name(&self, index: usize) -> &str {
        self.names.get(index).map_or("?", String::as_str)
    }
}
