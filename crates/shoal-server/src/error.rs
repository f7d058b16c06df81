//! Why the server could not start or stopped with an error: one type for what
//! [`crate::run_all`] and [`crate::restart::open_store`] can fail on, each variant naming
//! the part that failed, so the binary can log it (and map it to an exit status) without
//! parsing text.

use std::io;
use std::net::SocketAddr;

use crate::auth::PasswordDbError;
use crate::tls::TlsError;
use shoal_store::{ConfigError, RestartError};

/// A failure of the server's startup or of its run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The store's configuration (`-m`, `-I`, slab options...) was refused.
    #[error(transparent)]
    Store(#[from] ConfigError),
    /// The `-e` memory file could not be opened or laid out.
    #[error(transparent)]
    MemoryFile(#[from] RestartError),
    /// The flash tier (`-o ext_path=...`) could not be opened or saved.
    #[error("{0}")]
    Flash(String),
    /// A graceful stop could not write the `-e` restart metadata.
    #[error("[restart] not saved, the next start will be cold: {0}")]
    Save(RestartError),
    /// The SASL or ASCII authentication file could not be read.
    #[error(transparent)]
    PasswordDb(#[from] PasswordDbError),
    /// The TLS certificate, key or CA file could not be loaded.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// `--metrics-listen` could not be bound.
    #[error("--metrics-listen {addr}: {source}")]
    Metrics {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// A thread or runtime could not be started, or accepting connections failed.
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
