//! Segment memory reserved in one anonymous mapping, backed by transparent huge pages.
//!
//! Every lookup touches an item and every hit copies its value out of segment memory, at
//! addresses spread over the whole cache. With 4 KiB pages a cache of a few hundred
//! megabytes far outgrows the TLB, so most of those touches also walk the page tables (two
//! levels of them under virtualisation); 2 MiB pages cover 512 times as much per TLB entry.
//! memcached gets huge pages only with `-L`, which allocates all of `-m` up front. Here,
//! when asked for (`-L`, or shoald's `-o hugepages`), the whole address range of the store
//! is reserved once (no memory is committed until a segment is written), aligned to 2 MiB
//! and advised for huge pages, so segments get them as they are first used and RSS still
//! follows what the cache holds; `-L` additionally touches the memory limit's worth of
//! segments at startup, as memcached does. It is opt-in because on the project's test VM
//! it made no measurable difference for caches up to 100 MB.

use std::io;

/// The huge page size transparent huge pages use on x86-64 and arm64 (with 4 KiB base pages).
const HUGE_PAGE: usize = 2 << 20;

/// An anonymous, private, reserve-only mapping of `len` bytes at a 2 MiB boundary.
/// Unmapped on drop.
pub(crate) struct AnonRegion {
    /// The whole mapping as the kernel returned it (for `munmap`).
    mapping: *mut u8,
    mapping_len: usize,
    /// The first 2 MiB boundary in it: where segment 0 starts.
    base: *mut u8,
    len: usize,
}

impl AnonRegion {
    /// Reserves `len` bytes and advises huge pages for them. Fails where the address space
    /// cannot be reserved without committing it (strict overcommit, a low `ulimit -v`); the
    /// caller then allocates segments one by one instead.
    pub(crate) fn reserve(len: usize) -> io::Result<AnonRegion> {
        let mapping_len = len
            .checked_add(HUGE_PAGE)
            .ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
        // SAFETY: a fresh private anonymous mapping; nothing aliases it, and its lifetime
        // is that of the returned value.
        let mapping = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapping_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if mapping == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mapping = mapping.cast::<u8>();
        let skip = (HUGE_PAGE - (mapping as usize) % HUGE_PAGE) % HUGE_PAGE;
        // SAFETY: `skip` < HUGE_PAGE, and the mapping is HUGE_PAGE longer than `len`.
        let base = unsafe { mapping.add(skip) };
        // Advice only: without transparent huge pages (or with them off) the range is
        // ordinary memory, which is still correct.
        // SAFETY: the range lies within our mapping.
        unsafe { libc::madvise(base.cast(), len, libc::MADV_HUGEPAGE) };
        Ok(AnonRegion {
            mapping,
            mapping_len,
            base,
            len,
        })
    }

    /// The start of the reserved range (2 MiB aligned).
    pub(crate) fn base(&self) -> *mut u8 {
        self.base
    }

    /// Bytes reserved from [`AnonRegion::base`].
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Writes to every page of the first `len` bytes so that they are resident now rather
    /// than at first use (memcached's `-L`, which allocates the whole cache at startup).
    pub(crate) fn prefault(&self, len: usize) {
        let end = len.min(self.len);
        let mut at = 0;
        while at < end {
            // SAFETY: in range; the memory is ours and no segment in this range has been
            // handed out yet, so nothing reads it concurrently. A volatile write of zero
            // over fresh (zero) memory commits the page without changing its contents.
            unsafe { self.base.add(at).write_volatile(0) };
            at += 4096;
        }
    }

    /// Gives the pages of `[off, off + len)` back to the kernel; they read as zero and
    /// cost no memory until written again.
    pub(crate) fn release(&self, off: usize, len: usize) {
        // SAFETY: the caller passes a range of a segment it owns within the region; no
        // reader can hold a reference into a segment whose memory is released.
        unsafe { libc::madvise(self.base.add(off).cast(), len, libc::MADV_DONTNEED) };
    }
}

impl Drop for AnonRegion {
    fn drop(&mut self) {
        // SAFETY: mapped in `reserve` with this address and length; no segment pointer
        // outlives the `Segments` that owns the region.
        unsafe { libc::munmap(self.mapping.cast(), self.mapping_len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_memory_is_aligned_zeroed_writable_and_releasable() {
        let r = AnonRegion::reserve(8 << 20).expect("reserve");
        assert_eq!(r.base() as usize % HUGE_PAGE, 0);
        assert_eq!(r.len(), 8 << 20);
        r.prefault(2 << 20);
        // SAFETY: within the region, which this test owns.
        unsafe {
            assert_eq!(*r.base().add(5 << 20), 0);
            r.base().add(5 << 20).write(7);
            assert_eq!(*r.base().add(5 << 20), 7);
        }
        r.release(4 << 20, 2 << 20);
        // SAFETY: as above; released pages read as zero.
        unsafe { assert_eq!(*r.base().add(5 << 20), 0) };
    }
}
