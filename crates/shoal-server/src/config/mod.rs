//! shoald's command line, compatible with memcached 1.6's flags and `-o` keys.
//!
//! Every flag and `-o` key memcached 1.6 accepts is accepted here, with memcached's
//! validation, error wording and exit statuses, so a memcached command line (Debian's
//! `/etc/memcached.conf`, a systemd unit, a container entrypoint) starts shoald unchanged.
//! Options that tune parts of memcached shoald does not have (slab classes, LRU queues,
//! extstore, ...) are validated and shown in `stats settings` but change nothing; they are
//! collected in [`Settings::inert`] so the binary can say so once at startup.
//!
//! One job per module: `args` is the command line as clap reads it, `file` puts a
//! `--config FILE` (memcached.conf) in front of it, `validate` turns it into [`Settings`]
//! with memcached's checks in memcached's order, `extended` applies the `-o` keys,
//! `listen` reads `-l`, `settings` and `tunables` are what the server runs with and
//! reports, and `inert` names what is accepted without effect. Everything public is
//! re-exported here.

mod args;
mod extended;
mod file;
mod inert;
mod listen;
mod settings;
mod tunables;
mod validate;

pub use args::{parse_size, Args};
pub use file::ArgsError;
pub use inert::Inert;
pub use settings::{HashAlgorithm, Protocol, Settings, SslOptions, TlsSettings};
pub use tunables::{Extstore, Tunables};

/// The version string shoald reports (`version`, `stats`): memcached's protocol level it
/// implements, so clients that gate features on the version (meta commands need 1.6)
/// enable them, followed by Shoal's own version.
pub const VERSION: &str = concat!("1.6.45-shoal-", env!("CARGO_PKG_VERSION"));

/// sysexits' EX_USAGE, memcached's status for contradictory options.
pub const EX_USAGE: u8 = 64;
/// sysexits' EX_NOUSER, memcached's status when the `-u` user does not exist.
pub const EX_NOUSER: u8 = 67;
/// sysexits' EX_OSERR, memcached's status when the OS refuses a setup step.
pub const EX_OSERR: u8 = 71;

/// A bad command line. Each kind exits with memcached's status for it
/// ([`ConfigError::exit_code`]); the messages are memcached's where it has one.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A bad value memcached rejects while reading its options (exit status 1).
    #[error("{0}")]
    Invalid(String),
    /// An `-o` key neither memcached 1.6 nor shoald knows (exit status 1).
    #[error("Illegal suboption \"{0}\"")]
    IllegalSuboption(String),
    /// Options that contradict each other or sizes that do not fit together; memcached
    /// exits with EX_USAGE (64) for these.
    #[error("{0}")]
    Usage(String),
}

impl ConfigError {
    /// memcached's exit status for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            ConfigError::Invalid(_) | ConfigError::IllegalSuboption(_) => 1,
            ConfigError::Usage(_) => EX_USAGE,
        }
    }
}

fn invalid(msg: impl Into<String>) -> ConfigError {
    ConfigError::Invalid(msg.into())
}

fn usage(msg: impl Into<String>) -> ConfigError {
    ConfigError::Usage(msg.into())
}

/// Runs a command line through [`Args`] and [`Args::settings`], for the tests of every
/// part of it.
#[cfg(test)]
mod testing {
    use super::{Args, Settings};
    use clap::Parser;

    pub(super) fn settings(args: &[&str]) -> Result<Settings, String> {
        let mut full = vec!["shoald"];
        full.extend_from_slice(args);
        let a = Args::try_parse_from(full).map_err(|e| e.to_string())?;
        a.settings().map_err(|e| e.to_string())
    }

    /// The error and exit status for `args`, which must fail validation (not parsing).
    pub(super) fn refused(args: &[&str]) -> (String, u8) {
        let mut full = vec!["shoald"];
        full.extend_from_slice(args);
        let a = Args::try_parse_from(full).expect("parses");
        match a.settings() {
            Ok(_) => panic!("{args:?} accepted"),
            Err(e) => (e.to_string(), e.exit_code()),
        }
    }
}
