//! shoal-queued: a durable message queue over the memcached text protocol.
//!
//! MemcacheQ's protocol (`set` enqueues, `get` dequeues) with Kestrel's reliable and
//! blocking reads (`get q/t=500/open`, `/close`, `/abort`, `/peek`). Parsing is
//! shoal-protocol's; storage is shoal-queue's.

#![warn(missing_docs)]

pub mod config;
pub mod conn;
pub mod error;
pub mod metrics;
pub mod server;
pub mod shared;
pub mod stats;
pub mod status;

pub use config::{Args, Settings, VERSION};
pub use server::{bind, run};
