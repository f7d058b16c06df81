//! Authentication: SASL PLAIN for the binary protocol (`-S`) and memcached's ASCII
//! authentication (`-Y`), both against a `user:password` file.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How long failed logins from every connection are counted together.
const FAILURE_WINDOW_SECS: u32 = 10;

/// Users and passwords from a file of `user:password` lines (memcached's
/// `MEMCACHED_SASL_PWDB` and `-Y` format). Blank lines and `#` comments are skipped.
#[derive(Debug, Default)]
pub struct PasswordDb {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    /// Failed logins against this database from all connections: the start of the current
    /// window (high 32 bits, server clock seconds) and the count in it (low 32 bits).
    recent_failures: AtomicU64,
}

/// A password file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PasswordDbError {
    /// The file could not be read.
    #[error("cannot read password file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A line is not `user:password`.
    #[error("password file {path}, line {line}: expected user:password")]
    Format {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
    },
    /// No users at all.
    #[error("password file {0} has no users")]
    Empty(String),
}

impl PasswordDb {
    /// Loads a password file.
    pub fn load(path: &Path) -> Result<PasswordDb, PasswordDbError> {
        let name = path.display().to_string();
        let text = std::fs::read(path).map_err(|source| PasswordDbError::Read {
            path: name.clone(),
            source,
        })?;
        let mut entries = Vec::new();
        for (i, line) in text.split(|&b| b == b'\n').enumerate() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() || line.first() == Some(&b'#') {
                continue;
            }
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                return Err(PasswordDbError::Format {
                    path: name,
                    line: i + 1,
                });
            };
            entries.push((line[..colon].to_vec(), line[colon + 1..].to_vec()));
        }
        if entries.is_empty() {
            return Err(PasswordDbError::Empty(name));
        }
        Ok(PasswordDb {
            entries,
            recent_failures: AtomicU64::new(0),
        })
    }

    /// Whether `user` exists with `password`. Compares in time independent of where the
    /// password differs, so timing does not leak it.
    pub fn check(&self, user: &[u8], password: &[u8]) -> bool {
        let mut ok = false;
        for (u, p) in &self.entries {
            if u == user {
                ok |= constant_time_eq(p, password);
            }
        }
        ok
    }
}

impl PasswordDb {
    /// Records a failed login at server time `now` (seconds) and returns how many failures
    /// from all connections fall in the current window, so a flood spread over many
    /// connections is slowed down like repeated failures on one.
    pub fn record_failure(&self, now: u32) -> u32 {
        let mut cur = self.recent_failures.load(Ordering::Relaxed);
        loop {
            let (start, count) = ((cur >> 32) as u32, cur as u32);
            let (start, count) = if count > 0 && now.wrapping_sub(start) < FAILURE_WINDOW_SECS {
                (start, count.saturating_add(1))
            } else {
                (now, 1)
            };
            let next = (u64::from(start) << 32) | u64::from(count);
            match self.recent_failures.compare_exchange_weak(
                cur,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return count,
                Err(actual) => cur = actual,
            }
        }
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A connection's authentication state.
#[derive(Debug, Default)]
pub struct Session {
    /// Whether the client has authenticated (always true when no auth is configured).
    pub authenticated: bool,
    /// Failed attempts on this connection.
    pub failures: u32,
    /// Delay to apply, after a failed attempt, before the reply is sent and more is read.
    pub penalty: Option<Duration>,
}

impl Session {
    /// A session for a server where authentication is `required`.
    pub fn new(required: bool) -> Self {
        Session {
            authenticated: !required,
            ..Session::default()
        }
    }

    /// Records a failed login: the reply is delayed 200 ms, doubling with each failure on
    /// this connection or as failures from all connections (`recent`, from
    /// [`PasswordDb::record_failure`]) double, up to 5 s, so passwords cannot be tried at
    /// wire speed, neither on one connection nor on many.
    pub fn failed(&mut self, who: &str, recent: u32) {
        self.failures += 1;
        let global_level = 32 - recent.leading_zeros();
        let level = self.failures.max(global_level).min(6);
        let ms = (100u64 << level).min(5000);
        self.penalty = Some(Duration::from_millis(ms));
        tracing::warn!(
            failures = self.failures,
            recent,
            "authentication failure from {who}; delaying this connection {ms} ms"
        );
    }
}

/// Splits a SASL PLAIN message (`authzid \0 authcid \0 password`) into user and password.
pub fn parse_plain(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let mut parts = data.splitn(3, |&b| b == 0);
    let _authzid = parts.next()?;
    let user = parts.next()?;
    let password = parts.next()?;
    Some((user, password))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_and_checks() {
        let dir = std::env::temp_dir().join(format!("shoal-pwdb-{}", std::process::id()));
        std::fs::write(&dir, "# users\nalice:s3cret\nbob:pw:with:colons\n").unwrap();
        let db = PasswordDb::load(&dir).unwrap();
        assert!(db.check(b"alice", b"s3cret"));
        assert!(!db.check(b"alice", b"s3cre"));
        assert!(!db.check(b"carol", b"s3cret"));
        assert!(db.check(b"bob", b"pw:with:colons"));
        std::fs::write(&dir, "nocolon\n").unwrap();
        assert!(matches!(
            PasswordDb::load(&dir),
            Err(PasswordDbError::Format { line: 1, .. })
        ));
        std::fs::write(&dir, "\n").unwrap();
        assert!(matches!(
            PasswordDb::load(&dir),
            Err(PasswordDbError::Empty(_))
        ));
        let _ = std::fs::remove_file(&dir);
    }

    #[test]
    fn plain_messages() {
        assert_eq!(
            parse_plain(b"\0user\0pass"),
            Some((&b"user"[..], &b"pass"[..]))
        );
        assert_eq!(
            parse_plain(b"authz\0user\0p\0ss"),
            Some((&b"user"[..], &b"p\0ss"[..]))
        );
        assert_eq!(parse_plain(b"user"), None);
    }

    #[test]
    fn failures_slow_down() {
        let mut s = Session::new(true);
        assert!(!s.authenticated);
        s.failed("test", 0);
        let first = s.penalty.unwrap();
        s.failed("test", 0);
        assert!(s.penalty.unwrap() > first);
        // Failures elsewhere slow a fresh connection too.
        let mut fresh = Session::new(true);
        fresh.failed("test", 40);
        assert_eq!(fresh.penalty, Some(Duration::from_millis(5000)));
    }

    #[test]
    fn failures_are_counted_across_connections_per_window() {
        let db = PasswordDb::default();
        assert_eq!(db.record_failure(100), 1);
        assert_eq!(db.record_failure(100), 2);
        assert_eq!(db.record_failure(109), 3);
        assert_eq!(db.record_failure(110), 1, "a new window starts");
    }
}
