//! shoal-queue: the durable queue engine behind `shoal-queued`.
//!
//! Each queue is an append-only log split into segment files of variable-length,
//! CRC32C-checksummed records. Consuming a message appends a small ack record; a segment
//! is deleted as soon as every message in it has been consumed, so disk use follows the
//! queue's length rather than its history. Recovery replays the log, cuts a torn tail and
//! quarantines a corrupt segment, keeping every acknowledged message.
//!
//! Guarantees, by [`FsyncPolicy`]: an acknowledged enqueue (and a committed dequeue)
//! survives the process being killed under every policy, and survives power loss under
//! `Always`; under `Every(d)` power loss can lose about the last `d`.

#![warn(missing_docs)]

mod alias;
mod clock;
pub mod config;
mod crc;
pub mod engine;
pub mod error;
mod expire_to;
mod fsync;
pub mod name;
pub mod queue;
pub mod record;
pub mod segment;

pub use clock::unix_now;
pub use config::queue_config;
pub use config::{EngineConfig, FsyncPolicy, FullPolicy, QueueLimits, WriteFault};
pub use crc::crc32c;
pub use engine::Engine;
pub use error::{EngineError, QueueError};
pub use name::{validate_name, MAX_NAME_LEN};
pub use queue::{
    expiry_from_exptime, expiry_from_kestrel_exptime, Delivery, Queue, QueueStats, RecoveryReport,
    SyncMetrics, Take, Waiting,
};
pub use queue_config::{QueueConfigError, QueueOverrides};
