//! One io_uring per worker thread, its connections' state, and the task that submits and
//! completes their operations.
//!
//! Streams queue submission entries as they run; the driver task, woken by the first one,
//! runs after every other task the turn woke (tokio's current-thread scheduler is FIFO)
//! and submits them all with one `io_uring_enter`, then reads the completions, which are
//! in memory shared with the kernel, and wakes the streams they are for. When there is
//! nothing to do it sleeps in tokio's epoll, on the ring's file descriptor (readable when
//! completions wait) and on a notification from the next stream that queues an entry.
//!
//! Memory the kernel writes to or reads from (provided buffers, send buffers) is owned
//! here, not by the streams: a stream dropped while its receive is in flight asks for the
//! receive to be cancelled, and its state (and socket) lives on until the kernel has
//! answered, so the kernel never touches freed memory or a reused descriptor.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use tokio::io::unix::AsyncFd;
use tokio::io::ReadBuf;
use tokio::sync::Notify;

use super::buf_ring::BufRing;
use super::DIRECT_WRITE;

/// Submission queue entries (the completion queue gets twice as many).
const RING_ENTRIES: u32 = 512;
/// Provided receive buffers per worker, and their size: 4 MB of address space per worker,
/// resident only as used.
const RECV_BUFFERS: u16 = 256;
const RECV_BUFFER_SIZE: usize = 16 * 1024;
/// Buffer group id of the receive buffers.
const RECV_GROUP: u16 = 0;
/// Received chunks a connection may hold unread before its receive is paused.
const MAX_CHUNKS: usize = 4;
/// Most iovecs one direct write passes (the kernel's `UIO_MAXIOV`).
const MAX_IOVECS: usize = 1024;
/// How long dropping a driver waits for the kernel to give back its buffers.
const TEARDOWN_WAIT: Duration = Duration::from_secs(2);

/// Operation kinds, in the low byte of an entry's user data (the connection's token is
/// above it).
const OP_RECV: u64 = 1;
const OP_SEND: u64 = 2;
const OP_POLL_OUT: u64 = 3;
const OP_CANCEL: u64 = 4;

fn user_data(token: usize, op: u64) -> u64 {
    ((token as u64) << 8) | op
}

thread_local! {
    static CURRENT: RefCell<Option<Rc<Driver>>> = const { RefCell::new(None) };
}

/// A worker thread's ring and its connections.
pub(super) struct Driver {
    /// The ring's descriptor in tokio's epoll: readable when completions wait. Declared
    /// (so dropped) before `inner`, which closes the descriptor.
    ring_fd: AsyncFd<RingFd>,
    inner: RefCell<Inner>,
    /// With deferred task work, the eventfd the ring signals (what `ring_fd` watches).
    _eventfd: Option<OwnedFd>,
    /// Wakes the driver task when a stream queues an entry while it sleeps.
    wake: Notify,
}

struct RingFd(RawFd);

impl AsRawFd for RingFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

struct Inner {
    // Field order is drop order: the ring (and with it the kernel's use of the buffer
    // ring) goes before the buffers. `Drop for Inner` first waits for in-flight work.
    ring: IoUring,
    bufs: ManuallyDrop<BufRing>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    /// Entries queued but not yet submitted.
    unsubmitted: usize,
    /// Entries submitted (or queued) whose completion has not been read.
    in_flight: usize,
    /// The driver task is waiting for completions or entries.
    sleeping: bool,
    /// Connections whose receive found no free buffer: armed again when one comes back.
    starved: Vec<usize>,
    /// Scratch list of wakers to wake once the state is no longer borrowed.
    to_wake: Vec<Waker>,
}

/// One connection's state.
struct Conn {
    /// The socket; closed when the state is freed (after the kernel is done with it).
    fd: OwnedFd,
    /// The stream was dropped: free the state once nothing is in flight.
    closing: bool,
    /// A multishot receive is armed (it stays armed across completions until the kernel
    /// ends it: cancelled, out of buffers, end of stream or an error).
    recv_armed: bool,
    /// A cancel of the receive was asked for (too much received and not yet read).
    recv_cancelling: bool,
    /// Received data not yet read: buffer ids and lengths, oldest first.
    chunks: VecDeque<(u16, usize)>,
    /// Bytes of the oldest chunk already read.
    chunk_read: usize,
    eof: bool,
    read_err: Option<io::Error>,
    read_waker: Option<Waker>,
    /// Bytes of a copied write; never touched while `send_armed`.
    send_buf: Vec<u8>,
    /// Bytes of `send_buf` the kernel has sent.
    send_off: usize,
    send_armed: bool,
    /// A poll for writability is in flight (a direct write would have blocked).
    poll_out_armed: bool,
    write_err: Option<io::Error>,
    write_waker: Option<Waker>,
}

impl Conn {
    fn busy(&self) -> bool {
        self.recv_armed || self.send_armed || self.poll_out_armed
    }
}

/// Checks that this kernel supports what the data path uses.
pub(super) fn probe() -> Result<(), String> {
    let ring = IoUring::new(8).map_err(|e| format!("io_uring_setup failed: {e}"))?;
    let mut probe = io_uring::Probe::new();
    ring.submitter()
        .register_probe(&mut probe)
        .map_err(|e| format!("io_uring probe failed: {e}"))?;
    for (code, name) in [
        (opcode::Recv::CODE, "recv"),
        (opcode::Send::CODE, "send"),
        (opcode::PollAdd::CODE, "poll_add"),
        (opcode::AsyncCancel::CODE, "async_cancel"),
    ] {
        if !probe.is_supported(code) {
            return Err(format!("io_uring lacks the {name} operation"));
        }
    }
    BufRing::register(&ring, 0, 2, 64)
        .map(drop)
        .map_err(|e| format!("io_uring provided-buffer rings unsupported: {e}"))
}

impl Driver {
    /// This thread's driver, set up (and its task spawned) on first use. Must be called
    /// inside a tokio runtime and `LocalSet`.
    pub(super) fn current() -> io::Result<Rc<Driver>> {
        if let Some(d) = CURRENT.with(|c| c.borrow().clone()) {
            return Ok(d);
        }
        // Deferred task work (Linux 6.1): completions are run when the driver enters the
        // ring, in one batch, instead of interrupting the thread as each arrives; the
        // ring signals an eventfd that tokio watches. Older kernels get the plain mode,
        // where the ring's own descriptor is watched.
        let (ring, defer) = match IoUring::builder()
            .setup_submit_all()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_taskrun_flag()
            .build(RING_ENTRIES)
        {
            Ok(ring) => (ring, true),
            Err(_) => (
                IoUring::builder().setup_submit_all().build(RING_ENTRIES)?,
                false,
            ),
        };
        let bufs = BufRing::register(&ring, RECV_GROUP, RECV_BUFFERS, RECV_BUFFER_SIZE)?;
        let (wake_fd, eventfd) = if defer {
            // SAFETY: plain eventfd creation; the result is checked.
            let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
            if efd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `efd` was just created and is owned from here on.
            let owned = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(efd) };
            ring.submitter().register_eventfd(efd)?;
            (efd, Some(owned))
        } else {
            (ring.as_raw_fd(), None)
        };
        // SAFETY: the descriptor stays open for as long as the AsyncFd lives: both are
        // owned by the driver, which drops the AsyncFd first (field order).
        let ring_fd = unsafe {
            AsyncFd::register_with_interest(RingFd(wake_fd), tokio::io::Interest::READABLE)
        }
        .map_err(|e| e.into_parts().1)?;
        let driver = Rc::new(Driver {
            inner: RefCell::new(Inner {
                ring,
                bufs: ManuallyDrop::new(bufs),
                conns: Vec::new(),
                free: Vec::new(),
                unsubmitted: 0,
                in_flight: 0,
                sleeping: false,
                starved: Vec::new(),
                to_wake: Vec::new(),
            }),
            ring_fd,
            _eventfd: eventfd,
            wake: Notify::new(),
        });
        CURRENT.with(|c| *c.borrow_mut() = Some(driver.clone()));
        tokio::task::spawn_local(driver.clone().run());
        Ok(driver)
    }

    /// Adds a connection; returns its token.
    pub(super) fn register(&self, fd: OwnedFd) -> usize {
        let conn = Conn {
            fd,
            closing: false,
            recv_armed: false,
            recv_cancelling: false,
            chunks: VecDeque::new(),
            chunk_read: 0,
            eof: false,
            read_err: None,
            read_waker: None,
            send_buf: Vec::new(),
            send_off: 0,
            send_armed: false,
            poll_out_armed: false,
            write_err: None,
            write_waker: None,
        };
        let mut inner = self.inner.borrow_mut();
        match inner.free.pop() {
            Some(t) => {
                inner.conns[t] = Some(conn);
                t
            }
            None => {
                inner.conns.push(Some(conn));
                inner.conns.len() - 1
            }
        }
    }

    /// The stream for `token` was dropped: cancel what it has in flight and free its
    /// state (closing the socket) once the kernel has answered.
    pub(super) fn deregister(&self, token: usize) {
        let mut inner = self.inner.borrow_mut();
        let Some(c) = inner.conns.get_mut(token).and_then(Option::as_mut) else {
            return;
        };
        c.closing = true;
        c.read_waker = None;
        c.write_waker = None;
        let cancel: Vec<u64> = [
            (c.recv_armed, OP_RECV),
            (c.send_armed, OP_SEND),
            (c.poll_out_armed, OP_POLL_OUT),
        ]
        .into_iter()
        .filter(|(armed, _)| *armed)
        .map(|(_, op)| user_data(token, op))
        .collect();
        if cancel.is_empty() {
            inner.free_conn(token);
            return;
        }
        for target in cancel {
            let sqe = opcode::AsyncCancel::new(target)
                .build()
                .user_data(user_data(token, OP_CANCEL));
            inner.push(&sqe);
        }
        self.queued(&mut inner);
    }

    pub(super) fn poll_read(
        &self,
        token: usize,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        let Some(c) = inner.conns.get_mut(token).and_then(Option::as_mut) else {
            return Poll::Ready(Err(io::ErrorKind::NotConnected.into()));
        };
        if !c.chunks.is_empty() {
            // Copy out as many received chunks as fit, giving each buffer back once read.
            while let Some(&(bid, len)) = c.chunks.front() {
                if buf.remaining() == 0 {
                    break;
                }
                let data = inner.bufs.data(bid, len);
                let n = buf.remaining().min(len.saturating_sub(c.chunk_read));
                buf.put_slice(data.get(c.chunk_read..c.chunk_read + n).unwrap_or_default());
                c.chunk_read += n;
                if c.chunk_read >= len {
                    c.chunks.pop_front();
                    c.chunk_read = 0;
                    inner.bufs.recycle(bid);
                }
            }
            inner.feed_starved();
            return Poll::Ready(Ok(()));
        }
        if let Some(e) = c.read_err.take() {
            return Poll::Ready(Err(e));
        }
        if c.eof || buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        set_waker(&mut c.read_waker, cx);
        if !c.recv_armed {
            c.recv_armed = true;
            c.recv_cancelling = false;
            let sqe = opcode::RecvMulti::new(types::Fd(c.fd.as_raw_fd()), inner.bufs.group())
                .build()
                .user_data(user_data(token, OP_RECV));
            inner.push(&sqe);
            self.queued(inner);
        }
        Poll::Pending
    }

    pub(super) fn poll_write(
        &self,
        token: usize,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        let Some(c) = inner.conns.get_mut(token).and_then(Option::as_mut) else {
            return Poll::Ready(Err(io::ErrorKind::NotConnected.into()));
        };
        if let Some(e) = c.write_err.take() {
            return Poll::Ready(Err(e));
        }
        if c.send_armed || c.poll_out_armed {
            set_waker(&mut c.write_waker, cx);
            return Poll::Pending;
        }
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if total == 0 {
            return Poll::Ready(Ok(0));
        }
        if total >= DIRECT_WRITE {
            match direct_send(c.fd.as_raw_fd(), bufs) {
                Ok(n) => return Poll::Ready(Ok(n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    c.poll_out_armed = true;
                    set_waker(&mut c.write_waker, cx);
                    let sqe =
                        opcode::PollAdd::new(types::Fd(c.fd.as_raw_fd()), libc::POLLOUT as u32)
                            .build()
                            .user_data(user_data(token, OP_POLL_OUT));
                    inner.push(&sqe);
                    self.queued(inner);
                    return Poll::Pending;
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        c.send_buf.clear();
        for b in bufs {
            c.send_buf.extend_from_slice(b);
        }
        c.send_off = 0;
        c.send_armed = true;
        let sqe = send_entry(token, c);
        inner.push(&sqe);
        self.queued(inner);
        Poll::Ready(Ok(total))
    }

    /// Ready once the connection's last copied write has been sent (or failed).
    pub(super) fn poll_sent(&self, token: usize, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut inner = self.inner.borrow_mut();
        let Some(c) = inner.conns.get_mut(token).and_then(Option::as_mut) else {
            return Poll::Ready(Err(io::ErrorKind::NotConnected.into()));
        };
        if let Some(e) = c.write_err.take() {
            return Poll::Ready(Err(e));
        }
        if c.send_armed {
            set_waker(&mut c.write_waker, cx);
            return Poll::Pending;
        }
        Poll::Ready(Ok(()))
    }

    /// An entry was queued: make sure the driver task will submit it.
    fn queued(&self, inner: &mut Inner) {
        if inner.sleeping {
            inner.sleeping = false;
            self.wake.notify_one();
        }
    }

    /// Submits what is queued and handles what has completed; true if anything was.
    fn turn(&self) -> bool {
        let mut inner = self.inner.borrow_mut();
        let mut progressed = false;
        if inner.unsubmitted > 0 || inner.ring.submission().taskrun() {
            match inner.ring.submit() {
                Ok(_) => {
                    inner.unsubmitted = 0;
                    progressed = true;
                }
                // Busy (completions to read first) or interrupted: read them, retry.
                Err(e) => tracing::debug!("io_uring submit: {e}"),
            }
        }
        progressed |= inner.complete();
        let mut wake = std::mem::take(&mut inner.to_wake);
        drop(inner);
        for w in wake.drain(..) {
            w.wake();
        }
        self.inner.borrow_mut().to_wake = wake;
        progressed
    }

    /// The driver task: submits and completes until the runtime stops.
    async fn run(self: Rc<Self>) {
        loop {
            if self.turn() {
                // Let the streams just woken run (and queue their next entries) first.
                tokio::task::yield_now().await;
                continue;
            }
            self.inner.borrow_mut().sleeping = true;
            tokio::select! {
                biased;
                _ = self.wake.notified() => {}
                ready = self.ring_fd.readable() => {
                    if let Ok(mut guard) = ready {
                        guard.clear_ready();
                    }
                }
            }
            self.inner.borrow_mut().sleeping = false;
        }
    }
}

impl Inner {
    /// Queues an entry, submitting first if the queue is full.
    fn push(&mut self, sqe: &squeue::Entry) {
        loop {
            // SAFETY: every entry queued here points only at memory this driver owns and
            // keeps unchanged until the entry's completion is read (send buffers, the
            // provided-buffer ring) or at nothing (receives select a buffer, polls and
            // cancels take none).
            let pushed = unsafe { self.ring.submission().push(sqe) };
            if pushed.is_ok() {
                self.unsubmitted += 1;
                self.in_flight += 1;
                return;
            }
            if let Err(e) = self.ring.submit() {
                tracing::debug!("io_uring submit (queue full): {e}");
                // Completions must be read before more can be submitted.
                self.complete();
            } else {
                self.unsubmitted = 0;
            }
        }
    }

    /// Handles every completion waiting; true if there was one.
    fn complete(&mut self) -> bool {
        let mut any = false;
        loop {
            let Some(cqe) = self.ring.completion().next() else {
                break;
            };
            any = true;
            self.in_flight = self.in_flight.saturating_sub(1);
            let token = (cqe.user_data() >> 8) as usize;
            let op = cqe.user_data() & 0xff;
            self.completed(token, op, cqe.result(), cqe.flags());
        }
        any
    }

    fn completed(&mut self, token: usize, op: u64, res: i32, flags: u32) {
        if op == OP_CANCEL {
            return;
        }
        let Some(c) = self.conns.get_mut(token).and_then(Option::as_mut) else {
            return;
        };
        match op {
            OP_RECV => {
                if !cqueue::more(flags) {
                    c.recv_armed = false;
                }
                let bid = cqueue::buffer_select(flags);
                if res > 0 {
                    match bid {
                        Some(bid) if !c.closing => {
                            c.chunks.push_back((bid, res as usize));
                            if c.chunks.len() >= MAX_CHUNKS && c.recv_armed && !c.recv_cancelling {
                                // The reader is behind: stop receiving for this connection
                                // (the socket buffers the rest) until it has caught up, so
                                // one connection cannot take every buffer.
                                c.recv_cancelling = true;
                                let sqe = opcode::AsyncCancel::new(user_data(token, OP_RECV))
                                    .build()
                                    .user_data(user_data(token, OP_CANCEL));
                                self.push(&sqe);
                                return;
                            }
                        }
                        Some(bid) => self.bufs.recycle(bid),
                        None => c.read_err = Some(io::Error::other("receive without a buffer")),
                    }
                } else if res == 0 {
                    c.eof = true;
                } else if res == -libc::ENOBUFS {
                    // Every buffer holds data not yet read: try again when one is back.
                    if !c.closing {
                        self.starved.push(token);
                    }
                    return;
                } else if res != -libc::ECANCELED {
                    c.read_err = Some(io::Error::from_raw_os_error(-res));
                }
                if let Some(w) = c.read_waker.take() {
                    self.to_wake.push(w);
                }
            }
            OP_SEND => {
                if res >= 0 && !c.closing {
                    c.send_off += res as usize;
                    if c.send_off < c.send_buf.len() {
                        // A short send: the rest goes in the next batch.
                        let sqe = send_entry(token, c);
                        self.push(&sqe);
                        return;
                    }
                } else if res < 0 && res != -libc::ECANCELED {
                    c.write_err = Some(io::Error::from_raw_os_error(-res));
                }
                c.send_armed = false;
                if let Some(w) = c.write_waker.take() {
                    self.to_wake.push(w);
                }
            }
            OP_POLL_OUT => {
                c.poll_out_armed = false;
                if let Some(w) = c.write_waker.take() {
                    self.to_wake.push(w);
                }
            }
            _ => {}
        }
        let free = self
            .conns
            .get(token)
            .and_then(Option::as_ref)
            .is_some_and(|c| c.closing && !c.busy());
        if free {
            self.free_conn(token);
        }
    }

    /// Re-arms receives that found no free buffer, now that one is back.
    fn feed_starved(&mut self) {
        while let Some(token) = self.starved.pop() {
            let Some(c) = self.conns.get_mut(token).and_then(Option::as_mut) else {
                continue;
            };
            if c.closing || c.recv_armed {
                continue;
            }
            // Wake the reader: its next poll arms a receive.
            if let Some(w) = c.read_waker.take() {
                self.to_wake.push(w);
            }
        }
    }

    /// Frees a closing connection's state: its buffer goes back, its socket is closed.
    fn free_conn(&mut self, token: usize) {
        let Some(slot) = self.conns.get_mut(token) else {
            return;
        };
        if let Some(c) = slot.take() {
            for (bid, _) in c.chunks {
                self.bufs.recycle(bid);
            }
            self.free.push(token);
            // `c.fd` closes here.
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Cancel everything and wait for the kernel to answer, so it never writes into
        // buffers freed below. Bounded: if it does not answer in time, the buffers are
        // leaked rather than freed under it.
        if self.in_flight > 0 {
            let sqe = opcode::AsyncCancel2::new(types::CancelBuilder::any())
                .build()
                .user_data(user_data(0, OP_CANCEL));
            self.push(&sqe);
            let deadline = Instant::now() + TEARDOWN_WAIT;
            while self.in_flight > 0 && Instant::now() < deadline {
                let ts = types::Timespec::new().nsec(10_000_000);
                let args = types::SubmitArgs::new().timespec(&ts);
                let _ = self.ring.submitter().submit_with_args(1, &args);
                self.unsubmitted = 0;
                while let Some(cqe) = self.ring.completion().next() {
                    let _ = cqe;
                    self.in_flight = self.in_flight.saturating_sub(1);
                }
            }
        }
        if self.in_flight == 0 {
            // SAFETY: dropped once, here; nothing the kernel still holds points into it.
            unsafe { ManuallyDrop::drop(&mut self.bufs) };
        } else {
            tracing::warn!(
                "io_uring: {} operations still in flight at shutdown; leaking their buffers",
                self.in_flight
            );
            std::mem::forget(std::mem::take(&mut self.conns));
        }
    }
}

fn set_waker(slot: &mut Option<Waker>, cx: &Context<'_>) {
    match slot {
        Some(w) if w.will_wake(cx.waker()) => {}
        _ => *slot = Some(cx.waker().clone()),
    }
}

/// The entry sending what is left of `c`'s send buffer.
fn send_entry(token: usize, c: &Conn) -> squeue::Entry {
    let rest = c.send_buf.get(c.send_off..).unwrap_or_default();
    opcode::Send::new(
        types::Fd(c.fd.as_raw_fd()),
        rest.as_ptr(),
        rest.len() as u32,
    )
    .flags(libc::MSG_NOSIGNAL)
    .build()
    .user_data(user_data(token, OP_SEND))
}

/// A non-blocking vectored send straight from the caller's buffers.
fn direct_send(fd: RawFd, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
    let iov = bufs.get(..bufs.len().min(MAX_IOVECS)).unwrap_or_default();
    // SAFETY: a zeroed msghdr is valid; the iovec array (IoSlice is ABI-compatible with
    // iovec) outlives the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = iov.len();
    loop {
        // SAFETY: `msg` describes valid, readable buffers for the duration of the call.
        let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
