//! A descriptor registered with this thread's loop: its readiness, as the loop last saw
//! it, and whom to wake when that changes.

use std::io;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::task::{Context, Poll};

use super::{current, IoState};

/// A descriptor's place in this thread's [`super::EventLoop`], edge-triggered for both
/// directions; deregistered on drop (before the caller closes the descriptor).
pub(crate) struct Registration {
    fd: RawFd,
    token: usize,
    pub(crate) io: Rc<IoState>,
}

impl Registration {
    /// Registers `fd`, which the caller keeps open for the registration's life.
    /// Fails outside an event loop, or when epoll refuses the descriptor.
    pub(crate) fn new(fd: RawFd) -> io::Result<Registration> {
        let core = current().ok_or_else(|| io::Error::other("no event loop on this thread"))?;
        let (token, io) = core.register_socket(fd)?;
        Ok(Registration { fd, token, io })
    }

    /// Ready when the descriptor may be read (or is closed); otherwise the task is woken
    /// once the loop sees it readable.
    pub(crate) fn poll_readable(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.io.readable.get() || self.io.read_closed.get() {
            return Poll::Ready(());
        }
        IoState::register(&self.io.reader, cx.waker());
        self.io.wants_read.set(true);
        Poll::Pending
    }

    /// Ready when the descriptor may be written (or is closed); otherwise the task is
    /// woken once the loop sees it writable.
    pub(crate) fn poll_writable(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.io.writable.get() || self.io.write_closed.get() {
            return Poll::Ready(());
        }
        IoState::register(&self.io.writer, cx.waker());
        self.io.wants_write.set(true);
        Poll::Pending
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(core) = current() {
            core.deregister_socket(self.token, self.fd);
        }
    }
}
