//! Consistent-hash continuums ("ketama") as each client library builds them.
//!
//! All variants end in the same lookup: the first point `>= hash`, wrapping to the first
//! point. They differ in how points are named, how many each server gets, how they are
//! hashed, and which server keeps a point two servers hash to. The continuum is stored as
//! two parallel sorted arrays plus a small radix index over the top bits of the hash, so
//! a lookup is one index read and a binary search over a handful of points.

use md5::{Digest, Md5};

use crate::hash::libhashkit::digest_word;
use crate::hash::HashAlgorithm;
use crate::Server;

/// Which of several servers hashing to the same point wins it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Collision {
    /// The first inserted (libmemcached sorts by (value, server index); twemproxy's
    /// glibc `qsort` is a stable merge sort; XMemcached picks randomly, first is the
    /// deterministic stand-in).
    KeepFirst,
    /// The last inserted (spymemcached's `TreeMap.put` overwrites).
    KeepLast,
}

/// A sorted continuum of `(point, server index)` with a radix index for fast lookup.
#[derive(Debug, Clone)]
pub struct Continuum {
    points: Vec<u32>,
    servers: Vec<u32>,
    /// `index[p]` = first position whose point has top `bits` equal to or above `p`.
    index: Vec<u32>,
    shift: u32,
}

impl Continuum {
    /// Sorts and deduplicates `(point, server)` entries given in insertion order.
    pub(crate) fn build(entries: Vec<(u32, u32)>, collision: Collision) -> Continuum {
        let mut seq: Vec<(u32, u32, u32)> = entries
            .into_iter()
            .enumerate()
            .map(|(i, (p, s))| (p, i as u32, s))
            .collect();
        seq.sort_unstable();
        let mut points = Vec::with_capacity(seq.len());
        let mut servers = Vec::with_capacity(seq.len());
        for (p, _, s) in seq {
            if points.last() == Some(&p) {
                if collision == Collision::KeepLast {
                    if let Some(last) = servers.last_mut() {
                        *last = s;
                    }
                }
                continue;
            }
            points.push(p);
            servers.push(s);
        }
        // About two points per radix bucket keeps the final search to one or two probes.
        let bits = (usize::BITS - points.len().leading_zeros()).clamp(4, 16);
        let shift = 32 - bits;
        let buckets = 1usize << bits;
        let mut index = Vec::with_capacity(buckets + 1);
        let mut pos = 0usize;
        for b in 0..buckets {
            while pos < points.len() && ((points[pos] >> shift) as usize) < b {
                pos += 1;
            }
            index.push(pos as u32);
        }
        index.push(points.len() as u32);
        Continuum {
            points,
            servers,
            index,
            shift,
        }
    }

    /// Number of distinct points.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// Whether the continuum has no points.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The server owning the first point `>= hash`, wrapping around; `None` only when the
    /// continuum is empty.
    #[inline]
    pub fn lookup(&self, hash: u32) -> Option<u32> {
        let b = (hash >> self.shift) as usize;
        let lo = *self.index.get(b)? as usize;
        let hi = *self.index.get(b + 1)? as usize;
        let slice = self.points.get(lo..hi)?;
        let pos = lo + slice.partition_point(|&p| p < hash);
        let pos = if pos >= self.points.len() { 0 } else { pos };
        self.servers.get(pos).copied()
    }
}

/// Four points from one MD5 digest, libketama's scheme.
fn push_digest_points(entries: &mut Vec<(u32, u32)>, name: &[u8], server: u32) {
    let digest: [u8; 16] = Md5::digest(name).into();
    for word in 0..4 {
        entries.push((digest_word(&digest, word), server));
    }
}

/// libmemcached's weighted point count: `floor(pct * 160 / 4 * live + 1e-10f) * 4`, all
/// in `float`, as `update_continuum` computes it.
fn libmemcached_weighted_points(weight: u32, total: u64, live: usize) -> u32 {
    let pct = weight as f32 / total as f32;
    let v = pct * 160.0_f32 / 4.0_f32 * live as f32 + 0.000_000_000_1_f32;
    (v.floor() as u32).saturating_mul(4)
}

/// twemproxy's and spymemcached's version of the same formula: the float expression is
/// widened to `double` to add the `1e-10` literal and narrowed back before `floor`.
fn float_then_double_points(weight: u32, total: u64, count: usize) -> u32 {
    let pct = weight as f32 / total as f32;
    let v = pct * 160.0_f32 / 4.0_f32 * count as f32;
    let v = (f64::from(v) + 0.000_000_000_1) as f32;
    (v.floor() as u32).saturating_mul(4)
}

/// libmemcached `MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA` (and `_SPY` when `spy`).
///
/// Unweighted: 100 points per server, named `host-i` (`host:port-i` off port 11211; spy:
/// `/host:port-i`), hashed with the *key* hash. Weighted: the float formula above, four
/// points per MD5 digest of the same names.
pub(crate) fn libmemcached(
    live: &[(u32, &Server)],
    hash: HashAlgorithm,
    weighted: bool,
    spy: bool,
) -> Continuum {
    let total: u64 = live.iter().map(|(_, s)| u64::from(s.weight)).sum();
    let mut entries = Vec::new();
    for &(idx, server) in live {
        let base = if spy {
            format!("/{}:{}", server.host, server.port)
        } else {
            server.libmemcached_name()
        };
        if weighted {
            let per_server = libmemcached_weighted_points(server.weight, total, live.len());
            for i in 0..per_server / 4 {
                push_digest_points(&mut entries, format!("{base}-{i}").as_bytes(), idx);
            }
        } else {
            for i in 0..100u32 {
                entries.push((hash.hash(format!("{base}-{i}").as_bytes()), idx));
            }
        }
    }
    Continuum::build(entries, Collision::KeepFirst)
}

/// twemproxy `distribution: ketama`: always weighted, always MD5 points (four per digest)
/// named `name-i`, where the name is the configured server name or `host[:port]`.
pub(crate) fn twemproxy(live: &[(u32, &Server)]) -> Continuum {
    let total: u64 = live.iter().map(|(_, s)| u64::from(s.weight)).sum();
    let mut entries = Vec::new();
    for &(idx, server) in live {
        let base = server
            .name
            .clone()
            .unwrap_or_else(|| server.libmemcached_name());
        let per_server = float_then_double_points(server.weight, total, live.len());
        for i in 0..per_server / 4 {
            push_digest_points(&mut entries, format!("{base}-{i}").as_bytes(), idx);
        }
    }
    Continuum::build(entries, Collision::KeepFirst)
}

/// XMemcached `KetamaMemcachedSessionLocator`: `160 * weight` points per server named
/// `address-i` from Java's address string; four per MD5 digest with `KETAMA_HASH`, else
/// one per `hash(address-i)`.
pub(crate) fn xmemcached(live: &[(u32, &Server, String)], hash: HashAlgorithm) -> Continuum {
    let mut entries = Vec::new();
    for (idx, server, address) in live {
        let reps = 160u32.saturating_mul(server.weight);
        if hash == HashAlgorithm::JavaKetama {
            for i in 0..reps / 4 {
                push_digest_points(&mut entries, format!("{address}-{i}").as_bytes(), *idx);
            }
        } else {
            for i in 0..reps {
                entries.push((hash.hash(format!("{address}-{i}").as_bytes()), *idx));
            }
        }
    }
    Continuum::build(entries, Collision::KeepFirst)
}

/// XMemcached `LibmemcachedMemcachedSessionLocator`: 100 points per server named
/// `hostname-i` (`hostname:port-i` off 11211), weights ignored.
pub(crate) fn xmemcached_libmemcached(live: &[(u32, &Server)], hash: HashAlgorithm) -> Continuum {
    let mut entries = Vec::new();
    for &(idx, server) in live {
        let host = server.java_host_name();
        let base = if server.port == crate::server::DEFAULT_PORT {
            host
        } else {
            format!("{host}:{}", server.port)
        };
        for i in 0..100u32 {
            entries.push((hash.hash(format!("{base}-{i}").as_bytes()), idx));
        }
    }
    Continuum::build(entries, Collision::KeepFirst)
}

/// spymemcached `KetamaNodeLocator` with the default (SPYMEMCACHED) key format: names are
/// the address string without a leading `/`, `-i` appended; 160 points; MD5 four per
/// digest for `KETAMA_HASH` or when weighted (the float formula over all nodes); a later
/// node overwrites a shared point. Checked against spymemcached 2.12.3
/// (`tests/data/spymemcached`).
pub(crate) fn spymemcached(
    live: &[(u32, &Server, String)],
    hash: HashAlgorithm,
    weighted: bool,
) -> Continuum {
    let total: u64 = live.iter().map(|(_, s, _)| u64::from(s.weight)).sum();
    let mut entries = Vec::new();
    for (idx, server, address) in live {
        let base = address.strip_prefix('/').unwrap_or(address);
        if weighted {
            let per_server = float_then_double_points(server.weight, total, live.len());
            for i in 0..per_server / 4 {
                push_digest_points(&mut entries, format!("{base}-{i}").as_bytes(), *idx);
            }
        } else if hash == HashAlgorithm::JavaKetama {
            for i in 0..40u32 {
                push_digest_points(&mut entries, format!("{base}-{i}").as_bytes(), *idx);
            }
        } else {
            for i in 0..160u32 {
                entries.push((hash.hash(format!("{base}-{i}").as_bytes()), *idx));
            }
        }
    }
    Continuum::build(entries, Collision::KeepLast)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_wraps_and_takes_first_at_or_above() {
        let c = Continuum::build(vec![(100, 0), (200, 1), (300, 2)], Collision::KeepFirst);
        assert_eq!(c.lookup(0), Some(0));
        assert_eq!(c.lookup(100), Some(0));
        assert_eq!(c.lookup(101), Some(1));
        assert_eq!(c.lookup(300), Some(2));
        assert_eq!(c.lookup(301), Some(0));
        assert_eq!(c.lookup(u32::MAX), Some(0));
    }

    #[test]
    fn collisions_follow_the_policy() {
        let e = vec![(5, 0), (5, 1)];
        assert_eq!(
            Continuum::build(e.clone(), Collision::KeepFirst).lookup(1),
            Some(0)
        );
        assert_eq!(Continuum::build(e, Collision::KeepLast).lookup(1), Some(1));
    }

    #[test]
    fn weighted_point_counts() {
        // Three equal servers: 160 points each; twemproxy's 1,1,2 weights: 120/120/240.
        assert_eq!(libmemcached_weighted_points(1, 3, 3), 160);
        assert_eq!(float_then_double_points(1, 4, 3), 120);
        assert_eq!(float_then_double_points(2, 4, 3), 240);
        assert_eq!(libmemcached_weighted_points(0, 3, 3), 0);
    }

    #[test]
    fn radix_index_agrees_with_plain_search() {
        let entries: Vec<(u32, u32)> = (0..5000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761), i % 7))
            .collect();
        let c = Continuum::build(entries.clone(), Collision::KeepFirst);
        let mut sorted = entries;
        sorted.sort();
        for h in (0..u32::MAX).step_by(1_000_003) {
            let pos = sorted.partition_point(|&(p, _)| p < h);
            let want = sorted[if pos == sorted.len() { 0 } else { pos }].1;
            assert_eq!(c.lookup(h), Some(want));
        }
    }
}
