//! Fanout queues (Kestrel's): a queue named `parent+child` receives a copy of every message
//! set to `parent` from the moment it exists. A child is an ordinary queue with its own
//! directory, created with the child so that it survives a restart even before its first
//! message; the parent -> children relation is rebuilt at startup from the directory
//! names. Deleting a child removes it from its parent's fanout.

use crate::engine::Engine;
use crate::error::QueueError;
use crate::queue::Queue;
use crate::queue_config::fanout_parent;
use parking_lot::RwLock;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// Each parent's children, by name.
#[derive(Debug, Default)]
pub(crate) struct Fanout {
    children: RwLock<HashMap<String, BTreeSet<String>>>,
}

impl Fanout {
    /// Records `name` as a child of its parent, if it is a fanout child.
    pub(crate) fn add(&self, name: &str) {
        if let Some(p) = fanout_parent(name) {
            self.children
                .write()
                .entry(p.to_string())
                .or_default()
                .insert(name.to_string());
        }
    }

    /// Forgets the child `name`.
    pub(crate) fn remove(&self, name: &str) {
        if let Some(p) = fanout_parent(name) {
            let mut m = self.children.write();
            if let Some(set) = m.get_mut(p) {
                set.remove(name);
                if set.is_empty() {
                    m.remove(p);
                }
            }
        }
    }

    /// The children of `parent`, sorted.
    pub(crate) fn of(&self, parent: &str) -> Vec<String> {
        self.children
            .read()
            .get(parent)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// What a set to a queue stored, for the caller to wait on before acknowledging.
#[derive(Debug, Default)]
pub struct Stored {
    /// Each queue written and the log position that makes the write durable (the
    /// children's, then the parent's unless it is `fanout_only`).
    pub writes: Vec<(Arc<Queue>, u64)>,
}

impl Engine {
    /// The fanout children of `parent` (Kestrel's `children` stat), sorted by name.
    pub fn children(&self, parent: &str) -> Vec<String> {
        self.fanout().of(parent)
    }

    /// Sets a message on `q` and copies it to each of its fanout children, as Kestrel
    /// does: the children get their copies first, whatever the parent then does (a parent
    /// full under `reject` still feeds its children), and a `fanout_only` parent stores
    /// nothing itself. The result is the parent's (`Full`, `TooLarge`, a write error); a
    /// child that refuses its copy (full, or its disk failing) is logged and skipped, as
    /// in Kestrel, whose children's results are ignored. A child whose fsync failed is
    /// skipped too: its writes can no longer be acknowledged.
    pub fn enqueue_fanout(
        &self,
        q: &Arc<Queue>,
        flags: u32,
        exp: u32,
        payload: &[u8],
        now: u32,
    ) -> Result<Stored, QueueError> {
        let mut stored = Stored::default();
        // Why the last child refused its copy: what a `fanout_only` parent answers when
        // every child refused, since then the message is stored nowhere.
        let mut refused = None;
        for name in self.children(q.name()) {
            let Some(child) = self.queue(&name) else {
                continue;
            };
            if child.sync_failed() {
                tracing::warn!(queue = %name, "fanout copy skipped: the queue's fsync failed");
                refused = Some(QueueError::SyncFailed);
                continue;
            }
            match child.enqueue(flags, exp, payload, now) {
                Ok(lsn) => stored.writes.push((child, lsn)),
                Err(e) => {
                    tracing::warn!(queue = %name, "fanout copy not stored: {e}");
                    refused = Some(e);
                }
            }
        }
        let lim = q.limits();
        if fanout_parent(q.name()).is_some() || !lim.fanout_only {
            let lsn = q.enqueue(flags, exp, payload, now)?;
            stored.writes.push((q.clone(), lsn));
        } else if payload.len() > self.config().max_item_size
            || (lim.max_item_size > 0 && payload.len() as u64 > lim.max_item_size)
        {
            return Err(QueueError::TooLarge);
        } else if stored.writes.is_empty() {
            // A `fanout_only` parent keeps nothing: if it has children and none took the
            // message, answering STORED would acknowledge a message stored nowhere.
            if let Some(e) = refused {
                return Err(e);
            }
        }
        Ok(stored)
    }
}
