//! Signals that arrive before a daemon listens for them.
//!
//! The daemons log `listening on` (what scripts and supervisors wait for), and may spend
//! a while restoring state, before their accept loop installs tokio's handlers. A signal
//! in between would take its default action (killing the process where a graceful stop
//! was asked for) or, where the parent left it ignored, vanish and leave the server
//! running for good. [`catch_early`] records such signals instead, and the accept loop
//! asks [`caught_early`] once it listens. tokio's signal registry keeps calling a handler
//! installed before its own, so nothing falls in between.

use std::sync::atomic::{AtomicU64, Ordering};

/// One bit per signal number caught since [`catch_early`].
static CAUGHT: AtomicU64 = AtomicU64::new(0);

/// The signals that stop a daemon: what [`crate::Acceptor::next`] reports as
/// [`crate::Event::Signal`].
pub const STOP_SIGNALS: [libc::c_int; 2] = [libc::SIGTERM, libc::SIGINT];

extern "C" fn note(sig: libc::c_int) {
    // Only a lock-free atomic update: async-signal-safe.
    if let Some(bit) = bit(sig) {
        CAUGHT.fetch_or(bit, Ordering::Relaxed);
    }
}

fn bit(sig: libc::c_int) -> Option<u64> {
    u32::try_from(sig)
        .ok()
        .filter(|&s| s < 64)
        .map(|s| 1u64 << s)
}

/// Records `signals` from now on instead of leaving them to their current disposition.
/// Call first thing in `main`.
pub fn catch_early(signals: &[libc::c_int]) {
    for &sig in signals {
        // SAFETY: installs a handler that only performs an atomic update.
        unsafe {
            libc::signal(
                sig,
                note as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
}

/// Whether `sig` arrived since [`catch_early`] was asked to catch it.
pub fn caught_early(sig: libc::c_int) -> bool {
    bit(sig).is_some_and(|b| CAUGHT.load(Ordering::Relaxed) & b != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caught_signal_is_remembered_and_others_are_not() {
        catch_early(&[libc::SIGUSR2]);
        assert!(!caught_early(libc::SIGUSR2));
        // SAFETY: raise(3) on this process; the handler only sets a bit.
        unsafe { libc::raise(libc::SIGUSR2) };
        assert!(caught_early(libc::SIGUSR2));
        assert!(!caught_early(libc::SIGWINCH));
        assert!(!caught_early(-1) && !caught_early(99));
    }
}
