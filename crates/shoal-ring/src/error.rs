//! The crate's error type.

use thiserror::Error;

/// Everything that can go wrong building a ring or locating a key. No operation in this
/// crate panics on caller-supplied input; it returns one of these instead.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum RingError {
    /// The key is empty; every client library refuses empty memcached keys.
    #[error("empty key: memcached keys must be at least one byte")]
    EmptyKey,
    /// The server list given to a ring is empty.
    #[error("the server list is empty")]
    EmptyServerList,
    /// The weights of the (live) servers add up to zero, so nothing can be placed.
    #[error("all servers have weight 0; at least one needs a positive weight")]
    ZeroTotalWeight,
    /// The same host and port appear twice in the server list.
    #[error("duplicate server {0} in the server list")]
    DuplicateServer(String),
    /// Every server has been ejected; there is nowhere to send the key.
    #[error("no live servers: all servers are ejected")]
    NoLiveServers,
    /// The distribution picked no server (XMemcached's election when every score is 0,
    /// where XMemcached returns `null`).
    #[error("the distribution chose no server for this key")]
    NoServerChosen,
    /// A server index is out of range.
    #[error("server index {index} out of range for {len} servers")]
    BadServerIndex {
        /// The index asked for.
        index: usize,
        /// How many servers the ring has.
        len: usize,
    },
    /// A Java-client distribution needs the `InetSocketAddress.toString()` of a server
    /// whose host is a name, which a library without I/O cannot resolve.
    #[error(
        "server {0}: this distribution hashes Java's InetSocketAddress string \
         (\"hostname/ip:port\"); give it explicitly (host:port:weight@hostname/ip:port)"
    )]
    AddressStringRequired(String),
    /// A server specification could not be parsed.
    #[error("bad server spec {spec:?}: {reason}")]
    BadServerSpec {
        /// The text as given.
        spec: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Unknown hash algorithm name.
    #[error("unknown hash algorithm {0:?}")]
    UnknownHash(String),
    /// Unknown distribution name.
    #[error("unknown distribution {0:?}")]
    UnknownDistribution(String),
    /// The weights ask for more buckets or ring points than a ring may hold (weights are
    /// repeated literally by modulo, jump and XMemcached's ketama).
    #[error("weights need {needed} buckets/points, more than the limit of {limit}")]
    WeightsTooLarge {
        /// Buckets or points the weights would create.
        needed: u64,
        /// The most a ring may hold ([`crate::MAX_RING_ENTRIES`]).
        limit: u64,
    },
    /// A hash tag must be exactly two bytes (twemproxy's `hash_tag: "{}"`).
    #[error("hash tag must be exactly two bytes, got {0:?}")]
    BadHashTag(String),
}
