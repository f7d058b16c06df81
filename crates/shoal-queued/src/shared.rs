//! The state every connection shares: settings, queues, counters, the read budget and
//! the shutdown signal. Its own module so that the server (which creates it), the
//! connections and the metrics page (which read it) depend on it and not on each other.

use crate::config::Settings;
use crate::stats::Counters;
use crate::status::Status;
use shoal_net::Budget;
use shoal_queue::Engine;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::watch;

/// State shared by every connection.
pub struct Shared {
    /// The validated settings.
    pub settings: Settings,
    /// The queues.
    pub engine: Engine,
    /// Server counters.
    pub counters: Counters,
    /// Kestrel's server status (`UP`, `READONLY`, `QUIESCENT`...), kept in the data
    /// directory.
    pub status: Status,
    /// What connections' read buffers may hold beyond what each holds for free, all
    /// together (`--read-buf-mem-limit`).
    pub read_budget: Budget,
    shutdown_tx: watch::Sender<bool>,
    stopping: AtomicBool,
}

impl Shared {
    /// The state for a server with these settings and queues.
    pub fn new(settings: Settings, engine: Engine) -> Arc<Shared> {
        let (shutdown_tx, _) = watch::channel(false);
        Arc::new(Shared {
            read_budget: Budget::new(settings.read_buf_mem_limit),
            status: Status::load(&settings.engine.data_dir),
            settings,
            engine,
            counters: Counters::default(),
            shutdown_tx,
            stopping: AtomicBool::new(false),
        })
    }

    /// A receiver that changes when shutdown begins.
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown_tx.subscribe()
    }

    /// Re-reads `--queue-config` and applies it to every queue (Kestrel's `reload`, and
    /// SIGHUP). On an error nothing changes.
    pub fn reload(&self) -> Result<(), String> {
        let lines = match &self.settings.queue_config {
            Some(p) => crate::config::read_queue_config(p)?,
            None => Default::default(),
        };
        self.engine
            .reload(self.settings.default_limits.clone(), lines);
        tracing::info!("queue config reloaded");
        Ok(())
    }

    /// Whether shutdown has begun.
    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    /// Begins an orderly shutdown: stop accepting, let connections finish their replies.
    pub(crate) fn begin_shutdown(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        let _ = self.shutdown_tx.send(true);
    }
}
