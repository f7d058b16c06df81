//! Listeners: one per pool (TCP or unix socket), plus the stats port.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpSocket, UnixListener};

use crate::config::{Listen, ProxyConfig};
use crate::pool::Pool;
use crate::session::serve;
use crate::stats::{decr, document, incr, unix_now};

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A listen address could not be bound.
    #[error("pool '{pool}': cannot listen on {addr}: {source}")]
    Listen {
        /// The pool.
        pool: String,
        /// The address.
        addr: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A pool's server list could not be turned into a ring.
    #[error("pool '{pool}': {source}")]
    Ring {
        /// The pool.
        pool: String,
        /// Why.
        source: shoal_ring::RingError,
    },
}

/// Runtime options outside the configuration file.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where to serve the stats JSON (`None`: no stats port).
    pub stats_addr: Option<SocketAddr>,
    /// Log connection failures and ejections to stderr.
    pub verbose: bool,
}

/// A started proxy: the pools and the addresses they actually listen on.
pub struct Running {
    /// The pools, in configuration order.
    pub pools: Vec<Arc<Pool>>,
    /// For each pool, the bound address (TCP) or socket path.
    pub addrs: Vec<String>,
    /// The stats port's bound address, if any.
    pub stats_addr: Option<SocketAddr>,
}

struct Counters {
    total: AtomicU64,
    current: AtomicU64,
    started: u64,
}

/// Binds every listener and starts serving; returns once all are bound. Every
/// listening address is printed to stderr as `pool NAME listening on ADDR` (and the stats
/// port as `stats listening on ADDR`), so callers can use port 0. Must be called inside
/// a multi-threaded or current-thread tokio runtime that keeps running afterwards.
pub async fn start(config: ProxyConfig, opts: Options) -> Result<Running, StartError> {
    let counters = Arc::new(Counters {
        total: AtomicU64::new(0),
        current: AtomicU64::new(0),
        started: unix_now(),
    });
    let mut pools = Vec::new();
    let mut addrs = Vec::new();
    for pc in config.pools {
        let name = pc.name.clone();
        let listen = pc.listen.clone();
        let backlog = pc.backlog;
        let limit = pc.client_connections;
        let pool = Pool::start(pc, opts.verbose).map_err(|source| StartError::Ring {
            pool: name.clone(),
            source,
        })?;
        match listen {
            Listen::Tcp(addr) => {
                let l = bind_tcp(&addr, backlog).map_err(|source| StartError::Listen {
                    pool: name.clone(),
                    addr: addr.clone(),
                    source,
                })?;
                let bound = l.local_addr().map(|a| a.to_string()).unwrap_or(addr);
                eprintln!("pool {name} listening on {bound}");
                addrs.push(bound);
                tokio::spawn(accept_tcp(l, pool.clone(), counters.clone(), limit));
            }
            Listen::Unix { path, mode } => {
                let _ = std::fs::remove_file(&path);
                let l = UnixListener::bind(&path).map_err(|source| StartError::Listen {
                    pool: name.clone(),
                    addr: path.display().to_string(),
                    source,
                })?;
                if let Some(m) = mode {
                    use std::os::unix::fs::PermissionsExt;
                    let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(m));
                }
                eprintln!("pool {name} listening on {}", path.display());
                addrs.push(path.display().to_string());
                let (pool2, c2) = (pool.clone(), counters.clone());
                tokio::spawn(async move {
                    loop {
                        let Ok((s, _)) = l.accept().await else {
                            continue;
                        };
                        if over_limit(&pool2, limit) {
                            continue;
                        }
                        let (p, c) = (pool2.clone(), c2.clone());
                        tokio::spawn(async move {
                            incr(&c.total);
                            incr(&c.current);
                            serve(s, p).await;
                            decr(&c.current);
                        });
                    }
                });
            }
        }
        pools.push(pool);
    }
    let mut stats_addr = None;
    if let Some(addr) = opts.stats_addr {
        let l = TcpListener::bind(addr)
            .await
            .map_err(|source| StartError::Listen {
                pool: "stats".into(),
                addr: addr.to_string(),
                source,
            })?;
        let bound = l.local_addr().ok();
        if let Some(b) = bound {
            eprintln!("stats listening on {b}");
        }
        stats_addr = bound;
        tokio::spawn(serve_stats(l, pools.clone(), counters.clone()));
    }
    Ok(Running {
        pools,
        addrs,
        stats_addr,
    })
}

fn bind_tcp(addr: &str, backlog: u32) -> std::io::Result<TcpListener> {
    use std::net::ToSocketAddrs;
    let sa = addr
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other("address resolves to nothing"))?;
    let sock = if sa.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    sock.set_reuseaddr(true)?;
    sock.bind(sa)?;
    sock.listen(backlog.max(1))
}

fn over_limit(pool: &Pool, limit: usize) -> bool {
    limit > 0 && pool.stats.client_connections.load(Relaxed) >= limit as u64
}

async fn accept_tcp(l: TcpListener, pool: Arc<Pool>, c: Arc<Counters>, limit: usize) {
    loop {
        let s = match l.accept().await {
            Ok((s, _)) => s,
            Err(_) => {
                // EMFILE and friends: back off briefly instead of spinning.
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        if over_limit(&pool, limit) {
            continue;
        }
        let _ = s.set_nodelay(true);
        let (p, c) = (pool.clone(), c.clone());
        tokio::spawn(async move {
            incr(&c.total);
            incr(&c.current);
            serve(s, p).await;
            decr(&c.current);
        });
    }
}

async fn serve_stats(l: TcpListener, pools: Vec<Arc<Pool>>, c: Arc<Counters>) {
    loop {
        let Ok((mut s, _)) = l.accept().await else {
            continue;
        };
        let doc = document(
            c.started,
            c.total.load(Relaxed),
            c.current.load(Relaxed),
            pools
                .iter()
                .map(|p| (p.config.name.clone(), p.stats_json()))
                .collect(),
        );
        let body = doc.to_string();
        tokio::spawn(async move {
            let _ = s.write_all(body.as_bytes()).await;
            let _ = s.shutdown().await;
        });
    }
}
