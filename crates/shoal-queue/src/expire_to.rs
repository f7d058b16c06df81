//! Moving expired messages to their queue's `expire_to` (Kestrel's delay and dead-letter
//! queues), durably: a message is written to the target, made as durable as the fsync
//! policy promises, and only then consumed from its source. A crash in between finds it
//! in both and moves it again (at-least-once); none is ever lost. Kestrel adds the copy
//! without an expiry; the target's own `max_age` applies.

use crate::clock::unix_now;
use crate::engine::Engine;
use std::sync::Arc;

impl Engine {
    /// One sweep: for every queue with `expire_to`, moves up to its `max_expire_sweep`
    /// expired messages (0: all). Returns how many were moved. Concurrent calls take
    /// turns.
    pub async fn move_expired(&self) -> u64 {
        let _one_mover = self.expiry_mover().lock().await;
        let mut moved = 0;
        for q in self.queues() {
            let lim = q.limits();
            let Some(target) = lim.expire_to.clone() else {
                // Set aside under an `expire_to` a reload has since removed: dropped now,
                // as any expired message of a queue without one.
                if q.expiring() > 0 {
                    if let Err(e) = q.finish_expired(usize::MAX) {
                        tracing::warn!(queue = q.name(), "writing expiry: {e}");
                    }
                }
                continue;
            };
            let now = unix_now();
            let batch = match q.expired_batch(now, lim.max_expire_sweep) {
                Ok(b) if b.is_empty() => continue,
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(queue = q.name(), "reading expired messages: {e}");
                    continue;
                }
            };
            let to = match self.queue_or_create(&target) {
                Ok(t) if !Arc::ptr_eq(&t, &q) && !t.sync_failed() => t,
                Ok(_) => continue,
                Err(e) => {
                    tracing::warn!(queue = q.name(), expire_to = %target, "cannot move expired messages: {e}");
                    continue;
                }
            };
            let mut copied = 0usize;
            let mut lsn = 0;
            for m in &batch {
                match to.enqueue(m.flags, 0, &m.data, now) {
                    Ok(l) => {
                        lsn = l;
                        copied += 1;
                    }
                    Err(e) => {
                        // Left in the source, set aside, and tried again next sweep.
                        tracing::warn!(queue = q.name(), expire_to = %target, "moving an expired message: {e}");
                        break;
                    }
                }
            }
            if copied == 0 {
                continue;
            }
            if let Err(e) = self.durable(&to, lsn).await {
                // The copies may be lost: keep the originals (moved again next sweep).
                tracing::error!(queue = q.name(), expire_to = %target, "expired copies not durable: {e}");
                continue;
            }
            match q.finish_expired(copied) {
                Ok(l) => {
                    if let Err(e) = self.durable(&q, l).await {
                        tracing::warn!(
                            queue = q.name(),
                            "removal of moved messages not durable: {e}"
                        );
                    }
                }
                Err(e) => tracing::warn!(queue = q.name(), "writing moved messages' removal: {e}"),
            }
            moved += copied as u64;
        }
        moved
    }
}
