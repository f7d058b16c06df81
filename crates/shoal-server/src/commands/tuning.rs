//! `slabs automove|reassign`, `lru tune|mode|temp_ttl` and `refresh_certs`, with
//! memcached 1.6's replies and order of checks.
//!
//! Shoal stores items in segments, not slab classes with LRU queues, so the slab and LRU
//! commands have nothing to steer: a valid command is accepted, the new value is what
//! `stats settings` reports from then on (as memcached's does), and nothing else changes.
//! `slabs reassign` validates its classes against the classes memcached would have with
//! the same `-n`, `-f`, `slab_chunk_max` and `slab_sizes`, and then answers `NOSPARE`:
//! no class ever holds a page that could move, since segments belong to no class.
//! `refresh_certs` really reloads the TLS certificate chain, key and CA file.

use super::respond;
use crate::config::Tunables;
use crate::worker::Worker;
use shoal_protocol::reply;

const BAD_FORMAT: &[u8] = b"CLIENT_ERROR bad command line format\r\n";

/// memcached's `sizeof(item)` on 64-bit platforms, the base of its class sizes.
const ITEM_HEADER: f64 = 48.0;
/// memcached's `CHUNK_ALIGN_BYTES`.
const CHUNK_ALIGN: u32 = 8;
/// memcached's `MAX_NUMBER_OF_SLAB_CLASSES`.
const MAX_SLAB_CLASSES: i64 = 64;

/// memcached's tokens after the command, and whether the last one is `noreply`
/// (`set_noreply_maybe`, which suppresses every reply of the command).
fn tokens(args: &[u8]) -> (Vec<&[u8]>, bool) {
    let t: Vec<&[u8]> = args
        .split(|&b| b == b' ')
        .filter(|t| !t.is_empty())
        .collect();
    let noreply = t.last().is_some_and(|l| *l == b"noreply");
    (t, noreply)
}

fn text(t: &[u8]) -> Option<&str> {
    std::str::from_utf8(t).ok()
}

/// memcached's `safe_strtoul` into 32 bits: digits (an optional `+`), no sign.
fn parse_u32(t: &[u8]) -> Option<u32> {
    text(t)?.parse().ok()
}

/// memcached's `safe_strtol` into 32 bits.
fn parse_i32(t: &[u8]) -> Option<i32> {
    text(t)?.parse().ok()
}

/// memcached's `safe_strtod`: a finite decimal number.
fn parse_f64(t: &[u8]) -> Option<f64> {
    text(t)?.parse::<f64>().ok().filter(|f| f.is_finite())
}

/// The id of memcached's largest slab class (`power_largest`) for these settings: how
/// `slabs_init` counts classes, so `slabs reassign` accepts the same ids.
pub fn largest_class(t: &Tunables) -> i64 {
    if !t.slab_sizes.is_empty() {
        return (t.slab_sizes.len() as i64).min(MAX_SLAB_CLASSES - 2) + 1;
    }
    let chunk_max = f64::from(t.slab_chunk_max());
    let factor = t.growth_factor;
    let mut size = (ITEM_HEADER + f64::from(t.chunk_size)) as u32;
    let mut id = 1;
    while id < MAX_SLAB_CLASSES - 1 {
        if f64::from(size) >= chunk_max / factor {
            break;
        }
        if !size.is_multiple_of(CHUNK_ALIGN) {
            size += CHUNK_ALIGN - size % CHUNK_ALIGN;
        }
        // memcached multiplies in floating point and stores the result in an unsigned int.
        size = (f64::from(size) * factor) as u32;
        id += 1;
    }
    id
}

/// `slabs <args>`.
pub fn slabs(w: &Worker, args: &[u8], out: &mut Vec<u8>) {
    let (t, noreply) = tokens(args);
    match t.as_slice() {
        [b"reassign", src, dst] => reassign(w, src, dst, out),
        [b"automove", rest @ ..] if !rest.is_empty() => automove(w, rest, noreply, out),
        _ => out.extend_from_slice(reply::ERROR),
    }
}

/// `slabs automove <0|1|2>` or `slabs automove ratio <r>`.
fn automove(w: &Worker, t: &[&[u8]], noreply: bool, out: &mut Vec<u8>) {
    let mut tuning = w.shared.tuning.lock();
    if t[0] == b"ratio" {
        match t.get(1).and_then(|r| parse_f64(r)) {
            Some(r) => tuning.slab_automove_ratio = r,
            None => return respond(out, noreply, reply::ERROR),
        }
    } else {
        match parse_u32(t[0]) {
            None => return respond(out, noreply, BAD_FORMAT),
            Some(level @ 0..=2) => tuning.slab_automove = level as u8,
            Some(_) => return respond(out, noreply, reply::ERROR),
        }
    }
    respond(out, noreply, reply::OK);
}

/// `slabs reassign <src> <dst>`: validated as memcached validates it, then `NOSPARE`.
fn reassign(w: &Worker, src: &[u8], dst: &[u8], out: &mut Vec<u8>) {
    let tuning = w.shared.tuning.lock();
    if !tuning.slab_reassign {
        out.extend_from_slice(b"CLIENT_ERROR slab reassignment disabled\r\n");
        return;
    }
    let (Some(src), Some(dst)) = (parse_i32(src), parse_i32(dst)) else {
        out.extend_from_slice(BAD_FORMAT);
        return;
    };
    let (src, dst) = (i64::from(src), i64::from(dst));
    let largest = largest_class(&tuning);
    // Class 0 is memcached's global page pool; src -1 asks it to pick a class with a spare
    // page, and none has one here.
    let text: &[u8] = if src == dst {
        b"SAME src and dst class are identical\r\n"
    } else if !(0..=largest).contains(&src) || !(0..=largest).contains(&dst) {
        b"BADCLASS invalid src or dst class id\r\n"
    } else {
        b"NOSPARE source class has no spare pages\r\n"
    };
    out.extend_from_slice(text);
}

/// `lru tune <hot pct> <warm pct> <hot factor> <warm factor>`, `lru mode flat|segmented`,
/// `lru temp_ttl <seconds>`.
pub fn lru(w: &Worker, args: &[u8], out: &mut Vec<u8>) {
    let (t, noreply) = tokens(args);
    let mut tuning = w.shared.tuning.lock();
    let maintainer = tuning.lru_maintainer;
    let text: &[u8] = match t.as_slice() {
        [b"tune", hot, warm, hot_factor, warm_factor, ..] => {
            let parsed = (
                parse_u32(hot),
                parse_u32(warm),
                parse_f64(hot_factor),
                parse_f64(warm_factor),
            );
            match parsed {
                (Some(hot), Some(warm), Some(hf), Some(wf)) => {
                    if u64::from(hot) + u64::from(warm) > 80 {
                        b"ERROR hot and warm pcts must not exceed 80\r\n"
                    } else if hf <= 0.0 || wf <= 0.0 {
                        b"ERROR hot/warm age factors must be greater than 0\r\n"
                    } else {
                        tuning.hot_lru_pct = hot;
                        tuning.warm_lru_pct = warm;
                        tuning.hot_max_factor = hf;
                        tuning.warm_max_factor = wf;
                        reply::OK
                    }
                }
                _ => reply::ERROR,
            }
        }
        [b"mode", mode, ..] if maintainer => match *mode {
            b"flat" => {
                tuning.lru_segmented = false;
                reply::OK
            }
            b"segmented" => {
                tuning.lru_segmented = true;
                reply::OK
            }
            _ => reply::ERROR,
        },
        [b"temp_ttl", ttl, ..] if maintainer => match parse_i32(ttl) {
            Some(ttl) if ttl < 0 => {
                tuning.temp_lru = false;
                reply::OK
            }
            Some(ttl) => {
                tuning.temp_lru = true;
                tuning.temporary_ttl = ttl.unsigned_abs();
                reply::OK
            }
            None => reply::ERROR,
        },
        _ => reply::ERROR,
    };
    respond(out, noreply, text);
}

/// `extstore <setting> <value>`: memcached's run-time flash-tier settings, its prefix
/// matching of the setting's name included (`extstore max_f 0.5` sets `max_frag`). `OK`,
/// or `ERROR` for an unknown setting or a bad number. Without a flash tier the answer is
/// the same and nothing changes, as in a memcached built with extstore but given no
/// `ext_path`.
pub fn extstore(w: &Worker, args: &[u8], out: &mut Vec<u8>) {
    /// memcached's order of comparison (`proto_text.c`), which decides what a prefix
    /// names.
    const SETTINGS: [&str; 10] = [
        "free_memchunks",
        "item_size",
        "item_age",
        "low_ttl",
        "recache_rate",
        "compact_under",
        "drop_under",
        "max_sleep",
        "max_frag",
        "drop_unread",
    ];
    let (t, _) = tokens(args);
    let flash = w.shared.store.flash();
    let ok = match t.as_slice() {
        [sub, value, rest @ ..] if !sub.is_empty() => {
            match SETTINGS.iter().find(|s| s.as_bytes().starts_with(sub)) {
                // Deprecated in memcached and ignored; a class id and a limit.
                Some(&"free_memchunks") => match rest.first() {
                    Some(limit) => parse_u32(value)
                        .zip(parse_u32(limit))
                        .is_some_and(|(class, _)| class < 64),
                    None => false,
                },
                Some(&"max_frag") => parse_f64(value)
                    .map(|v| flash.map(|f| f.set_max_frag(v)))
                    .is_some(),
                Some(name) => parse_u32(value)
                    .map(|v| flash.map(|f| f.set_tunable(name, v)))
                    .is_some(),
                None => false,
            }
        }
        _ => false,
    };
    out.extend_from_slice(if ok { b"OK\r\n" } else { b"ERROR\r\n" });
}

/// `refresh_certs`: reloads the certificate chain, key and CA file named at startup, so
/// new connections use them (open ones keep theirs), as memcached does.
pub fn refresh_certs(w: &Worker, args: &[u8], out: &mut Vec<u8>) {
    let (_, noreply) = tokens(args);
    // memcached writes its errors whatever `noreply` says; only `OK` is suppressed.
    let (Some(slot), Some(settings)) = (&w.shared.tls, &w.shared.settings.tls) else {
        out.extend_from_slice(b"Error TLS not enabled\r\n");
        return;
    };
    match crate::tls::acceptor(settings) {
        Ok(acceptor) => {
            *slot.write() = acceptor;
            tracing::info!("refresh_certs: TLS certificate and key reloaded");
            respond(out, noreply, reply::OK);
        }
        Err(e) => {
            tracing::warn!("refresh_certs failed: {e}");
            out.extend_from_slice(crate::tls::refresh_error(&e, settings).as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_count_matches_memcached() {
        // memcached -vv: 39 classes by default, 12 with -f 2 -n 100.
        assert_eq!(largest_class(&Tunables::default()), 39);
        let t = Tunables {
            growth_factor: 2.0,
            chunk_size: 100,
            ..Tunables::default()
        };
        assert_eq!(largest_class(&t), 12);
    }

    #[test]
    fn noreply_is_the_last_token() {
        assert!(tokens(b"automove 1 noreply").1);
        assert!(!tokens(b"noreply 1").1);
        assert_eq!(tokens(b"").0.len(), 0);
    }
}
