//! Starting and stopping the proxy: [`start`] binds every listening pool (TCP or unix
//! socket), the stats port and the metrics page on the accepting thread, starts the
//! `--threads` worker threads (shoal-net's [`WorkerPool`]) that serve the client
//! connections, each on one worker for its whole life, and watches SIGHUP.
//!
//! The jobs around it have their own modules: `shared.rs` holds what the listeners, the
//! workers, the stats port, the metrics page and reloads share (the pools serving now and
//! the counters, with each connection's place in them held by a guard);
//! `accept.rs` binds listeners, accepts clients and hands them to the workers;
//! `stats_port.rs` serves the stats port; [`crate::reload`] switches configurations.
//!
//! Each worker keeps its own connections to the servers (one [`crate::pool::Pool`] per
//! pool per worker), so a request never crosses threads; what the workers share is per
//! pool ([`crate::pool::PoolShared`]): the ring, failure counting and ejection, and every
//! counter, so the stats and the metrics page add up over workers. With `shared_backends`
//! the workers instead share one set of server connections, run by the accepting thread.
//!
//! The configuration can be reloaded while serving ([`Running::reload`], SIGHUP, or
//! `reload` on the stats port): see [`crate::reload`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use shoal_net::{Acceptor, Budget, Executor, Listener, WorkerPool};
use tokio::runtime::Handle;
use tokio::sync::watch;

use crate::accept::Worker;
use crate::config::ProxyConfig;
use crate::error::StartError;
use crate::reload::{ReloadError, ReloadReport};
use crate::shared::{Counters, Shared};
use crate::stats_port::{serve_stats, STATS_BACKLOG};

/// How long workers let open connections finish their replies when the proxy stops.
const DRAIN: Duration = Duration::from_millis(500);

/// Runtime options outside the configuration file.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where to serve the stats JSON (`None`: no stats port).
    pub stats_addr: Option<SocketAddr>,
    /// Log connection failures and ejections to stderr.
    pub verbose: bool,
    /// Bytes all client read buffers together may hold beyond their first
    /// [`shoal_net::READ_CHUNK`] (`usize::MAX`: no limit). A value larger than what is
    /// left is refused with `SERVER_ERROR out of memory storing object`.
    pub read_buf_mem_limit: usize,
    /// Where to serve Prometheus metrics (`None`: nowhere).
    pub metrics_addr: Option<SocketAddr>,
    /// The configuration file the proxy was started from: what a reload re-reads, and
    /// when set, SIGHUP reloads it (`None`: reloads fail, SIGHUP keeps its default).
    pub config_path: Option<PathBuf>,
    /// Worker threads serving client connections (at least one).
    pub threads: usize,
    /// All workers share one set of server connections, run by the accepting thread,
    /// instead of each worker keeping its own.
    pub shared_backends: bool,
}

/// A started proxy and the addresses its pools actually listen on. Dropping it (or
/// calling [`Running::stop`]) stops accepting connections; so does SIGINT or SIGTERM,
/// which every listener's [`Acceptor`] watches ([`Running::stopped`] says when).
/// [`Running::shutdown`] then ends the workers and their connections.
pub struct Running {
    /// For each listening pool, in configuration order, the bound address (TCP) or
    /// socket path.
    pub addrs: Vec<String>,
    /// The stats port's bound address, if any.
    pub stats_addr: Option<SocketAddr>,
    /// The metrics endpoint's bound address, if any.
    pub metrics_addr: Option<SocketAddr>,
    /// The read-buffer budget every client connection draws from.
    pub budget: Budget,
    shutdown: Arc<watch::Sender<bool>>,
    shared: Arc<Shared>,
}

impl Running {
    /// Stops accepting connections on every listener (open connections keep being
    /// served).
    pub fn stop(&self) {
        let _ = self.shutdown.send(true);
    }

    /// Completes once accepting has stopped: [`Running::stop`], or a SIGINT or SIGTERM
    /// seen by any listener.
    pub async fn stopped(&self) {
        let mut rx = self.shutdown.subscribe();
        let _ = rx.wait_for(|stopped| *stopped).await;
    }

    /// Re-reads the configuration file and switches to it: see [`crate::reload`]. On
    /// error nothing changed and the old configuration keeps serving.
    pub fn reload(&self) -> Result<ReloadReport, ReloadError> {
        self.shared.reload()
    }

    /// Stops accepting, then stops the workers: each gives its connections up to half a
    /// second to finish the replies they are writing, then closes them. Blocks until the
    /// worker threads have ended; call it outside the runtime.
    pub fn shutdown(self) {
        self.stop();
        let _ = self.shared.workers_stop.send(true);
        if let Some(workers) = self.shared.workers.lock().take() {
            workers.join();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // The acceptors hold the sender too (a signal seen by one stops them all), so
        // dropping this one alone would not end them. The workers end on their own.
        self.stop();
        let _ = self.shared.workers_stop.send(true);
    }
}

/// Binds every listener, starts the worker threads and starts serving; returns once all
/// are bound. Every listening address is printed to stderr as
/// `pool NAME listening on ADDR` (and the stats port as `stats listening on ADDR`), so
/// callers can use port 0. Must be called inside a current-thread tokio runtime that keeps
/// running afterwards (the accepting thread's).
pub async fn start(config: ProxyConfig, opts: Options) -> Result<Running, StartError> {
    let counters = Arc::new(Counters {
        total: AtomicU64::new(0),
        current: AtomicU64::new(0),
        started: crate::stats::process_started(),
        reloads: AtomicU64::new(0),
        reload_failures: AtomicU64::new(0),
    });
    if opts.metrics_addr.is_some() {
        // Once, here, rather than on the first timed request.
        shoal_net::metrics::clock::calibrate();
    }
    let budget = Budget::new(opts.read_buf_mem_limit);
    let shutdown = Arc::new(watch::channel(false).0);
    let threads = opts.threads.max(1);
    let (workers_stop, workers_stop_rx) = watch::channel(false);
    let make = {
        let budget = budget.clone();
        move |index| Worker {
            index,
            budget: budget.clone(),
        }
    };
    // On tokio: a worker's connections to the servers behind the proxy are tokio sockets.
    let workers = WorkerPool::start(
        Executor::Tokio,
        threads,
        "shoal-proxy",
        &workers_stop_rx,
        DRAIN,
        make,
    )
    .map_err(StartError::Workers)?;
    let homes = if opts.shared_backends {
        vec![Handle::current()]
    } else {
        workers.handles().to_vec()
    };
    let shared = Arc::new(Shared {
        counters: counters.clone(),
        budget: budget.clone(),
        shutdown: shutdown.clone(),
        verbose: opts.verbose,
        timed: opts.metrics_addr.is_some(),
        config_path: opts.config_path.clone(),
        homes,
        threads,
        workers: parking_lot::Mutex::new(Some(workers)),
        workers_stop,
        state: parking_lot::Mutex::new(Vec::new()),
    });
    // Watched before anything is announced as listening, so a SIGHUP sent as soon as the
    // proxy says it is up reloads rather than kills it.
    let hup = if shared.config_path.is_some() {
        Some(
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
                .map_err(StartError::Signal)?,
        )
    } else {
        None
    };
    let addrs = {
        let mut state = shared.state.lock();
        shared.apply(config, &mut state)?;
        state
            .iter()
            .filter_map(|e| e.live.as_ref().map(|l| l.addr.clone()))
            .collect()
    };
    let mut stats_addr = None;
    if let Some(addr) = opts.stats_addr {
        let listen_err = |source| StartError::Listen {
            pool: "stats".into(),
            addr: addr.to_string(),
            source,
        };
        let listener = Listener::bind_tcp(addr, STATS_BACKLOG).map_err(listen_err)?;
        let bound = listener.local_addr();
        let acceptor = Acceptor::new(listener, shutdown.subscribe()).map_err(listen_err)?;
        if let Some(b) = bound {
            tracing::info!("stats listening on {b}");
        }
        stats_addr = bound;
        tokio::spawn(serve_stats(acceptor, shared.clone()));
    }
    let mut metrics_addr = None;
    if let Some(addr) = opts.metrics_addr {
        let listen_err = |source| StartError::Listen {
            pool: "metrics".into(),
            addr: addr.to_string(),
            source,
        };
        let server = shoal_net::metrics::MetricsServer::bind(addr).map_err(listen_err)?;
        let bound = server.local_addr().map_err(listen_err)?;
        tracing::info!("metrics listening on {bound}");
        metrics_addr = Some(bound);
        let shared = shared.clone();
        let render = move || {
            let c = &shared.counters;
            let g = crate::metrics::Global {
                started: c.started,
                total_connections: c.total.load(Relaxed),
                current_connections: c.current.load(Relaxed),
                read_buffer_bytes: shared.budget.used() as u64,
                reloads: c.reloads.load(Relaxed),
                reload_failures: c.reload_failures.load(Relaxed),
            };
            crate::metrics::render(&g, &shared.views())
        };
        tokio::spawn(server.serve(Arc::new(render)));
    }
    if let Some(hup) = hup {
        tokio::spawn(reload_on_sighup(hup, shared.clone()));
    }
    Ok(Running {
        addrs,
        stats_addr,
        metrics_addr,
        budget,
        shutdown,
        shared,
    })
}

/// Reloads on every SIGHUP until the proxy stops. Failures are logged by the reload.
async fn reload_on_sighup(mut hup: tokio::signal::unix::Signal, shared: Arc<Shared>) {
    let mut stopped = shared.shutdown.subscribe();
    loop {
        tokio::select! {
            got = hup.recv() => {
                if got.is_none() {
                    break;
                }
                tracing::info!("shoal-proxy: SIGHUP: reloading the configuration");
                let _ = shared.reload();
            }
            _ = stopped.wait_for(|s| *s) => break,
        }
    }
}
