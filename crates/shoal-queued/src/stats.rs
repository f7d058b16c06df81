//! Server-wide counters and the `stats` replies.

use crate::config::VERSION;
use shoal_net::Budget;
use shoal_protocol::reply;
use shoal_queue::Queue;
use shoal_queue::{unix_now, Engine, QueueStats};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Counters shared by every connection. Relaxed atomics: they are statistics, not
/// synchronisation.
#[derive(Debug)]
pub struct Counters {
    /// When the server started.
    pub started: Instant,
    /// Open connections.
    pub curr_connections: AtomicU64,
    /// Connections accepted since start.
    pub total_connections: AtomicU64,
    /// `get` keys processed.
    pub cmd_get: AtomicU64,
    /// `set` commands processed.
    pub cmd_set: AtomicU64,
    /// Gets that returned a message.
    pub get_hits: AtomicU64,
    /// Gets that found the queue empty.
    pub get_misses: AtomicU64,
    /// Enqueues refused with a write error (e.g. a full disk).
    pub write_errors: AtomicU64,
    /// Writes whose fsync failed: their messages were not acknowledged (the connection
    /// that sent them is closed instead).
    pub sync_errors: AtomicU64,
    /// Connections closed by `--idle-timeout` (memcached's `idle_kicks`).
    pub idle_kicks: AtomicU64,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            started: Instant::now(),
            curr_connections: AtomicU64::new(0),
            total_connections: AtomicU64::new(0),
            cmd_get: AtomicU64::new(0),
            cmd_set: AtomicU64::new(0),
            get_hits: AtomicU64::new(0),
            get_misses: AtomicU64::new(0),
            write_errors: AtomicU64::new(0),
            sync_errors: AtomicU64::new(0),
            idle_kicks: AtomicU64::new(0),
        }
    }
}

impl Counters {
    /// memcached's `stats reset`: the counters of events (connections accepted, commands,
    /// hits, misses, errors) start again from zero; gauges (`curr_connections`) and
    /// `uptime` do not.
    pub fn reset(&self) {
        for c in [
            &self.total_connections,
            &self.cmd_get,
            &self.cmd_set,
            &self.get_hits,
            &self.get_misses,
            &self.write_errors,
            &self.sync_errors,
            &self.idle_kicks,
        ] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// Increments a counter.
pub fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

/// Plain `stats`: server counters (Kestrel's and memcached's `curr_items`, `total_items`
/// ever added, `bytes`), then per queue `queue_<name>_<stat>` lines.
/// `read_budget` gives memcached's `read_buf_bytes` (held beyond what buffers hold for free) and
/// `read_buf_oom` (values and lines refused for want of it).
pub fn general(
    out: &mut Vec<u8>,
    c: &Counters,
    engine: &Engine,
    threads: usize,
    read_budget: &Budget,
) {
    let now = unix_now();
    reply::stat_u64(out, "pid", u64::from(std::process::id()));
    reply::stat_u64(out, "uptime", c.started.elapsed().as_secs());
    reply::stat_u64(out, "time", u64::from(now));
    reply::stat_str(out, "version", VERSION);
    let queues: Vec<_> = engine
        .queues()
        .into_iter()
        .map(|q| (q.stats(now), q))
        .collect();
    let sum = |f: fn(&QueueStats) -> u64| queues.iter().map(|(s, _)| f(s)).sum::<u64>();
    reply::stat_u64(out, "curr_items", sum(|s| s.items));
    reply::stat_u64(out, "total_items", sum(|s| s.total_items));
    reply::stat_u64(out, "bytes", sum(|s| s.waiting_bytes));
    reply::stat_u64(out, "pointer_size", 64);
    reply::stat_u64(out, "curr_connections", get(&c.curr_connections));
    reply::stat_u64(out, "total_connections", get(&c.total_connections));
    reply::stat_u64(out, "cmd_get", get(&c.cmd_get));
    reply::stat_u64(out, "cmd_set", get(&c.cmd_set));
    reply::stat_u64(out, "get_hits", get(&c.get_hits));
    reply::stat_u64(out, "get_misses", get(&c.get_misses));
    let (creates, deletes, expires) = engine.queue_counts();
    reply::stat_u64(out, "queue_creates", creates);
    reply::stat_u64(out, "queue_deletes", deletes);
    reply::stat_u64(out, "queue_expires", expires);
    reply::stat_u64(out, "write_errors", get(&c.write_errors));
    reply::stat_u64(out, "sync_errors", get(&c.sync_errors));
    reply::stat_u64(out, "idle_kicks", get(&c.idle_kicks));
    reply::stat_u64(out, "read_buf_bytes", read_budget.used() as u64);
    reply::stat_u64(out, "read_buf_oom", read_budget.refused() as u64);
    reply::stat_u64(out, "threads", threads as u64);
    reply::stat_str(out, "fsync", &engine.config().fsync.to_string());
    reply::stat_u64(
        out,
        "quarantined_segments",
        engine.quarantined().len() as u64,
    );
    reply::stat_u64(out, "unavailable_queues", engine.unavailable().len() as u64);
    reply::stat_u64(out, "queues", queues.len() as u64);
    for (s, q) in &queues {
        let name = q.name();
        for (k, v) in queue_fields(s) {
            reply::stat_u64(out, &format!("queue_{name}_{k}"), v);
        }
        let children = engine.children(name);
        if !children.is_empty() {
            // Kestrel's: the children's names, comma-separated.
            reply::stat_str(out, &format!("queue_{name}_children"), &children.join(","));
        }
    }
    reply::stat_u64(out, "disk_bytes", sum(|s| s.disk_bytes));
    reply::end(out);
}

/// One queue's counters, named as `stats` (prefixed `queue_<name>_`) and `dump_stats`
/// report them: Kestrel 2.4's, with its names and meanings and in its order, then
/// shoal-queued's own.
fn queue_fields(s: &QueueStats) -> [(&'static str, u64); 21] {
    [
        // Kestrel's.
        ("items", s.items),
        ("bytes", s.waiting_bytes),
        ("total_items", s.total_items),
        ("logsize", s.disk_bytes),
        ("expired_items", s.expired),
        ("mem_items", s.mem_items),
        ("mem_bytes", s.waiting_mem_bytes),
        ("age", s.last_read_age_ms),
        ("discarded", s.discarded),
        ("waiters", s.waiters),
        ("open_transactions", s.open_reads),
        ("transactions", s.transactions),
        ("canceled_transactions", s.canceled_transactions),
        ("total_flushes", s.total_flushes),
        // shoal-queued's.
        ("enqueued", s.enqueued),
        ("dequeued", s.dequeued),
        ("oldest_age", s.oldest_age_ms),
        ("disk_bytes", s.disk_bytes),
        ("segments", s.segments),
        ("carried", s.carried),
        ("expiring", s.expiring),
    ]
}

/// The queues `dump_stats`/`dump_config` report: those named (`names`, when any are
/// given, as Kestrel takes them), else all; by name.
fn named_queues(engine: &Engine, names: &[&[u8]]) -> Vec<Arc<Queue>> {
    let mut queues: Vec<Arc<Queue>> = engine
        .queues()
        .into_iter()
        .filter(|q| names.is_empty() || names.iter().any(|n| *n == q.name().as_bytes()))
        .collect();
    queues.sort_by(|a, b| a.name().cmp(b.name()));
    queues
}

/// Kestrel's `dump_stats [queue...]`: per queue, `queue '<name>' {`, one indented
/// `key=value` line per counter and `}`; then `END`.
pub fn kestrel_dump(out: &mut Vec<u8>, engine: &Engine, names: &[&[u8]]) {
    let now = unix_now();
    for q in named_queues(engine, names) {
        out.extend_from_slice(format!("queue '{}' {{\r\n", q.name()).as_bytes());
        for (k, v) in queue_fields(&q.stats(now)) {
            out.extend_from_slice(format!("  {k}={v}\r\n").as_bytes());
        }
        let children = engine.children(q.name());
        if !children.is_empty() {
            out.extend_from_slice(format!("  children={}\r\n", children.join(",")).as_bytes());
        }
        out.extend_from_slice(b"}\r\n");
    }
    reply::end(out);
}

/// Kestrel's `dump_config [queue...]`: per queue (by name; only those named, if any),
/// `queue '<name>' {`, its configuration in force as
/// indented `key=value` lines in the queue config file's names (0: unlimited or off),
/// and `}`; then `END`.
pub fn kestrel_dump_config(out: &mut Vec<u8>, engine: &Engine, names: &[&[u8]]) {
    let memory = engine.config().memory_per_queue;
    let item = engine.config().max_item_size as u64;
    for q in named_queues(engine, names) {
        let l = q.limits();
        let max_item_size = match l.max_item_size {
            0 => item,
            n => n.min(item),
        };
        let lines = [
            ("max_items", l.max_items.to_string()),
            ("max_size", l.max_bytes.to_string()),
            ("max_item_size", max_item_size.to_string()),
            ("max_age", l.max_age_secs.to_string()),
            (
                "max_memory_size",
                l.max_memory.unwrap_or(memory).to_string(),
            ),
            (
                "discard_old_when_full",
                (l.full == shoal_queue::FullPolicy::DiscardOldest).to_string(),
            ),
            ("expire_to", l.expire_to.clone().unwrap_or_default()),
            ("max_expire_sweep", l.max_expire_sweep.to_string()),
            ("fanout_only", l.fanout_only.to_string()),
            ("max_queue_age", l.max_queue_age_secs.to_string()),
            ("sync_journal", q.fsync_policy().to_string()),
            ("keep_journal", (!q.memory_only()).to_string()),
        ];
        out.extend_from_slice(format!("queue '{}' {{\r\n", q.name()).as_bytes());
        for (k, v) in lines {
            out.extend_from_slice(format!("  {k}={v}\r\n").as_bytes());
        }
        out.extend_from_slice(b"}\r\n");
    }
    reply::end(out);
}

/// MemcacheQ's `stats queue`: `STAT <name> <enqueued>/<dequeued>` per queue.
pub fn memcacheq_queues(out: &mut Vec<u8>, engine: &Engine) {
    let now = unix_now();
    for q in engine.queues() {
        let s = q.stats(now);
        reply::stat(
            out,
            q.name().as_bytes(),
            format!("{}/{}", s.enqueued, s.dequeued).as_bytes(),
        );
    }
    reply::end(out);
}
