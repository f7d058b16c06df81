//! Why [`crate::run`] failed: the part of the server that could not start or run.

use std::io;
use std::net::SocketAddr;

/// A failure of the server's startup or of its run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// `--metrics-listen` could not be bound.
    #[error("--metrics-listen {addr}: {source}")]
    Metrics {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// A thread, runtime or signal handler could not be started, or accepting
    /// connections failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// Why.
        source: io::Error,
    },
}

impl ServeError {
    /// An I/O failure while doing `what`.
    pub fn io(what: &'static str) -> impl FnOnce(io::Error) -> ServeError {
        move |source| ServeError::Io { what, source }
    }
}
