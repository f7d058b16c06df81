//! `lru_crawler`, `stats cachedump` and `stats sizes`: the operator commands that list or
//! count items or steer the background expiry crawl, with memcached 1.6's replies.
//!
//! Shoal has no slab classes: every item is reported in class 1 (as `stats items` does),
//! so a dump of class 1, `all` or `hash` lists every item and a dump of another valid
//! class (2..=63) lists none. Dumps walk the store one index shard at a time and stop at
//! the connection's high-water mark like a multi-get, so dumping millions of items to a
//! slow reader costs neither memory nor other clients' latency.

use super::Flow;
use crate::reply_window::ReplyWindow;
use crate::watch::uri_encode;
use crate::worker::Worker;
use shoal_net::OUTPUT_HIGH_WATER;
use shoal_protocol::{meta, reply};
use std::io::Write;

/// Highest class id memcached accepts.
const MAX_CLASS: u32 = 63;
/// The class every Shoal item is reported in.
const ITEM_CLASS: u32 = 1;
/// memcached caps a `stats cachedump` reply at 2 MB.
const CACHEDUMP_MAX_BYTES: usize = 2 << 20;

const BADCLASS: &[u8] = b"BADCLASS invalid class id\r\n";
const DISABLED: &[u8] = b"CLIENT_ERROR lru crawler disabled\r\n";
const BAD_FORMAT: &[u8] = b"CLIENT_ERROR bad command line format\r\n";

/// Which classes a command names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Classes {
    /// `all`, `hash`, or a list that includes class 1.
    Items,
    /// Valid classes that hold nothing in Shoal.
    Empty,
}

/// Parses `all`, `hash` (when `hash_ok`), or a comma-separated list of class ids.
fn classes(arg: &[u8], hash_ok: bool) -> Option<Classes> {
    match arg {
        b"all" => return Some(Classes::Items),
        b"hash" if hash_ok => return Some(Classes::Items),
        _ => {}
    }
    let mut any_items = false;
    for id in arg.split(|&b| b == b',') {
        let id: u32 = std::str::from_utf8(id).ok()?.parse().ok()?;
        if !(1..=MAX_CLASS).contains(&id) {
            return None;
        }
        any_items |= id == ITEM_CLASS;
    }
    Some(if any_items {
        Classes::Items
    } else {
        Classes::Empty
    })
}

/// How a dump prints each item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DumpFormat {
    /// `lru_crawler metadump`: `key=... exp=... la=... cas=... fetch=... cls=... size=...
    /// flags=... ` (with memcached's trailing space).
    Meta,
    /// `lru_crawler mgdump`: `mg <key>` lines a client can replay, then `EN`.
    Mg,
}

/// `lru_crawler <args>`. `stacked`: earlier commands' replies are still unsent, which a
/// dump refuses to follow.
pub fn lru_crawler(
    w: &Worker,
    args: &[u8],
    stacked: bool,
    window: &mut ReplyWindow,
    out: &mut Vec<u8>,
) -> Flow {
    let mut tokens = args.split(|&b| b == b' ').filter(|t| !t.is_empty());
    let (sub, arg, extra) = (tokens.next(), tokens.next(), tokens.next());
    if extra.is_some() {
        out.extend_from_slice(reply::ERROR);
        return Flow::Continue;
    }
    let crawler = &w.shared.crawler;
    let text: &[u8] = match (sub, arg) {
        (Some(b"metadump"), Some(arg)) => {
            return dump(w, arg, DumpFormat::Meta, stacked, window, out)
        }
        (Some(b"mgdump"), Some(arg)) => return dump(w, arg, DumpFormat::Mg, stacked, window, out),
        (Some(b"crawl"), Some(arg)) => {
            if !crawler.enabled() {
                DISABLED
            } else if classes(arg, false).is_none() {
                BADCLASS
            } else {
                crawler.request_full_pass();
                reply::OK
            }
        }
        (Some(b"enable"), None) => {
            if crawler.set_enabled(true) {
                reply::OK
            } else {
                b"ERROR failed to start lru crawler thread\r\n"
            }
        }
        (Some(b"disable"), None) => {
            crawler.set_enabled(false);
            reply::OK
        }
        (Some(b"sleep"), Some(arg)) => match parse_u32(arg) {
            Some(us) if us > 1_000_000 => b"CLIENT_ERROR sleep must be one second or less\r\n",
            Some(us) => {
                crawler
                    .sleep_us
                    .store(us, std::sync::atomic::Ordering::Relaxed);
                reply::OK
            }
            None => BAD_FORMAT,
        },
        (Some(b"tocrawl"), Some(arg)) => match parse_u32(arg) {
            Some(n) => {
                crawler
                    .tocrawl
                    .store(n, std::sync::atomic::Ordering::Relaxed);
                reply::OK
            }
            None => BAD_FORMAT,
        },
        _ => reply::ERROR,
    };
    out.extend_from_slice(text);
    Flow::Continue
}

fn parse_u32(s: &[u8]) -> Option<u32> {
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// `lru_crawler metadump|mgdump <classes>`, resumable at an index-shard boundary.
fn dump(
    w: &Worker,
    arg: &[u8],
    format: DumpFormat,
    stacked: bool,
    window: &mut ReplyWindow,
    out: &mut Vec<u8>,
) -> Flow {
    let store = &w.shared.store;
    let first = window.resume_at;
    if first == 0 {
        // Checked once, before anything is written.
        if !w.shared.crawler.enabled() {
            out.extend_from_slice(DISABLED);
            return Flow::Continue;
        }
        if !w.shared.settings.dump_enabled {
            out.extend_from_slice(match format {
                DumpFormat::Meta => b"ERROR metadump not allowed\r\n",
                DumpFormat::Mg => b"ERROR key dump not allowed\r\n",
            });
            return Flow::Continue;
        }
        if stacked {
            out.extend_from_slice(match format {
                DumpFormat::Meta => b"ERROR cannot pipeline other commands before metadump\r\n",
                DumpFormat::Mg => b"ERROR cannot pipeline other commands before mgdump\r\n",
            });
            return Flow::Continue;
        }
        if classes(arg, true).is_none() {
            out.extend_from_slice(BADCLASS);
            return Flow::Continue;
        }
        // memcached 1.6.45 starts both dumps with `OK`.
        out.extend_from_slice(reply::OK);
    }
    if classes(arg, true) == Some(Classes::Items) {
        let clock = store.clock();
        let unix_now = clock.unix_now();
        for part in first..store.walk_parts() {
            if part > first && out.len() >= OUTPUT_HIGH_WATER {
                window.resume_at = part;
                return Flow::Suspend;
            }
            store.walk_part(part, |item| match format {
                DumpFormat::Meta => {
                    out.extend_from_slice(b"key=");
                    uri_encode(item.key(), out);
                    let exp = item.ttl().map_or(-1, |t| unix_now + i64::from(t));
                    let la = unix_now - i64::from(item.idle_seconds());
                    let fetch = if item.fetched() { "yes" } else { "no" };
                    // Writing to a Vec cannot fail.
                    let _ = writeln!(
                        out,
                        " exp={exp} la={la} cas={} fetch={fetch} cls={ITEM_CLASS} size={} \
                         flags={} ",
                        super::visible_cas(w, item.cas()),
                        item.size(),
                        item.flags()
                    );
                }
                DumpFormat::Mg => {
                    out.extend_from_slice(b"mg ");
                    if needs_base64(item.key()) {
                        meta::encode_key_base64(item.key(), out);
                        out.extend_from_slice(b" b\r\n");
                    } else {
                        out.extend_from_slice(item.key());
                        out.extend_from_slice(b"\r\n");
                    }
                }
            });
        }
    }
    window.resume_at = 0;
    out.extend_from_slice(match format {
        DumpFormat::Meta => reply::END,
        DumpFormat::Mg => reply::EN,
    });
    Flow::Continue
}

/// Keys a text client could not send back as they are (memcached marks keys stored in
/// base64 form; Shoal does not keep that bit, so it decides by the bytes).
fn needs_base64(key: &[u8]) -> bool {
    key.iter().any(|&b| b <= b' ' || b >= 0x7f)
}

/// `stats cachedump <class> <limit>`: up to `limit` items (0: no limit) of a class, at most
/// 2 MB of reply, as memcached.
pub fn cachedump(w: &Worker, args: &[u8], out: &mut Vec<u8>) {
    if !w.shared.settings.dump_enabled {
        out.extend_from_slice(b"CLIENT_ERROR stats cachedump not allowed\r\n");
        return;
    }
    let mut tokens = args.split(|&b| b == b' ').filter(|t| !t.is_empty());
    let (Some(id), Some(limit), None) = (tokens.next(), tokens.next(), tokens.next()) else {
        out.extend_from_slice(b"CLIENT_ERROR bad command line\r\n");
        return;
    };
    let (Some(id), Some(limit)) = (parse_u32(id), parse_u32(limit)) else {
        out.extend_from_slice(BAD_FORMAT);
        return;
    };
    if id > MAX_CLASS {
        out.extend_from_slice(b"CLIENT_ERROR Illegal slab id\r\n");
        return;
    }
    if id == ITEM_CLASS {
        let store = &w.shared.store;
        let unix_now = store.clock().unix_now();
        let start = out.len();
        let mut left = if limit == 0 { u32::MAX } else { limit };
        for part in 0..store.walk_parts() {
            if left == 0 || out.len() - start >= CACHEDUMP_MAX_BYTES {
                break;
            }
            store.walk_part(part, |item| {
                if left == 0 || out.len() - start >= CACHEDUMP_MAX_BYTES {
                    return;
                }
                left -= 1;
                out.extend_from_slice(b"ITEM ");
                out.extend_from_slice(item.key());
                let exp = item.ttl().map_or(0, |t| unix_now + i64::from(t));
                let _ = write!(out, " [{} b; {exp} s]\r\n", item.value_len());
            });
        }
    }
    out.extend_from_slice(reply::END);
}

/// memcached's `stats sizes` bucket width.
const SIZE_BUCKET: usize = 32;

/// `stats sizes`: item counts by size, in 32-byte buckets (`STAT <bucket> <count>`), with
/// `-o track_sizes`; otherwise `STAT sizes_status disabled`, as memcached. memcached keeps
/// this histogram up to date on every write; shoald counts on demand, one index shard at
/// a time, so keeping the option on costs nothing until the command is used.
pub fn sizes(w: &Worker, out: &mut Vec<u8>) {
    if !w.shared.settings.tunables.track_sizes {
        reply::stat_str(out, "sizes_status", "disabled");
        return;
    }
    let store = &w.shared.store;
    let mut counts = std::collections::BTreeMap::<usize, u64>::new();
    for part in 0..store.walk_parts() {
        store.walk_part(part, |item| {
            let bucket = item.size().div_ceil(SIZE_BUCKET) * SIZE_BUCKET;
            *counts.entry(bucket).or_default() += 1;
        });
    }
    for (bucket, n) in counts {
        reply::stat_u64(out, &bucket.to_string(), n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_lists_follow_memcached() {
        assert_eq!(classes(b"all", false), Some(Classes::Items));
        assert_eq!(classes(b"hash", true), Some(Classes::Items));
        assert_eq!(classes(b"hash", false), None);
        assert_eq!(classes(b"1,2", false), Some(Classes::Items));
        assert_eq!(classes(b"5", false), Some(Classes::Empty));
        assert_eq!(classes(b"63", false), Some(Classes::Empty));
        for bad in [&b"0"[..], b"64", b"x", b"1,", b""] {
            assert_eq!(classes(bad, true), None, "{bad:?}");
        }
    }
}
