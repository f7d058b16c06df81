//! Listening, accepting, the worker threads and orderly shutdown.
//!
//! memcached's thread model, from [`shoal_net`]: one acceptor hands each new connection to
//! one of N worker threads, and that thread serves it for its lifetime on its own event
//! loop. A worker owns its store writer and its counters, so requests never contend on
//! anything but the key's index shard.

use crate::auth::PasswordDb;
use crate::config::Settings;
use crate::conn;
use crate::conns::{ConnInfo, ConnRegistry};
use crate::detail::PrefixStats;
use crate::error::ServeError;
use crate::lru_crawler::LruCrawler;
use crate::restart::OpenedStore;
use crate::stats::{StatsRegistry, ThreadStats};
use crate::watch::Watchers;
use crate::worker::{Shared, Worker};
use shoal_net::event_loop::EpollStream;
use shoal_net::uring::UringStream;
use shoal_net::{Acceptor, Budget, Event, Incoming, WorkerPool, WorkerService};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

pub use shoal_net::Listener;

/// How long shutdown waits for connections to finish the replies they are writing.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Binds what `settings` asks for (a unix socket replaces TCP, as in memcached), or
/// nothing for `-p 0` (no TCP listener; the server may still answer on UDP).
pub fn bind(settings: &Settings) -> io::Result<Option<Listener>> {
    match (&settings.unix_socket, settings.port) {
        (Some(path), _) => Listener::bind_unix(path, settings.unix_mask).map(Some),
        (None, Some(port)) => {
            Listener::bind_tcp(SocketAddr::new(settings.listen, port), settings.backlog).map(Some)
        }
        (None, None) => Ok(None),
    }
}

/// Binds the further `-l` addresses (none with a unix socket, which replaces TCP).
pub fn bind_extra(settings: &Settings) -> io::Result<Vec<Listener>> {
    if settings.unix_socket.is_some() || settings.port.is_none() {
        return Ok(Vec::new());
    }
    settings
        .extra_listen
        .iter()
        .map(|&addr| Listener::bind_tcp(addr, settings.backlog))
        .collect()
}

/// Runs the server until SIGINT/SIGTERM/SIGUSR1 or the `shutdown` command, then returns once
/// every connection has finished its in-flight replies (and, after SIGUSR1, once a `-e`
/// memory file's restart metadata is saved).
pub fn run(settings: Settings, listener: Listener, opened: OpenedStore) -> Result<(), ServeError> {
    run_all(settings, Some(listener), Vec::new(), None, opened)
}

/// [`run`], also accepting on `extra` (the further `-l` addresses, see [`bind_extra`])
/// and answering datagrams on `udp` (`-U`, see [`crate::udp::bind`]). Without a
/// `listener` (`-p 0`) it serves UDP only, if that, and waits for the signal to stop.
pub fn run_all(
    settings: Settings,
    listener: Option<Listener>,
    extra: Vec<Listener>,
    udp: Option<std::net::UdpSocket>,
    opened: OpenedStore,
) -> Result<(), ServeError> {
    shoal_net::tune_allocator();
    let store = opened.store;
    if let Some(outcome) = &opened.restart {
        outcome.log();
    }
    if let Some(outcome) = &opened.flash {
        outcome.log();
    }
    let label = |l: &Listener| match (l, &settings.unix_socket) {
        (Listener::Unix(_), Some(p)) => format!("unix:{}", p.display()),
        // memcached's words: `tcp:` for IPv4 and `tcp6:` for IPv6 sockets.
        _ => match l.local_addr() {
            Some(a) if a.is_ipv6() => format!("tcp6:{a}"),
            Some(a) => format!("tcp:{a}"),
            None => "tcp:?".to_string(),
        },
    };
    let listen_labels: Vec<String> = listener.iter().chain(extra.iter()).map(label).collect();
    let listen_label = listen_labels.first().cloned().unwrap_or_default();
    let sasl = settings
        .sasl_pwdb
        .as_deref()
        .map(PasswordDb::load)
        .transpose()?;
    let ascii_auth = settings
        .auth_file
        .as_deref()
        .map(PasswordDb::load)
        .transpose()?;
    let tls = settings
        .tls
        .as_ref()
        .map(crate::tls::acceptor)
        .transpose()?
        .map(parking_lot::RwLock::new);
    let (shutdown_tx, _) = watch::channel(false);
    let watchers = Arc::new(Watchers::default());
    {
        let for_evictions = watchers.clone();
        store.on_evict(move |item| for_evictions.evicted(item));
        let for_flash = watchers.clone();
        store.on_flash_event(move |event| for_flash.flash(event));
    }
    let io_uring = settings.io_uring && {
        let ok = shoal_net::uring::supported();
        if !ok {
            tracing::warn!(
                "io_uring asked for but unavailable ({}); serving on epoll",
                shoal_net::uring::unsupported_reason().unwrap_or_default()
            );
        }
        ok
    };
    let flash_readers = match store.flash() {
        Some(_) => Some(
            crate::flash_reader::FlashReaders::start(
                &store,
                crate::flash::readers(&settings.extstore),
            )
            .map_err(ServeError::io("starting the flash read threads"))?,
        ),
        None => None,
    };
    let shared = Arc::new(Shared {
        io_uring,
        flash_readers,
        store,
        stats: StatsRegistry::default(),
        conns: ConnRegistry::after_listeners(listen_labels.len() + usize::from(udp.is_some())),
        curr_connections: AtomicUsize::new(0),
        total_connections: AtomicU64::new(0),
        rejected_connections: AtomicU64::new(0),
        verbosity: AtomicUsize::new(settings.verbose as usize),
        listen_label,
        listen_labels,
        udp_label: udp.as_ref().map(crate::udp::label),
        sasl,
        ascii_auth,
        tls,
        buffers: Budget::new(settings.read_buffer_budget()),
        crawler: LruCrawler::new(
            settings.lru_crawler,
            settings.tunables.lru_crawler_sleep,
            settings.tunables.lru_crawler_tocrawl,
        ),
        tuning: parking_lot::Mutex::new(settings.tunables.clone()),
        watchers: watchers.clone(),
        prefixes: PrefixStats::new(
            u8::try_from(settings.prefix_delimiter).unwrap_or(b':'),
            settings.detail_enabled,
        ),
        latency: crate::latency::LatencyRegistry::default(),
        shutdown_tx,
        stopping: AtomicBool::new(false),
        save_on_stop: AtomicBool::new(false),
        settings,
    });

    let maintenance = crate::maintenance::start(shared.clone())
        .map_err(ServeError::io("starting the maintenance thread"))?;
    let udp_thread = udp
        .map(|socket| crate::udp::start(shared.clone(), socket))
        .transpose()
        .map_err(ServeError::io("starting the UDP thread"))?;

    let make = {
        let shared = shared.clone();
        move |_| Worker::new(&shared, shared.settings.metrics_listen.is_some())
    };
    let mut pool = WorkerPool::start(
        shared.executor(),
        shared.settings.threads,
        "shoal-worker",
        &shared.shutdown_signal(),
        DRAIN_TIMEOUT,
        make,
    )
    .map_err(ServeError::io("starting the worker threads"))?;

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ServeError::io("starting the acceptor's runtime"))?;
    // The metrics endpoint shares the acceptor's runtime: both are idle between events,
    // and neither runs on a worker, so scrapes never delay requests.
    if let Some(addr) = shared.settings.metrics_listen {
        let metrics = shoal_net::metrics::MetricsServer::bind(addr)
            .map_err(|source| ServeError::Metrics { addr, source })?;
        let bound = metrics
            .local_addr()
            .map_err(|source| ServeError::Metrics { addr, source })?;
        tracing::info!("metrics on http://{bound}/metrics");
        shoal_net::metrics::clock::calibrate();
        let sh = shared.clone();
        rt.spawn(metrics.serve(Arc::new(move || crate::metrics::render(&sh))));
    }
    let served = rt.block_on(accept_loop(&shared, listener, extra, &mut pool));
    // Also when accepting failed: workers and the maintenance thread stop on this.
    shared.begin_shutdown();
    pool.join();
    if let Some(Err(panic)) = udp_thread.map(|t| t.join()) {
        tracing::error!(
            "the UDP thread panicked: {}",
            shoal_net::panic_message(&*panic)
        );
    }
    if let Err(panic) = maintenance.join() {
        tracing::error!(
            "the maintenance thread panicked: {}",
            shoal_net::panic_message(&*panic)
        );
    }
    let stop = served.map_err(ServeError::io("accepting connections"))?;
    if stop == Stop::Restart || shared.save_on_stop.load(Ordering::Relaxed) {
        // Every worker (and so every writer) has stopped: the store is at rest.
        crate::restart::save(&shared.store)?;
    }
    if let Some(path) = &shared.settings.unix_socket {
        let _ = std::fs::remove_file(path);
    }
    tracing::info!("shut down");
    Ok(())
}

/// Why the server stopped accepting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// SIGINT, SIGTERM or the `shutdown` command.
    Shutdown,
    /// SIGUSR1: memcached's graceful stop, which also saves a `-e` memory file's metadata.
    Restart,
}

/// Accepts until a signal or the `shutdown` command.
async fn accept_loop(
    shared: &Shared,
    listener: Option<Listener>,
    extra: Vec<Listener>,
    pool: &mut WorkerPool,
) -> io::Result<Stop> {
    let mut acceptor = match listener {
        Some(l) => Acceptor::new(l, shared.shutdown_signal())?,
        None => Acceptor::without_listener(shared.shutdown_signal())?,
    };
    // Further listeners hand their connections to this loop, so the connection limit and
    // dispatch stay in one place; signals and shutdown are the first acceptor's to see.
    let (extra_tx, mut extra_rx) = tokio::sync::mpsc::channel::<Incoming>(64);
    for l in extra {
        let mut a = Acceptor::new(l, shared.shutdown_signal())?;
        let tx = extra_tx.clone();
        tokio::spawn(async move {
            while let Event::Conn(c) = a.next().await {
                if tx.send(c).await.is_err() {
                    break;
                }
            }
        });
    }
    drop(extra_tx);
    let mut usr1 = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1())?;
    if shoal_net::early_signals::caught_early(libc::SIGUSR1) {
        tracing::info!("SIGUSR1 during startup: stopping gracefully");
        return Ok(Stop::Restart);
    }
    loop {
        let event = tokio::select! {
            biased;
            _ = usr1.recv() => {
                tracing::info!("SIGUSR1: stopping gracefully");
                return Ok(Stop::Restart);
            }
            event = acceptor.next() => event,
            Some(c) = extra_rx.recv() => Event::Conn(c),
        };
        let incoming = match event {
            Event::Conn(c) => c,
            Event::Signal | Event::Shutdown => return Ok(Stop::Shutdown),
        };
        let curr = shared.curr_connections.load(Ordering::Relaxed);
        if curr >= shared.settings.conn_limit {
            shared.rejected_connections.fetch_add(1, Ordering::Relaxed);
            reject(incoming).await;
            continue;
        }
        shared.curr_connections.fetch_add(1, Ordering::Relaxed);
        shared.total_connections.fetch_add(1, Ordering::Relaxed);
        if pool.dispatch(incoming).is_err() {
            shared.curr_connections.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// memcached's answer to a connection over the limit.
async fn reject(incoming: Incoming) {
    const MSG: &[u8] = b"ERROR Too many open connections\r\n";
    match incoming {
        Incoming::Tcp(s, _) => {
            if let Ok(mut s) = tokio::net::TcpStream::from_std(s) {
                let _ = s.write_all(MSG).await;
            }
        }
        Incoming::Unix(s) => {
            if let Ok(mut s) = tokio::net::UnixStream::from_std(s) {
                let _ = s.write_all(MSG).await;
            }
        }
    }
}

impl WorkerService for Worker {
    async fn serve(self: Rc<Self>, incoming: Incoming) {
        // Every exit, a panic included, gives the connection slot back.
        let _slot = ConnSlot {
            shared: self.shared.clone(),
        };
        if let Incoming::Tcp(s, _) = &incoming {
            let _ = s.set_nodelay(true);
        }
        let label = |addr: Option<SocketAddr>| match addr {
            Some(addr) => format!("tcp:{addr}"),
            None => self.shared.listen_label.clone(),
        };
        // tokio's own sockets: neither io_uring's nor the event loop's.
        let tokio_sockets =
            !self.shared.io_uring && self.shared.executor() == shoal_net::Executor::Tokio;
        // One `serve_stream` call per stream type, so each connection loop has a single
        // caller, which the compiler may then fold into it: every function level between
        // the event loop and the socket's system calls costs a mispredicted return per
        // call (see `shoal_net::event_loop::syscall`). In the build measured on
        // 2026-11-29, `serve_stream` folds into this task.
        let (fd, addr) = match incoming {
            Incoming::Tcp(s, addr) if tokio_sockets => {
                if let Ok(mut s) = tokio::net::TcpStream::from_std(s) {
                    serve_stream(&self, &mut s, label(Some(addr)), Some(addr)).await;
                }
                return;
            }
            Incoming::Unix(s) if tokio_sockets => {
                if let Ok(mut s) = tokio::net::UnixStream::from_std(s) {
                    serve_stream(&self, &mut s, label(None), None).await;
                }
                return;
            }
            Incoming::Tcp(s, addr) => (OwnedFd::from(s), Some(addr)),
            Incoming::Unix(s) => (OwnedFd::from(s), None),
        };
        if self.shared.io_uring {
            if let Ok(mut s) = UringStream::new(fd) {
                serve_stream(&self, &mut s, label(addr), addr).await;
            }
        } else if let Ok(mut s) = EpollStream::new(fd) {
            serve_stream(&self, &mut s, label(addr), addr).await;
        }
    }

    fn stopping(&self) {
        self.stop_reading();
    }
}

/// Serves a connection (`addr`: a TCP client's, `None` on the unix socket) on any data
/// path: TLS first when `-Z` is on and it came over TCP.
async fn serve_stream<S>(worker: &Worker, s: &mut S, label: String, addr: Option<SocketAddr>)
where
    S: AsyncRead + AsyncWrite + Unpin + AsRawFd,
{
    let open = OpenConn::register(worker, label, s.as_raw_fd());
    let info = &*open.info;
    match (&worker.shared.tls, addr) {
        (Some(acceptor), Some(addr)) => {
            // Boxed, and behind `dyn`: inlined here, the handshake's and the TLS stream's
            // futures made this function's stack frame 10 KiB (4.4 KiB without them),
            // probed page by page on every poll of every plain connection. A TLS
            // connection pays one allocation instead.
            let tls: Pin<Box<dyn Future<Output = ()> + '_>> =
                Box::pin(serve_tls(worker, s, info, acceptor.read().clone(), addr));
            tls.await
        }
        _ => conn::serve(s, worker, info).await,
    }
}

/// [`serve_stream`] for a TLS listener: the handshake, then the connection over it. Takes
/// the acceptor `refresh_certs` last installed, which this connection keeps whatever
/// later reloads do.
async fn serve_tls<S>(
    worker: &Worker,
    s: &mut S,
    info: &ConnInfo,
    acceptor: tokio_rustls::TlsAcceptor,
    addr: SocketAddr,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    // A plain-text client or a stalled handshake is dropped.
    let handshake = shoal_net::time::timeout(Duration::from_secs(10), acceptor.accept(s));
    match handshake.await {
        Ok(Ok(mut tls)) => {
            ThreadStats::incr(&worker.stats.tls_handshakes);
            conn::serve(&mut tls, worker, info).await
        }
        Ok(Err(e)) => {
            ThreadStats::incr(&worker.stats.tls_handshake_errors);
            tracing::info!("TLS handshake from {addr} failed: {e}")
        }
        Err(_) => {
            ThreadStats::incr(&worker.stats.tls_handshake_timeouts);
            tracing::info!("TLS handshake from {addr} timed out")
        }
    }
}

/// A connection counted in `curr_connections`; uncounted on drop, however the
/// connection's task ends.
struct ConnSlot {
    shared: Arc<Shared>,
}

impl Drop for ConnSlot {
    fn drop(&mut self) {
        self.shared.curr_connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A connection listed in `stats conns` and in its worker's socket registry; removed from
/// both on drop, before its socket is closed (the guard is created after the socket and
/// so dropped before it), which is what makes [`Worker::stop_reading`]'s use of the raw
/// fd sound.
struct OpenConn<'w> {
    worker: &'w Worker,
    info: Arc<ConnInfo>,
}

impl<'w> OpenConn<'w> {
    fn register(worker: &'w Worker, addr: String, fd: RawFd) -> OpenConn<'w> {
        let info = worker.shared.conns.open(addr);
        worker.sockets.borrow_mut().insert(info.id, fd);
        worker.shared.watchers.conn_event(&info.addr, None, info.id);
        OpenConn { worker, info }
    }
}

impl Drop for OpenConn<'_> {
    fn drop(&mut self) {
        self.worker.sockets.borrow_mut().remove(&self.info.id);
        self.worker.shared.conns.close(&self.info);
        let reason = self.info.close_reason();
        let shared = &self.worker.shared;
        shared
            .watchers
            .conn_event(&self.info.addr, Some(reason), self.info.id);
    }
}

/// The connection's own record, kept while it is open.
pub type ConnHandle = Arc<ConnInfo>;
