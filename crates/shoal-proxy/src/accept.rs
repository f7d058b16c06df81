//! Listening and accepting: binding a pool's listen address, accepting its clients on
//! the accepting thread (closing those over the pool's `client_connections` at once), and
//! handing each to the next worker thread, which runs its TLS handshake (if the pool has
//! `tls:`) and serves it ([`crate::session::serve`]).

use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use shoal_net::{Acceptor, Budget, Event, Incoming, Listener, WorkerService};
use tokio::net::{TcpStream, UnixStream};
use tokio::sync::oneshot;

use crate::config::Listen;
use crate::error::StartError;
use crate::route::Target;
use crate::session::serve;
use crate::shared::{Bound, ClientConn, ConnGuard, Live, Shared};
use crate::slot::PoolSlot;
use std::os::fd::AsRawFd;

/// One worker thread's service: serves the connections handed to it, on its own event
/// loop, with its own server connections.
pub(crate) struct Worker {
    /// Which worker it is (picks its slot of each listener).
    pub(crate) index: usize,
    /// The read-buffer budget its connections draw from.
    pub(crate) budget: Budget,
}

impl WorkerService<ClientConn> for Worker {
    async fn serve(self: Rc<Self>, c: ClientConn) {
        let Some(slot) = c.slots.get(self.index % c.slots.len().max(1)).cloned() else {
            return;
        };
        serve_client(c.conn, slot, self.budget.clone(), c.guard).await;
    }
}

impl Shared {
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

/// Accepts a pool's clients until the proxy stops (a signal, or [`crate::Running`] dropped) or
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
                let fd = Some(s.as_raw_fd());
                match tls {
                    None => serve(s, slot, budget, fd).await,
                    Some(acceptor) => {
                        if let Some(s) = handshake(&acceptor, s, &addr.to_string()).await {
                            serve(s, slot, budget, fd).await;
                        }
                    }
                }
            }
        }
        Incoming::Unix(s) => {
            if let Ok(s) = UnixStream::from_std(s) {
                let fd = Some(s.as_raw_fd());
                match tls {
                    None => serve(s, slot, budget, fd).await,
                    Some(acceptor) => {
                        if let Some(s) = handshake(&acceptor, s, "a unix socket client").await {
                            serve(s, slot, budget, fd).await;
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
