//! A connection's window of requests in flight: each forwarded request (or batch, or run
//! of binary gets) waits in a [`Slot`] for its reply; slots are collected strictly in the
//! order they were queued, so replies are written in request order whatever order the
//! servers answer in. The window is bounded: [`Session::make_room`] collects the oldest
//! replies (writing them at the high-water mark) before more is forwarded, so no more
//! than about [`IN_FLIGHT_LIMIT`](super::IN_FLIGHT_LIMIT) bytes of expected replies are outstanding. A slot also
//! carries its requests' start time when the pool is timed (metrics served), recorded in
//! the pool's latency histogram when it is collected.

use shoal_net::connection::Output;
use shoal_net::metrics::clock;
use shoal_net::{NoValue, OUTPUT_HIGH_WATER};
use tokio::io::AsyncWrite;

use super::getrun::GetRun;
use super::translate::{self, BinaryReply};
use super::wait::{resolve_routed, Pending, Wait};
use super::Session;
use crate::pool_request::{finish, resolve};
use crate::route::Target;
use crate::stats::incr;

/// A request waiting for its reply, and what it counts against
/// [`IN_FLIGHT_LIMIT`](super::IN_FLIGHT_LIMIT).
pub(super) struct Slot {
    pub(super) pending: Pending,
    pub(super) cost: usize,
    /// How the reply reaches the client.
    pub(super) reframe: Reframe,
    /// When its requests were forwarded, if the pool times them (metrics served).
    pub(super) timing: Option<Timing>,
}

/// When a slot's client requests were forwarded, for the pool's latency histogram.
#[derive(Debug, Clone, Copy)]
pub(super) struct Timing {
    /// [`clock::now`] ticks when the first of them was forwarded.
    pub(super) since: u64,
    /// How many client requests the slot answers (a run of binary gets answers many).
    pub(super) requests: u64,
}

/// How a slot's reply reaches the client.
pub(super) enum Reframe {
    /// As it is (text and meta, or a binary reply the proxy made itself).
    Verbatim,
    /// A binary request's meta reply, rewritten as its binary packet.
    Binary(BinaryReply),
    /// A run of binary gets, answered request by request from the servers' `gets` replies.
    Run(Box<GetRun>),
}

/// Resolves what a request sent on `target` waits for (see [`resolve()`] and
/// [`resolve_routed`]).
pub(super) async fn resolve_on(target: &Target, p: Pending, out: &mut Vec<u8>) {
    match target {
        Target::Pool(pool) => resolve(pool, p, out).await,
        Target::Route(_) => resolve_routed(p, out).await,
    }
}

impl Session<'_> {
    /// Queues a reply that is not timed: one the proxy makes itself.
    pub(super) fn push(&mut self, pending: Pending, cost: usize) {
        self.push_slot(Slot {
            pending,
            cost,
            reframe: Reframe::Verbatim,
            timing: None,
        });
    }

    pub(super) fn push_slot(&mut self, slot: Slot) {
        self.in_flight += slot.cost;
        self.pending.push_back(slot);
    }

    /// The start of `requests` client requests' latency observation, if the pool times
    /// requests (one relaxed load when it does not).
    pub(super) fn timing(&self, requests: u64) -> Option<Timing> {
        self.target
            .stats()
            .timed
            .load(std::sync::atomic::Ordering::Relaxed)
            .then(|| Timing {
                since: clock::now(),
                requests,
            })
    }

    /// Records a resolved slot's requests in the latency histogram of the pool they were
    /// sent on (the session's target: it changes only with nothing in flight).
    fn record(&self, t: Timing) {
        let ns = clock::ticks_to_ns(clock::now().saturating_sub(t.since));
        self.target.stats().latency.record_n(ns, t.requests);
    }

    /// Waits until the next request may be forwarded: pipelined requests reach the
    /// backends in the client's order, so the rest of a batched multi-get goes first, and
    /// no more than the in-flight window allows, so the oldest replies are collected
    /// (and written at the high-water mark) to make room. Fails if the client is gone.
    pub(super) async fn make_room<W: AsyncWrite + Unpin>(
        &mut self,
        out: &mut Output<'_, W, NoValue>,
    ) -> std::io::Result<()> {
        loop {
            if out.len() >= OUTPUT_HIGH_WATER {
                out.flush().await?;
            }
            if !self.may_dispatch() {
                self.resolve_front(out.buf()).await;
            } else if self.stream.is_some() {
                self.next_batch().await;
            } else {
                return Ok(());
            }
        }
    }

    /// Waits for the oldest request's reply and appends it to `wbuf`; false if nothing
    /// is in flight.
    pub(super) async fn resolve_front(&mut self, wbuf: &mut Vec<u8>) -> bool {
        let Some(slot) = self.pending.pop_front() else {
            return false;
        };
        self.in_flight = self.in_flight.saturating_sub(slot.cost);
        let Slot {
            pending,
            reframe,
            timing,
            ..
        } = slot;
        match reframe {
            Reframe::Verbatim => match (pending, &self.target) {
                (Pending::Session(Wait::Batch(b)), _) => self.resolve_batch(*b, wbuf).await,
                (p, target) => resolve_on(target, p, wbuf).await,
            },
            Reframe::Binary(r) => {
                let mut text = std::mem::take(&mut self.text_reply);
                text.clear();
                match (pending, &self.target) {
                    (Pending::One(a), Target::Pool(pool)) => {
                        // The common case, translated straight from the backend's buffer.
                        match finish(pool, a).await {
                            Ok(b) => translate::response(&r, &b, wbuf),
                            Err(e) => {
                                incr(&pool.stats.forward_error);
                                translate::response(&r, &e.reply(), wbuf);
                            }
                        }
                    }
                    (p, target) => {
                        resolve_on(target, p, &mut text).await;
                        translate::response(&r, &text, wbuf);
                    }
                }
                self.keep_text_buffer(text);
            }
            Reframe::Run(run) => {
                let mut text = std::mem::take(&mut self.text_reply);
                text.clear();
                run.resolve(&self.target, &mut text, wbuf).await;
                self.keep_text_buffer(text);
            }
        }
        if let Some(t) = timing {
            self.record(t);
        }
        true
    }

    /// Keeps `text` for the next binary reply, unless a large one grew it.
    fn keep_text_buffer(&mut self, mut text: Vec<u8>) {
        if text.capacity() > OUTPUT_HIGH_WATER {
            text = Vec::new();
        }
        self.text_reply = text;
    }
}
