//! Error types of the engine.

use std::io;
use std::path::PathBuf;

/// Why an operation on a queue failed. Nothing already stored is lost by any of these.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The name is not a valid queue name (see [`crate::validate_name`]).
    #[error("bad queue name")]
    BadName,
    /// The queue is at a limit and its policy is to reject.
    #[error("queue is full")]
    Full,
    /// The payload is larger than the configured item size.
    #[error("object too large")]
    TooLarge,
    /// Writing to the log failed (e.g. the disk is full); the message was not stored.
    #[error("write failed: {0}")]
    Write(#[source] io::Error),
    /// Reading a message back from its segment failed; the message stays queued.
    #[error("read failed: {0}")]
    Read(#[source] io::Error),
    /// fsync failed; durability of recent writes is unknown, so nothing waiting on it is
    /// acknowledged.
    #[error("fsync failed")]
    SyncFailed,
    /// The queue's directory could not be recovered at startup; it is left untouched
    /// for the operator and refused until then.
    #[error("queue unavailable")]
    Unavailable,
    /// The connection already holds an open read on this queue.
    #[error("read already open")]
    AlreadyOpen,
}

/// Why the engine could not open its data directory.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The data directory could not be created or read.
    #[error("data directory {path}: {source}")]
    DataDir {
        /// The directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Another process holds the data directory's lock.
    #[error("data directory {0} is in use by another process")]
    Locked(PathBuf),
    /// The background fsync thread could not start.
    #[error("starting the sync thread: {0}")]
    Thread(#[source] io::Error),
}
