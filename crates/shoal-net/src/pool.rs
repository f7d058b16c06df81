//! Worker threads, each running one single-threaded event loop.

use std::future::Future;
use std::io;
use std::rc::Rc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::{mpsc, watch};

use crate::listener::Incoming;
use crate::panics::panic_message;

/// How one worker thread serves its connections. Built on the worker thread itself, so
/// it may hold thread-local state (`Rc`, `RefCell`) shared by that thread's connections.
/// `C` is what the acceptor hands over: the accepted socket itself by default, or the
/// socket with whatever the server decided about it at accept time (shoal-proxy's
/// listening pool and connection slot).
pub trait WorkerService<C = Incoming>: 'static {
    /// Serves one connection until it ends.
    fn serve(self: Rc<Self>, conn: C) -> impl Future<Output = ()> + 'static;

    /// Called once when the worker stops taking connections, before it waits for the
    /// ones it has (e.g. to end their reads so they finish).
    fn stopping(&self) {}
}

/// What runs a worker thread's connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Executor {
    /// A tokio current-thread runtime with a `LocalSet`: what sockets that need tokio's
    /// reactor (io_uring streams, connections to other servers) run on.
    #[default]
    Tokio,
    /// This crate's [`crate::event_loop`]: epoll and a task slab, for sockets served
    /// through [`crate::event_loop::EpollStream`].
    EventLoop,
}

/// The worker threads and the channels that hand them connections (`C`: see
/// [`WorkerService`]).
pub struct WorkerPool<C = Incoming> {
    senders: Vec<mpsc::UnboundedSender<C>>,
    threads: Vec<JoinHandle<()>>,
    handles: Vec<Handle>,
    next: usize,
}

impl<C: Send + 'static> WorkerPool<C> {
    /// Starts `threads` (at least one) threads named `<name>-<i>`, running their
    /// connections on `executor`. Each builds its service with `make(i)`, serves the
    /// connections dispatched to it, and stops when `shutdown` changes or the pool is
    /// joined; it then gives its connections up to `drain` to finish before aborting them.
    /// Returns once every worker is running. With [`Executor::Tokio`],
    /// [`WorkerPool::handles`] gives each worker's runtime; with [`Executor::EventLoop`]
    /// there is none, and it is empty.
    pub fn start<S, F>(
        executor: Executor,
        threads: usize,
        name: &str,
        shutdown: &watch::Receiver<bool>,
        drain: Duration,
        make: F,
    ) -> io::Result<WorkerPool<C>>
    where
        S: WorkerService<C>,
        F: Fn(usize) -> S + Send + Clone + 'static,
    {
        let mut pool = WorkerPool {
            senders: Vec::new(),
            threads: Vec::new(),
            handles: Vec::new(),
            next: 0,
        };
        let (handle_tx, handle_rx) = std::sync::mpsc::channel();
        for i in 0..threads.max(1) {
            let (tx, rx) = mpsc::unbounded_channel();
            let make = make.clone();
            let shutdown = shutdown.clone();
            let handle_tx = handle_tx.clone();
            let thread = std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || match executor {
                    Executor::Tokio => worker_main(rx, shutdown, drain, handle_tx, move || make(i)),
                    Executor::EventLoop => {
                        worker_loop_main(rx, shutdown, drain, handle_tx, move || make(i))
                    }
                })?;
            pool.senders.push(tx);
            pool.threads.push(thread);
            // A worker whose runtime could not be built has logged why and ended: its
            // sender is dropped, so the pool comes out short rather than waiting forever.
            match handle_rx.recv() {
                Ok(Some(h)) => pool.handles.push(h),
                Ok(None) => {}
                Err(_) => return Err(io::Error::other("a worker runtime failed to start")),
            }
        }
        Ok(pool)
    }

    /// Each worker's runtime, in worker order: what lets a server start tasks that must
    /// live on a given worker (connections to other servers that worker's clients share,
    /// for instance) from another thread.
    pub fn handles(&self) -> &[Handle] {
        &self.handles
    }

    /// Hands `conn` to the next worker in turn. Returns it back if that worker has
    /// stopped, so the caller can undo its accounting.
    pub fn dispatch(&mut self, conn: C) -> Result<(), C> {
        let i = self.next % self.senders.len();
        self.next = self.next.wrapping_add(1);
        self.senders[i].send(conn).map_err(|e| e.0)
    }

    /// Stops handing out connections and waits for every worker to finish.
    pub fn join(self) {
        drop(self.senders);
        for t in self.threads {
            let name = t.thread().name().unwrap_or("worker").to_string();
            if let Err(panic) = t.join() {
                tracing::error!("{name} panicked: {}", panic_message(&*panic));
            }
        }
    }
}

fn worker_main<C, S: WorkerService<C>>(
    mut rx: mpsc::UnboundedReceiver<C>,
    mut shutdown: watch::Receiver<bool>,
    drain: Duration,
    handle_tx: std::sync::mpsc::Sender<Option<Handle>>,
    make: impl FnOnce() -> S,
) {
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
    let _ = handle_tx.send(Some(rt.handle().clone()));
    drop(handle_tx);
    let service = Rc::new(make());
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let mut tasks = tokio::task::JoinSet::new();
        loop {
            // Biased: a connection already handed to this worker is served (and so drained)
            // rather than dropped unserved when shutdown arrives at the same time.
            let conn = tokio::select! {
                biased;
                c = rx.recv() => match c { Some(c) => c, None => break },
                _ = shutdown.changed() => break,
            };
            tasks.spawn_local(service.clone().serve(conn));
            while let Some(done) = tasks.try_join_next() {
                log_panic(done);
            }
        }
        // Let tasks not yet started see the shutdown, tell the service, and wait for the
        // connections to finish the replies they are writing: bounded, so a client that
        // stops reading cannot hold the process forever.
        tokio::task::yield_now().await;
        service.stopping();
        let drained = tokio::time::timeout(drain, async {
            while let Some(done) = tasks.join_next().await {
                log_panic(done);
            }
        });
        if drained.await.is_err() {
            tracing::warn!("connections still open {drain:?} after shutdown; closing them");
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
        }
    });
}

/// [`worker_main`] on this crate's event loop: the same dispatch, shutdown and bounded
/// drain, with connections as the loop's tasks (a task that panics is logged by the loop).
fn worker_loop_main<C: 'static, S: WorkerService<C>>(
    mut rx: mpsc::UnboundedReceiver<C>,
    mut shutdown: watch::Receiver<bool>,
    drain: Duration,
    handle_tx: std::sync::mpsc::Sender<Option<Handle>>,
    make: impl FnOnce() -> S,
) {
    let event_loop = match crate::event_loop::EventLoop::new() {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("worker event loop: {e}");
            return;
        }
    };
    let _ = handle_tx.send(None);
    drop(handle_tx);
    let service = Rc::new(make());
    event_loop.block_on(async move {
        loop {
            let conn = tokio::select! {
                biased;
                c = rx.recv() => match c { Some(c) => c, None => break },
                _ = shutdown.changed() => break,
            };
            crate::event_loop::spawn(service.clone().serve(conn));
        }
        tokio::task::yield_now().await;
        service.stopping();
        let drained = crate::time::timeout(drain, crate::event_loop::until_idle());
        if drained.await.is_err() {
            tracing::warn!("connections still open {drain:?} after shutdown; closing them");
        }
        // Returning ends the loop, which drops the connections still open.
    });
}

/// Logs a connection task that panicked. The task's own drop guards have already given
/// back its connection slot and its buffers; the log is what tells an operator.
fn log_panic(done: Result<(), tokio::task::JoinError>) {
    if let Err(e) = done {
        if e.is_panic() {
            let panic = e.into_panic();
            tracing::error!("a connection task panicked: {}", panic_message(&*panic));
        }
    }
}
