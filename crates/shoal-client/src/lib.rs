//! shoal-client: an async (tokio) memcached cluster client, and the pipelined backend
//! connection engine shoal-proxy is built on.
//!
//! Keys are placed with any [`shoal_ring`] distribution and hash, so the client agrees
//! with libmemcached, twemproxy, XMemcached or pymemcache fleets byte for byte. Each
//! server has a small pool of pipelined connections ([`backend`]); multi-gets are split
//! per server, sent in parallel and merged in key order; failing servers are ejected and
//! retried with twemproxy's semantics ([`health`]). The wire protocol is memcached's text,
//! meta or binary protocol ([`Protocol`]); with text or meta, the raw meta commands (`mg`,
//! `ms`, `md`, `ma`) are also available through [`Client::meta_get`] and friends.
//!
//! [`queue_client`] is a separate client for several shoal-queued (or Kestrel) queue
//! servers, the Kestrel way: sets spread at random, reads sticky per server, reliable
//! reads kept on the connection that opened them, `SERVER_ERROR` retried elsewhere.
//!
//! Modules: [`backend`] (pipelined connections), [`frame`] (reply framing), [`health`]
//! (ejection), [`meta`] (meta command replies), [`stats`] (per-server counters),
//! [`value`], [`error`], [`queue_client`] (the queue client).
//!
//! ```no_run
//! # async fn demo() -> Result<(), shoal_client::ClientError> {
//! use shoal_client::{Client, Protocol};
//! use shoal_ring::{Distribution, HashAlgorithm, RingConfig, Server};
//!
//! let servers = vec![Server::new("10.0.0.1", 11211), Server::new("10.0.0.2", 11211)];
//! // Place keys exactly like libmemcached's weighted ketama.
//! let client = Client::builder(servers)
//!     .ring(RingConfig::new(Distribution::LibmemcachedKetama { weighted: true })
//!         .with_hash(HashAlgorithm::Md5))
//!     .connections_per_server(2)
//!     .protocol(Protocol::Binary)
//!     .build()?;
//! client.set(b"a", b"1", 0, 0).await?;
//! client.set(b"b", b"2", 0, 0).await?;
//! let hits = client.get_multi(&["b", "missing", "a"]).await?; // b, then a
//! assert_eq!(hits.len(), 2);
//! client.incr(b"a", 5).await?; // Some(6)
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

pub mod backend;
mod client;
mod codec;
pub mod error;
pub mod frame;
pub mod health;
pub mod meta;
pub mod queue_client;
pub mod stats;
pub mod value;

pub use client::{CasOutcome, Client, ClientBuilder};
pub use codec::Protocol;
pub use error::{BackendError, ClientError};
pub use health::EjectPolicy;
pub use meta::MetaReply;
pub use queue_client::{QueueClient, QueueClientBuilder, QueueError, SetReceipt};
pub use value::Value;
