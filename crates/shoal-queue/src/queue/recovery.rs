//! Recovery: rebuilding a queue's index from its segment files after a restart.

use super::index::{Entry, Segment, State};
use super::{Ctx, Queue};
use crate::config::QueueLimits;
use crate::record::{self, Kind, HEADER_LEN};
use crate::segment::{self, ScanEnd, QUARANTINE_SUFFIX};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// What recovery found in a queue's directory.
#[derive(Debug, Default)]
pub struct RecoveryReport {
    /// Messages recovered.
    pub messages: u64,
    /// Segments whose torn tail was cut, with the number of bytes cut.
    pub torn: Vec<(PathBuf, u64)>,
    /// Segments renamed aside as corrupt, with the messages in their valid prefix.
    pub quarantined: Vec<(PathBuf, u64)>,
    /// Segment files deleted unread because the queue is configured memory-only
    /// (`keep_journal=false`): Kestrel erases such a queue's journal at startup.
    pub discarded_segments: u64,
}

impl Queue {
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
        if limits.memory_only {
            for &id in &ids {
                match fs::remove_file(segment::segment_path(&dir, id)) {
                    // Unlinked since the directory was listed (see below): gone already.
                    Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                    _ => {}
                }
            }
            report.discarded_segments = ids.len() as u64;
            ids.clear();
        }
        let mut st = State {
            dir_ready: true,
            next_seg,
            ..State::default()
        };
        let mut msgs: BTreeMap<u64, Entry> = BTreeMap::new();
        let mut mem = 0u64;
        for &id in &ids {
            let path = segment::segment_path(&dir, id);
            let buf = match fs::read(&path) {
                Ok(b) => b,
                // Unlinked since the directory was listed: only a fully consumed segment
                // is ever deleted (by a previous engine's reclaim thread still finishing,
                // when one process reopens a directory), so nothing is lost.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            let scan = segment::scan(&buf);
            let mut keep_messages = true;
            let len = match scan.end {
                ScanEnd::Clean => buf.len() as u64,
                // Also in a segment that is not the last: after a power loss the next
                // segment's directory entry can be durable while this one's last write
                // is not (none of it was acknowledged), and what precedes it was.
                ScanEnd::Torn { at } => {
                    let f = OpenOptions::new().write(true).open(&path)?;
                    f.set_len(at as u64)?;
                    f.sync_all()?;
                    report.torn.push((path.clone(), (buf.len() - at) as u64));
                    at as u64
                }
                ScanEnd::Corrupt { .. } => {
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
                        let data = if mem + u64::from(h.len)
                            <= limits.max_memory.unwrap_or(ctx.memory_per_queue)
                        {
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
                                enq_ms: 0,
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
                let file = match OpenOptions::new().read(true).write(true).open(&path) {
                    Ok(f) => f,
                    // Unlinked since it was read (see above): fully consumed, and the acks
                    // of its messages are in the segments that follow.
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(e),
                };
                st.disk += len;
                st.segments.insert(
                    id,
                    Segment {
                        file: Arc::new(file),
                        len,
                        live: 0,
                        hold_until: 0,
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
        st.mem_items = st.ready.iter().filter(|e| e.data.is_some()).count() as u64;
        report.messages = st.ready.len() as u64;
        st.counters.recovered = report.messages;
        let q = Queue::new(name, dir, ctx, limits);
        {
            let mut guard = q.state.lock();
            *guard = st;
            q.gc(&mut guard);
        }
        Ok((q, report))
    }
}
