//! Listening, accepting, expiry ticks and orderly shutdown. Blocking work (fsync) happens
//! on the engine's own thread, never on an event loop.

use crate::config::Settings;
use crate::conn;
use crate::stats::Counters;
use shoal_queue::Engine;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, watch};

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
///
/// shoald's thread model: one acceptor hands each connection to one of `-t` worker
/// threads, each running its own single-threaded event loop, so a connection never
/// migrates between cores and no request pays for work stealing.
pub fn run(
    settings: Settings,
    engine: Engine,
    listener: std::net::TcpListener,
) -> anyhow::Result<()> {
    let (shutdown_tx, _) = watch::channel(false);
    let shared = Arc::new(Shared {
        settings,
        engine,
        counters: Counters::default(),
        shutdown_tx,
        stopping: AtomicBool::new(false),
    });
    let mut senders = Vec::new();
    let mut workers = Vec::new();
    for i in 0..shared.settings.threads {
        let (tx, rx) = mpsc::unbounded_channel();
        senders.push(tx);
        let shared = shared.clone();
        workers.push(
            std::thread::Builder::new()
                .name(format!("shoal-queued-{i}"))
                .spawn(move || worker_main(shared, rx))?,
        );
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let served = rt.block_on(accept_loop(shared.clone(), listener, senders));
    // Workers stop on the shutdown signal even if accepting failed.
    shared.begin_shutdown();
    for w in workers {
        let _ = w.join();
    }
    drop(rt);
    served?;
    match Arc::try_unwrap(shared) {
        // Dropping the engine runs its final fsync.
        Ok(s) => drop(s.engine),
        Err(_) => tracing::warn!("connections still running at exit"),
    }
    tracing::info!("shut down");
    Ok(())
}

async fn accept_loop(
    shared: Arc<Shared>,
    listener: std::net::TcpListener,
    senders: Vec<mpsc::UnboundedSender<std::net::TcpStream>>,
) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigint = signal(SignalKind::interrupt())?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut next = 0usize;
    loop {
        let stream = tokio::select! {
            _ = sigterm.recv() => break,
            _ = sigint.recv() => break,
            _ = tick.tick() => {
                shared.engine.tick();
                continue;
            }
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    // Out of descriptors and the like: back off instead of spinning.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        let c = &shared.counters;
        if c.curr_connections.load(Ordering::Relaxed) >= shared.settings.conn_limit as u64 {
            let mut s = stream;
            let _ = s.write_all(b"ERROR Too many open connections\r\n").await;
            continue;
        }
        let Ok(std_stream) = stream.into_std() else {
            continue;
        };
        c.curr_connections.fetch_add(1, Ordering::Relaxed);
        c.total_connections.fetch_add(1, Ordering::Relaxed);
        if senders[next % senders.len()].send(std_stream).is_err() {
            c.curr_connections.fetch_sub(1, Ordering::Relaxed);
        }
        next = next.wrapping_add(1);
    }
    shared.begin_shutdown();
    Ok(())
}

fn worker_main(shared: Arc<Shared>, mut rx: mpsc::UnboundedReceiver<std::net::TcpStream>) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("worker runtime: {e}");
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let mut tasks = tokio::task::JoinSet::new();
        let mut shutdown = shared.shutdown_signal();
        loop {
            let stream = tokio::select! {
                s = rx.recv() => match s { Some(s) => s, None => break },
                _ = shutdown.changed() => break,
            };
            let shared = shared.clone();
            tasks.spawn_local(async move {
                let _ = stream.set_nodelay(true);
                if let Ok(s) = tokio::net::TcpStream::from_std(stream) {
                    let (r, w) = s.into_split();
                    conn::serve(r, w, shared.clone()).await;
                }
                shared
                    .counters
                    .curr_connections
                    .fetch_sub(1, Ordering::Relaxed);
            });
            while tasks.try_join_next().is_some() {}
        }
        // Connections see the signal, finish their replies and end; bounded so a
        // stuck peer cannot hold the process.
        let drain = async { while tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(DRAIN_TIMEOUT, drain).await.is_err() {
            tracing::warn!("some connections did not finish in time");
        }
    });
}
