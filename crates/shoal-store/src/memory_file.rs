//! Segment memory in a file (memcached's `-e`): the shared mapping segments live in, and
//! the open, locked file behind it.

use std::fs::File;
use std::path::PathBuf;

/// A shared, writable mapping of a file that holds segment memory (memcached's `-e`):
/// segment `i` lives at byte `i * seg_size`. Unmapped on drop.
pub struct MemoryMap {
    pub(crate) base: *mut u8,
    pub(crate) len: usize,
    /// The file, to reserve its blocks segment by segment ([`reserve`](Self::reserve)).
    file: File,
}

impl MemoryMap {
    /// Maps `len` bytes of `file` (already sized by the caller) shared and writable.
    pub fn map(file: &std::fs::File, len: usize) -> std::io::Result<MemoryMap> {
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh mapping of a file we hold open; nothing else in this process
        // aliases it, and its lifetime is tied to the returned value.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(MemoryMap {
            base: base.cast(),
            len,
            file: file.try_clone()?,
        })
    }

    /// Allocates the file's blocks for `len` bytes at `offset` before they are first
    /// written. The file is sparse, and a write through the mapping to a hole the
    /// filesystem has no room for is not an error but a `SIGBUS` that kills the process
    /// (it did, on a full tmpfs): reserving each segment before use turns that into an
    /// error the store handles as memory it cannot have. A filesystem without
    /// `fallocate` is written as before.
    pub fn reserve(&self, offset: usize, len: usize) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        let (Ok(off), Ok(n)) = (i64::try_from(offset), i64::try_from(len)) else {
            return Err(std::io::ErrorKind::InvalidInput.into());
        };
        loop {
            // SAFETY: fallocate on a descriptor we own, with in-range arguments.
            if unsafe { libc::fallocate(self.file.as_raw_fd(), 0, off, n) } == 0 {
                return Ok(());
            }
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EOPNOTSUPP) => return Ok(()),
                _ => return Err(e),
            }
        }
    }

    /// Writes dirty pages back to the file (a no-op cost on tmpfs, where memory files
    /// belong; needed for a file on disk to hold what the restart metadata describes).
    pub fn sync(&self) -> std::io::Result<()> {
        // SAFETY: the range is exactly our mapping.
        if unsafe { libc::msync(self.base.cast(), self.len, libc::MS_SYNC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for MemoryMap {
    fn drop(&mut self) {
        // SAFETY: mapped in `map` with this length; no segment pointer outlives the
        // `Segments` that owns this mapping.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// The memory file a store's segments live in, held open (and locked) for its lifetime.
pub(crate) struct MemoryFile {
    pub(crate) path: PathBuf,
    /// Holds the `flock` that keeps a second process off the file.
    pub(crate) _file: File,
    /// Settings the next process must match, in order.
    pub(crate) settings: Vec<(String, String)>,
}
