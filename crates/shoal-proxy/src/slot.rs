//! The slot through which a listening pool's sessions find what serves them now.

use parking_lot::RwLock;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Release};

use crate::route::Target;

/// Where a listening pool's current [`Target`] (its server pool, or its route) lives for
/// one worker, so a reload can swap it while client connections stay open. Sessions
/// check [`PoolSlot::generation`] (one atomic load) and take the lock only when a reload
/// has happened since they last looked.
pub struct PoolSlot {
    generation: AtomicU64,
    pool: RwLock<Target>,
}

impl PoolSlot {
    /// A slot holding `target`.
    pub fn new(target: Target) -> PoolSlot {
        PoolSlot {
            generation: AtomicU64::new(0),
            pool: RwLock::new(target),
        }
    }

    /// What new requests should use.
    pub fn load(&self) -> Target {
        self.pool.read().clone()
    }

    /// Bumped by every [`PoolSlot::store`]: an unchanged value means the pool loaded with
    /// it is still current.
    pub fn generation(&self) -> u64 {
        self.generation.load(Acquire)
    }

    /// Makes `target` the one new requests use; requests already holding the old one
    /// finish on it.
    pub fn store(&self, target: Target) {
        *self.pool.write() = target;
        self.generation.fetch_add(1, Release);
    }
}
