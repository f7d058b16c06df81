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
        StatsGroup::Sizes => reply::stat_str(out, "sizes_status", "disabled"),
        StatsGroup::Conns => conns(w, out),
        StatsGroup::Reset => {
            w.shared.stats.reset();
            out.extend_from_slice(reply::RESET);
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

fn settings(w: &Worker, out: &mut Vec<u8>) {
    let s = &w.shared.settings;
    let onoff = |b: bool| if b { "yes" } else { "no" };
    reply::stat_u64(out, "maxbytes", s.memory_limit as u64);
    reply::stat_u64(out, "maxconns", s.conn_limit as u64);
    reply::stat_u64(out, "tcpport", u64::from(s.port));
    reply::stat_u64(out, "udpport", 0);
    reply::stat_str(out, "inter", &s.listen.to_string());
    reply::stat_u64(
        out,
        "verbosity",
        w.shared.verbosity.load(Ordering::Relaxed) as u64,
    );
    reply::stat_str(out, "evictions", if s.evictions { "on" } else { "off" });
    let domain = s
        .unix_socket
        .as_ref()
        .map_or_else(|| "NULL".to_string(), |p| p.display().to_string());
    reply::stat_str(out, "domain_socket", &domain);
    reply::stat_str(out, "umask", &format!("{:o}", s.unix_mask));
    reply::stat_u64(out, "num_threads", s.threads as u64);
    reply::stat_u64(out, "reqs_per_event", s.reqs_per_event as u64);
    reply::stat_str(out, "cas_enabled", onoff(s.cas_enabled));
    reply::stat_u64(out, "tcp_backlog", u64::from(s.backlog));
    reply::stat_str(out, "binding_protocol", "ascii");
    reply::stat_u64(out, "item_size_max", s.max_item_size as u64);
    reply::stat_str(out, "flush_enabled", onoff(s.flush_enabled));
    reply::stat_str(out, "shutdown_command", onoff(s.shutdown_enabled));
    reply::stat_u64(out, "idle_timeout", s.idle_timeout);
    reply::stat_str(out, "lru_crawler", onoff(s.lru_crawler));
    reply::stat_u64(out, "segment_size", w.shared.store.stats().segment_size);
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
