//! Listening, accepting, expiry ticks and orderly shutdown. Blocking work (fsync) happens
//! on the engine's own thread, never on an event loop.

use crate::config::Settings;
use crate::conn;
use crate::error::ServeError;
use crate::shared::Shared;
use shoal_net::event_loop::EpollStream;
use shoal_net::{Acceptor, Event, Executor, Incoming, Listener, WorkerPool, WorkerService};
use shoal_queue::Engine;
use std::future::Future;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// How long shutdown waits for connections to finish their replies.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Binds the listening socket (so the caller can log the real port of `-p 0`): the unix
/// socket of `-s`, which replaces TCP as in MemcacheQ and memcached, or TCP.
pub fn bind(settings: &Settings) -> std::io::Result<Listener> {
    match &settings.unix_socket {
        Some(path) => Listener::bind_unix(path, settings.unix_mask),
        None => Listener::bind_tcp(SocketAddr::new(settings.listen, settings.port), 1024),
    }
}

/// Serves until SIGINT/SIGTERM, then stops accepting, lets connections send the replies
/// in flight, and fsyncs every queue before returning.
///
/// shoald's thread model ([`shoal_net`]): one acceptor hands each connection to one of
/// `-t` worker threads, each running its own single-threaded event loop, so a connection
/// never migrates between cores and no request pays for work stealing.
pub fn run(settings: Settings, engine: Engine, listener: Listener) -> Result<(), ServeError> {
    shoal_net::tune_allocator();
    let shared = Shared::new(settings, engine);
    let make = {
        let shared = shared.clone();
        move |_| QueueWorker {
            shared: shared.clone(),
        }
    };
    let mut pool = WorkerPool::start(
        Executor::EventLoop,
        shared.settings.threads,
        "shoal-queued",
        &shared.shutdown_signal(),
        DRAIN_TIMEOUT,
        make,
    )
    .map_err(ServeError::io("starting the worker threads"))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ServeError::io("starting the acceptor's runtime"))?;
    // On the acceptor's runtime, off the workers; dropped with `rt` below, before the
    // engine is taken back out of `shared`.
    if let Some(addr) = shared.settings.metrics_listen {
        let metrics = shoal_net::metrics::MetricsServer::bind(addr)
            .map_err(|source| ServeError::Metrics { addr, source })?;
        let bound = metrics
            .local_addr()
            .map_err(|source| ServeError::Metrics { addr, source })?;
        tracing::info!("metrics on http://{bound}/metrics");
        let sh = shared.clone();
        rt.spawn(metrics.serve(Arc::new(move || crate::metrics::render(&sh))));
    }
    let sweeper = rt.spawn(sweep_loop(shared.clone()));
    {
        let _in_rt = rt.enter();
        let hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .map_err(ServeError::io("handling SIGHUP"))?;
        rt.spawn(reload_on_sighup(shared.clone(), hup));
    }
    let served = rt.block_on(accept_loop(&shared, listener, &mut pool));
    // Workers stop on the shutdown signal even if accepting failed.
    shared.begin_shutdown();
    // A sweep in progress finishes its moves (so a clean stop never duplicates one).
    let _ = rt.block_on(sweeper);
    pool.join();
    drop(rt);
    served.map_err(ServeError::io("accepting connections"))?;
    if let Some(path) = &shared.settings.unix_socket {
        let _ = std::fs::remove_file(path);
    }
    match Arc::try_unwrap(shared) {
        // Dropping the engine runs its final fsync.
        Ok(s) => drop(s.engine),
        Err(_) => tracing::warn!("connections still running at exit"),
    }
    tracing::info!("shut down");
    Ok(())
}

/// Once a second: drops expired messages at the queues' heads, and moves those of queues
/// with `expire_to`; stops between sweeps at shutdown.
async fn sweep_loop(shared: Arc<Shared>) {
    let mut shutdown = shared.shutdown_signal();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    // A sweep slowed by fsyncs is not followed by a burst of catch-up sweeps.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        if shared.stopping() {
            return;
        }
        shared.engine.tick();
        shared.engine.move_expired().await;
    }
}

/// SIGHUP re-reads the queue config, as the `reload` command does.
async fn reload_on_sighup(shared: Arc<Shared>, mut hup: tokio::signal::unix::Signal) {
    while hup.recv().await.is_some() {
        if let Err(e) = shared.reload() {
            tracing::error!("SIGHUP: queue config not reloaded: {e}");
        }
    }
}

/// Accepts until SIGINT/SIGTERM.
async fn accept_loop(
    shared: &Arc<Shared>,
    listener: Listener,
    pool: &mut WorkerPool,
) -> std::io::Result<()> {
    let mut acceptor = Acceptor::new(listener, shared.shutdown_signal())?;
    loop {
        let incoming = match acceptor.next().await {
            Event::Conn(c) => c,
            Event::Signal | Event::Shutdown => return Ok(()),
        };
        if !take_slot(shared) {
            // memcached's answer; the socket is closed when it drops. A short write to a
            // fresh socket never waits, so this cannot stall accepting.
            const TOO_MANY: &[u8] = b"ERROR Too many open connections\r\n";
            match incoming {
                Incoming::Tcp(s, _) => {
                    if let Ok(mut s) = tokio::net::TcpStream::from_std(s) {
                        let _ = s.write_all(TOO_MANY).await;
                    }
                }
                Incoming::Unix(s) => {
                    if let Ok(mut s) = tokio::net::UnixStream::from_std(s) {
                        let _ = s.write_all(TOO_MANY).await;
                    }
                }
            }
            continue;
        }
        if pool.dispatch(incoming).is_err() {
            // The worker is gone (shutting down): nobody will adopt the slot.
            drop(ConnSlot::adopt(shared));
        }
    }
}

/// Counts a new connection in `curr_connections` if that stays within `-c`. Only the
/// acceptor takes slots and it is one task, so the check and the increment cannot race
/// with another taker (releases only make room).
fn take_slot(shared: &Shared) -> bool {
    let c = &shared.counters;
    if c.curr_connections.load(Ordering::Relaxed) >= shared.settings.conn_limit as u64 {
        return false;
    }
    c.curr_connections.fetch_add(1, Ordering::Relaxed);
    c.total_connections.fetch_add(1, Ordering::Relaxed);
    true
}

/// One connection's slot under `-c`, taken by the acceptor with [`take_slot`] and given
/// back when this drops. Being a drop guard, it returns the slot however the connection
/// ends: normally, on error, when its task is aborted at shutdown, or when it panics.
struct ConnSlot {
    shared: Arc<Shared>,
}

impl ConnSlot {
    /// Takes charge of a slot the acceptor counted.
    fn adopt(shared: &Arc<Shared>) -> ConnSlot {
        ConnSlot {
            shared: shared.clone(),
        }
    }
}

impl Drop for ConnSlot {
    fn drop(&mut self) {
        self.shared
            .counters
            .curr_connections
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// A worker thread's service: every connection shares the process-wide state.
struct QueueWorker {
    shared: Arc<Shared>,
}

impl WorkerService for QueueWorker {
    // Not an `async fn`: the slot is adopted when the task is created, not when it is
    // first polled, so a task dropped before it ever runs still gives its slot back.
    fn serve(self: Rc<Self>, incoming: Incoming) -> impl Future<Output = ()> + 'static {
        let slot = ConnSlot::adopt(&self.shared);
        async move {
            let shared = slot.shared.clone();
            match incoming {
                Incoming::Tcp(stream, _) => {
                    let _ = stream.set_nodelay(true);
                    if let Ok(mut s) = EpollStream::new(OwnedFd::from(stream)) {
                        let fd = s.as_raw_fd();
                        conn::serve(&mut s, shared, Some(fd)).await;
                    }
                }
                Incoming::Unix(stream) => {
                    if let Ok(mut s) = EpollStream::new(OwnedFd::from(stream)) {
                        let fd = s.as_raw_fd();
                        conn::serve(&mut s, shared, Some(fd)).await;
                    }
                }
            }
            drop(slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn shared(dir: &std::path::Path, conn_limit: &str) -> Arc<Shared> {
        let args = crate::Args::try_parse_from(
            ["shoal-queued", "-c", conn_limit, "-d"]
                .map(std::ffi::OsStr::new)
                .into_iter()
                .chain([dir.as_os_str()]),
        )
        .expect("arguments parse");
        let settings = args.settings().expect("valid settings");
        let engine = Engine::open(settings.engine.clone()).expect("engine opens");
        Shared::new(settings, engine)
    }

    fn curr(shared: &Shared) -> u64 {
        shared.counters.curr_connections.load(Ordering::Relaxed)
    }

    #[test]
    fn slots_come_back_from_panicking_and_unstarted_tasks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let shared = shared(dir.path(), "2");
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async {
            assert!(take_slot(&shared));
            assert!(take_slot(&shared));
            assert!(!take_slot(&shared), "-c 2 allows two connections");
            // A connection task that panics mid-service.
            let slot = ConnSlot::adopt(&shared);
            let panicked = tokio::task::spawn_local(async move {
                let _slot = slot;
                tokio::task::yield_now().await;
                panic!("a bug in a connection task");
            })
            .await;
            assert!(panicked.is_err_and(|e| e.is_panic()));
            assert_eq!(curr(&shared), 1);
            // A task aborted before it ever ran (shutdown's drain timeout).
            let slot = ConnSlot::adopt(&shared);
            let never_ran = tokio::task::spawn_local(async move {
                let _slot = slot;
            });
            never_ran.abort();
            assert!(never_ran.await.is_err_and(|e| e.is_cancelled()));
            assert_eq!(curr(&shared), 0);
            assert!(take_slot(&shared), "the slots can be taken again");
        });
    }
}
