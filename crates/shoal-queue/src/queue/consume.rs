//! Consumption: dequeue (remove, open, peek), closing and aborting open reads, recording
//! consumption as ack ranges and writing them, flushing and expiring.

use super::index::{now_ms, Entry, State};
use super::Queue;
use crate::error::QueueError;
use bytes::Bytes;
use std::io;
use std::os::unix::fs::FileExt;

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

impl Queue {
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
        let waited_ms = now_ms().saturating_sub(front.enqueued_ms());
        if how != Take::Peek {
            st.last_read_age_ms = waited_ms;
        }
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
                st.counters.transactions += 1;
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
        st.counters.canceled_transactions += 1;
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

    /// Drops every waiting message and returns how many were dropped. Open reads are
    /// left to their holders, as Kestrel leaves them: `close` consumes one, `abort` (or
    /// its client disconnecting) puts it back at the head.
    pub fn flush(&self) -> Result<u64, QueueError> {
        let mut st = self.state.lock();
        st.counters.flushes += 1;
        let mut n = 0u64;
        let mut all: Vec<Entry> = st.ready.drain(..).collect();
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
        let before = st.counters.expired + st.expiring.len() as u64;
        self.drop_expired_head(&mut st, now);
        (st.counters.expired + st.expiring.len() as u64).saturating_sub(before)
    }

    pub(super) fn consume(st: &mut State, e: Entry) {
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
            st.mem_items -= 1;
        }
    }

    pub(super) fn drop_expired_head(&self, st: &mut State, now: u32) {
        if self.limits.read().expire_to.is_some() {
            self.set_aside_expired(st, now);
            return;
        }
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
}
