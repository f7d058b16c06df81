//! One client connection: parse requests with shoal-protocol, route each to its
//! backend(s), and write the replies back in request order.
//!
//! Guarantees: replies are written in the order requests arrived, whatever order the
//! backends answer in; a multi-get whose keys live on several servers is split into one
//! fragment per server, sent in parallel, and reassembled in the request's key order; a
//! malformed request gets memcached's error reply (from the shared parser) and affects no
//! other client; a backend failure becomes `SERVER_ERROR ...` for the requests it held.
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
//! - requests: the read buffer stays at [`READ_CHUNK`] unless a request needs more, and
//!   growth past it is charged to the process-wide [`Budget`] (`--read-buf-mem-limit`). A
//!   value the budget cannot cover is answered as memcached answers one it has no memory
//!   for (`SERVER_ERROR out of memory storing object`) and its bytes are discarded as they
//!   arrive, so stalled senders together hold at most the budget.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use bytes::Bytes;
use shoal_net::{Budget, Reservation, OUTPUT_HIGH_WATER, READ_CHUNK};
use shoal_protocol::{decode_key, parse, reply, Keys, Limits, Parsed, Request};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::backend::{Reply, ReplyRx};
use crate::error::BackendError;
use crate::frame::ReplyKind;
use crate::pool::Pool;
use crate::stats::incr;

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

/// A pool-wide estimate of the bytes one retrieved value takes in a reply (its `VALUE`
/// line, data and `\r\n`), which sizes multi-get batches and the in-flight window. It
/// rises at once to any larger value seen, so a burst of large values shrinks every
/// connection's batches immediately, and falls back slowly (1/16 of the gap per smaller
/// value), so a few small values do not re-open the window to a size large values would
/// overflow.
#[derive(Debug)]
pub struct ValueSize(AtomicUsize);

impl Default for ValueSize {
    fn default() -> ValueSize {
        ValueSize(AtomicUsize::new(INITIAL_VALUE_ESTIMATE))
    }
}

impl ValueSize {
    /// The current estimate in bytes (at least 64).
    pub fn get(&self) -> usize {
        self.0.load(Relaxed).max(MIN_VALUE_COST)
    }

    /// Records a reply carrying `count` values, the largest of `bytes`: the estimate
    /// rises to `bytes` if that is larger, else falls 1/16 of the way towards it per value.
    pub fn observe(&self, bytes: usize, count: usize) {
        if count == 0 {
            return;
        }
        // 15/16 to the power of `count` (which is at most 64 steps from nothing left).
        let keep = (15.0f64 / 16.0).powi(count.min(64) as i32);
        // A compare-and-swap loop rather than load-then-store, so a concurrent rise is not
        // overwritten by a decay; unchanged estimates (the common case) write nothing.
        let _ = self.0.fetch_update(Relaxed, Relaxed, |cur| {
            let next = if bytes >= cur {
                bytes
            } else {
                bytes + ((cur - bytes) as f64 * keep) as usize
            };
            (next != cur).then_some(next)
        });
    }

    /// How many keys a batch may ask for when `room` bytes of the in-flight limit are
    /// left: at least one, at most [`MAX_BATCH_KEYS`].
    pub fn keys_for(&self, room: usize) -> usize {
        (room / self.get()).clamp(1, MAX_BATCH_KEYS)
    }
}

/// One forwarded request and how to retry it elsewhere.
struct Attempt {
    rx: Option<ReplyRx>,
    bytes: Vec<u8>,
    kind: ReplyKind,
    /// Replicas to try, in order, if this attempt fails at the transport level.
    rest: Vec<usize>,
}

enum Pending {
    /// A reply the proxy makes itself.
    Ready(Vec<u8>),
    Static(&'static [u8]),
    /// Nothing to send (noreply).
    Nothing,
    /// Forwarded; the backend's reply goes to the client verbatim.
    One(Attempt),
    /// A multi-get split over several fragments.
    Multi(Box<MultiGet>),
    /// One batch of keys of a multi-get forwarded in batches.
    Batch(Box<Batch>),
    /// Sent to several servers (replicated write): the first successful reply in order.
    First(Vec<ReplyRx>),
    /// `flush_all` to every server: `OK` if all say so, else the first other reply.
    All(Vec<ReplyRx>),
}

struct MultiGet {
    /// The original keys, concatenated.
    keys: Vec<u8>,
    /// (start, end, fragment) for each key in request order.
    spans: Vec<(usize, usize, usize)>,
    frags: Vec<Attempt>,
}

/// One batch of a batched multi-get.
struct Batch {
    /// Which multi-get of the connection it belongs to.
    get: u64,
    /// The last batch: its reply ends with `END`.
    last: bool,
    /// The forwarded fragments, or the error reply that ends the multi-get here.
    parts: Result<MultiGet, Vec<u8>>,
}

/// A request waiting for its reply, and what it counts against [`IN_FLIGHT_LIMIT`].
struct Slot {
    pending: Pending,
    cost: usize,
}

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
}

/// A connection's requests in flight and replies not yet written.
struct Session<'a> {
    pool: &'a Pool,
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
    wbuf: Vec<u8>,
}

/// Serves one client until it quits, disconnects, or sends something that closes the
/// connection (as memcached would). Never panics on client input. `budget` is the
/// process-wide read-buffer budget every connection draws its large requests from.
pub async fn serve<S>(mut stream: S, pool: Arc<Pool>, budget: Budget)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let limits = Limits {
        max_value_len: MAX_VALUE,
    };
    // Re-parsing a storage request with this limit turns it into the "too large" shape
    // (key, bytes to drop, bytes to swallow): how a value the budget refused is skipped.
    let refused = Limits { max_value_len: 0 };
    let mut s = Session {
        pool: &pool,
        budget: &budget,
        pending: VecDeque::new(),
        in_flight: 0,
        stream: None,
        failed_get: None,
        gets: 0,
        wbuf: Vec::with_capacity(READ_CHUNK),
    };
    let mut rbuf: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    // Budget held for the read buffer's growth past READ_CHUNK.
    let mut held = budget.empty();
    // Bytes of a rejected data block still to discard (they may not have arrived yet).
    let mut swallow = 0usize;
    // The request at the head of the buffer was refused by the budget: answer, skip it.
    let mut refuse_next = false;
    let mut closing = false;
    let mut client_err = false;
    loop {
        // Dispatch what the in-flight window allows: the rest of a batched multi-get
        // first, then complete requests from the buffer.
        let mut pos = 0usize;
        // Bytes the request at the head of the buffer needs in all (0: unknown or none).
        let mut want = 0usize;
        while s.may_dispatch() {
            if s.stream.is_some() {
                s.next_batch().await;
                continue;
            }
            if closing {
                break;
            }
            if swallow > 0 {
                let n = swallow.min(rbuf.len().saturating_sub(pos));
                pos += n;
                swallow -= n;
                if swallow > 0 {
                    break;
                }
            }
            let Some(input) = rbuf.get(pos..).filter(|i| !i.is_empty()) else {
                break;
            };
            let oom = std::mem::take(&mut refuse_next);
            match parse(input, if oom { &refused } else { &limits }) {
                Parsed::Incomplete { needed } => {
                    want = needed;
                    break;
                }
                Parsed::Request { request, consumed } => {
                    if matches!(request, Request::Quit) {
                        closing = true;
                    }
                    s.request(&request, input.get(..consumed).unwrap_or(input))
                        .await;
                    pos += consumed;
                }
                Parsed::Error {
                    error,
                    consumed,
                    swallow: skip,
                    close,
                    silent,
                } => {
                    if !silent {
                        s.push(Pending::Static(error.reply()), 0);
                    }
                    if close {
                        client_err = true;
                        closing = true;
                    }
                    pos += consumed;
                    swallow = skip;
                }
                Parsed::TooLarge {
                    key,
                    consumed,
                    swallow: skip,
                    noreply,
                    remove_old,
                    key_base64,
                } => {
                    if remove_old {
                        s.remove_old(key, key_base64).await;
                    }
                    if !noreply {
                        let r = if oom {
                            reply::OUT_OF_MEMORY_STORING
                        } else {
                            reply::OBJECT_TOO_LARGE
                        };
                        s.push(Pending::Static(r), 0);
                    }
                    pos += consumed;
                    swallow = skip;
                }
            }
        }
        rbuf.drain(..pos.min(rbuf.len()));
        if want > rbuf.capacity() {
            // Make room for the whole request at once rather than growing by doubling
            // through a large value, if the budget allows; if not, parse it again as
            // refused.
            if !grow(&mut rbuf, &mut held, want) {
                refuse_next = true;
                continue;
            }
        } else if want <= READ_CHUNK && rbuf.len() <= READ_CHUNK && rbuf.capacity() > READ_CHUNK {
            // A large request is done: give its memory back.
            rbuf.shrink_to(READ_CHUNK);
            held.release();
        }
        if s.resolve_front().await {
            if s.wbuf.len() >= OUTPUT_HIGH_WATER && !s.flush(&mut stream).await {
                client_err = true;
                break;
            }
            continue;
        }
        // Everything dispatched is answered (a batched multi-get always has a batch in
        // flight): write it all, then wait for the client.
        if !s.flush(&mut stream).await {
            client_err = true;
            break;
        }
        if closing {
            break;
        }
        if s.wbuf.capacity() > 4 * READ_CHUNK {
            // An idle connection keeps a small buffer, however large its last reply was.
            s.wbuf = Vec::with_capacity(READ_CHUNK);
        }
        let (len, spare) = (rbuf.len(), rbuf.capacity() - rbuf.len());
        if spare < READ_CHUNK / 2 && len >= want && !grow(&mut rbuf, &mut held, len + READ_CHUNK) {
            // A request line longer than the budget can hold (only multi-gets may be
            // long): memcached closes such a connection with this reply.
            let _ = stream.write_all(reply::OUT_OF_MEMORY_READING).await;
            client_err = true;
            break;
        }
        // The spare capacity is never zero here, so reading never grows the buffer
        // behind the budget's back (a full Vec would double itself).
        match stream.read_buf(&mut rbuf).await {
            Ok(0) => {
                incr(&pool.stats.client_eof);
                break;
            }
            Ok(_) => {}
            Err(_) => {
                client_err = true;
                break;
            }
        }
    }
    if client_err {
        incr(&pool.stats.client_err);
    }
    let _ = stream.shutdown().await;
}

/// Grows `rbuf` to hold `total` bytes, charging what exceeds [`READ_CHUNK`] to the
/// budget; false (and no growth) when the budget cannot cover it.
fn grow(rbuf: &mut Vec<u8>, held: &mut Reservation, total: usize) -> bool {
    if total <= rbuf.capacity() {
        return true;
    }
    if total > READ_CHUNK && !held.grow_to(total - READ_CHUNK) {
        return false;
    }
    rbuf.reserve_exact(total - rbuf.len());
    true
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
    /// Whether another request (or batch) may be forwarded now: always when nothing is in
    /// flight, else while the window has room.
    fn may_dispatch(&self) -> bool {
        self.pending.is_empty()
            || (self.pending.len() < MAX_PENDING && self.in_flight < IN_FLIGHT_LIMIT)
    }

    fn push(&mut self, pending: Pending, cost: usize) {
        self.in_flight += cost;
        self.pending.push_back(Slot { pending, cost });
    }

    /// Forwards one request (or starts forwarding a large multi-get in batches).
    async fn request(&mut self, req: &Request<'_>, raw: &[u8]) {
        let est = self.pool.value_size.get();
        let reply_cost = match req {
            Request::Get { keys, .. } | Request::GetAndTouch { keys, .. } => {
                let n = keys.iter().count();
                if n > 1 && n > self.pool.value_size.keys_for(IN_FLIGHT_LIMIT) {
                    self.start_stream(req, keys);
                    return;
                }
                n.saturating_mul(est)
            }
            Request::MetaGet { .. } | Request::MetaDebug { .. } => est,
            _ => LINE_REPLY_COST,
        };
        let p = dispatch(self.pool, req, raw).await;
        self.push(p, raw.len().saturating_add(reply_cost));
    }

    /// Sets up a multi-get too large for one window to be forwarded in batches.
    fn start_stream(&mut self, req: &Request<'_>, list: &Keys<'_>) {
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
        });
    }

    /// Forwards the next batch of the batched multi-get, as many keys as the window has
    /// room for.
    async fn next_batch(&mut self) {
        let pool = self.pool;
        let Some(st) = self.stream.as_mut() else {
            return;
        };
        let est = pool.value_size.get();
        let n = pool
            .value_size
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
        let parts = match plan(pool, &list) {
            Ok(plan) => send_plan(pool, plan, cmd, exptime).await,
            Err(e) => {
                incr(&pool.stats.forward_error);
                Err(e.reply())
            }
        };
        st.next = end;
        if last || parts.is_err() {
            // Done, or failed here: no more batches.
            self.stream = None;
        }
        self.push(Pending::Batch(Box::new(Batch { get, last, parts })), cost);
    }

    /// Waits for the oldest request's reply and appends it to the output; false if
    /// nothing is in flight.
    async fn resolve_front(&mut self) -> bool {
        let Some(slot) = self.pending.pop_front() else {
            return false;
        };
        self.in_flight = self.in_flight.saturating_sub(slot.cost);
        match slot.pending {
            Pending::Batch(b) => self.resolve_batch(*b).await,
            p => resolve(self.pool, p, &mut self.wbuf).await,
        }
        true
    }

    async fn resolve_batch(&mut self, b: Batch) {
        if self.failed_get == Some(b.get) {
            return;
        }
        let m = match b.parts {
            Ok(m) => m,
            Err(reply) => {
                self.wbuf.extend_from_slice(&reply);
                self.failed_get = Some(b.get);
                return;
            }
        };
        match finish_fragments(self.pool, m.frags).await {
            Ok(replies) => {
                reassemble(&m.keys, &m.spans, &replies, &mut self.wbuf);
                if b.last {
                    self.wbuf.extend_from_slice(reply::END);
                }
            }
            Err(r) => {
                // Values already written stay written (as when memcached fails half-way
                // through a multi-get); the error line ends the reply and the rest of the
                // keys are not asked for.
                push_reply(self.pool, r, &mut self.wbuf);
                self.failed_get = Some(b.get);
                if self.stream.as_ref().is_some_and(|st| st.id == b.get) {
                    self.stream = None;
                }
            }
        }
    }

    /// Writes the output buffer out; false if the client is gone.
    async fn flush<S: AsyncWrite + Unpin>(&mut self, stream: &mut S) -> bool {
        if self.wbuf.is_empty() {
            return true;
        }
        if stream.write_all(&self.wbuf).await.is_err() {
            return false;
        }
        self.wbuf.clear();
        if self.wbuf.capacity() > 2 * OUTPUT_HIGH_WATER {
            // One very large reply should not keep its buffer for the next ones.
            self.wbuf.shrink_to(OUTPUT_HIGH_WATER);
        }
        true
    }

    /// Removes the value of a key whose new value was refused, as memcached removes it
    /// when a `set` fails, so the client never reads the stale value believing it was
    /// overwritten. Nothing waits for the backends' answer.
    async fn remove_old(&mut self, key: &[u8], base64: bool) {
        let mut tmp = [0u8; 256];
        let Ok(real) = decode_key(key, base64, &mut tmp) else {
            return;
        };
        let Ok(servers) = servers_for(self.pool, real) else {
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
        drop(write(self.pool, servers, bytes, kind).await);
    }
}

fn route_error(pool: &Pool, e: BackendError) -> Pending {
    incr(&pool.stats.forward_error);
    Pending::Ready(e.reply())
}

/// Servers for `key`: the replicas in failover order (one server unless replicated).
fn servers_for(pool: &Pool, key: &[u8]) -> Result<Vec<usize>, BackendError> {
    let r = if pool.placement.replica_count() > 1 {
        pool.placement.replicas(key)
    } else {
        pool.placement.locate(key).map(|i| vec![i])
    };
    r.map_err(|_| BackendError::NoLiveServers)
}

async fn send(pool: &Pool, server: usize, bytes: Vec<u8>, kind: ReplyKind) -> Option<ReplyRx> {
    match pool.backends.get(server) {
        Some(b) => b.send(bytes, kind).await,
        None => None,
    }
}

/// A read: to the first server, failing over to the others.
async fn read(pool: &Pool, servers: Vec<usize>, bytes: Vec<u8>, kind: ReplyKind) -> Pending {
    let mut it = servers.into_iter();
    let Some(first) = it.next() else {
        return route_error(pool, BackendError::NoLiveServers);
    };
    let rest: Vec<usize> = it.collect();
    let keep = if rest.is_empty() {
        Vec::new()
    } else {
        bytes.clone()
    };
    let rx = send(pool, first, bytes, kind).await;
    Pending::One(Attempt {
        rx,
        bytes: keep,
        kind,
        rest,
    })
}

/// A write: to every server holding the key.
async fn write(pool: &Pool, servers: Vec<usize>, bytes: Vec<u8>, kind: ReplyKind) -> Pending {
    if servers.len() == 1 {
        let rx = send(pool, servers[0], bytes, kind).await;
        return match rx {
            Some(rx) => Pending::One(Attempt {
                rx: Some(rx),
                bytes: Vec::new(),
                kind,
                rest: Vec::new(),
            }),
            None => Pending::Nothing,
        };
    }
    let mut rxs = Vec::with_capacity(servers.len());
    for s in servers {
        if let Some(rx) = send(pool, s, bytes.clone(), kind).await {
            rxs.push(rx);
        }
    }
    if kind == ReplyKind::None {
        Pending::Nothing
    } else {
        Pending::First(rxs)
    }
}

async fn dispatch(pool: &Pool, req: &Request<'_>, raw: &[u8]) -> Pending {
    match req {
        Request::Get { keys, .. } | Request::GetAndTouch { keys, .. } => {
            let (cmd, exptime) = get_command(req);
            let list: Vec<&[u8]> = keys.iter().collect();
            match list.as_slice() {
                [] => Pending::Static(reply::END),
                [key] => match servers_for(pool, key) {
                    Ok(s) => read(pool, s, raw.to_vec(), ReplyKind::Retrieval).await,
                    Err(e) => route_error(pool, e),
                },
                _ => multi_get(pool, &list, raw, cmd, exptime).await,
            }
        }
        Request::Store { key, noreply, .. }
        | Request::Delete { key, noreply }
        | Request::Arithmetic { key, noreply, .. }
        | Request::Touch { key, noreply, .. } => {
            let kind = if *noreply {
                ReplyKind::None
            } else {
                ReplyKind::Line
            };
            match servers_for(pool, key) {
                Ok(s) => write(pool, s, raw.to_vec(), kind).await,
                Err(e) if *noreply => {
                    incr(&pool.stats.forward_error);
                    let _ = e;
                    Pending::Nothing
                }
                Err(e) => route_error(pool, e),
            }
        }
        Request::MetaGet { key, flags }
        | Request::MetaSet { key, flags, .. }
        | Request::MetaDelete { key, flags }
        | Request::MetaArithmetic { key, flags }
        | Request::MetaDebug { key, flags } => {
            let mut tmp = [0u8; 256];
            let Ok(real) = decode_key(key, flags.base64(), &mut tmp) else {
                return Pending::Static(b"CLIENT_ERROR error decoding key\r\n");
            };
            let servers = match servers_for(pool, real) {
                Ok(s) => s,
                Err(e) => return route_error(pool, e),
            };
            let quiet = flags.quiet() && !matches!(req, Request::MetaDebug { .. });
            let mut bytes = raw.to_vec();
            let kind = if quiet {
                bytes.extend_from_slice(b"mn\r\n");
                ReplyKind::MetaQuiet
            } else {
                ReplyKind::Meta
            };
            match req {
                Request::MetaGet { .. } | Request::MetaDebug { .. } => {
                    read(pool, servers, bytes, kind).await
                }
                _ => write(pool, servers, bytes, kind).await,
            }
        }
        Request::MetaNoop => Pending::Static(reply::MN),
        Request::FlushAll { noreply, .. } => {
            let kind = if *noreply {
                ReplyKind::None
            } else {
                ReplyKind::Line
            };
            let mut rxs = Vec::new();
            for s in pool.placement.live() {
                if let Some(rx) = send(pool, s, raw.to_vec(), kind).await {
                    rxs.push(rx);
                }
            }
            if *noreply {
                Pending::Nothing
            } else {
                Pending::All(rxs)
            }
        }
        Request::Version => Pending::Ready(
            format!("VERSION {} shoal-proxy\r\n", env!("CARGO_PKG_VERSION")).into_bytes(),
        ),
        Request::Verbosity { noreply, .. } => {
            if *noreply {
                Pending::Nothing
            } else {
                Pending::Static(reply::OK)
            }
        }
        Request::Quit => Pending::Nothing,
        Request::Shutdown | Request::ShutdownGraceful | Request::ShutdownInvalidMode => {
            Pending::Static(reply::SHUTDOWN_NOT_ENABLED)
        }
        // Answered here, as the parser used to: a pool has no delay to read.
        Request::FlushAllInvalidDelay { noreply } => {
            if *noreply {
                Pending::Nothing
            } else {
                Pending::Static(b"CLIENT_ERROR invalid exptime argument\r\n")
            }
        }
        // Server administration (`stats`, `cache_memlimit`, `lru_crawler`, `watch`, and
        // whatever the parser learns next) has no meaning across a pool: twemproxy
        // answers ERROR.
        _ => Pending::Static(reply::ERROR),
    }
}

/// A multi-get's keys grouped by server.
struct Plan {
    /// The keys, concatenated.
    keys: Vec<u8>,
    /// (start, end, fragment) for each key in request order.
    spans: Vec<(usize, usize, usize)>,
    /// Per fragment: its servers (failover order).
    servers: Vec<Vec<usize>>,
    /// Per fragment: its keys, each preceded by a space.
    keys_of: Vec<Vec<u8>>,
}

/// Groups `list` by the server each key lives on (one fragment per key when replicated,
/// so each can fail over on its own).
fn plan(pool: &Pool, list: &[&[u8]]) -> Result<Plan, BackendError> {
    let replicated = pool.placement.replica_count() > 1;
    let mut p = Plan {
        keys: Vec::with_capacity(list.iter().map(|k| k.len()).sum()),
        spans: Vec::with_capacity(list.len()),
        servers: Vec::new(),
        keys_of: Vec::new(),
    };
    for key in list {
        let servers = servers_for(pool, key)?;
        let f = if replicated {
            None
        } else {
            p.servers.iter().position(|s| s.first() == servers.first())
        };
        let f = match f {
            Some(f) => f,
            None => {
                p.servers.push(servers);
                p.keys_of.push(Vec::new());
                p.servers.len() - 1
            }
        };
        let start = p.keys.len();
        p.keys.extend_from_slice(key);
        p.spans.push((start, p.keys.len(), f));
        if let Some(fk) = p.keys_of.get_mut(f) {
            fk.push(b' ');
            fk.extend_from_slice(key);
        }
    }
    Ok(p)
}

/// Sends one request per fragment of `plan`; the error reply if one cannot be sent.
async fn send_plan(
    pool: &Pool,
    plan: Plan,
    cmd: &str,
    exptime: Option<i64>,
) -> Result<MultiGet, Vec<u8>> {
    let mut frags = Vec::with_capacity(plan.servers.len());
    for (servers, fkeys) in plan.servers.into_iter().zip(plan.keys_of) {
        let mut bytes = Vec::with_capacity(fkeys.len() + 24);
        bytes.extend_from_slice(cmd.as_bytes());
        if let Some(t) = exptime {
            bytes.push(b' ');
            bytes.extend_from_slice(t.to_string().as_bytes());
        }
        bytes.extend_from_slice(&fkeys);
        bytes.extend_from_slice(b"\r\n");
        incr(&pool.stats.fragments);
        match read(pool, servers, bytes, ReplyKind::Retrieval).await {
            Pending::One(a) => frags.push(a),
            Pending::Ready(r) => return Err(r),
            Pending::Static(r) => return Err(r.to_vec()),
            _ => return Err(BackendError::NoLiveServers.reply()),
        }
    }
    Ok(MultiGet {
        keys: plan.keys,
        spans: plan.spans,
        frags,
    })
}

/// A multi-get small enough to forward at once.
async fn multi_get(
    pool: &Pool,
    list: &[&[u8]],
    raw: &[u8],
    cmd: &str,
    exptime: Option<i64>,
) -> Pending {
    let mut plan = match plan(pool, list) {
        Ok(p) => p,
        Err(e) => return route_error(pool, e),
    };
    if plan.servers.len() == 1 {
        // Every key on one server: forward the request as it came.
        let servers = plan.servers.pop().unwrap_or_default();
        return read(pool, servers, raw.to_vec(), ReplyKind::Retrieval).await;
    }
    match send_plan(pool, plan, cmd, exptime).await {
        Ok(m) => Pending::Multi(Box::new(m)),
        Err(r) => Pending::Ready(r),
    }
}

async fn await_rx(rx: Option<ReplyRx>) -> Reply {
    match rx {
        Some(rx) => rx.await.unwrap_or(Err(BackendError::Closed)),
        None => Err(BackendError::Closed),
    }
}

/// Waits for an attempt, failing over to the remaining replicas on transport errors.
async fn finish(pool: &Pool, a: Attempt) -> Reply {
    let mut r = await_rx(a.rx).await;
    for s in a.rest {
        if r.is_ok() {
            break;
        }
        r = await_rx(send(pool, s, a.bytes.clone(), a.kind).await).await;
    }
    if let Ok(b) = &r {
        observe(pool, a.kind, b);
    }
    r
}

/// Feeds the size of the values in a retrieval reply to the pool's estimate.
fn observe(pool: &Pool, kind: ReplyKind, b: &[u8]) {
    let (size, count) = match kind {
        ReplyKind::Retrieval => {
            entries(b).fold((0, 0), |(max, n), e| (max.max(e.all.1 - e.all.0), n + 1))
        }
        ReplyKind::Meta | ReplyKind::MetaQuiet if b.starts_with(b"VA ") => (b.len(), 1),
        _ => (0, 0),
    };
    pool.value_size.observe(size, count);
}

/// Waits for every fragment of a multi-get: their replies, or the first failure (a
/// transport error, or a reply that is not `VALUE`s and `END`, such as an error line).
async fn finish_fragments(pool: &Pool, frags: Vec<Attempt>) -> Result<Vec<Bytes>, Reply> {
    let mut replies: Vec<Bytes> = Vec::with_capacity(frags.len());
    let mut err: Option<Reply> = None;
    for a in frags {
        // Every fragment is awaited even after a failure, so none is left answering
        // into a dropped channel while its connection's later replies wait behind it.
        match finish(pool, a).await {
            Ok(b) if b.starts_with(b"VALUE ") || b.starts_with(b"END") => replies.push(b),
            other => {
                if err.is_none() {
                    err = Some(other);
                }
            }
        }
    }
    match err {
        Some(r) => Err(r),
        None => Ok(replies),
    }
}

fn push_reply(pool: &Pool, r: Reply, out: &mut Vec<u8>) {
    match r {
        Ok(b) => out.extend_from_slice(&b),
        Err(e) => {
            incr(&pool.stats.forward_error);
            out.extend_from_slice(&e.reply());
        }
    }
}

async fn resolve(pool: &Pool, p: Pending, out: &mut Vec<u8>) {
    match p {
        Pending::Ready(v) => out.extend_from_slice(&v),
        Pending::Static(s) => out.extend_from_slice(s),
        Pending::Nothing => {}
        Pending::One(a) => {
            let r = finish(pool, a).await;
            push_reply(pool, r, out);
        }
        Pending::First(rxs) => {
            let mut first_err = None;
            let mut done = false;
            for rx in rxs {
                let r = rx.await.unwrap_or(Err(BackendError::Closed));
                if done {
                    continue;
                }
                match r {
                    Ok(b) => {
                        out.extend_from_slice(&b);
                        done = true;
                    }
                    Err(e) => {
                        first_err.get_or_insert(e);
                    }
                }
            }
            if !done {
                push_reply(
                    pool,
                    Err(first_err.unwrap_or(BackendError::NoLiveServers)),
                    out,
                );
            }
        }
        Pending::All(rxs) => {
            let mut bad: Option<Reply> = None;
            for rx in rxs {
                let r = rx.await.unwrap_or(Err(BackendError::Closed));
                let ok = matches!(&r, Ok(b) if &b[..] == reply::OK);
                if !ok && bad.is_none() {
                    bad = Some(r);
                }
            }
            match bad {
                None => out.extend_from_slice(reply::OK),
                Some(r) => push_reply(pool, r, out),
            }
        }
        Pending::Multi(m) => match finish_fragments(pool, m.frags).await {
            Ok(replies) => {
                reassemble(&m.keys, &m.spans, &replies, out);
                out.extend_from_slice(reply::END);
            }
            Err(r) => push_reply(pool, r, out),
        },
        // Batches are resolved by the session, which knows which multi-get failed.
        Pending::Batch(_) => {}
    }
}

/// One `VALUE` entry of a fragment reply: the key's and the whole entry's byte ranges.
struct Entry {
    key: (usize, usize),
    all: (usize, usize),
}

/// The entries of a framed retrieval reply, in order (stops at `END` or anything else).
fn entries(b: &[u8]) -> impl Iterator<Item = Entry> + '_ {
    let mut pos = 0;
    std::iter::from_fn(move || {
        let rest = b.get(pos..)?;
        let nl = memchr::memchr(b'\n', rest)?;
        let line = &rest[..nl.saturating_sub(1)];
        let fields = line.strip_prefix(b"VALUE ")?;
        let mut toks = fields.split(|&c| c == b' ');
        let key = toks.next().unwrap_or_default();
        let len = toks
            .nth(1)
            .and_then(|t| std::str::from_utf8(t).ok())
            .and_then(|t| t.parse::<usize>().ok())
            .unwrap_or(0);
        let key_start = pos + 6;
        let end = pos
            .saturating_add(nl + 1)
            .saturating_add(len)
            .saturating_add(2);
        let entry = Entry {
            key: (key_start, key_start + key.len()),
            all: (pos, end.min(b.len())),
        };
        pos = end;
        Some(entry)
    })
}

/// Writes the hits of every fragment in the request's key order (without `END`).
fn reassemble(keys: &[u8], spans: &[(usize, usize, usize)], replies: &[Bytes], out: &mut Vec<u8>) {
    let parsed: Vec<Vec<Entry>> = replies.iter().map(|b| entries(b).collect()).collect();
    let mut next = vec![0usize; replies.len()];
    for &(s, e, f) in spans {
        let (Some(reply), Some(list), Some(i)) = (replies.get(f), parsed.get(f), next.get_mut(f))
        else {
            continue;
        };
        if let Some(entry) = list.get(*i) {
            if reply.get(entry.key.0..entry.key.1) == keys.get(s..e) {
                out.extend_from_slice(reply.get(entry.all.0..entry.all.1).unwrap_or_default());
                *i += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
