//! Listeners: one per pool (TCP or unix socket), plus the stats port, bound and accepted
//! with shoal-net's [`Listener`] and [`Acceptor`].
//!
//! Every client connection holds a [`ConnGuard`] from the moment it is accepted: the
//! `client_connections` limit and the connection counters are given back when the guard
//! drops, however the connection's task ends, so a panicking task never leaks a slot
//! (and the panic is logged).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use shoal_net::{Acceptor, Budget, Event, Incoming, Listener};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpStream, UnixStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::config::{Listen, ProxyConfig};
use crate::pool::Pool;
use crate::session::serve;
use crate::stats::{decr, document, incr, unix_now};

/// Listen backlog of the stats port.
const STATS_BACKLOG: u32 = 128;

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A listen address could not be bound.
    #[error("pool '{pool}': cannot listen on {addr}: {source}")]
    Listen {
        /// The pool.
        pool: String,
        /// The address.
        addr: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A pool's server list could not be turned into a ring.
    #[error("pool '{pool}': {source}")]
    Ring {
        /// The pool.
        pool: String,
        /// Why.
        source: shoal_ring::RingError,
    },
}

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
}

/// A started proxy: the pools and the addresses they actually listen on. Dropping it
/// (or calling [`Running::stop`]) stops accepting connections; so does SIGINT or SIGTERM,
/// which every listener's [`Acceptor`] watches ([`Running::stopped`] says when).
pub struct Running {
    /// The pools, in configuration order.
    pub pools: Vec<Arc<Pool>>,
    /// For each pool, the bound address (TCP) or socket path.
    pub addrs: Vec<String>,
    /// The stats port's bound address, if any.
    pub stats_addr: Option<SocketAddr>,
    /// The metrics endpoint's bound address, if any.
    pub metrics_addr: Option<SocketAddr>,
    /// The read-buffer budget every client connection draws from.
    pub budget: Budget,
    shutdown: Arc<watch::Sender<bool>>,
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
}

impl Drop for Running {
    fn drop(&mut self) {
        // The acceptors hold the sender too (a signal seen by one stops them all), so
        // dropping this one alone would not end them.
        self.stop();
    }
}

struct Counters {
    total: AtomicU64,
    current: AtomicU64,
    started: u64,
}

/// One client connection's place in the counters, taken when it is accepted and given
/// back on drop, however its task ends (a panic included).
struct ConnGuard {
    pool: Arc<Pool>,
    counters: Arc<Counters>,
}

impl ConnGuard {
    fn new(pool: &Arc<Pool>, counters: &Arc<Counters>) -> ConnGuard {
        incr(&pool.stats.client_connections);
        incr(&counters.total);
        incr(&counters.current);
        ConnGuard {
            pool: pool.clone(),
            counters: counters.clone(),
        }
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        decr(&self.pool.stats.client_connections);
        decr(&self.counters.current);
    }
}

/// Binds every listener and starts serving; returns once all are bound. Every
/// listening address is printed to stderr as `pool NAME listening on ADDR` (and the stats
/// port as `stats listening on ADDR`), so callers can use port 0. Must be called inside
/// a multi-threaded or current-thread tokio runtime that keeps running afterwards.
pub async fn start(config: ProxyConfig, opts: Options) -> Result<Running, StartError> {
    let counters = Arc::new(Counters {
        total: AtomicU64::new(0),
        current: AtomicU64::new(0),
        started: unix_now(),
    });
    let budget = Budget::new(opts.read_buf_mem_limit);
    let shutdown = Arc::new(watch::channel(false).0);
    let mut pools = Vec::new();
    let mut addrs = Vec::new();
    for pc in config.pools {
        let name = pc.name.clone();
        let listen = pc.listen.clone();
        let backlog = pc.backlog;
        let limit = pc.client_connections;
        let pool = Pool::start(pc, opts.verbose).map_err(|source| StartError::Ring {
            pool: name.clone(),
            source,
        })?;
        let (label, bound) = match &listen {
            Listen::Tcp(addr) => (addr.clone(), bind_tcp(addr, backlog)),
            Listen::Unix { path, mode } => (path.display().to_string(), bind_unix(path, *mode)),
        };
        let listen_err = |source| StartError::Listen {
            pool: name.clone(),
            addr: label.clone(),
            source,
        };
        let listener = bound.map_err(listen_err)?;
        let shown = listener
            .local_addr()
            .map_or_else(|| label.clone(), |a| a.to_string());
        let acceptor = Acceptor::new(listener, shutdown.subscribe()).map_err(listen_err)?;
        tracing::info!("pool {name} listening on {shown}");
        addrs.push(shown);
        tokio::spawn(accept_clients(
            acceptor,
            shutdown.clone(),
            pool.clone(),
            counters.clone(),
            limit,
            budget.clone(),
        ));
        pools.push(pool);
    }
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
        tokio::spawn(serve_stats(
            acceptor,
            shutdown.clone(),
            pools.clone(),
            counters.clone(),
        ));
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
        for pool in &pools {
            for b in &pool.backends {
                b.stats().set_timed(true);
            }
        }
        metrics_addr = Some(bound);
        let (pools, counters, budget) = (pools.clone(), counters.clone(), budget.clone());
        let render = move || {
            let g = crate::metrics::Global {
                started: counters.started,
                total_connections: counters.total.load(Relaxed),
                current_connections: counters.current.load(Relaxed),
                read_buffer_bytes: budget.used() as u64,
            };
            crate::metrics::render(&g, &pools)
        };
        tokio::spawn(server.serve(Arc::new(render)));
    }
    Ok(Running {
        pools,
        addrs,
        stats_addr,
        metrics_addr,
        budget,
        shutdown,
    })
}

fn bind_tcp(addr: &str, backlog: u32) -> std::io::Result<Listener> {
    use std::net::ToSocketAddrs;
    let sa = addr
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other("address resolves to nothing"))?;
    Listener::bind_tcp(sa, backlog.max(1))
}

fn bind_unix(path: &std::path::Path, mode: Option<u32>) -> std::io::Result<Listener> {
    match mode {
        Some(m) => Listener::bind_unix(path, m),
        None => {
            // No mode configured: keep the permissions the umask gives, as twemproxy does
            // (shoal-net's bind_unix always sets one).
            let _ = std::fs::remove_file(path);
            let l = std::os::unix::net::UnixListener::bind(path)?;
            l.set_nonblocking(true)?;
            Ok(Listener::Unix(l))
        }
    }
}

fn over_limit(pool: &Pool, limit: usize) -> bool {
    limit > 0 && pool.stats.client_connections.load(Relaxed) >= limit as u64
}

/// Accepts a pool's clients until the proxy stops (a signal, or [`Running`] dropped),
/// serving each on its own task and logging the tasks that panic.
async fn accept_clients(
    mut acceptor: Acceptor,
    shutdown: Arc<watch::Sender<bool>>,
    pool: Arc<Pool>,
    counters: Arc<Counters>,
    limit: usize,
    budget: Budget,
) {
    let mut tasks = JoinSet::new();
    loop {
        let event = tokio::select! {
            event = acceptor.next() => event,
            Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                log_panic(done);
                continue;
            }
        };
        let conn = match event {
            Event::Conn(conn) => conn,
            Event::Signal => {
                // Every listener stops, and the process with them (see `Running::stopped`).
                let _ = shutdown.send(true);
                break;
            }
            Event::Shutdown => break,
        };
        if over_limit(&pool, limit) {
            // twemproxy closes a connection over the pool's limit at once.
            continue;
        }
        // Counted before the task runs, so a burst of accepts cannot pass the limit.
        let guard = ConnGuard::new(&pool, &counters);
        tasks.spawn(serve_client(conn, pool.clone(), budget.clone(), guard));
    }
    // Connections already open finish on their own; only accepting stops.
    tasks.detach_all();
}

async fn serve_client(conn: Incoming, pool: Arc<Pool>, budget: Budget, guard: ConnGuard) {
    // Dropped when this task ends, however it ends.
    let _guard = guard;
    match conn {
        Incoming::Tcp(s, _) => {
            let _ = s.set_nodelay(true);
            if let Ok(s) = TcpStream::from_std(s) {
                serve(s, pool, budget).await;
            }
        }
        Incoming::Unix(s) => {
            if let Ok(s) = UnixStream::from_std(s) {
                serve(s, pool, budget).await;
            }
        }
    }
}

/// Logs a connection task that panicked; its guard has already given its slot back.
fn log_panic(done: Result<(), tokio::task::JoinError>) {
    if let Err(e) = done {
        if e.is_panic() {
            let panic = e.into_panic();
            tracing::error!(
                "shoal-proxy: a connection task panicked: {}",
                shoal_net::panic_message(&*panic)
            );
        }
    }
}

async fn serve_stats(
    mut acceptor: Acceptor,
    shutdown: Arc<watch::Sender<bool>>,
    pools: Vec<Arc<Pool>>,
    c: Arc<Counters>,
) {
    loop {
        let s = match acceptor.next().await {
            Event::Conn(Incoming::Tcp(s, _)) => s,
            Event::Conn(Incoming::Unix(_)) => continue,
            Event::Signal => {
                let _ = shutdown.send(true);
                break;
            }
            Event::Shutdown => break,
        };
        let doc = document(
            c.started,
            c.total.load(Relaxed),
            c.current.load(Relaxed),
            pools
                .iter()
                .map(|p| (p.config.name.clone(), p.stats_json()))
                .collect(),
        );
        let body = doc.to_string();
        tokio::spawn(async move {
            let Ok(mut s) = TcpStream::from_std(s) else {
                return;
            };
            let _ = s.write_all(body.as_bytes()).await;
            let _ = s.shutdown().await;
        });
    }
}
