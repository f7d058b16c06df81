//! Carrying open reads forward: an old segment that only open reads keep is freed by
//! rewriting those messages into the active segment, so one read held open for good pins
//! its own message on disk and not every segment written after it.
//!
//! Kestrel does the same when it rewrites its journal, carrying open transactions over.
//! The copy keeps the message's sequence number, flags and times; recovery keeps the last
//! record of a sequence number it replays, so a crash at any point leaves exactly one
//! copy (the original until the copy is written, the copy after), and an ack for the
//! sequence number, written when the read is closed, removes whichever copy is there.

use super::index::State;
use super::Queue;
use crate::config::FsyncPolicy;
use crate::record::{self, Kind, HEADER_LEN};
use bytes::Bytes;
use std::os::unix::fs::FileExt;

impl Queue {
    /// If the oldest segment (not the active one) is kept only by open reads, rewrites
    /// them at the end of the log and moves them to their copies, so the segment can be
    /// deleted: at once under `never`, once the copies are durable otherwise (until then a
    /// power loss could leave only the originals). Returns whether it carried any.
    ///
    /// Bounded: skipped when the messages to carry exceed half a segment (they would fill
    /// the log as fast as they freed it), and each message is carried at most once per
    /// segment of traffic behind it. Under an fsync policy the log behind a carried
    /// segment waits for one fsync before it goes, so a held read costs about two segments
    /// plus what is written during one fsync.
    pub(super) fn carry_open_reads(&self, st: &mut State) -> bool {
        if st.open.is_empty() || st.segments.len() < 2 {
            return false;
        }
        let Some((&oldest, seg)) = st.segments.iter().next() else {
            return false;
        };
        let mut seqs: Vec<u64> = st
            .open
            .values()
            .filter(|e| e.seg == oldest)
            .map(|e| e.seq)
            .collect();
        if seqs.is_empty() || seqs.len() as u64 != seg.live {
            return false;
        }
        let bytes: u64 = seqs
            .iter()
            .filter_map(|s| st.open.get(s))
            .map(|e| u64::from(e.len))
            .sum();
        if bytes > self.ctx.segment_size / 2 {
            return false;
        }
        seqs.sort_unstable();
        let file = seg.file.clone();
        let mut buf = std::mem::take(&mut st.wbuf);
        buf.clear();
        for &(first, count) in &st.acks {
            record::encode(&mut buf, Kind::Ack, 0, first, count, b"");
        }
        let mut at = Vec::with_capacity(seqs.len());
        for seq in &seqs {
            let Some(e) = st.open.get(seq) else {
                continue;
            };
            let payload = match &e.data {
                Some(d) => d.clone(),
                None => {
                    let mut v = vec![0u8; e.len as usize];
                    if let Err(err) = file.read_exact_at(&mut v, e.off) {
                        tracing::warn!(queue = %self.name, "carrying an open read: {err}");
                        st.wbuf = buf;
                        return false;
                    }
                    Bytes::from(v)
                }
            };
            at.push((*seq, buf.len() as u64));
            let times = record::pack_times(e.enq, e.exp);
            record::encode(&mut buf, Kind::Message, e.flags, e.seq, times, &payload);
        }
        let res = self.append(st, &buf);
        st.wbuf = buf;
        let (to, start) = match res {
            Ok(r) => r,
            Err(err) => {
                // Nothing moved: the segment stays, and the next pass tries again.
                tracing::warn!(queue = %self.name, "carrying open reads forward: {err}");
                return false;
            }
        };
        st.acks.clear();
        let n = at.len() as u64;
        for (seq, off) in at {
            if let Some(e) = st.open.get_mut(&seq) {
                e.seg = to;
                e.off = start + off + HEADER_LEN as u64;
            }
        }
        if let Some(s) = st.segments.get_mut(&to) {
            s.live += n;
        }
        let durable_first = self.fsync_policy() != FsyncPolicy::Never;
        let written = st.written;
        if let Some(s) = st.segments.get_mut(&oldest) {
            s.live = s.live.saturating_sub(n);
            if durable_first {
                s.hold_until = written;
            }
        }
        if durable_first {
            st.unsynced.carried = true;
            // Asked for now rather than at the next write's (or tick's) fsync: the log
            // behind the held segment cannot be deleted until then.
            self.ctx.sync.sealed();
        }
        st.counters.carried += n;
        true
    }
}
