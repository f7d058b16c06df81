//! `stats detail`: counters per key prefix (memcached's `stats_prefix`).
//!
//! With `stats detail on` (or `-o`/`-D` at start), every get, set and delete of a key
//! that contains the prefix delimiter (`-D`, `:` by default) counts against the part of
//! the key before it; `stats detail dump` lists them as
//! `PREFIX <prefix> get <n> hit <n> set <n> del <n>`. Keys without the delimiter are not
//! counted, and at most [`MAX_PREFIXES`] prefixes are tracked, as in memcached.
//!
//! While it is off, which is the default, recording costs one relaxed atomic load. While
//! on, every counted request takes one process-wide lock, as in memcached: it is a
//! debugging aid, not something to leave on under load.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};

/// memcached's cap on distinct prefixes.
pub const MAX_PREFIXES: usize = 65536;

/// One prefix's counters.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    get: u64,
    hit: u64,
    set: u64,
    del: u64,
}

/// What a request did to a key, for its prefix's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefixOp {
    /// A get, and whether it found the key.
    Get {
        /// The key was found.
        hit: bool,
    },
    /// A storage command.
    Set,
    /// A delete.
    Delete,
}

/// The per-prefix counters and whether they are being kept.
#[derive(Debug)]
pub struct PrefixStats {
    enabled: AtomicBool,
    delimiter: u8,
    table: Mutex<HashMap<Box<[u8]>, Counts>>,
}

impl PrefixStats {
    /// Counters split at `delimiter`, kept from the start if `enabled`.
    pub fn new(delimiter: u8, enabled: bool) -> PrefixStats {
        PrefixStats {
            enabled: AtomicBool::new(enabled),
            delimiter,
            table: Mutex::new(HashMap::new()),
        }
    }

    /// `stats detail on|off`.
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    /// Counts `op` on `key` when detail stats are on.
    #[inline]
    pub fn record(&self, key: &[u8], op: PrefixOp) {
        if self.enabled.load(Ordering::Relaxed) {
            self.record_slow(key, op);
        }
    }

    fn record_slow(&self, key: &[u8], op: PrefixOp) {
        let Some(end) = key.iter().position(|&b| b == self.delimiter) else {
            return;
        };
        let prefix = &key[..end];
        let mut table = self.table.lock();
        if !table.contains_key(prefix) {
            if table.len() >= MAX_PREFIXES {
                return;
            }
            table.insert(prefix.into(), Counts::default());
        }
        let Some(counts) = table.get_mut(prefix) else {
            return;
        };
        match op {
            PrefixOp::Get { hit } => {
                counts.get += 1;
                counts.hit += u64::from(hit);
            }
            PrefixOp::Set => counts.set += 1,
            PrefixOp::Delete => counts.del += 1,
        }
    }

    /// `stats detail dump`: one `PREFIX` line per prefix (sorted), then `END`.
    pub fn dump(&self, out: &mut Vec<u8>) {
        let table = self.table.lock();
        let mut prefixes: Vec<_> = table.iter().collect();
        prefixes.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (prefix, c) in prefixes {
            out.extend_from_slice(b"PREFIX ");
            out.extend_from_slice(prefix);
            let _ = write!(
                out,
                " get {} hit {} set {} del {}\r\n",
                c.get, c.hit, c.set, c.del
            );
        }
        out.extend_from_slice(b"END\r\n");
    }

    /// Forgets every prefix (`stats reset`).
    pub fn reset(&self) {
        self.table.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_prefix_only_while_on() {
        let p = PrefixStats::new(b':', false);
        p.record(b"user:1", PrefixOp::Set);
        p.set_enabled(true);
        p.record(b"user:1", PrefixOp::Set);
        p.record(b"user:2", PrefixOp::Get { hit: true });
        p.record(b"user:3", PrefixOp::Get { hit: false });
        p.record(b"a:b:c", PrefixOp::Delete);
        p.record(b"plain", PrefixOp::Set);
        let mut out = Vec::new();
        p.dump(&mut out);
        assert_eq!(
            String::from_utf8(out).expect("utf8"),
            "PREFIX a get 0 hit 0 set 0 del 1\r\n\
             PREFIX user get 2 hit 1 set 1 del 0\r\nEND\r\n"
        );
        p.reset();
        let mut out = Vec::new();
        p.dump(&mut out);
        assert_eq!(out, b"END\r\n");
    }
}
