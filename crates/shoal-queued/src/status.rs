//! Kestrel's server status, for draining one server out of a cluster: `UP` serves
//! everything, `READONLY` refuses what modifies queues (`set`, `delete`, `flush`...),
//! `QUIESCENT` refuses every queue operation except closing or aborting reads opened
//! before; `WRITEAVOID` (a hint for clients that discover servers) refuses nothing. The
//! status is kept in `<data dir>/STATUS`, so a restart comes back in it, as Kestrel's does.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};

/// One of Kestrel's settable statuses (its `DOWN` is only transient, at shutdown, and
/// cannot be set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerStatus {
    /// Everything served.
    Up,
    /// Clients should avoid writing here; nothing is refused.
    WriteAvoid,
    /// Writes refused.
    ReadOnly,
    /// Every queue operation refused but closing and aborting open reads.
    Quiescent,
}

impl ServerStatus {
    /// The name Kestrel answers `status` with.
    pub fn name(self) -> &'static str {
        match self {
            ServerStatus::Up => "UP",
            ServerStatus::WriteAvoid => "WRITEAVOID",
            ServerStatus::ReadOnly => "READONLY",
            ServerStatus::Quiescent => "QUIESCENT",
        }
    }

    /// Parses a status name, in any case.
    pub fn parse(s: &str) -> Option<ServerStatus> {
        match s.to_ascii_uppercase().as_str() {
            "UP" => Some(ServerStatus::Up),
            "WRITEAVOID" => Some(ServerStatus::WriteAvoid),
            "READONLY" => Some(ServerStatus::ReadOnly),
            "QUIESCENT" => Some(ServerStatus::Quiescent),
            _ => None,
        }
    }

    /// Whether writes (`set`, `delete`, `flush`...) are refused.
    pub fn blocks_writes(self) -> bool {
        matches!(self, ServerStatus::ReadOnly | ServerStatus::Quiescent)
    }

    /// Whether reads (`get`, but not `/close` or `/abort`) are refused.
    pub fn blocks_reads(self) -> bool {
        self == ServerStatus::Quiescent
    }

    fn code(self) -> u8 {
        match self {
            ServerStatus::Up => 0,
            ServerStatus::WriteAvoid => 1,
            ServerStatus::ReadOnly => 2,
            ServerStatus::Quiescent => 3,
        }
    }

    fn from_code(c: u8) -> ServerStatus {
        match c {
            1 => ServerStatus::WriteAvoid,
            2 => ServerStatus::ReadOnly,
            3 => ServerStatus::Quiescent,
            _ => ServerStatus::Up,
        }
    }
}

/// Why the status could not be changed or read back.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// Not one of `UP`, `WRITEAVOID`, `READONLY`, `QUIESCENT`.
    #[error("unknown status {0:?}")]
    Unknown(String),
    /// The status file could not be written; the status is unchanged.
    #[error("writing {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

/// The server's status and the file that keeps it.
#[derive(Debug)]
pub struct Status {
    current: AtomicU8,
    path: PathBuf,
    /// Serialises changes, so the file always holds the last status set.
    change: std::sync::Mutex<()>,
}

impl Status {
    /// The status kept in `<data_dir>/STATUS`, or `UP` if there is none. An unreadable or
    /// unknown file is logged and `UP` is used, as Kestrel falls back to its default.
    pub fn load(data_dir: &Path) -> Status {
        let path = data_dir.join("STATUS");
        let current = match fs::read_to_string(&path) {
            Ok(s) => ServerStatus::parse(s.trim()).unwrap_or_else(|| {
                tracing::error!("{}: unknown status {:?}; UP", path.display(), s.trim());
                ServerStatus::Up
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => ServerStatus::Up,
            Err(e) => {
                tracing::error!("reading {}: {e}; status UP", path.display());
                ServerStatus::Up
            }
        };
        if current != ServerStatus::Up {
            tracing::warn!("server status {} (from {})", current.name(), path.display());
        }
        Status {
            current: AtomicU8::new(current.code()),
            path,
            change: std::sync::Mutex::new(()),
        }
    }

    /// The status now.
    pub fn get(&self) -> ServerStatus {
        ServerStatus::from_code(self.current.load(Ordering::Acquire))
    }

    /// Sets the status by name (Kestrel's `status <name>`), durably: the file is written
    /// and fsynced (then renamed over the old one, and the directory fsynced) before the
    /// new status is in force, so a restart never comes back in an older one.
    pub fn set(&self, name: &str) -> Result<ServerStatus, StatusError> {
        let new = ServerStatus::parse(name).ok_or_else(|| StatusError::Unknown(name.into()))?;
        let _one = self.change.lock().unwrap_or_else(|e| e.into_inner());
        self.persist(new).map_err(|source| StatusError::Write {
            path: self.path.clone(),
            source,
        })?;
        self.current.store(new.code(), Ordering::Release);
        tracing::info!("server status {}", new.name());
        Ok(new)
    }

    fn persist(&self, s: ServerStatus) -> io::Result<()> {
        let tmp = self.path.with_extension("tmp");
        let mut f = fs::File::create(&tmp)?;
        f.write_all(s.name().as_bytes())?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        fs::rename(&tmp, &self.path)?;
        if let Some(dir) = self.path.parent() {
            fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_persists_and_load_reads_back() {
        let d = tempfile::tempdir().expect("tempdir");
        let s = Status::load(d.path());
        assert_eq!(s.get(), ServerStatus::Up);
        assert_eq!(s.set("readonly").expect("set"), ServerStatus::ReadOnly);
        assert!(s.get().blocks_writes() && !s.get().blocks_reads());
        assert!(matches!(s.set("spongebob"), Err(StatusError::Unknown(_))));
        assert!(matches!(s.set("down"), Err(StatusError::Unknown(_))));
        assert_eq!(Status::load(d.path()).get(), ServerStatus::ReadOnly);
        s.set("Quiescent").expect("set");
        assert!(Status::load(d.path()).get().blocks_reads());
        fs::write(d.path().join("STATUS"), "sideways\n").expect("write");
        assert_eq!(Status::load(d.path()).get(), ServerStatus::Up);
    }
}
