//! A ring of provided buffers: memory the kernel picks from when a receive completes.
//!
//! A receive armed on every idle connection would pin one buffer per connection for as
//! long as the connection is idle. With a provided-buffer ring (`IORING_REGISTER_PBUF_RING`)
//! a receive names a buffer *group* instead, and the kernel takes a buffer from the ring
//! only when data arrives; the buffer comes back to the ring once the data has been copied
//! out. So receive memory is bounded by the ring, not by the number of connections.

use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::types::BufRingEntry;
use io_uring::IoUring;

/// The buffers, and the ring of entries the kernel reads them from.
pub(super) struct BufRing {
    /// `count` entries, page-aligned (mmap), shared with the kernel.
    entries: NonNull<BufRingEntry>,
    entries_len: usize,
    /// `count` buffers of `size` bytes, one allocation.
    memory: Box<[u8]>,
    size: usize,
    count: u16,
    /// Our copy of the tail: entries published so far (wrapping).
    tail: u16,
    group: u16,
}

impl BufRing {
    /// Allocates `count` (a power of two) buffers of `size` bytes and registers them with
    /// `ring` as buffer group `group`, all available to the kernel.
    pub(super) fn register(
        ring: &IoUring,
        group: u16,
        count: u16,
        size: usize,
    ) -> io::Result<BufRing> {
        assert!(
            count.is_power_of_two(),
            "buffer ring size must be a power of two"
        );
        let entries_len = usize::from(count) * std::mem::size_of::<BufRingEntry>();
        // SAFETY: an anonymous private mapping; arguments are valid; the result is checked.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                entries_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let Some(entries) = NonNull::new(addr.cast::<BufRingEntry>()) else {
            return Err(io::Error::other("mmap returned null"));
        };
        let mut ring_bufs = BufRing {
            entries,
            entries_len,
            memory: vec![0u8; usize::from(count) * size].into_boxed_slice(),
            size,
            count,
            tail: 0,
            group,
        };
        // SAFETY: `entries` is a page-aligned mapping of `count` entries that stays valid
        // until `Drop` unmaps it, which happens after the ring (and so the registration)
        // is gone: the driver drops its `IoUring` before its `BufRing`.
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(addr as u64, count, group, 0)?
        };
        for bid in 0..count {
            ring_bufs.push(bid);
        }
        ring_bufs.publish();
        Ok(ring_bufs)
    }

    /// The buffer group receives name.
    pub(super) fn group(&self) -> u16 {
        self.group
    }

    /// The first `len` bytes of buffer `bid`, which a completed receive filled.
    pub(super) fn data(&self, bid: u16, len: usize) -> &[u8] {
        let start = usize::from(bid) * self.size;
        self.memory
            .get(start..start + len.min(self.size))
            .unwrap_or_default()
    }

    /// Gives buffer `bid` back to the kernel (after its data was copied out).
    pub(super) fn recycle(&mut self, bid: u16) {
        if bid < self.count {
            self.push(bid);
            self.publish();
        }
    }

    fn push(&mut self, bid: u16) {
        let mask = self.count - 1;
        let i = usize::from(self.tail & mask);
        let addr = self.memory.as_ptr() as u64 + (u64::from(bid) * self.size as u64);
        // SAFETY: `i < count`, inside the mapping; the kernel only reads entries between
        // its head and our published tail, and this one is past the tail until `publish`.
        let entry = unsafe { &mut *self.entries.as_ptr().add(i) };
        entry.set_addr(addr);
        entry.set_len(self.size as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        // SAFETY: the tail field lives in the first entry of the mapping (the kernel's
        // layout), valid for the mapping's life; it is written with release ordering so
        // the kernel sees the entries before the new tail.
        unsafe {
            let tail = BufRingEntry::tail(self.entries.as_ptr()) as *const AtomicU16;
            (*tail).store(self.tail, Ordering::Release);
        }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `register`, unmapped once; the ring that used it is
        // gone (see `register`).
        unsafe {
            libc::munmap(self.entries.as_ptr().cast(), self.entries_len);
        }
    }
}
