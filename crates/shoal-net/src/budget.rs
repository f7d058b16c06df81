//! Memory budgets a hostile client cannot get around.
//!
//! A connection may only grow its buffers beyond a small fixed size by taking bytes from a
//! process-wide [`Budget`]; the bytes come back when the [`Reservation`] is dropped, which
//! happens however the connection ends (error, close, panic). This is how every daemon
//! keeps 800 stalled senders of 1 MB values, each holding 900 KB of one, from adding up to
//! gigabytes: past the budget a large request is refused (and its bytes discarded as they
//! arrive) instead of buffered. memcached gets the same bound by reading values into item
//! memory (bounded by `-m`) and capping its read buffers with `-o read_buf_mem_limit`.
//!
//! Output is bounded differently: a connection stops generating replies once
//! [`OUTPUT_HIGH_WATER`] bytes are unsent and resumes only when the client has drained
//! them, so a client that never reads costs at most that much plus one item.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Bytes of unsent replies at which a connection stops generating more until the client
/// reads them. Large enough for one syscall to carry a deep pipeline's replies, small
/// enough that thousands of non-reading clients stay within a few hundred MB.
pub const OUTPUT_HIGH_WATER: usize = 256 * 1024;

/// Size of a connection's read buffer when it holds no large request. Growth beyond this
/// is charged to a [`Budget`].
pub const READ_CHUNK: usize = 16 * 1024;

/// A process-wide byte budget shared by every connection of a daemon. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Budget {
    inner: Arc<BudgetInner>,
}

#[derive(Debug)]
struct BudgetInner {
    limit: usize,
    used: AtomicUsize,
    refused: AtomicUsize,
}

impl Budget {
    /// A budget of `limit` bytes (`usize::MAX` for no limit).
    pub fn new(limit: usize) -> Budget {
        Budget {
            inner: Arc::new(BudgetInner {
                limit,
                used: AtomicUsize::new(0),
                refused: AtomicUsize::new(0),
            }),
        }
    }

    /// The limit in bytes.
    pub fn limit(&self) -> usize {
        self.inner.limit
    }

    /// Bytes reserved now.
    pub fn used(&self) -> usize {
        self.inner.used.load(Ordering::Relaxed)
    }

    /// How many reservations were refused since start.
    pub fn refused(&self) -> usize {
        self.inner.refused.load(Ordering::Relaxed)
    }

    /// An empty reservation, to be grown with [`Reservation::grow_to`].
    pub fn empty(&self) -> Reservation {
        Reservation {
            budget: self.clone(),
            bytes: 0,
        }
    }

    fn take(&self, bytes: usize) -> bool {
        let inner = &*self.inner;
        let mut used = inner.used.load(Ordering::Relaxed);
        loop {
            let Some(next) = used.checked_add(bytes).filter(|&n| n <= inner.limit) else {
                inner.refused.fetch_add(1, Ordering::Relaxed);
                return false;
            };
            match inner
                .used
                .compare_exchange_weak(used, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => used = now,
            }
        }
    }

    fn give(&self, bytes: usize) {
        self.inner.used.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// Bytes held from a [`Budget`] by one connection; returned on drop.
#[derive(Debug)]
pub struct Reservation {
    budget: Budget,
    bytes: usize,
}

impl Reservation {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Holds `bytes` in all: takes the difference if that is more than is held (returning
    /// false, and holding what it held, when the budget cannot cover it), or gives the
    /// excess back if it is less.
    pub fn grow_to(&mut self, bytes: usize) -> bool {
        if bytes > self.bytes {
            if !self.budget.take(bytes - self.bytes) {
                return false;
            }
        } else if bytes < self.bytes {
            // Only a real change touches the shared counter: an atomic read-modify-write
            // of a line every worker writes, which connections would otherwise pay on
            // every turn for nothing.
            self.budget.give(self.bytes - bytes);
        }
        self.bytes = bytes;
        true
    }

    /// Gives everything back.
    pub fn release(&mut self) {
        self.grow_to(0);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_are_bounded_and_returned() {
        let b = Budget::new(100);
        let mut r1 = b.empty();
        let mut r2 = b.empty();
        assert!(r1.grow_to(60));
        assert!(!r2.grow_to(41), "over the limit");
        assert_eq!(r2.bytes(), 0);
        assert!(r2.grow_to(40));
        assert_eq!(b.used(), 100);
        assert!(r1.grow_to(10), "shrinking always succeeds");
        assert_eq!(b.used(), 50);
        drop(r2);
        assert_eq!(b.used(), 10);
        r1.release();
        assert_eq!(b.used(), 0);
        assert_eq!(b.refused(), 1);
    }

    #[test]
    fn overflowing_requests_are_refused() {
        let b = Budget::new(usize::MAX);
        let mut r = b.empty();
        assert!(r.grow_to(usize::MAX - 1));
        let mut r2 = b.empty();
        assert!(!r2.grow_to(2));
    }

    #[test]
    fn concurrent_reservations_never_exceed_the_limit() {
        let b = Budget::new(1000);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let b = b.clone();
                std::thread::spawn(move || {
                    for i in 0..10_000 {
                        let mut r = b.empty();
                        if r.grow_to(100 + i % 300) {
                            assert!(b.used() <= b.limit());
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("no panic");
        }
        assert_eq!(b.used(), 0);
    }
}
