//! Listening, accepting, expiry ticks and orderly shutdown, on a multi-threaded tokio
//! runtime. Blocking work (fsync) happens on the engine's own thread, never here.

use crate::config::Settings;
use crate::conn;
use crate::stats::Counters;
use shoal_queue::Engine;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;

/// How long shutdown waits for connections to finish their replies.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// State shared by every connection.
pub struct Shared {
    /// The validated settings.
    pub settings: Settings,
    /// The queues.
    pub engine: Engine,
    /// Server counters.
    pub counters: Counters,
    shutdown_tx: watch::Sender<bool>,
    stopping: AtomicBool,
}

impl Shared {
    /// A receiver that changes when shutdown begins.
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown_tx.subscribe()
    }

    /// Whether shutdown has begun.
    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    fn begin_shutdown(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        let _ = self.shutdown_tx.send(true);
    }
}

/// Binds the listening socket (so the caller can log the real port of `-p 0`).
pub fn bind(settings: &Settings) -> std::io::Result<std::net::TcpListener> {
    let addr = SocketAddr::new(settings.listen, settings.port);
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Serves until SIGINT/SIGTERM, then stops accepting, lets connections send the replies
/// in flight, and fsyncs every queue before returning.
pub fn run(
    settings: Settings,
    engine: Engine,
    listener: std::net::TcpListener,
) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(settings.threads)
        .thread_name("shoal-queued-worker")
        .enable_all()
        .build()?;
    let (shutdown_tx, _) = watch::channel(false);
    let shared = Arc::new(Shared {
        settings,
        engine,
        counters: Counters::default(),
        shutdown_tx,
        stopping: AtomicBool::new(false),
    });
    rt.block_on(serve(shared.clone(), listener))?;
    drop(rt);
    match Arc::try_unwrap(shared) {
        // Dropping the engine runs its final fsync.
        Ok(s) => drop(s.engine),
        Err(_) => tracing::warn!("connections still running at exit"),
    }
    tracing::info!("shut down");
    Ok(())
}

async fn serve(shared: Arc<Shared>, listener: std::net::TcpListener) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigint = signal(SignalKind::interrupt())?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let mut tasks = tokio::task::JoinSet::new();
    let ticker = {
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut iv = tokio::time::interval(Duration::from_secs(1));
            loop {
                iv.tick().await;
                if shared.stopping() {
                    break;
                }
                shared.engine.tick();
            }
        })
    };
    loop {
        let (stream, _) = tokio::select! {
            _ = sigterm.recv() => break,
            _ = sigint.recv() => break,
            r = listener.accept() => match r {
                Ok(s) => s,
                Err(e) => {
                    // Out of descriptors and the like: back off instead of spinning.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        while tasks.try_join_next().is_some() {}
        let c = &shared.counters;
        if c.curr_connections.load(Ordering::Relaxed) >= shared.settings.conn_limit as u64 {
            let mut s = stream;
            let _ = s.write_all(b"ERROR Too many open connections\r\n").await;
            continue;
        }
        c.curr_connections.fetch_add(1, Ordering::Relaxed);
        c.total_connections.fetch_add(1, Ordering::Relaxed);
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        tasks.spawn(async move {
            let (r, w) = stream.into_split();
            conn::serve(r, w, shared.clone()).await;
            shared
                .counters
                .curr_connections
                .fetch_sub(1, Ordering::Relaxed);
        });
    }
    shared.begin_shutdown();
    drop(listener);
    let drain = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(DRAIN_TIMEOUT, drain).await.is_err() {
        tracing::warn!("some connections did not finish in time");
    }
    ticker.abort();
    let _ = ticker.await;
    Ok(())
}
