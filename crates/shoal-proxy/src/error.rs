//! Error types of the proxy library.

use std::fmt;

/// A configuration error: the 1-based line, the field (directive or pool name; empty when
/// the line is malformed as YAML) and what is wrong. `Display` gives
/// `line N: field 'F': MESSAGE`, the text `shoal-proxy -t` prints.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// 1-based line number in the configuration file (0 when the file has no lines).
    pub line: usize,
    /// The directive or pool the error is about; empty for syntax errors.
    pub field: String,
    /// Human-readable description.
    pub message: String,
}

impl ConfigError {
    /// An error at `line` about `field`.
    pub fn at(line: usize, field: &str, message: impl Into<String>) -> ConfigError {
        ConfigError {
            line,
            field: field.to_string(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "line {}: {}", self.line, self.message)
        } else {
            write!(
                f,
                "line {}: field '{}': {}",
                self.line, self.field, self.message
            )
        }
    }
}

pub use shoal_client::BackendError;

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
