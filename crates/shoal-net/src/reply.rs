//! A connection's pending output: reply bytes, with large values referred to in place.
//!
//! A cache's replies are mostly its values. Copying a 100 KB value into an output buffer
//! costs a pass over memory that the kernel then reads again to send it, so a [`Reply`]
//! holds values by reference (any `V: AsRef<[u8]>`, such as shoal-store's pinned
//! `ValueRef`) between the bytes around them, and [`Reply::write_to`] sends the whole with
//! vectored writes, as memcached sends values from item memory with `sendmsg`. Small
//! values are still copied: an iovec entry costs more than copying a few hundred bytes
//! (see [`MIN_REFERENCED_VALUE`]).
//!
//! References are meant to be short-lived: a value held by reference keeps the memory it
//! lives in from being reused (a pinned segment cannot be evicted). So when a write would
//! block on a client that is not reading, everything still unsent is copied into the
//! reply's own buffer and the references are dropped before waiting: a slow client then
//! costs the same bounded buffer as before, and never holds a cache's memory hostage.

use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::Poll;

use tokio::io::AsyncWrite;

/// Values shorter than this are copied into the reply rather than referred to: below it,
/// the extra iovec entry (and pinning the value's memory) costs more than the copy. The
/// default of [`crate::connection::Config::min_referenced_value`], chosen by measurement
/// (docs/benchmarks/2026-11-25-data-path.md).
pub const MIN_REFERENCED_VALUE: usize = 4096;

/// Most iovec entries passed to one vectored write (Linux accepts 1024; a reply at the
/// high-water mark with values of [`MIN_REFERENCED_VALUE`] bytes needs about 130).
const MAX_IOVECS: usize = 128;
/// Iovecs enough for a reply that refers to at most three values (each may need the
/// bytes before it and itself, and the reply its tail).
const SHORT_IOVECS: usize = 8;

/// A reply that cannot hold values: for protocols with nothing to refer to in place.
#[derive(Debug)]
pub enum NoValue {}

impl AsRef<[u8]> for NoValue {
    fn as_ref(&self) -> &[u8] {
        match *self {}
    }
}

/// Pending output: bytes, with values of type `V` referred to at positions in between.
#[derive(Debug)]
pub struct Reply<V> {
    bytes: Vec<u8>,
    /// Values in output order, each with the length of `bytes` when it was pushed: it goes
    /// out after `bytes[..at]` and before `bytes[at..]`.
    values: Vec<(usize, V)>,
    /// Sum of the values' lengths.
    value_bytes: usize,
    /// Values at least this long are referred to (`usize::MAX`: none, as when the stream
    /// does not write iovecs in one call).
    min_referenced: usize,
    /// Where unsent output is assembled when a write would block (kept for reuse).
    spare: Vec<u8>,
}

impl<V: AsRef<[u8]>> Reply<V> {
    /// An empty reply with room for `capacity` bytes that refers to values of
    /// `min_referenced` bytes or more and copies shorter ones (`usize::MAX`: copies every
    /// value; use it when the stream does not take vectored writes).
    pub fn new(capacity: usize, min_referenced: usize) -> Reply<V> {
        Reply {
            bytes: Vec::with_capacity(capacity),
            values: Vec::new(),
            value_bytes: 0,
            min_referenced,
            spare: Vec::new(),
        }
    }

    /// The reply's own bytes, to append to. Values pushed so far keep their place: bytes
    /// appended now go after them.
    #[inline]
    pub fn bytes(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }

    /// Total bytes pending: the reply's own and its values'.
    #[inline]
    pub fn len(&self) -> usize {
        self.bytes.len() + self.value_bytes
    }

    /// Whether nothing is pending.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether a value of `len` bytes would be referred to rather than copied: the caller
    /// then takes a reference ([`Reply::push_value`]) instead of copying the value with
    /// [`Reply::bytes`].
    #[inline]
    pub fn refers(&self, len: usize) -> bool {
        len >= self.min_referenced
    }

    /// Appends a value by reference (or copies it, if this reply copies values of its
    /// length).
    pub fn push_value(&mut self, value: V) {
        let len = value.as_ref().len();
        if !self.refers(len) {
            self.bytes.extend_from_slice(value.as_ref());
            return;
        }
        self.value_bytes += len;
        self.values.push((self.bytes.len(), value));
    }

    /// Values held by reference.
    pub fn referenced(&self) -> usize {
        self.values.len()
    }

    /// Copies the values held by reference into the reply's own bytes and drops the
    /// references: for when the reply must wait for something other than the client
    /// (and so must not keep what it refers to pinned meanwhile).
    pub fn copy_values(&mut self) {
        if !self.values.is_empty() {
            self.own_from(0);
        }
    }

    /// Drops everything pending.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.values.clear();
        self.value_bytes = 0;
    }

    /// The pending output from logical offset `from` as iovecs, at most `iov.len()` of
    /// them; returns how many were filled.
    fn slices<'a>(&'a self, from: usize, iov: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        let mut skip = from;
        let mut start = 0usize;
        let mut push = |part: &'a [u8], skip: &mut usize, n: &mut usize| -> bool {
            if *skip >= part.len() {
                *skip -= part.len();
                return true;
            }
            let Some(slot) = iov.get_mut(*n) else {
                return false;
            };
            *slot = IoSlice::new(part.get(*skip..).unwrap_or_default());
            *skip = 0;
            *n += 1;
            true
        };
        for (at, v) in &self.values {
            // `at` never exceeds the bytes' length (bytes are only appended while values
            // are held), but a clamp keeps a misuse from panicking.
            let at = (*at).clamp(start, self.bytes.len());
            let before = self.bytes.get(start..at).unwrap_or_default();
            if !before.is_empty() && !push(before, &mut skip, &mut n) {
                return n;
            }
            let value = v.as_ref();
            if !value.is_empty() && !push(value, &mut skip, &mut n) {
                return n;
            }
            start = at;
        }
        let rest = self.bytes.get(start..).unwrap_or_default();
        if !rest.is_empty() {
            push(rest, &mut skip, &mut n);
        }
        n
    }

    /// Makes the output from logical offset `from` on the reply's own bytes, copying the
    /// values it refers to and dropping the references.
    fn own_from(&mut self, from: usize) {
        let mut out = std::mem::take(&mut self.spare);
        out.clear();
        out.reserve(self.len().saturating_sub(from));
        let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
        let mut at = from;
        loop {
            let n = self.slices(at, &mut iov);
            if n == 0 {
                break;
            }
            for s in iov.iter().take(n) {
                out.extend_from_slice(s);
                at += s.len();
            }
        }
        self.spare = std::mem::replace(&mut self.bytes, out);
        self.spare.clear();
        self.values.clear();
        self.value_bytes = 0;
    }

    /// Writes everything pending to `w` and empties the reply; returns the bytes written.
    /// Values are written from where they are, with vectored writes; if the writer cannot
    /// take everything at once, what is left is copied into the reply's own buffer (and
    /// the references dropped) before waiting for it.
    pub async fn write_to<W: AsyncWrite + Unpin + ?Sized>(
        &mut self,
        w: &mut W,
    ) -> io::Result<usize> {
        let total = self.len();
        let mut sent = 0usize;
        // Offset in the current layout (which `own_from` rebases to 0).
        let mut at = 0usize;
        let result = poll_fn(|cx| {
            while sent < total {
                if self.values.is_empty() {
                    // Only the reply's own bytes (every reply at depth 1 with small
                    // values): one plain write, without building an iovec array, whose
                    // setup alone cost more than the rest of the write path.
                    let rest = self.bytes.get(at..).unwrap_or_default();
                    match Pin::new(&mut *w).poll_write(cx, rest) {
                        Poll::Ready(Ok(0)) => {
                            return Poll::Ready(Err(io::ErrorKind::WriteZero.into()))
                        }
                        Poll::Ready(Ok(k)) => {
                            sent += k;
                            at += k;
                            continue;
                        }
                        Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                        Poll::Pending => return Poll::Pending,
                    }
                }
                // A reply referring to a few values (a single get of a large value: its
                // header, the value, its `\r\n`) fits a short array; only a multi-get's
                // pays for setting up the full one.
                let mut short = [IoSlice::new(&[]); SHORT_IOVECS];
                let mut full;
                let iov: &mut [IoSlice<'_>] = if self.values.len() * 2 < SHORT_IOVECS {
                    &mut short
                } else {
                    full = [IoSlice::new(&[]); MAX_IOVECS];
                    &mut full
                };
                let n = self.slices(at, iov);
                let poll = if n == 1 {
                    Pin::new(&mut *w).poll_write(cx, &iov[0])
                } else {
                    Pin::new(&mut *w).poll_write_vectored(cx, iov.get(..n).unwrap_or_default())
                };
                match poll {
                    Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                    Poll::Ready(Ok(k)) => {
                        sent += k;
                        at += k;
                    }
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => {
                        if !self.values.is_empty() {
                            // The client is not keeping up: hold no references while
                            // waiting for it.
                            self.own_from(at);
                            at = 0;
                        }
                        return Poll::Pending;
                    }
                }
            }
            Poll::Ready(Ok(total))
        })
        .await;
        self.clear();
        result
    }

    /// Gives back memory after a very large reply, keeping `keep` bytes of capacity.
    pub fn shrink_to(&mut self, keep: usize) {
        self.bytes.shrink_to(keep);
        self.spare = Vec::new();
        self.values.shrink_to(64);
    }

    /// Capacity of the reply's own buffer.
    pub fn capacity(&self) -> usize {
        self.bytes.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A value that counts how many of its kind are alive.
    struct Counted(Vec<u8>, Arc<AtomicUsize>);

    impl Counted {
        fn new(v: Vec<u8>, live: &Arc<AtomicUsize>) -> Counted {
            live.fetch_add(1, Ordering::Relaxed);
            Counted(v, live.clone())
        }
    }

    impl AsRef<[u8]> for Counted {
        fn as_ref(&self) -> &[u8] {
            &self.0
        }
    }

    impl Drop for Counted {
        fn drop(&mut self) {
            self.1.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn big(b: u8) -> Vec<u8> {
        vec![b; MIN_REFERENCED_VALUE + 10]
    }

    fn expected() -> Vec<u8> {
        let mut e = b"VALUE a 0 4106\r\n".to_vec();
        e.extend_from_slice(&big(b'a'));
        e.extend_from_slice(b"\r\nVALUE b 0 3\r\nbbb\r\nVALUE c 0 4106\r\n");
        e.extend_from_slice(&big(b'c'));
        e.extend_from_slice(b"\r\nEND\r\n");
        e
    }

    fn build(live: &Arc<AtomicUsize>, vectored: bool) -> Reply<Counted> {
        let mut r = Reply::new(
            64,
            if vectored {
                MIN_REFERENCED_VALUE
            } else {
                usize::MAX
            },
        );
        r.bytes().extend_from_slice(b"VALUE a 0 4106\r\n");
        r.push_value(Counted::new(big(b'a'), live));
        r.bytes().extend_from_slice(b"\r\nVALUE b 0 3\r\n");
        r.push_value(Counted::new(b"bbb".to_vec(), live));
        r.bytes().extend_from_slice(b"\r\nVALUE c 0 4106\r\n");
        r.push_value(Counted::new(big(b'c'), live));
        r.bytes().extend_from_slice(b"\r\nEND\r\n");
        r
    }

    #[test]
    fn large_values_are_referred_to_and_small_ones_copied() {
        let live = Arc::new(AtomicUsize::new(0));
        let r = build(&live, true);
        assert_eq!(r.referenced(), 2);
        assert_eq!(
            live.load(Ordering::Relaxed),
            2,
            "the small value was copied and dropped"
        );
        assert_eq!(r.len(), expected().len());
        let copying = build(&live, false);
        assert_eq!(copying.referenced(), 0);
        assert_eq!(copying.bytes.as_slice(), expected().as_slice());
    }

    #[tokio::test]
    async fn a_reply_is_written_in_order() {
        let live = Arc::new(AtomicUsize::new(0));
        let mut r = build(&live, true);
        let mut out: Vec<u8> = Vec::new();
        let n = r.write_to(&mut out).await.unwrap();
        assert_eq!(n, expected().len());
        assert_eq!(out, expected());
        assert!(r.is_empty());
        assert_eq!(
            live.load(Ordering::Relaxed),
            0,
            "references dropped once written"
        );
    }

    #[test]
    fn owning_from_any_offset_keeps_the_rest_exactly() {
        let live = Arc::new(AtomicUsize::new(0));
        let all = expected();
        for from in [
            0,
            1,
            15,
            16,
            17,
            4000,
            4122,
            4123,
            4140,
            all.len() - 1,
            all.len(),
        ] {
            let mut r = build(&live, true);
            r.own_from(from);
            assert_eq!(r.referenced(), 0);
            assert_eq!(r.bytes.as_slice(), &all[from..], "from {from}");
            assert_eq!(live.load(Ordering::Relaxed), 0);
        }
    }

    #[tokio::test]
    async fn a_stalled_write_drops_its_references_before_waiting() {
        let live = Arc::new(AtomicUsize::new(0));
        let (mut client, mut server) = tokio::io::duplex(1000);
        let mut r = build(&live, true);
        let writer = async {
            let n = r.write_to(&mut server).await.unwrap();
            (n, r)
        };
        let reader = async {
            // Let the writer fill the pipe and stall before reading anything.
            tokio::task::yield_now().await;
            assert_eq!(
                live.load(Ordering::Relaxed),
                0,
                "references held while stalled"
            );
            let mut got = vec![0u8; expected().len()];
            tokio::io::AsyncReadExt::read_exact(&mut client, &mut got)
                .await
                .unwrap();
            got
        };
        let ((n, r), got) = tokio::join!(writer, reader);
        assert_eq!(n, expected().len());
        assert_eq!(got, expected());
        assert!(r.is_empty());
    }
}
