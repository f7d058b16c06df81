//! Per-server counters, shared by the client and shoal-proxy (which reports them in
//! twemproxy's stats layout).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

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
    /// Times the server was ejected (taken out of the ring after too many failures).
    pub ejections: AtomicU64,
    /// Requests forwarded.
    pub requests: AtomicU64,
    /// Bytes forwarded.
    pub request_bytes: AtomicU64,
    /// Replies received.
    pub responses: AtomicU64,
    /// Reply bytes received.
    pub response_bytes: AtomicU64,
    /// Requests sent (or queued to be) that await a reply now.
    pub in_flight: AtomicU64,
    /// Time from a request being handed to a connection to its reply being read, in
    /// nanoseconds (replies only: failed and timed-out requests are not in it). Recorded
    /// only while [`ServerStats::timed`] is on.
    pub latency: shoal_net::metrics::Histogram,
    /// Whether replies are timed into `latency`. Off by default: timing costs two clock
    /// reads per request, which nothing reads unless metrics are served (shoal-proxy turns
    /// it on with `--metrics-listen`). Requests with a timeout read the clock anyway.
    pub timed: AtomicBool,
}

impl ServerStats {
    /// Starts (or stops) timing replies into [`ServerStats::latency`].
    pub fn set_timed(&self, on: bool) {
        self.timed.store(on, Relaxed);
    }
}

/// One request awaiting its reply, counted in [`ServerStats::in_flight`] for as long as
/// it lives (answered, failed or dropped with its connection alike).
#[derive(Debug)]
pub struct InFlight(std::sync::Arc<ServerStats>);

impl InFlight {
    /// Counts a request in flight on `stats`' server.
    pub fn new(stats: &std::sync::Arc<ServerStats>) -> InFlight {
        incr(&stats.in_flight);
        InFlight(stats.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        decr(&self.0.in_flight);
    }
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
