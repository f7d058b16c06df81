//! The in-memory index of one queue: its messages (waiting and open), its segment
//! files and its counters. Only code holding the queue's lock touches it.

use bytes::Bytes;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::File;
use std::sync::Arc;

/// One message in the index.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) seq: u64,
    pub(super) seg: u64,
    /// Offset of the payload in its segment.
    pub(super) off: u64,
    pub(super) len: u32,
    pub(super) flags: u32,
    pub(super) enq: u32,
    /// Milliseconds past `enq` when it was enqueued (0 after a restart: the log keeps
    /// seconds); only for Kestrel's `age`, in milliseconds.
    pub(super) enq_ms: u16,
    pub(super) exp: u32,
    /// The payload, when within the queue's memory budget; otherwise read from disk.
    pub(super) data: Option<Bytes>,
}

impl Entry {
    pub(super) fn expired(&self, now: u32) -> bool {
        self.exp != 0 && self.exp <= now
    }

    /// When it was enqueued, in unix milliseconds.
    pub(super) fn enqueued_ms(&self) -> u64 {
        u64::from(self.enq) * 1000 + u64::from(self.enq_ms)
    }
}

/// The wall clock in unix milliseconds (for the ages `stats` reports).
pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[derive(Debug)]
pub(super) struct Segment {
    pub(super) file: Arc<File>,
    pub(super) len: u64,
    /// Messages in this segment not yet consumed (open reads included).
    pub(super) live: u64,
    /// The log position that must be durable before this segment may be deleted, once
    /// its open reads were carried forward (0: none). Until their copies are durable the
    /// originals here are the ones a power loss would leave.
    pub(super) hold_until: u64,
}

/// What the next fsync pass must make durable besides the active segment. A roll or a new
/// queue directory only records it here: the fsyncs themselves run on the sync thread,
/// which publishes a durable position only once all of them (and the active segment's)
/// have succeeded, so no write is acknowledged before its segment and the directory
/// entries leading to it are durable.
#[derive(Debug, Default)]
pub(super) struct Unsynced {
    /// Segments sealed since the last pass, oldest first. The file handle is kept even if
    /// the segment is deleted meanwhile: until its unlink is durable it can come back after
    /// a power loss, and its acks must then be intact.
    pub(super) sealed: Vec<(u64, Arc<File>)>,
    /// A segment file was created in the queue's directory.
    pub(super) dir: bool,
    /// The queue's directory was created in the queues directory.
    pub(super) parent: bool,
    /// Open reads were carried forward into the active segment: its fsync releases the
    /// segments they came from (see `Segment::hold_until`).
    pub(super) carried: bool,
}

impl Unsynced {
    pub(super) fn is_empty(&self) -> bool {
        self.sealed.is_empty() && !self.dir && !self.parent && !self.carried
    }
}

#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Counters {
    pub(super) enqueued: u64,
    pub(super) dequeued: u64,
    pub(super) expired: u64,
    pub(super) discarded: u64,
    /// Open reads rewritten into the active segment so an old segment could go.
    pub(super) carried: u64,
    /// Messages found in the log at startup.
    pub(super) recovered: u64,
    /// Reads opened (Kestrel's `transactions`).
    pub(super) transactions: u64,
    /// Open reads given back by `/abort` or a disconnect (Kestrel's
    /// `canceled_transactions`).
    pub(super) canceled_transactions: u64,
    /// `flush` of this queue, `flush_all` included (Kestrel's `total_flushes`).
    pub(super) flushes: u64,
}

#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) ready: VecDeque<Entry>,
    pub(super) open: HashMap<u64, Entry>,
    /// Expired messages of a queue with `expire_to`, taken off the head (never delivered
    /// again) and waiting to be moved; consumed here only once their copies are stored.
    pub(super) expiring: VecDeque<Entry>,
    pub(super) segments: BTreeMap<u64, Segment>,
    pub(super) dir_ready: bool,
    pub(super) next_seq: u64,
    pub(super) next_seg: u64,
    /// Consumed ranges `(first seq, count)` not yet written.
    pub(super) acks: Vec<(u64, u64)>,
    pub(super) bytes: u64,
    pub(super) mem: u64,
    /// Messages (waiting and open) whose payload is in memory.
    pub(super) mem_items: u64,
    /// Milliseconds the last message taken (removed or opened) had waited: Kestrel's `age`.
    pub(super) last_read_age_ms: u64,
    pub(super) disk: u64,
    /// Bytes ever written to this queue's log by this process: the log sequence number
    /// durability waits are expressed in.
    pub(super) written: u64,
    /// Writes (appends) ever made: what one fsync covers is counted in these.
    pub(super) writes: u64,
    pub(super) counters: Counters,
    /// Sealed segments and directory entries the sync thread has yet to fsync.
    pub(super) unsynced: Unsynced,
    pub(super) deleted: bool,
    pub(super) wbuf: Vec<u8>,
}
