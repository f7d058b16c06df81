//! shoal-proxy's `/metrics` page (`--metrics-listen`): twemproxy's stats (the JSON the
//! stats port serves), under their twemproxy names as `shoal_proxy_<stat>` (counters with
//! `_total`), labelled by `pool` and, for server stats, `server`; plus what twemproxy does
//! not report: requests in flight and ejections per server, and latency histograms per
//! server and per pool. Per-pool totals of server figures are a PromQL `sum by (pool)`
//! away.

use std::sync::atomic::Ordering::Relaxed;

use shoal_net::metrics::{Kind, Page};

use crate::stats::{unix_now, PoolView, ServerStats};

/// Process-wide figures the page starts with.
pub struct Global {
    /// Unix seconds at start.
    pub started: u64,
    /// Client connections accepted.
    pub total_connections: u64,
    /// Client connections open.
    pub current_connections: u64,
    /// Bytes client read buffers hold beyond their free allowance.
    pub read_buffer_bytes: u64,
    /// Configuration reloads that took effect.
    pub reloads: u64,
    /// Configuration reloads refused (the old configuration kept serving).
    pub reload_failures: u64,
}

type ServerStat = (&'static str, Kind, &'static str, fn(&ServerStats) -> u64);

/// twemproxy's server stats, in its order.
const SERVER: [ServerStat; 11] = [
    ("shoal_proxy_server_eof_total", Kind::Counter, "Connections the server closed (twemproxy server_eof).", |s| s.server_eof.load(Relaxed)),
    ("shoal_proxy_server_err_total", Kind::Counter, "Connection errors: connect failures, socket errors, garbage replies (twemproxy server_err).", |s| s.server_err.load(Relaxed)),
    ("shoal_proxy_server_timedout_total", Kind::Counter, "Requests that timed out (twemproxy server_timedout).", |s| s.server_timedout.load(Relaxed)),
    ("shoal_proxy_server_connections", Kind::Gauge, "Open connections to the server (twemproxy server_connections).", |s| s.server_connections.load(Relaxed)),
    ("shoal_proxy_server_ejected_at_seconds", Kind::Gauge, "Unix time of the server's last ejection, 0 if never (twemproxy server_ejected_at).", |s| s.server_ejected_at.load(Relaxed)),
    ("shoal_proxy_requests_total", Kind::Counter, "Requests forwarded to the server (twemproxy requests).", |s| s.requests.load(Relaxed)),
    ("shoal_proxy_request_bytes_total", Kind::Counter, "Request bytes forwarded to the server (twemproxy request_bytes).", |s| s.request_bytes.load(Relaxed)),
    ("shoal_proxy_responses_total", Kind::Counter, "Replies received from the server (twemproxy responses).", |s| s.responses.load(Relaxed)),
    ("shoal_proxy_response_bytes_total", Kind::Counter, "Reply bytes received from the server (twemproxy response_bytes).", |s| s.response_bytes.load(Relaxed)),
    ("shoal_proxy_in_flight_requests", Kind::Gauge, "Requests sent to the server (or queued to be) awaiting a reply.", |s| s.in_flight.load(Relaxed)),
    ("shoal_proxy_server_ejections_total", Kind::Counter, "Times the server was ejected (twemproxy counts these per pool only, as server_ejects).", |s| s.ejections.load(Relaxed)),
];

/// Renders the page.
pub fn render(g: &Global, pools: &[PoolView]) -> String {
    let mut p = Page::new();
    p.gauge(
        "shoal_proxy_uptime_seconds",
        "Seconds since the proxy started (twemproxy uptime).",
        &[],
        unix_now().saturating_sub(g.started),
    );
    p.counter(
        "shoal_proxy_connections_total",
        "Client connections accepted (twemproxy total_connections).",
        &[],
        g.total_connections,
    );
    p.gauge(
        "shoal_proxy_current_connections",
        "Client connections open (twemproxy curr_connections).",
        &[],
        g.current_connections,
    );
    p.gauge(
        "shoal_proxy_read_buffer_bytes",
        "Bytes client read buffers hold beyond their free allowance (--read-buf-mem-limit).",
        &[],
        g.read_buffer_bytes,
    );
    p.counter(
        "shoal_proxy_reloads_total",
        "Configuration reloads that took effect (SIGHUP or the stats port's reload).",
        &[],
        g.reloads,
    );
    p.counter(
        "shoal_proxy_reload_failures_total",
        "Configuration reloads refused; the previous configuration kept serving.",
        &[],
        g.reload_failures,
    );
    for pool in pools {
        let name = pool.name.as_str();
        let l = [("pool", name)];
        let s = &pool.stats;
        p.counter(
            "shoal_proxy_client_eof_total",
            "Clients that closed their connection (twemproxy client_eof).",
            &l,
            s.client_eof.load(Relaxed),
        );
        p.counter(
            "shoal_proxy_client_err_total",
            "Client connections closed on errors (twemproxy client_err).",
            &l,
            s.client_err.load(Relaxed),
        );
        p.gauge(
            "shoal_proxy_client_connections",
            "Open client connections of the pool (twemproxy client_connections).",
            &l,
            s.client_connections.load(Relaxed),
        );
        p.counter(
            "shoal_proxy_server_ejects_total",
            "Times a server of the pool was ejected (twemproxy server_ejects).",
            &l,
            s.server_ejects.load(Relaxed),
        );
        p.counter("shoal_proxy_forward_error_total", "Requests answered with an error because no server could serve them (twemproxy forward_error).", &l, s.forward_error.load(Relaxed));
        p.counter(
            "shoal_proxy_fragments_total",
            "Multi-get fragments sent (twemproxy fragments).",
            &l,
            s.fragments.load(Relaxed),
        );
    }
    for pool in pools {
        let name = pool.name.as_str();
        for (server, st) in &pool.servers {
            let l = [("pool", name), ("server", server.as_str())];
            for (metric, kind, help, get) in SERVER {
                p.sample(metric, help, kind, &l, get(st) as f64);
            }
        }
    }
    const POOL_LATENCY_HELP: &str = "Time from a client request being forwarded (to the \
        pool's servers or through its route) to its reply being ready to write to the \
        client, failed requests included.";
    p.declare(
        "shoal_proxy_request_duration_seconds",
        POOL_LATENCY_HELP,
        Kind::Histogram,
    );
    for pool in pools {
        let h = pool.stats.latency.snapshot();
        p.histogram(
            "shoal_proxy_request_duration_seconds",
            POOL_LATENCY_HELP,
            &[("pool", pool.name.as_str())],
            &h,
            1e9,
        );
    }
    const LATENCY_HELP: &str = "Time from a request being handed to a server connection \
        to its reply being read (replies only).";
    p.declare(
        "shoal_proxy_server_request_duration_seconds",
        LATENCY_HELP,
        Kind::Histogram,
    );
    for pool in pools {
        let name = pool.name.as_str();
        for (server, st) in &pool.servers {
            let l = [("pool", name), ("server", server.as_str())];
            let h = st.latency.snapshot();
            p.histogram(
                "shoal_proxy_server_request_duration_seconds",
                LATENCY_HELP,
                &l,
                &h,
                1e9,
            );
        }
    }
    p.render()
}
