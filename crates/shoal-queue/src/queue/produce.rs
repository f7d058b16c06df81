//! Enqueueing: the age cap, making room under the queue's limits, and indexing a message
//! only after its record is written.

use super::index::{now_ms, Entry, State};
use super::Queue;
use crate::config::{FullPolicy, QueueLimits};
use crate::error::QueueError;
use crate::record::{self, HEADER_LEN};
use bytes::Bytes;
use std::io;

impl Queue {
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
        let lim = self.limits();
        if payload.len() > self.ctx.max_item_size
            || (lim.max_item_size > 0 && payload.len() as u64 > lim.max_item_size)
        {
            return Err(QueueError::TooLarge);
        }
        let exp = match lim.max_age_secs {
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
        self.make_room(&mut st, &lim, payload.len() as u64, now)?;
        let seq = st.next_seq;
        let times = record::pack_times(now, exp);
        let (seg, msg_at) = self
            .write(&mut st, Some((flags, seq, times, payload)))
            .map_err(QueueError::Write)?;
        st.next_seq += 1;
        let budget = lim.max_memory.unwrap_or(self.ctx.memory_per_queue);
        let data = if self.memory_only || st.mem + payload.len() as u64 <= budget {
            st.mem += payload.len() as u64;
            st.mem_items += 1;
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
            enq_ms: (now_ms() % 1000) as u16,
            exp,
            data,
        });
        let lsn = st.written;
        drop(st);
        self.arrivals.notify_waiters();
        Ok(lsn)
    }

    fn make_room(
        &self,
        st: &mut State,
        lim: &QueueLimits,
        len: u64,
        now: u32,
    ) -> Result<(), QueueError> {
        self.drop_expired_head(st, now);
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
}
