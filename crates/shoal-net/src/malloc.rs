//! Keeping freed buffer memory out of the process's resident set.
//!
//! glibc's malloc serves allocations of 128 KiB or more with `mmap` and returns them to
//! the kernel on free, but by default it raises that threshold each time such a block is
//! freed (up to 32 MiB), after which large buffers come from its heaps and stay resident
//! once freed. A daemon that buffers values of every size from 10 B to 1 MB for a while
//! and then lets them go (every request buffer and reply over the connection's fixed
//! allowance) therefore grows well past its configured memory and never shrinks: a
//! 10-minute soak of shoald at `-m 64` crept to 147 MB. Fixing the threshold keeps those
//! buffers mapped only while they are in use.

/// Large allocations at or above this go straight to `mmap` and back to the kernel.
pub const MMAP_THRESHOLD: usize = 128 * 1024;

/// Tunes the allocator for a long-running daemon; call once at startup, before threads.
/// A no-op where the C library is not glibc.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only changes allocator parameters; called before other threads.
        let ok = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as libc::c_int) };
        if ok != 1 {
            tracing::warn!("could not fix the malloc mmap threshold");
        }
    }
}
