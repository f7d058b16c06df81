//! Failure detection and auto-eject, with twemproxy's semantics.
//!
//! Every failed connection (connect error, reset, timeout, garbage reply) counts one
//! failure; a valid reply resets the count. With auto-eject on, the `failure_limit`-th
//! consecutive failure takes the server out of the ring (its keys move to the remaining
//! servers exactly as the ring's distribution moves them) and the count restarts; after
//! `retry_timeout` it rejoins the ring and is tried again.

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use shoal_ring::SharedRing;

/// Receives the outcome of every backend connection's work.
pub trait HealthSink: Send + Sync + 'static {
    /// A valid reply arrived from server `server`.
    fn success(&self, server: usize);
    /// Server `server` failed once (one failed connection). Called inside a tokio
    /// runtime.
    fn failure(&self, server: usize);
}

/// When to take a failing server out of the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EjectPolicy {
    /// Eject at all (twemproxy `auto_eject_hosts`).
    pub auto_eject: bool,
    /// Consecutive failures that eject (twemproxy `server_failure_limit`, at least 1).
    pub failure_limit: u32,
    /// How long an ejected server stays out (twemproxy `server_retry_timeout`).
    pub retry_timeout: Duration,
}

impl Default for EjectPolicy {
    /// twemproxy's defaults, except that ejection is on: 2 failures, 30 s.
    fn default() -> Self {
        EjectPolicy {
            auto_eject: true,
            failure_limit: 2,
            retry_timeout: Duration::from_secs(30),
        }
    }
}

/// Something whose servers can be ejected and restored.
pub trait Ejectable: Send + Sync + 'static {
    /// Takes server `index` out; true if it was live.
    fn eject(&self, index: usize) -> bool;
    /// Puts server `index` back; true if it was out.
    fn restore(&self, index: usize) -> bool;
}

/// A [`SharedRing`] with rebuilds serialised, so concurrent ejections are not lost.
#[derive(Debug)]
pub struct LockedRing {
    /// The ring; lookups go straight to it (lock-free).
    pub ring: SharedRing,
    update: Mutex<()>,
}

impl LockedRing {
    /// Wraps a ring.
    pub fn new(ring: SharedRing) -> LockedRing {
        LockedRing {
            ring,
            update: Mutex::new(()),
        }
    }
}

impl Ejectable for LockedRing {
    fn eject(&self, index: usize) -> bool {
        let _g = self.update.lock();
        !self.ring.load().is_ejected(index) && self.ring.eject(index).is_ok()
    }

    fn restore(&self, index: usize) -> bool {
        let _g = self.update.lock();
        self.ring.load().is_ejected(index) && self.ring.restore(index).is_ok()
    }
}

/// Counts failures per server and ejects/restores through an [`Ejectable`].
pub struct Health<E: Ejectable> {
    target: Arc<E>,
    failures: Vec<AtomicU32>,
    policy: EjectPolicy,
    on_eject: Box<dyn Fn(usize) + Send + Sync>,
}

impl<E: Ejectable> Health<E> {
    /// Health tracking for `servers` servers; `on_eject` is called after each ejection
    /// (for counters and logs).
    pub fn new(
        target: Arc<E>,
        servers: usize,
        policy: EjectPolicy,
        on_eject: Box<dyn Fn(usize) + Send + Sync>,
    ) -> Health<E> {
        Health {
            target,
            failures: (0..servers).map(|_| AtomicU32::new(0)).collect(),
            policy,
            on_eject,
        }
    }

    /// Current consecutive failures of server `index`.
    pub fn failures(&self, index: usize) -> u32 {
        self.failures.get(index).map_or(0, |f| f.load(Relaxed))
    }
}

impl<E: Ejectable> HealthSink for Health<E> {
    #[inline]
    fn success(&self, server: usize) {
        if let Some(f) = self.failures.get(server) {
            if f.load(Relaxed) != 0 {
                f.store(0, Relaxed);
            }
        }
    }

    fn failure(&self, server: usize) {
        let Some(f) = self.failures.get(server) else {
            return;
        };
        let n = f.fetch_add(1, Relaxed).saturating_add(1);
        if !self.policy.auto_eject || n < self.policy.failure_limit.max(1) {
            return;
        }
        f.store(0, Relaxed);
        if !self.target.eject(server) {
            return;
        }
        (self.on_eject)(server);
        let target = self.target.clone();
        let retry = self.policy.retry_timeout;
        tokio::spawn(async move {
            tokio::time::sleep(retry).await;
            target.restore(server);
        });
    }
}
