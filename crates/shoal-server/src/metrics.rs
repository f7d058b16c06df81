//! shoald's `/metrics` page (`--metrics-listen`).
//!
//! # memcached_exporter's metrics, by construction
//!
//! Dashboards and alerts written for memcached read prometheus/memcached_exporter's
//! metrics. shoald produces the same families by doing what the exporter does, in
//! process: it prints its own `stats`, `stats slabs`, `stats items` and `stats settings`
//! (the very functions those commands run), files the lines as the exporter's memcache
//! client does (`N:key` per slab class, `items:N:key` per item class, the rest global),
//! and applies `pkg/exporter/exporter.go`'s mapping (its names, label names, types and
//! help texts; per-slab metrics as with its slab collector on). A key the exporter would
//! skip because memcached did not print it is skipped here too. `memcached_up` is 1: the
//! page is produced by the server it describes.
//!
//! # What memcached cannot give
//!
//! `shoal_request_duration_seconds{command}`: per-command latency, measured on the worker
//! per read batch: a connection's turn parses and executes every request its input holds,
//! queueing the replies, then writes them at once; each request of the turn is recorded
//! with the time from the turn's start to its end (its replies queued, not yet written).
//! With one request per read (depth 1) that is the request's own time from parsed to
//! reply queued; pipelined, it is when the request's reply can leave at the earliest.
//! Timing each request on its own cost two clock reads per request, 19% of shoald's CPU
//! per request pipelined at depth 16 (docs/benchmarks/2026-11-25-metrics.md); per turn it
//! is two reads of the time-stamp counter per turn ([`clock`], ~15 ns each, rather than
//! ~40 ns for `Instant::now()`), and per request one plain (non-atomic-RMW) increment.
//! Each worker records into histograms it alone writes ([`WorkerLatency`]); a scrape adds
//! them up. Nothing is timed without `--metrics-listen`.
//! `shoal_request_latency_seconds{command,quantile}`: the same observations in log-linear
//! buckets (HdrHistogram's layout, within 1%), served as p50/p90/p99/p99.9/p99.99 over the
//! last one to two minutes ([`crate::latency`]).
//! Also the store's segments, its eviction and expiry figures, authentication failures
//! and TLS handshakes.

use crate::latency::{COMMANDS, QUANTILES};
use crate::worker::Shared;
use shoal_net::metrics::{Kind, Page, Summary};
use std::collections::BTreeMap;

/// A flat `name -> value` map of stats lines.
type Map = BTreeMap<String, String>;

/// Stats lines filed as memcached_exporter's client files them.
#[derive(Debug, Default)]
struct Filed {
    global: Map,
    slabs: BTreeMap<u32, Map>,
    items: BTreeMap<u32, Map>,
}

/// Files `STAT name value` lines: no colon global, `N:key` per slab, `items:N:key` per
/// item class. Lines that are not three fields are dropped, as the exporter's client does.
fn file(text: &[u8], into: &mut Filed) {
    for line in String::from_utf8_lossy(text).lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let [stat, name, value] = f[..] else { continue };
        if stat != "STAT" {
            continue;
        }
        let value = value.to_string();
        let parts: Vec<&str> = name.split(':').collect();
        match parts[..] {
            [key] => {
                into.global.insert(key.to_string(), value);
            }
            [id, key] => {
                if let Ok(id) = id.parse() {
                    into.slabs
                        .entry(id)
                        .or_default()
                        .insert(key.to_string(), value);
                }
            }
            ["items", id, key] => {
                if let Ok(id) = id.parse() {
                    into.items
                        .entry(id)
                        .or_default()
                        .insert(key.to_string(), value);
                }
            }
            _ => {}
        }
    }
}

/// How the exporter reads a value.
#[derive(Clone, Copy)]
enum Read {
    /// A number.
    Num,
    /// `yes`/`no`.
    Bool,
    /// `<secs>.<usecs>`.
    Timeval,
}

fn read(kind: Read, v: &str) -> Option<f64> {
    match kind {
        Read::Num => v.parse().ok(),
        Read::Bool => match v {
            "yes" => Some(1.0),
            "no" => Some(0.0),
            _ => None,
        },
        Read::Timeval => {
            let (s, us) = v.split_once('.')?;
            Some(s.parse::<f64>().ok()? + us.parse::<f64>().ok()? / 1e6)
        }
    }
}

/// One exporter metric: stats key, family (without `memcached_`), type, help.
type Def = (&'static str, &'static str, Kind, &'static str);

use Kind::{Counter as C, Gauge as G};

/// Global stats, in exporter.go's order.
const GLOBAL: [Def; 26] = [
    ("uptime", "uptime_seconds", C, "Number of seconds since the server started."),
    ("time", "time_seconds", G, "current UNIX time according to the server."),
    ("bytes", "current_bytes", G, "Current number of bytes used to store items."),
    ("limit_maxbytes", "limit_bytes", G, "Number of bytes this server is allowed to use for storage."),
    ("curr_items", "current_items", G, "Current number of items stored by this instance."),
    ("total_items", "items_total", C, "Total number of items stored during the life of this instance."),
    ("bytes_read", "read_bytes_total", C, "Total number of bytes read by this server from network."),
    ("bytes_written", "written_bytes_total", C, "Total number of bytes sent by this server to network."),
    ("curr_connections", "current_connections", G, "Current number of open connections."),
    ("total_connections", "connections_total", C, "Total number of connections opened since the server started running."),
    ("rejected_connections", "connections_rejected_total", C, "Total number of connections rejected due to hitting the memcached's -c limit in maxconns_fast mode."),
    ("conn_yields", "connections_yielded_total", C, "Total number of connections yielded running due to hitting the memcached's -R limit."),
    ("listen_disabled_num", "connections_listener_disabled_total", C, "Number of times that memcached has hit its connections limit and disabled its listener."),
    ("evictions", "items_evicted_total", C, "Total number of valid items removed from cache to free memory for new items."),
    ("reclaimed", "items_reclaimed_total", C, "Total number of times an entry was stored using memory from an expired entry."),
    ("store_too_large", "item_too_large_total", C, "The number of times an item exceeded the max-item-size when being stored."),
    ("store_no_memory", "item_no_memory_total", C, "The number of times an item could not be stored due to no more memory."),
    ("lru_crawler_starts", "lru_crawler_starts_total", C, "Times an LRU crawler was started."),
    ("direct_reclaims", "direct_reclaims_total", C, "Times worker threads had to directly reclaim or evict items."),
    ("crawler_items_checked", "lru_crawler_items_checked_total", C, "Total items examined by LRU Crawler."),
    ("crawler_reclaimed", "lru_crawler_reclaimed_total", C, "Total items freed by LRU Crawler."),
    ("moves_to_cold", "lru_crawler_moves_to_cold_total", C, "Total number of items moved from HOT/WARM to COLD LRU's."),
    ("moves_to_warm", "lru_crawler_moves_to_warm_total", C, "Total number of items moved from COLD to WARM LRU."),
    ("moves_within_lru", "lru_crawler_moves_within_lru_total", C, "Total number of items reshuffled within HOT or WARM LRU's."),
    ("total_malloced", "malloced_bytes", G, "Number of bytes of memory allocated to slab pages."),
    ("accepting_conns", "accepting_connections", G, "The Memcached server is currently accepting new connections."),
];

/// extstore's, read only when `extstore_limit_maxbytes` is printed.
const EXTSTORE: [Def; 19] = [
    (
        "extstore_compact_lost",
        "extstore_compact_lost_total",
        C,
        "Total number of items lost because they were locked during extstore compaction.",
    ),
    (
        "extstore_compact_rescues",
        "extstore_compact_rescued_total",
        C,
        "Total number of items moved to a new page during extstore compaction,",
    ),
    (
        "extstore_compact_skipped",
        "extstore_compact_skipped_total",
        C,
        "Total number of items dropped due to inactivity during extstore compaction.",
    ),
    (
        "extstore_page_allocs",
        "extstore_pages_allocated_total",
        C,
        "Total number of times a page was allocated in extstore.",
    ),
    (
        "extstore_page_evictions",
        "extstore_pages_evicted_total",
        C,
        "Total number of times a page was evicted from extstore.",
    ),
    (
        "extstore_page_reclaims",
        "extstore_pages_reclaimed_total",
        C,
        "Total number of times an empty extstore page was freed.",
    ),
    (
        "extstore_pages_free",
        "extstore_pages_free",
        G,
        "Number of extstore pages not yet containing any items.",
    ),
    (
        "extstore_pages_used",
        "extstore_pages_used",
        G,
        "Number of extstore pages containing at least one item.",
    ),
    (
        "extstore_objects_evicted",
        "extstore_objects_evicted_total",
        C,
        "Total number of items evicted from extstore to free up space.",
    ),
    (
        "extstore_objects_read",
        "extstore_objects_read_total",
        C,
        "Total number of items read from extstore.",
    ),
    (
        "extstore_objects_written",
        "extstore_objects_written_total",
        C,
        "Total number of items written to extstore.",
    ),
    (
        "extstore_objects_used",
        "extstore_objects_used",
        G,
        "Number of items stored in extstore.",
    ),
    (
        "extstore_bytes_evicted",
        "extstore_bytes_evicted_total",
        C,
        "Total number of bytes evicted from extstore to free up space.",
    ),
    (
        "extstore_bytes_written",
        "extstore_bytes_written_total",
        C,
        "Total number of bytes written to extstore.",
    ),
    (
        "extstore_bytes_read",
        "extstore_bytes_read_total",
        C,
        "Total number of bytes read from extstore.",
    ),
    (
        "extstore_bytes_used",
        "extstore_bytes_used",
        C,
        "Current number of bytes used to store items in extstore.",
    ),
    (
        "extstore_bytes_fragmented",
        "extstore_bytes_fragmented",
        G,
        "Current number of bytes in extstore pages allocated but not used to store an object.",
    ),
    (
        "extstore_limit_maxbytes",
        "extstore_bytes_limit",
        G,
        "Number of bytes of external storage allocated for this server.",
    ),
    (
        "extstore_io_queue",
        "extstore_io_queue_depth",
        G,
        "Number of items in the I/O queue waiting to be processed.",
    ),
];

/// Per item class, read when printed (`itemsCounterMetrics`, `itemsGaugeMetrics`).
/// `store_too_large`/`store_no_memory` are left out: the exporter's metrics for them take
/// no slab label (and shoald does not print them per class).
const ITEMS: [Def; 19] = [
    ("number", "slab_current_items", G, "Number of items currently stored in this slab class."),
    ("age", "slab_items_age_seconds", G, "Number of seconds the oldest item has been in the slab class."),
    ("crawler_reclaimed", "slab_items_crawler_reclaimed_total", C, "Number of items freed by the LRU Crawler."),
    ("evicted", "slab_items_evicted_total", C, "Total number of times an item had to be evicted from the LRU before it expired."),
    ("evicted_nonzero", "slab_items_evicted_nonzero_total", C, "Total number of times an item which had an explicit expire time set had to be evicted from the LRU before it expired."),
    ("evicted_time", "slab_items_evicted_time_seconds", C, "Seconds since the last access for the most recent item evicted from this class."),
    ("evicted_unfetched", "slab_items_evicted_unfetched_total", C, "Total nmber of items evicted and never fetched."),
    ("expired_unfetched", "slab_items_expired_unfetched_total", C, "Total number of valid items evicted from the LRU which were never touched after being set."),
    ("outofmemory", "slab_items_outofmemory_total", C, "Total number of items for this slab class that have triggered an out of memory error."),
    ("reclaimed", "slab_items_reclaimed_total", C, "Total number of items reclaimed."),
    ("tailrepairs", "slab_items_tailrepairs_total", C, "Total number of times the entries for a particular ID need repairing."),
    // A counter here (the exporter's `itemsCounterMetrics`), a gauge from `stats slabs`.
    ("mem_requested", "slab_mem_requested_bytes", C, "Number of bytes of memory actual items take up within a slab."),
    ("moves_to_cold", "slab_items_moves_to_cold", C, "Number of items moved from HOT or WARM into COLD."),
    ("moves_to_warm", "slab_items_moves_to_warm", C, "Number of items moves from COLD into WARM."),
    ("moves_within_lru", "slab_items_moves_within_lru", C, "Number of times active items were bumped within HOT or WARM."),
    ("number_hot", "slab_hot_items", G, "Number of items presently stored in the HOT LRU."),
    ("number_warm", "slab_warm_items", G, "Number of items presently stored in the WARM LRU."),
    ("number_cold", "slab_cold_items", G, "Number of items presently stored in the COLD LRU."),
    ("number_temp", "slab_temporary_items", G, "Number of items presently stored in the TEMPORARY LRU."),
];

/// Per item class, after [`ITEMS`].
const ITEMS_AGE: [Def; 2] = [
    (
        "age_hot",
        "slab_hot_age_seconds",
        G,
        "Age of the oldest item in HOT LRU.",
    ),
    (
        "age_warm",
        "slab_warm_age_seconds",
        G,
        "Age of the oldest item in HOT LRU.",
    ),
];

/// Per slab class.
const SLABS: [Def; 8] = [
    (
        "chunk_size",
        "slab_chunk_size_bytes",
        G,
        "Number of bytes allocated to each chunk within this slab class.",
    ),
    (
        "chunks_per_page",
        "slab_chunks_per_page",
        G,
        "Number of chunks within a single page for this slab class.",
    ),
    (
        "total_pages",
        "slab_current_pages",
        G,
        "Number of pages allocated to this slab class.",
    ),
    (
        "total_chunks",
        "slab_current_chunks",
        G,
        "Number of chunks allocated to this slab class.",
    ),
    (
        "used_chunks",
        "slab_chunks_used",
        G,
        "Number of chunks allocated to an item.",
    ),
    (
        "free_chunks",
        "slab_chunks_free",
        G,
        "Number of chunks not yet allocated items.",
    ),
    (
        "free_chunks_end",
        "slab_chunks_free_end",
        G,
        "Number of free chunks at the end of the last allocated page.",
    ),
    (
        "mem_requested",
        "slab_mem_requested_bytes",
        G,
        "Number of bytes of memory actual items take up within a slab.",
    ),
];

/// From `stats settings` (the LRU ones only while the crawler is on, as the exporter).
const LRU_SETTINGS: [(&str, &str, Read, &str); 8] = [
    (
        "lru_crawler",
        "lru_crawler_enabled",
        Read::Bool,
        "Whether the LRU crawler is enabled.",
    ),
    (
        "lru_crawler_sleep",
        "lru_crawler_sleep",
        Read::Num,
        "Microseconds to sleep between LRU crawls.",
    ),
    (
        "lru_crawler_tocrawl",
        "lru_crawler_to_crawl",
        Read::Num,
        "Max items to crawl per slab per run.",
    ),
    (
        "lru_maintainer_thread",
        "lru_crawler_maintainer_thread",
        Read::Bool,
        "Split LRU mode and background threads.",
    ),
    (
        "hot_lru_pct",
        "lru_crawler_hot_percent",
        Read::Num,
        "Percent of slab memory reserved for HOT LRU.",
    ),
    (
        "warm_lru_pct",
        "lru_crawler_warm_percent",
        Read::Num,
        "Percent of slab memory reserved for WARM LRU.",
    ),
    (
        "hot_max_factor",
        "lru_crawler_hot_max_factor",
        Read::Num,
        "Set idle age of HOT LRU to COLD age * this",
    ),
    (
        "warm_max_factor",
        "lru_crawler_warm_max_factor",
        Read::Num,
        "Set idle age of WARM LRU to COLD age * this",
    ),
];

const COMMANDS_HELP: &str =
    "Total number of all requests broken down by command (get, set, etc.) and status.";
const SLAB_COMMANDS_HELP: &str =
    "Total number of all requests broken down by command (get, set, etc.) and status per slab.";
const LRU_HITS_HELP: &str = "Number of get_hits to the LRU.";
/// The commands the exporter counts hits (and misses) of.
const OPS: [&str; 6] = ["get", "delete", "incr", "decr", "cas", "touch"];

/// Builds a page with `memcached_` prepended to family names.
struct Mc<'a>(&'a mut Page);

impl Mc<'_> {
    fn put(&mut self, family: &str, kind: Kind, help: &str, labels: &[(&str, &str)], v: f64) {
        self.0
            .sample(&format!("memcached_{family}"), help, kind, labels, v);
    }

    /// `parseAndNewMetric`: skipped when absent or unreadable.
    fn metric(&mut self, m: &Map, d: &Def, how: Read, labels: &[(&str, &str)]) {
        if let Some(v) = m.get(d.0).and_then(|v| read(how, v)) {
            self.put(d.1, d.2, d.3, labels, v);
        }
    }

    fn num(m: &Map, key: &str) -> Option<f64> {
        m.get(key).and_then(|v| v.parse().ok())
    }
}

/// exporter.go's `parseStats` and `parseStatsSettings` over shoald's own stats.
fn memcached_families(page: &mut Page, f: &Filed, settings: &Map) {
    let mut mc = Mc(page);
    mc.put("up", G, "Could the memcached server be reached.", &[], 1.0);
    let s = &f.global;
    if let Some(v) = s.get("version") {
        mc.put(
            "version",
            G,
            "The version of this memcached server.",
            &[("version", v)],
            1.0,
        );
    }
    for op in OPS {
        for (suffix, status) in [("hits", "hit"), ("misses", "miss")] {
            if let Some(v) = Mc::num(s, &format!("{op}_{suffix}")) {
                let labels = [("command", op), ("status", status)];
                mc.put("commands_total", C, COMMANDS_HELP, &labels, v);
            }
        }
    }
    for (key, command, status) in [
        ("cas_badval", "cas", "badval"),
        ("cmd_flush", "flush", "hit"),
    ] {
        if let Some(v) = Mc::num(s, key) {
            let labels = [("command", command), ("status", status)];
            mc.put("commands_total", C, COMMANDS_HELP, &labels, v);
        }
    }
    // memcached counts cas in cmd_set too; the exporter takes it out again.
    let cas: Option<f64> = ["cas_misses", "cas_hits", "cas_badval"]
        .iter()
        .map(|k| Mc::num(s, k))
        .sum();
    if let (Some(set), Some(cas)) = (Mc::num(s, "cmd_set"), cas) {
        let labels = [("command", "set"), ("status", "hit")];
        mc.put("commands_total", C, COMMANDS_HELP, &labels, set - cas);
    }
    if s.contains_key("extstore_limit_maxbytes") {
        for d in &EXTSTORE {
            mc.metric(s, d, Read::Num, &[]);
        }
    }
    mc.metric(
        s,
        &(
            "rusage_user",
            "process_user_cpu_seconds_total",
            C,
            "Accumulated user time for this process.",
        ),
        Read::Timeval,
        &[],
    );
    mc.metric(
        s,
        &(
            "rusage_system",
            "process_system_cpu_seconds_total",
            C,
            "Accumulated system time for this process.",
        ),
        Read::Timeval,
        &[],
    );
    for d in &GLOBAL {
        mc.metric(s, d, Read::Num, &[]);
    }

    for (id, u) in &f.items {
        let slab = id.to_string();
        let l = [("slab", slab.as_str())];
        mc.metric(u, &ITEMS[0], Read::Num, &l);
        mc.metric(u, &ITEMS[1], Read::Num, &l);
        for (key, lru) in [
            ("hits_to_hot", "hot"),
            ("hits_to_warm", "warm"),
            ("hits_to_cold", "cold"),
            ("hits_to_temp", "temporary"),
        ] {
            if let Some(v) = Mc::num(u, key) {
                let labels = [("slab", slab.as_str()), ("lru", lru)];
                mc.put("slab_lru_hits_total", C, LRU_HITS_HELP, &labels, v);
            }
        }
        for d in ITEMS[2..].iter().chain(&ITEMS_AGE) {
            mc.metric(u, d, Read::Num, &l);
        }
    }

    for (id, v) in &f.slabs {
        let slab = id.to_string();
        for op in OPS {
            if let Some(n) = Mc::num(v, &format!("{op}_hits")) {
                let labels = [("slab", slab.as_str()), ("command", op), ("status", "hit")];
                mc.put("slab_commands_total", C, SLAB_COMMANDS_HELP, &labels, n);
            }
        }
        if let Some(n) = Mc::num(v, "cas_badval") {
            let labels = [
                ("slab", slab.as_str()),
                ("command", "cas"),
                ("status", "badval"),
            ];
            mc.put("slab_commands_total", C, SLAB_COMMANDS_HELP, &labels, n);
        }
        let cas: Option<f64> = ["cas_hits", "cas_badval"]
            .iter()
            .map(|k| Mc::num(v, k))
            .sum();
        if let (Some(set), Some(cas)) = (Mc::num(v, "cmd_set"), cas) {
            let labels = [
                ("slab", slab.as_str()),
                ("command", "set"),
                ("status", "hit"),
            ];
            mc.put(
                "slab_commands_total",
                C,
                SLAB_COMMANDS_HELP,
                &labels,
                set - cas,
            );
        }
        for d in &SLABS {
            // Printed per item class only (see `stats slabs`); the item class's series
            // is the one reported, as it would be by the exporter.
            if d.0 == "mem_requested" && f.items.contains_key(id) {
                continue;
            }
            mc.metric(v, d, Read::Num, &[("slab", slab.as_str())]);
        }
    }

    mc.metric(
        settings,
        &(
            "maxconns",
            "max_connections",
            G,
            "Maximum number of clients allowed.",
        ),
        Read::Num,
        &[],
    );
    if settings.get("lru_crawler").map(String::as_str) == Some("yes") {
        for (key, family, how, help) in LRU_SETTINGS {
            mc.metric(settings, &(key, family, G, help), how, &[]);
        }
    }
}

/// Renders the whole page.
pub fn render(shared: &Shared) -> String {
    let mut filed = Filed::default();
    let mut buf = Vec::with_capacity(8 * 1024);
    crate::commands::stats::general(shared, &mut buf);
    crate::commands::stats::slabs(shared, &mut buf);
    crate::commands::stats::items(shared, &mut buf);
    file(&buf, &mut filed);
    buf.clear();
    crate::commands::stats::settings(shared, &mut buf);
    let mut settings = Filed::default();
    file(&buf, &mut settings);

    let mut page = Page::new();
    memcached_families(&mut page, &filed, &settings.global);
    shoal_families(&mut page, shared);
    page.render()
}

/// What memcached cannot report.
fn shoal_families(page: &mut Page, shared: &Shared) {
    const LATENCY_HELP: &str = "Time from a request parsed to its reply queued on the \
        connection, by command (binary requests count as their text command).";
    page.declare(
        "shoal_request_duration_seconds",
        LATENCY_HELP,
        Kind::Histogram,
    );
    const QUANTILES_HELP: &str = "Request latency quantiles over the last one to two \
        minutes, by command, within 1% (the same observations as \
        shoal_request_duration_seconds, in log-linear buckets); _sum and _count are since \
        start.";
    let latency = shared.latency.merged();
    for (i, l) in latency.iter().enumerate() {
        if l.histogram.count() > 0 {
            let labels = [("command", COMMANDS[i])];
            page.histogram(
                "shoal_request_duration_seconds",
                LATENCY_HELP,
                &labels,
                &l.histogram,
                1e9,
            );
        }
    }
    page.declare(
        "shoal_request_latency_seconds",
        QUANTILES_HELP,
        Kind::Summary,
    );
    for (i, l) in latency.iter().enumerate() {
        if l.histogram.count() > 0 {
            let quantiles = QUANTILES.map(|q| (q, l.window.quantile(q)));
            page.summary(
                "shoal_request_latency_seconds",
                QUANTILES_HELP,
                &[("command", COMMANDS[i])],
                &Summary {
                    quantiles: &quantiles,
                    sum: l.histogram.sum(),
                    count: l.histogram.count(),
                },
                1e9,
            );
        }
    }
    let st = shared.store.stats();
    let t = shared.stats.totals();
    let segs = "shoal_store_segments";
    let segs_help = "Store segments by state: allocated (with memory), free (ready to be \
        written), sealed (full, awaiting eviction).";
    page.gauge(
        segs,
        segs_help,
        &[("state", "allocated")],
        st.segments_allocated,
    );
    page.gauge(segs, segs_help, &[("state", "free")], st.segments_free);
    page.gauge(segs, segs_help, &[("state", "sealed")], st.segments_sealed);
    page.gauge(
        "shoal_store_segment_size_bytes",
        "Size of one store segment (the unit of allocation and eviction).",
        &[],
        st.segment_size,
    );
    page.gauge(
        "shoal_store_index_bytes",
        "Memory used by the key index, outside the item memory limit.",
        &[],
        st.index_bytes,
    );
    page.counter(
        "shoal_store_evicted_unfetched_total",
        "Live items evicted (with their segment) that were never read.",
        &[],
        st.evicted_unfetched,
    );
    page.counter(
        "shoal_store_expired_unfetched_total",
        "Expired items removed that were never read.",
        &[],
        st.expired_unfetched,
    );
    page.counter(
        "shoal_store_get_expired_total",
        "Reads that found only an expired item.",
        &[],
        st.get_expired,
    );
    let kept = "shoal_store_evictions_kept_items_total";
    let kept_help = "Items eviction kept by moving them: out of probation (promoted), forward \
        within a size class's queue (retained), or out of a mostly empty segment (compacted).";
    page.counter(kept, kept_help, &[("how", "promoted")], st.evict_promoted);
    page.counter(kept, kept_help, &[("how", "retained")], st.evict_retained);
    page.counter(kept, kept_help, &[("how", "compacted")], st.compacted_items);
    let kept_bytes = "shoal_store_evictions_kept_bytes_total";
    let kept_bytes_help = "Bytes eviction copied to keep items, by how (see \
        shoal_store_evictions_kept_items_total).";
    page.counter(
        kept_bytes,
        kept_bytes_help,
        &[("how", "promoted")],
        st.evict_promoted_bytes,
    );
    page.counter(
        kept_bytes,
        kept_bytes_help,
        &[("how", "retained")],
        st.evict_retained_bytes,
    );
    page.counter(
        "shoal_store_evicted_active_total",
        "Items evicted although read since they arrived in their segment.",
        &[],
        st.evicted_active,
    );
    page.counter(
        "shoal_store_ghost_hits_total",
        "New keys written soon after being evicted unread from probation.",
        &[],
        st.ghost_hits,
    );
    page.gauge(
        "shoal_store_ghost_bytes",
        "Memory used by the ghost of recently evicted keys, outside the item memory limit.",
        &[],
        st.ghost_bytes,
    );
    let queues = "shoal_store_queue_segments";
    let queues_help = "Sealed segments by queue: probation (written by clients), main \
        (size classes, filled by eviction) and stubs (items whose value is on flash).";
    page.gauge(
        queues,
        queues_help,
        &[("queue", "probation")],
        st.segments_probation,
    );
    page.gauge(queues, queues_help, &[("queue", "main")], st.segments_main);
    page.gauge(
        queues,
        queues_help,
        &[("queue", "stubs")],
        st.segments_stubs,
    );
    page.counter(
        "shoal_auth_attempts_total",
        "Authentication attempts (binary SASL auth/step and ASCII-auth set).",
        &[],
        t.auth_cmds,
    );
    page.counter(
        "shoal_auth_failures_total",
        "Failed authentication attempts.",
        &[],
        t.auth_errors,
    );
    let tls = "shoal_tls_handshakes_total";
    let tls_help = "TLS handshakes on the client port by result (ok, failed, timeout).";
    page.counter(tls, tls_help, &[("result", "ok")], t.tls_handshakes);
    page.counter(
        tls,
        tls_help,
        &[("result", "failed")],
        t.tls_handshake_errors,
    );
    page.counter(
        tls,
        tls_help,
        &[("result", "timeout")],
        t.tls_handshake_timeouts,
    );
    page.gauge(
        "shoal_buffer_budget_bytes_used",
        "Bytes connections hold beyond their fixed read buffers (long requests, unsent replies).",
        &[],
        shared.buffers.used() as u64,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_filed_as_the_exporter_client_files_them() {
        let mut f = Filed::default();
        file(
            b"STAT pid 1\r\nSTAT 1:chunk_size 1048576\r\nSTAT items:1:number 3\r\n\
              STAT version 1.6 with space\r\nSTAT x:y 1\r\nEND\r\n",
            &mut f,
        );
        assert_eq!(f.global.get("pid").map(String::as_str), Some("1"));
        assert!(!f.global.contains_key("version"));
        assert_eq!(f.slabs[&1]["chunk_size"], "1048576");
        assert_eq!(f.items[&1]["number"], "3");
    }

    #[test]
    fn values_read_as_the_exporter_reads_them() {
        assert_eq!(read(Read::Timeval, "1.500000"), Some(1.5));
        assert_eq!(read(Read::Bool, "yes"), Some(1.0));
        assert_eq!(read(Read::Bool, "on"), None);
        assert_eq!(read(Read::Num, "12"), Some(12.0));
    }
}
