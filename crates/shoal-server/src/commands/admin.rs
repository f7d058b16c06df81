//! `flush_all`, `version`, `verbosity`, `shutdown`, `cache_memlimit`.

use super::{respond, Flow};
use crate::config::VERSION;
use crate::stats::ThreadStats;
use crate::worker::Worker;
use shoal_protocol::{reply, ProtocolError};
use std::sync::atomic::Ordering;

/// `flush_all [delay]`: invalidates every item now or after `delay` seconds (an absolute
/// Unix time if over 30 days, as for expiry times). Refused with `-F`.
/// memcached counts every `flush_all` in `cmd_flush`, even one `-F` refuses ("we log it
/// on stats").
pub fn flush_all(w: &Worker, delay: i64, noreply: bool, out: &mut Vec<u8>) {
    ThreadStats::incr(&w.stats.cmd_flush);
    if !w.shared.settings.flush_enabled {
        // Like every memcached reply, the refusal is suppressed by noreply.
        respond(out, noreply, reply::FLUSH_NOT_ALLOWED);
        return;
    }
    let store = &w.shared.store;
    let secs = if delay > 0 {
        store
            .clock()
            .expiry(delay)
            .saturating_sub(store.clock().now())
    } else {
        0
    };
    store.flush_all(secs);
    respond(out, noreply, reply::OK);
}

/// `flush_all <not a number>`: memcached counts it and checks `-F` before it reads the
/// delay, so the refusal wins over the bad argument.
pub fn flush_all_invalid_delay(w: &Worker, noreply: bool, out: &mut Vec<u8>) {
    ThreadStats::incr(&w.stats.cmd_flush);
    let text = if w.shared.settings.flush_enabled {
        ProtocolError::InvalidExptime.reply()
    } else {
        reply::FLUSH_NOT_ALLOWED
    };
    respond(out, noreply, text);
}

/// `version`.
pub fn version(out: &mut Vec<u8>) {
    reply::version(out, VERSION.as_bytes());
}

/// `verbosity <level>`: changes how much is logged.
pub fn verbosity(w: &Worker, level: u32, noreply: bool, out: &mut Vec<u8>) {
    w.shared.verbosity.store(level as usize, Ordering::Relaxed);
    respond(out, noreply, reply::OK);
}

/// `shutdown [graceful]`: with `-A`, stops the server gracefully; otherwise an error.
/// `graceful` is memcached's SIGUSR1 equivalent: it also saves a `-e` memory file's
/// restart metadata.
pub fn shutdown(w: &Worker, graceful: bool, out: &mut Vec<u8>) -> Flow {
    if !w.shared.settings.shutdown_enabled {
        out.extend_from_slice(reply::SHUTDOWN_NOT_ENABLED);
        return Flow::Continue;
    }
    tracing::info!("shutdown requested by a client");
    if graceful {
        w.shared.request_restart_save();
    }
    w.shared.begin_shutdown();
    Flow::Close
}

/// `shutdown <bad mode>`: memcached checks `-A` before it looks at the mode.
pub fn shutdown_invalid_mode(w: &Worker, out: &mut Vec<u8>) {
    out.extend_from_slice(if w.shared.settings.shutdown_enabled {
        ProtocolError::InvalidShutdownMode.reply()
    } else {
        reply::SHUTDOWN_NOT_ENABLED
    });
}

/// `cache_memlimit <megabytes>`: changes the memory limit at run time.
pub fn cache_memlimit(w: &Worker, megabytes: u64, noreply: bool, out: &mut Vec<u8>) {
    let bytes = usize::try_from(megabytes)
        .ok()
        .and_then(|m| m.checked_mul(1 << 20));
    match bytes {
        Some(b) if b >= w.shared.store.max_item_bytes() => {
            w.shared.store.set_memory_limit(b);
            respond(out, noreply, reply::OK);
        }
        _ => respond(out, noreply, reply::MEMLIMIT_ADJUST_FAILED),
    }
}
