//! One client connection: shoal-queued's commands on shoal-net's connection loop, with
//! the replies of everything pipelined sent in one write once they are durable.
//!
//! Replies are held back until the writes they acknowledge are as durable as the fsync
//! policy promises; under `--fsync always` all connections waiting at the same moment
//! share one fsync. If durability cannot be confirmed the connection is closed without
//! the replies, so nothing unconfirmed is ever acknowledged.
//!
//! Memory per connection is bounded against hostile clients by
//! [`shoal_net::connection::serve`], as in shoald:
//! - output: once [`OUTPUT_HIGH_WATER`] bytes of replies are pending the connection sends
//!   them and executes nothing more until the client has taken them, so one that never
//!   reads holds at most that plus one message (and dequeues nothing further); a
//!   multi-key `get` sends what is pending before dequeuing past the mark;
//! - input: the read buffer holds a few kilobytes for free; growth for a larger request
//!   (a big value, a long multi-get line) is first charged to the server-wide read
//!   budget. Past the budget a value is refused with `SERVER_ERROR out of memory storing
//!   object` and its bytes are discarded as they arrive, so stalled senders together hold
//!   at most the budget; a line is refused with `SERVER_ERROR out of memory reading
//!   request` and the connection closed, as memcached does.

use crate::shared::Shared;
use crate::stats::bump;
use crate::status::{ServerStatus, StatusError};
use shoal_net::connection::{self, End, Handler, Output, Proceed, Step};
use shoal_net::peer::PeerWatch;
use shoal_net::{NoValue, OUTPUT_HIGH_WATER};
use shoal_protocol::kestrel::{carries_options, parse_key};
use shoal_protocol::reply;
use shoal_protocol::{parse, Limits, Parsed, ProtocolError, Request, StatsGroup, StoreKind};
use shoal_queue::{
    expiry_from_exptime, expiry_from_kestrel_exptime, unix_now, validate_name, Queue, QueueError,
    Take,
};
use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;

const BAD_NAME: &[u8] = b"CLIENT_ERROR bad queue name\r\n";
const DISK_FULL: &[u8] = b"SERVER_ERROR out of disk space storing message\r\n";
const WRITE_FAILED: &[u8] = b"SERVER_ERROR write error storing message\r\n";
const SYNC_FAILED: &[u8] =
    b"SERVER_ERROR fsync failed; queue is read-only until the server restarts\r\n";
const READ_FAILED: &[u8] = b"SERVER_ERROR read error fetching message\r\n";
const UNAVAILABLE: &[u8] = b"SERVER_ERROR queue unavailable (its data could not be recovered)\r\n";
const FLUSH_FAILED: &[u8] = b"SERVER_ERROR write error flushing queue\r\n";
/// Kestrel's answer to a request it cannot parse (a bad `get` key, an unknown command under
/// `--kestrel`), sent before it disconnects.
const KESTREL_CLIENT_ERROR: &[u8] = b"CLIENT_ERROR\r\n";
/// Kestrel's answer to `flush_all`.
const KESTREL_FLUSHED_ALL: &[u8] = b"Flushed all queues.\r\n";
/// A write refused under `status READONLY` or `QUIESCENT`: a `SERVER_ERROR`, which
/// kestrel-client answers by trying another server.
const REFUSED_READONLY: &[u8] = b"SERVER_ERROR server is read-only (status READONLY)\r\n";
/// A queue operation refused under `status QUIESCENT`.
const REFUSED_QUIESCENT: &[u8] = b"SERVER_ERROR server is quiescent (status QUIESCENT)\r\n";
/// A command whose arguments do not parse (memcached's wording).
const BAD_FORMAT: &[u8] = b"CLIENT_ERROR bad command line format\r\n";
/// The longest `monitor` (as the longest blocking read).
const MAX_MONITOR_SECS: u64 = 600;
/// Kestrel's answer to `reload`.
const KESTREL_RELOADED: &[u8] = b"Reloaded config.\r\n";
/// memcached's answer to `shutdown` without `-A`.
const SHUTDOWN_DISABLED: &[u8] = b"ERROR: shutdown not enabled\r\n";
/// Parses a storage command whose value the budget refused: every value counts as too
/// large, so the parser reports the line's length, the bytes to discard and `noreply`.
const REFUSE_VALUES: Limits = Limits { max_value_len: 0 };

/// What to do after a request.
enum Flow {
    Continue,
    Close,
}

/// A connection's state between requests: what shoal-queued adds to the shared loop.
struct Conn {
    shared: Arc<Shared>,
    limits: Limits,
    /// Queues with consumption to write before replying.
    to_commit: Vec<Arc<Queue>>,
    /// Highest log position per queue to wait on before replying.
    to_sync: Vec<PendingSync>,
    /// This connection's open reads, by queue name.
    open: HashMap<String, OpenReads>,
    shutdown: watch::Receiver<bool>,
    /// The client's socket, watched while a blocking read waits so that a client gone
    /// meanwhile takes no message with it (`None`: not watched).
    peer: Option<RawFd>,
}

/// Serves one connection until the client quits, an error closes it, or shutdown. Open
/// reads still held when it ends go back to the head of their queues. `peer`: the
/// stream's socket, so that a blocking read ends without taking a message when the
/// client closes during the wait.
pub async fn serve<S>(stream: &mut S, shared: Arc<Shared>, peer: Option<RawFd>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let budget = shared.read_budget.clone();
    let mut conn = Conn {
        limits: Limits {
            max_value_len: shared.settings.engine.max_item_size,
        },
        shutdown: shared.shutdown_signal(),
        shared,
        to_commit: Vec::new(),
        to_sync: Vec::new(),
        open: HashMap::new(),
        peer,
    };
    let config = connection::Config {
        // Only time spent waiting for a request counts: a blocking read waits inside its
        // request, so a consumer parked on `get <q>/t=...` is never idle.
        idle_timeout: conn.shared.settings.idle_timeout,
        ..connection::Config::default()
    };
    if connection::serve(stream, &mut conn, &budget, &config).await == End::IdleTimeout {
        bump(&conn.shared.counters.idle_kicks);
    }
    for (_, reads) in conn.open.drain() {
        // Newest first, so that the oldest ends at the head, as before they were read.
        for seq in reads.seqs.into_iter().rev() {
            reads.queue.abort(seq);
        }
    }
}

impl Handler for Conn {
    type Value = NoValue;

    async fn request<W: AsyncWrite + Unpin>(
        &mut self,
        input: &[u8],
        refused: bool,
        out: &mut Output<'_, W, NoValue>,
    ) -> Step {
        if refused {
            return match parse(input, &REFUSE_VALUES) {
                // memcached's answer when it cannot allocate the item; the value is
                // discarded as it arrives and the connection goes on.
                Parsed::TooLarge {
                    consumed,
                    swallow,
                    noreply,
                    ..
                } => {
                    if !noreply {
                        out.buf().extend_from_slice(reply::OUT_OF_MEMORY_STORING);
                    }
                    Step::Done { consumed, swallow }
                }
                // Not a storage command after all (cannot happen: only they announce a
                // size); nothing to skip to, so close.
                _ => {
                    out.buf().extend_from_slice(reply::OUT_OF_MEMORY_READING);
                    Step::Close
                }
            };
        }
        match parse(input, &self.limits) {
            Parsed::Request { request, consumed } => match self.execute(request, out).await {
                Flow::Continue => Step::Done {
                    consumed,
                    swallow: 0,
                },
                Flow::Close => Step::Close,
            },
            // A storage command's size lets the loop make room for all of it at once if
            // the budget allows; a long line grows as it arrives, within the budget too.
            Parsed::Incomplete { needed } => Step::Incomplete { needed },
            Parsed::Error {
                error,
                consumed,
                swallow,
                close,
                silent,
            } => {
                let line = &input[..consumed];
                if error == ProtocolError::UnknownCommand {
                    if let Some((name, secs, max)) = parse_monitor(line) {
                        return match self.monitor(name, secs, max, out).await {
                            Flow::Continue => Step::Done {
                                consumed,
                                swallow: 0,
                            },
                            Flow::Close => Step::Close,
                        };
                    }
                }
                if error == ProtocolError::UnknownCommand
                    && self.queue_command(line, out.buf()).await
                {
                    return Step::Done {
                        consumed,
                        swallow: 0,
                    };
                }
                if error == ProtocolError::UnknownCommand && self.shared.settings.kestrel {
                    // Kestrel answers any command it does not know so, and disconnects.
                    out.buf().extend_from_slice(KESTREL_CLIENT_ERROR);
                    return Step::Close;
                }
                if !silent {
                    out.buf().extend_from_slice(error.reply());
                }
                if close {
                    return Step::Close;
                }
                Step::Done { consumed, swallow }
            }
            Parsed::TooLarge {
                consumed,
                swallow,
                noreply,
                ..
            } => {
                if !noreply {
                    out.buf().extend_from_slice(reply::OBJECT_TOO_LARGE);
                }
                Step::Done { consumed, swallow }
            }
        }
    }

    fn line_too_long(&self) -> &'static [u8] {
        // A request line longer than the budget can hold (only multi-gets may be long):
        // memcached answers this and closes.
        reply::OUT_OF_MEMORY_READING
    }

    async fn before_write<W: AsyncWrite + Unpin>(
        &mut self,
        _out: &mut Output<'_, W, NoValue>,
    ) -> Proceed {
        match self.settle().await {
            Ok(()) => Proceed::Write,
            Err(()) => Proceed::Abandon,
        }
    }

    fn stopping(&self) -> bool {
        self.shared.stopping()
    }

    async fn stop_signal(&mut self) {
        let _ = self.shutdown.changed().await;
    }
}

/// One connection's open reads on one queue (several with `monitor` and
/// `--max-open-transactions`), oldest first.
struct OpenReads {
    queue: Arc<Queue>,
    seqs: std::collections::VecDeque<u64>,
}

/// A queue's position this connection's pending replies wait for.
struct PendingSync {
    queue: Arc<Queue>,
    lsn: u64,
    /// Some of those replies acknowledge messages stored (not only consumed): they may
    /// only be sent once the messages are durable.
    stores: bool,
}

fn push_unique(v: &mut Vec<Arc<Queue>>, q: &Arc<Queue>) {
    if !v.iter().any(|x| Arc::ptr_eq(x, q)) {
        v.push(q.clone());
    }
}

impl Conn {
    /// Commits consumption and waits for durability, so the pending replies may be sent.
    /// An error means they could not be confirmed and the connection must close.
    async fn settle(&mut self) -> Result<(), ()> {
        if !self.to_commit.is_empty() {
            // Let this thread's other connections with requests ready run first: their
            // consumption joins this one's in the queue, the first of them to commit
            // writes it all with one write, and the later commits find nothing left to
            // write (redis batches its AOF per event-loop turn the same way).
            tokio::task::yield_now().await;
        }
        for q in std::mem::take(&mut self.to_commit) {
            match q.commit() {
                Ok(lsn) => self.note_sync(&q, lsn, false),
                // The message was delivered; its ack stays pending and is retried with
                // the next write, so a crash meanwhile redelivers rather than loses it.
                Err(e) => tracing::warn!(queue = q.name(), "writing acks: {e}"),
            }
        }
        for p in std::mem::take(&mut self.to_sync) {
            if let Err(e) = self.shared.engine.durable(&p.queue, p.lsn).await {
                bump(&self.shared.counters.sync_errors);
                let q = p.queue.name();
                if p.stores {
                    tracing::error!(queue = q, "not acknowledging: {e}");
                    return Err(());
                }
                // Only consumption is unconfirmed: the messages are delivered anyway,
                // since withholding them would lose them (their removal is written, and
                // a restart would find it). At worst a crash before the removal reaches
                // the disk delivers them again: at least once, never lost.
                tracing::error!(queue = q, "delivering with removal not durable: {e}");
            }
        }
        Ok(())
    }

    /// Sends the pending replies before the request goes on (settled first, as at the
    /// end of a turn). An error means the connection must close.
    async fn flush_out<W: AsyncWrite + Unpin>(
        &mut self,
        out: &mut Output<'_, W, NoValue>,
    ) -> Result<(), ()> {
        if self.settle().await.is_err() {
            // Nothing unconfirmed may be sent, not even by the write that closes.
            out.buf().clear();
            return Err(());
        }
        out.flush().await.map(drop).map_err(drop)
    }

    fn note_sync(&mut self, q: &Arc<Queue>, lsn: u64, stores: bool) {
        match self.to_sync.iter_mut().find(|p| Arc::ptr_eq(&p.queue, q)) {
            Some(p) => {
                p.lsn = p.lsn.max(lsn);
                p.stores |= stores;
            }
            None => self.to_sync.push(PendingSync {
                queue: q.clone(),
                lsn,
                stores,
            }),
        }
    }

    async fn execute<W: AsyncWrite + Unpin>(
        &mut self,
        req: Request<'_>,
        out: &mut Output<'_, W, NoValue>,
    ) -> Flow {
        match req {
            // Kestrel has no `gets`: its catch-all answers it.
            Request::Get { with_cas: true, .. } if self.shared.settings.kestrel => {
                out.buf().extend_from_slice(KESTREL_CLIENT_ERROR);
                return Flow::Close;
            }
            Request::Get { keys, with_cas } => {
                // Every key is checked before any is read: a bad key after good ones
                // would otherwise end the reply with an error after messages were taken,
                // which a client raises on, losing them.
                if let Some((error, close)) = keys.iter().skip(1).find_map(key_error) {
                    out.buf().extend_from_slice(error);
                    return if close { Flow::Close } else { Flow::Continue };
                }
                for key in keys.iter() {
                    match self.get_one(key, with_cas, out).await {
                        KeyStep::Next => {}
                        KeyStep::Stop => return Flow::Continue,
                        KeyStep::Close => return Flow::Close,
                    }
                    // A multi-get of many keys is bounded like a pipeline: send what is
                    // pending before taking (and so dequeuing) more.
                    if out.len() >= OUTPUT_HIGH_WATER && self.flush_out(out).await.is_err() {
                        return Flow::Close;
                    }
                }
                reply::end(out.buf());
            }
            Request::Store {
                kind: StoreKind::Set,
                key,
                flags,
                exptime,
                data,
                noreply,
                ..
            } => self.set(key, flags, exptime, data, noreply, out.buf()),
            Request::Delete { key, noreply } => {
                let kestrel = self.shared.settings.kestrel;
                let r = match (self.write_refusal(), std::str::from_utf8(key)) {
                    (Some(refused), _) => refused,
                    (None, Ok(name)) if validate_name(key) => {
                        self.open.remove(name);
                        // Kestrel answers `END` whether or not the queue existed.
                        match (self.shared.engine.delete(name), kestrel) {
                            (_, true) => reply::END,
                            (true, false) => reply::DELETED,
                            (false, false) => reply::NOT_FOUND,
                        }
                    }
                    _ => BAD_NAME,
                };
                if !noreply {
                    out.buf().extend_from_slice(r);
                }
            }
            Request::FlushAll { noreply, .. } => {
                let r = match self.write_refusal() {
                    Some(refused) => Err(refused),
                    None => self.shared.engine.flush_all().map_err(|_| FLUSH_FAILED),
                };
                let r = match r {
                    Ok(()) if self.shared.settings.kestrel => KESTREL_FLUSHED_ALL,
                    Ok(()) => reply::OK,
                    Err(e) => e,
                };
                if !noreply {
                    out.buf().extend_from_slice(r);
                }
            }
            Request::Stats(StatsGroup::General) => crate::stats::general(
                out.buf(),
                &self.shared.counters,
                &self.shared.engine,
                self.shared.settings.threads,
                &self.shared.read_budget,
            ),
            Request::Stats(StatsGroup::Reset) => {
                self.shared.counters.reset();
                self.shared.engine.reset_queue_counts();
                for q in self.shared.engine.queues() {
                    q.reset_counters();
                }
                out.buf().extend_from_slice(reply::RESET);
            }
            Request::Stats(StatsGroup::Other(b"queue")) => {
                crate::stats::memcacheq_queues(out.buf(), &self.shared.engine)
            }
            Request::Version => reply::version(out.buf(), crate::config::VERSION.as_bytes()),
            Request::Verbosity { .. } if self.shared.settings.kestrel => {
                out.buf().extend_from_slice(KESTREL_CLIENT_ERROR);
                return Flow::Close;
            }
            Request::Verbosity { noreply, .. } => {
                if !noreply {
                    out.buf().extend_from_slice(reply::OK);
                }
            }
            Request::Quit => return Flow::Close,
            // Kept as before the parser passed these to the server (issue 12).
            Request::FlushAllInvalidDelay { noreply } => {
                if !noreply {
                    out.buf()
                        .extend_from_slice(ProtocolError::InvalidExptime.reply());
                }
            }
            Request::ShutdownInvalidMode => out
                .buf()
                .extend_from_slice(ProtocolError::InvalidShutdownMode.reply()),
            Request::Shutdown | Request::ShutdownGraceful => {
                if self.shared.settings.enable_shutdown {
                    // Kestrel closes the connection without a reply; every connection then
                    // finishes its replies and the server exits as on SIGTERM.
                    self.shared.begin_shutdown();
                    return Flow::Close;
                }
                out.buf().extend_from_slice(SHUTDOWN_DISABLED);
            }
            // add/replace/append/prepend/cas, arithmetic, touch, meta commands and the
            // other stats groups mean nothing for a queue. Kestrel answers every command
            // it has no handler for with CLIENT_ERROR and a disconnect.
            _ if self.shared.settings.kestrel => {
                out.buf().extend_from_slice(KESTREL_CLIENT_ERROR);
                return Flow::Close;
            }
            _ => out.buf().extend_from_slice(reply::ERROR),
        }
        Flow::Continue
    }

    fn set(
        &mut self,
        key: &[u8],
        flags: u32,
        exptime: i64,
        data: &[u8],
        noreply: bool,
        out: &mut Vec<u8>,
    ) {
        bump(&self.shared.counters.cmd_set);
        if let Some(refused) = self.write_refusal() {
            if !noreply {
                out.extend_from_slice(refused);
            }
            return;
        }
        let now = unix_now();
        let exp = if self.shared.settings.kestrel {
            expiry_from_kestrel_exptime(exptime, now)
        } else {
            expiry_from_exptime(exptime, now)
        };
        if let Some(dests) = std::str::from_utf8(key)
            .ok()
            .and_then(|name| self.shared.engine.alias_destinations(name))
        {
            // Kestrel's alias: written to each destination; STORED only if all took it.
            let (stored, result) = self
                .shared
                .engine
                .enqueue_alias(&dests, flags, exp, data, now);
            for (q, lsn) in stored.writes {
                self.note_sync(&q, lsn, true);
            }
            if !noreply {
                out.extend_from_slice(match result {
                    Ok(()) => reply::STORED,
                    Err(_) => reply::NOT_STORED,
                });
            }
            return;
        }
        let r: &[u8] = match std::str::from_utf8(key) {
            Ok(name) if validate_name(key) => match self.shared.engine.queue_or_create(name) {
                Ok(q) if q.sync_failed() => {
                    bump(&self.shared.counters.write_errors);
                    SYNC_FAILED
                }
                // Copied to the queue's fanout children too (Kestrel's `parent+child`).
                Ok(q) => match self.shared.engine.enqueue_fanout(&q, flags, exp, data, now) {
                    Ok(stored) => {
                        for (q, lsn) in stored.writes {
                            self.note_sync(&q, lsn, true);
                        }
                        reply::STORED
                    }
                    Err(QueueError::Full) => reply::NOT_STORED,
                    Err(QueueError::TooLarge) => reply::OBJECT_TOO_LARGE,
                    Err(e) => {
                        bump(&self.shared.counters.write_errors);
                        tracing::warn!(queue = name, "enqueue failed: {e}");
                        match e {
                            QueueError::Write(io) if io.raw_os_error() == Some(libc::ENOSPC) => {
                                DISK_FULL
                            }
                            _ => WRITE_FAILED,
                        }
                    }
                },
                Err(QueueError::Unavailable) => UNAVAILABLE,
                Err(_) => BAD_NAME,
            },
            _ => BAD_NAME,
        };
        if !noreply {
            out.extend_from_slice(r);
        }
    }

    /// One key of a `get`: dequeue (or open, peek, close, abort) per its options.
    ///
    /// A key carrying read options (or any key under `--kestrel`) is answered as Kestrel
    /// 2.4 does: `VALUE <queue> 0 <n>` (the bare queue name, flags 0: Grabby Hands parses
    /// exactly that), unknown options ignored, `CLIENT_ERROR` and a disconnect for options
    /// it cannot act on, `ERROR` and a disconnect for a second open read on a queue or a
    /// plain read of a queue this connection holds an open read on. A plain key keeps
    /// MemcacheQ's reply: the key and the flags given at `set`.
    /// One key of a `get`: `with_cas` (`gets`) adds the message's sequence number as its
    /// CAS unique, which memcached clients expect on every `gets` value line.
    async fn get_one<W: AsyncWrite + Unpin>(
        &mut self,
        key: &[u8],
        with_cas: bool,
        out: &mut Output<'_, W, NoValue>,
    ) -> KeyStep {
        bump(&self.shared.counters.cmd_get);
        let kestrel = self.shared.settings.kestrel || carries_options(key);
        if let Some((error, close)) = key_error(key) {
            out.buf().extend_from_slice(error);
            return if close { KeyStep::Close } else { KeyStep::Stop };
        }
        let Ok(o) = parse_key(key) else {
            return KeyStep::Close;
        };
        let Ok(name) = std::str::from_utf8(o.queue) else {
            return KeyStep::Close;
        };
        if o.close || o.abort {
            if o.close {
                self.close_open(name, 1);
            } else {
                self.abort_open(name);
            }
            if !o.open {
                return KeyStep::Next;
            }
        }
        if self.shared.status.get().blocks_reads() {
            // QUIESCENT: reads opened before may still be closed or aborted (above), but
            // nothing is read.
            out.buf().extend_from_slice(REFUSED_QUIESCENT);
            return KeyStep::Stop;
        }
        if kestrel && !o.open && !o.peek && self.open_count(name) > 0 {
            // A non-transactional fetch with a read open on the queue: Kestrel refuses it
            // and disconnects (which returns the open read to the queue).
            out.buf().extend_from_slice(reply::ERROR);
            return KeyStep::Close;
        }
        if o.open && self.open_count(name) >= self.shared.settings.max_open_transactions {
            // Kestrel's TooManyOpenTransactions (`--max-open-transactions`, 1 by default
            // as in Kestrel). A key with `/open` is always in Kestrel reply mode.
            out.buf().extend_from_slice(reply::ERROR);
            return KeyStep::Close;
        }
        let take = if o.peek {
            Take::Peek
        } else if o.open {
            Take::Open
        } else {
            Take::Remove
        };
        let deadline = o.timeout.map(|t| Instant::now() + t);
        let got = match self.wait_take(name, take, deadline, out).await {
            Ok(got) => got,
            Err(step) => return step,
        };
        match got {
            Some((q, d)) => {
                bump(&self.shared.counters.get_hits);
                let cas = with_cas.then_some(d.seq);
                if kestrel {
                    reply::value(out.buf(), o.queue, 0, &d.data, cas);
                } else {
                    reply::value(out.buf(), key, d.flags, &d.data, cas);
                }
                match take {
                    Take::Remove => push_unique(&mut self.to_commit, &q),
                    Take::Open => self.add_open(name, q, d.seq),
                    Take::Peek => {}
                }
            }
            None => bump(&self.shared.counters.get_misses),
        }
        KeyStep::Next
    }

    /// Takes the head message of `name` (`take`), waiting until `deadline` for one if
    /// given. `Err` is the step the caller must return: an error reply was written, or the
    /// connection must close.
    async fn wait_take<W: AsyncWrite + Unpin>(
        &mut self,
        name: &str,
        take: Take,
        deadline: Option<Instant>,
        out: &mut Output<'_, W, NoValue>,
    ) -> Result<Option<(Arc<Queue>, shoal_queue::Delivery)>, KeyStep> {
        // Made only for a read that may wait; watched only while it waits.
        let watch = deadline.and_then(|_| self.peer.and_then(PeerWatch::new));
        let got = loop {
            // A blocking read looks the queue up again after each wake-up, so a queue
            // deleted and recreated meanwhile is still seen.
            // A fanout child (`parent+child`) is created by its first use, a read
            // included, as in Kestrel: from then on it receives copies.
            let q = if deadline.is_some() || name.contains('+') {
                match self.shared.engine.queue_or_create(name) {
                    Ok(q) => q,
                    Err(_) => break None,
                }
            } else {
                match self.shared.engine.queue(name) {
                    Some(q) => q,
                    None => break None,
                }
            };
            let notified = q.arrivals().notified();
            tokio::pin!(notified);
            // Registered before looking, so an arrival between the look and the wait
            // still wakes us.
            notified.as_mut().enable();
            match q.dequeue(take, unix_now()) {
                Ok(Some(d)) => break Some((q.clone(), d)),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(queue = name, "dequeue failed: {e}");
                    out.buf().extend_from_slice(READ_FAILED);
                    return Err(KeyStep::Stop);
                }
            }
            let Some(dl) = deadline else { break None };
            if Instant::now() >= dl || self.shared.stopping() {
                break None;
            }
            // Send what earlier requests produced before blocking.
            if self.flush_out(out).await.is_err() {
                return Err(KeyStep::Close);
            }
            let _waiting = q.waiting();
            let gone = async {
                match &watch {
                    Some(w) => w.closed().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = &mut notified => {}
                _ = shoal_net::time::sleep(dl.saturating_duration_since(Instant::now())) => {}
                _ = self.shutdown.changed() => {}
                // The client closed while waiting: nothing is taken for it.
                _ = gone => return Err(KeyStep::Close),
            }
        };
        Ok(got)
    }

    /// How many reads this connection holds open on `name`.
    fn open_count(&self, name: &str) -> usize {
        self.open.get(name).map_or(0, |r| r.seqs.len())
    }

    /// Records an open read.
    fn add_open(&mut self, name: &str, queue: Arc<Queue>, seq: u64) {
        match self.open.get_mut(name) {
            Some(r) if Arc::ptr_eq(&r.queue, &queue) => r.seqs.push_back(seq),
            // None yet, or on a queue since deleted (and its reads with it).
            _ => {
                self.open.insert(
                    name.to_string(),
                    OpenReads {
                        queue,
                        seqs: [seq].into(),
                    },
                );
            }
        }
    }

    /// Consumes (`/close`, `confirm`) up to `n` of this connection's oldest open reads on
    /// `name`; returns how many it held.
    fn close_open(&mut self, name: &str, n: usize) -> usize {
        let Some(r) = self.open.get_mut(name) else {
            return 0;
        };
        let mut closed = 0;
        while closed < n {
            let Some(seq) = r.seqs.pop_front() else { break };
            closed += 1;
            if r.queue.close(seq) {
                push_unique(&mut self.to_commit, &r.queue);
            }
        }
        if r.seqs.is_empty() {
            self.open.remove(name);
        }
        closed
    }

    /// Gives the oldest open read on `name` back to the head of its queue (`/abort`).
    fn abort_open(&mut self, name: &str) {
        let Some(r) = self.open.get_mut(name) else {
            return;
        };
        if let Some(seq) = r.seqs.pop_front() {
            r.queue.abort(seq);
        }
        if r.seqs.is_empty() {
            self.open.remove(name);
        }
    }

    /// Kestrel's `monitor <q> <secs> [max]`: for up to `secs` seconds, streams up to `max`
    /// messages (default and cap: what `--max-open-transactions` leaves this connection)
    /// as open reads, each `VALUE <q> 0 <n>` sent as it arrives, then `END`; `confirm`
    /// consumes them.
    async fn monitor<W: AsyncWrite + Unpin>(
        &mut self,
        name: &[u8],
        secs: u64,
        max: Option<usize>,
        out: &mut Output<'_, W, NoValue>,
    ) -> Flow {
        let name = match std::str::from_utf8(name) {
            Ok(n) if validate_name(name) => n.to_string(),
            _ => {
                out.buf().extend_from_slice(BAD_NAME);
                return Flow::Continue;
            }
        };
        if self.shared.status.get().blocks_reads() {
            out.buf().extend_from_slice(REFUSED_QUIESCENT);
            return Flow::Continue;
        }
        let limit = self.shared.settings.max_open_transactions;
        let max = max.unwrap_or(limit);
        let deadline = Instant::now() + Duration::from_secs(secs.min(MAX_MONITOR_SECS));
        let mut sent = 0;
        while sent < max && self.open_count(&name) < limit {
            bump(&self.shared.counters.cmd_get);
            match self.wait_take(&name, Take::Open, Some(deadline), out).await {
                Ok(Some((q, d))) => {
                    bump(&self.shared.counters.get_hits);
                    reply::value(out.buf(), name.as_bytes(), 0, &d.data, None);
                    self.add_open(&name, q, d.seq);
                    sent += 1;
                    if out.len() >= OUTPUT_HIGH_WATER && self.flush_out(out).await.is_err() {
                        return Flow::Close;
                    }
                }
                Ok(None) => {
                    bump(&self.shared.counters.get_misses);
                    break;
                }
                Err(KeyStep::Close) => return Flow::Close,
                // An error reply was written instead.
                Err(_) => return Flow::Continue,
            }
        }
        reply::end(out.buf());
        Flow::Continue
    }

    /// Commands memcached does not have, from MemcacheQ and Kestrel: `flush <q>`,
    /// `flush_expired <q>`, `flush_all_expired`, `dump_stats` and `reload`. False if
    /// `line` is none of them (the caller answers `ERROR`).
    async fn queue_command(&mut self, line: &[u8], out: &mut Vec<u8>) -> bool {
        let toks = words(line);
        if let (Some(refused), [b"flush" | b"flush_expired" | b"flush_all_expired", ..]) =
            (self.write_refusal(), toks.as_slice())
        {
            out.extend_from_slice(refused);
            return true;
        }
        match toks.as_slice() {
            [b"status"] => {
                out.extend_from_slice(self.shared.status.get().name().as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            [b"status", name] => match std::str::from_utf8(name)
                .map_err(|_| StatusError::Unknown(String::from_utf8_lossy(name).into_owned()))
                .and_then(|n| self.shared.status.set(n))
            {
                Ok(_) => reply::end(out),
                // Kestrel's answer to a status it does not know.
                Err(StatusError::Unknown(_)) => out.extend_from_slice(KESTREL_CLIENT_ERROR),
                Err(e) => {
                    tracing::error!("status: {e}");
                    out.extend_from_slice(format!("SERVER_ERROR {e}\r\n").as_bytes());
                }
            },
            [b"flush", name] => self.flush(name, false, out),
            [b"flush", name, b"noreply"] => self.flush(name, true, out),
            [b"flush_expired", name] => {
                let r = match self.named_queue(name) {
                    Ok(Some(q)) => self.flush_expired(&[q]).await,
                    Ok(None) => b"0\r\n".to_vec(),
                    Err(()) => BAD_NAME.to_vec(),
                };
                out.extend_from_slice(&r);
            }
            [b"flush_all_expired"] => {
                let r = self.flush_expired(&self.shared.engine.queues()).await;
                out.extend_from_slice(&r);
            }
            [b"dump_stats", names @ ..] => {
                crate::stats::kestrel_dump(out, &self.shared.engine, names)
            }
            [b"dump_config", names @ ..] => {
                crate::stats::kestrel_dump_config(out, &self.shared.engine, names)
            }
            [b"confirm", name, n] => {
                let n = std::str::from_utf8(n)
                    .ok()
                    .and_then(|n| n.parse::<usize>().ok());
                match (std::str::from_utf8(name), n) {
                    (Ok(name), Some(n)) if validate_name(name.as_bytes()) => {
                        // Kestrel: END when all `n` were open (and are now consumed),
                        // ERROR when fewer were (those are consumed too).
                        if self.close_open(name, n) == n {
                            reply::end(out);
                        } else {
                            out.extend_from_slice(reply::ERROR);
                        }
                    }
                    (_, None) => out.extend_from_slice(BAD_FORMAT),
                    _ => out.extend_from_slice(BAD_NAME),
                }
            }
            [b"reload"] => match self.shared.reload() {
                Ok(()) => out.extend_from_slice(KESTREL_RELOADED),
                Err(e) => {
                    tracing::warn!("reload: {e}");
                    out.extend_from_slice(format!("SERVER_ERROR {e}\r\n").as_bytes());
                }
            },
            _ => return false,
        }
        true
    }

    /// The reply refusing a write under the server's status now, if it refuses writes.
    fn write_refusal(&self) -> Option<&'static [u8]> {
        match self.shared.status.get() {
            ServerStatus::Quiescent => Some(REFUSED_QUIESCENT),
            ServerStatus::ReadOnly => Some(REFUSED_READONLY),
            ServerStatus::Up | ServerStatus::WriteAvoid => None,
        }
    }

    /// The existing queue called `name`: `Err` for an invalid name.
    fn named_queue(&self, name: &[u8]) -> Result<Option<Arc<Queue>>, ()> {
        match std::str::from_utf8(name) {
            Ok(n) if validate_name(name) => Ok(self.shared.engine.queue(n)),
            _ => Err(()),
        }
    }

    fn flush(&mut self, name: &[u8], noreply: bool, out: &mut Vec<u8>) {
        let r: &[u8] = match self.named_queue(name) {
            // Open reads, this connection's included, stay with their holders (Kestrel's
            // flush takes only what is waiting).
            Ok(Some(q)) => match q.flush() {
                Ok(_) => reply::END,
                Err(_) => FLUSH_FAILED,
            },
            Ok(None) => reply::END,
            Err(()) => BAD_NAME,
        };
        if !noreply {
            out.extend_from_slice(r);
        }
    }

    /// Drops the expired messages at the head of `queues` (moving them to their
    /// `expire_to` queue, if any), records it, and returns Kestrel's reply: how many.
    async fn flush_expired(&self, queues: &[Arc<Queue>]) -> Vec<u8> {
        let now = unix_now();
        let mut n = 0;
        for q in queues {
            n += q.expire(now);
            if let Err(e) = q.commit() {
                // The drop stays pending and is written with the next write.
                tracing::warn!(queue = q.name(), "writing expiry: {e}");
            }
        }
        if n > 0 {
            self.shared.engine.move_expired().await;
        }
        format!("{n}\r\n").into_bytes()
    }
}

/// The words of a command line (its line end dropped, split on runs of spaces), for the
/// queue commands memcached has no parser for.
fn words(line: &[u8]) -> Vec<&[u8]> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    line.split(|&b| b == b' ')
        .filter(|t| !t.is_empty())
        .collect()
}

/// `monitor <q> <secs> [max]`: the queue, the seconds and the most messages, if `line` is
/// one.
fn parse_monitor(line: &[u8]) -> Option<(&[u8], u64, Option<usize>)> {
    let toks = words(line);
    let num = |t: &[u8]| std::str::from_utf8(t).ok()?.parse::<u64>().ok();
    match toks.as_slice() {
        [b"monitor", name, secs] => Some((name, num(secs)?, None)),
        [b"monitor", name, secs, max] => Some((
            name,
            num(secs)?,
            Some(usize::try_from(num(max)?).unwrap_or(usize::MAX)),
        )),
        _ => None,
    }
}

/// The outcome of one key of a `get`.
/// What is wrong with a `get` key before anything is read for it: its error reply,
/// and whether the connection closes. A key with options that fail, or with no queue
/// name (`/open`), is a Kestrel client's, answered as Kestrel does (CLIENT_ERROR and a
/// disconnect); a bad queue name is answered and the connection goes on.
fn key_error(key: &[u8]) -> Option<(&'static [u8], bool)> {
    match parse_key(key) {
        Ok(o) if o.queue.is_empty() => Some((KESTREL_CLIENT_ERROR, true)),
        Err(_) => Some((KESTREL_CLIENT_ERROR, true)),
        Ok(o) if std::str::from_utf8(o.queue).is_err() || !validate_name(o.queue) => {
            Some((BAD_NAME, false))
        }
        Ok(_) => None,
    }
}

enum KeyStep {
    /// Go on with the next key.
    Next,
    /// An error reply was written; skip the remaining keys and the `END`.
    Stop,
    /// Close the connection.
    Close,
}
