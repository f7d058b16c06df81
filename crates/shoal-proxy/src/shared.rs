//! What the listeners, the workers, the stats port, the metrics page and reloads share:
//! the pools serving now (each with its counters, server pools' shared parts, per-worker
//! targets and listener) and the process-wide counters.
//!
//! Every client connection holds a [`ConnGuard`] from the moment it is accepted: the
//! `client_connections` limit and the connection counters are given back when the guard
//! drops, however the connection's task ends, so a panicking task never leaks a slot
//! (and the panic is logged by the worker).

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use shoal_net::{Acceptor, Budget, Incoming, WorkerPool};
use tokio::runtime::Handle;
use tokio::sync::{oneshot, watch};

use crate::config::PoolConfig;
use crate::pool::PoolShared;
use crate::route::Target;
use crate::slot::PoolSlot;
use crate::stats::{decr, incr, PoolStats, PoolView};

/// Process-wide counters: the stats header and the metrics page's first figures.
pub(crate) struct Counters {
    /// Client connections accepted.
    pub(crate) total: AtomicU64,
    /// Client connections open.
    pub(crate) current: AtomicU64,
    /// Unix seconds at start.
    pub(crate) started: u64,
    /// Reloads that took effect.
    pub(crate) reloads: AtomicU64,
    /// Reloads refused.
    pub(crate) reload_failures: AtomicU64,
}

/// What the listeners, the workers, the stats port, the metrics page and reloads share.
pub(crate) struct Shared {
    /// Process-wide counters.
    pub(crate) counters: Arc<Counters>,
    /// The read-buffer budget every client connection draws from.
    pub(crate) budget: Budget,
    /// Stops every acceptor (a signal seen by one stops them all).
    pub(crate) shutdown: Arc<watch::Sender<bool>>,
    /// Log connection failures and ejections.
    pub(crate) verbose: bool,
    /// Backends time their replies (only when metrics are served).
    pub(crate) timed: bool,
    /// The file reloads re-read.
    pub(crate) config_path: Option<PathBuf>,
    /// The runtimes server connections run on: each worker's, or with shared backends
    /// the accepting thread's alone.
    pub(crate) homes: Vec<Handle>,
    /// How many workers (each listener has one slot per worker).
    pub(crate) threads: usize,
    /// The worker threads, until [`crate::Running::shutdown`] takes them.
    pub(crate) workers: parking_lot::Mutex<Option<WorkerPool<ClientConn>>>,
    /// Tells the workers to finish their connections and end.
    pub(crate) workers_stop: watch::Sender<bool>,
    /// The pools serving now, in configuration order. Held for a whole reload, which
    /// therefore never overlaps another.
    pub(crate) state: parking_lot::Mutex<Vec<Entry>>,
}

/// One pool of the configuration serving now.
pub(crate) struct Entry {
    /// Its configuration.
    pub(crate) config: PoolConfig,
    /// Its counters, which carry on across reloads under the same name.
    pub(crate) stats: Arc<PoolStats>,
    /// A server pool's part every worker shares (`None` for a route pool).
    pub(crate) shared: Option<Arc<PoolShared>>,
    /// The pool as each home runtime's connections see it (see [`Shared::homes`]).
    pub(crate) targets: Vec<Target>,
    /// Its listener, if it has a `listen` address.
    pub(crate) live: Option<Live>,
}

/// A listening pool.
pub(crate) struct Live {
    /// What each worker's connections of this listener use, one slot per worker.
    pub(crate) slots: Arc<[Arc<PoolSlot>]>,
    /// The bound address (TCP) or socket path.
    pub(crate) addr: String,
    /// Dropping it stops this pool's listener (its open connections carry on).
    pub(crate) _close: oneshot::Sender<()>,
}

/// A pool's listener, bound but not yet accepting.
pub(crate) struct Bound {
    /// Accepts its connections.
    pub(crate) acceptor: Acceptor,
    /// The bound address (TCP) or socket path, as logged.
    pub(crate) shown: String,
}

/// One client connection's place in the counters, taken when it is accepted and given
/// back on drop, however its task ends (a panic included).
pub(crate) struct ConnGuard {
    // The pool's counters outlive reloads (a replacing pool takes them over), so the
    // count is given back where it was taken whatever pool the connection ends on.
    stats: Arc<PoolStats>,
    counters: Arc<Counters>,
}

impl ConnGuard {
    /// Counts a connection accepted for the pool counted in `stats`.
    pub(crate) fn new(stats: &Arc<PoolStats>, counters: &Arc<Counters>) -> ConnGuard {
        incr(&stats.client_connections);
        incr(&counters.total);
        incr(&counters.current);
        ConnGuard {
            stats: stats.clone(),
            counters: counters.clone(),
        }
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        decr(&self.stats.client_connections);
        decr(&self.counters.current);
    }
}

/// An accepted client connection on its way to a worker: the socket, its listener's
/// slots (the worker picks its own) and its place in the counters.
pub(crate) struct ClientConn {
    /// The socket.
    pub(crate) conn: Incoming,
    /// Its listener's per-worker slots.
    pub(crate) slots: Arc<[Arc<PoolSlot>]>,
    /// Its place in the counters.
    pub(crate) guard: ConnGuard,
}

impl Shared {
    /// What the stats port and the metrics page report: every pool serving now, in
    /// configuration order (route pools have no servers).
    pub(crate) fn views(&self) -> Vec<PoolView> {
        self.state
            .lock()
            .iter()
            .map(|e| PoolView {
                name: e.config.name.clone(),
                stats: e.stats.clone(),
                servers: e
                    .shared
                    .as_ref()
                    .map(|s| {
                        s.names
                            .iter()
                            .cloned()
                            .zip(s.server_stats.clone())
                            .collect()
                    })
                    .unwrap_or_default(),
            })
            .collect()
    }

    pub(crate) fn state(&self) -> parking_lot::MutexGuard<'_, Vec<Entry>> {
        self.state.lock()
    }

    pub(crate) fn config_path(&self) -> Option<&std::path::Path> {
        self.config_path.as_deref()
    }

    pub(crate) fn count_reload(&self, ok: bool) {
        let c = &self.counters;
        incr(if ok { &c.reloads } else { &c.reload_failures });
    }
}
