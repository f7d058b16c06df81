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
//! The session's jobs, one module each:
//! - this one parses a request and decides what to do with it;
//! - `forward.rs` forwards a text or meta request, within the pool or through its route;
//! - `stream.rs` forwards a multi-get too large for one window in batches;
//! - `window.rs` keeps the requests in flight and collects their replies in order;
//! - `wait.rs` is what a request can wait for beyond one pool's replies (batches, route
//!   flights);
//! - `binary.rs`, `translate.rs` and `getrun.rs` are the binary front end;
//! - `queue.rs` serves the clients of a queue pool (`queue: true`) instead: shoal-queued
//!   or Kestrel servers used the Kestrel way, with a queue client per connection.
//!
//! Placement, fan-out, failover and reply assembly within a pool are
//! [`crate::pool_request`]'s, which routes ([`crate::route`]) use too. So a request is
//! treated the same whether or not a route is configured, and neither module depends on
//! the session.
//!
//! Memory per connection is bounded whatever the client does, and a slow client never
//! slows a backend connection other clients share (backend replies are always read; what
//! is bounded is how much is asked for on this client's behalf):
//! - replies: once [`OUTPUT_HIGH_WATER`] bytes are waiting to be written, nothing more is
//!   generated, asked of a backend or read from the client until the client has taken
//!   them;
//! - requests in flight: a connection has about [`IN_FLIGHT_LIMIT`] bytes of expected
//!   replies outstanding at once, sized with the pool's
//!   [`ValueSize`](crate::value_size::ValueSize) estimate. A multi-get asking for more
//!   is forwarded in batches of keys, the next batch only once the previous ones have
//!   been answered and written out (so a client that asks for 5,000 copies of a 100 KB
//!   value and never reads costs a few hundred KB, not 500 MB);
//! - requests: the read buffer stays at a few kilobytes unless a request needs more, and
//!   growth past that is charged to the process-wide [`Budget`] (`--read-buf-mem-limit`). A
//!   value the budget cannot cover is answered as memcached answers one it has no memory
//!   for (`SERVER_ERROR out of memory storing object`) and its bytes are discarded as they
//!   arrive, so stalled senders together hold at most the budget.

mod binary;
mod forward;
mod getrun;
mod queue;
mod stream;
mod translate;
mod wait;
mod window;

use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::Arc;

use shoal_net::connection::{self, End, Handler, Output, Proceed, Step};
use shoal_net::{Budget, NoValue, OUTPUT_HIGH_WATER};
use shoal_protocol::{parse, reply, Limits, Parsed, Request};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::route::Target;
use crate::slot::PoolSlot;
use crate::stats::incr;

use getrun::GetRun;
use stream::GetStream;
use wait::Pending;
use window::Slot;

/// Largest value a client may send through the proxy (backends enforce their own limit).
pub const MAX_VALUE: usize = 64 * 1024 * 1024;
/// Requests dispatched before their replies are collected.
const MAX_PENDING: usize = 1024;
/// Bytes of expected replies (plus forwarded request bytes) a connection may have in
/// flight before it waits for answers. As large as the output high-water mark: asking
/// for more than can be written before the next stall only buys memory.
pub const IN_FLIGHT_LIMIT: usize = OUTPUT_HIGH_WATER;
pub use crate::value_size::MAX_BATCH_KEYS;
/// What a one-line reply (`STORED`, `DELETED`, ...) is counted as while in flight.
const LINE_REPLY_COST: usize = 64;

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
/// connection's later requests, never of those already in flight. `peer`: the client's
/// socket (under TLS, the TCP socket beneath), watched by a queue pool's blocking reads
/// so that a client gone during one takes no message with it.
pub async fn serve<S>(mut stream: S, slot: Arc<PoolSlot>, budget: Budget, peer: Option<RawFd>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let generation = slot.generation();
    let target = slot.load();
    if let Some(q) = target.config().queue {
        return queue::serve(stream, target, q, &budget, peer).await;
    }
    let mut s = Session {
        target,
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
}
