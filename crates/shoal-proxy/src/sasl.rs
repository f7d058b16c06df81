//! SASL PLAIN authentication of binary-protocol clients at the proxy, with memcached's
//! `-S` semantics: a pool with a `sasl:` section serves a connection only once it has
//! authenticated (`SASL_LIST_MECHS`, `SASL_AUTH`/`SASL_STEP`, `VERSION` and `QUIT` are
//! allowed before; anything else gets the auth-error status), and text-protocol clients,
//! which cannot authenticate, are refused.
//!
//! Configured per pool:
//!
//! ```yaml
//! alpha:
//!   listen: 127.0.0.1:22121
//!   sasl:
//!     users:                      # inline user:password entries
//!       - alice:wonderland
//!     password_file: /etc/shoal/sasl.pw   # user:password lines (MEMCACHED_SASL_PWDB format)
//!   servers:
//!     - 127.0.0.1:11211:1
//! ```
//!
//! Either key may be left out, not both. The password file is read when the
//! configuration is loaded, so a reload picks up its changes.

use std::fmt;
use std::path::PathBuf;

use crate::error::ConfigError;
use crate::yaml::scalar;
use crate::yaml::Node;

/// The only mechanism offered.
pub const MECHANISMS: &[u8] = b"PLAIN";

/// A pool's SASL users. Passwords are never printed (`Debug` shows the user names).
#[derive(Clone, PartialEq, Eq)]
pub struct SaslConfig {
    users: Vec<(Vec<u8>, Vec<u8>)>,
    /// The password file the users came from, if any.
    pub password_file: Option<PathBuf>,
}

impl fmt::Debug for SaslConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<_> = self
            .users
            .iter()
            .map(|(u, _)| String::from_utf8_lossy(u))
            .collect();
        f.debug_struct("SaslConfig")
            .field("users", &names)
            .field("password_file", &self.password_file)
            .finish()
    }
}

impl SaslConfig {
    /// Whether `user` exists with `password`. The comparison takes the same time wherever
    /// the password differs, so timing does not leak it.
    pub fn check(&self, user: &[u8], password: &[u8]) -> bool {
        let mut ok = false;
        for (u, p) in &self.users {
            if u == user {
                ok |= constant_time_eq(p, password);
            }
        }
        ok
    }

    /// Checks a SASL PLAIN message (`authzid \0 user \0 password`).
    pub fn check_plain(&self, data: &[u8]) -> bool {
        let mut parts = data.splitn(3, |&b| b == 0);
        let (Some(_authzid), Some(user), Some(password)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return false;
        };
        self.check(user, password)
    }

    /// Parses a pool's `sasl:` section (`key` at `line`).
    pub fn parse(key: &str, line: usize, node: Node) -> Result<SaslConfig, ConfigError> {
        let Node::Map(entries) = node else {
            return Err(ConfigError::at(
                line,
                key,
                "expected a map with 'users' and/or 'password_file'",
            ));
        };
        let mut cfg = SaslConfig {
            users: Vec::new(),
            password_file: None,
        };
        for (k, l, value) in entries {
            let field = format!("{key}.{k}");
            match k.as_str() {
                "users" => {
                    let Node::List(items) = value else {
                        return Err(ConfigError::at(
                            l,
                            &field,
                            "expected a list of user:password",
                        ));
                    };
                    for (item_line, item) in items {
                        let s = scalar(&field, item_line, &item)?;
                        let entry = split_entry(s.as_bytes()).ok_or_else(|| {
                            ConfigError::at(item_line, &field, "expected user:password")
                        })?;
                        cfg.users.push(entry);
                    }
                }
                "password_file" => {
                    let path = PathBuf::from(scalar(&field, l, &value)?);
                    let text = std::fs::read(&path).map_err(|e| {
                        ConfigError::at(l, &field, format!("cannot read {}: {e}", path.display()))
                    })?;
                    for (i, raw) in text.split(|&b| b == b'\n').enumerate() {
                        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
                        if raw.is_empty() || raw.first() == Some(&b'#') {
                            continue;
                        }
                        let entry = split_entry(raw).ok_or_else(|| {
                            ConfigError::at(
                                l,
                                &field,
                                format!(
                                    "{}, line {}: expected user:password",
                                    path.display(),
                                    i + 1
                                ),
                            )
                        })?;
                        cfg.users.push(entry);
                    }
                    cfg.password_file = Some(path);
                }
                _ => return Err(ConfigError::at(l, &field, "unknown directive")),
            }
        }
        if cfg.users.is_empty() {
            return Err(ConfigError::at(line, key, "no users configured"));
        }
        Ok(cfg)
    }
}

/// `user:password` (the password may contain colons; the user may not be empty).
fn split_entry(b: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let colon = b.iter().position(|&c| c == b':')?;
    let (user, password) = (b.get(..colon)?, b.get(colon + 1..)?);
    (!user.is_empty()).then(|| (user.to_vec(), password.to_vec()))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml;

    fn section(text: &str) -> Result<SaslConfig, ConfigError> {
        let Node::Map(mut m) = yaml::parse(text).expect("yaml") else {
            panic!("map")
        };
        let (k, l, n) = m.remove(0);
        SaslConfig::parse(&k, l, n)
    }

    #[test]
    fn users_inline_and_from_a_file() {
        let path = std::env::temp_dir().join(format!("shoal-proxy-sasl-{}", std::process::id()));
        std::fs::write(&path, "# users\nbob:pw:with:colons\n\n").unwrap();
        let c = section(&format!(
            "sasl:\n  users:\n    - alice:wonderland\n  password_file: {}\n",
            path.display()
        ))
        .unwrap();
        assert!(c.check(b"alice", b"wonderland"));
        assert!(c.check(b"bob", b"pw:with:colons"));
        assert!(!c.check(b"alice", b"wonderlan"));
        assert!(!c.check(b"carol", b"wonderland"));
        assert!(c.check_plain(b"\0alice\0wonderland"));
        assert!(c.check_plain(b"authz\0bob\0pw:with:colons"));
        assert!(!c.check_plain(b"alice"));
        assert!(
            !format!("{c:?}").contains("wonderland"),
            "passwords are not printed"
        );
        std::fs::write(&path, "nocolon\n").unwrap();
        let e = section(&format!("sasl:\n  password_file: {}\n", path.display())).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (2, "sasl.password_file"));
        let _ = std::fs::remove_file(&path);
        let e = section("sasl:\n  users:\n    - alice\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (3, "sasl.users"));
        let e = section("sasl:\n  user: x\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (2, "sasl.user"));
        let e = section("sasl:\n  password_file: /nonexistent/shoal\n").unwrap_err();
        assert!(e.message.contains("cannot read"), "{e}");
    }
}
