//! Distributions: which server a key goes to, one module per family.

pub mod jump;
pub mod ketama;
pub mod maglev;
pub mod modulo;
pub mod rendezvous;

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

use crate::hash::HashAlgorithm;
use crate::{RingError, Server};

/// How keys are spread over servers; each variant reproduces one client library's
/// server choice exactly (given the same servers, weights and key hash).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Distribution {
    /// libmemcached `MODULA`: `hash % live servers`, weights ignored.
    Modula,
    /// Servers repeated by weight, `hash % buckets`: twemproxy `modula`,
    /// python-memcached, and XMemcached's `ArrayMemcachedSessionLocator` in a real
    /// (TCP) client. XMemcached ignores weights for sessions that are not
    /// `MemcachedTCPSession`s, as in the shared vectors: that is [`Distribution::Modula`].
    WeightedModula,
    /// libmemcached `CONSISTENT_KETAMA`; `weighted` builds the libketama continuum (160
    /// points scaled by weight, 4 per MD5 digest), otherwise 100 points per server hashed
    /// with the key hash. Which mode libmemcached really uses is not what was asked for:
    /// see [`Distribution::libmemcached_ketama`].
    LibmemcachedKetama {
        /// Build the continuum in weighted (libketama) mode.
        weighted: bool,
    },
    /// libmemcached `CONSISTENT_KETAMA_SPY` (points named `/host:port-i`).
    LibmemcachedKetamaSpy {
        /// Build the continuum in weighted (libketama) mode.
        weighted: bool,
    },
    /// twemproxy `distribution: ketama`.
    TwemproxyKetama,
    /// XMemcached `KetamaMemcachedSessionLocator` (hashes Java address strings).
    XmemcachedKetama,
    /// XMemcached `LibmemcachedMemcachedSessionLocator`.
    XmemcachedLibmemcached,
    /// spymemcached `KetamaNodeLocator` (SPYMEMCACHED key format).
    SpymemcachedKetama {
        /// Use spymemcached's weighted mode (a non-empty weights map).
        weighted: bool,
    },
    /// XMemcached `ElectionMemcachedSessionLocator` (rendezvous). `weighted` is what a
    /// real client does: its TCP sessions take the branch that scores each server once
    /// per unit of weight. `weighted: false` is XMemcached's branch for sessions that are
    /// not `MemcachedTCPSession`s (how the shared vectors were computed).
    XmemcachedElection {
        /// Score `address-i+key` per unit of weight (real TCP clients) rather than
        /// `address+key` once.
        weighted: bool,
    },
    /// pymemcache `HashClient` (`RendezvousHash`).
    PymemcacheRendezvous,
    /// Jump consistent hash over weight-repeated buckets.
    Jump,
    /// Maglev lookup table.
    Maglev,
}

/// Canonical name, distribution, aliases (matched case-insensitively, `-` = `_`).
const NAMES: &[(&str, Distribution, &[&str])] = &[
    (
        "modula",
        Distribution::Modula,
        &["modulo", "libmemcached_modula", "array", "xmemcached_array"],
    ),
    (
        "weighted_modula",
        Distribution::WeightedModula,
        &["twemproxy_modula", "crc32_buckets", "python_memcached"],
    ),
    (
        "ketama",
        Distribution::LibmemcachedKetama { weighted: false },
        &["libmemcached_ketama", "ketama_unweighted"],
    ),
    (
        "ketama_weighted",
        Distribution::LibmemcachedKetama { weighted: true },
        &["libmemcached_ketama_weighted", "libketama"],
    ),
    (
        "ketama_spy",
        Distribution::LibmemcachedKetamaSpy { weighted: false },
        &[],
    ),
    (
        "ketama_spy_weighted",
        Distribution::LibmemcachedKetamaSpy { weighted: true },
        &[],
    ),
    (
        "twemproxy_ketama",
        Distribution::TwemproxyKetama,
        &["nutcracker_ketama"],
    ),
    ("xmemcached_ketama", Distribution::XmemcachedKetama, &[]),
    (
        "xmemcached_libmemcached",
        Distribution::XmemcachedLibmemcached,
        &[],
    ),
    (
        "spymemcached_ketama",
        Distribution::SpymemcachedKetama { weighted: false },
        &["spymemcached"],
    ),
    (
        "spymemcached_ketama_weighted",
        Distribution::SpymemcachedKetama { weighted: true },
        &[],
    ),
    (
        "election",
        Distribution::XmemcachedElection { weighted: true },
        &["xmemcached_election"],
    ),
    (
        "election_unweighted",
        Distribution::XmemcachedElection { weighted: false },
        &["xmemcached_election_unweighted"],
    ),
    (
        "rendezvous",
        Distribution::PymemcacheRendezvous,
        &["pymemcache", "pymemcache_rendezvous"],
    ),
    ("jump", Distribution::Jump, &["jump_consistent"]),
    ("maglev", Distribution::Maglev, &[]),
];

impl Distribution {
    /// The continuum libmemcached (1.0.x-1.1.x) actually builds for `servers`.
    ///
    /// libmemcached switches to weighted mode by itself when a server with weight > 1 is
    /// added to a consistent distribution, and `MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED` is
    /// undone by the `set_distribution(CONSISTENT_KETAMA)` call it makes internally. So
    /// the mode is weighted exactly when some server weighs more than 1, whatever the
    /// behavior flags say; the vectors confirm this.
    pub fn libmemcached_ketama(servers: &[Server], spy: bool) -> Distribution {
        let weighted = servers.iter().any(|s| s.weight > 1);
        if spy {
            Distribution::LibmemcachedKetamaSpy { weighted }
        } else {
            Distribution::LibmemcachedKetama { weighted }
        }
    }

    /// Every distribution, in a stable order.
    pub fn all() -> impl Iterator<Item = Distribution> {
        NAMES.iter().map(|(_, d, _)| *d)
    }

    /// The canonical name accepted by [`FromStr`].
    pub fn name(self) -> &'static str {
        NAMES
            .iter()
            .find(|(_, d, _)| *d == self)
            .map_or("unknown", |(n, _, _)| n)
    }

    /// The key hash the source library uses by default with this distribution.
    pub fn default_hash(self) -> HashAlgorithm {
        match self {
            Distribution::Modula | Distribution::WeightedModula => HashAlgorithm::OneAtATime,
            Distribution::LibmemcachedKetama { .. }
            | Distribution::LibmemcachedKetamaSpy { .. }
            | Distribution::TwemproxyKetama
            | Distribution::Jump
            | Distribution::Maglev => HashAlgorithm::Md5,
            Distribution::XmemcachedKetama | Distribution::SpymemcachedKetama { .. } => {
                HashAlgorithm::JavaKetama
            }
            Distribution::XmemcachedLibmemcached => HashAlgorithm::JavaOneAtATime,
            Distribution::XmemcachedElection { .. } => HashAlgorithm::JavaElection,
            Distribution::PymemcacheRendezvous => HashAlgorithm::PyMurmur3_32,
        }
    }

    /// Whether the distribution places keys by a 32-bit key hash alone (so
    /// [`Ring::locate_hash`] applies); rendezvous variants hash key and server together.
    pub fn is_hash_based(self) -> bool {
        !matches!(
            self,
            Distribution::XmemcachedElection { .. } | Distribution::PymemcacheRendezvous
        )
    }
}

impl FromStr for Distribution {
    type Err = RingError;

    /// Parses a canonical name or alias; unknown names give
    /// [`RingError::UnknownDistribution`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let want = s.trim().to_ascii_lowercase().replace('-', "_");
        NAMES
            .iter()
            .find(|(n, _, aliases)| *n == want || aliases.contains(&want.as_str()))
            .map(|(_, d, _)| *d)
            .ok_or_else(|| RingError::UnknownDistribution(s.to_string()))
    }
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a ring is: distribution, key hash, and optional twemproxy hash tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RingConfig {
    /// How keys map to servers.
    pub distribution: Distribution,
    /// The key hash (for rendezvous variants, the score hash).
    pub hash: HashAlgorithm,
    /// twemproxy `hash_tag`: when set and the key contains `tag[0] ... tag[1]` with at
    /// least one byte between, only those bytes are hashed.
    pub hash_tag: Option<[u8; 2]>,
}

impl RingConfig {
    /// A config with the distribution's default hash and no hash tag.
    pub fn new(distribution: Distribution) -> RingConfig {
        RingConfig {
            distribution,
            hash: distribution.default_hash(),
            hash_tag: None,
        }
    }

    /// Replaces the key hash.
    pub fn with_hash(mut self, hash: HashAlgorithm) -> RingConfig {
        self.hash = hash;
        self
    }

    /// Sets twemproxy's hash tag from a two-byte string such as `"{}"`.
    pub fn with_hash_tag(mut self, tag: &str) -> Result<RingConfig, RingError> {
        match tag.as_bytes() {
            [a, b] => {
                self.hash_tag = Some([*a, *b]);
                Ok(self)
            }
            _ => Err(RingError::BadHashTag(tag.to_string())),
        }
    }
}

/// twemproxy's hash-tag rule: the bytes strictly between the first `tag[0]` and the next
/// `tag[1]` after it, if there is at least one; otherwise the whole key.
pub fn apply_hash_tag(key: &[u8], tag: [u8; 2]) -> &[u8] {
    if let Some(start) = key.iter().position(|&b| b == tag[0]) {
        let after = &key[start + 1..];
        if let Some(end) = after.iter().position(|&b| b == tag[1]) {
            if end > 0 {
                return &after[..end];
            }
        }
    }
    key
}

#[derive(Debug, Clone)]
enum Kind {
    NoLive,
    Modulo(modulo::Modulo),
    Continuum(ketama::Continuum),
    Election(rendezvous::Election),
    Pymemcache(rendezvous::Pymemcache),
    Jump(jump::Jump),
    Maglev(maglev::Maglev),
}

/// An immutable placement of keys over a server list.
///
/// Built once, then read concurrently without locks; changes (ejecting, restoring,
/// adding, removing a server) build a new `Ring` (see [`crate::SharedRing`] for swapping
/// one in). Indices returned by [`Ring::locate`] index the full server list, including
/// ejected servers, which never receive keys.
#[derive(Debug, Clone)]
pub struct Ring {
    config: RingConfig,
    servers: Vec<Server>,
    ejected: Vec<bool>,
    live_count: usize,
    single: Option<usize>,
    kind: Kind,
}

/// The most buckets or continuum points one ring may hold (16 Mi): weights are repeated
/// literally by some libraries, and a typo'd weight must not exhaust memory.
pub const MAX_RING_ENTRIES: u64 = 1 << 24;

/// Buckets/points a distribution creates from its weights, where they scale with the raw
/// weights rather than being normalized.
fn entries_needed(distribution: Distribution, live: &[(u32, &Server)]) -> u64 {
    let total: u64 = live.iter().map(|(_, s)| u64::from(s.weight)).sum();
    match distribution {
        Distribution::WeightedModula | Distribution::Jump => total,
        Distribution::XmemcachedKetama => total.saturating_mul(160),
        _ => 0,
    }
}

fn validate(servers: &[Server]) -> Result<(), RingError> {
    if servers.is_empty() {
        return Err(RingError::EmptyServerList);
    }
    let mut seen = HashSet::new();
    for s in servers {
        if !seen.insert((s.host.to_ascii_lowercase(), s.port)) {
            return Err(RingError::DuplicateServer(s.host_port()));
        }
    }
    if servers.iter().all(|s| s.weight == 0) {
        return Err(RingError::ZeroTotalWeight);
    }
    Ok(())
}

impl Ring {
    /// Builds a ring over `servers`, all live.
    ///
    /// Errors: an empty list, duplicate `host:port`, all weights zero, or (Java
    /// distributions) a host name without an explicit address string.
    pub fn new(config: RingConfig, servers: Vec<Server>) -> Result<Ring, RingError> {
        let ejected = vec![false; servers.len()];
        Ring::build(config, servers, ejected)
    }

    fn build(
        config: RingConfig,
        servers: Vec<Server>,
        ejected: Vec<bool>,
    ) -> Result<Ring, RingError> {
        validate(&servers)?;
        let (kind, live_count, single) = Ring::place(&config, &servers, &ejected)?;
        Ok(Ring {
            config,
            servers,
            ejected,
            live_count,
            single,
            kind,
        })
    }

    /// Builds the placement for the live servers: (structure, live count, the only live
    /// server when there is exactly one).
    fn place(
        config: &RingConfig,
        servers: &[Server],
        ejected: &[bool],
    ) -> Result<(Kind, usize, Option<usize>), RingError> {
        let live: Vec<(u32, &Server)> = servers
            .iter()
            .enumerate()
            .filter(|(i, _)| !ejected.get(*i).copied().unwrap_or(false))
            .map(|(i, s)| (i as u32, s))
            .collect();
        let live_count = live.len();
        let weighted_kind = !matches!(
            config.distribution,
            Distribution::Modula
                | Distribution::LibmemcachedKetama { weighted: false }
                | Distribution::LibmemcachedKetamaSpy { weighted: false }
                | Distribution::XmemcachedLibmemcached
                | Distribution::PymemcacheRendezvous
                | Distribution::XmemcachedElection { weighted: false }
                | Distribution::SpymemcachedKetama { weighted: false }
        );
        if weighted_kind && !live.is_empty() && live.iter().all(|(_, s)| s.weight == 0) {
            return Err(RingError::ZeroTotalWeight);
        }
        let needed = entries_needed(config.distribution, &live);
        if needed > MAX_RING_ENTRIES {
            return Err(RingError::WeightsTooLarge {
                needed,
                limit: MAX_RING_ENTRIES,
            });
        }
        let java = |live: &[(u32, &Server)]| -> Result<Vec<(u32, Server, String)>, RingError> {
            live.iter()
                .map(|(i, s)| Ok((*i, (*s).clone(), s.java_address()?)))
                .collect()
        };
        let hash = config.hash;
        let kind = if live.is_empty() {
            Kind::NoLive
        } else {
            match config.distribution {
                Distribution::Modula => {
                    let idx: Vec<u32> = live.iter().map(|(i, _)| *i).collect();
                    Kind::Modulo(modulo::Modulo::plain(&idx))
                }
                Distribution::WeightedModula => {
                    let w: Vec<(u32, u32)> = live.iter().map(|(i, s)| (*i, s.weight)).collect();
                    Kind::Modulo(modulo::Modulo::weighted(&w))
                }
                Distribution::LibmemcachedKetama { weighted } => {
                    Kind::Continuum(ketama::libmemcached(&live, hash, weighted, false))
                }
                Distribution::LibmemcachedKetamaSpy { weighted } => {
                    Kind::Continuum(ketama::libmemcached(&live, hash, weighted, true))
                }
                Distribution::TwemproxyKetama => Kind::Continuum(ketama::twemproxy(&live)),
                Distribution::XmemcachedKetama => {
                    let j = java(&live)?;
                    let refs: Vec<(u32, &Server, String)> =
                        j.iter().map(|(i, s, a)| (*i, s, a.clone())).collect();
                    Kind::Continuum(ketama::xmemcached(&refs, hash))
                }
                Distribution::XmemcachedLibmemcached => {
                    Kind::Continuum(ketama::xmemcached_libmemcached(&live, hash))
                }
                Distribution::SpymemcachedKetama { weighted } => {
                    let j: Vec<(u32, Server, String)> = live
                        .iter()
                        .map(|(i, s)| Ok((*i, (*s).clone(), s.spymemcached_address()?)))
                        .collect::<Result<_, RingError>>()?;
                    let refs: Vec<(u32, &Server, String)> =
                        j.iter().map(|(i, s, a)| (*i, s, a.clone())).collect();
                    Kind::Continuum(ketama::spymemcached(&refs, hash, weighted))
                }
                Distribution::XmemcachedElection { weighted } => {
                    let c: Vec<(u32, String, u32)> = java(&live)?
                        .into_iter()
                        .map(|(i, s, a)| (i, a, s.weight))
                        .collect();
                    Kind::Election(rendezvous::Election::new(&c, hash, weighted))
                }
                Distribution::PymemcacheRendezvous => {
                    let c: Vec<(u32, String)> =
                        live.iter().map(|(i, s)| (*i, s.host_port())).collect();
                    Kind::Pymemcache(rendezvous::Pymemcache::new(&c, hash))
                }
                Distribution::Jump => {
                    let mut buckets = Vec::new();
                    for (i, s) in &live {
                        buckets.extend(std::iter::repeat(*i).take(s.weight as usize));
                    }
                    Kind::Jump(jump::Jump::new(buckets))
                }
                Distribution::Maglev => {
                    let c: Vec<(u32, String, u32)> = live
                        .iter()
                        .filter(|(_, s)| s.weight > 0)
                        .map(|(i, s)| (*i, s.host_port(), s.weight))
                        .collect();
                    Kind::Maglev(maglev::Maglev::new(&c))
                }
            }
        };
        // libmemcached and twemproxy skip hashing for a single server; every other
        // library lands on it anyway, except election, which can return null.
        let single = match (&kind, live.as_slice()) {
            (Kind::Election(_), _) => None,
            (_, [(i, _)]) => Some(*i as usize),
            _ => None,
        };
        Ok((kind, live_count, single))
    }

    /// The ring's configuration.
    pub fn config(&self) -> &RingConfig {
        &self.config
    }

    /// All servers, including ejected ones, in configuration order.
    pub fn servers(&self) -> &[Server] {
        &self.servers
    }

    /// The server at `index`, if any.
    pub fn server(&self, index: usize) -> Option<&Server> {
        self.servers.get(index)
    }

    /// Whether the server at `index` is ejected.
    pub fn is_ejected(&self, index: usize) -> bool {
        self.ejected.get(index).copied().unwrap_or(false)
    }

    /// Number of servers that receive keys.
    pub fn live_count(&self) -> usize {
        self.live_count
    }

    /// The bytes that get hashed for `key` (the hash-tag contents when a tag applies).
    pub fn hashed_part<'k>(&self, key: &'k [u8]) -> &'k [u8] {
        match self.config.hash_tag {
            Some(tag) => apply_hash_tag(key, tag),
            None => key,
        }
    }

    /// The index (into [`Ring::servers`]) of the server `key` goes to.
    ///
    /// Errors: [`RingError::EmptyKey`], [`RingError::NoLiveServers`] when everything is
    /// ejected, [`RingError::NoServerChosen`] when election scores are all zero.
    #[inline]
    pub fn locate(&self, key: &[u8]) -> Result<usize, RingError> {
        if key.is_empty() {
            return Err(RingError::EmptyKey);
        }
        if let Some(i) = self.single {
            return Ok(i);
        }
        let part = self.hashed_part(key);
        let found = match &self.kind {
            Kind::NoLive => return Err(RingError::NoLiveServers),
            Kind::Election(e) => e.lookup(part),
            Kind::Pymemcache(p) => p.lookup(part),
            _ => return self.dispatch(self.config.hash.hash(part)),
        };
        found.map(|i| i as usize).ok_or(RingError::NoServerChosen)
    }

    /// The server a precomputed key hash goes to, for hash-based distributions
    /// ([`Distribution::is_hash_based`]); `None` for rendezvous rings and rings with no
    /// live server.
    #[inline]
    pub fn locate_hash(&self, hash: u32) -> Option<usize> {
        self.dispatch(hash).ok()
    }

    #[inline]
    fn dispatch(&self, hash: u32) -> Result<usize, RingError> {
        let found = match &self.kind {
            Kind::NoLive => return Err(RingError::NoLiveServers),
            Kind::Modulo(m) => m.lookup(hash),
            Kind::Continuum(c) => c.lookup(hash),
            Kind::Jump(j) => j.lookup(hash),
            Kind::Maglev(m) => m.lookup(hash),
            Kind::Election(_) | Kind::Pymemcache(_) => None,
        };
        found.map(|i| i as usize).ok_or(RingError::NoServerChosen)
    }

    /// The key's server itself.
    pub fn locate_server(&self, key: &[u8]) -> Result<&Server, RingError> {
        let i = self.locate(key)?;
        self.servers.get(i).ok_or(RingError::NoServerChosen)
    }

    fn check_index(&self, index: usize) -> Result<(), RingError> {
        if index < self.servers.len() {
            Ok(())
        } else {
            Err(RingError::BadServerIndex {
                index,
                len: self.servers.len(),
            })
        }
    }

    /// A new ring with server `index` ejected (auto-eject): it keeps its index but gets
    /// no keys, and the distribution is rebuilt over the remaining live servers, as
    /// libmemcached and twemproxy rebuild their continuum.
    pub fn with_ejected(&self, index: usize) -> Result<Ring, RingError> {
        self.check_index(index)?;
        let mut ejected = self.ejected.clone();
        ejected[index] = true;
        Ring::build(self.config, self.servers.clone(), ejected)
    }

    /// A new ring with server `index` live again.
    pub fn with_restored(&self, index: usize) -> Result<Ring, RingError> {
        self.check_index(index)?;
        let mut ejected = self.ejected.clone();
        ejected[index] = false;
        Ring::build(self.config, self.servers.clone(), ejected)
    }

    /// A new ring with `server` appended (live); its index is the old server count.
    pub fn with_added(&self, server: Server) -> Result<Ring, RingError> {
        let mut servers = self.servers.clone();
        servers.push(server);
        let mut ejected = self.ejected.clone();
        ejected.push(false);
        Ring::build(self.config, servers, ejected)
    }

    /// A new ring without server `index`; later servers' indices shift down by one.
    pub fn with_removed(&self, index: usize) -> Result<Ring, RingError> {
        self.check_index(index)?;
        let mut servers = self.servers.clone();
        servers.remove(index);
        let mut ejected = self.ejected.clone();
        ejected.remove(index);
        Ring::build(self.config, servers, ejected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_tag_rules() {
        assert_eq!(apply_hash_tag(b"user:{42}:name", *b"{}"), b"42");
        assert_eq!(apply_hash_tag(b"user:{}:name", *b"{}"), b"user:{}:name");
        assert_eq!(apply_hash_tag(b"user:{42", *b"{}"), b"user:{42");
        assert_eq!(apply_hash_tag(b"$a$b$", *b"$$"), b"a");
    }

    #[test]
    fn names_round_trip() {
        for d in Distribution::all() {
            assert_eq!(d.name().parse::<Distribution>().ok(), Some(d));
        }
    }
}
