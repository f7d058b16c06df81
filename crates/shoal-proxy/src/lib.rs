//! shoal-proxy: a twemproxy-compatible memcached proxy.
//!
//! It reads twemproxy's YAML configuration ([`config`]), places every key on the server
//! twemproxy 0.5.0 would choose for the same configuration ([`placement`], over
//! shoal-ring), speaks memcached's text, meta and binary protocols to clients
//! ([`session`], over shoal-protocol's parsers; binary clients may be required to
//! authenticate with SASL PLAIN, [`sasl`]), with TLS on either side if configured
//! ([`tls`]), pipelines requests from all clients over shared backend
//! connections ([`backend`]), and ejects failing servers as twemproxy does ([`health`]).
//! Beyond twemproxy: a pool may keep each key on several servers (`replicas: N`) with
//! mcrouter's AllSync writes and Latest reads; a pool may route to other pools in
//! mcrouter's manner (failover, warm-up, shadow, prefix, replicated: [`route`]); the
//! configuration reloads without dropping clients ([`reload`]); and `--threads N` worker
//! loops each serve their clients with their own server connections ([`server`]).

#![warn(missing_docs)]

pub use shoal_client::{backend, frame};
mod accept;
pub mod config;
pub mod error;
pub mod health;
pub mod metrics;
pub mod placement;
pub mod pool;
pub mod pool_request;
pub mod reload;
pub mod route;
pub mod sasl;
pub mod server;
pub mod session;
mod shared;
pub mod slot;
pub mod stats;
mod stats_port;
pub mod tls;
pub mod value_size;
pub mod yaml;

pub use config::{PoolConfig, ProxyConfig};
pub use error::{BackendError, ConfigError, StartError};
pub use reload::{ReloadError, ReloadReport};
pub use server::{start, Options, Running};
