//! `stats` and its groups.

use crate::config::VERSION;
use crate::server::Worker;
use shoal_protocol::{reply, StatsGroup};
use std::sync::atomic::Ordering;

/// `stats [group]`.
pub fn stats(w: &Worker, group: StatsGroup<'_>, out: &mut Vec<u8>) {
    match group {
        StatsGroup::General => general(w, out),
        StatsGroup::Settings => settings(w, out),
        StatsGroup::Items => items(w, out),
        StatsGroup::Slabs => slabs(w, out),
        StatsGroup::Sizes => super::crawler::sizes(w, out),
        StatsGroup::Conns => conns(w, out),
        StatsGroup::Reset => {
            w.shared.stats.reset();
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
    let ok = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } == 0;
    if !ok {
        return ("0.000000".into(), "0.000000".into());
    }
    let fmt = |t: libc::timeval| format!("{}.{:06}", t.tv_sec, t.tv_usec);
    (fmt(ru.ru_utime), fmt(ru.ru_stime))
}

fn general(w: &Worker, out: &mut Vec<u8>) {
    let sh = &w.shared;
    let t = sh.stats.totals();
    let st = sh.store.stats();
    let clock = sh.store.clock();
    let u64s = |out: &mut Vec<u8>, name: &str, v: u64| reply::stat_u64(out, name, v);
    u64s(out, "pid", u64::from(std::process::id()));
    u64s(out, "uptime", u64::from(clock.uptime()));
    reply::stat_i64(out, "time", clock.unix_now());
    reply::stat_str(out, "version", VERSION);
    u64s(out, "pointer_size", 64);
    let (user, sys) = rusage();
    reply::stat_str(out, "rusage_user", &user);
    reply::stat_str(out, "rusage_system", &sys);
    u64s(out, "max_connections", sh.settings.conn_limit as u64);
    u64s(
        out,
        "curr_connections",
        sh.curr_connections.load(Ordering::Relaxed) as u64,
    );
    u64s(
        out,
        "total_connections",
        sh.total_connections.load(Ordering::Relaxed),
    );
    u64s(
        out,
        "rejected_connections",
        sh.rejected_connections.load(Ordering::Relaxed),
    );
    u64s(
        out,
        "connection_structures",
        sh.curr_connections.load(Ordering::Relaxed) as u64,
    );
    u64s(out, "cmd_get", t.cmd_get);
    u64s(out, "cmd_set", t.cmd_set);
    u64s(out, "cmd_flush", t.cmd_flush);
    u64s(out, "cmd_touch", t.cmd_touch);
    u64s(out, "cmd_meta", t.cmd_meta);
    u64s(out, "get_hits", t.get_hits);
    u64s(out, "get_misses", t.get_misses);
    u64s(out, "get_expired", st.get_expired);
    u64s(out, "delete_misses", t.delete_misses);
    u64s(out, "delete_hits", t.delete_hits);
    u64s(out, "incr_misses", t.incr_misses);
    u64s(out, "incr_hits", t.incr_hits);
    u64s(out, "decr_misses", t.decr_misses);
    u64s(out, "decr_hits", t.decr_hits);
    u64s(out, "cas_misses", t.cas_misses);
    u64s(out, "cas_hits", t.cas_hits);
    u64s(out, "cas_badval", t.cas_badval);
    u64s(out, "touch_hits", t.touch_hits);
    u64s(out, "touch_misses", t.touch_misses);
    u64s(out, "auth_cmds", t.auth_cmds);
    u64s(out, "auth_errors", t.auth_errors);
    u64s(out, "bytes_read", t.bytes_read);
    u64s(out, "bytes_written", t.bytes_written);
    u64s(out, "limit_maxbytes", st.limit_maxbytes);
    u64s(out, "accepting_conns", u64::from(!sh.stopping()));
    u64s(out, "threads", sh.settings.threads as u64);
    u64s(out, "hash_bytes", st.index_bytes);
    u64s(out, "bytes", st.bytes);
    u64s(out, "curr_items", st.curr_items);
    u64s(out, "total_items", st.total_items);
    u64s(out, "expired_unfetched", st.expired_unfetched);
    u64s(out, "evicted_unfetched", st.evicted_unfetched);
    u64s(out, "evictions", st.evictions);
    u64s(out, "reclaimed", st.reclaimed);
}

/// `stats settings`: every line memcached 1.6 prints, in its order and under its names,
/// with shoald's values (monitoring such as memcached_exporter reads several of them).
/// Options shoald accepts without effect show what was set; the extstore lines appear
/// only when an `ext_*` option was given, as a memcached built without extstore omits
/// them. shoald's own lines follow memcached's.
fn settings(w: &Worker, out: &mut Vec<u8>) {
    let s = &w.shared.settings;
    let t = &s.tunables;
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let u64s = |out: &mut Vec<u8>, name: &str, v: u64| reply::stat_u64(out, name, v);
    let strs = |out: &mut Vec<u8>, name: &str, v: &str| reply::stat_str(out, name, v);
    // memcached prints an unset path with printf's "(null)".
    let path_or_null = |p: &Option<std::path::PathBuf>| {
        p.as_ref()
            .map_or_else(|| "(null)".to_string(), |p| p.display().to_string())
    };
    u64s(out, "maxbytes", s.memory_limit as u64);
    u64s(out, "maxconns", s.conn_limit as u64);
    u64s(out, "tcpport", u64::from(s.port));
    // shoald serves no UDP whatever -U says.
    u64s(out, "udpport", 0);
    strs(out, "inter", &s.listen.to_string());
    u64s(
        out,
        "verbosity",
        w.shared.verbosity.load(Ordering::Relaxed) as u64,
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
    strs(out, "lru_crawler", yes_no(s.lru_crawler));
    u64s(out, "lru_crawler_sleep", u64::from(t.lru_crawler_sleep));
    u64s(out, "lru_crawler_tocrawl", u64::from(t.lru_crawler_tocrawl));
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
        u64s(out, "ext_item_size", u64::from(e.item_size));
        u64s(out, "ext_item_age", u64::from(e.item_age));
        u64s(out, "ext_low_ttl", u64::from(e.low_ttl));
        u64s(out, "ext_recache_rate", u64::from(e.recache_rate));
        u64s(out, "ext_wbuf_size", u64::from(e.wbuf_size));
        u64s(out, "ext_compact_under", u64::from(e.compact_under));
        u64s(out, "ext_drop_under", u64::from(e.drop_under));
        u64s(out, "ext_max_sleep", u64::from(e.max_sleep));
        strs(out, "ext_max_frag", &format!("{:.2}", e.max_frag));
        strs(
            out,
            "slab_automove_freeratio",
            &format!("{:.3}", e.slab_automove_freeratio),
        );
        strs(out, "ext_drop_unread", yes_no(e.drop_unread));
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
    // shoald's own.
    u64s(out, "segment_size", w.shared.store.stats().segment_size);
}

fn items(w: &Worker, out: &mut Vec<u8>) {
    // Shoal has no slab classes: every item lives in one segment pool, reported as
    // class 1 so that tools reading per-class stats find the totals there.
    let st = w.shared.store.stats();
    if st.curr_items == 0 && st.total_items == 0 {
        return;
    }
    reply::stat_u64(out, "items:1:number", st.curr_items);
    reply::stat_u64(out, "items:1:evicted", st.evictions);
    reply::stat_u64(out, "items:1:evicted_unfetched", st.evicted_unfetched);
    reply::stat_u64(out, "items:1:expired_unfetched", st.expired_unfetched);
    reply::stat_u64(out, "items:1:reclaimed", st.reclaimed);
    reply::stat_u64(out, "items:1:outofmemory", 0);
}

fn slabs(w: &Worker, out: &mut Vec<u8>) {
    // One "slab class" whose pages are Shoal's segments.
    let st = w.shared.store.stats();
    if st.segments_allocated > 0 {
        reply::stat_u64(out, "1:chunk_size", st.segment_size);
        reply::stat_u64(out, "1:chunks_per_page", 1);
        reply::stat_u64(out, "1:total_pages", st.segments_allocated);
        reply::stat_u64(out, "1:total_chunks", st.segments_allocated);
        reply::stat_u64(
            out,
            "1:used_chunks",
            st.segments_allocated - st.segments_free,
        );
        reply::stat_u64(out, "1:free_chunks", st.segments_free);
        reply::stat_u64(out, "1:mem_requested", st.bytes);
    }
    reply::stat_u64(out, "active_slabs", u64::from(st.segments_allocated > 0));
    reply::stat_u64(
        out,
        "total_malloced",
        st.segments_allocated * st.segment_size,
    );
}

fn conns(w: &Worker, out: &mut Vec<u8>) {
    let now = w.shared.store.clock().now();
    for c in w.shared.conns.snapshot() {
        let id = c.id;
        reply::stat_str(out, &format!("{id}:addr"), &c.addr);
        reply::stat_str(out, &format!("{id}:listen_addr"), &w.shared.listen_label);
        let last = c.last_cmd.load(Ordering::Relaxed);
        reply::stat_u64(
            out,
            &format!("{id}:secs_since_last_cmd"),
            u64::from(now.saturating_sub(last)),
        );
    }
}

/// `stats detail on|off|dump`.
fn detail(w: &Worker, args: &[u8], out: &mut Vec<u8>) {
    let prefixes = &w.shared.prefixes;
    match args.trim_ascii() {
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
