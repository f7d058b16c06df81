//! The queue's log on disk: appending records to the active segment, rolling to a new
//! segment, and reclaiming segments whose messages have all been consumed.

use super::index::{Segment, State};
use super::Queue;
use crate::config::FsyncPolicy;
use crate::record::{self, Kind, HEADER_LEN};
use crate::segment;
use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

impl Queue {
    /// Writes pending acks and, optionally, one message record, in a single write at the
    /// end of the active segment. Returns the segment and offset of the message record.
    pub(super) fn write(
        &self,
        st: &mut State,
        msg: Option<(u32, u64, u64, &[u8])>,
    ) -> io::Result<(u64, u64)> {
        if self.memory_only {
            // Nothing to record: consumption is final the moment it happens, and the
            // message lives only in the index (seg 0 names no segment).
            st.acks.clear();
            return Ok((0, 0));
        }
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

    /// Creates the queue's directory now rather than with its first write (a fanout child
    /// must exist after a restart even if empty).
    pub(crate) fn create_dir(&self) -> io::Result<()> {
        let mut st = self.state.lock();
        self.ensure_dir(&mut st)
    }

    fn ensure_dir(&self, st: &mut State) -> io::Result<()> {
        if !st.dir_ready {
            fs::create_dir_all(&self.dir)?;
            if self.fsync_policy() != FsyncPolicy::Never {
                st.unsynced.parent = true;
            }
            st.dir_ready = true;
        }
        Ok(())
    }

    pub(super) fn append(&self, st: &mut State, buf: &[u8]) -> io::Result<(u64, u64)> {
        if let Some(f) = &self.ctx.fault {
            f.check()?;
        }
        self.ensure_dir(st)?;
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

    /// Seals the active segment and starts a new one. No fsync happens here (this runs on
    /// a connection's thread, under the queue's lock): the sealed segment and the new
    /// directory entry are left to the sync thread, which fsyncs them before the new
    /// active segment and acknowledges nothing written after them until they are durable.
    fn roll(&self, st: &mut State) -> io::Result<()> {
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
        if let Err(e) = file.write_all_at(&hdr, 0) {
            drop(file);
            let _ = fs::remove_file(&path);
            return Err(e);
        }
        if self.fsync_policy() != FsyncPolicy::Never {
            if let Some((&old, s)) = st.segments.iter().next_back() {
                st.unsynced.sealed.push((old, s.file.clone()));
            }
            st.unsynced.dir = true;
        }
        st.segments.insert(
            id,
            Segment {
                file: Arc::new(file),
                len: HEADER_LEN as u64,
                live: 0,
                hold_until: 0,
            },
        );
        st.disk += HEADER_LEN as u64;
        if self.fsync_policy() == FsyncPolicy::Always {
            // A roll that no write follows (a drained queue's, on a dequeue or expiry)
            // has no waiter to ask for an fsync; without this the sealed segment's file
            // (deleted a moment later) would stay open, its disk space held, until the
            // queue's next write.
            self.ctx.sync.sealed();
        }
        Ok(())
    }

    /// Deletes fully consumed segments from the oldest on, and when the queue is empty
    /// replaces a large active segment with a fresh one, so a drained queue holds one
    /// small segment. Only a prefix is deleted: a later segment may hold acks for
    /// messages in an earlier one, so deleting out of order could resurrect them.
    ///
    /// A segment kept only by open reads has them carried forward first (see
    /// `carry_open_reads`), so a read held open does not pin the log behind it.
    pub(super) fn gc(&self, st: &mut State) {
        self.delete_consumed_prefix(st);
        if self.carry_open_reads(st) {
            self.delete_consumed_prefix(st);
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

    /// Deletes the oldest segments while all their messages are consumed (and, for one
    /// whose open reads were carried forward, once the copies are durable).
    fn delete_consumed_prefix(&self, st: &mut State) {
        let durable = match self.fsync_policy() {
            FsyncPolicy::Never => u64::MAX,
            _ => self.synced.borrow().lsn,
        };
        while st.segments.len() > 1 {
            let Some((&id, seg)) = st.segments.iter().next() else {
                break;
            };
            if seg.live > 0 || seg.hold_until > durable {
                break;
            }
            st.disk -= seg.len;
            st.segments.remove(&id);
            // A crash before the unlink only brings back a segment whose messages
            // are all acked, which recovery deletes again.
            self.ctx
                .remove_segment(segment::segment_path(&self.dir, id));
        }
    }
}
