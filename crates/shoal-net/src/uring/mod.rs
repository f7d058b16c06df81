//! An io_uring data path: sockets whose reads and writes are submitted to one io_uring per
//! worker thread, in batches, instead of one system call each.
//!
//! Without pipelining a cache server's cost is its system calls: one receive and one send
//! per request, plus the event-loop wake-ups, for a few hundred nanoseconds of work. Here a
//! worker thread's connections queue their receives and sends as submission entries, and
//! the thread's driver submits everything one turn of the event loop produced with a single
//! `io_uring_enter`; completions come back through shared memory, without a system call
//! each. A turn that serves 16 connections then costs a couple of system calls, not 32.
//!
//! The data path keeps the epoll path's shape: a [`UringStream`] is an
//! `AsyncRead + AsyncWrite` like a tokio socket, so the connection loop, TLS and every
//! protocol run on it unchanged, and the worker keeps its tokio runtime for timers and
//! channels (the ring's file descriptor is one more source in tokio's epoll, readable when
//! completions are waiting). What differs is underneath:
//! - a connection has one multishot receive armed, which stays armed across requests and
//!   names a provided-buffer ring ([`buf_ring`]), so an idle connection holds no receive
//!   buffer; data is copied out of the ring's buffers (requests are small). A connection
//!   whose reader falls behind has its receive cancelled until it catches up, so it
//!   cannot take every buffer;
//! - small writes are copied into the connection's send buffer and submitted; the write
//!   returns at once (the send's outcome is reported by the next call). A connection has
//!   at most one send in flight, so a client that does not read holds at most one turn's
//!   output here;
//! - large writes (a reply of [`DIRECT_WRITE`] bytes or more) go straight to the socket
//!   with a non-blocking system call, as on the epoll path: their cost is in the bytes,
//!   and a direct `sendmsg` sends values from where they lie (shoald's zero-copy replies)
//!   instead of copying them into a send buffer. A direct write that would block waits
//!   for an io_uring poll.
//!
//! [`supported`] says whether the kernel has what this needs (Linux 5.19 or later, and
//! io_uring not disabled); callers fall back to the epoll path when it does not.

mod buf_ring;
mod driver;

use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use driver::Driver;

/// Writes of at least this many bytes go straight to the socket (no copy into a send
/// buffer); smaller ones are copied and submitted in the turn's batch.
pub const DIRECT_WRITE: usize = 16 * 1024;

/// Whether this kernel supports the io_uring data path (checked once: a ring can be set
/// up, the receive, send, poll and cancel operations are supported, and a provided-buffer
/// ring can be registered).
pub fn supported() -> bool {
    static SUPPORTED: OnceLock<Result<(), String>> = OnceLock::new();
    SUPPORTED.get_or_init(driver::probe).is_ok()
}

/// Why the io_uring data path is not supported here, if it is not.
pub fn unsupported_reason() -> Option<String> {
    if supported() {
        None
    } else {
        driver::probe().err()
    }
}

/// A connected socket whose reads and writes go through this thread's io_uring.
///
/// Must be created and used on one worker thread, inside its tokio runtime and
/// `LocalSet` (the thread's driver task is spawned there on first use).
pub struct UringStream {
    driver: Rc<Driver>,
    token: usize,
    fd: RawFd,
}

impl UringStream {
    /// Takes over a connected socket (made non-blocking here).
    pub fn new(fd: OwnedFd) -> io::Result<UringStream> {
        set_nonblocking(fd.as_raw_fd())?;
        let driver = Driver::current()?;
        let raw = fd.as_raw_fd();
        let token = driver.register(fd);
        Ok(UringStream {
            driver,
            token,
            fd: raw,
        })
    }
}

impl AsRawFd for UringStream {
    fn as_raw_fd(&self) -> RawFd {
        self.fd
    }
}

impl AsyncRead for UringStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.driver.poll_read(self.token, cx, buf)
    }
}

impl AsyncWrite for UringStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.driver.poll_write(self.token, cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.driver.poll_write(self.token, cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Nothing to push: a write is queued for the kernel as soon as it returns (the
        // driver submits it with the turn's batch), and its outcome is reported by the
        // next write or by shutdown. Waiting here for the send to complete would cost
        // every turn a round trip through the event loop.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Everything written goes out before the end of the stream.
        match self.driver.poll_sent(self.token, cx) {
            Poll::Ready(Ok(())) => {}
            other => return other,
        }
        // SAFETY: `fd` is the socket this stream owns (registered with the driver, closed
        // only after the stream is dropped).
        if unsafe { libc::shutdown(self.fd, libc::SHUT_WR) } < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ENOTCONN) {
                return Poll::Ready(Err(e));
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl Drop for UringStream {
    fn drop(&mut self) {
        self.driver.deregister(self.token);
    }
}

pub(crate) fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor we own, with valid commands.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
