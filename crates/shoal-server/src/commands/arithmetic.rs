//! `incr` and `decr` in every protocol: text, binary and meta `ma` all go through
//! [`incr_decr`].

use super::{respond, visible_cas};
use crate::stats::ThreadStats;
use crate::worker::Worker;
use shoal_protocol::binary::{self, Attrs, Status};
use shoal_protocol::reply;
use shoal_store::{StoreError, StoreOptions};

/// A counter after an arithmetic operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counter {
    /// The new value.
    pub value: u64,
    /// Its CAS unique.
    pub cas: u64,
    /// Its rel expiry (0 = never).
    pub exptime: u32,
    /// The rel expiry it had before the operation (0 for a created counter).
    pub was: u32,
}

/// The outcome of an arithmetic operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delta {
    /// The counter was changed.
    Value(Counter),
    /// The key was absent and was created with the initial value (meta `N`, binary).
    Created(Counter),
    /// The key is absent.
    NotFound,
    /// The value is not a decimal number.
    NonNumeric,
    /// The compare-CAS did not match (meta `C`).
    Exists,
}

/// How absent keys and CAS are handled (meta's `N`, `J`, `C`, `E`, `T`).
#[derive(Debug, Clone, Copy, Default)]
pub struct DeltaOptions {
    /// Create the key with this value and options when absent.
    pub vivify: Option<(u64, StoreOptions)>,
    /// Only apply if the item's CAS unique equals this.
    pub compare_cas: Option<u64>,
    /// Store with this CAS unique instead of a fresh one.
    pub new_cas: Option<u64>,
    /// Also set the item's expiry (rel time).
    pub new_exptime: Option<u32>,
}

/// Parses a stored value as memcached's `do_add_delta` does, with `safe_strtoull` on the
/// value followed by its `\r\n`: optional leading C whitespace, an optional `+` (or a
/// `-` on zero), decimal digits that fit a u64, then the end of the value, a C whitespace
/// byte or a NUL, after which anything may follow (so `"1 2"` counts as 1). An empty value
/// is non-numeric.
///
/// memcached also accepts a negative value whose wrapped magnitude fits in 63 bits
/// (`"-18446744073709551615"` is 1); like the protocol parser, shoald treats that as
/// non-numeric rather than changing the number (docs/protocol-deviations.md).
pub fn parse_counter(value: &[u8]) -> Option<u64> {
    let is_space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let start = value.iter().position(|&b| !is_space(b))?;
    let mut rest = &value[start..];
    let mut negative = false;
    match rest.first() {
        Some(b'+') => rest = &rest[1..],
        Some(b'-') => {
            negative = true;
            rest = &rest[1..];
        }
        _ => {}
    }
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    match rest.get(digits) {
        None | Some(0) => {}
        Some(&b) if is_space(b) => {}
        Some(_) => return None,
    }
    let n = rest[..digits].iter().try_fold(0u64, |acc, &d| {
        acc.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })?;
    if negative && n != 0 {
        return None;
    }
    Some(n)
}

/// Formats `n` into `buf`, returning the digits' length.
fn format_counter(n: u64, buf: &mut [u8; 20]) -> usize {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut v = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let len = digits.len() - i;
    buf[..len].copy_from_slice(&digits[i..]);
    len
}

/// Spaces to pad a number that shrank in place, in pieces of this many.
const SPACES: [u8; 64] = [b' '; 64];

/// The parts of a counter's new value: its digits, then (as memcached writes a number
/// that shrank over the old one) spaces up to `old_len`.
fn padded<'a>(digits: &'a [u8], old_len: usize, parts: &mut Vec<&'a [u8]>) {
    parts.push(digits);
    let mut pad = old_len.saturating_sub(digits.len());
    while pad > 0 {
        let n = pad.min(SPACES.len());
        parts.push(&SPACES[..n]);
        pad -= n;
    }
}

/// Applies incr (wrapping at 2^64) or decr (flooring at 0) to `key`.
///
/// As memcached, a result that fits in the old value's bytes is written over it, padded
/// with spaces, keeping the item's fetched, stale and win state; a longer one makes a new
/// item without them. (memcached then also drops an `ma` `E` or `T` it applies to the
/// old item; shoald applies them: docs/protocol-deviations.md.)
///
/// `class` is set to the memcached slab class the change is counted in: the old item's,
/// as in memcached, or the created one's.
pub fn apply_delta(
    w: &Worker,
    key: &[u8],
    delta: u64,
    incr: bool,
    opts: DeltaOptions,
    class: &std::cell::Cell<usize>,
) -> Result<Delta, StoreError> {
    let cas_enabled = w.shared.settings.cas_enabled;
    let store = &w.shared.store;
    let mut writer = w.writer.borrow_mut();
    // memcached's lookup before the change is an `item_get` line for `watch fetchers`.
    let before = std::cell::Cell::new(None);
    let result = store.update(&mut writer, key, |e| {
        before.set(e.item().map(|i| i.value_len()));
        class.set(e.item().map_or(0, |i| store.slab_class(&i)));
        // A counter on flash is read back (memcached refuses it as non-numeric).
        e.load_value()?;
        let mut buf = [0u8; 20];
        let Some(item) = e.item() else {
            let Some((initial, store_opts)) = opts.vivify else {
                return Ok(Delta::NotFound);
            };
            let len = format_counter(initial, &mut buf);
            let cas = e.store(&[&buf[..len]], store_opts)?;
            if let Some(created) = e.item() {
                class.set(store.slab_class(&created));
            }
            return Ok(Delta::Created(Counter {
                value: initial,
                cas,
                exptime: store_opts.exptime,
                was: 0,
            }));
        };
        // memcached refuses an empty value before it looks at the CAS.
        if item.value().is_empty() {
            return Ok(Delta::NonNumeric);
        }
        // A unique of 0 names none, as in memcached.
        if let Some(expected) = opts.compare_cas.filter(|&c| c != 0) {
            let current = if cas_enabled { item.cas() } else { 0 };
            if current != expected {
                return Ok(Delta::Exists);
            }
        }
        let Some(old) = parse_counter(item.value()) else {
            return Ok(Delta::NonNumeric);
        };
        let new = if incr {
            old.wrapping_add(delta)
        } else {
            old.saturating_sub(delta)
        };
        let old_len = item.value_len();
        let len = format_counter(new, &mut buf);
        let in_place = len <= old_len;
        let fetched = in_place && item.fetched();
        let was = item.exptime();
        let store_opts = StoreOptions {
            flags: item.flags(),
            exptime: opts.new_exptime.unwrap_or(was),
            cas: opts.new_cas,
            stale: in_place && item.stale(),
            win_sent: in_place && item.win_sent(),
            ..StoreOptions::default()
        };
        let pad = old_len.saturating_sub(len);
        let cas = if pad <= SPACES.len() {
            e.store(&[&buf[..len], &SPACES[..pad]], store_opts)?
        } else {
            // A long value that held a number (followed by spaces): rare enough to build
            // the parts list on the heap.
            let mut parts = Vec::new();
            padded(&buf[..len], old_len, &mut parts);
            e.store(&parts, store_opts)?
        };
        if fetched {
            if let Some(stored) = e.item() {
                stored.mark_fetched();
            }
        }
        Ok(Delta::Value(Counter {
            value: new,
            cas,
            exptime: store_opts.exptime,
            was,
        }))
    });
    drop(writer);
    w.shared
        .watchers
        .fetched(key, before.get(), w.current_conn.get());
    result
}

/// Incr or decr for every protocol (text, binary and meta `ma`): [`apply_delta`], then
/// `incr_hits`/`decr_hits` for a changed or created counter and `incr_misses`/
/// `decr_misses` for a missing one, as memcached counts them.
pub fn incr_decr(
    w: &Worker,
    key: &[u8],
    delta: u64,
    incr: bool,
    opts: DeltaOptions,
) -> Result<Delta, StoreError> {
    let s = &w.stats;
    let class = std::cell::Cell::new(0);
    let result = apply_delta(w, key, delta, incr, opts, &class);
    let c = s.class(class.get());
    let (hits, misses) = if incr {
        (&c.incr_hits, &s.incr_misses)
    } else {
        (&c.decr_hits, &s.decr_misses)
    };
    match result {
        Ok(Delta::Value(..)) | Ok(Delta::Created(..)) => ThreadStats::incr(hits),
        Ok(Delta::NotFound) => ThreadStats::incr(misses),
        _ => {}
    }
    result
}

/// `incr|decr <key> <delta>`: the new value, NOT_FOUND, or the non-numeric error.
pub fn text(w: &Worker, key: &[u8], delta: u64, incr: bool, noreply: bool, out: &mut Vec<u8>) {
    match incr_decr(w, key, delta, incr, DeltaOptions::default()) {
        Ok(Delta::Value(c)) | Ok(Delta::Created(c)) => {
            if !noreply {
                reply::number_line(out, c.value);
            }
        }
        // A text incr names no CAS, so `Exists` cannot happen.
        Ok(Delta::NotFound) | Ok(Delta::Exists) => respond(out, noreply, reply::NOT_FOUND),
        Ok(Delta::NonNumeric) => respond(out, noreply, reply::NON_NUMERIC),
        Err(StoreError::TooLarge) | Err(StoreError::OutOfMemory) => {
            respond(out, noreply, reply::OUT_OF_MEMORY_STORING)
        }
    }
}

/// Binary `INCREMENT`/`DECREMENT` (and quiet forms): creates a missing key with `initial`
/// when `create_exptime` is given, and is conditional on a non-zero CAS attribute. The
/// new value is the body, as 8 big-endian bytes.
#[allow(clippy::too_many_arguments)]
pub fn binary(
    w: &Worker,
    attrs: &Attrs,
    key: &[u8],
    incr: bool,
    delta: u64,
    initial: u64,
    create_exptime: Option<i64>,
    out: &mut Vec<u8>,
) {
    let vivify = create_exptime.map(|t| {
        let options = StoreOptions {
            exptime: w.shared.store.clock().expiry(t),
            ..StoreOptions::default()
        };
        (initial, options)
    });
    let opts = DeltaOptions {
        vivify,
        compare_cas: attrs.compare_cas(),
        ..DeltaOptions::default()
    };
    let status = match incr_decr(w, key, delta, incr, opts) {
        Ok(Delta::Value(c)) | Ok(Delta::Created(c)) => {
            let cas = visible_cas(w, c.cas);
            return binary::reply::ok_with_value(out, attrs, cas, &c.value.to_be_bytes());
        }
        Ok(Delta::NotFound) => Status::KeyNotFound,
        Ok(Delta::Exists) => Status::KeyExists,
        Ok(Delta::NonNumeric) => Status::NonNumeric,
        Err(_) => Status::OutOfMemory,
    };
    binary::reply::status(out, attrs, status);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_parse_like_strtoull() {
        assert_eq!(parse_counter(b"10"), Some(10));
        assert_eq!(parse_counter(b"9 "), Some(9));
        assert_eq!(parse_counter(b" 7"), Some(7));
        assert_eq!(parse_counter(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_counter(b"18446744073709551616"), None);
        assert_eq!(parse_counter(b"abc"), None);
        assert_eq!(parse_counter(b"1a"), None);
        assert_eq!(parse_counter(b""), None);
        assert_eq!(parse_counter(b"-1"), None);
        // What follows the number after a space (or NUL) is ignored, as by strtoull.
        assert_eq!(parse_counter(b"1 2"), Some(1));
        assert_eq!(parse_counter(b"12\tx"), Some(12));
        assert_eq!(parse_counter(b"12\0x"), Some(12));
        assert_eq!(parse_counter(b"\x0b5"), Some(5));
        assert_eq!(parse_counter(b"+5"), Some(5));
        assert_eq!(parse_counter(b"-0"), Some(0));
        assert_eq!(parse_counter(b"+"), None);
        assert_eq!(parse_counter(b" "), None);
        assert_eq!(parse_counter(b"1.5"), None);
        assert_eq!(parse_counter(b"-18446744073709551615"), None);
    }

    #[test]
    fn shrinking_numbers_are_space_padded() {
        let joined = |n: u64, old_len: usize| {
            let mut buf = [0u8; 20];
            let len = format_counter(n, &mut buf);
            let mut parts = Vec::new();
            padded(&buf[..len], old_len, &mut parts);
            parts.concat()
        };
        assert_eq!(joined(9, 2), b"9 ");
        assert_eq!(joined(100, 2), b"100");
        assert_eq!(joined(0, 0), b"0");
        // Past any fixed buffer: a long value that held a number keeps its length.
        let long = joined(7, 303);
        assert_eq!(long.len(), 303);
        assert!(long.starts_with(b"7 ") && long.ends_with(b" "));
    }
}
