//! A connection's input: one reusable buffer that grows only within the budget.
//!
//! Every daemon's connection loop is the same on its read side: read what the socket has,
//! parse complete requests in place, skip the data of requests that were refused, and
//! make room for a request that announced its size. [`ReadBuffer`] is that side, with the
//! memory rules built in, so each daemon gets the same guarantees:
//! - the buffer holds [`READ_CHUNK`] bytes when idle, and may hold [`FREE_READ_BYTES`]
//!   without charging anyone;
//! - growth beyond that (a large value) is charged to the process-wide [`Budget`]; when
//!   the budget cannot cover it, [`ReadBuffer::need`] says so and the daemon refuses the
//!   request and has its bytes discarded as they arrive ([`ReadBuffer::consume`] with a
//!   swallow count), so a stalled sender holds at most one item and all of them together
//!   at most the budget;
//! - once a large request is consumed the memory is given back.

use crate::budget::{Budget, Reservation, READ_CHUNK};
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};

/// Read-buffer bytes a connection may hold without charging the budget.
pub const FREE_READ_BYTES: usize = 2 * READ_CHUNK;

/// Whether the budget let a request's bytes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// The buffer can hold the whole request: read on.
    Granted,
    /// The budget cannot cover it: refuse the request and swallow its bytes.
    Refused,
}

/// A connection's read buffer; see the module documentation.
#[derive(Debug)]
pub struct ReadBuffer {
    buf: Vec<u8>,
    /// Bytes of `buf` already consumed (dropped lazily, in [`ReadBuffer::compact`]).
    start: usize,
    /// Bytes still to discard, of a refused request's data that has not arrived yet.
    swallow: usize,
    /// Bytes the request at the head needs in all (0: unknown or none).
    want: usize,
    reservation: Reservation,
}

/// Why a read could not be done.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The buffer must grow for a request (a long line) and the budget cannot cover it.
    #[error("out of memory reading request")]
    OutOfMemory,
    /// The socket failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl ReadBuffer {
    /// An empty buffer charging its growth to `budget`.
    pub fn new(budget: &Budget) -> ReadBuffer {
        ReadBuffer {
            buf: Vec::with_capacity(READ_CHUNK),
            start: 0,
            swallow: 0,
            want: 0,
            reservation: budget.empty(),
        }
    }

    /// The bytes received and not yet consumed or swallowed.
    pub fn input(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// Whether bytes of a refused request are still to be discarded.
    pub fn swallowing(&self) -> bool {
        self.swallow > 0
    }

    /// Drops `n` bytes of input (a request handled), then discards `swallow` more as
    /// they are received (the data of a refused request).
    pub fn consume(&mut self, n: usize, swallow: usize) {
        self.start = (self.start + n).min(self.buf.len());
        self.want = 0;
        self.swallow = self.swallow.saturating_add(swallow);
        self.settle();
    }

    fn settle(&mut self) {
        let n = self.swallow.min(self.buf.len() - self.start);
        self.start += n;
        self.swallow -= n;
    }

    /// The request at the head of the input needs `total` bytes in all: makes room for
    /// it at once (rather than growing by doubling through a large value) if the budget
    /// allows.
    pub fn need(&mut self, total: usize) -> Need {
        self.want = total;
        let have = self.buf.capacity() - self.start;
        if total <= have {
            return Need::Granted;
        }
        self.compact();
        if self.grow(total) {
            Need::Granted
        } else {
            self.want = 0;
            Need::Refused
        }
    }

    /// Grows the buffer to hold `total` unconsumed bytes, charging what exceeds
    /// [`FREE_READ_BYTES`] to the budget; false (and no growth) when it cannot.
    fn grow(&mut self, total: usize) -> bool {
        debug_assert_eq!(self.start, 0, "compact before growing");
        if total <= self.buf.capacity() {
            return true;
        }
        if total > FREE_READ_BYTES && !self.reservation.grow_to(total - FREE_READ_BYTES) {
            return false;
        }
        self.buf.reserve_exact(total - self.buf.len());
        true
    }

    /// Drops consumed bytes, and gives back the memory of a large request once it is
    /// consumed. Call between turns, not per request: it moves the unconsumed bytes.
    pub fn compact(&mut self) {
        if self.start > 0 {
            if self.start >= self.buf.len() {
                // Everything was consumed (the usual case between turns): nothing to move.
                self.buf.clear();
            } else {
                self.buf.drain(..self.start);
            }
            self.start = 0;
        }
        if self.want <= FREE_READ_BYTES
            && self.buf.len() <= READ_CHUNK
            && self.buf.capacity() > FREE_READ_BYTES
        {
            self.buf.shrink_to(READ_CHUNK);
            self.reservation.release();
        }
    }

    /// Reads what `reader` has (at least one byte, or 0 at end of stream), discarding
    /// bytes still to be swallowed. Fails with [`ReadError::OutOfMemory`] when a request
    /// line outgrows what the budget allows. A poll, so that a connection loop can wait
    /// on more than the socket; each poll first makes room (once there is room this
    /// changes nothing), then reads into the spare capacity.
    ///
    /// Why not tokio's `read_buf`: its `BufMut` adapter and the async state around it
    /// were, under callgrind, more instructions per depth-1 request than the receive
    /// system call's own wrapper; this is the same read with none of that.
    // Inlined into the connection loop: see `connection::ReadOrStop`.
    #[inline(always)]
    pub fn poll_read_from<R: AsyncRead + Unpin>(
        &mut self,
        cx: &mut Context<'_>,
        reader: &mut R,
    ) -> Poll<Result<usize, ReadError>> {
        self.compact();
        let (len, spare) = (self.buf.len(), self.buf.capacity() - self.buf.len());
        if spare < READ_CHUNK / 2 && len >= self.want && !self.grow(len + READ_CHUNK) {
            return Poll::Ready(Err(ReadError::OutOfMemory));
        }
        if self.buf.capacity() == self.buf.len() {
            // A zero-length read would look like the end of the stream.
            self.buf.reserve(64);
        }
        let mut dst = ReadBuf::uninit(self.buf.spare_capacity_mut());
        let at = dst.filled().as_ptr();
        if let Err(e) = ready!(Pin::new(reader).poll_read(cx, &mut dst)) {
            return Poll::Ready(Err(e.into()));
        }
        // As tokio's `read_buf` checks: a reader that swapped in a buffer of its own
        // would have filled that one, not ours.
        assert_eq!(
            at,
            dst.filled().as_ptr(),
            "the reader replaced the read buffer"
        );
        let n = dst.filled().len();
        let new_len = self.buf.len() + n;
        // SAFETY: `ReadBuf` counts as filled only bytes the reader initialized; the
        // check above shows they are in our spare capacity, its first `n` bytes, right
        // after the current length.
        unsafe { self.buf.set_len(new_len) };
        self.settle();
        Poll::Ready(Ok(n))
    }

    /// Bytes the buffer holds (capacity), for tests and stats.
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read_from<R: AsyncRead + Unpin>(
        rb: &mut ReadBuffer,
        reader: &mut R,
    ) -> Result<usize, ReadError> {
        std::future::poll_fn(|cx| rb.poll_read_from(cx, reader)).await
    }

    async fn feed(rb: &mut ReadBuffer, data: &[u8]) -> usize {
        let mut r = data;
        read_from(rb, &mut r).await.expect("read")
    }

    fn run<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(f)
    }

    #[test]
    fn consumed_and_swallowed_bytes_are_dropped() {
        run(async {
            let budget = Budget::new(0);
            let mut rb = ReadBuffer::new(&budget);
            feed(&mut rb, b"abcdef").await;
            rb.consume(2, 3);
            assert_eq!(rb.input(), b"f");
            rb.consume(1, 4);
            assert!(rb.swallowing());
            feed(&mut rb, b"xxxxyz").await;
            assert_eq!(rb.input(), b"yz");
            assert!(!rb.swallowing());
        });
    }

    #[test]
    fn large_requests_are_charged_and_given_back() {
        run(async {
            let budget = Budget::new(1 << 20);
            let mut rb = ReadBuffer::new(&budget);
            feed(&mut rb, b"set k 0 0 500000\r\n").await;
            assert_eq!(rb.need(500_020), Need::Granted);
            assert!(budget.used() >= 500_020 - FREE_READ_BYTES);
            assert!(rb.capacity() >= 500_020);
            assert_eq!(rb.need(5 << 20), Need::Refused, "past the budget");
            rb.consume(rb.input().len(), 0);
            rb.compact();
            assert_eq!(budget.used(), 0);
            assert!(rb.capacity() <= FREE_READ_BYTES);
        });
    }

    #[test]
    fn a_line_past_the_budget_fails_the_read() {
        run(async {
            let budget = Budget::new(0);
            let mut rb = ReadBuffer::new(&budget);
            let line = vec![b'g'; FREE_READ_BYTES + READ_CHUNK];
            let mut src = &line[..];
            let mut result = Ok(0);
            for _ in 0..10 {
                result = read_from(&mut rb, &mut src).await;
                if result.is_err() {
                    break;
                }
            }
            assert!(matches!(result, Err(ReadError::OutOfMemory)));
            assert!(rb.capacity() <= FREE_READ_BYTES);
        });
    }
}
