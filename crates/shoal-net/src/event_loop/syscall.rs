//! The loop's per-request system calls (`recvfrom`, `sendto`, `sendmsg`, `epoll_pwait`),
//! made in place rather than through libc.
//!
//! Why: libc's wrappers are thread-cancellation points, whose bookkeeping around every
//! call cost more instructions than the call itself (shoald never cancels threads), and
//! libc's generic `syscall` is one more call level. A return made right after the kernel
//! hands back control is mispredicted (the kernel's own calls have overwritten the CPU's
//! return-address predictions), so each level between the event loop and the
//! instruction `syscall` costs a pipeline refill per call. At depth 1 (about three calls
//! per request) perf put 14-49% of the samples of each function on that path on the
//! instruction after its call into the next level; with libc's wrapper gone and two
//! levels folded (2026-11-29), user time per request fell to 0.87x. On x86_64 the
//! instruction is emitted inline; elsewhere libc's `syscall` is used. Either way a call
//! returns what the kernel does: the result, or `-errno`.

#[cfg(not(target_arch = "x86_64"))]
use std::io;

#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn call6(n: libc::c_long, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the caller passes what system call `n` expects. The kernel clobbers rcx
    // and r11 only, and may read or write the memory the arguments point at (so no
    // `nomem`/`readonly`).
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") n as isize => ret,
            in("rdi") a[0],
            in("rsi") a[1],
            in("rdx") a[2],
            in("r10") a[3],
            in("r8") a[4],
            in("r9") a[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
unsafe fn call6(n: libc::c_long, a: [usize; 6]) -> isize {
    // SAFETY: as the caller guarantees for the inline form.
    let r = unsafe { libc::syscall(n, a[0], a[1], a[2], a[3], a[4], a[5]) };
    if r < 0 {
        -(io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO) as isize)
    } else {
        r as isize
    }
}

/// `recvfrom(fd, buf, len, 0, NULL, NULL)`.
///
/// # Safety
/// `buf` must be valid for writes of `len` bytes.
#[inline(always)]
pub(super) unsafe fn recv(fd: libc::c_int, buf: *mut u8, len: usize) -> isize {
    // SAFETY: the caller's guarantee; the address arguments are null.
    unsafe {
        call6(
            libc::SYS_recvfrom,
            [fd as usize, buf as usize, len, 0, 0, 0],
        )
    }
}

/// `sendto(fd, buf, len, MSG_NOSIGNAL, NULL, 0)`.
///
/// # Safety
/// `buf` must be valid for reads of `len` bytes.
#[inline(always)]
pub(super) unsafe fn send(fd: libc::c_int, buf: *const u8, len: usize) -> isize {
    // SAFETY: the caller's guarantee; no address.
    unsafe {
        call6(
            libc::SYS_sendto,
            [
                fd as usize,
                buf as usize,
                len,
                libc::MSG_NOSIGNAL as usize,
                0,
                0,
            ],
        )
    }
}

/// `sendmsg(fd, msg, MSG_NOSIGNAL)`.
///
/// # Safety
/// `msg` must point at a valid `msghdr` whose buffers are readable.
#[inline(always)]
pub(super) unsafe fn sendmsg(fd: libc::c_int, msg: *const libc::msghdr) -> isize {
    // SAFETY: the caller's guarantee.
    unsafe {
        call6(
            libc::SYS_sendmsg,
            [
                fd as usize,
                msg as usize,
                libc::MSG_NOSIGNAL as usize,
                0,
                0,
                0,
            ],
        )
    }
}

/// `epoll_pwait(epfd, events, max, timeout, NULL, 0)`: `epoll_wait`, which aarch64
/// lacks under that name.
///
/// # Safety
/// `events` must be valid for writes of `max` entries.
#[inline(always)]
pub(super) unsafe fn epoll_wait(
    epfd: libc::c_int,
    events: *mut libc::epoll_event,
    max: libc::c_int,
    timeout: libc::c_int,
) -> isize {
    // SAFETY: the caller's guarantee; no signal mask.
    unsafe {
        call6(
            libc::SYS_epoll_pwait,
            [
                epfd as usize,
                events as usize,
                max as usize,
                timeout as isize as usize,
                0,
                0,
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn calls_return_counts_and_negated_errors() {
        let (a, b) = UnixStream::pair().expect("socketpair");
        // SAFETY: live buffers of the lengths given.
        unsafe {
            assert_eq!(send(a.as_raw_fd(), b"hello".as_ptr(), 5), 5);
            let mut buf = [0u8; 16];
            assert_eq!(recv(b.as_raw_fd(), buf.as_mut_ptr(), buf.len()), 5);
            assert_eq!(&buf[..5], b"hello");
            b.set_nonblocking(true).expect("nonblocking");
            let r = recv(b.as_raw_fd(), buf.as_mut_ptr(), buf.len());
            assert_eq!(r, -(libc::EAGAIN as isize));
            assert_eq!(send(-1, b"x".as_ptr(), 1), -(libc::EBADF as isize));
        }
    }
}
