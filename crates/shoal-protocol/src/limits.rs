//! Limits the parser enforces on untrusted input.

/// Longest key memcached accepts, in bytes.
pub const MAX_KEY_LEN: usize = 250;

/// A request line with no newline within this many bytes closes the connection, unless it
/// is a `get`/`gets` (memcached's rule: only multi-gets may have long lines).
pub const MAX_LINE_LEN: usize = 2048;

/// Hard cap on a `get`/`gets`/`gat`/`gats` line, so a client cannot make the server buffer
/// without bound while it waits for a newline.
pub const MAX_GET_LINE_LEN: usize = 1 << 20;

/// Limits that depend on the server's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest value (data block, without its `\r\n`) a storage command may carry; larger
    /// ones are answered `SERVER_ERROR object too large for cache` and their data swallowed.
    pub max_value_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_value_len: 1024 * 1024,
        }
    }
}
