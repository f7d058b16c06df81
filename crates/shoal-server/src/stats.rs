//! Request counters: one set per worker thread, summed on demand.
//!
//! Each worker increments only its own counters, so the hot path touches no shared cache
//! line. `stats reset` does not write other threads' counters either: it records a
//! baseline that later snapshots subtract.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// One worker's counters.
        #[derive(Debug, Default)]
        pub struct ThreadStats {
            $($(#[$doc])* pub $name: AtomicU64,)*
        }

        /// A sum of counters, as reported by `stats`.
        #[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
        pub struct Totals {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl Totals {
            fn add(&mut self, t: &ThreadStats) {
                $(self.$name += t.$name.load(Ordering::Relaxed);)*
            }

            fn minus(self, base: &Totals) -> Totals {
                Totals { $($name: self.$name.saturating_sub(base.$name),)* }
            }
        }
    };
}

counters! {
    /// Keys requested by get/gets/gat/gats/mg.
    cmd_get,
    /// Storage commands.
    cmd_set,
    /// touch/gat/gats commands.
    cmd_touch,
    /// flush_all commands.
    cmd_flush,
    /// Keys found by get.
    get_hits,
    /// Keys not found by get.
    get_misses,
    /// Keys found by touch/gat.
    touch_hits,
    /// Keys not found by touch/gat.
    touch_misses,
    /// delete of a present key.
    delete_hits,
    /// delete of an absent key.
    delete_misses,
    /// incr of a present key.
    incr_hits,
    /// incr of an absent key.
    incr_misses,
    /// decr of a present key.
    decr_hits,
    /// decr of an absent key.
    decr_misses,
    /// cas that stored.
    cas_hits,
    /// cas of an absent key.
    cas_misses,
    /// cas with a stale unique.
    cas_badval,
    /// Meta commands.
    cmd_meta,
    /// Authentication attempts (binary SASL auth/step, ASCII-auth `set`).
    auth_cmds,
    /// Failed authentication attempts.
    auth_errors,
    /// Connections closed by `-o idle_timeout` (memcached's `idle_kicks`).
    idle_kicks,
    /// Bytes read from clients.
    bytes_read,
    /// Bytes written to clients.
    bytes_written,
    /// Stores refused because the item exceeds `-I` (memcached's `store_too_large`).
    store_too_large,
    /// Stores refused for want of memory, as with `-M` (memcached's `store_no_memory`;
    /// also `stats items`' per-class `outofmemory`).
    store_no_memory,
    /// Times a connection gave up its turn after `-R` requests with more input waiting
    /// (memcached's `conn_yields`).
    conn_yields,
    /// TLS handshakes completed.
    tls_handshakes,
    /// TLS handshakes that failed.
    tls_handshake_errors,
    /// TLS handshakes that did not finish in time.
    tls_handshake_timeouts,
}

impl ThreadStats {
    /// Adds one to a counter of this thread.
    #[inline]
    pub fn incr(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds `n` to a counter of this thread.
    #[inline]
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// Every worker's counters and the reset baseline.
#[derive(Default)]
pub struct StatsRegistry {
    threads: Mutex<Vec<Arc<ThreadStats>>>,
    baseline: Mutex<Totals>,
}

impl StatsRegistry {
    /// Registers a new worker's counters.
    pub fn register(&self) -> Arc<ThreadStats> {
        let t = Arc::new(ThreadStats::default());
        self.threads.lock().push(t.clone());
        t
    }

    fn raw(&self) -> Totals {
        let mut sum = Totals::default();
        for t in self.threads.lock().iter() {
            sum.add(t);
        }
        sum
    }

    /// Counters since start or the last reset.
    pub fn totals(&self) -> Totals {
        let raw = self.raw();
        raw.minus(&self.baseline.lock())
    }

    /// `stats reset`.
    pub fn reset(&self) {
        let raw = self.raw();
        *self.baseline.lock() = raw;
    }
}
