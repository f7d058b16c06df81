//! Counters in twemproxy's stats layout, and the JSON document the stats port serves.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};

pub use shoal_client::stats::{decr, incr, ServerStats};

/// Per-pool counters (twemproxy's pool stats).
#[derive(Debug, Default)]
pub struct PoolStats {
    /// Clients that closed their connection.
    pub client_eof: AtomicU64,
    /// Client connections closed on errors.
    pub client_err: AtomicU64,
    /// Open client connections.
    pub client_connections: AtomicU64,
    /// Times a server was ejected.
    pub server_ejects: AtomicU64,
    /// Requests answered with an error because no backend could serve them.
    pub forward_error: AtomicU64,
    /// Multi-get fragments sent.
    pub fragments: AtomicU64,
    /// Time from a client request being forwarded (to the pool's servers, or through its
    /// route) to its reply being ready to write to the client, in nanoseconds; every
    /// forwarded request, answered or failed. Recorded only while [`PoolStats::timed`].
    pub latency: shoal_net::metrics::Histogram,
    /// Whether requests are timed into `latency`: only while metrics are served, since
    /// timing costs two clock reads per request.
    pub timed: AtomicBool,
}

impl PoolStats {
    /// Starts (or stops) timing requests into [`PoolStats::latency`].
    pub fn set_timed(&self, on: bool) {
        self.timed.store(on, Relaxed);
    }
}

/// One pool as the stats port and the metrics page report it: its counters, and its
/// servers' (none for a route pool), whichever workers' connections counted them.
pub struct PoolView {
    /// The pool's name.
    pub name: String,
    /// Pool counters.
    pub stats: std::sync::Arc<PoolStats>,
    /// Each server's display name and counters, in pool order.
    pub servers: Vec<(String, std::sync::Arc<ServerStats>)>,
}

impl PoolView {
    /// The pool's section of the stats document.
    pub fn stats_json(&self) -> Value {
        pool_json(
            &self.stats,
            self.servers.iter().map(|(n, s)| (n.clone(), &**s)),
        )
    }
}

/// When the process started serving (seconds since the Unix epoch): fixed by the first
/// call, which [`crate::start`] makes.
pub fn process_started() -> u64 {
    static STARTED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *STARTED.get_or_init(unix_now)
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn server_json(s: &ServerStats) -> Value {
    json!({
        "server_eof": s.server_eof.load(Relaxed),
        "server_err": s.server_err.load(Relaxed),
        "server_timedout": s.server_timedout.load(Relaxed),
        "server_connections": s.server_connections.load(Relaxed),
        "server_ejected_at": s.server_ejected_at.load(Relaxed),
        "requests": s.requests.load(Relaxed),
        "request_bytes": s.request_bytes.load(Relaxed),
        "responses": s.responses.load(Relaxed),
        "response_bytes": s.response_bytes.load(Relaxed),
    })
}

/// One pool's section of the stats document: pool counters plus one object per server,
/// keyed by server name (its configured name, else `host:port`).
pub fn pool_json<'a>(
    p: &PoolStats,
    servers: impl Iterator<Item = (String, &'a ServerStats)>,
) -> Value {
    let mut m = Map::new();
    m.insert("client_eof".into(), p.client_eof.load(Relaxed).into());
    m.insert("client_err".into(), p.client_err.load(Relaxed).into());
    m.insert(
        "client_connections".into(),
        p.client_connections.load(Relaxed).into(),
    );
    m.insert("server_ejects".into(), p.server_ejects.load(Relaxed).into());
    m.insert("forward_error".into(), p.forward_error.load(Relaxed).into());
    m.insert("fragments".into(), p.fragments.load(Relaxed).into());
    for (name, s) in servers {
        m.insert(name, server_json(s));
    }
    Value::Object(m)
}

/// The whole document: service header (with shoal-proxy's `reloads` and
/// `reload_failures` after twemproxy's fields), then one entry per pool.
pub fn document(
    started: u64,
    total_connections: u64,
    curr_connections: u64,
    reloads: u64,
    reload_failures: u64,
    pools: Vec<(String, Value)>,
) -> Value {
    let now = unix_now();
    let mut m = Map::new();
    m.insert("service".into(), "shoal-proxy".into());
    m.insert("source".into(), "localhost".into());
    m.insert("version".into(), env!("CARGO_PKG_VERSION").into());
    m.insert("uptime".into(), now.saturating_sub(started).into());
    m.insert("timestamp".into(), now.into());
    m.insert("total_connections".into(), total_connections.into());
    m.insert("curr_connections".into(), curr_connections.into());
    m.insert("reloads".into(), reloads.into());
    m.insert("reload_failures".into(), reload_failures.into());
    for (name, v) in pools {
        m.insert(name, v);
    }
    Value::Object(m)
}
