//! Listening, accepting, expiry ticks and orderly shutdown. Blocking work (fsync) happens
//! on the engine's own thread, never on an event loop.

use crate::config::Settings;
use crate::conn;
use crate::stats::Counters;
use shoal_net::{Acceptor, Event, Incoming, Listener, WorkerPool, WorkerService};
use shoal_queue::Engine;
use std::net::SocketAddr;
use std::rc::Rc;
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

    /// Begins an orderly shutdown: stop accepting, let connections finish their replies.
    pub(crate) fn begin_shutdown(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        let _ = self.shutdown_tx.send(true);
    }
}

/// Binds the listening socket (so the caller can log the real port of `-p 0`).
pub fn bind(settings: &Settings) -> std::io::Result<Listener> {
    Listener::bind_tcp(SocketAddr::new(settings.listen, settings.port), 1024)
}

/// Serves until SIGINT/SIGTERM, then stops accepting, lets connections send the replies
/// in flight, and fsyncs every queue before returning.
///
/// shoald's thread model ([`shoal_net`]): one acceptor hands each connection to one of
/// `-t` worker threads, each running its own single-threaded event loop, so a connection
/// never migrates between cores and no request pays for work stealing.
pub fn run(settings: Settings, engine: Engine, listener: Listener) -> anyhow::Result<()> {
    let (shutdown_tx, _) = watch::channel(false);
    let shared = Arc::new(Shared {
        settings,
        engine,
        counters: Counters::default(),
        shutdown_tx,
        stopping: AtomicBool::new(false),
    });
    let make = {
        let shared = shared.clone();
        move |_| QueueWorker {
            shared: shared.clone(),
        }
    };
    let mut pool = WorkerPool::start(
        shared.settings.threads,
        "shoal-queued",
        &shared.shutdown_signal(),
        DRAIN_TIMEOUT,
        make,
    )?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let served = rt.block_on(accept_loop(&shared, listener, &mut pool));
    // Workers stop on the shutdown signal even if accepting failed.
    shared.begin_shutdown();
    pool.join();
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

/// Accepts until SIGINT/SIGTERM, and runs the engine's once-a-second expiry tick.
async fn accept_loop(
    shared: &Shared,
    listener: Listener,
    pool: &mut WorkerPool,
) -> anyhow::Result<()> {
    let mut acceptor = Acceptor::new(listener, shared.shutdown_signal())?;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        let incoming = tokio::select! {
            event = acceptor.next() => match event {
                Event::Conn(c) => c,
                Event::Signal | Event::Shutdown => return Ok(()),
            },
            _ = tick.tick() => {
                shared.engine.tick();
                continue;
            }
        };
        let c = &shared.counters;
        if c.curr_connections.load(Ordering::Relaxed) >= shared.settings.conn_limit as u64 {
            if let Incoming::Tcp(s, _) = incoming {
                if let Ok(mut s) = tokio::net::TcpStream::from_std(s) {
                    let _ = s.write_all(b"ERROR Too many open connections\r\n").await;
                }
            }
            continue;
        }
        c.curr_connections.fetch_add(1, Ordering::Relaxed);
        c.total_connections.fetch_add(1, Ordering::Relaxed);
        if pool.dispatch(incoming).is_err() {
            c.curr_connections.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// A worker thread's service: every connection shares the process-wide state.
struct QueueWorker {
    shared: Arc<Shared>,
}

impl WorkerService for QueueWorker {
    async fn serve(self: Rc<Self>, incoming: Incoming) {
        let shared = self.shared.clone();
        // shoal-queued listens on TCP only.
        if let Incoming::Tcp(stream, _) = incoming {
            let _ = stream.set_nodelay(true);
            if let Ok(s) = tokio::net::TcpStream::from_std(stream) {
                let (r, w) = s.into_split();
                conn::serve(r, w, shared.clone()).await;
            }
        }
        shared
            .counters
            .curr_connections
            .fetch_sub(1, Ordering::Relaxed);
    }
}
