//! Kestrel's aliases: a name in the queue config file (`<alias> destination_queues=a,b`)
//! that is no queue: a set to it is written to each destination queue (directly, not to
//! the destinations' fanout children, as Kestrel does).

use crate::engine::fanout::Stored;
use crate::engine::Engine;
use crate::error::QueueError;

impl Engine {
    /// The destination queues of `name`, if the queue config makes it an alias.
    pub fn alias_destinations(&self, name: &str) -> Option<Vec<String>> {
        self.destinations_of(name)
    }

    /// Sets a message on each of `destinations`. Kestrel's result: `Ok` when every
    /// destination stored it; otherwise the first refusal (`Full`, `TooLarge`, a write
    /// error), the others' writes being kept (as Kestrel keeps them).
    pub fn enqueue_alias(
        &self,
        destinations: &[String],
        flags: u32,
        exp: u32,
        payload: &[u8],
        now: u32,
    ) -> (Stored, Result<(), QueueError>) {
        let mut stored = Stored::default();
        let mut result = Ok(());
        for name in destinations {
            let r = self.queue_or_create(name).and_then(|q| {
                if q.sync_failed() {
                    return Err(QueueError::SyncFailed);
                }
                let lsn = q.enqueue(flags, exp, payload, now)?;
                stored.writes.push((q, lsn));
                Ok(())
            });
            if let Err(e) = r {
                tracing::warn!(queue = %name, "alias copy not stored: {e}");
                if result.is_ok() {
                    result = Err(e);
                }
            }
        }
        (stored, result)
    }
}
