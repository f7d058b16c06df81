//! Flash reads made off the thread that serves requests.
//!
//! [`Store::get`](crate::Store::get) reads a flash-resident value where it is called: the calling thread
//! waits for the disk, and with it every connection that thread serves. memcached queues
//! such reads to its IO threads and goes on serving. [`FlashReads`] lets a server do the
//! same:
//! 1. [`Store::fetch`](crate::Store::fetch) (or [`Store::update_fetching`](crate::Store::update_fetching)) meets a stub whose value has not
//!    been read: it records a [`FlashRead`] in the caller's [`FlashReads`] and answers
//!    "reading" with nothing changed or counted;
//! 2. the caller runs the reads elsewhere ([`Store::run_flash_read`](crate::Store::run_flash_read), on any thread,
//!    with a clone of the store) and hands the results back ([`FlashReads::done`]);
//! 3. it asks again, and this time the value read is served, if the key's item is still
//!    that stub (a stub moved by eviction still is; one replaced, or whose value
//!    compaction moved, is looked at anew, so a value is never served for the wrong item).
//!
//! [`Store::want_read`](crate::Store::want_read) records reads ahead of the requests that will ask (the other keys
//! of a multi-get, pipelined gets behind it), so they are read together.

use crate::flash::{FlashMiss, Locator};
use crate::index::Ref;
use crate::tier::Loaded;

/// What a [`Store::fetch`](crate::Store::fetch) found.
#[derive(Debug, PartialEq, Eq)]
pub enum Fetch<R> {
    /// The item, as the callback saw it.
    Found(R),
    /// No live item (or its value could not be read back).
    Missing,
    /// The item's value is on flash and not read yet: a [`FlashRead`] was recorded.
    Reading,
}

/// One value to read from flash for a key's stub: made by the store, run by the caller
/// on any thread ([`Store::run_flash_read`](crate::Store::run_flash_read)).
#[derive(Debug)]
pub struct FlashRead {
    key: Box<[u8]>,
    loc: Ref,
    locator: Locator,
}

impl FlashRead {
    /// Reads the value (waiting for the disk) and checks it, with `load` (the store's);
    /// see [`Store::run_flash_read`](crate::Store::run_flash_read)(crate::Store::run_flash_read).
    pub(crate) fn run_with(
        self,
        load: impl FnOnce(Ref, Locator, &[u8]) -> Result<Loaded, FlashMiss>,
    ) -> FlashReadDone {
        let result = load(self.loc, self.locator, &self.key);
        FlashReadDone {
            key: self.key,
            locator: self.locator,
            result,
        }
    }

    /// The key the value is read for.
    pub fn key(&self) -> &[u8] {
        &self.key
    }
}

/// A [`FlashRead`] done: the value, or why it could not be read.
#[derive(Debug)]
pub struct FlashReadDone {
    key: Box<[u8]>,
    locator: Locator,
    result: Result<Loaded, FlashMiss>,
}

/// One requester's flash reads: those wanted and not yet run, and those done and not yet
/// served. Empty, it holds no memory.
#[derive(Debug)]
pub struct FlashReads {
    wanted: Vec<FlashRead>,
    ready: Vec<FlashReadDone>,
    /// Value bytes wanted and ready together, which
    /// [`Store::want_read`](crate::Store::want_read) keeps under `read_ahead`.
    bytes: usize,
    /// See [`FlashReads::set_read_ahead`].
    read_ahead: usize,
    /// Read in place instead of recording reads (see [`FlashReads::set_blocking`]).
    blocking: bool,
}

/// Value bytes reads ahead may hold by default (see [`FlashReads::set_read_ahead`]):
/// reading ahead is an optimisation, and must not let one requester hold much memory.
pub const READ_AHEAD_BYTES: usize = 1 << 20;

impl Default for FlashReads {
    fn default() -> FlashReads {
        FlashReads {
            wanted: Vec::new(),
            ready: Vec::new(),
            bytes: 0,
            read_ahead: READ_AHEAD_BYTES,
            blocking: false,
        }
    }
}

impl FlashReads {
    /// No reads.
    pub fn new() -> FlashReads {
        FlashReads::default()
    }

    /// Value bytes that wanted and unserved reads may hold together before
    /// [`Store::want_read`](crate::Store::want_read) records no more (reads a request
    /// needs now are never refused). [`READ_AHEAD_BYTES`] by default; 0 turns reading
    /// ahead off.
    pub fn set_read_ahead(&mut self, bytes: usize) {
        self.read_ahead = bytes;
    }

    /// Whether reads are waiting to be run.
    pub fn has_wanted(&self) -> bool {
        !self.wanted.is_empty()
    }

    /// The key of the first read waiting to be run (the one a stopped request needs).
    pub fn first_wanted(&self) -> Option<&[u8]> {
        self.wanted.first().map(|w| w.key())
    }

    /// The reads waiting to be run, taken out.
    pub fn take_wanted(&mut self) -> std::vec::Drain<'_, FlashRead> {
        self.wanted.drain(..)
    }

    /// Hands back a read that was run, for the next fetch of its key.
    pub fn done(&mut self, done: FlashReadDone) {
        self.ready.push(done);
    }

    /// With `true`, fetches read flash in place (waiting for the disk) rather than
    /// recording reads: for a caller that has asked again and again and keeps finding the
    /// stub changed.
    pub fn set_blocking(&mut self, blocking: bool) {
        self.blocking = blocking;
    }

    /// Whether fetches read in place.
    pub fn blocking(&self) -> bool {
        self.blocking
    }

    /// Drops every read done and not served (at the end of a turn: what was read ahead
    /// for requests that did not come).
    pub fn clear(&mut self) {
        self.ready.clear();
        self.wanted.clear();
        self.bytes = 0;
    }

    /// Whether the reads hold nothing.
    pub fn is_empty(&self) -> bool {
        self.wanted.is_empty() && self.ready.is_empty()
    }

    /// Records a read of `locator`'s value for `key`, unless one is wanted or done
    /// already, or read-ahead is over its bytes and `ahead` (a read for a request still to
    /// come). Returns whether one was recorded.
    pub(crate) fn want(&mut self, key: &[u8], loc: Ref, locator: Locator, ahead: bool) -> bool {
        let known = self.wanted.iter().any(|w| w.locator == locator)
            || self.ready.iter().any(|r| r.locator == locator);
        let len = locator.len as usize;
        if known || (ahead && self.bytes + len > self.read_ahead) {
            return false;
        }
        self.bytes += len;
        self.wanted.push(FlashRead {
            key: key.into(),
            loc,
            locator,
        });
        true
    }

    /// Keeps a read made by the store itself (from the page cache) for the next fetch.
    pub(crate) fn done_for(
        &mut self,
        key: &[u8],
        locator: Locator,
        result: Result<Loaded, FlashMiss>,
    ) {
        self.bytes += locator.len as usize;
        self.ready.push(FlashReadDone {
            key: key.into(),
            locator,
            result,
        });
    }

    /// The read done for `key`'s stub with `locator`, taken out.
    pub(crate) fn take(
        &mut self,
        key: &[u8],
        locator: Locator,
    ) -> Option<Result<Loaded, FlashMiss>> {
        let i = self
            .ready
            .iter()
            .position(|r| r.locator == locator && &*r.key == key)?;
        let done = self.ready.swap_remove(i);
        self.bytes = self.bytes.saturating_sub(locator.len as usize);
        Some(done.result)
    }
}
