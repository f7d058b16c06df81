//! One client connection: shoald's protocol on shoal-net's connection loop.
//!
//! [`shoal_net::connection::serve`] reads, bounds memory and writes every turn's replies
//! with one call; this module parses each request in place (text or binary), executes it
//! and appends its reply. Nothing is allocated per request: keys and values are parsed in
//! place and copied once, into the reply. What shoald adds to the shared loop:
//! - a multi-get stops at the output high-water mark even half-way through its keys (see
//!   [`ReplyWindow`]) and resumes once the client has read what was generated;
//! - a value the read budget (`-o read_buf_mem_limit`, by default `-m`) refused is
//!   recorded as memcached records one it has no item memory for;
//! - `-R`, `-o idle_timeout`, the SASL penalty delay, per-turn latency timing, and `watch`,
//!   which turns the connection into an event stream.

use crate::auth::Session;
use crate::commands::{self, Flow, Out};
use crate::config::Protocol;
use crate::conns::{CloseReason, ConnInfo, PublishedInfo};
use crate::latency::WorkerLatency;
use crate::reply_window::ReplyWindow;
use crate::stats::ThreadStats;
use crate::watch::{WatchError, WatchHandle, Watcher};
use crate::worker::Worker;
use shoal_net::connection::{self, End, Handler, Output, Proceed, Step};
use shoal_protocol::binary::{self, Status, REQUEST_MAGIC};
use shoal_protocol::{parse, parse_binary, reply, BinaryParsed, Limits, Parsed, Request};
use shoal_store::{FlashReadDone, FlashReads, ValueRef};
use std::future::Future;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Serves one connection until the client quits, an error closes it, or shutdown.
pub async fn serve<S>(stream: &mut S, worker: &Worker, info: &ConnInfo)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let shared = &worker.shared;
    let config = connection::Config {
        idle_timeout: match shared.settings.idle_timeout {
            0 => None,
            s => Some(Duration::from_secs(s)),
        },
        requests_per_turn: shared.settings.reqs_per_event,
        min_referenced_value: shared.settings.zero_copy_min,
    };
    let mut conn = Conn {
        worker,
        info: PublishedInfo::new(info),
        limits: Limits {
            max_value_len: shared.settings.max_item_size,
        },
        window: ReplyWindow::new(shared.buffers.empty()),
        session: Session::new(shared.sasl.is_some() || shared.ascii_auth.is_some()),
        turn: None,
        watcher: None,
        reads: FlashReads::new(),
        ahead: shared.buffers.empty(),
        pending: Vec::new(),
        rerun: false,
    };
    let end = connection::serve(stream, &mut conn, &shared.buffers, &config).await;
    match end {
        End::Closed | End::Abandoned => {}
        End::Eof => {
            if shared.stopping() {
                info.closing(CloseReason::Shutdown);
            }
        }
        End::Stopped => info.closing(CloseReason::Shutdown),
        End::IdleTimeout => {
            crate::stats::ThreadStats::incr(&worker.stats.idle_kicks);
            info.closing(CloseReason::IdleTimeout);
        }
        End::Error | End::LineTooLong => info.closing(CloseReason::Error),
        End::Detached => {
            // A datagram ends with its requests: over UDP, `watch` answers but streams
            // nothing (the datagram's stream would never end).
            if shared.udp_label.is_some() && info.id == shared.udp_conn_id() {
                return;
            }
            if let Some(handle) = conn.watcher.take() {
                // From here on the connection only streams events; what it sends is
                // ignored.
                stream_events(stream, &handle.watcher).await;
            }
        }
    }
}

/// A connection's state between requests: what shoald adds to the shared loop.
struct Conn<'a> {
    worker: &'a Worker,
    info: PublishedInfo<'a>,
    limits: Limits,
    /// Where a multi-get suspended at the high-water mark resumes.
    window: ReplyWindow,
    session: Session,
    /// When the turn began, with metrics on: its requests are timed together.
    turn: Option<(&'a WorkerLatency, u64)>,
    /// The watcher this connection became (`watch`).
    watcher: Option<WatchHandle<'a>>,
    /// Values this connection reads from flash (lent to the worker while a request runs).
    reads: FlashReads,
    /// What reads ahead may hold, charged to the buffer budget (`-o read_buf_mem_limit`)
    /// for the turn.
    ahead: shoal_net::Reservation,
    /// Reads handed to the reader threads whose results have not been collected: those
    /// read ahead for requests behind the one that waited.
    pending: Vec<tokio::sync::oneshot::Receiver<FlashReadDone>>,
    /// The request is running again after its flash reads: already counted.
    rerun: bool,
}

impl<'a> Handler for Conn<'a> {
    /// Values of hits, sent from segment memory (see [`Out`]).
    type Value = ValueRef<'a>;

    async fn request<W: AsyncWrite + Unpin>(
        &mut self,
        input: &[u8],
        refused: bool,
        out: &mut Output<'_, W, ValueRef<'a>>,
    ) -> Step {
        let Some(readers) = self.worker.shared.flash_readers.as_ref() else {
            return Conn::request(self, input, refused, out.reply());
        };
        // A retrieval that meets a value on flash stops there with the read recorded
        // (as at the reply's high-water mark); the reads run on the reader threads while
        // this thread serves other connections, and the request runs again from where it
        // stopped. A stub that keeps changing under its reads (rare: compaction, a
        // client rewriting the key) is read in place after a few rounds for that key.
        let (mut rounds, mut waited_for) = (0, Vec::new());
        loop {
            std::mem::swap(&mut self.reads, &mut self.worker.flash_reads.borrow_mut());
            let step = Conn::request(self, input, refused, out.reply());
            std::mem::swap(&mut self.reads, &mut self.worker.flash_reads.borrow_mut());
            // Only a request that stopped waits for reads (a finished one never leaves
            // any wanted; were one left, running the request again would repeat it).
            if step != Step::Suspend || !self.reads.has_wanted() {
                self.reads.take_wanted().for_each(drop);
                self.reads.set_blocking(false);
                self.rerun = false;
                return step;
            }
            let key = self.reads.first_wanted().unwrap_or_default();
            if key == waited_for.as_slice() {
                rounds += 1;
                if rounds >= 3 {
                    self.reads.set_blocking(true);
                }
            } else {
                rounds = 0;
                waited_for.clear();
                waited_for.extend_from_slice(key);
            }
            if self.pending.is_empty() {
                // The request's own read goes first, then those read ahead; the request
                // runs again as soon as its own is done, while the readers go on.
                self.read_ahead(input);
                readers.submit(self.reads.take_wanted(), &mut self.pending);
                if !self.pending.is_empty() {
                    let first = self.pending.remove(0);
                    // A read whose thread is gone (the server stopping) is wanted again.
                    if let Ok(done) = first.await {
                        self.reads.done(done);
                    }
                }
            } else {
                // Reads already in flight (read ahead) likely hold what is wanted:
                // collect them before asking again.
                self.reads.take_wanted().for_each(drop);
                for result in self.pending.drain(..) {
                    if let Ok(done) = result.await {
                        self.reads.done(done);
                    }
                }
            }
            self.worker.current_conn.set(self.info.id());
            self.rerun = true;
        }
    }

    fn request_now<W: AsyncWrite + Unpin>(
        &mut self,
        input: &[u8],
        refused: bool,
        out: &mut Output<'_, W, ValueRef<'a>>,
    ) -> Option<Step> {
        // Without a flash tier nothing a request does waits.
        if self.worker.shared.flash_readers.is_some() {
            return None;
        }
        Some(Conn::request(self, input, refused, out.reply()))
    }

    fn line_too_long(&self) -> &'static [u8] {
        // A request line longer than the budget can hold (only multi-gets may be long):
        // memcached closes such a connection with this reply.
        reply::OUT_OF_MEMORY_READING
    }

    fn begin_turn(&mut self, has_input: bool) {
        self.worker.current_conn.set(self.info.id());
        self.turn = self
            .worker
            .latency
            .as_deref()
            .filter(|_| has_input)
            .map(|l| (l, shoal_net::metrics::clock::now()));
    }

    fn end_turn(&mut self) {
        // Values read ahead for requests that did not come this turn.
        self.reads.clear();
        self.pending.clear();
        self.ahead.release();
        if let Some((latency, start)) = self.turn.take() {
            latency.end_turn(start);
        }
    }

    fn yielded(&mut self) {
        // memcached's conn_yields counts only this reason for giving up the turn (`-R`
        // requests served with more input waiting), not a full output buffer or a
        // suspended multi-get.
        ThreadStats::incr(&self.worker.stats.conn_yields);
    }

    fn before_write<W: AsyncWrite + Unpin>(
        &mut self,
        _out: &mut Output<'_, W, ValueRef<'a>>,
    ) -> impl Future<Output = Proceed> {
        // Taken here rather than in the future, which then holds no borrow of the
        // connection: a smaller future to build on every turn.
        let penalty = self.session.penalty.take();
        async move {
            if let Some(delay) = penalty {
                // A failed login: its reply (and anything after it) waits, so a client
                // that opens a new connection per guess is slowed down too.
                shoal_net::time::sleep(delay).await;
            }
            Proceed::Write
        }
    }

    fn after_write(&mut self, written: usize, out: &mut Vec<u8>) {
        ThreadStats::add(&self.worker.stats.bytes_written, written as u64);
        self.window.written(out);
    }

    fn received(&mut self, n: usize) {
        ThreadStats::add(&self.worker.stats.bytes_read, n as u64);
        self.info.command_at(self.worker.shared.store.clock().now());
    }

    fn stopping(&self) -> bool {
        // No shutdown signal is watched while reading: that would put every read of
        // every thread through one shared waiter list. Shutdown ends reads with
        // shutdown(SHUT_RD).
        self.worker.shared.stopping()
    }
}

/// Pipelined requests behind the one waiting for flash whose keys are looked at to be
/// read in the same batch, and keys looked at in all.
const READ_AHEAD_REQUESTS: usize = 64;
const READ_AHEAD_KEYS: usize = 256;

impl<'a> Conn<'a> {
    /// Records reads of values on flash for the keys still to be served in `input` (the
    /// rest of the request that stopped, then the retrievals pipelined behind it), so
    /// they are read together, as memcached queues a pipeline's reads at once. Within
    /// [`shoal_store::READ_AHEAD_BYTES`] taken from the buffer budget for the turn (none
    /// when the budget is spent); text requests only (a binary get carries one key, and
    /// its pipeline is read one value at a time).
    fn read_ahead(&mut self, input: &[u8]) {
        if input.first() == Some(&REQUEST_MAGIC) || !self.session.authenticated {
            return;
        }
        let allowed = if self.ahead.grow_to(shoal_store::READ_AHEAD_BYTES) {
            shoal_store::READ_AHEAD_BYTES
        } else {
            0
        };
        self.reads.set_read_ahead(allowed);
        if allowed == 0 {
            return;
        }
        let store = &self.worker.shared.store;
        let mut rest = input;
        let mut keys = 0;
        let mut from = self.window.resume_at;
        for _ in 0..READ_AHEAD_REQUESTS {
            let Parsed::Request { request, consumed } = parse(rest, &self.limits) else {
                break;
            };
            match request {
                Request::Get { keys: list, .. } | Request::GetAndTouch { keys: list, .. } => {
                    for (_, key) in list.iter_from(from) {
                        if keys == READ_AHEAD_KEYS {
                            return;
                        }
                        keys += 1;
                        store.want_read(key, &mut self.reads);
                    }
                }
                Request::MetaGet { key, flags } if !flags.base64() => {
                    keys += 1;
                    store.want_read(key, &mut self.reads);
                }
                _ => {}
            }
            if keys >= READ_AHEAD_KEYS {
                return;
            }
            from = 0;
            rest = rest.get(consumed..).unwrap_or_default();
        }
    }

    /// Parses and executes the request at the head of `input`. `oom`: the buffer budget
    /// refused the request's value, so "too large" means "no memory".
    fn request(&mut self, input: &[u8], oom: bool, reply: &mut Out<'a>) -> Step {
        let worker = self.worker;
        let shared = &worker.shared;
        // Re-parsing a storage request with no room for values turns it into the "too
        // large" shape (key, bytes to drop, bytes to swallow): how a value the budget
        // refused is skipped.
        let limits = if oom { &REFUSE_VALUES } else { &self.limits };
        let binary = match shared.settings.protocol {
            Protocol::Auto => input[0] == REQUEST_MAGIC,
            Protocol::Binary => true,
            Protocol::Ascii => false,
        };
        if binary && input[0] != REQUEST_MAGIC {
            // `-B binary`: memcached closes a connection that sends anything else.
            tracing::debug!(conn = self.info.id(), "not a binary request; closing");
            return Step::Close;
        }
        if binary {
            let rerun = self.rerun;
            return binary_step(
                worker,
                &mut self.session,
                input,
                (limits, oom),
                rerun,
                reply,
            );
        }
        if shared.sasl.is_some() {
            // With SASL on, only the binary protocol can authenticate (memcached).
            reply.bytes().extend_from_slice(SASL_ONLY);
            return Step::Close;
        }
        let mut ctx = TextContext {
            worker,
            session: &mut self.session,
            info: &mut self.info,
            window: &mut self.window,
            rerun: self.rerun,
        };
        match ctx.step(input, limits, oom, reply) {
            TextStep::Step(step) => step,
            TextStep::Watch { consumed, kinds } => match shared.watchers.add(kinds) {
                Ok(handle) => {
                    reply.bytes().extend_from_slice(reply::OK);
                    self.watcher = Some(handle);
                    Step::Detach { consumed }
                }
                Err(e) => {
                    reply.bytes().extend_from_slice(match e {
                        WatchError::TooMany => WATCHER_TOO_MANY,
                        WatchError::UnknownType => reply::ERROR,
                    });
                    Step::Done {
                        consumed,
                        swallow: 0,
                    }
                }
            },
        }
    }
}

/// Limits that refuse every value: see [`Conn::request`].
const REFUSE_VALUES: Limits = Limits { max_value_len: 0 };

/// memcached's answer when [`crate::watch::MAX_WATCHERS`] are already watching.
const WATCHER_TOO_MANY: &[u8] = b"WATCHER_TOO_MANY log watcher limit reached\r\n";

/// Streams a watcher's events until the client goes away or the server stops (which ends
/// reads). Input is read and dropped, so a closed client is noticed.
async fn stream_events<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S, watcher: &Watcher) {
    let mut lines = Vec::new();
    let mut sink = [0u8; 512];
    loop {
        tokio::select! {
            _ = watcher.next_lines(&mut lines) => {
                if stream.write_all(&lines).await.is_err() {
                    return;
                }
            }
            read = stream.read(&mut sink) => {
                if !matches!(read, Ok(n) if n > 0) {
                    return;
                }
            }
        }
    }
}

/// What one text request did: a step of the loop, or a `watch` of these event kinds (the
/// connection becomes a watcher if one can be added).
enum TextStep {
    Step(Step),
    Watch { consumed: usize, kinds: u32 },
}

/// The reply to a text request on a SASL-only server.
const SASL_ONLY: &[u8] = b"CLIENT_ERROR authentication required (binary SASL only)\r\n";

/// What a text request runs with.
struct TextContext<'c, 'w> {
    worker: &'w Worker,
    session: &'c mut Session,
    info: &'c mut PublishedInfo<'w>,
    window: &'c mut ReplyWindow,
    /// The request runs again after its flash reads: counted already.
    rerun: bool,
}

impl<'w> TextContext<'_, 'w> {
    /// Parses and executes the request at the head of `input`. `oom`: the limits were
    /// lowered because the buffer budget refused the value, so "too large" means "no
    /// memory".
    fn step(&mut self, input: &[u8], limits: &Limits, oom: bool, out: &mut Out<'w>) -> TextStep {
        let worker = self.worker;
        match parse(input, limits) {
            Parsed::Request { request, consumed } => {
                self.info.set_reading_value(false);
                // Counted only when metrics are served (timed per turn, in `serve`), and
                // once: not again when a suspended multi-get resumes.
                if let Some(latency) = &worker.latency {
                    if self.window.resume_at == 0 && !self.rerun {
                        latency.count(crate::latency::text_command(&request));
                    }
                }
                if out.referenced() > 0 && commands::may_store(&request) {
                    out.copy_values();
                }
                TextStep::Step(
                    match commands::execute(worker, self.session, request, self.window, out) {
                        Flow::Suspend => Step::Suspend,
                        Flow::Watch(kinds) => return TextStep::Watch { consumed, kinds },
                        Flow::Close => Step::Close,
                        _ => Step::Done {
                            consumed,
                            swallow: 0,
                        },
                    },
                )
            }
            Parsed::Incomplete { needed } => {
                // A whole command line with its value still arriving is memcached's
                // `conn_nread` in `stats conns`.
                self.info.set_reading_value(input.contains(&b'\n'));
                TextStep::Step(Step::Incomplete { needed })
            }
            Parsed::Error {
                error,
                consumed,
                swallow,
                close,
                silent,
            } => {
                if !silent {
                    out.bytes().extend_from_slice(error.reply());
                }
                tracing::debug!(conn = self.info.id(), "protocol error: {error}");
                if close {
                    // memcached closes such a connection as an error (`watch connevents`).
                    self.info.shared().closing(CloseReason::Error);
                }
                TextStep::Step(done(consumed, swallow, close))
            }
            Parsed::TooLarge {
                key,
                consumed,
                swallow,
                noreply,
                remove_old,
                key_base64,
            } => {
                if self.session.authenticated {
                    if oom {
                        commands::storage::no_memory(worker, key, key_base64, remove_old);
                    } else {
                        commands::storage::too_large(worker, key, key_base64, remove_old);
                    }
                }
                if !noreply {
                    out.bytes().extend_from_slice(if oom {
                        reply::OUT_OF_MEMORY_STORING
                    } else {
                        reply::OBJECT_TOO_LARGE
                    });
                }
                TextStep::Step(Step::Done { consumed, swallow })
            }
        }
    }
}

fn binary_step<'w>(
    worker: &'w Worker,
    session: &mut Session,
    input: &[u8],
    (limits, oom): (&Limits, bool),
    rerun: bool,
    out: &mut Out<'w>,
) -> Step {
    match parse_binary(input, limits) {
        BinaryParsed::Request { request, consumed } => {
            if let Some(latency) = worker.latency.as_ref().filter(|_| !rerun) {
                latency.count(crate::latency::binary_command(request.opcode, request.cas));
            }
            match commands::binary::execute(worker, session, request, out) {
                Flow::Suspend => Step::Suspend,
                flow => done(consumed, 0, flow == Flow::Close),
            }
        }
        BinaryParsed::Incomplete { needed } => Step::Incomplete { needed },
        BinaryParsed::TooLarge {
            opcode,
            opaque,
            key,
            consumed,
            swallow,
        } => {
            if session.authenticated {
                let is_set = matches!(opcode, binary::opcode::SET | binary::opcode::SETQ);
                if oom {
                    commands::storage::no_memory(worker, key, false, is_set);
                } else {
                    commands::storage::too_large(worker, key, false, is_set);
                }
            }
            let status = if oom {
                Status::OutOfMemory
            } else {
                Status::TooLarge
            };
            binary::error(out.bytes(), opcode, status, opaque);
            Step::Done { consumed, swallow }
        }
        BinaryParsed::Invalid { opcode, opaque } => {
            binary::error(out.bytes(), opcode, Status::InvalidArguments, opaque);
            Step::Close
        }
    }
}

/// A request handled: go on, or close once its reply is written.
fn done(consumed: usize, swallow: usize, close: bool) -> Step {
    if close {
        Step::Close
    } else {
        Step::Done { consumed, swallow }
    }
}
