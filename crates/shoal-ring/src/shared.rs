//! A ring that changes while readers keep reading without locks.

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use crate::{Ring, RingConfig, RingError, Server};

/// A [`Ring`] behind an atomically swapped `Arc`: lookups are lock-free loads of the
/// current ring; changes build a new ring off to the side and publish it in one swap, so
/// a reader sees either the old or the new placement, never a mix. Writers are
/// serialized so no change is lost.
#[derive(Debug)]
pub struct SharedRing {
    current: ArcSwap<Ring>,
    writer: Mutex<()>,
}

impl SharedRing {
    /// Builds the initial ring (same errors as [`Ring::new`]).
    pub fn new(config: RingConfig, servers: Vec<Server>) -> Result<SharedRing, RingError> {
        Ok(SharedRing::from_ring(Ring::new(config, servers)?))
    }

    /// Wraps an existing ring.
    pub fn from_ring(ring: Ring) -> SharedRing {
        SharedRing {
            current: ArcSwap::from_pointee(ring),
            writer: Mutex::new(()),
        }
    }

    /// The current ring; holding it pins that version (later swaps do not affect it).
    pub fn load(&self) -> Arc<Ring> {
        self.current.load_full()
    }

    /// Locates `key` in the current ring without taking a lock.
    #[inline]
    pub fn locate(&self, key: &[u8]) -> Result<usize, RingError> {
        self.current.load().locate(key)
    }

    fn update(&self, f: impl FnOnce(&Ring) -> Result<Ring, RingError>) -> Result<(), RingError> {
        // A poisoned lock only means another writer panicked mid-build; the published
        // ring is still consistent, so carry on.
        let _guard = self
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let next = f(&self.current.load())?;
        self.current.store(Arc::new(next));
        Ok(())
    }

    /// Ejects server `index` (see [`Ring::with_ejected`]).
    pub fn eject(&self, index: usize) -> Result<(), RingError> {
        self.update(|r| r.with_ejected(index))
    }

    /// Brings server `index` back (see [`Ring::with_restored`]).
    pub fn restore(&self, index: usize) -> Result<(), RingError> {
        self.update(|r| r.with_restored(index))
    }

    /// Appends a server (see [`Ring::with_added`]).
    pub fn add(&self, server: Server) -> Result<(), RingError> {
        self.update(|r| r.with_added(server))
    }

    /// Removes server `index` (see [`Ring::with_removed`]).
    pub fn remove(&self, index: usize) -> Result<(), RingError> {
        self.update(|r| r.with_removed(index))
    }
}
