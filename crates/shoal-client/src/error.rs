//! Errors.

/// Why a request could not be answered by a server (transport-level failures).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// Connecting failed (refused, unreachable, timed out).
    #[error("Connection refused")]
    Connect,
    /// The server did not answer within the timeout.
    #[error("Connection timed out")]
    Timeout,
    /// The server closed the connection or a socket error occurred.
    #[error("Connection reset by peer")]
    Closed,
    /// The server sent bytes that are not a memcached reply to the request.
    #[error("Protocol error")]
    Garbage,
    /// Every server is ejected.
    #[error("No live servers")]
    NoLiveServers,
}

impl BackendError {
    /// The line a proxy sends its client for this error: `SERVER_ERROR <text>\r\n`.
    pub fn reply(&self) -> Vec<u8> {
        format!("SERVER_ERROR {self}\r\n").into_bytes()
    }
}

/// Errors of the [`crate::Client`] API.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// A key that memcached would refuse: empty, longer than 250 bytes, or containing a
    /// space or control character. Nothing was sent.
    #[error("invalid key")]
    BadKey,
    /// The server could not be reached or did not answer properly.
    #[error("server {server}: {source}")]
    Backend {
        /// The server's `host:port`.
        server: String,
        /// What went wrong.
        source: BackendError,
    },
    /// The server answered with an error line (`ERROR`, `CLIENT_ERROR ...`,
    /// `SERVER_ERROR ...`).
    #[error("server error: {0}")]
    Server(String),
    /// The server's reply was well-formed but not one this command can return.
    #[error("unexpected reply: {0}")]
    Unexpected(String),
    /// No live server to send the key to.
    #[error("no live servers")]
    NoLiveServers,
    /// `update` gave up after this many compare-and-swap conflicts.
    #[error("gave up after {0} conflicting updates")]
    Contended(u32),
    /// The client was configured wrongly (empty server list, bad weights...).
    #[error("configuration: {0}")]
    Config(String),
}
