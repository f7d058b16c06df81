//! One client connection: parse requests with shoal-protocol, route each to its
//! backend(s), and write the replies back in request order.
//!
//! Guarantees: replies are written in the order requests arrived, whatever order the
//! backends answer in; a multi-get whose keys live on several servers is split into one
//! fragment per server, sent in parallel, and reassembled in the request's key order; a
//! malformed request gets memcached's error reply (from the shared parser) and affects no
//! other client; a backend failure becomes `SERVER_ERROR ...` for the requests it held.
//!
//! A connection whose first byte is `0x80` speaks the binary protocol (`binary.rs`): its
//! requests are rewritten as meta commands (`translate.rs`) and go through the same routing,
//! window and bounds, and their replies are rewritten as binary packets.
//!
//! The connection loop is shoal-net's ([`shoal_net::connection::serve`]), shared with
//! shoald and shoal-queued; this module is its [`Handler`]: requests are forwarded as they
//! are parsed, and their replies collected in order before each write.
//!
//! Memory per connection is bounded whatever the client does, and a slow client never
//! slows a backend connection other clients share (backend replies are always read; what
//! is bounded is how much is asked for on this client's behalf):
//! - replies: once [`OUTPUT_HIGH_WATER`] bytes are waiting to be written, nothing more is
//!   generated, asked of a backend or read from the client until the client has taken
//!   them;
//! - requests in flight: a connection has about [`IN_FLIGHT_LIMIT`] bytes of expected
//!   replies outstanding at once, sized with the pool's [`ValueSize`] estimate. A
//!   multi-get asking for more is forwarded in batches of keys, the next batch only once
//!   the previous ones have been answered and written out (so a client that asks for
//!   5,000 copies of a 100 KB value and never reads costs a few hundred KB, not 500 MB);
//! - requests: the read buffer stays at a few kilobytes unless a request needs more, and
//!   growth past that is charged to the process-wide [`Budget`] (`--read-buf-mem-limit`). A
//!   value the budget cannot cover is answered as memcached answers one it has no memory
//!   for (`SERVER_ERROR out of memory storing object`) and its bytes are discarded as they
//!   arrive, so stalled senders together hold at most the budget.

mod binary;
mod getrun;
mod multiget;
mod pending;
mod resolve;
mod route;
mod translate;
mod value_size;

use std::collections::VecDeque;
use std::sync::Arc;

use shoal_net::connection::{self, End, Handler, Output, Proceed, Step};
use shoal_net::metrics::clock;
use shoal_net::{Budget, NoValue, Reservation, OUTPUT_HIGH_WATER, READ_CHUNK};
use shoal_protocol::{decode_key, parse, reply, Keys, Limits, Parsed, Request};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::frame::ReplyKind;
use crate::pool::PoolSlot;
use crate::route::Target;
use crate::stats::incr;

use getrun::GetRun;
pub(crate) use multiget::entries;
use multiget::{plan, reassemble, send_plan};
use pending::Pending;
use pending::{Batch, BatchParts};
use resolve::{finish, finish_fragments, push_reply, resolve};
use route::{dispatch, local_reply, servers_for, write};
pub(crate) use route::{
    finish_pool, pool_flush, pool_get, pool_keyed, read_order, servers_for as write_servers,
    PoolFlight,
};
use translate::BinaryReply;
pub use value_size::ValueSize;

/// Largest value a client may send through the proxy (backends enforce their own limit).
pub const MAX_VALUE: usize = 64 * 1024 * 1024;
/// Requests dispatched before their replies are collected.
const MAX_PENDING: usize = 1024;
/// Bytes of expected replies (plus forwarded request bytes) a connection may have in
/// flight before it waits for answers. As large as the output high-water mark: asking
/// for more than can be written before the next stall only buys memory.
pub const IN_FLIGHT_LIMIT: usize = OUTPUT_HIGH_WATER;
/// Most keys one multi-get batch asks for, whatever the estimate says: what bounds a
/// batch when values turn out far larger than the estimate (at most this many items).
pub const MAX_BATCH_KEYS: usize = 256;
/// What a one-line reply (`STORED`, `DELETED`, ...) is counted as while in flight.
const LINE_REPLY_COST: usize = 64;
/// Smallest per-value estimate, so tiny values cannot make a batch unbounded.
const MIN_VALUE_COST: usize = 64;
/// The per-value estimate before any value has been seen: a guess that keeps a fresh
/// proxy's first batches at a few MB even if every value is 1 MB.
const INITIAL_VALUE_ESTIMATE: usize = 16 * 1024;

/// A request waiting for its reply, and what it counts against [`IN_FLIGHT_LIMIT`].
struct Slot {
    pending: Pending,
    cost: usize,
    /// How the reply reaches the client.
    reframe: Reframe,
    /// When its requests were forwarded, if the pool times them (metrics served).
    timing: Option<Timing>,
}

/// When a slot's client requests were forwarded, for the pool's latency histogram.
#[derive(Debug, Clone, Copy)]
struct Timing {
    /// [`clock::now`] ticks when the first of them was forwarded.
    since: u64,
    /// How many client requests the slot answers (a run of binary gets answers many).
    requests: u64,
}

/// How a slot's reply reaches the client.
enum Reframe {
    /// As it is (text and meta, or a binary reply the proxy made itself).
    Verbatim,
    /// A binary request's meta reply, rewritten as its binary packet.
    Binary(BinaryReply),
    /// A run of binary gets, answered request by request from the servers' `gets` replies.
    Run(Box<GetRun>),
}

/// The protocol a connection speaks, fixed by its first byte as memcached does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    /// Nothing received yet.
    Unknown,
    /// Text and meta.
    Text,
    /// Binary (the first byte was the request magic `0x80`).
    Binary,
}

/// The reply to a text request on a pool that requires SASL (only binary clients can
/// authenticate), before the connection is closed; shoald's words for the same case.
const SASL_ONLY: &[u8] = b"CLIENT_ERROR authentication required (binary SASL only)\r\n";

/// The keys of a batched multi-get not yet forwarded.
struct GetStream {
    id: u64,
    cmd: &'static str,
    exptime: Option<i64>,
    /// Every key, in request order, separated by single spaces (no per-key index: a
    /// 1 MB line of one-byte keys must not cost more than its own size).
    keys: Vec<u8>,
    /// Offset in `keys` of the first key not yet forwarded.
    next: usize,
    /// Budget held for a key list longer than a read chunk.
    _held: Reservation,
    /// When the multi-get was received, if the pool times requests: its one latency
    /// observation is made when its last batch is answered.
    since: Option<u64>,
}

/// A connection's requests in flight and replies not yet written.
struct Session<'a> {
    /// The pool (or route) this connection's requests in flight were sent on; replaced
    /// by the slot's current one only when nothing is in flight, so every request
    /// finishes on the pool it started on.
    target: Target,
    slot: &'a PoolSlot,
    /// The slot's generation when `pool` was loaded.
    generation: u64,
    budget: &'a Budget,
    pending: VecDeque<Slot>,
    /// Sum of the pending slots' costs.
    in_flight: usize,
    /// A multi-get being forwarded in batches; nothing after it is dispatched until its
    /// last batch is, so pipelined requests reach the backends in the client's order.
    stream: Option<GetStream>,
    /// A batched multi-get that failed: its later batches are dropped unanswered.
    failed_get: Option<u64>,
    gets: u64,
    /// The connection ends because of the client (a protocol error that closes, a failed
    /// read or write), counted in `client_err`.
    client_err: bool,
    /// Text or binary, from the first byte.
    protocol: Protocol,
    /// A binary client has authenticated (SASL), when its pool requires it.
    authenticated: bool,
    /// Failed SASL attempts on this connection (each doubles the next delay).
    auth_failures: u32,
    /// Where a binary request is rewritten as the backend command.
    scratch: Vec<u8>,
    /// Where a binary request's backend reply is collected before it is rewritten.
    text_reply: Vec<u8>,
    /// Binary gets gathered to be sent as one `gets` per server (see [`getrun`]).
    run: Option<GetRun>,
}

/// Serves one client until it quits, disconnects, or sends something that closes the
/// connection (as memcached would). Never panics on client input. `budget` is the
/// process-wide read-buffer budget every connection draws its large requests from.
/// Requests use the pool `slot` holds when they arrive: a reload changes the pool of the
/// connection's later requests, never of those already in flight.
pub async fn serve<S>(mut stream: S, slot: Arc<PoolSlot>, budget: Budget)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let generation = slot.generation();
    let mut s = Session {
        target: slot.load(),
        slot: &slot,
        generation,
        budget: &budget,
        pending: VecDeque::new(),
        in_flight: 0,
        stream: None,
        failed_get: None,
        gets: 0,
        client_err: false,
        protocol: Protocol::Unknown,
        authenticated: false,
        auth_failures: 0,
        scratch: Vec::new(),
        text_reply: Vec::new(),
        run: None,
    };
    // The pool's idle timeout when the connection starts: a reload changes it for
    // connections accepted afterwards.
    let config = connection::Config {
        idle_timeout: s.target.config().client_idle_timeout,
        ..connection::Config::default()
    };
    let end = connection::serve(&mut stream, &mut s, &budget, &config).await;
    match end {
        End::Eof => incr(&s.target.stats().client_eof),
        End::Error | End::LineTooLong => s.client_err = true,
        End::IdleTimeout => tracing::debug!(pool = %s.target.name(), "idle client closed"),
        _ => {}
    }
    if s.client_err {
        incr(&s.target.stats().client_err);
    }
}

/// Limits of a client's requests.
const LIMITS: Limits = Limits {
    max_value_len: MAX_VALUE,
};
/// Re-parsing a storage request with no room for values turns it into the "too large"
/// shape (key, bytes to drop, bytes to swallow): how a value the budget refused is skipped.
const REFUSE_VALUES: Limits = Limits { max_value_len: 0 };

impl Handler for Session<'_> {
    type Value = NoValue;

    async fn request<W: AsyncWrite + Unpin>(
        &mut self,
        input: &[u8],
        refused: bool,
        out: &mut Output<'_, W, NoValue>,
    ) -> Step {
        if self.make_room(out).await.is_err() {
            // The client is gone; the loop sees the failed write.
            return Step::Close;
        }
        if self.pending.is_empty() && self.stream.is_none() && self.run.is_none() {
            self.follow_reload();
        }
        if self.protocol == Protocol::Unknown {
            self.protocol = match input.first() {
                Some(&shoal_protocol::binary::REQUEST_MAGIC) => Protocol::Binary,
                _ => Protocol::Text,
            };
        }
        if self.protocol == Protocol::Binary {
            return self.binary_request(input, refused, out).await;
        }
        if self.target.config().sasl.is_some() {
            self.push(Pending::Static(SASL_ONLY), 0);
            self.client_err = true;
            return Step::Close;
        }
        match parse(input, if refused { &REFUSE_VALUES } else { &LIMITS }) {
            Parsed::Incomplete { needed } => Step::Incomplete { needed },
            Parsed::Request { request, consumed } => {
                self.forward(&request, input.get(..consumed).unwrap_or(input))
                    .await;
                if matches!(request, Request::Quit) {
                    Step::Close
                } else {
                    Step::Done {
                        consumed,
                        swallow: 0,
                    }
                }
            }
            Parsed::Error {
                error,
                consumed,
                swallow,
                close,
                silent,
            } => {
                if !silent {
                    self.push(Pending::Static(error.reply()), 0);
                }
                if close {
                    self.client_err = true;
                    return Step::Close;
                }
                Step::Done { consumed, swallow }
            }
            Parsed::TooLarge {
                key,
                consumed,
                swallow,
                noreply,
                remove_old,
                key_base64,
            } => {
                if remove_old {
                    self.remove_old(key, key_base64).await;
                }
                if !noreply {
                    let r = if refused {
                        reply::OUT_OF_MEMORY_STORING
                    } else {
                        reply::OBJECT_TOO_LARGE
                    };
                    self.push(Pending::Static(r), 0);
                }
                Step::Done { consumed, swallow }
            }
        }
    }

    fn line_too_long(&self) -> &'static [u8] {
        // A request line longer than the budget can hold (only multi-gets may be long):
        // memcached closes such a connection with this reply.
        reply::OUT_OF_MEMORY_READING
    }

    async fn before_write<W: AsyncWrite + Unpin>(
        &mut self,
        out: &mut Output<'_, W, NoValue>,
    ) -> Proceed {
        // Everything dispatched is answered before the client is read again (a batched
        // multi-get always has a batch in flight), its replies written as they reach the
        // high-water mark. Binary gets still gathered go first.
        self.flush_run().await;
        loop {
            if out.len() >= OUTPUT_HIGH_WATER && out.flush().await.is_err() {
                break;
            }
            if self.stream.is_some() && self.may_dispatch() {
                self.next_batch().await;
                continue;
            }
            if !self.resolve_front(out.buf()).await {
                break;
            }
        }
        Proceed::Write
    }
}

/// Resolves what a request sent on `target` waits for (see [`resolve`] and
/// [`resolve::resolve_routed`]).
async fn resolve_on(target: &Target, p: Pending, out: &mut Vec<u8>) {
    match target {
        Target::Pool(pool) => resolve(pool, p, out).await,
        Target::Route(_) => resolve::resolve_routed(p, out).await,
    }
}

/// The command and expiration time of a `get`-family request.
fn get_command(req: &Request<'_>) -> (&'static str, Option<i64>) {
    match req {
        Request::Get { with_cas, .. } => (if *with_cas { "gets" } else { "get" }, None),
        Request::GetAndTouch {
            with_cas, exptime, ..
        } => (if *with_cas { "gats" } else { "gat" }, Some(*exptime)),
        _ => ("get", None),
    }
}

impl Session<'_> {
    /// Switches to the slot's current pool if a reload replaced it. Only called with
    /// nothing in flight, since replies are resolved against the pool they were sent on.
    fn follow_reload(&mut self) {
        let generation = self.slot.generation();
        if generation != self.generation {
            self.target = self.slot.load();
            self.generation = generation;
        }
    }

    /// Whether another request (or batch) may be forwarded now: always when nothing is in
    /// flight, else while the window has room.
    fn may_dispatch(&self) -> bool {
        self.pending.is_empty()
            || (self.pending.len() < MAX_PENDING && self.in_flight < IN_FLIGHT_LIMIT)
    }

    /// Queues a reply that is not timed: one the proxy makes itself.
    fn push(&mut self, pending: Pending, cost: usize) {
        self.push_slot(Slot {
            pending,
            cost,
            reframe: Reframe::Verbatim,
            timing: None,
        });
    }

    /// The start of `requests` client requests' latency observation, if the pool times
    /// requests (one relaxed load when it does not).
    fn timing(&self, requests: u64) -> Option<Timing> {
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

    fn push_slot(&mut self, slot: Slot) {
        self.in_flight += slot.cost;
        self.pending.push_back(slot);
    }

    /// Waits until the next request may be forwarded: pipelined requests reach the
    /// backends in the client's order, so the rest of a batched multi-get goes first, and
    /// no more than the in-flight window allows, so the oldest replies are collected
    /// (and written at the high-water mark) to make room. Fails if the client is gone.
    async fn make_room<W: AsyncWrite + Unpin>(
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

    /// Forwards one request (or starts forwarding a large multi-get in batches).
    async fn forward(&mut self, req: &Request<'_>, raw: &[u8]) {
        let timing = self.timing(1);
        let est = self.target.value_size().get();
        let reply_cost = match req {
            Request::Get { keys, .. } | Request::GetAndTouch { keys, .. } => {
                let n = keys.iter().count();
                if n > 1 && n > self.target.value_size().keys_for(IN_FLIGHT_LIMIT) {
                    self.start_stream(req, keys, timing.map(|t| t.since));
                    return;
                }
                n.saturating_mul(est)
            }
            Request::MetaGet { .. } | Request::MetaDebug { .. } => est,
            _ => LINE_REPLY_COST,
        };
        let p = match &self.target {
            Target::Pool(pool) => dispatch(pool, req, raw).await,
            Target::Route(router) => match local_reply(req) {
                Some(p) => p,
                None => Pending::Routed(Box::new(crate::route::dispatch(router, req, raw).await)),
            },
        };
        self.push_slot(Slot {
            pending: p,
            cost: raw.len().saturating_add(reply_cost),
            reframe: Reframe::Verbatim,
            timing,
        });
    }

    /// Sets up a multi-get too large for one window to be forwarded in batches.
    fn start_stream(&mut self, req: &Request<'_>, list: &Keys<'_>, since: Option<u64>) {
        let mut keys = Vec::new();
        for k in list.iter() {
            if !keys.is_empty() {
                keys.push(b' ');
            }
            keys.extend_from_slice(k);
        }
        // The key list outlives the read buffer it came from: a long one is charged.
        let mut held = self.budget.empty();
        if !held.grow_to(keys.len().saturating_sub(READ_CHUNK)) {
            self.push(Pending::Static(reply::OUT_OF_MEMORY_WRITING_GET), 0);
            return;
        }
        let (cmd, exptime) = get_command(req);
        self.gets += 1;
        self.stream = Some(GetStream {
            id: self.gets,
            cmd,
            exptime,
            keys,
            next: 0,
            _held: held,
            since,
        });
    }

    /// Forwards the next batch of the batched multi-get, as many keys as the window has
    /// room for.
    async fn next_batch(&mut self) {
        let target = self.target.clone();
        let Some(st) = self.stream.as_mut() else {
            return;
        };
        let est = target.value_size().get();
        let n = target
            .value_size()
            .keys_for(IN_FLIGHT_LIMIT.saturating_sub(self.in_flight));
        let mut list: Vec<&[u8]> = Vec::with_capacity(n);
        let mut end = st.next;
        for k in st
            .keys
            .get(st.next..)
            .unwrap_or_default()
            .split(|&b| b == b' ')
        {
            if list.len() == n {
                break;
            }
            end += k.len() + 1;
            if !k.is_empty() {
                list.push(k);
            }
        }
        let last = end >= st.keys.len();
        let (get, cmd, exptime) = (st.id, st.cmd, st.exptime);
        let cost = list.iter().map(|k| k.len() + 1).sum::<usize>() + list.len() * est;
        let parts = match &target {
            Target::Pool(pool) => match plan(pool, &list) {
                Ok(plan) => send_plan(pool, plan, cmd, exptime)
                    .await
                    .map(BatchParts::Pool),
                Err(e) => {
                    incr(&pool.stats.forward_error);
                    Err(e.reply())
                }
            },
            Target::Route(router) => Ok(BatchParts::Routed(
                crate::route::send_get(router, &list, cmd, exptime).await,
            )),
        };
        st.next = end;
        let ends = last || parts.is_err();
        // The multi-get's one observation rides on its last batch.
        let timing = st
            .since
            .filter(|_| ends)
            .map(|since| Timing { since, requests: 1 });
        if ends {
            // Done, or failed here: no more batches.
            self.stream = None;
        }
        self.push_slot(Slot {
            pending: Pending::Batch(Box::new(Batch { get, last, parts })),
            cost,
            reframe: Reframe::Verbatim,
            timing,
        });
    }

    /// Waits for the oldest request's reply and appends it to `wbuf`; false if nothing
    /// is in flight.
    async fn resolve_front(&mut self, wbuf: &mut Vec<u8>) -> bool {
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
                (Pending::Batch(b), _) => self.resolve_batch(*b, wbuf).await,
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

    async fn resolve_batch(&mut self, b: Batch, wbuf: &mut Vec<u8>) {
        if self.failed_get == Some(b.get) {
            return;
        }
        let parts = match b.parts {
            Ok(p) => p,
            Err(reply) => {
                wbuf.extend_from_slice(&reply);
                self.failed_get = Some(b.get);
                return;
            }
        };
        let ok = match (parts, &self.target) {
            (BatchParts::Pool(m), Target::Pool(pool)) => {
                match finish_fragments(pool, m.frags).await {
                    Ok(replies) => {
                        reassemble(&m.keys, &m.spans, &replies, wbuf);
                        true
                    }
                    Err(r) => {
                        push_reply(pool, r, wbuf);
                        false
                    }
                }
            }
            (BatchParts::Routed(f), Target::Route(router)) => {
                crate::route::finish_get_into(router, f, wbuf).await
            }
            // A session changes target only with nothing in flight.
            (BatchParts::Pool(_), Target::Route(_)) | (BatchParts::Routed(_), Target::Pool(_)) => {
                false
            }
        };
        if ok {
            if b.last {
                wbuf.extend_from_slice(reply::END);
            }
        } else {
            // Values already written stay written (as when memcached fails half-way
            // through a multi-get); the error line ends the reply and the rest of the
            // keys are not asked for.
            self.failed_get = Some(b.get);
            if self.stream.as_ref().is_some_and(|st| st.id == b.get) {
                self.stream = None;
            }
        }
    }

    /// Removes the value of a key whose new value was refused, as memcached removes it
    /// when a `set` fails, so the client never reads the stale value believing it was
    /// overwritten. Nothing waits for the backends' answer.
    async fn remove_old(&mut self, key: &[u8], base64: bool) {
        let mut tmp = [0u8; 256];
        let Ok(real) = decode_key(key, base64, &mut tmp) else {
            return;
        };
        let (bytes, kind) = if base64 {
            let mut b = b"md ".to_vec();
            b.extend_from_slice(key);
            b.extend_from_slice(b" b q\r\nmn\r\n");
            (b, ReplyKind::MetaQuiet)
        } else {
            let mut b = b"delete ".to_vec();
            b.extend_from_slice(key);
            b.extend_from_slice(b" noreply\r\n");
            (b, ReplyKind::None)
        };
        match &self.target {
            Target::Pool(pool) => {
                if let Ok(servers) = servers_for(pool, real) {
                    drop(write(pool, servers, bytes, kind).await);
                }
            }
            Target::Route(router) => crate::route::send_and_forget(router, real, bytes, kind).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::multiget::{entries, reassemble, Entry};
    use super::*;
    use bytes::Bytes;

    #[test]
    fn value_size_rises_at_once_and_falls_slowly() {
        let v = ValueSize::default();
        assert_eq!(v.get(), INITIAL_VALUE_ESTIMATE);
        v.observe(1 << 20, 1);
        assert_eq!(v.get(), 1 << 20);
        assert_eq!(v.keys_for(IN_FLIGHT_LIMIT), 1, "never below one key");
        // One small value moves it 1/16 of the way; many small values most of the way.
        v.observe(100, 1);
        assert!(v.get() > 900 * 1024, "{}", v.get());
        v.observe(100, 64);
        assert!(v.get() < 32 * 1024, "{}", v.get());
        v.observe(0, 0);
        assert!(v.get() >= MIN_VALUE_COST);
        for _ in 0..100 {
            v.observe(10, 64);
        }
        assert_eq!(
            v.get(),
            MIN_VALUE_COST,
            "tiny values are counted as the minimum"
        );
        assert_eq!(v.keys_for(IN_FLIGHT_LIMIT), MAX_BATCH_KEYS, "capped");
    }

    #[test]
    fn entries_of_a_retrieval_reply() {
        let b = b"VALUE a 0 1\r\n1\r\nVALUE bb 5 3 99\r\nxyz\r\nEND\r\n";
        let e: Vec<Entry> = entries(b).collect();
        assert_eq!(e.len(), 2);
        assert_eq!(&b[e[0].key.0..e[0].key.1], b"a");
        assert_eq!(&b[e[1].key.0..e[1].key.1], b"bb");
        assert_eq!(&b[e[1].all.0..e[1].all.1], b"VALUE bb 5 3 99\r\nxyz\r\n");
        // A truncated or lying length never reads past the end.
        let short = b"VALUE a 0 100\r\nxy";
        let e: Vec<Entry> = entries(short).collect();
        assert_eq!(e[0].all, (0, short.len()));
        assert_eq!(entries(b"END\r\n").count(), 0);
    }

    #[test]
    fn reassembles_in_key_order_with_duplicates() {
        let keys = b"abcab".to_vec();
        // keys a(f0) b(f1) c(f0) a(f0) b(f1); c misses.
        let spans = vec![(0, 1, 0), (1, 2, 1), (2, 3, 0), (3, 4, 0), (4, 5, 1)];
        let f0 = Bytes::from_static(b"VALUE a 0 1\r\n1\r\nVALUE a 0 1\r\n1\r\nEND\r\n");
        let f1 = Bytes::from_static(b"VALUE b 0 2\r\n22\r\nVALUE b 0 2\r\n22\r\nEND\r\n");
        let mut out = Vec::new();
        reassemble(&keys, &spans, &[f0, f1], &mut out);
        assert_eq!(
            out,
            b"VALUE a 0 1\r\n1\r\nVALUE b 0 2\r\n22\r\nVALUE a 0 1\r\n1\r\nVALUE b 0 2\r\n22\r\n"
        );
    }
}
