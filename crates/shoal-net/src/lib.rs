//! shoal-net: the serving skeleton shoald, shoal-queued and shoal-proxy share.
//!
//! memcached's thread model: one acceptor hands each new connection to one of N worker
//! threads, and that thread serves it for its whole life on its own single-threaded event
//! loop, so a connection never migrates between cores and no request pays for work
//! stealing. This crate owns that skeleton, and nothing about protocols:
//! - [`Listener`]: binding TCP (with the backlog) or a unix socket;
//! - [`Acceptor`]: the acceptor's events: a connection, or a stop (SIGINT, SIGTERM, or the
//!   server's own shutdown signal), with accept errors backed off rather than spun on;
//! - [`WorkerPool`]: the worker threads, round-robin dispatch, and an orderly stop that
//!   lets connections finish their replies within a bound;
//! - [`connection`]: the connection loop itself (read, parse, write, with the memory
//!   and fairness bounds), driving each daemon's protocol [`connection::Handler`];
//! - [`ReadBuffer`]: a connection's input buffer, growing only within the budget;
//! - [`Reply`]: a connection's pending output, with large values referred to in place
//!   and written with vectored writes;
//! - [`event_loop`]: a worker thread's own epoll loop and task slab, what shoald's and
//!   shoal-queued's workers run on (shoal-proxy's stay on tokio, whose sockets its
//!   backend connections are), and [`time`], timers that work on it and on tokio;
//! - [`uring`]: the io_uring data path, sockets whose reads and writes a worker thread
//!   submits in batches;
//! - [`tune_allocator`]: keeps freed buffers from staying resident;
//! - [`Budget`]: the process-wide memory budget that bounds what hostile clients can make
//!   a daemon buffer;
//! - [`metrics`]: the Prometheus text format, histograms and the `--metrics-listen`
//!   endpoint the three daemons share;
//! - [`logging`]: `--log-format text|json|journal`;
//! - [`options_file`]: `--config FILE`, options in memcached.conf's syntax;
//! - [`peer`]: noticing a client gone while its request waits.

mod accept;
mod budget;
pub mod connection;
pub mod early_signals;
pub mod event_loop;
mod listener;
pub mod logging;
mod malloc;
pub mod metrics;
pub mod options_file;
mod panics;
pub mod peer;
mod pool;
mod read_buffer;
mod reply;
pub mod time;
pub mod uring;

pub use accept::{Acceptor, Event};
pub use budget::{Budget, Reservation, OUTPUT_HIGH_WATER, READ_CHUNK};
pub use listener::{Incoming, Listener};
pub use malloc::{tune_allocator, MMAP_THRESHOLD};
pub use panics::panic_message;
pub use pool::{Executor, WorkerPool, WorkerService};
pub use read_buffer::{Need, ReadBuffer, ReadError, FREE_READ_BYTES};
pub use reply::{NoValue, Reply, MIN_REFERENCED_VALUE};
