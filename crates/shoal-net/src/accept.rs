//! The acceptor's side: connections in, stop requests out.

use std::io;
use std::time::Duration;

use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::watch;

use crate::early_signals::{caught_early, STOP_SIGNALS};
use crate::listener::{Incoming, Listener};

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
            // A stop asked for before this acceptor's handlers existed.
            if STOP_SIGNALS.into_iter().any(caught_early) {
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
