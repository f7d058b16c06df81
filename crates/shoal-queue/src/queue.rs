//! One queue: its in-memory index, its segment files, consumption and reclamation.
//!
//! Every state change goes through [`Queue`]'s lock and is appended to the queue's log
//! before it becomes visible: a message is in the index only after its record has been
//! written, so a failed write (a full disk) leaves nothing half-stored. Consumption is
//! recorded as ack records (ranges of sequence numbers), written before the consumer's
//! reply goes out. A segment whose messages have all been consumed is deleted at once.

use crate::config::{FsyncPolicy, FullPolicy, QueueLimits, WriteFault};
use crate::error::QueueError;
use crate::record::{self, Kind, HEADER_LEN};
use crate::segment::{self, ScanEnd, QUARANTINE_SUFFIX};
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{watch, Notify};

/// memcached's rule: an exptime up to 30 days is relative, larger is a unix time.
const RELATIVE_EXPTIME_MAX: i64 = 60 * 60 * 24 * 30;

/// Converts a memcached exptime into an absolute expiry in unix seconds (0 = never).
/// A negative exptime, or an absolute one in the past, yields a time `<= now`: expired.
pub fn expiry_from_exptime(exptime: i64, now: u32) -> u32 {
    match exptime {
        0 => 0,
        e if e < 0 => now.max(1),
        e if e <= RELATIVE_EXPTIME_MAX => now.saturating_add(e as u32),
        e => u32::try_from(e).unwrap_or(u32::MAX),
    }
}

/// The parts of the engine configuration a queue needs.
#[derive(Debug)]
pub(crate) struct Ctx {
    pub fsync: FsyncPolicy,
    pub segment_size: u64,
    pub max_item_size: usize,
    pub memory_per_queue: u64,
    pub fault: Option<Arc<WriteFault>>,
    /// Where consumed segments are sent to be unlinked. Unlinking a 64 MiB file takes
    /// ~10-20 ms on ext4, far too long to hold a queue's lock or an event loop for.
    pub reclaim: Option<std::sync::mpsc::Sender<PathBuf>>,
}

impl Ctx {
    fn remove_segment(&self, path: PathBuf) {
        let path = match &self.reclaim {
            Some(tx) => match tx.send(path) {
                Ok(()) => return,
                Err(e) => e.0,
            },
            None => path,
        };
        if let Err(e) = fs::remove_file(&path) {
            tracing::warn!("removing {}: {e}", path.display());
        }
    }
}

/// One message in the index.
#[derive(Debug)]
struct Entry {
    seq: u64,
    seg: u64,
    /// Offset of the payload in its segment.
    off: u64,
    len: u32,
    flags: u32,
    enq: u32,
    exp: u32,
    /// The payload, when within the queue's memory budget; otherwise read from disk.
    data: Option<Bytes>,
}

impl Entry {
    fn expired(&self, now: u32) -> bool {
        self.exp != 0 && self.exp <= now
    }
}

#[derive(Debug)]
struct Segment {
    file: Arc<File>,
    len: u64,
    /// Messages in this segment not yet consumed (open reads included).
    live: u64,
}

#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    enqueued: u64,
    dequeued: u64,
    expired: u64,
    discarded: u64,
}

#[derive(Debug, Default)]
struct State {
    ready: VecDeque<Entry>,
    open: HashMap<u64, Entry>,
    segments: BTreeMap<u64, Segment>,
    dir_ready: bool,
    next_seq: u64,
    next_seg: u64,
    /// Consumed ranges `(first seq, count)` not yet written.
    acks: Vec<(u64, u64)>,
    bytes: u64,
    mem: u64,
    disk: u64,
    /// Bytes ever written to this queue's log by this process: the log sequence number
    /// durability waits are expressed in.
    written: u64,
    /// Writes (appends) ever made: what one fsync covers is counted in these.
    writes: u64,
    counters: Counters,
    deleted: bool,
    wbuf: Vec<u8>,
}

/// Durability progress, published to waiting connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Synced {
    /// Every write up to this log sequence number is on stable storage.
    pub lsn: u64,
    /// An fsync failed: later waits cannot be satisfied.
    pub failed: bool,
}

/// How [`Queue::dequeue`] takes the head message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// Remove it and record its consumption.
    Remove,
    /// Move it to the open reads; [`Queue::close`] consumes it, [`Queue::abort`] puts it
    /// back at the head.
    Open,
    /// Return it and leave it at the head.
    Peek,
}

/// A dequeued message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// Its sequence number in the queue (the handle for close/abort of an open read).
    pub seq: u64,
    /// Client flags given at enqueue.
    pub flags: u32,
    /// The payload.
    pub data: Bytes,
}

/// A snapshot of a queue's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Messages waiting (not counting open reads).
    pub items: u64,
    /// Payload bytes of waiting and open messages.
    pub bytes: u64,
    /// Age in seconds of the message at the head, 0 when empty.
    pub oldest_age_secs: u64,
    /// Messages accepted since start.
    pub enqueued: u64,
    /// Messages consumed since start.
    pub dequeued: u64,
    /// Messages dropped because they expired.
    pub expired: u64,
    /// Messages dropped to make room (discard-oldest policy).
    pub discarded: u64,
    /// Reads opened and neither closed nor aborted.
    pub open_reads: u64,
    /// Bytes of this queue's segment files.
    pub disk_bytes: u64,
    /// Number of segment files.
    pub segments: u64,
    /// Payload bytes held in memory.
    pub mem_bytes: u64,
}

/// What recovery found in a queue's directory.
#[derive(Debug, Default)]
pub struct RecoveryReport {
    /// Messages recovered.
    pub messages: u64,
    /// Segments whose torn tail was cut, with the number of bytes cut.
    pub torn: Vec<(PathBuf, u64)>,
    /// Segments renamed aside as corrupt, with the messages in their valid prefix.
    pub quarantined: Vec<(PathBuf, u64)>,
}

/// One durable FIFO queue. All methods are safe to call from many threads.
#[derive(Debug)]
pub struct Queue {
    name: String,
    dir: PathBuf,
    ctx: Arc<Ctx>,
    limits: QueueLimits,
    state: Mutex<State>,
    pub(crate) synced: watch::Sender<Synced>,
    pub(crate) sync_queued: AtomicBool,
    arrivals: Notify,
    /// `State::writes` as of the last fsync (only the sync thread writes it).
    synced_writes: AtomicU64,
}

fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

impl Queue {
    pub(crate) fn new(name: &str, dir: PathBuf, ctx: Arc<Ctx>, limits: QueueLimits) -> Queue {
        Queue {
            name: name.to_string(),
            dir,
            ctx,
            limits,
            state: Mutex::new(State {
                // A new queue's segment ids start at the current time in nanoseconds, so
                // they never collide with those of a deleted queue of the same name
                // whose files the reclaim thread may still be unlinking.
                next_seg: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX / 2)),
                ..State::default()
            }),
            synced: watch::Sender::new(Synced::default()),
            sync_queued: AtomicBool::new(false),
            arrivals: Notify::new(),
            synced_writes: AtomicU64::new(0),
        }
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Notified (all waiters) whenever a message becomes available or the queue is
    /// deleted; blocking reads wait on it instead of polling.
    pub fn arrivals(&self) -> &Notify {
        &self.arrivals
    }

    /// Appends a message. Returns the log sequence number to wait on for durability
    /// (see [`crate::Engine::durable`]). On any error nothing was stored. A message whose
    /// expiry (`exp`, unix seconds, 0 = never) is already past is accepted and dropped.
    pub fn enqueue(
        &self,
        flags: u32,
        exp: u32,
        payload: &[u8],
        now: u32,
    ) -> Result<u64, QueueError> {
        if payload.len() > self.ctx.max_item_size {
            return Err(QueueError::TooLarge);
        }
        let exp = match self.limits.max_age_secs {
            0 => exp,
            age => {
                let cap = now.saturating_add(age);
                if exp == 0 {
                    cap
                } else {
                    exp.min(cap)
                }
            }
        };
        let mut st = self.state.lock();
        if st.deleted {
            return Err(QueueError::Write(io::Error::other("queue deleted")));
        }
        if exp != 0 && exp <= now {
            st.counters.expired += 1;
            return Ok(st.written);
        }
        self.make_room(&mut st, payload.len() as u64, now)?;
        let seq = st.next_seq;
        let times = record::pack_times(now, exp);
        let (seg, msg_at) = self
            .write(&mut st, Some((flags, seq, times, payload)))
            .map_err(QueueError::Write)?;
        st.next_seq += 1;
        let data = if st.mem + payload.len() as u64 <= self.ctx.memory_per_queue {
            st.mem += payload.len() as u64;
            Some(Bytes::copy_from_slice(payload))
        } else {
            None
        };
        let len = payload.len() as u32;
        if let Some(s) = st.segments.get_mut(&seg) {
            s.live += 1;
        }
        st.bytes += u64::from(len);
        st.counters.enqueued += 1;
        st.ready.push_back(Entry {
            seq,
            seg,
            off: msg_at + HEADER_LEN as u64,
            len,
            flags,
            enq: now,
            exp,
            data,
        });
        let lsn = st.written;
        drop(st);
        self.arrivals.notify_waiters();
        Ok(lsn)
    }

    /// Takes the head message (skipping and dropping expired ones). Consumption by
    /// [`Take::Remove`] is recorded in memory; [`Queue::commit`] writes it, and must
    /// succeed before the message is handed to a client for at-most-once delivery to
    /// survive a restart.
    pub fn dequeue(&self, how: Take, now: u32) -> Result<Option<Delivery>, QueueError> {
        let mut st = self.state.lock();
        self.drop_expired_head(&mut st, now);
        let Some(front) = st.ready.front() else {
            return Ok(None);
        };
        let data = match &front.data {
            Some(d) => d.clone(),
            None => {
                let seg = st
                    .segments
                    .get(&front.seg)
                    .ok_or_else(|| QueueError::Read(io::Error::other("segment missing")))?;
                let mut buf = vec![0u8; front.len as usize];
                seg.file
                    .read_exact_at(&mut buf, front.off)
                    .map_err(QueueError::Read)?;
                Bytes::from(buf)
            }
        };
        let d = Delivery {
            seq: front.seq,
            flags: front.flags,
            data,
        };
        match how {
            Take::Peek => {}
            Take::Remove => {
                if let Some(e) = st.ready.pop_front() {
                    Self::consume(&mut st, e);
                    st.counters.dequeued += 1;
                    self.gc(&mut st);
                }
            }
            Take::Open => {
                if let Some(e) = st.ready.pop_front() {
                    st.open.insert(e.seq, e);
                }
            }
        }
        Ok(Some(d))
    }

    /// Consumes the open read `seq`. False if it is not open (already closed, aborted,
    /// or the queue was flushed).
    pub fn close(&self, seq: u64) -> bool {
        let mut st = self.state.lock();
        let Some(e) = st.open.remove(&seq) else {
            return false;
        };
        Self::consume(&mut st, e);
        st.counters.dequeued += 1;
        self.gc(&mut st);
        true
    }

    /// Returns the open read `seq` to the head of the queue. False if it is not open.
    pub fn abort(&self, seq: u64) -> bool {
        let mut st = self.state.lock();
        let Some(e) = st.open.remove(&seq) else {
            return false;
        };
        st.ready.push_front(e);
        drop(st);
        self.arrivals.notify_waiters();
        true
    }

    /// Writes consumption recorded since the last write. Returns the log sequence number
    /// to wait on. On failure the acks stay pending and are retried by the next write: a
    /// crash before then redelivers those messages rather than losing any.
    pub fn commit(&self) -> Result<u64, QueueError> {
        let mut st = self.state.lock();
        if st.acks.is_empty() || st.deleted {
            return Ok(st.written);
        }
        self.write(&mut st, None).map_err(QueueError::Write)?;
        Ok(st.written)
    }

    /// Drops every message, waiting and open, and returns how many were dropped.
    pub fn flush(&self) -> Result<u64, QueueError> {
        let mut st = self.state.lock();
        let mut n = 0u64;
        let mut all: Vec<Entry> = st.ready.drain(..).collect();
        all.extend(st.open.drain().map(|(_, e)| e));
        all.sort_by_key(|e| e.seq);
        for e in all {
            Self::consume(&mut st, e);
            n += 1;
        }
        self.gc(&mut st);
        drop(st);
        self.commit()?;
        Ok(n)
    }

    /// Drops expired messages at the head and returns how many. Cheap; called
    /// periodically, and by Kestrel's `flush_expired`. (As in Kestrel, an expired message
    /// behind a live one waits until it reaches the head; it is never delivered.)
    pub fn expire(&self, now: u32) -> u64 {
        let mut st = self.state.lock();
        if !st.ready.front().is_some_and(|e| e.expired(now)) {
            return 0;
        }
        let before = st.counters.expired;
        self.drop_expired_head(&mut st, now);
        st.counters.expired - before
    }

    /// Counters and sizes now.
    pub fn stats(&self, now: u32) -> QueueStats {
        let st = self.state.lock();
        QueueStats {
            items: st.ready.len() as u64,
            bytes: st.bytes,
            oldest_age_secs: st
                .ready
                .front()
                .map_or(0, |e| u64::from(now.saturating_sub(e.enq))),
            enqueued: st.counters.enqueued,
            dequeued: st.counters.dequeued,
            expired: st.counters.expired,
            discarded: st.counters.discarded,
            open_reads: st.open.len() as u64,
            disk_bytes: st.disk,
            segments: st.segments.len() as u64,
            mem_bytes: st.mem,
        }
    }

    /// Forces everything written so far to stable storage and publishes the new durable
    /// position. Called by the sync thread, never on a connection's thread.
    pub(crate) fn sync_now(&self, metrics: &SyncMetrics) {
        let (file, lsn, writes) = {
            let st = self.state.lock();
            if st.written <= self.synced.borrow().lsn {
                return;
            }
            match st.segments.values().next_back() {
                Some(s) => (s.file.clone(), st.written, st.writes),
                None => return,
            }
        };
        let start = Instant::now();
        let res = file.sync_data();
        metrics.fsync_ns.record_duration(start.elapsed());
        let before = self.synced_writes.swap(writes, Ordering::Relaxed);
        metrics.batch_writes.record(writes.saturating_sub(before));
        match res {
            Ok(()) => {
                self.synced.send_if_modified(|s| {
                    let adv = lsn > s.lsn;
                    s.lsn = s.lsn.max(lsn);
                    adv
                });
            }
            Err(e) => {
                // After a failed fsync the kernel may have dropped the dirty pages, so
                // nothing written since the last good fsync may be acknowledged.
                tracing::error!(queue = %self.name, "fsync failed: {e}");
                self.synced.send_modify(|s| s.failed = true);
            }
        }
    }

    /// Forgets everything (the engine deletes the files) and releases every waiter.
    pub(crate) fn mark_deleted(&self) {
        let mut st = self.state.lock();
        st.deleted = true;
        st.ready.clear();
        st.open.clear();
        st.segments.clear();
        st.acks.clear();
        st.bytes = 0;
        st.mem = 0;
        st.disk = 0;
        drop(st);
        self.synced.send_modify(|s| s.lsn = u64::MAX);
        self.arrivals.notify_waiters();
    }

    fn consume(st: &mut State, e: Entry) {
        match st.acks.last_mut() {
            Some((first, count)) if *first + *count == e.seq => *count += 1,
            _ => st.acks.push((e.seq, 1)),
        }
        if let Some(s) = st.segments.get_mut(&e.seg) {
            s.live = s.live.saturating_sub(1);
        }
        st.bytes -= u64::from(e.len);
        if e.data.is_some() {
            st.mem -= u64::from(e.len);
        }
    }

    fn drop_expired_head(&self, st: &mut State, now: u32) {
        let mut dropped = false;
        while st.ready.front().is_some_and(|e| e.expired(now)) {
            if let Some(e) = st.ready.pop_front() {
                Self::consume(st, e);
                st.counters.expired += 1;
                dropped = true;
            }
        }
        if dropped {
            self.gc(st);
        }
    }

    fn make_room(&self, st: &mut State, len: u64, now: u32) -> Result<(), QueueError> {
        self.drop_expired_head(st, now);
        let lim = self.limits;
        let over = |st: &State| {
            (lim.max_items > 0 && (st.ready.len() + st.open.len()) as u64 >= lim.max_items)
                || (lim.max_bytes > 0 && st.bytes + len > lim.max_bytes)
        };
        if !over(st) {
            return Ok(());
        }
        if lim.full == FullPolicy::Reject {
            return Err(QueueError::Full);
        }
        while over(st) {
            let Some(e) = st.ready.pop_front() else {
                return Err(QueueError::Full);
            };
            Self::consume(st, e);
            st.counters.discarded += 1;
        }
        self.gc(st);
        Ok(())
    }

    /// Writes pending acks and, optionally, one message record, in a single write at the
    /// end of the active segment. Returns the segment and offset of the message record.
    fn write(&self, st: &mut State, msg: Option<(u32, u64, u64, &[u8])>) -> io::Result<(u64, u64)> {
        let mut buf = std::mem::take(&mut st.wbuf);
        buf.clear();
        for &(first, count) in &st.acks {
            record::encode(&mut buf, Kind::Ack, 0, first, count, b"");
        }
        let msg_at = buf.len() as u64;
        if let Some((flags, seq, times, payload)) = msg {
            record::encode(&mut buf, Kind::Message, flags, seq, times, payload);
        }
        let res = self.append(st, &buf);
        st.wbuf = buf;
        let (seg, start) = res?;
        st.acks.clear();
        Ok((seg, start + msg_at))
    }

    fn append(&self, st: &mut State, buf: &[u8]) -> io::Result<(u64, u64)> {
        if let Some(f) = &self.ctx.fault {
            f.check()?;
        }
        if !st.dir_ready {
            fs::create_dir_all(&self.dir)?;
            if self.ctx.fsync != FsyncPolicy::Never {
                if let Some(parent) = self.dir.parent() {
                    fsync_dir(parent)?;
                }
            }
            st.dir_ready = true;
        }
        let roll = match st.segments.values().next_back() {
            None => true,
            Some(s) => {
                s.len > HEADER_LEN as u64 && s.len + buf.len() as u64 > self.ctx.segment_size
            }
        };
        if roll {
            self.roll(st)?;
        }
        let Some((&id, seg)) = st.segments.iter_mut().next_back() else {
            return Err(io::Error::other("no active segment"));
        };
        let at = seg.len;
        if let Err(e) = seg.file.write_all_at(buf, at) {
            // Cut a partial write so the next append starts on a record boundary.
            let _ = seg.file.set_len(at);
            return Err(e);
        }
        seg.len += buf.len() as u64;
        st.disk += buf.len() as u64;
        st.written += buf.len() as u64;
        st.writes += 1;
        Ok((id, at))
    }

    /// Seals the active segment and starts a new one.
    fn roll(&self, st: &mut State) -> io::Result<()> {
        let sync = self.ctx.fsync != FsyncPolicy::Never;
        if sync {
            // The sync thread only ever fsyncs the active segment, so a sealed one must
            // be made durable here, before writes move on.
            if let Some(s) = st.segments.values().next_back() {
                s.file.sync_data()?;
            }
        }
        let id = st.next_seg;
        st.next_seg += 1;
        let path = segment::segment_path(&self.dir, id);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        let mut hdr = Vec::with_capacity(HEADER_LEN);
        record::encode(&mut hdr, Kind::SegmentStart, 0, st.next_seq, 0, b"");
        let created =
            file.write_all_at(&hdr, 0)
                .and_then(|()| if sync { fsync_dir(&self.dir) } else { Ok(()) });
        if let Err(e) = created {
            drop(file);
            let _ = fs::remove_file(&path);
            return Err(e);
        }
        st.segments.insert(
            id,
            Segment {
                file: Arc::new(file),
                len: HEADER_LEN as u64,
                live: 0,
            },
        );
        st.disk += HEADER_LEN as u64;
        Ok(())
    }

    /// Deletes fully consumed segments from the oldest on, and when the queue is empty
    /// replaces a large active segment with a fresh one, so a drained queue holds one
    /// small segment. Only a prefix is deleted: a later segment may hold acks for
    /// messages in an earlier one, so deleting out of order could resurrect them.
    fn gc(&self, st: &mut State) {
        while st.segments.len() > 1 {
            let Some((&id, seg)) = st.segments.iter().next() else {
                break;
            };
            if seg.live > 0 {
                break;
            }
            st.disk -= seg.len;
            st.segments.remove(&id);
            // A crash before the unlink only brings back a segment whose messages
            // are all acked, which recovery deletes again.
            self.ctx
                .remove_segment(segment::segment_path(&self.dir, id));
        }
        let drained_roll = (self.ctx.segment_size / 2).min(1 << 20);
        if st.ready.is_empty()
            && st.open.is_empty()
            && st.segments.len() == 1
            && st
                .segments
                .values()
                .next()
                .is_some_and(|s| s.len > drained_roll)
            && self.roll(st).is_ok()
        {
            self.gc(st);
        }
    }

    /// Rebuilds a queue from its directory: replays every segment in order, cuts a torn
    /// tail off the last one, and renames aside (quarantines) a segment with corruption
    /// in it. Every record before the damage that was acknowledged is kept.
    pub(crate) fn recover(
        name: &str,
        dir: PathBuf,
        ctx: Arc<Ctx>,
        limits: QueueLimits,
    ) -> io::Result<(Queue, RecoveryReport)> {
        let mut report = RecoveryReport::default();
        let mut ids = Vec::new();
        let mut next_seg = 0u64;
        for ent in fs::read_dir(&dir)? {
            let ent = ent?;
            let fname = ent.file_name();
            let Some((id, quarantined)) = fname.to_str().and_then(segment::parse_segment_name)
            else {
                continue;
            };
            next_seg = next_seg.max(id + 1);
            if !quarantined {
                ids.push(id);
            }
        }
        ids.sort_unstable();
        let mut st = State {
            dir_ready: true,
            next_seg,
            ..State::default()
        };
        let mut msgs: BTreeMap<u64, Entry> = BTreeMap::new();
        let mut mem = 0u64;
        for (i, &id) in ids.iter().enumerate() {
            let path = segment::segment_path(&dir, id);
            let buf = fs::read(&path)?;
            let scan = segment::scan(&buf);
            let last = i + 1 == ids.len();
            let mut keep_messages = true;
            let len = match scan.end {
                ScanEnd::Clean => buf.len() as u64,
                ScanEnd::Torn { at } if last => {
                    let f = OpenOptions::new().write(true).open(&path)?;
                    f.set_len(at as u64)?;
                    f.sync_all()?;
                    report.torn.push((path.clone(), (buf.len() - at) as u64));
                    at as u64
                }
                ScanEnd::Torn { .. } | ScanEnd::Corrupt { .. } => {
                    keep_messages = false;
                    0
                }
            };
            if !keep_messages {
                let mut q = path.clone().into_os_string();
                q.push(QUARANTINE_SUFFIX);
                let qpath = PathBuf::from(q);
                fs::rename(&path, &qpath)?;
                let n = scan
                    .records
                    .iter()
                    .filter(|(_, h)| h.kind == Kind::Message)
                    .count() as u64;
                report.quarantined.push((qpath, n));
            }
            for &(off, h) in &scan.records {
                match h.kind {
                    Kind::SegmentStart => st.next_seq = st.next_seq.max(h.a),
                    Kind::Message if keep_messages => {
                        let (enq, exp) = record::unpack_times(h.b);
                        let start = off + HEADER_LEN;
                        let data = if mem + u64::from(h.len) <= ctx.memory_per_queue {
                            mem += u64::from(h.len);
                            buf.get(start..start + h.len as usize)
                                .map(Bytes::copy_from_slice)
                        } else {
                            None
                        };
                        st.next_seq = st.next_seq.max(h.a.saturating_add(1));
                        if let Some(old) = msgs.insert(
                            h.a,
                            Entry {
                                seq: h.a,
                                seg: id,
                                off: start as u64,
                                len: h.len,
                                flags: h.flags,
                                enq,
                                exp,
                                data,
                            },
                        ) {
                            if old.data.is_some() {
                                mem -= u64::from(old.len);
                            }
                        }
                    }
                    Kind::Message => st.next_seq = st.next_seq.max(h.a.saturating_add(1)),
                    Kind::Ack => {
                        // Acks of a quarantined segment are still trusted: each record
                        // has its own checksum, and dropping them would redeliver.
                        let end = h.a.saturating_add(h.b);
                        let gone: Vec<u64> = msgs.range(h.a..end).map(|(&k, _)| k).collect();
                        for k in gone {
                            if let Some(e) = msgs.remove(&k) {
                                if e.data.is_some() {
                                    mem -= u64::from(e.len);
                                }
                            }
                        }
                    }
                }
            }
            if keep_messages {
                let file = OpenOptions::new().read(true).write(true).open(&path)?;
                st.disk += len;
                st.segments.insert(
                    id,
                    Segment {
                        file: Arc::new(file),
                        len,
                        live: 0,
                    },
                );
            }
        }
        for e in msgs.into_values() {
            if let Some(s) = st.segments.get_mut(&e.seg) {
                s.live += 1;
            }
            st.bytes += u64::from(e.len);
            st.ready.push_back(e);
        }
        st.mem = mem;
        report.messages = st.ready.len() as u64;
        let q = Queue::new(name, dir, ctx, limits);
        {
            let mut guard = q.state.lock();
            *guard = st;
            q.gc(&mut guard);
        }
        Ok((q, report))
    }
}

/// The sync thread's figures: how long each fsync took and how many writes it covered
/// (the group commit's batch). Only the sync thread records; scrapes read.
#[derive(Debug)]
pub struct SyncMetrics {
    /// fsync (fdatasync) durations, in nanoseconds.
    pub fsync_ns: shoal_net::metrics::Histogram,
    /// Writes made durable by each fsync.
    pub batch_writes: shoal_net::metrics::Histogram,
}

impl Default for SyncMetrics {
    fn default() -> SyncMetrics {
        SyncMetrics {
            fsync_ns: shoal_net::metrics::Histogram::latency(),
            batch_writes: shoal_net::metrics::Histogram::new(&shoal_net::metrics::COUNT_BOUNDS),
        }
    }
}
