//! shoald: a drop-in memcached server speaking the text, meta and binary protocols.
//!
//! The crate is the server on top of `shoal-protocol` (parsing, no I/O) and `shoal-store`
//! (memory, no protocol): configuration, the thread model, connections and the command
//! implementations. The `shoald` binary is a thin wrapper around [`run`].

pub mod auth;
pub mod commands;
pub mod config;
pub mod conn;
pub mod conns;
pub mod detail;
pub mod error;
pub mod flash;
pub mod flash_reader;
pub mod latency;
pub mod lru_crawler;
pub mod maintenance;
pub mod metrics;
pub mod reply_window;
pub mod restart;
pub mod server;
pub mod stats;
pub mod tls;
pub mod udp;
pub mod watch;
pub mod worker;

pub use config::{Args, Settings, VERSION};
pub use server::{bind, bind_extra, run, run_all, Listener};
