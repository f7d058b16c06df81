//! shoal-queued's `/metrics` page (`--metrics-listen`): per queue, the figures `stats`
//! prints as `queue_<name>_<stat>` (Kestrel's names, as `shoal_queue_*{queue="<name>"}`),
//! the server's counters, and, also per queue, the sync thread's fsync latency and
//! group-commit batch histograms. Everything is read when scraped; nothing is added to
//! the request path.

use crate::shared::Shared;
use shoal_net::metrics::{Kind, Page};
use shoal_queue::unix_now;
use std::sync::atomic::Ordering;

/// Renders the page.
pub fn render(shared: &Shared) -> String {
    let mut p = Page::new();
    let c = &shared.counters;
    let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    p.gauge(
        "shoal_queued_uptime_seconds",
        "Seconds since the server started.",
        &[],
        c.started.elapsed().as_secs(),
    );
    p.gauge(
        "shoal_queued_current_connections",
        "Open client connections (stats curr_connections).",
        &[],
        get(&c.curr_connections),
    );
    p.counter(
        "shoal_queued_connections_total",
        "Connections accepted since start (stats total_connections).",
        &[],
        get(&c.total_connections),
    );
    let cmds = "shoal_queued_commands_total";
    let cmds_help = "Commands by command and result: set (enqueue), get (dequeue: hit or \
        miss, as stats get_hits/get_misses).";
    p.counter(
        cmds,
        cmds_help,
        &[("command", "set"), ("result", "all")],
        get(&c.cmd_set),
    );
    p.counter(
        cmds,
        cmds_help,
        &[("command", "get"), ("result", "hit")],
        get(&c.get_hits),
    );
    p.counter(
        cmds,
        cmds_help,
        &[("command", "get"), ("result", "miss")],
        get(&c.get_misses),
    );
    p.counter(
        "shoal_queued_write_errors_total",
        "Enqueues refused with a write error, such as a full disk (stats write_errors).",
        &[],
        get(&c.write_errors),
    );
    p.counter(
        "shoal_queued_sync_errors_total",
        "Writes whose fsync failed, left unacknowledged (stats sync_errors).",
        &[],
        get(&c.sync_errors),
    );
    p.counter(
        "shoal_queued_idle_kicks_total",
        "Connections closed by --idle-timeout (stats idle_kicks).",
        &[],
        get(&c.idle_kicks),
    );
    p.gauge(
        "shoal_queued_read_buffer_bytes",
        "Bytes read buffers hold beyond their free allowance (stats read_buf_bytes).",
        &[],
        shared.read_budget.used() as u64,
    );
    p.counter(
        "shoal_queued_read_buffer_oom_total",
        "Values and lines refused for want of read-buffer budget (stats read_buf_oom).",
        &[],
        shared.read_budget.refused() as u64,
    );
    let engine = &shared.engine;
    p.gauge(
        "shoal_queued_quarantined_segments",
        "Segments quarantined as corrupt during recovery.",
        &[],
        engine.quarantined().len() as u64,
    );
    p.gauge(
        "shoal_queued_unavailable_queues",
        "Queues whose directory could not be read at startup.",
        &[],
        engine.unavailable().len() as u64,
    );
    // Per queue (each fsync is of one queue's segment files or directory); declared even
    // with no queue yet, like the families below. `sum by (le)` gives the server-wide
    // histogram.
    const FSYNC: &str = "shoal_queued_fsync_duration_seconds";
    const FSYNC_HELP: &str =
        "Time each fsync of the queue's segments (fdatasync) or of its directory took.";
    const BATCH: &str = "shoal_queued_group_commit_writes";
    const BATCH_HELP: &str =
        "Writes to the queue made durable by one fsync pass (the group commit's batch size).";
    p.declare(FSYNC, FSYNC_HELP, Kind::Histogram);
    p.declare(BATCH, BATCH_HELP, Kind::Histogram);

    // Declared even with no queue yet, so dashboards find the families.
    const QUEUE: [(&str, Kind, &str); 11] = [
        (
            "shoal_queue_items",
            Kind::Gauge,
            "Messages waiting, not counting open reads (Kestrel items).",
        ),
        (
            "shoal_queue_bytes",
            Kind::Gauge,
            "Payload bytes of waiting and open messages (Kestrel's bytes counts waiting ones only).",
        ),
        (
            "shoal_queue_oldest_item_age_seconds",
            Kind::Gauge,
            "Age of the message at the head, 0 when empty (stats oldest_age; Kestrel's age is how long the last message read had waited).",
        ),
        (
            "shoal_queue_enqueued_total",
            Kind::Counter,
            "Messages accepted since start (MemcacheQ/Kestrel enqueued).",
        ),
        (
            "shoal_queue_dequeued_total",
            Kind::Counter,
            "Messages consumed since start (Kestrel dequeued).",
        ),
        (
            "shoal_queue_expired_total",
            Kind::Counter,
            "Messages dropped because they expired (Kestrel expired).",
        ),
        (
            "shoal_queue_discarded_total",
            Kind::Counter,
            "Messages dropped to make room under the discard-oldest policy (Kestrel discarded).",
        ),
        (
            "shoal_queue_open_reads",
            Kind::Gauge,
            "Reliable reads opened and neither closed nor aborted (Kestrel open_transactions).",
        ),
        (
            "shoal_queue_disk_bytes",
            Kind::Gauge,
            "Bytes of the queue's segment files (Kestrel logsize).",
        ),
        (
            "shoal_queue_segments",
            Kind::Gauge,
            "Segment files of the queue.",
        ),
        (
            "shoal_queue_memory_bytes",
            Kind::Gauge,
            "Payload bytes held in memory, open reads included (Kestrel's mem_bytes counts waiting ones only).",
        ),
    ];
    for (name, kind, help) in QUEUE {
        p.declare(name, help, kind);
    }
    let now = unix_now();
    for q in engine.queues() {
        let s = q.stats(now);
        let values = [
            s.items,
            s.bytes,
            s.oldest_age_secs,
            s.enqueued,
            s.dequeued,
            s.expired,
            s.discarded,
            s.open_reads,
            s.disk_bytes,
            s.segments,
            s.mem_bytes,
        ];
        let labels = [("queue", q.name())];
        for ((name, kind, help), v) in QUEUE.iter().zip(values) {
            p.sample(name, help, *kind, &labels, v as f64);
        }
        let sync = q.sync_metrics();
        p.histogram(FSYNC, FSYNC_HELP, &labels, &sync.fsync_ns.snapshot(), 1e9);
        p.histogram(
            BATCH,
            BATCH_HELP,
            &labels,
            &sync.batch_writes.snapshot(),
            1.0,
        );
    }
    p.render()
}
