//! A connected socket on the event loop: non-blocking system calls straight from
//! `poll_read`/`poll_write`, and the loop's edge-triggered readiness in between.

use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::{syscall, Registration};

/// Most buffers one `sendmsg` takes (Linux's `IOV_MAX`); a longer reply is sent in parts,
/// as a short write.
const IOV_MAX: usize = 1024;

/// A stream socket (TCP or unix) served by this thread's [`super::EventLoop`].
///
/// Registered once, edge-triggered, for both directions. A read or write that would
/// block clears its readiness and waits for the loop to see it again; a read shorter than
/// the buffer clears it too (the socket is drained, as tokio also assumes), which saves
/// the system call that would only say so. End-of-stream and errors stay ready for good.
pub struct EpollStream {
    // Declared first, so it is dropped (deregistered) before the descriptor closes.
    registration: Registration,
    fd: OwnedFd,
}

impl EpollStream {
    /// Takes over a connected socket (made non-blocking here) on this thread's loop.
    ///
    /// Fails outside an event loop, or when epoll refuses the descriptor.
    pub fn new(fd: OwnedFd) -> io::Result<EpollStream> {
        crate::uring::set_nonblocking(fd.as_raw_fd())?;
        let registration = Registration::new(fd.as_raw_fd())?;
        Ok(EpollStream { registration, fd })
    }

    // Inlined, like the system call in it, into the connection loop: see `super::syscall`
    // for what each function level around a system call costs.
    #[inline(always)]
    fn poll_send(&self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        // What one call may send: a short count then means the socket buffer is full,
        // not that the iovec array was capped.
        let bufs = &bufs[..bufs.len().min(IOV_MAX)];
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if total == 0 {
            return Poll::Ready(Ok(0));
        }
        let write = &self.registration.io.write;
        loop {
            // Readiness may have come between a failed send and now only through this
            // thread's loop, which has not run since: nothing is missed.
            if self.registration.poll_writable(cx).is_pending() {
                return Poll::Pending;
            }
            let fd = self.fd.as_raw_fd();
            let n = if bufs.len() == 1 {
                // SAFETY: sends from a live slice of its own length.
                unsafe { syscall::send(fd, bufs[0].as_ptr(), bufs[0].len()) }
            } else {
                // SAFETY: an all-zero msghdr is valid; the iovec array is `IoSlice`s,
                // which are ABI-compatible with iovec, live for the call.
                let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
                msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
                msg.msg_iovlen = bufs.len() as _;
                // SAFETY: `msg` points at live buffers for the duration of the call.
                unsafe { syscall::sendmsg(fd, &msg) }
            };
            if n >= 0 {
                let n = n as usize;
                if n < total {
                    write.drained();
                }
                return Poll::Ready(Ok(n));
            }
            match -n as i32 {
                libc::EAGAIN => write.blocked(),
                libc::EINTR => {}
                e => return Poll::Ready(Err(io::Error::from_raw_os_error(e))),
            }
        }
    }
}

impl AsRawFd for EpollStream {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsyncRead for EpollStream {
    // Inlined into the connection loop, as `poll_send` is.
    #[inline(always)]
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        let read = &self.registration.io.read;
        loop {
            if self.registration.poll_readable(cx).is_pending() {
                return Poll::Pending;
            }
            let len = buf.remaining();
            // SAFETY: receives into the unfilled part of `buf`, at most its length; the
            // bytes written are marked initialized below, and only those.
            let n = unsafe {
                let dst = buf.unfilled_mut();
                syscall::recv(self.fd.as_raw_fd(), dst.as_mut_ptr().cast(), len)
            };
            if n >= 0 {
                let n = n as usize;
                // SAFETY: the kernel wrote `n` bytes at the start of the unfilled part.
                unsafe { buf.assume_init(n) };
                buf.advance(n);
                if n > 0 && n < len {
                    read.drained();
                }
                return Poll::Ready(Ok(()));
            }
            match -n as i32 {
                libc::EAGAIN => read.blocked(),
                libc::EINTR => {}
                e => return Poll::Ready(Err(io::Error::from_raw_os_error(e))),
            }
        }
    }
}

impl AsyncWrite for EpollStream {
    #[inline(always)]
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_send(cx, &[IoSlice::new(buf)])
    }

    #[inline(always)]
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_send(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Writes go to the kernel as they are made: nothing is held here.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // SAFETY: shutdown on a socket this stream owns.
        if unsafe { libc::shutdown(self.fd.as_raw_fd(), libc::SHUT_WR) } < 0 {
            let e = io::Error::last_os_error();
            // Already gone (the peer reset it): nothing left to end.
            if e.raw_os_error() != Some(libc::ENOTCONN) {
                return Poll::Ready(Err(e));
            }
        }
        Poll::Ready(Ok(()))
    }
}
