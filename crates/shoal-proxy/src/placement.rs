//! Which server a key goes to: twemproxy's distributions over shoal-ring, with
//! ejection and restoration published atomically (lookups never take a lock).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use parking_lot::Mutex;
use shoal_ring::{Distribution, RingConfig, RingError, Server, SharedRing};

use crate::config::{DistributionKind, PoolConfig};

/// A pool's placement. For `ketama` and `modula` the server of a key is exactly
/// twemproxy 0.5.0's for the same servers, weights, names, hash and hash tag, including
/// after ejections (the ring is rebuilt over the live servers as twemproxy rebuilds its
/// continuum). `random` picks a live server uniformly.
#[derive(Debug)]
pub struct Placement {
    ring: SharedRing,
    random: bool,
    replicas: usize,
    /// Serialises ring rebuilds so concurrent ejections are not lost.
    update: Mutex<()>,
    seed: AtomicU64,
}

impl Placement {
    /// Builds the placement for a pool.
    pub fn new(pool: &PoolConfig) -> Result<Placement, RingError> {
        let distribution = match pool.distribution {
            DistributionKind::Ketama => Distribution::TwemproxyKetama,
            // Random keeps the weighted-modula ring only to track which servers are live.
            DistributionKind::Modula | DistributionKind::Random => Distribution::WeightedModula,
        };
        let mut config = RingConfig::new(distribution).with_hash(pool.hash);
        config.hash_tag = pool.hash_tag;
        Ok(Placement {
            ring: SharedRing::new(config, pool.servers.clone())?,
            random: pool.distribution == DistributionKind::Random,
            replicas: pool.replicas,
            update: Mutex::new(()),
            seed: AtomicU64::new(0x9e37_79b9_7f4a_7c15),
        })
    }

    /// The servers, in pool order (twemproxy's sorted order).
    pub fn servers(&self) -> Vec<Server> {
        self.ring.load().servers().to_vec()
    }

    /// The index of the server `key` goes to now.
    pub fn locate(&self, key: &[u8]) -> Result<usize, RingError> {
        if self.random {
            let ring = self.ring.load();
            let live = ring.live_count();
            if live == 0 {
                return Err(RingError::NoLiveServers);
            }
            let r = self.next_random() % live as u64;
            return (0..ring.servers().len())
                .filter(|&i| !ring.is_ejected(i))
                .nth(r as usize)
                .ok_or(RingError::NoLiveServers);
        }
        self.ring.locate(key)
    }

    /// The servers holding `key` in a replicated pool, in failover order: the ring's
    /// server, then the next live servers in pool order (wrapping), `replicas`
    /// in all (fewer if fewer are live).
    pub fn replicas(&self, key: &[u8]) -> Result<Vec<usize>, RingError> {
        let first = self.locate(key)?;
        let ring = self.ring.load();
        let n = ring.servers().len();
        let mut out = Vec::with_capacity(self.replicas);
        out.push(first);
        let mut i = first;
        for _ in 1..n {
            if out.len() >= self.replicas {
                break;
            }
            i = (i + 1) % n;
            if !ring.is_ejected(i) {
                out.push(i);
            }
        }
        Ok(out)
    }

    /// How many copies of each key the pool keeps.
    pub fn replica_count(&self) -> usize {
        self.replicas
    }

    /// Every live server.
    pub fn live(&self) -> Vec<usize> {
        let ring = self.ring.load();
        (0..ring.servers().len())
            .filter(|&i| !ring.is_ejected(i))
            .collect()
    }

    /// Whether server `index` is ejected.
    pub fn is_ejected(&self, index: usize) -> bool {
        self.ring.load().is_ejected(index)
    }

    /// Takes server `index` out of the ring; true if it was live.
    pub fn eject(&self, index: usize) -> bool {
        let _g = self.update.lock();
        if self.ring.load().is_ejected(index) {
            return false;
        }
        self.ring.eject(index).is_ok()
    }

    /// Puts server `index` back; true if it was ejected.
    pub fn restore(&self, index: usize) -> bool {
        let _g = self.update.lock();
        if !self.ring.load().is_ejected(index) {
            return false;
        }
        self.ring.restore(index).is_ok()
    }

    fn next_random(&self) -> u64 {
        // splitmix64 over an atomic counter: cheap, lock-free, good enough to spread load.
        let mut z = self.seed.fetch_add(0x9e37_79b9_7f4a_7c15, Relaxed);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}
