//! The connection loop every daemon runs: read, hand complete requests to the protocol,
//! write the replies of a turn at once.
//!
//! shoald, shoal-queued and shoal-proxy speak different dialects over the same memcached
//! framing, and the guarantees a hostile client must not get around belong to the framing,
//! not the dialect. So the loop lives here, once, and a daemon supplies only a
//! [`Handler`]: how to parse and act on one request, and its hooks around the write.
//! [`serve`] owns the rest, and with it the bounds:
//! - input: requests are read into a [`ReadBuffer`], which grows past a few kilobytes only
//!   within the process-wide [`Budget`]. When the budget cannot hold a request that
//!   announced its size, the handler is asked again with `refused` set, answers it (as
//!   memcached answers a value it has no memory for) and has its bytes discarded as they
//!   arrive, so senders that stall half-way through large values hold at most the budget
//!   together. A request line the budget cannot hold gets the handler's
//!   [`Handler::line_too_long`] reply and the connection is closed.
//! - output: replies go to one [`Reply`], written with one (vectored) write per turn
//!   however many requests were pipelined; large values in it may be referred to in place
//!   ([`Handler::Value`]) rather than copied. Once [`OUTPUT_HIGH_WATER`] bytes are pending
//!   no more requests are handled until the client has taken them, so a client that never
//!   reads costs that much plus one reply (and holds no references while it stalls).
//! - fairness: after [`Config::requests_per_turn`] requests the connection yields to the
//!   others on its thread (memcached's `-R`).
//! - idleness: with [`Config::idle_timeout`], a connection that sends nothing for that
//!   long is closed.
//!
//! Nothing here allocates per request, and the [`Handler`] is generic rather than boxed,
//! so each daemon's handler is compiled into its loop.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::budget::{Budget, OUTPUT_HIGH_WATER, READ_CHUNK};
use crate::read_buffer::{Need, ReadBuffer, ReadError};
use crate::reply::Reply;

/// How one connection is driven; the same for all of a daemon's connections.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Close a connection that sends nothing for this long (`None`: never).
    pub idle_timeout: Option<Duration>,
    /// Requests handled in one turn before the connection yields to the others on its
    /// thread (memcached's `-R`; `usize::MAX`: no limit; 0 counts as 1).
    pub requests_per_turn: usize,
    /// Values of at least this many bytes are sent from where they lie rather than copied
    /// into the reply, on streams that take vectored writes ([`Reply::refers`];
    /// `usize::MAX`: always copy).
    pub min_referenced_value: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            idle_timeout: None,
            requests_per_turn: usize::MAX,
            min_referenced_value: crate::reply::MIN_REFERENCED_VALUE,
        }
    }
}

/// What the handler did with the request at the head of the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Handled (or answered with an error): drop `consumed` bytes of input, then discard
    /// `swallow` more as they arrive (the data of a refused request).
    Done {
        /// Bytes of input the request used.
        consumed: usize,
        /// Bytes still to discard after them.
        swallow: usize,
    },
    /// The request is not all here. `needed`: the bytes it takes in all, when its line
    /// says (a storage command's value), so the buffer can make room at once, or have the
    /// budget refuse it; 0 when unknown.
    Incomplete {
        /// Bytes the request needs in all (0: unknown).
        needed: usize,
    },
    /// The request is partly served, or cannot be taken now: the pending output is written
    /// and the handler is called again with the same input, without reading first.
    Suspend,
    /// Close the connection once the output so far is written.
    Close,
    /// The connection stops being a request/reply connection (a log watcher): drop
    /// `consumed` bytes, write the output so far, and hand the stream back to the caller
    /// ([`End::Detached`]).
    Detach {
        /// Bytes of input the request used.
        consumed: usize,
    },
}

/// Whether the turn's output may be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proceed {
    /// Write it.
    Write,
    /// It must not be sent (what it acknowledges could not be made durable): close the
    /// connection without it ([`End::Abandoned`]).
    Abandon,
}

/// Why [`serve`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The handler closed the connection ([`Step::Close`]) and its replies were written.
    Closed,
    /// The client closed its side.
    Eof,
    /// A read or a write failed.
    Error,
    /// Nothing arrived within [`Config::idle_timeout`].
    IdleTimeout,
    /// A request line outgrew what the budget allows; the handler's
    /// [`Handler::line_too_long`] reply was sent.
    LineTooLong,
    /// [`Handler::stopping`] said so, or [`Handler::stop_signal`] fired while reading.
    Stopped,
    /// [`Handler::before_write`] refused to send the output.
    Abandoned,
    /// [`Step::Detach`]: the stream is the caller's again, still open.
    Detached,
}

/// The output buffer of a connection, with the means to send it early.
///
/// A handler appends its replies to [`Output::buf`] (or, with values referred to in
/// place, to [`Output::reply`]); the loop writes them at the end of the turn. A request
/// that must wait for something (a blocking read) can send what earlier requests produced
/// first, with [`Output::flush`].
pub struct Output<'a, W: ?Sized, V> {
    buf: &'a mut Reply<V>,
    writer: &'a mut W,
    failed: bool,
}

impl<W: AsyncWrite + Unpin + ?Sized, V: AsRef<[u8]>> Output<'_, W, V> {
    /// The pending replies' bytes, to append to.
    pub fn buf(&mut self) -> &mut Vec<u8> {
        self.buf.bytes()
    }

    /// The pending replies, to append bytes or values to.
    pub fn reply(&mut self) -> &mut Reply<V> {
        self.buf
    }

    /// Bytes pending.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Writes everything pending and empties the buffer; returns the bytes written. Once a
    /// write has failed every later one fails too, and the loop closes the connection
    /// after the handler returns.
    pub async fn flush(&mut self) -> io::Result<usize> {
        if self.failed {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        if self.buf.is_empty() {
            return Ok(0);
        }
        let n = match self.buf.write_to(&mut *self.writer).await {
            Ok(n) => n,
            Err(e) => {
                self.failed = true;
                return Err(e);
            }
        };
        // The flush pushes out what a TLS stream still holds once the socket would block
        // (a no-op for plain and io_uring sockets); without it the tail of a reply could
        // wait for the next one.
        if let Err(e) = self.writer.flush().await {
            self.failed = true;
            return Err(e);
        }
        // One very large reply should not keep its buffer for the next ones; replies
        // bounded by the high-water mark never get here, so this is not paid per turn.
        if self.buf.capacity() > 2 * OUTPUT_HIGH_WATER {
            self.buf.shrink_to(OUTPUT_HIGH_WATER);
        }
        Ok(n)
    }
}

/// A protocol served by [`serve`]: what differs between the daemons' connections.
///
/// Every method but [`Handler::request`] and [`Handler::line_too_long`] has a default
/// that does nothing. Each turn runs: [`Handler::begin_turn`]; [`Handler::request_now`]
/// (or, when it says `None`, [`Handler::request`]) for each complete request, until the
/// input is used up, the output reaches the high-water mark, the per-turn limit, or a
/// step says otherwise; [`Handler::end_turn`], [`Handler::before_write`], the write,
/// [`Handler::after_write`]; then the next read.
pub trait Handler {
    /// What replies may refer to in place instead of copying (a pinned cache value);
    /// [`crate::NoValue`] for a protocol that only writes bytes.
    type Value: AsRef<[u8]>;

    /// Parses and acts on the request at the head of `input` (never empty, never holding
    /// bytes still to be discarded), appending its replies to `out`.
    ///
    /// `refused`: the request said it needs more bytes than the budget can give
    /// ([`Step::Incomplete`] with its size, then refused). It must be answered as refused
    /// (memcached's `SERVER_ERROR out of memory storing object`) with [`Step::Done`]
    /// saying how many of its bytes are here and how many to discard.
    fn request<W: AsyncWrite + Unpin>(
        &mut self,
        input: &[u8],
        refused: bool,
        out: &mut Output<'_, W, Self::Value>,
    ) -> impl Future<Output = Step>;

    /// [`Handler::request`] for a request that needs no waiting, answered at once;
    /// `None` (the default) sends it through [`Handler::request`] instead.
    ///
    /// Why both: awaiting an `async fn` builds its future and stores its arguments in the
    /// connection's state for every request, even one that never waits; at depth 1, in
    /// callgrind's cache model, those stores were a tenth of shoald's first-level write
    /// misses. A daemon whose requests rarely wait answers the rest here.
    fn request_now<W: AsyncWrite + Unpin>(
        &mut self,
        input: &[u8],
        refused: bool,
        out: &mut Output<'_, W, Self::Value>,
    ) -> Option<Step> {
        let _ = (input, refused, out);
        None
    }

    /// The reply sent before closing a connection whose request line outgrew the budget
    /// (memcached's `SERVER_ERROR out of memory reading request`).
    fn line_too_long(&self) -> &'static [u8];

    /// A turn begins; `has_input`: there is input to handle (not just a resumption).
    fn begin_turn(&mut self, has_input: bool) {
        let _ = has_input;
    }

    /// The turn's requests are handled (its output is not written yet).
    fn end_turn(&mut self) {}

    /// The turn ended on [`Config::requests_per_turn`] with input left.
    fn yielded(&mut self) {}

    /// Called before the turn's output is written (whether or not there is any): the place
    /// to collect replies still outstanding or to wait until what they acknowledge is
    /// durable. May flush `out` itself, as often as the high-water mark requires.
    fn before_write<W: AsyncWrite + Unpin>(
        &mut self,
        out: &mut Output<'_, W, Self::Value>,
    ) -> impl Future<Output = Proceed> {
        let _ = out;
        std::future::ready(Proceed::Write)
    }

    /// `written` bytes were written at the end of a turn and `out` emptied.
    fn after_write(&mut self, written: usize, out: &mut Vec<u8>) {
        let _ = (written, out);
    }

    /// `n` bytes were read.
    fn received(&mut self, n: usize) {
        let _ = n;
    }

    /// Checked before each read: true ends the connection ([`End::Stopped`]).
    fn stopping(&self) -> bool {
        false
    }

    /// Completes when a read in progress should be given up ([`End::Stopped`]). The
    /// default never completes (a daemon may end reads with `shutdown(SHUT_RD)` instead,
    /// which costs no shared waiter list).
    fn stop_signal(&mut self) -> impl Future<Output = ()> {
        std::future::pending()
    }
}

/// A turn's read: the socket first, then the stop signal (`None`: stopped).
///
/// A `select!` without its macro, whose bookkeeping (branch masks, an output enum, a
/// nested future) cost more per depth-1 request than the read itself. A future of its
/// own rather than `poll_fn`, so that its poll can be inlined into the connection loop's:
/// every function return between the loop and the `recv` just made is mispredicted (see
/// `event_loop::syscall`).
struct ReadOrStop<'a, S, F> {
    rbuf: &'a mut ReadBuffer,
    stream: &'a mut S,
    stop: Pin<&'a mut F>,
}

impl<S: AsyncRead + Unpin, F: Future<Output = ()>> Future for ReadOrStop<'_, S, F> {
    type Output = Option<Result<usize, ReadError>>;

    #[inline(always)]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if let Poll::Ready(r) = this.rbuf.poll_read_from(cx, &mut *this.stream) {
            return Poll::Ready(Some(r));
        }
        this.stop.as_mut().poll(cx).map(|()| None)
    }
}

/// Serves one connection with `handler` until it ends, and says why (also logged, at
/// debug level). Input beyond a few kilobytes is charged to `budget`. The stream is shut
/// down (an orderly close) unless it failed or was [`End::Detached`].
pub async fn serve<S, H>(stream: &mut S, handler: &mut H, budget: &Budget, config: &Config) -> End
where
    S: AsyncRead + AsyncWrite + Unpin,
    H: Handler,
{
    let end = run(stream, handler, budget, config).await;
    // memcached's `-vv` says the same ("connection closed").
    tracing::debug!(?end, "connection closed");
    end
}

async fn run<S, H>(stream: &mut S, handler: &mut H, budget: &Budget, config: &Config) -> End
where
    S: AsyncRead + AsyncWrite + Unpin,
    H: Handler,
{
    // At least one request per turn, or a connection would never make progress.
    let per_turn = config.requests_per_turn.max(1);
    let mut rbuf = ReadBuffer::new(budget);
    let min_referenced = if stream.is_write_vectored() {
        config.min_referenced_value
    } else {
        usize::MAX
    };
    let mut buf: Reply<H::Value> = Reply::new(READ_CHUNK, min_referenced);
    // The request at the head of the input was refused by the budget: ask again, as such.
    let mut refused = false;
    loop {
        // Set when the turn ends the connection (once its output is written).
        let mut end = None;
        // More to do without reading: write, yield, and go on.
        let mut again = false;
        // The turn ended on the per-turn limit.
        let mut yielded = false;
        let mut served = 0usize;
        handler.begin_turn(!rbuf.input().is_empty());
        let mut out = Output {
            buf: &mut buf,
            writer: &mut *stream,
            failed: false,
        };
        loop {
            let input = rbuf.input();
            if input.is_empty() {
                break;
            }
            if served >= per_turn {
                handler.yielded();
                again = true;
                yielded = true;
                break;
            }
            let was_refused = std::mem::take(&mut refused);
            let step = match handler.request_now(input, was_refused, &mut out) {
                Some(step) => step,
                None => handler.request(input, was_refused, &mut out).await,
            };
            if out.failed {
                return End::Error;
            }
            match step {
                Step::Done { consumed, swallow } => {
                    rbuf.consume(consumed, swallow);
                    served += 1;
                }
                Step::Incomplete { needed } => {
                    if !was_refused && rbuf.need(needed) == Need::Refused {
                        tracing::debug!("buffer budget refused {needed} bytes");
                        refused = true;
                        continue;
                    }
                    break;
                }
                Step::Suspend => {
                    again = true;
                    break;
                }
                Step::Close => {
                    end = Some(End::Closed);
                    break;
                }
                Step::Detach { consumed } => {
                    rbuf.consume(consumed, 0);
                    end = Some(End::Detached);
                    break;
                }
            }
            if out.len() >= OUTPUT_HIGH_WATER {
                again = true;
                break;
            }
        }
        handler.end_turn();
        // A turn that ended on the per-turn request limit keeps its replies: the other
        // connections get their turn now, and this one writes once when its input is
        // used up. Writing every `-R` requests would cost a syscall per 20 quiet meta or
        // binary gets of a 100-key batch. Not a reply that refers to values in place:
        // the connections that run meanwhile may need the memory those values pin
        // (writing it is cheaper than copying them).
        let hold = yielded && out.len() < OUTPUT_HIGH_WATER && out.buf.referenced() == 0;
        if !hold {
            if !again {
                // Give a large request's memory back before a write that may wait on a
                // slow reader (the read would do it only after).
                rbuf.compact();
            }
            if handler.before_write(&mut out).await == Proceed::Abandon {
                let _ = stream.shutdown().await;
                return End::Abandoned;
            }
            match out.flush().await {
                Ok(0) => {}
                Ok(n) => handler.after_write(n, buf.bytes()),
                Err(_) => return End::Error,
            }
        }
        if let Some(end) = end {
            if end != End::Detached {
                let _ = stream.shutdown().await;
            }
            return end;
        }
        if again {
            // Let the other connections on this thread have a turn.
            tokio::task::yield_now().await;
            continue;
        }
        if handler.stopping() {
            let _ = stream.shutdown().await;
            return End::Stopped;
        }
        let read = {
            let stop = handler.stop_signal();
            let read = ReadOrStop {
                rbuf: &mut rbuf,
                stream: &mut *stream,
                stop: std::pin::pin!(stop),
            };
            match config.idle_timeout {
                Some(t) => match crate::time::timeout(t, read).await {
                    Ok(read) => read,
                    Err(_) => {
                        let _ = stream.shutdown().await;
                        return End::IdleTimeout;
                    }
                },
                None => read.await,
            }
        };
        match read {
            None => {
                let _ = stream.shutdown().await;
                return End::Stopped;
            }
            Some(Ok(0)) => {
                let _ = stream.shutdown().await;
                return End::Eof;
            }
            Some(Ok(n)) => handler.received(n),
            Some(Err(ReadError::Io(_))) => return End::Error,
            Some(Err(ReadError::OutOfMemory)) => {
                // Only a line can get here (a value that announced its size was refused
                // before its bytes were read): nothing to skip to, so close.
                let _ = stream.write_all(handler.line_too_long()).await;
                let _ = stream.shutdown().await;
                return End::LineTooLong;
            }
        }
    }
}
