//! The flash file's page table: what each page holds, counted as stubs come and go.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// A page no record is in; it is the next to be written.
pub const FREE: u32 = 0;
/// The page records are being appended to.
pub const OPEN: u32 = 1;
/// A full page, read until its records are all gone or it is reused.
pub const SEALED: u32 = 2;

/// One page of the flash file.
#[derive(Debug, Default)]
pub struct Page {
    /// Raised each time the page is reused; stubs of an older version read as misses.
    pub version: AtomicU32,
    /// FREE, OPEN or SEALED.
    pub state: AtomicU32,
    /// Records written to it (bytes, padding included).
    pub written: AtomicU64,
    /// Records still pointed at by a stub.
    pub live_objects: AtomicU64,
    /// Their bytes.
    pub live_bytes: AtomicU64,
    /// The bucket (memcached's page bucket id) of the stream that opened it; 0 while free.
    pub bucket: AtomicU32,
}

impl Page {
    /// Empties the page for reuse under a new version; returns the objects and bytes that
    /// were still live in it (lost, as memcached's page evictions lose them).
    pub fn reset(&self) -> (u64, u64) {
        self.version.fetch_add(1, Ordering::AcqRel);
        self.state.store(FREE, Ordering::Release);
        self.written.store(0, Ordering::Relaxed);
        self.bucket.store(0, Ordering::Relaxed);
        (
            self.live_objects.swap(0, Ordering::Relaxed),
            self.live_bytes.swap(0, Ordering::Relaxed),
        )
    }

    /// Live bytes over written bytes: 1.0 for a page nothing was deleted from.
    pub fn fill(&self) -> f64 {
        let written = self.written.load(Ordering::Relaxed).max(1) as f64;
        self.live_bytes.load(Ordering::Relaxed) as f64 / written
    }
}
