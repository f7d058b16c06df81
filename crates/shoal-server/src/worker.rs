//! The state every request is served with: [`Shared`] (process-wide) and [`Worker`] (one
//! per worker thread). Commands, connections, the maintenance thread and the metrics page
//! all build on these; none of them depends on how the server accepts or starts.

use crate::auth::PasswordDb;
use crate::config::Settings;
use crate::conns::ConnRegistry;
use crate::detail::PrefixStats;
use crate::lru_crawler::LruCrawler;
use crate::stats::{StatsRegistry, ThreadStats};
use crate::watch::Watchers;
use shoal_net::Budget;
use shoal_store::{FlashReads, Store, Writer};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::watch;

/// State shared by every thread.
pub struct Shared {
    /// The validated settings.
    pub settings: Settings,
    /// The item store.
    pub store: Store,
    /// Request counters.
    pub stats: StatsRegistry,
    /// Open connections, for `stats conns`.
    pub conns: ConnRegistry,
    /// Open connections now.
    pub curr_connections: AtomicUsize,
    /// Connections ever accepted.
    pub total_connections: AtomicU64,
    /// Connections refused for the limit.
    pub rejected_connections: AtomicU64,
    /// Current verbosity (the `verbosity` command changes it).
    pub verbosity: AtomicUsize,
    /// The address clients connect to, as `stats conns` shows it.
    pub listen_label: String,
    /// Every listening socket's address (the first is `listen_label`'s), listed by
    /// `stats conns` under the ids `1..=len` that connections' ids start after.
    pub listen_labels: Vec<String>,
    /// The UDP socket's address (`-U`), listed by `stats conns` after the listeners.
    pub udp_label: Option<String>,
    /// SASL users, when `-S` is on.
    pub sasl: Option<PasswordDb>,
    /// ASCII-auth users, when `-Y` is on.
    pub ascii_auth: Option<PasswordDb>,
    /// TLS acceptor, when `-Z` is on.
    pub tls: Option<parking_lot::RwLock<tokio_rustls::TlsAcceptor>>,
    /// memcached's slab/LRU tunables as `slabs automove`, `lru tune|mode|temp_ttl` last
    /// set them (`stats settings` shows these; they steer nothing in segment storage).
    pub tuning: parking_lot::Mutex<crate::config::Tunables>,
    /// What connections may hold in buffers beyond their fixed allowance, all together.
    pub buffers: Budget,
    /// The background expiry crawl's controls (`lru_crawler`).
    pub crawler: LruCrawler,
    /// Connections streaming `watch` events (shared with the store's eviction observer).
    pub watchers: Arc<Watchers>,
    /// `stats detail` counters.
    pub prefixes: PrefixStats,
    /// Request latency histograms of every worker (registered only with `--metrics-listen`).
    pub latency: crate::latency::LatencyRegistry,
    /// Connections are served on the io_uring data path (asked for with `--io-uring`, and
    /// supported by the kernel).
    pub io_uring: bool,
    /// The threads that read flash-resident values, when there is a flash tier.
    pub flash_readers: Option<crate::flash_reader::FlashReaders>,
    pub(crate) shutdown_tx: watch::Sender<bool>,
    pub(crate) stopping: AtomicBool,
    /// Save restart metadata on the way out (`shutdown graceful`, like SIGUSR1).
    pub(crate) save_on_stop: AtomicBool,
}

impl Shared {
    /// The id `stats conns` and `watch` show for the UDP socket: the one after the
    /// listeners'.
    pub fn udp_conn_id(&self) -> u64 {
        self.listen_labels.len() as u64 + 1
    }

    /// What runs the worker threads: the io_uring data path needs tokio's runtime;
    /// otherwise what `-o event_loop` chose.
    pub fn executor(&self) -> shoal_net::Executor {
        if self.io_uring {
            shoal_net::Executor::Tokio
        } else {
            self.settings.event_loop
        }
    }

    /// A receiver that changes when shutdown begins.
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown_tx.subscribe()
    }

    /// Begins an orderly shutdown: stop accepting, let connections finish their replies.
    pub fn begin_shutdown(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        let _ = self.shutdown_tx.send(true);
    }

    /// Asks for the restart metadata to be saved when the server stops.
    pub fn request_restart_save(&self) {
        self.save_on_stop.store(true, Ordering::Relaxed);
    }

    /// Whether shutdown has begun.
    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }
}

/// One worker thread's context, shared by the connections it serves.
pub struct Worker {
    /// Process-wide state.
    pub shared: Arc<Shared>,
    /// This thread's store writer.
    pub writer: RefCell<Writer>,
    /// This thread's counters.
    pub stats: Arc<ThreadStats>,
    /// This thread's latency histograms, when metrics are served (`--metrics-listen`).
    pub latency: Option<Arc<crate::latency::WorkerLatency>>,
    /// The connection whose request this thread is executing (its id, which `watch`
    /// lines show as `cfd`). Set before each request; requests run without yielding.
    pub current_conn: Cell<u64>,
    /// Sockets of this thread's open connections, so shutdown can end their reads
    /// without every read having to watch a shared shutdown signal.
    pub sockets: RefCell<HashMap<u64, RawFd>>,
    /// The flash reads of the connection whose request this thread is executing (each
    /// connection keeps its own and lends them here for its requests, as `current_conn`
    /// says whose they are): a retrieval meeting a value on flash records its read here
    /// and stops, and the connection runs it off this thread (see `conn`).
    pub flash_reads: RefCell<FlashReads>,
}

impl Worker {
    /// A worker's context over `shared`, with its own writer and counters; `latency`:
    /// time its requests (with metrics on).
    pub fn new(shared: &Arc<Shared>, latency: bool) -> Worker {
        Worker {
            writer: RefCell::new(shared.store.writer()),
            stats: shared.stats.register(),
            latency: latency.then(|| shared.latency.register()),
            shared: shared.clone(),
            sockets: RefCell::new(HashMap::new()),
            current_conn: Cell::new(0),
            flash_reads: RefCell::new(FlashReads::new()),
        }
    }

    /// Ends the reads of every connection of this thread (`shutdown(SHUT_RD)`): a
    /// connection blocked in a read sees end-of-file, while replies already being written
    /// still go out.
    pub(crate) fn stop_reading(&self) {
        for &fd in self.sockets.borrow().values() {
            // SAFETY: the fd belongs to a connection that is still open: entries are
            // removed before their socket is dropped.
            unsafe { libc::shutdown(fd, libc::SHUT_RD) };
        }
    }
}
