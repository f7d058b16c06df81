//! A descriptor registered with this thread's loop: its readiness, as the loop last saw
//! it, and whom to wake when that changes.

use std::cell::{Cell, RefCell};
use std::io;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use super::current;

/// One direction (reading or writing) of a registered descriptor.
pub(crate) struct Direction {
    /// The loop saw it ready, and no call has found it blocked since.
    ready: Cell<bool>,
    /// It will never block again: reads return end-of-stream or the error, writes fail.
    /// Not cleared by a short call.
    closed: Cell<bool>,
    /// The task to wake, kept across waits (cloned only when it changes).
    waker: RefCell<Option<Waker>>,
    /// A task is waiting for it.
    waiting: Cell<bool>,
}

impl Direction {
    fn new() -> Direction {
        // Ready until a call says otherwise: a new socket may already hold bytes.
        Direction {
            ready: Cell::new(true),
            closed: Cell::new(false),
            waker: RefCell::new(None),
            waiting: Cell::new(false),
        }
    }

    /// Ready when a call may not block; otherwise the task is woken once the loop sees
    /// it ready.
    fn poll(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.ready.get() || self.closed.get() {
            return Poll::Ready(());
        }
        let mut slot = self.waker.borrow_mut();
        match slot.as_ref() {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => *slot = Some(cx.waker().clone()),
        }
        self.waiting.set(true);
        Poll::Pending
    }

    /// The loop saw it ready (`closed`: for good), and wakes the task waiting for it.
    pub(super) fn mark_ready(&self, closed: bool) {
        if closed {
            self.closed.set(true);
        }
        self.ready.set(true);
        if self.waiting.replace(false) {
            if let Some(w) = self.waker.borrow().as_ref() {
                w.wake_by_ref();
            }
        }
    }

    /// A call moved less than it asked for: the kernel's buffer is drained (or full),
    /// and the next call would only say so.
    pub(crate) fn drained(&self) {
        self.ready.set(false);
    }

    /// A call found it would block. A closed direction's calls do not block; should one
    /// anyway, it waits for the loop too rather than retrying at once.
    pub(crate) fn blocked(&self) {
        self.ready.set(false);
        self.closed.set(false);
    }
}

/// A registered descriptor's two directions. A peer that only closed its sending side
/// closes reading, not writing: it may still read, and a write to it can still block.
pub(crate) struct IoState {
    pub(crate) read: Direction,
    pub(crate) write: Direction,
}

impl IoState {
    pub(super) fn new() -> IoState {
        IoState {
            read: Direction::new(),
            write: Direction::new(),
        }
    }
}

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
        self.io.read.poll(cx)
    }

    /// Ready when the descriptor may be written (or is closed); otherwise the task is
    /// woken once the loop sees it writable.
    pub(crate) fn poll_writable(&self, cx: &mut Context<'_>) -> Poll<()> {
        self.io.write.poll(cx)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(core) = current() {
            core.deregister_socket(self.token, self.fd);
        }
    }
}
