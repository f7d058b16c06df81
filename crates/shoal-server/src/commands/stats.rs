//! `stats` and its groups, with memcached 1.6's names, order and value formats, so that
//! what monitors memcached (prometheus/memcached_exporter, memcached-tool, collectd and
//! the like) reads shoald unchanged. memcached_exporter in particular reads `stats`,
//! `stats settings`, `stats items` and `stats slabs`, and a missing or malformed key it
//! relies on fails the whole scrape (`memcached_up 0`); `tests/exporter.rs` applies its
//! rules to this output.
//!
//! Every key memcached prints is printed, with shoald's value where it has the concept
//! and 0 where it does not (a counter of something that never happens), rather than
//! being left out: tools written for memcached may read any of them. Like memcached
//! 1.6.45, `stats` leaves out the `slab_reassign_*`/`slabs_moved` lines with
//! `-o no_slab_reassign`, the `lru_crawler_*` ones while the crawler is disabled and the
//! LRU maintainer's (`lru_maintainer_juggles`, `evicted_active`, `moves_*`,
//! `direct_reclaims`, `lru_bumps_dropped`) with `-o no_lru_maintainer`.
//!
//! # How memcached's concepts map onto Shoal
//!
//! * **Slab classes.** Items of every size share one pool of segments, but are counted
//!   in the class memcached 1.6.45 would give them (shoal-store's `SlabClasses`: the
//!   class table from `-n`, `-f`, `slab_chunk_max` and `slab_sizes`, an item's class
//!   from its memcached footprint). `stats slabs` lists every class an item has been
//!   stored in since the start, `stats items` the classes holding live items, as
//!   memcached does. (`watch` and `lru_crawler metadump` still say `clsid=1`.)
//! * **Pages and chunks.** `chunk_size` and `chunks_per_page` are memcached's for the
//!   class; a chunk is an item (`total_chunks` = `used_chunks` = the class's live items,
//!   `free_chunks` and `free_chunks_end` 0: free memory is whole segments, shared by
//!   every class); `total_pages` is the segment memory the class's live items take, in
//!   segments, rounded up. `total_malloced` is the memory of the segments allocated;
//!   `mem_requested` the memcached footprints of the class's live items. The per-class
//!   request counters (`get_hits`, `cmd_set`, ...) are `crate::stats`' per-class ones.
//!   docs/compatibility.md has the table.
//! * **Slab rebalancing.** Memory moves between Shoal's size classes a segment at a time
//!   as eviction picks the least valuable one, with no pages reassigned:
//!   `slab_reassign_*`, `slabs_moved` and `slab_global_page_pool` are 0.
//! * **LRUs.** Shoal keeps no LRU lists: it evicts segments, keeping the items read since
//!   they arrived (see shoal-store's `evict`). Like memcached with `lru_segmented` off,
//!   everything is "cold": `number_cold` = `number`, the HOT, WARM and TEMP figures are
//!   0, every read hit is a `hits_to_cold`, and nothing moves between LRUs (`moves_*`,
//!   `lru_maintainer_juggles`, `lru_bumps_dropped`, `tailrepairs`, `lrutail_reflocked`
//!   0). `age`, memcached's idle time of a class's LRU tail item, is the idle time of the
//!   class's least recently accessed live item in the segment the next eviction takes, 0
//!   when that segment holds none of the class or is not yet sealed.
//! * **Evictions and expiry.** `evictions`/`evicted`, `evicted_unfetched`,
//!   `evicted_active` (items evicted although read since they arrived in their segment:
//!   eviction could keep no more of it), `evicted_time` (idle seconds of the class's last
//!   item evicted), `expired_unfetched`, `reclaimed`, `crawler_reclaimed` and
//!   `get_expired` are the store's own counters, per class where memcached has them, and
//!   `stats reset` zeroes them as memcached does; so is `evicted_nonzero` (evicted
//!   items that had an expiry time); `direct_reclaims` is not tracked (0). shoald's own
//!   are in `stats eviction`: `evictions_promoted` and
//!   `evictions_retained` (items eviction moved out of probation or forward in a size
//!   class's queue, with their `_bytes`), `evictions_compactions` and
//!   `evictions_compacted_items` (segments emptied because expiry, deletes or overwrites
//!   had left them mostly holes), `ghost_hits` (new keys written soon after being evicted
//!   unread), `ghost_bytes`, `segments_probation`, `segments_main` and `segments_stubs`
//!   (the flash stubs' queue). The LRU crawler is
//!   the maintenance sweep: what it reclaims is in `crawler_reclaimed` (and in
//!   `reclaimed`, which counts every expired item unlinked); `lru_crawler_running` is 1
//!   from `lru_crawler crawl` until that full pass is over; `lru_crawler_starts` and
//!   `crawler_items_checked` are not counted (0).
//! * **Refused stores.** `store_too_large` and `store_no_memory` are the per-thread
//!   counters of those names in `crate::stats`; a class's `outofmemory` is the store's
//!   count of refusals for want of memory of items of that class.
//! * **Hash table.** `hash_bytes` is the key index's memory; `hash_power_level` the power
//!   of two of its buckets in all shards; `hash_is_expanding` 0 (index shards grow one at
//!   a time, with no global expansion).
//! * **Connections.** `connection_structures` = `curr_connections` (one state per open
//!   connection, none pooled). Past `-c`, shoald refuses connections (counted in
//!   `rejected_connections`) instead of disabling its listener, so
//!   `listen_disabled_num` and `time_in_listen_disabled_us` are 0, and it keeps no file
//!   descriptors aside from the limit (`reserved_fds` 0). `conn_yields` (turns given up
//!   after `-R` requests) is the per-thread counter of that name.
//! * **Buffers.** Each connection holds one 16 KiB read buffer (`read_buf_count`); what
//!   connections hold beyond that (long requests, unsent replies) comes from one shared
//!   budget, and `read_buf_bytes` is the fixed buffers plus that budget's use,
//!   `read_buf_oom` the requests it refused. Nothing is cached for reuse
//!   (`read_buf_bytes_free` 0), and replies go straight into the connection's output
//!   buffer, with no response objects (`response_obj_*` 0).
//! * **Logging.** `log_watchers` is the connections running `watch`; lines are not
//!   counted (`log_worker_*`, `log_watcher_*` 0; a watcher that falls behind is told with
//!   `skipped=` lines instead).
//! * **Other.** No allocation failure is survivable (`malloc_fails` 0); no NAPI ids or
//!   round-robin listener fallback (`unexpected_napi_ids`, `round_robin_fallback` 0).
//!   `flush_all` frees every item at once, and remembers up to 65,536 of the keys it
//!   dropped: `get_flushed` counts reads that miss one of them, once per key, as
//!   memcached counts reads that find a flushed item before it is reclaimed. `libevent`
//!   is `none`: shoald uses no event library.

use crate::config::VERSION;
use crate::worker::{Shared, Worker};
use shoal_net::READ_CHUNK;
use shoal_protocol::binary::{self, Attrs, Status};
use shoal_protocol::{reply, StatsGroup};
use shoal_store::FlashStats;
use std::sync::atomic::Ordering;

/// Binary `STAT [group]`: one packet per statistic, then an empty terminator packet.
/// The text protocol's `stats` output is produced once and re-framed, so both protocols
/// always report the same numbers. `raw` is the key as sent.
pub fn binary(w: &Worker, attrs: &Attrs, group: StatsGroup<'_>, raw: &[u8], out: &mut Vec<u8>) {
    let mut text = Vec::new();
    stats(w, group, &mut text);
    if raw == b"detail dump" {
        // memcached sends the whole dump as one packet's value.
        binary::reply::stat(out, attrs, &[], &text);
        return;
    }
    if text.starts_with(b"ERROR") || text.starts_with(b"CLIENT_ERROR") {
        binary::reply::status(out, attrs, Status::KeyNotFound);
        return;
    }
    for line in text.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(rest) = line.strip_prefix(b"STAT ") else {
            continue;
        };
        let (name, value) = match rest.iter().position(|&b| b == b' ') {
            Some(p) => (&rest[..p], &rest[p + 1..]),
            None => (rest, &b""[..]),
        };
        binary::reply::stat(out, attrs, name, value);
    }
    binary::reply::stat(out, attrs, &[], &[]);
}

/// `stats [group]`.
pub fn stats(w: &Worker, group: StatsGroup<'_>, out: &mut Vec<u8>) {
    match group {
        StatsGroup::General => general(&w.shared, out),
        StatsGroup::Settings => settings(&w.shared, out),
        StatsGroup::Items => items(&w.shared, out),
        StatsGroup::Slabs => slabs(&w.shared, out),
        StatsGroup::Sizes => super::crawler::sizes(w, out),
        StatsGroup::Conns => conns(w, out),
        StatsGroup::Reset => {
            w.shared.stats.reset();
            w.shared.store.reset_stats();
            w.shared.prefixes.reset();
            out.extend_from_slice(reply::RESET);
            return;
        }
        StatsGroup::Other(args) if args.starts_with(b"detail") => {
            detail(w, &args[b"detail".len()..], out);
            return;
        }
        StatsGroup::Other(args) if args.starts_with(b"cachedump") => {
            super::crawler::cachedump(w, &args[b"cachedump".len()..], out);
            return;
        }
        // memcached (built with extstore, as by default) lists extstore's stats, none
        // without an `ext_path`.
        StatsGroup::Other(b"extstore") => extstore_pages(w, out),
        StatsGroup::Other(b"eviction") => eviction(&w.shared, out),
        StatsGroup::Other(_) => {
            out.extend_from_slice(reply::ERROR);
            return;
        }
    }
    reply::end(out);
}

fn rusage() -> (String, String) {
    // SAFETY: getrusage fills a plain C struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage for getrusage to fill.
    let ok = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } == 0;
    if !ok {
        return ("0.000000".into(), "0.000000".into());
    }
    let fmt = |t: libc::timeval| format!("{}.{:06}", t.tv_sec, t.tv_usec);
    (fmt(ru.ru_utime), fmt(ru.ru_stime))
}

/// `stats`' lines (also what `/metrics` maps from).
pub fn general(sh: &Shared, out: &mut Vec<u8>) {
    let t = sh.stats.totals();
    let st = sh.store.stats();
    let clock = sh.store.clock();
    let conns = sh.curr_connections.load(Ordering::Relaxed) as u64;
    reply::stat_u64(out, "pid", u64::from(std::process::id()));
    reply::stat_u64(out, "uptime", u64::from(clock.uptime()));
    reply::stat_i64(out, "time", clock.unix_now());
    reply::stat_str(out, "version", VERSION);
    // memcached names its event library's version here; shoald uses none, and says so
    // rather than leave out a key monitors may read.
    reply::stat_str(out, "libevent", "none");
    reply::stat_u64(out, "pointer_size", u64::from(usize::BITS));
    let (user, sys) = rusage();
    reply::stat_str(out, "rusage_user", &user);
    reply::stat_str(out, "rusage_system", &sys);
    // Every connection holds one fixed read buffer; growth beyond it (long requests,
    // unsent replies) is charged to the shared budget.
    let read_buf_bytes = conns * READ_CHUNK as u64 + sh.buffers.used() as u64;
    let numbers = [
        ("max_connections", sh.settings.conn_limit as u64),
        ("curr_connections", conns),
        (
            "total_connections",
            sh.total_connections.load(Ordering::Relaxed),
        ),
        (
            "rejected_connections",
            sh.rejected_connections.load(Ordering::Relaxed),
        ),
        ("connection_structures", conns),
        ("response_obj_oom", 0),
        ("response_obj_count", 0),
        ("response_obj_bytes", 0),
        ("read_buf_count", conns),
        ("read_buf_bytes", read_buf_bytes),
        ("read_buf_bytes_free", 0),
        ("read_buf_oom", sh.buffers.refused() as u64),
        ("reserved_fds", 0),
        ("cmd_get", t.cmd_get),
        ("cmd_set", t.cmd_set),
        ("cmd_flush", t.cmd_flush),
        ("cmd_touch", t.cmd_touch),
        ("cmd_meta", t.cmd_meta),
        ("get_hits", t.get_hits),
        ("get_misses", t.get_misses),
        ("get_expired", st.get_expired),
        ("get_flushed", st.get_flushed),
        ("delete_misses", t.delete_misses),
        ("delete_hits", t.delete_hits),
        ("incr_misses", t.incr_misses),
        ("incr_hits", t.incr_hits),
        ("decr_misses", t.decr_misses),
        ("decr_hits", t.decr_hits),
        ("cas_misses", t.cas_misses),
        ("cas_hits", t.cas_hits),
        ("cas_badval", t.cas_badval),
        ("touch_hits", t.touch_hits),
        ("touch_misses", t.touch_misses),
        ("store_too_large", t.store_too_large),
        ("store_no_memory", t.store_no_memory),
        ("auth_cmds", t.auth_cmds),
        ("auth_errors", t.auth_errors),
        ("bytes_read", t.bytes_read),
        ("bytes_written", t.bytes_written),
        ("limit_maxbytes", st.limit_maxbytes),
        ("accepting_conns", u64::from(!sh.stopping())),
        ("listen_disabled_num", 0),
        ("time_in_listen_disabled_us", 0),
        ("threads", sh.settings.threads as u64),
        ("conn_yields", t.conn_yields),
        ("hash_power_level", hash_power_level(st.index_buckets)),
        ("hash_bytes", st.index_bytes),
        ("hash_is_expanding", 0),
        ("malloc_fails", 0),
        ("log_worker_dropped", 0),
        ("log_worker_written", 0),
        ("log_watcher_skipped", 0),
        ("log_watcher_sent", 0),
        ("log_watchers", sh.watchers.count() as u64),
        ("unexpected_napi_ids", 0),
        ("round_robin_fallback", 0),
        ("bytes", st.bytes),
        ("curr_items", st.curr_items),
        ("total_items", st.total_items),
        ("slab_global_page_pool", 0),
        ("expired_unfetched", st.expired_unfetched),
        ("evicted_unfetched", st.evicted_unfetched),
        // memcached lists it only while its LRU maintainer runs.
        ("evicted_active", st.evicted_active),
        ("evictions", st.evictions),
        ("reclaimed", st.reclaimed),
        ("crawler_reclaimed", st.crawler_reclaimed),
        ("crawler_items_checked", 0),
        ("lrutail_reflocked", 0),
        ("moves_to_cold", 0),
        ("moves_to_warm", 0),
        ("moves_within_lru", 0),
        ("direct_reclaims", 0),
        ("lru_bumps_dropped", 0),
    ];
    // memcached 1.6.45 prints some groups only while the feature they count is on
    // (`-o no_slab_reassign`, `no_lru_crawler`, `no_lru_maintainer` drop them); shoald
    // accepts those options, so it drops the same lines, keeping the set of keys a
    // monitor sees the same for the same command line.
    let tuning = sh.tuning.lock().clone();
    let crawler = sh.crawler.enabled();
    let flash = sh.store.flash().map(|f| f.stats());
    for (name, value) in numbers {
        let maintainer_only = matches!(
            name,
            "evicted_active"
                | "moves_to_cold"
                | "moves_to_warm"
                | "moves_within_lru"
                | "direct_reclaims"
                | "lru_bumps_dropped"
        );
        if maintainer_only && !tuning.lru_maintainer {
            continue;
        }
        reply::stat_u64(out, name, value);
        if let Some(f) = flash.as_ref() {
            match name {
                "get_flushed" => flash_reads(f, out),
                "log_watchers" => flash_store(sh, f, out),
                _ => {}
            }
        }
        // memcached lists idle_kicks (after auth_errors) only with -o idle_timeout.
        if name == "auth_errors" && sh.settings.idle_timeout != 0 {
            reply::stat_u64(out, "idle_kicks", t.idle_kicks);
        }
        if name == "hash_is_expanding" {
            if tuning.slab_reassign {
                // Nothing is reassigned: segments move between size classes through
                // eviction (see the module comment), so these count nothing.
                for name in [
                    "slab_reassign_rescues",
                    "slab_reassign_chunk_rescues",
                    "slab_reassign_inline_reclaim",
                    "slab_reassign_busy_items",
                    "slab_reassign_busy_deletes",
                    "slab_reassign_busy_nomem",
                ] {
                    reply::stat_u64(out, name, 0);
                }
                reply::stat_str(out, "slab_reassign_last_busy_status", "none");
                reply::stat_u64(out, "slab_reassign_running", 0);
                reply::stat_u64(out, "slabs_moved", 0);
            }
            if crawler {
                reply::stat_u64(out, "lru_crawler_running", u64::from(sh.crawler.running()));
                reply::stat_u64(out, "lru_crawler_starts", 0);
            }
            if tuning.lru_maintainer {
                reply::stat_u64(out, "lru_maintainer_juggles", 0);
            }
        }
    }
    // Only with a memory file (`-e`), as memcached prints its extstore keys only with
    // extstore: segments its filesystem had no room for (the cache evicts instead).
    if sh.settings.memory_file.is_some() {
        reply::stat_u64(out, "memory_file_full", st.memory_file_full);
    }
}

/// memcached's per-thread flash read counters, after `get_flushed` as memcached lists them.
fn flash_reads(f: &FlashStats, out: &mut Vec<u8>) {
    reply::stat_u64(out, "get_extstore", f.get);
    // Reads are served in the connection's turn (no queue to abort or run out of).
    reply::stat_u64(out, "get_aborted_extstore", 0);
    reply::stat_u64(out, "get_oom_extstore", 0);
    reply::stat_u64(out, "recache_from_extstore", f.recache);
    reply::stat_u64(out, "miss_from_extstore", f.miss);
    reply::stat_u64(out, "badcrc_from_extstore", f.badcrc);
}

/// memcached's `extstore_*` stats, after `log_watchers`, plus shoald's own after them.
fn flash_store(sh: &Shared, f: &FlashStats, out: &mut Vec<u8>) {
    let st = sh.store.stats();
    // memcached's figure is how close memory is to pushing items to flash; here, how
    // full memory is (eviction, which feeds flash, starts at 1.00).
    let pressure =
        st.segments_allocated as f64 / (st.limit_maxbytes / st.segment_size.max(1)).max(1) as f64;
    reply::stat_str(
        out,
        "extstore_memory_pressure",
        &format!("{:.2}", pressure.min(1.0)),
    );
    for (name, value) in [
        // Compaction never loses a value: one it cannot move now waits for the next pass.
        ("extstore_compact_lost", 0),
        ("extstore_compact_rescues", f.compact_rescues),
        ("extstore_compact_resc_cold", f.compact_resc_cold),
        ("extstore_compact_resc_old", f.compact_resc_old),
        ("extstore_compact_skipped", f.compact_skipped),
        ("extstore_page_allocs", f.page_allocs),
        ("extstore_page_evictions", f.page_evictions),
        ("extstore_page_reclaims", f.page_reclaims),
        ("extstore_pages_free", f.pages_free),
        ("extstore_pages_used", f.pages_used),
        ("extstore_objects_evicted", f.objects_evicted),
        ("extstore_objects_read", f.objects_read),
        ("extstore_objects_written", f.objects_written),
        ("extstore_objects_used", f.objects_used),
        ("extstore_bytes_evicted", f.bytes_evicted),
        ("extstore_bytes_written", f.bytes_written),
        ("extstore_bytes_read", f.bytes_read),
        ("extstore_bytes_used", f.bytes_used),
        ("extstore_bytes_fragmented", f.bytes_fragmented),
        ("extstore_limit_maxbytes", f.limit_maxbytes),
        ("extstore_io_queue", f.io_queue),
        // shoald's own: writes that failed (their values became misses at once), values
        // evicted rather than flushed because every write buffer was busy, and values
        // moved to flash by `ext_item_age` rather than by memory pressure.
        ("extstore_write_errors", f.write_errors),
        ("extstore_write_refused", f.write_refused),
        ("extstore_flushed_by_age", f.flushed_by_age),
    ] {
        reply::stat_u64(out, name, value);
    }
}

/// `stats extstore`: each page's version and live bytes, as memcached lists them (its
/// buckets are always 0 here: shoald has one).
fn extstore_pages(w: &Worker, out: &mut Vec<u8>) {
    let Some(flash) = w.shared.store.flash() else {
        return;
    };
    for p in flash.stats().page_table {
        // memcached's version of a free page is 0 (tools count free pages by it); shoald
        // keeps a free page's version, so that stubs of its old values never match it.
        let version = if p.state == "free" {
            0
        } else {
            u64::from(p.version)
        };
        reply::stat_u64(out, &format!("{}:version", p.page), version);
        reply::stat_u64(out, &format!("{}:bytes", p.page), p.bytes);
        reply::stat_u64(out, &format!("{}:bucket", p.page), u64::from(p.bucket));
        reply::stat_u64(
            out,
            &format!("{}:free_bucket", p.page),
            u64::from(p.free_bucket),
        );
    }
}

/// memcached's `hash_power_level`, the power of two of its hash table's buckets, for an
/// index of `buckets` buckets in all. shoald's index is sharded and each shard grows on
/// its own, so the total need not be a power of two; this is its power rounded down. As
/// in memcached, `-o hashpower=N` starts it at N, and it grows with the items (at one
/// item per bucket, where memcached grows at 1.5). `hash_bytes` is the index's real size
/// (4-byte buckets, where memcached's are 8).
fn hash_power_level(buckets: u64) -> u64 {
    match buckets {
        0 => 0,
        b => u64::from(b.ilog2()),
    }
}

/// `stats settings`: every line memcached 1.6 prints, in its order and under its names,
/// with shoald's values (monitoring such as memcached_exporter reads several of them).
/// Options shoald accepts without effect show what was set; the extstore lines appear
/// only when an `ext_*` option was given, as a memcached built without extstore omits
/// them. shoald's own lines follow memcached's.
/// `stats settings`' lines.
pub fn settings(sh: &Shared, out: &mut Vec<u8>) {
    let s = &sh.settings;
    // The values `slabs automove` and `lru tune|mode|temp_ttl` last set, as memcached
    // reports them.
    let t = &sh.tuning.lock().clone();
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let u64s = |out: &mut Vec<u8>, name: &str, v: u64| reply::stat_u64(out, name, v);
    let strs = |out: &mut Vec<u8>, name: &str, v: &str| reply::stat_str(out, name, v);
    // memcached prints an unset path with printf's "(null)".
    let path_or_null = |p: &Option<std::path::PathBuf>| {
        p.as_ref()
            .map_or_else(|| "(null)".to_string(), |p| p.display().to_string())
    };
    // The limit in force: `cache_memlimit` changes it at run time, as in memcached.
    u64s(out, "maxbytes", sh.store.stats().limit_maxbytes);
    u64s(out, "maxconns", s.conn_limit as u64);
    // memcached prints the -p and -U values: 0 for off, -1 for any free port.
    let port_stat = |p: Option<u16>| match p {
        None => "0".to_string(),
        Some(0) => "-1".to_string(),
        Some(p) => p.to_string(),
    };
    strs(out, "tcpport", &port_stat(s.port));
    // 0 when no UDP socket is open (a unix socket turns the network off).
    let udp = s.udp_port.filter(|_| sh.udp_label.is_some());
    strs(out, "udpport", &port_stat(udp));
    strs(out, "inter", &s.listen.to_string());
    u64s(
        out,
        "verbosity",
        sh.verbosity.load(Ordering::Relaxed) as u64,
    );
    u64s(out, "oldest", 0);
    strs(out, "evictions", if s.evictions { "on" } else { "off" });
    let domain = s
        .unix_socket
        .as_ref()
        .map_or_else(|| "NULL".to_string(), |p| p.display().to_string());
    strs(out, "domain_socket", &domain);
    strs(out, "umask", &format!("{:o}", s.unix_mask));
    strs(out, "shutdown_command", yes_no(s.shutdown_enabled));
    strs(out, "growth_factor", &format!("{:.2}", t.growth_factor));
    u64s(out, "chunk_size", u64::from(t.chunk_size));
    u64s(out, "num_threads", s.threads as u64);
    u64s(out, "num_threads_per_udp", s.threads as u64);
    strs(out, "stat_key_prefix", &s.prefix_delimiter.to_string());
    strs(out, "detail_enabled", yes_no(s.detail_enabled));
    u64s(out, "reqs_per_event", s.reqs_per_event as u64);
    strs(out, "cas_enabled", yes_no(s.cas_enabled));
    u64s(out, "tcp_backlog", u64::from(s.backlog));
    strs(out, "binding_protocol", s.protocol.stat_name());
    strs(out, "auth_enabled_sasl", yes_no(s.sasl_pwdb.is_some()));
    // memcached shows the auth file's path when -Y is on.
    let ascii_auth = s
        .auth_file
        .as_ref()
        .map_or_else(|| "no".to_string(), |p| p.display().to_string());
    strs(out, "auth_enabled_ascii", &ascii_auth);
    u64s(out, "item_size_max", s.max_item_size as u64);
    strs(out, "maxconns_fast", yes_no(s.maxconns_fast));
    u64s(out, "hashpower_init", u64::from(s.hashpower.unwrap_or(0)));
    strs(out, "slab_reassign", yes_no(t.slab_reassign));
    u64s(out, "slab_automove", u64::from(t.slab_automove));
    strs(
        out,
        "slab_automove_ratio",
        &format!("{:.2}", t.slab_automove_ratio),
    );
    u64s(
        out,
        "slab_automove_window",
        u64::from(t.slab_automove_window),
    );
    u64s(out, "slab_chunk_max", u64::from(t.slab_chunk_max()));
    // Live, as in memcached, where `lru_crawler enable|disable` changes this setting.
    strs(out, "lru_crawler", yes_no(sh.crawler.enabled()));
    let crawler = &sh.crawler;
    u64s(
        out,
        "lru_crawler_sleep",
        u64::from(crawler.sleep_us.load(Ordering::Relaxed)),
    );
    u64s(
        out,
        "lru_crawler_tocrawl",
        u64::from(crawler.tocrawl.load(Ordering::Relaxed)),
    );
    u64s(out, "tail_repair_time", u64::from(t.tail_repair_time));
    strs(out, "flush_enabled", yes_no(s.flush_enabled));
    strs(out, "dump_enabled", yes_no(s.dump_enabled));
    strs(out, "hash_algorithm", s.hash_algorithm.name());
    strs(out, "lru_maintainer_thread", yes_no(t.lru_maintainer));
    strs(out, "lru_segmented", yes_no(t.lru_segmented));
    u64s(out, "hot_lru_pct", u64::from(t.hot_lru_pct));
    u64s(out, "warm_lru_pct", u64::from(t.warm_lru_pct));
    strs(out, "hot_max_factor", &format!("{:.2}", t.hot_max_factor));
    strs(out, "warm_max_factor", &format!("{:.2}", t.warm_max_factor));
    strs(out, "temp_lru", yes_no(t.temp_lru));
    u64s(out, "temporary_ttl", u64::from(t.temporary_ttl));
    u64s(out, "idle_timeout", s.idle_timeout);
    u64s(out, "watcher_logbuf_size", u64::from(t.watcher_logbuf_size));
    u64s(out, "worker_logbuf_size", u64::from(t.worker_logbuf_size));
    u64s(out, "read_buf_mem_limit", s.read_buf_mem_limit as u64);
    strs(out, "track_sizes", yes_no(t.track_sizes));
    strs(out, "inline_ascii_response", "no");
    let e = &s.extstore;
    if e.configured {
        // With a flash tier, the values it runs with: the `extstore` command may have
        // changed them, and memcached shows its settings as they are now.
        let live = sh.store.flash().map(|f| f.settings());
        let now = live.unwrap_or(shoal_store::flash::FlashSettings {
            item_size: u64::from(e.item_size),
            item_age: e.item_age,
            low_ttl: e.low_ttl,
            recache_rate: e.recache_rate,
            compact_under: e.compact_under,
            drop_under: e.drop_under,
            max_frag: e.max_frag,
            drop_unread: e.drop_unread,
        });
        u64s(out, "ext_item_size", now.item_size);
        u64s(out, "ext_item_age", u64::from(now.item_age));
        u64s(out, "ext_low_ttl", u64::from(now.low_ttl));
        u64s(out, "ext_recache_rate", u64::from(now.recache_rate));
        u64s(out, "ext_wbuf_size", u64::from(e.wbuf_size));
        u64s(out, "ext_compact_under", u64::from(now.compact_under));
        u64s(out, "ext_drop_under", u64::from(now.drop_under));
        u64s(out, "ext_max_sleep", u64::from(e.max_sleep));
        strs(out, "ext_max_frag", &format!("{:.2}", now.max_frag));
        strs(
            out,
            "slab_automove_freeratio",
            &format!("{:.3}", e.slab_automove_freeratio),
        );
        strs(out, "ext_drop_unread", yes_no(now.drop_unread));
    }
    let ssl = &s.ssl;
    strs(out, "ssl_enabled", yes_no(s.tls.is_some()));
    strs(out, "ssl_chain_cert", &path_or_null(&ssl.chain_cert));
    strs(out, "ssl_key", &path_or_null(&ssl.key));
    u64s(out, "ssl_verify_mode", u64::from(ssl.verify_mode));
    u64s(out, "ssl_keyformat", u64::from(ssl.keyformat));
    strs(out, "ssl_ciphers", ssl.ciphers.as_deref().unwrap_or("NULL"));
    let ca = ssl
        .ca_cert
        .as_ref()
        .map_or_else(|| "NULL".to_string(), |p| p.display().to_string());
    strs(out, "ssl_ca_cert", &ca);
    u64s(out, "ssl_wbuf_size", u64::from(ssl.wbuf_size));
    strs(out, "ssl_session_cache", yes_no(ssl.session_cache));
    strs(out, "ssl_kernel_tls", yes_no(ssl.kernel_tls));
    strs(out, "ssl_min_version", ssl.min_version_name());
    let napi = s
        .napi_ids
        .map_or_else(|| "(null)".to_string(), |n| n.to_string());
    strs(out, "num_napi_ids", &napi);
    strs(out, "memory_file", &path_or_null(&s.memory_file));
    // shoald's own, after every memcached key (tools read those in order).
    u64s(out, "segment_size", sh.store.stats().segment_size);
    strs(out, "io_uring", yes_no(sh.io_uring));
    strs(
        out,
        "event_loop",
        match sh.executor() {
            shoal_net::Executor::EventLoop => "epoll",
            shoal_net::Executor::Tokio => "tokio",
        },
    );
    match s.zero_copy_min {
        usize::MAX => strs(out, "zero_copy_min", "off"),
        n => reply::stat_u64(out, "zero_copy_min", n as u64),
    }
    strs(out, "hugepages", yes_no(sh.store.huge_page_advised()));
}

/// `stats items`: every memcached slab class holding live items (see the module
/// documentation), as memcached prints only classes with items.
pub fn items(sh: &Shared, out: &mut Vec<u8>) {
    let classes = sh.store.class_stats();
    if classes.iter().all(|c| c.items == 0) {
        return;
    }
    // The oldest access per class among the items the next eviction takes (shoal-store).
    let (_, ages) = sh.store.tail_ages();
    // memcached prints the TEMPORARY LRU's count after COLD's only while it has one
    // (`temp_lru`, from `-o temporary_ttl` or `lru temp_ttl`); shoald keeps every item in
    // one queue, counted as COLD, so the TEMPORARY LRU is always empty.
    let (temp_lru, maintainer) = {
        let t = sh.tuning.lock();
        (t.temp_lru, t.lru_maintainer)
    };
    let requests = sh.stats.class_totals();
    for c in classes.iter().filter(|c| c.items > 0) {
        let age = ages.get(c.class).copied().unwrap_or(0);
        let hits = requests.get(c.class).map_or(0, |r| r.get_hits);
        let numbers: [(&str, u64); 28] = [
            ("number", c.items),
            ("number_hot", 0),
            ("number_warm", 0),
            ("number_cold", c.items),
            ("age_hot", 0),
            ("age_warm", 0),
            ("age", u64::from(age)),
            ("mem_requested", c.requested),
            ("evicted", c.evicted),
            ("evicted_nonzero", c.evicted_nonzero),
            ("evicted_time", u64::from(c.evicted_time)),
            ("outofmemory", c.outofmemory),
            ("tailrepairs", 0),
            ("reclaimed", c.reclaimed),
            ("expired_unfetched", c.expired_unfetched),
            ("evicted_unfetched", c.evicted_unfetched),
            ("evicted_active", c.evicted_active),
            ("crawler_reclaimed", c.crawler_reclaimed),
            ("crawler_items_checked", 0),
            ("lrutail_reflocked", 0),
            ("moves_to_cold", 0),
            ("moves_to_warm", 0),
            ("moves_within_lru", 0),
            ("direct_reclaims", 0),
            ("hits_to_hot", 0),
            ("hits_to_warm", 0),
            ("hits_to_cold", hits),
            ("hits_to_temp", 0),
        ];
        let class = c.class;
        for (name, value) in numbers {
            // As in memcached, the LRU maintainer's figures are listed only while it runs.
            let maintainer_only = matches!(
                name,
                "number_hot"
                    | "number_warm"
                    | "number_cold"
                    | "age_hot"
                    | "age_warm"
                    | "evicted_active"
                    | "moves_to_cold"
                    | "moves_to_warm"
                    | "moves_within_lru"
                    | "direct_reclaims"
                    | "hits_to_hot"
                    | "hits_to_warm"
                    | "hits_to_cold"
                    | "hits_to_temp"
            );
            if maintainer_only && !maintainer {
                continue;
            }
            reply::stat_u64(out, &format!("items:{class}:{name}"), value);
            if name == "number_cold" && temp_lru {
                reply::stat_u64(out, &format!("items:{class}:number_temp"), 0);
            }
        }
    }
}

/// `stats slabs`: every memcached slab class that has held an item since the start (see
/// the module documentation), then the totals memcached ends with.
pub fn slabs(sh: &Shared, out: &mut Vec<u8>) {
    let st = sh.store.stats();
    let seg = st.segment_size.max(1);
    let mut active = 0u64;
    let requests = sh.stats.class_totals();
    for c in sh.store.class_stats().iter().filter(|c| c.used) {
        active += 1;
        let r = requests.get(c.class).copied().unwrap_or_default();
        // `mem_requested` is deliberately absent: memcached 1.6 prints it in `stats
        // items` only, and memcached_exporter reports both places under one metric, so
        // printing it here too would make the exporter fail the scrape on a duplicate.
        let numbers: [(&str, u64); 15] = [
            ("chunk_size", u64::from(c.chunk_size)),
            ("chunks_per_page", u64::from(c.per_page)),
            // The segment memory the class's live items take, in segments, rounded up.
            ("total_pages", c.stored.div_ceil(seg)),
            // A chunk is an item: shoald carves no chunks in advance.
            ("total_chunks", c.items),
            ("used_chunks", c.items),
            ("free_chunks", 0),
            ("free_chunks_end", 0),
            ("get_hits", r.get_hits),
            ("cmd_set", r.cmd_set),
            ("delete_hits", r.delete_hits),
            ("incr_hits", r.incr_hits),
            ("decr_hits", r.decr_hits),
            ("cas_hits", r.cas_hits),
            ("cas_badval", r.cas_badval),
            ("touch_hits", r.touch_hits),
        ];
        let class = c.class;
        for (name, value) in numbers {
            reply::stat_u64(out, &format!("{class}:{name}"), value);
        }
    }
    reply::stat_u64(out, "active_slabs", active);
    reply::stat_u64(
        out,
        "total_malloced",
        st.segments_allocated
            .saturating_mul(st.segment_size)
            .saturating_add(st.counted_allocated),
    );
}

/// `stats eviction`: shoald's own eviction counters, which memcached has no key for (see
/// shoal-store's `evict`). They are a group of their own rather than lines after
/// memcached's in `stats`, so that `stats` has exactly memcached's keys for the same
/// command line (tools and memcached's own t/stats.t count them).
fn eviction(sh: &Shared, out: &mut Vec<u8>) {
    let st = sh.store.stats();
    let numbers = [
        ("evictions_promoted", st.evict_promoted),
        ("evictions_promoted_bytes", st.evict_promoted_bytes),
        ("evictions_retained", st.evict_retained),
        ("evictions_retained_bytes", st.evict_retained_bytes),
        ("evictions_compactions", st.compactions),
        ("evictions_compacted_items", st.compacted_items),
        ("ghost_hits", st.ghost_hits),
        ("ghost_bytes", st.ghost_bytes),
        ("segments_probation", st.segments_probation),
        ("segments_main", st.segments_main),
        ("segments_stubs", st.segments_stubs),
    ];
    for (name, value) in numbers {
        reply::stat_u64(out, name, value);
    }
}

/// `stats conns`: memcached lists its listening sockets (state `conn_listening`, idle
/// since the start) and then every connection, with what it is doing: `conn_parse_cmd`
/// for the one asking, `conn_nread` for one sending a value, `conn_read` for the rest.
fn conns(w: &Worker, out: &mut Vec<u8>) {
    let now = w.shared.store.clock().now();
    for (i, label) in w.shared.listen_labels.iter().enumerate() {
        let id = i + 1;
        reply::stat_str(out, &format!("{id}:addr"), label);
        reply::stat_str(out, &format!("{id}:state"), "conn_listening");
        reply::stat_u64(
            out,
            &format!("{id}:secs_since_last_cmd"),
            u64::from(w.shared.store.clock().uptime()),
        );
    }
    if let Some(label) = &w.shared.udp_label {
        // memcached lists its UDP socket as an idle connection, with no listen_addr.
        let id = w.shared.udp_conn_id();
        reply::stat_str(out, &format!("{id}:addr"), label);
        reply::stat_str(out, &format!("{id}:state"), "conn_read");
        reply::stat_u64(
            out,
            &format!("{id}:secs_since_last_cmd"),
            u64::from(w.shared.store.clock().uptime()),
        );
    }
    for c in w.shared.conns.snapshot() {
        let id = c.id;
        reply::stat_str(out, &format!("{id}:addr"), &c.addr);
        reply::stat_str(out, &format!("{id}:listen_addr"), &w.shared.listen_label);
        let state = if id == w.current_conn.get() {
            "conn_parse_cmd"
        } else {
            c.state()
        };
        reply::stat_str(out, &format!("{id}:state"), state);
        let last = c.last_cmd.load(Ordering::Relaxed);
        reply::stat_u64(
            out,
            &format!("{id}:secs_since_last_cmd"),
            u64::from(now.saturating_sub(last)),
        );
    }
}

/// `stats detail on|off|dump`; as memcached, only the word after `detail` counts.
fn detail(w: &Worker, args: &[u8], out: &mut Vec<u8>) {
    let prefixes = &w.shared.prefixes;
    let word = args
        .split(|&b| b == b' ')
        .find(|t| !t.is_empty())
        .unwrap_or(&[]);
    match word {
        b"on" => {
            prefixes.set_enabled(true);
            out.extend_from_slice(reply::OK);
        }
        b"off" => {
            prefixes.set_enabled(false);
            out.extend_from_slice(reply::OK);
        }
        b"dump" => prefixes.dump(out),
        _ => out.extend_from_slice(b"CLIENT_ERROR usage: stats detail on|off|dump\r\n"),
    }
}
