//! What the engine-level tests share: an engine config with queue config lines, a set
//! through the fanout path, and a drain.

#![allow(dead_code)]

use shoal_queue::queue_config;
use shoal_queue::{unix_now, Engine, EngineConfig, FsyncPolicy, QueueError, Take};
use std::path::Path;

/// An `fsync always` engine config for `dir` with the queue config file's `lines`.
pub fn cfg(dir: &Path, lines: &str) -> EngineConfig {
    let mut c = EngineConfig::new(dir);
    c.fsync = FsyncPolicy::Always;
    c.queue_limits = queue_config::parse(lines).expect("config parses");
    c
}

/// Stores `s` in queue `q` (and its fanout children), expiring at `exp` (0: never).
pub fn set(e: &Engine, q: &str, s: &str, exp: u32) -> Result<(), QueueError> {
    let q = e.queue_or_create(q)?;
    e.enqueue_fanout(&q, 0, exp, s.as_bytes(), unix_now())
        .map(drop)
}

/// Every message of queue `q`, consumed, in order (none if the queue does not exist).
pub fn drain(e: &Engine, q: &str) -> Vec<String> {
    let Some(q) = e.queue(q) else {
        return Vec::new();
    };
    let mut v = Vec::new();
    while let Some(d) = q.dequeue(Take::Remove, unix_now()).expect("dequeue") {
        v.push(String::from_utf8(d.data.to_vec()).expect("utf8"));
    }
    q.commit().expect("commit");
    v
}
