//! A worker thread's own event loop: edge-triggered epoll, the thread's tasks in a slab,
//! and nothing between a socket's readiness and the task that waits on it.
//!
//! Why not tokio here: at depth 1 every request is one readiness event, and under
//! callgrind tokio's path from that event to the connection's code (driver turn,
//! scheduled-I/O wake, LocalSet schedule and tick, task harness, readiness
//! registration) was about a quarter of shoald's user-space instructions per request,
//! against memcached's libevent callback. This loop does what a worker needs and no more:
//! - an epoll event names the socket's slot; the slot says which task waits on it, and
//!   that task is polled: no queue between threads, no reference counts per event;
//! - tasks are the connections' futures, unchanged: [`EpollStream`] is an
//!   `AsyncRead + AsyncWrite` like tokio's sockets, so the shared connection loop, TLS
//!   and every protocol run on it as they do on tokio or on io_uring;
//! - wake-ups from other threads (a connection handed over, a flash read done, shutdown)
//!   go through one mutex-guarded list and an eventfd, the only cross-thread path;
//! - timers ([`sleep`], and [`crate::time`] over it) are an ordered map, touched only by
//!   connections that use a timeout.
//!
//! tokio's synchronization types (channels, `Notify`, `watch`) work here unchanged: they
//! only need a [`Waker`]. tokio's timers and sockets do not (they need tokio's runtime),
//! which is why the daemons call [`crate::time`] rather than `tokio::time`.

mod registration;
mod slab;
mod stream;
mod syscall;

use registration::IoState;
pub(crate) use registration::Registration;
use slab::Slab;
pub use stream::EpollStream;

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// Events taken from epoll per wait.
const EVENTS: usize = 256;

/// The epoll token of the loop's own eventfd (sockets' tokens are slab indexes).
const WAKE_TOKEN: u64 = u64::MAX;

type Task = Pin<Box<dyn Future<Output = ()>>>;

/// One task's slot: its future (taken out while it is polled, so a task may spawn
/// others) and its waker, made once.
struct Slot {
    future: RefCell<Option<Task>>,
    waker: Waker,
    /// The round it was last polled in: a task woken twice in a round is polled once.
    round: Cell<u64>,
}

/// What other threads share with the loop: wake-ups for its tasks.
struct Remote {
    queue: Mutex<Vec<usize>>,
    /// Set once the eventfd has been written and not yet drained: later wakes only queue.
    notified: AtomicBool,
    eventfd: OwnedFd,
}

impl Remote {
    fn wake(&self, task: usize) {
        match self.queue.lock() {
            Ok(mut q) => q.push(task),
            Err(poisoned) => poisoned.into_inner().push(task),
        }
        if !self.notified.swap(true, Ordering::AcqRel) {
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a live u64 to the loop's eventfd, which lives as
            // long as this `Remote`.
            unsafe {
                libc::write(
                    self.eventfd.as_raw_fd(),
                    (&one as *const u64).cast(),
                    std::mem::size_of::<u64>(),
                )
            };
        }
    }
}

/// A task's waker: its slot and its loop. On the loop's own thread (the common case: a
/// socket event or a yield) waking is a push onto a thread-local list.
struct TaskWaker {
    task: usize,
    remote: Arc<Remote>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let here = Arc::as_ptr(&self.remote) as usize;
        if OWNER.with(Cell::get) == here {
            READY.with(|r| r.borrow_mut().push(self.task));
        } else {
            self.remote.wake(self.task);
        }
    }
}

thread_local! {
    /// The address of the running loop's [`Remote`] (0: no loop on this thread).
    static OWNER: Cell<usize> = const { Cell::new(0) };
    /// Tasks woken on this thread since the loop last looked.
    static READY: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    /// The running loop.
    static CURRENT: RefCell<Option<Rc<Core>>> = const { RefCell::new(None) };
}

struct Core {
    epoll: OwnedFd,
    remote: Arc<Remote>,
    tasks: RefCell<Slab<Rc<Slot>>>,
    sockets: RefCell<Slab<Rc<IoState>>>,
    timers: RefCell<BTreeMap<(Instant, u64), Waker>>,
    next_timer: Cell<u64>,
    /// Woken when a task ends, for [`until_idle`].
    idle_waiter: RefCell<Option<Waker>>,
    round: Cell<u64>,
}

/// A single-threaded executor and epoll reactor (see the module documentation). Made and
/// run on the thread it serves; [`EventLoop::block_on`] runs it.
pub struct EventLoop {
    core: Rc<Core>,
}

impl EventLoop {
    /// A loop with its epoll instance and eventfd.
    pub fn new() -> io::Result<EventLoop> {
        // SAFETY: plain system calls; the descriptors returned are checked and owned.
        let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epoll < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `epoll` is a new descriptor nothing else owns.
        let epoll = unsafe { OwnedFd::from_raw_fd(epoll) };
        // SAFETY: as above.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if efd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `efd` is a new descriptor nothing else owns.
        let eventfd = unsafe { OwnedFd::from_raw_fd(efd) };
        ctl(
            epoll.as_raw_fd(),
            libc::EPOLL_CTL_ADD,
            eventfd.as_raw_fd(),
            libc::EPOLLIN as u32,
            WAKE_TOKEN,
        )?;
        Ok(EventLoop {
            core: Rc::new(Core {
                epoll,
                remote: Arc::new(Remote {
                    queue: Mutex::new(Vec::new()),
                    notified: AtomicBool::new(false),
                    eventfd,
                }),
                tasks: RefCell::new(Slab::new()),
                sockets: RefCell::new(Slab::new()),
                timers: RefCell::new(BTreeMap::new()),
                next_timer: Cell::new(0),
                idle_waiter: RefCell::new(None),
                round: Cell::new(0),
            }),
        })
    }

    /// Runs `main` and every task it spawns until `main` completes; tasks still running
    /// then are dropped. Panics in tasks are caught and logged (the task is dropped, its
    /// destructors run); other tasks go on.
    pub fn block_on<F: Future + 'static>(self, main: F) -> F::Output {
        let core = self.core;
        let previous = CURRENT.with(|c| c.replace(Some(core.clone())));
        let previous_owner = OWNER.with(|o| o.replace(Arc::as_ptr(&core.remote) as usize));
        let output: Rc<RefCell<Option<F::Output>>> = Rc::new(RefCell::new(None));
        let out = output.clone();
        core.spawn(Box::pin(async move {
            let v = main.await;
            *out.borrow_mut() = Some(v);
        }));
        let mut events: Vec<libc::epoll_event> =
            vec![libc::epoll_event { events: 0, u64: 0 }; EVENTS];
        let result = loop {
            core.run_ready();
            if let Some(v) = output.borrow_mut().take() {
                break v;
            }
            let mut timeout = -1;
            if READY.with(|r| !r.borrow().is_empty()) {
                timeout = 0;
            } else if let Some(&(deadline, _)) = core.timers.borrow().keys().next() {
                let left = deadline.saturating_duration_since(Instant::now());
                // Rounded up: waking a millisecond early would only wait again.
                timeout = left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
            }
            core.wait(&mut events, timeout);
            core.fire_timers();
        };
        // Whatever still runs is dropped here, on this thread, with the loop current (a
        // dropped stream deregisters from it).
        core.abort_all();
        OWNER.with(|o| o.set(previous_owner));
        CURRENT.with(|c| *c.borrow_mut() = previous);
        READY.with(|r| r.borrow_mut().clear());
        result
    }
}

impl Core {
    fn spawn(&self, future: Task) {
        let mut tasks = self.tasks.borrow_mut();
        let waker = Waker::from(Arc::new(TaskWaker {
            task: tasks.next_index(),
            remote: self.remote.clone(),
        }));
        let id = tasks.insert(Rc::new(Slot {
            future: RefCell::new(Some(future)),
            waker,
            round: Cell::new(u64::MAX),
        }));
        READY.with(|r| r.borrow_mut().push(id));
    }

    /// Polls the tasks woken so far, once each. Tasks they wake wait for the next round,
    /// after the sockets have been looked at again, so a task that keeps yielding cannot
    /// starve the others.
    fn run_ready(&self) {
        let batch = READY.with(|r| std::mem::take(&mut *r.borrow_mut()));
        if batch.is_empty() {
            return;
        }
        let round = self.round.get().wrapping_add(1);
        self.round.set(round);
        for &id in &batch {
            self.poll_task(id, round);
        }
        // Hand the batch's allocation back for the next round.
        READY.with(|r| {
            let mut r = r.borrow_mut();
            if r.is_empty() {
                let mut batch = batch;
                batch.clear();
                *r = batch;
            }
        });
    }

    fn poll_task(&self, id: usize, round: u64) {
        let Some(slot) = self.tasks.borrow().get(id).cloned() else {
            return;
        };
        if slot.round.replace(round) == round {
            return;
        }
        let Some(mut future) = slot.future.borrow_mut().take() else {
            return;
        };
        let mut cx = Context::from_waker(&slot.waker);
        let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            future.as_mut().poll(&mut cx)
        }));
        match polled {
            Ok(Poll::Pending) => *slot.future.borrow_mut() = Some(future),
            Ok(Poll::Ready(())) => {
                drop(future);
                self.finish(id);
            }
            Err(panic) => {
                tracing::error!(
                    "a connection task panicked: {}",
                    crate::panic_message(&*panic)
                );
                drop(future);
                self.finish(id);
            }
        }
    }

    fn finish(&self, id: usize) {
        self.tasks.borrow_mut().remove(id);
        if let Some(w) = self.idle_waiter.borrow_mut().take() {
            w.wake();
        }
    }

    fn abort_all(&self) {
        // Taken out first: a future's destructor may touch the loop (a stream leaving it).
        let slots = self.tasks.borrow_mut().take_all();
        for slot in slots {
            drop(slot.future.borrow_mut().take());
        }
    }

    /// Waits up to `timeout` ms (-1: until an event) and marks what became ready.
    fn wait(&self, events: &mut [libc::epoll_event], timeout: i32) {
        // SAFETY: `events` is a live, writable array of `events.len()` entries.
        let n = unsafe {
            syscall::epoll_wait(
                self.epoll.as_raw_fd(),
                events.as_mut_ptr(),
                events.len() as libc::c_int,
                timeout,
            )
        };
        if n < 0 {
            // EINTR: a signal; the loop simply looks again.
            return;
        }
        let sockets = self.sockets.borrow();
        for ev in &events[..n as usize] {
            let (bits, token) = (ev.events, ev.u64);
            if token == WAKE_TOKEN {
                self.drain_remote();
                continue;
            }
            let Some(io) = sockets.get(token as usize) else {
                continue;
            };
            let failed = bits & (libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0;
            let read_closed = failed || bits & libc::EPOLLRDHUP as u32 != 0;
            if read_closed || bits & libc::EPOLLIN as u32 != 0 {
                io.read.mark_ready(read_closed);
            }
            if failed || bits & libc::EPOLLOUT as u32 != 0 {
                io.write.mark_ready(failed);
            }
        }
    }

    fn drain_remote(&self) {
        let mut buf = 0u64;
        // SAFETY: reads at most 8 bytes into a live u64 from the loop's eventfd.
        unsafe {
            libc::read(
                self.remote.eventfd.as_raw_fd(),
                (&mut buf as *mut u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
        // Cleared before the queue is taken: a wake queued after this writes again.
        self.remote.notified.store(false, Ordering::Release);
        let woken = match self.remote.queue.lock() {
            Ok(mut q) => std::mem::take(&mut *q),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        };
        READY.with(|r| r.borrow_mut().extend(woken));
    }

    fn fire_timers(&self) {
        if self.timers.borrow().is_empty() {
            return;
        }
        let now = Instant::now();
        loop {
            let due = {
                let mut timers = self.timers.borrow_mut();
                match timers.first_key_value() {
                    Some((&(at, _), _)) if at <= now => timers.pop_first(),
                    _ => None,
                }
            };
            match due {
                Some((_, waker)) => waker.wake(),
                None => break,
            }
        }
    }

    fn register_socket(&self, fd: RawFd) -> io::Result<(usize, Rc<IoState>)> {
        let state = Rc::new(IoState::new());
        let token = self.sockets.borrow_mut().insert(state.clone());
        let interest = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32;
        let added = ctl(
            self.epoll.as_raw_fd(),
            libc::EPOLL_CTL_ADD,
            fd,
            interest,
            token as u64,
        );
        if let Err(e) = added {
            self.sockets.borrow_mut().remove(token);
            return Err(e);
        }
        Ok((token, state))
    }

    fn deregister_socket(&self, token: usize, fd: RawFd) {
        let _ = ctl(self.epoll.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, 0, 0);
        self.sockets.borrow_mut().remove(token);
    }
}

fn ctl(epoll: RawFd, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
    let mut ev = libc::epoll_event { events, u64: token };
    // SAFETY: `ev` is a live epoll_event; the kernel checks the descriptors.
    if unsafe { libc::epoll_ctl(epoll, op, fd, &mut ev) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn current() -> Option<Rc<Core>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Whether this thread is running an [`EventLoop`] (so sockets and timers must be the
/// loop's, not tokio's).
pub fn is_current() -> bool {
    OWNER.with(Cell::get) != 0
}

/// Runs `future` as a task of this thread's loop.
///
/// # Panics
/// Outside [`EventLoop::block_on`].
pub fn spawn<F: Future<Output = ()> + 'static>(future: F) {
    match current() {
        Some(core) => {
            core.spawn(Box::pin(future));
        }
        None => panic!("event_loop::spawn outside an event loop"),
    }
}

/// Completes once no task but the caller's is left on this thread's loop (at once
/// outside a loop).
pub async fn until_idle() {
    std::future::poll_fn(|cx| {
        let Some(core) = current() else {
            return Poll::Ready(());
        };
        if core.tasks.borrow().len() <= 1 {
            return Poll::Ready(());
        }
        *core.idle_waiter.borrow_mut() = Some(cx.waker().clone());
        Poll::Pending
    })
    .await
}

/// A timer of this thread's loop: completes at its deadline. Dropping it cancels it.
#[must_use = "a Sleep does nothing unless awaited"]
pub struct Sleep {
    deadline: Instant,
    key: Option<(Instant, u64)>,
}

/// A [`Sleep`] of `duration` on this thread's loop.
pub fn sleep(duration: Duration) -> Sleep {
    Sleep {
        deadline: Instant::now() + duration,
        key: None,
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            self.cancel();
            return Poll::Ready(());
        }
        let Some(core) = current() else {
            // No loop to wake us: never happens for a Sleep made through crate::time.
            return Poll::Pending;
        };
        let mut timers = core.timers.borrow_mut();
        if let Some(key) = self.key {
            if let Some(w) = timers.get_mut(&key) {
                if !w.will_wake(cx.waker()) {
                    *w = cx.waker().clone();
                }
                return Poll::Pending;
            }
        }
        let seq = core.next_timer.get();
        core.next_timer.set(seq.wrapping_add(1));
        let key = (self.deadline, seq);
        timers.insert(key, cx.waker().clone());
        self.key = Some(key);
        Poll::Pending
    }
}

impl Sleep {
    fn cancel(&mut self) {
        if let Some(key) = self.key.take() {
            if let Some(core) = current() {
                core.timers.borrow_mut().remove(&key);
            }
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.cancel();
    }
}

#[cfg(test)]
mod tests;
