//! One client connection: read, parse in place, execute, write all replies at once.
//!
//! The loop reads whatever the socket has into one reusable buffer, executes every
//! complete request in it (pipelined requests included), appends every reply to one
//! reusable write buffer, and writes that buffer with a single call. Nothing is allocated
//! per request: keys and values are parsed in place and copied once, into the reply.
//!
//! Memory per connection is bounded whatever the client does:
//! - replies: generation stops at [`OUTPUT_HIGH_WATER`] unsent bytes, even in the middle
//!   of one multi-get (see [`ReplyWindow`]), and resumes when the client has read them;
//! - requests: the read buffer stays at [`READ_CHUNK`] unless a request needs more, and
//!   growth past [`shoal_net::FREE_READ_BYTES`] is charged to the process-wide buffer budget
//!   (`-o read_buf_mem_limit`, by default `-m`). A value the budget cannot cover is
//!   refused as memcached refuses one it has no item memory for (`SERVER_ERROR out of
//!   memory storing object`) and its bytes are discarded as they arrive, so a stalled
//!   sender holds at most its own item's size, and all of them together the budget.

use crate::auth::Session;
use crate::commands::{self, Flow};
use crate::config::Protocol;
use crate::conns::{CloseReason, ConnInfo};
use crate::reply_window::ReplyWindow;
use crate::stats::ThreadStats;
use crate::watch::{WatchError, Watcher};
use crate::worker::Worker;
use shoal_net::{Need, ReadBuffer, ReadError, OUTPUT_HIGH_WATER, READ_CHUNK};
use shoal_protocol::binary::{self, Status, REQUEST_MAGIC};
use shoal_protocol::{parse, parse_binary, reply, BinaryParsed, Limits, Parsed};
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Serves one connection until the client quits, an error closes it, or shutdown.
pub async fn serve<S>(mut stream: S, worker: &Worker, info: &ConnInfo)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let shared = &worker.shared;
    let limits = Limits {
        max_value_len: shared.settings.max_item_size,
    };
    // Re-parsing a storage request with this limit turns it into the "too large" shape
    // (key, bytes to drop, bytes to swallow): how a value the budget refused is skipped.
    let refused = Limits { max_value_len: 0 };
    let idle = match shared.settings.idle_timeout {
        0 => None,
        s => Some(Duration::from_secs(s)),
    };
    let per_turn = shared.settings.reqs_per_event;
    let mut rbuf = ReadBuffer::new(&shared.buffers);
    let mut wbuf: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    let mut window = ReplyWindow::new(shared.buffers.empty());
    // The next request's value was refused by the budget: answer and skip it.
    let mut refuse_next = false;
    let mut session = Session::new(shared.sasl.is_some() || shared.ascii_auth.is_some());
    loop {
        let mut close = false;
        let mut served = 0usize;
        let mut more_ready = false;
        let mut suspended = false;
        let mut watch = None;
        worker.current_conn.set(info.id);
        // With metrics on, the turn is timed: its requests are recorded at its end.
        let turn = worker
            .latency
            .as_ref()
            .filter(|_| !rbuf.input().is_empty())
            .map(|l| (l, shoal_net::metrics::clock::now()));
        loop {
            let input = rbuf.input();
            if input.is_empty() {
                break;
            }
            if served >= per_turn {
                // memcached's conn_yields counts only this reason for giving up the turn
                // (`-R` requests served with more input waiting), not a full output buffer
                // or a suspended multi-get.
                ThreadStats::incr(&worker.stats.conn_yields);
                more_ready = true;
                break;
            }
            let oom = std::mem::take(&mut refuse_next);
            let limits = if oom { &refused } else { &limits };
            let binary = match shared.settings.protocol {
                Protocol::Auto => input[0] == REQUEST_MAGIC,
                Protocol::Binary => true,
                Protocol::Ascii => false,
            };
            let step = if binary && input[0] != REQUEST_MAGIC {
                // `-B binary`: memcached closes a connection that sends anything else.
                tracing::debug!(conn = info.id, "not a binary request; closing");
                Step::Done {
                    consumed: input.len(),
                    swallow: 0,
                    close: true,
                }
            } else if binary {
                binary_step(worker, &mut session, input, limits, oom, &mut wbuf)
            } else if shared.sasl.is_some() {
                // With SASL on, only the binary protocol can authenticate (memcached).
                wbuf.extend_from_slice(SASL_ONLY);
                Step::Done {
                    consumed: input.len(),
                    swallow: 0,
                    close: true,
                }
            } else {
                let mut ctx = TextContext {
                    worker,
                    session: &mut session,
                    info,
                    window: &mut window,
                };
                ctx.step(input, limits, oom, &mut wbuf)
            };
            match step {
                Step::Done {
                    consumed,
                    swallow,
                    close: c,
                } => {
                    rbuf.consume(consumed, swallow);
                    served += 1;
                    if c {
                        close = true;
                        break;
                    }
                }
                Step::Watch { consumed, kinds } => {
                    rbuf.consume(consumed, 0);
                    watch = Some(kinds);
                    break;
                }
                Step::Suspended => {
                    // Write what the multi-get generated; it continues where it stopped.
                    more_ready = true;
                    suspended = true;
                    break;
                }
                Step::Incomplete { needed } => {
                    if rbuf.need(needed) == Need::Refused {
                        tracing::debug!(conn = info.id, "buffer budget refused {needed} bytes");
                        refuse_next = true;
                        more_ready = true;
                    }
                    break;
                }
            }
            if wbuf.len() >= OUTPUT_HIGH_WATER {
                more_ready = true;
                break;
            }
        }
        if let Some((latency, start)) = turn {
            latency.end_turn(start);
        }
        if let Some(delay) = session.penalty.take() {
            // A failed login: its reply (and anything after it) waits, so a client that
            // opens a new connection per guess is slowed down too.
            tokio::time::sleep(delay).await;
        }
        // A turn that ended on the per-turn request limit keeps its replies: the other
        // connections get their turn now, and this one writes once when its input is
        // used up. Writing every `-R` requests would cost a syscall per 20 quiet meta or
        // binary gets of a 100-key batch.
        let mut watcher = None;
        if let Some(kinds) = watch {
            match shared.watchers.add(kinds) {
                Ok(handle) => {
                    wbuf.extend_from_slice(reply::OK);
                    watcher = Some(handle);
                }
                Err(WatchError::TooMany) => wbuf.extend_from_slice(WATCHER_TOO_MANY),
                Err(WatchError::UnknownType) => wbuf.extend_from_slice(reply::ERROR),
            }
        }
        let hold = more_ready && !suspended && !close && wbuf.len() < OUTPUT_HIGH_WATER;
        if !wbuf.is_empty() && !hold {
            if stream.write_all(&wbuf).await.is_err() {
                info.closing(CloseReason::Error);
                return;
            }
            ThreadStats::add(&worker.stats.bytes_written, wbuf.len() as u64);
            wbuf.clear();
            window.written(&mut wbuf);
        }
        if let Some(handle) = watcher {
            // From here on the connection only streams events; what it sends is ignored.
            stream_events(&mut stream, &handle.watcher).await;
            return;
        }
        if close {
            let _ = stream.shutdown().await;
            return;
        }
        if more_ready {
            // Let other connections on this thread have a turn (memcached's -R).
            tokio::task::yield_now().await;
            continue;
        }
        if shared.stopping() {
            info.closing(CloseReason::Shutdown);
            return;
        }
        // No shutdown signal is watched here: that would put every read of every thread
        // through one shared waiter list. Shutdown ends reads with shutdown(SHUT_RD).
        let read = match idle {
            Some(t) => match tokio::time::timeout(t, rbuf.read_from(&mut stream)).await {
                Ok(read) => read,
                Err(_) => {
                    info.closing(CloseReason::IdleTimeout);
                    return;
                }
            },
            None => rbuf.read_from(&mut stream).await,
        };
        match read {
            Ok(0) => {
                if shared.stopping() {
                    info.closing(CloseReason::Shutdown);
                }
                return;
            }
            Err(ReadError::Io(_)) => {
                info.closing(CloseReason::Error);
                return;
            }
            Err(ReadError::OutOfMemory) => {
                info.closing(CloseReason::Error);
                // A request line longer than the budget can hold (only multi-gets may
                // be long): memcached closes such a connection with this reply.
                let _ = stream.write_all(reply::OUT_OF_MEMORY_READING).await;
                let _ = stream.shutdown().await;
                return;
            }
            Ok(n) => {
                ThreadStats::add(&worker.stats.bytes_read, n as u64);
                info.last_cmd
                    .store(shared.store.clock().now(), Ordering::Relaxed);
            }
        }
    }
}

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

/// What one parse-and-execute step did.
enum Step {
    /// A request (or error) used `consumed` bytes; discard `swallow` more; maybe close.
    Done {
        consumed: usize,
        swallow: usize,
        close: bool,
    },
    /// The request is not complete; the buffer needs `needed` bytes in all (0: unknown).
    Incomplete { needed: usize },
    /// The request is partly served; run it again once the replies are written.
    Suspended,
    /// A `watch` of these event kinds: the connection becomes a watcher.
    Watch { consumed: usize, kinds: u32 },
}

/// The reply to a text request on a SASL-only server.
const SASL_ONLY: &[u8] = b"CLIENT_ERROR authentication required (binary SASL only)\r\n";

/// What a text request runs with.
struct TextContext<'a> {
    worker: &'a Worker,
    session: &'a mut Session,
    info: &'a ConnInfo,
    window: &'a mut ReplyWindow,
}

impl TextContext<'_> {
    /// Parses and executes the request at the head of `input`. `oom`: the limits were
    /// lowered because the buffer budget refused the value, so "too large" means "no
    /// memory".
    fn step(&mut self, input: &[u8], limits: &Limits, oom: bool, wbuf: &mut Vec<u8>) -> Step {
        let worker = self.worker;
        match parse(input, limits) {
            Parsed::Request { request, consumed } => {
                // Counted only when metrics are served (timed per turn, in `serve`), and
                // once: not again when a suspended multi-get resumes.
                if let Some(latency) = &worker.latency {
                    if self.window.resume_at == 0 {
                        latency.count(crate::latency::text_command(&request));
                    }
                }
                match commands::execute(worker, self.session, request, self.window, wbuf) {
                    Flow::Suspend => Step::Suspended,
                    Flow::Watch(kinds) => Step::Watch { consumed, kinds },
                    flow => Step::Done {
                        consumed,
                        swallow: 0,
                        close: flow == Flow::Close,
                    },
                }
            }
            Parsed::Incomplete { needed } => Step::Incomplete { needed },
            Parsed::Error {
                error,
                consumed,
                swallow,
                close,
                silent,
            } => {
                if !silent {
                    wbuf.extend_from_slice(error.reply());
                }
                tracing::debug!(conn = self.info.id, "protocol error: {error}");
                Step::Done {
                    consumed,
                    swallow,
                    close,
                }
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
                    wbuf.extend_from_slice(if oom {
                        reply::OUT_OF_MEMORY_STORING
                    } else {
                        reply::OBJECT_TOO_LARGE
                    });
                }
                Step::Done {
                    consumed,
                    swallow,
                    close: false,
                }
            }
        }
    }
}

fn binary_step(
    worker: &Worker,
    session: &mut Session,
    input: &[u8],
    limits: &Limits,
    oom: bool,
    wbuf: &mut Vec<u8>,
) -> Step {
    match parse_binary(input, limits) {
        BinaryParsed::Request { request, consumed } => {
            if let Some(latency) = &worker.latency {
                latency.count(crate::latency::binary_command(request.opcode, request.cas));
            }
            let close = commands::binary::execute(worker, session, request, wbuf) == Flow::Close;
            Step::Done {
                consumed,
                swallow: 0,
                close,
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
            binary::error(wbuf, opcode, status, opaque);
            Step::Done {
                consumed,
                swallow,
                close: false,
            }
        }
        BinaryParsed::Invalid { opcode, opaque } => {
            binary::error(wbuf, opcode, Status::InvalidArguments, opaque);
            Step::Done {
                consumed: input.len(),
                swallow: 0,
                close: true,
            }
        }
    }
}
