//! `flush_all`, `version`, `verbosity`, `shutdown`, `cache_memlimit`, `debugtime`, and binary
//! `FLUSH` and `VERSION` through the same functions.

use super::{respond, Flow};
use crate::config::VERSION;
use crate::stats::ThreadStats;
use crate::worker::Worker;
use shoal_protocol::binary::{self, Attrs, Status};
use shoal_protocol::{reply, ProtocolError};
use std::sync::atomic::Ordering;

/// A flush refused because `-F` disabled flushing.
#[derive(thiserror::Error, Debug, Clone, Copy, PartialEq, Eq)]
#[error("flush_all is disabled (-F)")]
pub struct FlushDisabled;

/// Invalidates every item now or after `delay` seconds (an absolute Unix time if over 30
/// days, as for expiry times), for every protocol; refused with `-F`. Counted in
/// `cmd_flush`, and a refusal too when `count_refused`: memcached's text `flush_all`
/// counts before it checks `-F` ("we log it on stats"), its binary `FLUSH` after.
pub fn flush(w: &Worker, delay: i64, count_refused: bool) -> Result<(), FlushDisabled> {
    if !w.shared.settings.flush_enabled {
        if count_refused {
            ThreadStats::incr(&w.stats.cmd_flush);
        }
        return Err(FlushDisabled);
    }
    ThreadStats::incr(&w.stats.cmd_flush);
    let store = &w.shared.store;
    // memcached invalidates items stored up to one second before the time asked for
    // (`oldest_live = realtime(delay) - 1`), so it flushes a second early: `flush_all 1`
    // empties the cache at once.
    let secs = if delay > 0 {
        store
            .clock()
            .expiry(delay)
            .saturating_sub(store.clock().now())
            .saturating_sub(1)
    } else {
        0
    };
    store.flush_all(secs);
    Ok(())
}

/// `debugtime <seconds|p|r>`, memcached-debug's clock control, when the operator turned
/// it on with `-o debug_time`: moves the clock `seconds` forward, pauses it (`p`) or
/// lets it run again (`r`), answering `OK`. Without `-o debug_time`, or with no argument
/// or one that is none of these (a negative number included), `ERROR`, which is also
/// what release memcached answers to a command it does not have.
pub fn debug_time(w: &Worker, args: &[u8], out: &mut Vec<u8>) {
    let clock = w.shared.store.clock();
    let sub = args.split(|&b| b == b' ').next().unwrap_or_default();
    let done = w.shared.settings.debug_time
        && match sub {
            b"p" => {
                clock.pause(true);
                true
            }
            b"r" => {
                clock.pause(false);
                true
            }
            _ => match std::str::from_utf8(sub)
                .ok()
                .and_then(|n| n.parse::<u32>().ok())
            {
                Some(secs) => {
                    clock.shift(secs);
                    true
                }
                None => false,
            },
        };
    out.extend_from_slice(if done { reply::OK } else { reply::ERROR });
}

/// `flush_all [delay]`: [`flush`], answered in text. Like every memcached reply, the
/// refusal is suppressed by noreply.
pub fn flush_all(w: &Worker, delay: i64, noreply: bool, out: &mut Vec<u8>) {
    let text = match flush(w, delay, true) {
        Ok(()) => reply::OK,
        Err(FlushDisabled) => reply::FLUSH_NOT_ALLOWED,
    };
    respond(out, noreply, text);
}

/// Binary `FLUSH`/`FLUSHQ`: [`flush`]; a refusal is an authentication error (memcached).
pub fn flush_binary(w: &Worker, attrs: &Attrs, delay: i64, out: &mut Vec<u8>) {
    match flush(w, delay, false) {
        Ok(()) => binary::reply::ok(out, attrs, 0),
        Err(FlushDisabled) => binary::reply::status(out, attrs, Status::AuthError),
    }
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

/// Binary `VERSION`: the same version string as the body.
pub fn version_binary(attrs: &Attrs, out: &mut Vec<u8>) {
    binary::reply::ok_with_value(out, attrs, 0, VERSION.as_bytes());
}

/// Changes how much is logged, for every protocol.
pub fn set_verbosity(w: &Worker, level: u32) {
    w.shared.verbosity.store(level as usize, Ordering::Relaxed);
}

/// `verbosity <level>`.
pub fn verbosity(w: &Worker, level: u32, noreply: bool, out: &mut Vec<u8>) {
    set_verbosity(w, level);
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
