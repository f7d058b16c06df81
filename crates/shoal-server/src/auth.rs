//! Authentication: SASL PLAIN for the binary protocol (`-S`) and memcached's ASCII
//! authentication (`-Y`), both against a `user:password` file.

use std::path::Path;
use std::time::Duration;

/// Users and passwords from a file of `user:password` lines (memcached's
/// `MEMCACHED_SASL_PWDB` and `-Y` format). Blank lines and `#` comments are skipped.
#[derive(Debug, Clone, Default)]
pub struct PasswordDb {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
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
        Ok(PasswordDb { entries })
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
    /// Delay to apply before reading more, after a failed attempt.
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

    /// Records a failed login: the connection is slowed down more with each failure, so a
    /// password cannot be brute-forced at wire speed.
    pub fn failed(&mut self, who: &str) {
        self.failures += 1;
        let ms = 100u64.saturating_mul(1 << self.failures.min(6));
        self.penalty = Some(Duration::from_millis(ms.min(5000)));
        tracing::warn!(
            failures = self.failures,
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
        s.failed("test");
        let first = s.penalty.unwrap();
        s.failed("test");
        assert!(s.penalty.unwrap() > first);
    }
}
