//! The acceptor's side: connections in, stop requests out.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::watch;

use crate::listener::{Incoming, Listener};

/// Set by a SIGTERM or SIGINT once [`catch_stop_signals_early`] has run.
static STOP_REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn note_stop(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP_REQUESTED.store(true, Ordering::Relaxed);
}

/// Remembers SIGTERM and SIGINT from now on, so that a stop asked for before the
/// [`Acceptor`] exists is not lost. The daemons log `listening on` (what scripts and
/// supervisors wait for) before their acceptor installs its own handlers, and a signal
/// in between would otherwise take its default action or, where the parent left SIGTERM
/// ignored, vanish and leave the server running. With this, the first
/// [`Acceptor::next`] reports such a signal as [`Event::Signal`] and the server stops
/// as it would a moment later. Call first thing in `main`; tokio's signal registry
/// keeps calling this handler after installing its own, so nothing falls in between.
pub fn catch_stop_signals_early() {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: installs a handler that only performs an atomic store.
        unsafe {
            libc::signal(
                sig,
                note_stop as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
}

/// What the acceptor should do next.
pub enum Event {
    /// A new connection.
    Conn(Incoming),
    /// SIGINT or SIGTERM arrived: begin shutdown.
    Signal,
    /// The server's shutdown signal changed (shutdown already began elsewhere).
    Shutdown,
}

enum AsyncListener {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener),
    /// No listening socket: only the reasons to stop arrive.
    None,
}

/// Accepts connections and watches for the reasons to stop. Must be created and used
/// inside a tokio runtime (the acceptor's own).
pub struct Acceptor {
    listener: AsyncListener,
    sigterm: Signal,
    sigint: Signal,
    shutdown: watch::Receiver<bool>,
}

impl Acceptor {
    /// Takes over `listener`; `shutdown` is the server's own shutdown signal.
    pub fn new(listener: Listener, shutdown: watch::Receiver<bool>) -> io::Result<Acceptor> {
        let listener = match listener {
            Listener::Tcp(l) => AsyncListener::Tcp(tokio::net::TcpListener::from_std(l)?),
            Listener::Unix(l) => AsyncListener::Unix(tokio::net::UnixListener::from_std(l)?),
        };
        Ok(Acceptor {
            listener,
            sigterm: signal(SignalKind::terminate())?,
            sigint: signal(SignalKind::interrupt())?,
            shutdown,
        })
    }

    /// An acceptor without a listening socket (memcached's `-p 0`, which serves UDP or
    /// nothing): [`next`](Self::next) reports only the reasons to stop.
    pub fn without_listener(shutdown: watch::Receiver<bool>) -> io::Result<Acceptor> {
        Ok(Acceptor {
            listener: AsyncListener::None,
            sigterm: signal(SignalKind::terminate())?,
            sigint: signal(SignalKind::interrupt())?,
            shutdown,
        })
    }

    /// The next event. Cancel-safe, so it can sit in a `select!` beside a timer. A failed
    /// accept (out of descriptors and the like) is logged and retried after 10 ms rather
    /// than spun on.
    pub async fn next(&mut self) -> Event {
        loop {
            if STOP_REQUESTED.load(Ordering::Relaxed) {
                return Event::Signal;
            }
            let accepted = tokio::select! {
                _ = self.sigterm.recv() => return Event::Signal,
                _ = self.sigint.recv() => return Event::Signal,
                _ = self.shutdown.changed() => return Event::Shutdown,
                r = accept(&self.listener) => r,
            };
            match accepted {
                Ok(conn) => {
                    // memcached's `-vv` says the same ("new client connection").
                    match &conn {
                        Incoming::Tcp(_, peer) => tracing::debug!(%peer, "connection accepted"),
                        Incoming::Unix(_) => tracing::debug!("connection accepted (unix socket)"),
                    }
                    return Event::Conn(conn);
                }
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    }
}

async fn accept(listener: &AsyncListener) -> io::Result<Incoming> {
    match listener {
        AsyncListener::Tcp(l) => {
            let (s, addr) = l.accept().await?;
            Ok(Incoming::Tcp(s.into_std()?, addr))
        }
        AsyncListener::Unix(l) => {
            let (s, _) = l.accept().await?;
            Ok(Incoming::Unix(s.into_std()?))
        }
        AsyncListener::None => std::future::pending().await,
    }
}
