//! Per-server counters, shared by the client and shoal-proxy (which reports them in
//! twemproxy's stats layout).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Per-server counters. All are monotonic except `server_connections` (current) and
/// `server_ejected_at` (last ejection, Unix seconds).
#[derive(Debug, Default)]
pub struct ServerStats {
    /// Connections the server closed.
    pub server_eof: AtomicU64,
    /// Connection errors (connect failures, socket errors, garbage replies).
    pub server_err: AtomicU64,
    /// Requests timed out.
    pub server_timedout: AtomicU64,
    /// Open connections.
    pub server_connections: AtomicU64,
    /// Unix time of the last ejection (0 if never).
    pub server_ejected_at: AtomicU64,
    /// Requests forwarded.
    pub requests: AtomicU64,
    /// Bytes forwarded.
    pub request_bytes: AtomicU64,
    /// Replies received.
    pub responses: AtomicU64,
    /// Reply bytes received.
    pub response_bytes: AtomicU64,
}

/// Adds one to a counter.
#[inline]
pub fn incr(c: &AtomicU64) {
    c.fetch_add(1, Relaxed);
}

/// Subtracts one from a gauge (saturating at 0).
#[inline]
pub fn decr(c: &AtomicU64) {
    let _ = c.fetch_update(Relaxed, Relaxed, |v| Some(v.saturating_sub(1)));
}
