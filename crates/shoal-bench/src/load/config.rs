//! What a load run sends, to where, for how long: [`LoadConfig`] and its derived
//! helpers (key naming, placement, validation).

use crate::proto::Protocol;
use crate::text;
use crate::workload::{KeyDist, ValueSize};
use crate::BenchError;
use serde::Serialize;
use shoal_ring::Ring;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// What to send, to where, for how long.
#[derive(Clone, Debug, Serialize)]
pub struct LoadConfig {
    /// The servers' addresses: one, or several with a [`LoadConfig::placement`] ring.
    pub servers: Vec<SocketAddr>,
    /// The wire protocol.
    pub protocol: Protocol,
    /// Which server a key goes to when there are several (client-side placement).
    #[serde(skip)]
    pub placement: Option<Arc<Ring>>,
    /// A label for the placement, for reports (`modula`, `ketama`, ...).
    pub placement_name: Option<String>,
    /// Client threads (each a single-threaded event loop).
    pub threads: usize,
    /// Connections, in total, spread over the threads (with several servers, each
    /// connection is one socket per server).
    pub conns: usize,
    /// Requests kept in flight per connection.
    pub depth: usize,
    /// Number of distinct keys.
    pub keys: u64,
    /// How keys are chosen.
    pub key_dist: KeyDist,
    /// Key prefix; keys are the prefix and a zero-padded index.
    pub key_prefix: String,
    /// Digits the index is padded to (`key:` and 8 digits make 12-byte keys).
    pub key_width: usize,
    /// Value sizes for sets.
    pub value_size: ValueSize,
    /// Fraction of requests that are sets (the rest are gets), 0.0 to 1.0.
    pub set_ratio: f64,
    /// Length of the measured window (ignored when `requests` is set).
    #[serde(serialize_with = "secs")]
    pub duration: Duration,
    /// Load applied before the measured window, not recorded (ignored with `requests`).
    #[serde(serialize_with = "secs")]
    pub warmup: Duration,
    /// Send exactly this many requests in total instead of running for `duration`.
    pub requests: Option<u64>,
    /// Cap on requests per second over all connections (paced per connection; latency
    /// is measured from each request's scheduled time).
    pub rate: Option<f64>,
    /// Set every key once before the warm-up, so gets hit.
    pub prefill: bool,
    /// Seed for key and operation choice.
    pub seed: u64,
    /// How the pipeline is refilled.
    pub refill: Refill,
    /// Draw a progress bar on stderr when it is a terminal.
    #[serde(skip)]
    pub progress: bool,
}

/// How a connection keeps its pipeline full.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Refill {
    /// Write `depth` requests, read all `depth` replies, repeat (memtier's pipelining).
    #[default]
    Batch,
    /// After every read, write as many new requests as replies just completed.
    Window,
}

/// Serialises a duration as seconds (a float).
pub(crate) fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

impl LoadConfig {
    /// A configuration with the defaults of `shoal-bench load` for `server`.
    pub fn new(server: SocketAddr) -> Self {
        LoadConfig {
            servers: vec![server],
            protocol: Protocol::Text,
            placement: None,
            placement_name: None,
            threads: 2,
            conns: 50,
            depth: 1,
            keys: 10_000,
            key_dist: KeyDist::Uniform,
            key_prefix: "key:".into(),
            key_width: 8,
            value_size: ValueSize::fixed(100),
            set_ratio: 0.1,
            duration: Duration::from_secs(5),
            warmup: Duration::from_secs(1),
            requests: None,
            rate: None,
            prefill: true,
            seed: 0x5eed,
            refill: Refill::Batch,
            progress: false,
        }
    }

    /// Checks the combination of options.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |m: &str| Err(BenchError::Config(m.to_string()));
        if self.servers.is_empty() {
            return bad("no server to send to");
        }
        if self.servers.len() > 1 {
            match &self.placement {
                None => return bad("several servers need a placement (ring)"),
                Some(r) if r.servers().len() != self.servers.len() => {
                    return bad("the placement ring and the server list differ in length")
                }
                Some(_) => {}
            }
            if self.refill == Refill::Window {
                return bad("several servers take --refill batch only");
            }
        }
        if self.threads == 0 {
            return bad("--threads must be at least 1");
        }
        if self.conns < self.threads {
            return bad("--conns must be at least --threads");
        }
        if self.depth == 0 {
            return bad("--depth must be at least 1");
        }
        if self.keys == 0 {
            return bad("--keys must be at least 1");
        }
        if !(0.0..=1.0).contains(&self.set_ratio) {
            return bad("--set-ratio must be between 0 and 1");
        }
        if self.requests.is_none() && self.duration.is_zero() {
            return bad("--duration must be positive");
        }
        if let Some(n) = self.requests {
            if n < self.conns as u64 {
                return bad("--requests must be at least --conns (every connection sends one)");
            }
        }
        if let Some(r) = self.rate {
            if !(r.is_finite() && r > 0.0) {
                return bad("--rate must be a positive number of requests per second");
            }
        }
        let key_len = self.key_prefix.len() + self.key_width.max(self.keys.to_string().len());
        if key_len > 250 || self.key_prefix.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return bad("keys must be at most 250 bytes with no spaces or control characters");
        }
        Ok(())
    }

    /// The key with index `i`.
    pub fn key(&self, i: u64, buf: &mut Vec<u8>) {
        buf.clear();
        text::push_key(buf, self.key_prefix.as_bytes(), i, self.key_width);
    }

    /// Which server key `key` goes to.
    pub fn server_of(&self, key: &[u8]) -> usize {
        match &self.placement {
            Some(r) if self.servers.len() > 1 => r.locate(key).unwrap_or(0),
            _ => 0,
        }
    }
}
