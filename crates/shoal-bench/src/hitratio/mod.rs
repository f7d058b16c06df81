//! Hit-ratio benchmarking: how often a cache answers from memory, at a given size, for a
//! given workload.
//!
//! - [`synth`]: synthetic workloads (popularity, size, TTL laws, scans, a moving hot set)
//!   and [`shapes`], the named ones the reports use.
//! - [`trace_file`]: real traces: libCacheSim's oracleGeneral binary format (read and
//!   written, so a synthetic trace can go through libCacheSim's simulators too) and
//!   Twitter's open cache-trace CSV.
//! - [`replay`]: demand-fill replay against a live server (shoald, memcached, redis):
//!   every read is a `get`, and a miss is followed by a `set` of the object, as an
//!   application in front of a database does.
//! - [`curve`]: miss-ratio curves over cache sizes, one fresh server per point.

pub mod curve;
pub mod oracle;
pub mod reference;
pub mod replay;
pub mod run;
pub mod shapes;
pub mod synth;
pub mod trace_file;
pub mod zipf;

use serde::Serialize;

/// What a request does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Op {
    /// A read; a miss is filled with a write (demand fill).
    Get,
    /// A write of the object.
    Set,
    /// A removal.
    Delete,
}

/// One request of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Seconds since the trace began (0 for synthetic traces).
    pub time: u32,
    /// The object's id.
    pub key: u64,
    /// Key length on the wire (at least [`MIN_KEY_LEN`], at most 250).
    pub key_len: u8,
    /// Value length in bytes.
    pub value_len: u32,
    /// Time to live in seconds, 0 for none.
    pub ttl: u32,
    /// What to do.
    pub op: Op,
}

/// `a / b`, or 0 when there is nothing to divide by (no reads counted).
pub(crate) fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Characters of a base-62 key id: every u64 fits in 11.
pub const MIN_KEY_LEN: u8 = 11;
/// memcached's longest key.
pub const MAX_KEY_LEN: u8 = 250;

const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Appends the key of object `id` on the wire: its base-62 id, padded with `_` to
/// `len` bytes (clamped to [`MIN_KEY_LEN`]..=[`MAX_KEY_LEN`]), so that distinct ids are
/// distinct keys and a trace's key sizes are kept where they are long enough.
pub fn push_key(buf: &mut Vec<u8>, id: u64, len: u8) {
    let len = len.clamp(MIN_KEY_LEN, MAX_KEY_LEN) as usize;
    let mut digits = [0u8; MIN_KEY_LEN as usize];
    let mut n = id;
    for d in digits.iter_mut().rev() {
        *d = BASE62[(n % 62) as usize];
        n /= 62;
    }
    buf.extend_from_slice(&digits);
    buf.resize(buf.len() + len - digits.len(), b'_');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_distinct_and_sized() {
        let mut a = Vec::new();
        push_key(&mut a, u64::MAX, 16);
        assert_eq!(a.len(), 16);
        let mut b = Vec::new();
        push_key(&mut b, u64::MAX - 1, 16);
        assert_ne!(a, b);
        let mut short = Vec::new();
        push_key(&mut short, 5, 3);
        assert_eq!(short, b"00000000005");
        let mut long = Vec::new();
        push_key(&mut long, 5, 255);
        assert_eq!(long.len(), 250);
    }
}
