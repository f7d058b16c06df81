//! Timers that work on whichever loop the thread runs: this crate's
//! [`crate::event_loop`] or tokio's runtime.
//!
//! Connection code (idle timeouts, penalty delays, handshake limits) is shared by worker
//! threads of both kinds; tokio's own timers would panic on an event-loop thread, so the
//! daemons use these.

use std::future::Future;
use std::time::Duration;

use crate::event_loop;

/// The time given to [`timeout`] ran out first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("deadline has elapsed")]
pub struct Elapsed;

/// Completes after `duration`.
pub async fn sleep(duration: Duration) {
    if event_loop::is_current() {
        event_loop::sleep(duration).await
    } else {
        tokio::time::sleep(duration).await
    }
}

/// Runs `future` for at most `duration`: its output, or [`Elapsed`] (the future is then
/// dropped). A future ready at once wins over a zero duration.
pub async fn timeout<F: Future>(duration: Duration, future: F) -> Result<F::Output, Elapsed> {
    if event_loop::is_current() {
        let timer = event_loop::sleep(duration);
        tokio::select! {
            biased;
            v = future => Ok(v),
            _ = timer => Err(Elapsed),
        }
    } else {
        tokio::time::timeout(duration, future)
            .await
            .map_err(|_| Elapsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn race() {
        let quick = timeout(Duration::from_secs(60), async { 5 }).await;
        assert_eq!(quick, Ok(5));
        let slow = timeout(Duration::from_millis(10), std::future::pending::<()>()).await;
        assert_eq!(slow, Err(Elapsed));
        let before = std::time::Instant::now();
        sleep(Duration::from_millis(20)).await;
        assert!(before.elapsed() >= Duration::from_millis(20));
    }

    #[test]
    fn timers_work_on_the_event_loop_and_on_tokio() {
        event_loop::EventLoop::new().expect("loop").block_on(race());
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime")
            .block_on(race());
    }
}
