//! shoal-proxy: a twemproxy-compatible memcached proxy.
//!
//! It reads twemproxy's YAML configuration ([`config`]), places every key on the server
//! twemproxy 0.5.0 would choose for the same configuration ([`placement`], over
//! shoal-ring), speaks memcached's text, meta and binary protocols to clients
//! ([`session`], over shoal-protocol's parsers; binary clients may be required to
//! authenticate with SASL PLAIN, [`sasl`]), with TLS on either side if configured
//! ([`tls`]), pipelines requests from all clients over shared backend
//! connections ([`backend`]), and ejects failing servers as twemproxy does ([`health`]).
//! Beyond twemproxy, a pool may keep each key on several servers (`replicas: N`): writes
//! go to all of them and reads fail over in order, in mcrouter's manner.

#![warn(missing_docs)]

pub use shoal_client::{backend, frame};
pub mod config;
pub mod error;
pub mod health;
pub mod metrics;
pub mod placement;
pub mod pool;
pub mod reload;
pub mod sasl;
pub mod server;
pub mod session;
pub mod stats;
pub mod tls;
pub mod yaml;

pub use config::{PoolConfig, ProxyConfig};
pub use error::{BackendError, ConfigError};
pub use reload::{ReloadError, ReloadReport};
pub use server::{start, Options, Running, StartError};
