//! Segment memory in a file (memcached's `-e`): the shared mapping segments live in, and
//! the open, locked file behind it.

use std::fs::File;
use std::path::PathBuf;

/// A shared, writable mapping of a file that holds segment memory (memcached's `-e`):
/// segment `i` lives at byte `i * seg_size`. Unmapped on drop.
pub struct MemoryMap {
    pub(crate) base: *mut u8,
    pub(crate) len: usize,
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
        })
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
