//! Listeners: one per listening pool (TCP or unix socket), plus the stats port, bound and
//! accepted with shoal-net's [`Listener`] and [`Acceptor`] on the accepting thread; the
//! client connections are served by `--threads` worker threads (shoal-net's
//! [`WorkerPool`]), each connection on one worker for its whole life.
//!
//! Each worker keeps its own connections to the servers (one [`crate::pool::Pool`] per pool per
//! worker), so a request never crosses threads; what the workers share is per pool
//! ([`PoolShared`]): the ring, failure counting and ejection, and every counter, so the
//! stats and the metrics page add up over workers. With `shared_backends` the workers
//! instead share one set of server connections, run by the accepting thread.
//!
//! Every client connection holds a [`ConnGuard`] from the moment it is accepted: the
//! `client_connections` limit and the connection counters are given back when the guard
//! drops, however the connection's task ends, so a panicking task never leaks a slot
//! (and the panic is logged).
//!
//! The configuration can be reloaded while serving ([`Running::reload`], SIGHUP, or
//! `reload` on the stats port): see [`crate::reload`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use shoal_net::{Acceptor, Budget, Event, Incoming, Listener, WorkerPool, WorkerService};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};
use tokio::runtime::Handle;
use tokio::sync::{oneshot, watch};

use crate::config::{Listen, PoolConfig, ProxyConfig};
use crate::pool::{PoolShared, PoolSlot};
use crate::reload::{ReloadError, ReloadReport};
use crate::route::Target;
use crate::session::serve;
use crate::stats::{decr, document, incr, PoolStats, PoolView};

/// Listen backlog of the stats port.
const STATS_BACKLOG: u32 = 128;
/// How long the stats port waits for a command before dumping the stats JSON, as it
/// always has for clients that send nothing.
const STATS_COMMAND_WAIT: Duration = Duration::from_millis(100);
/// Longest command line the stats port reads.
const STATS_COMMAND_MAX: usize = 256;
/// Stats connections served at once (as many as the metrics listener serves); more are
/// closed as soon as they are accepted, so clients that never read cannot pile up.
pub const STATS_MAX_CONNECTIONS: usize = 32;
/// How long writing one stats answer may take before the connection is dropped: a client
/// that never reads holds its slot this long at most.
pub const STATS_WRITE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long workers let open connections finish their replies when the proxy stops.
const DRAIN: Duration = Duration::from_millis(500);

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
    /// The SIGHUP handler could not be installed.
    #[error("cannot watch SIGHUP: {0}")]
    Signal(std::io::Error),
    /// The worker threads could not be started.
    #[error("cannot start the worker threads: {0}")]
    Workers(std::io::Error),
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

struct Counters {
    total: AtomicU64,
    current: AtomicU64,
    started: u64,
    reloads: AtomicU64,
    reload_failures: AtomicU64,
}

/// What the listeners, the workers, the stats port, the metrics page and reloads share.
pub(crate) struct Shared {
    counters: Arc<Counters>,
    budget: Budget,
    shutdown: Arc<watch::Sender<bool>>,
    pub(crate) verbose: bool,
    /// Backends time their replies (only when metrics are served).
    pub(crate) timed: bool,
    config_path: Option<PathBuf>,
    /// The runtimes server connections run on: each worker's, or with shared backends
    /// the accepting thread's alone.
    pub(crate) homes: Vec<Handle>,
    /// How many workers (each listener has one slot per worker).
    pub(crate) threads: usize,
    /// The worker threads, until [`Running::shutdown`] takes them.
    workers: parking_lot::Mutex<Option<WorkerPool<ClientConn>>>,
    workers_stop: watch::Sender<bool>,
    /// The pools serving now, in configuration order. Held for a whole reload, which
    /// therefore never overlaps another.
    state: parking_lot::Mutex<Vec<Entry>>,
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
    acceptor: Acceptor,
    shown: String,
}

/// One client connection's place in the counters, taken when it is accepted and given
/// back on drop, however its task ends (a panic included).
struct ConnGuard {
    // The pool's counters outlive reloads (a replacing pool takes them over), so the
    // count is given back where it was taken whatever pool the connection ends on.
    stats: Arc<PoolStats>,
    counters: Arc<Counters>,
}

impl ConnGuard {
    fn new(stats: &Arc<PoolStats>, counters: &Arc<Counters>) -> ConnGuard {
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
    conn: Incoming,
    slots: Arc<[Arc<PoolSlot>]>,
    guard: ConnGuard,
}

/// One worker thread's service: serves the connections handed to it, on its own event
/// loop, with its own server connections.
struct Worker {
    index: usize,
    budget: Budget,
}

impl WorkerService<ClientConn> for Worker {
    async fn serve(self: Rc<Self>, c: ClientConn) {
        let Some(slot) = c.slots.get(self.index % c.slots.len().max(1)).cloned() else {
            return;
        };
        serve_client(c.conn, slot, self.budget.clone(), c.guard).await;
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
    let workers = WorkerPool::start(threads, "shoal-proxy", &workers_stop_rx, DRAIN, make)
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

    /// Binds `listen` for pool `name`.
    pub(crate) fn bind(
        &self,
        name: &str,
        listen: &Listen,
        backlog: u32,
    ) -> Result<Bound, StartError> {
        let (label, bound) = match listen {
            Listen::Tcp(addr) => (addr.clone(), bind_tcp(addr, backlog)),
            Listen::Unix { path, mode } => (path.display().to_string(), bind_unix(path, *mode)),
        };
        let listen_err = |source| StartError::Listen {
            pool: name.to_string(),
            addr: label.clone(),
            source,
        };
        let listener = bound.map_err(listen_err)?;
        let shown = listener
            .local_addr()
            .map_or_else(|| label.clone(), |a| a.to_string());
        let acceptor = Acceptor::new(listener, self.shutdown.subscribe()).map_err(listen_err)?;
        Ok(Bound { acceptor, shown })
    }

    /// Starts accepting on `bound` for the pool whose per-worker targets `slots` hold.
    pub(crate) fn listen(
        self: &Arc<Self>,
        name: &str,
        bound: Bound,
        slots: Arc<[Arc<PoolSlot>]>,
    ) -> Live {
        let (close, closed) = oneshot::channel();
        tracing::info!("pool {name} listening on {}", bound.shown);
        tokio::spawn(accept_clients(
            bound.acceptor,
            self.clone(),
            slots.clone(),
            closed,
        ));
        Live {
            slots,
            addr: bound.shown,
            _close: close,
        }
    }
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

fn over_limit(target: &Target, limit: usize) -> bool {
    limit > 0 && target.stats().client_connections.load(Relaxed) >= limit as u64
}

/// Accepts a pool's clients until the proxy stops (a signal, or [`Running`] dropped) or
/// a reload closes this listener (`closed`), handing each to the next worker in turn.
async fn accept_clients(
    mut acceptor: Acceptor,
    shared: Arc<Shared>,
    slots: Arc<[Arc<PoolSlot>]>,
    mut closed: oneshot::Receiver<()>,
) {
    loop {
        let event = tokio::select! {
            event = acceptor.next() => event,
            _ = &mut closed => break,
        };
        let conn = match event {
            Event::Conn(conn) => conn,
            Event::Signal => {
                // Every listener stops, and the process with them (see `Running::stopped`).
                let _ = shared.shutdown.send(true);
                break;
            }
            Event::Shutdown => break,
        };
        // The limit is the current configuration's: a reload may change it.
        let Some(target) = slots.first().map(|s| s.load()) else {
            continue;
        };
        if over_limit(&target, target.config().client_connections) {
            // twemproxy closes a connection over the pool's limit at once.
            continue;
        }
        // Counted before a worker takes it, so a burst of accepts cannot pass the limit.
        let guard = ConnGuard::new(target.stats(), &shared.counters);
        let c = ClientConn {
            conn,
            slots: slots.clone(),
            guard,
        };
        if let Some(workers) = shared.workers.lock().as_mut() {
            // A stopped worker gives the connection back; dropping it closes the socket
            // and gives its counts back.
            let _ = workers.dispatch(c);
        }
    }
}

async fn serve_client(conn: Incoming, slot: Arc<PoolSlot>, budget: Budget, guard: ConnGuard) {
    // Dropped when this task ends, however it ends.
    let _guard = guard;
    // The listener's TLS as configured now (a reload changes it for later connections).
    // This runs on the worker that serves the connection, so handshakes are spread over
    // the workers like the connections, and never hold up the accepting thread.
    let tls = slot
        .load()
        .config()
        .tls
        .as_ref()
        .map(|t| t.acceptor().clone());
    match conn {
        Incoming::Tcp(s, addr) => {
            let _ = s.set_nodelay(true);
            if let Ok(s) = TcpStream::from_std(s) {
                match tls {
                    None => serve(s, slot, budget).await,
                    Some(acceptor) => {
                        if let Some(s) = handshake(&acceptor, s, &addr.to_string()).await {
                            serve(s, slot, budget).await;
                        }
                    }
                }
            }
        }
        Incoming::Unix(s) => {
            if let Ok(s) = UnixStream::from_std(s) {
                match tls {
                    None => serve(s, slot, budget).await,
                    Some(acceptor) => {
                        if let Some(s) = handshake(&acceptor, s, "a unix socket client").await {
                            serve(s, slot, budget).await;
                        }
                    }
                }
            }
        }
    }
}

/// How long a client may take over its TLS handshake.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A client's TLS handshake; `None` (logged) when it fails or stalls, and the connection
/// is dropped: a plain-text client, an unverifiable or missing required certificate.
async fn handshake<S>(
    acceptor: &tokio_rustls::TlsAcceptor,
    s: S,
    who: &str,
) -> Option<tokio_rustls::server::TlsStream<S>>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(s)).await {
        Ok(Ok(s)) => Some(s),
        Ok(Err(e)) => {
            tracing::info!("TLS handshake from {who} failed: {e}");
            None
        }
        Err(_) => {
            tracing::info!("TLS handshake from {who} timed out");
            None
        }
    }
}

/// Serves the stats port: a client that sends nothing within [`STATS_COMMAND_WAIT`] (or
/// closes its side) gets the stats JSON, as from twemproxy; one that sends `reload`
/// gets `OK` or `ERROR <reason>` (see [`crate::reload`]). At most
/// [`STATS_MAX_CONNECTIONS`] are served at once (more are closed at once), each for at
/// most [`STATS_COMMAND_WAIT`] plus [`STATS_WRITE_TIMEOUT`]: a client that never sends
/// is answered after the wait, and one that never reads is dropped after the write
/// timeout, so neither holds up the others for longer.
async fn serve_stats(mut acceptor: Acceptor, shared: Arc<Shared>) {
    let open = Arc::new(AtomicUsize::new(0));
    loop {
        let s = match acceptor.next().await {
            Event::Conn(Incoming::Tcp(s, _)) => s,
            Event::Conn(Incoming::Unix(_)) => continue,
            Event::Signal => {
                let _ = shared.shutdown.send(true);
                break;
            }
            Event::Shutdown => break,
        };
        let Some(slot) = StatsSlot::take(&open) else {
            tracing::debug!(
                "stats port: {STATS_MAX_CONNECTIONS} connections open, closing one more"
            );
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let Ok(mut s) = TcpStream::from_std(s) else {
                return;
            };
            let body = match read_command(&mut s).await {
                None => stats_json(&shared),
                Some(cmd) if cmd == "reload" => match shared.reload() {
                    Ok(_) => "OK\r\n".to_string(),
                    Err(e) => format!("ERROR {}\r\n", one_line(&e.to_string())),
                },
                Some(cmd) if cmd.is_empty() || cmd == "stats" => stats_json(&shared),
                Some(_) => "ERROR unknown command\r\n".to_string(),
            };
            let write = async {
                s.write_all(body.as_bytes()).await?;
                s.shutdown().await
            };
            if tokio::time::timeout(STATS_WRITE_TIMEOUT, write)
                .await
                .is_err()
            {
                tracing::debug!("stats port: a client did not read its answer in time");
            }
        });
    }
}

/// One of the stats port's [`STATS_MAX_CONNECTIONS`] places, given back on drop however
/// the connection's task ends.
struct StatsSlot(Arc<AtomicUsize>);

impl StatsSlot {
    /// A place, if one is free.
    fn take(open: &Arc<AtomicUsize>) -> Option<StatsSlot> {
        open.fetch_update(Relaxed, Relaxed, |n| {
            (n < STATS_MAX_CONNECTIONS).then_some(n + 1)
        })
        .ok()
        .map(|_| StatsSlot(open.clone()))
    }
}

impl Drop for StatsSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

/// The command line a stats client sent, trimmed; `None` if it sent nothing in time.
async fn read_command(s: &mut TcpStream) -> Option<String> {
    let mut line = Vec::new();
    let mut buf = [0u8; 64];
    let read = async {
        while line.len() < STATS_COMMAND_MAX && !line.contains(&b'\n') {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => line.extend_from_slice(buf.get(..n).unwrap_or_default()),
            }
        }
    };
    let _ = tokio::time::timeout(STATS_COMMAND_WAIT, read).await;
    if line.is_empty() {
        return None;
    }
    let end = line.iter().position(|&b| b == b'\n').unwrap_or(line.len());
    let cmd = String::from_utf8_lossy(line.get(..end).unwrap_or_default());
    Some(cmd.trim().to_ascii_lowercase())
}

/// `text` on one line, for a one-line reply.
fn one_line(text: &str) -> String {
    text.replace(['\r', '\n'], " ")
}

fn stats_json(shared: &Shared) -> String {
    let c = &shared.counters;
    document(
        c.started,
        c.total.load(Relaxed),
        c.current.load(Relaxed),
        c.reloads.load(Relaxed),
        c.reload_failures.load(Relaxed),
        shared
            .views()
            .iter()
            .map(|v| (v.name.clone(), v.stats_json()))
            .collect(),
    )
    .to_string()
}
