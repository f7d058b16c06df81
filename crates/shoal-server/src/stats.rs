//! Request counters: one set per worker thread, summed on demand.
//!
//! Each worker increments only its own counters, so the hot path touches no shared cache
//! line. `stats reset` does not write other threads' counters either: it records a
//! baseline that later snapshots subtract.
//!
//! The counters memcached also keeps per slab class (`stats slabs`' `get_hits`,
//! `cmd_set`, ..., and `stats items`' `hits_to_cold`) are kept only per class, in the
//! class of the item concerned (see shoal-store's `SlabClasses`); their totals for
//! `stats` are the sums over the classes, so a hit still costs one counter update.

use parking_lot::Mutex;
use shoal_store::MAX_CLASSES;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident,)* ; $($(#[$cdoc:meta])* $cname:ident,)*) => {
        /// One worker's counters.
        #[derive(Debug, Default)]
        pub struct ThreadStats {
            $($(#[$doc])* pub $name: AtomicU64,)*
            /// The counters kept per slab class, indexed by class id.
            pub slab: PerClass,
        }

        /// One worker's counters of one slab class.
        #[derive(Debug, Default)]
        pub struct ClassCounters {
            $($(#[$cdoc])* pub $cname: AtomicU64,)*
        }

        /// A sum of one slab class's counters, as reported by `stats slabs`.
        #[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
        pub struct ClassTotals {
            $($(#[$cdoc])* pub $cname: u64,)*
        }

        /// A sum of counters, as reported by `stats`.
        #[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
        pub struct Totals {
            $($(#[$doc])* pub $name: u64,)*
            $($(#[$cdoc])* pub $cname: u64,)*
        }

        impl ClassTotals {
            fn add(&mut self, c: &ClassCounters) {
                $(self.$cname += c.$cname.load(Ordering::Relaxed);)*
            }

            fn minus(self, base: &ClassTotals) -> ClassTotals {
                ClassTotals { $($cname: self.$cname.saturating_sub(base.$cname),)* }
            }
        }

        impl Totals {
            fn add(&mut self, t: &ThreadStats) {
                $(self.$name += t.$name.load(Ordering::Relaxed);)*
                for c in t.slab.0.iter() {
                    $(self.$cname += c.$cname.load(Ordering::Relaxed);)*
                }
            }

            fn minus(self, base: &Totals) -> Totals {
                Totals {
                    $($name: self.$name.saturating_sub(base.$name),)*
                    $($cname: self.$cname.saturating_sub(base.$cname),)*
                }
            }
        }
    };
}

/// A worker's per-class counters, one set per memcached slab class id.
#[derive(Debug)]
pub struct PerClass(Box<[ClassCounters]>);

impl Default for PerClass {
    fn default() -> Self {
        PerClass((0..MAX_CLASSES).map(|_| ClassCounters::default()).collect())
    }
}

impl ThreadStats {
    /// This worker's counters of slab class `class` (an id past the table reads as the
    /// last, unused, one).
    #[inline]
    pub fn class(&self, class: usize) -> &ClassCounters {
        &self.slab.0[class.min(MAX_CLASSES - 1)]
    }
}

counters! {
    /// Keys requested by get/gets/gat/gats/mg.
    cmd_get,
    /// touch/gat/gats commands.
    cmd_touch,
    /// flush_all commands.
    cmd_flush,
    /// Keys not found by get.
    get_misses,
    /// Keys not found by touch/gat.
    touch_misses,
    /// delete of an absent key.
    delete_misses,
    /// incr of an absent key.
    incr_misses,
    /// decr of an absent key.
    decr_misses,
    /// cas of an absent key.
    cas_misses,
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
    ;
    /// Keys found by get (also the class's `hits_to_cold`).
    get_hits,
    /// Storage commands (in the class of the item they stored or tried to).
    cmd_set,
    /// Keys found by touch/gat.
    touch_hits,
    /// delete of a present key.
    delete_hits,
    /// incr of a present key.
    incr_hits,
    /// decr of a present key.
    decr_hits,
    /// cas that stored.
    cas_hits,
    /// cas with a stale unique.
    cas_badval,
}

impl ThreadStats {
    /// Adds one to a counter of this thread.
    #[inline]
    pub fn incr(counter: &AtomicU64) {
        Self::add(counter, 1);
    }

    /// Adds `n` to a counter of this thread.
    ///
    /// A load and a store, not a `fetch_add`: each counter has one writer, the thread
    /// that registered it (readers only load, and `stats reset` keeps a baseline instead
    /// of writing), so the read-modify-write needs no atomicity; a locked add took 2.2 ns
    /// against 0.3 ns for the load and store on this project's 2-core test machine, paid
    /// a few times per request.
    #[inline]
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.store(
            counter.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }
}

/// Every worker's counters and the reset baseline.
#[derive(Default)]
pub struct StatsRegistry {
    threads: Mutex<Vec<Arc<ThreadStats>>>,
    baseline: Mutex<Totals>,
    /// The per-class counters at the last reset (empty: none).
    class_baseline: Mutex<Vec<ClassTotals>>,
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

    fn raw_classes(&self) -> Vec<ClassTotals> {
        let mut sums = vec![ClassTotals::default(); MAX_CLASSES];
        for t in self.threads.lock().iter() {
            for (sum, c) in sums.iter_mut().zip(t.slab.0.iter()) {
                sum.add(c);
            }
        }
        sums
    }

    /// The per-class counters since start or the last reset, indexed by class id.
    pub fn class_totals(&self) -> Vec<ClassTotals> {
        let base = self.class_baseline.lock();
        self.raw_classes()
            .into_iter()
            .enumerate()
            .map(|(i, c)| c.minus(base.get(i).unwrap_or(&ClassTotals::default())))
            .collect()
    }

    /// `stats reset`.
    pub fn reset(&self) {
        let raw = self.raw();
        *self.baseline.lock() = raw;
        *self.class_baseline.lock() = self.raw_classes();
    }
}
