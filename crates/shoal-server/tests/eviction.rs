//! What eviction promises, shown on a running shoald with a small `-m`: a hot set that is
//! read survives a one-time scan twice the size of the cache; small items that are read
//! survive a flood of large values; and expired memory is reused before live items are
//! evicted. Segment FIFO, shoald's eviction before these promises, fails all three (each
//! hot key would miss once per turn of the cache).
//!
//! The client is a demand-fill application: it reads its hot keys, and writes back any
//! that missed. Requests are pipelined (`noreply` stores, `mg` probes ended by `mn`), so
//! each test writes tens of megabytes in a few seconds.

mod common;

use common::{Conn, Server};
use std::time::Duration;

/// The memory limit the tests run shoald with, MiB.
const MEMORY_MB: usize = 16;

/// Pipelined text-protocol helpers over a test connection.
struct Client {
    conn: Conn,
    value: Vec<u8>,
}

impl Client {
    fn new(s: &Server) -> Client {
        Client {
            conn: s.conn(),
            value: Vec::new(),
        }
    }

    /// Stores every key with a value of `len` bytes and TTL `ttl`, pipelined, and waits
    /// until the server has taken them all.
    fn set_all<K: AsRef<str>>(&mut self, keys: &[K], len: usize, ttl: u32) {
        if self.value.len() < len {
            self.value.resize(len, b'v');
        }
        let mut out = Vec::with_capacity(256 * 1024);
        for (i, k) in keys.iter().enumerate() {
            out.extend_from_slice(
                format!("set {} 0 {ttl} {len} noreply\r\n", k.as_ref()).as_bytes(),
            );
            out.extend_from_slice(&self.value[..len]);
            out.extend_from_slice(b"\r\n");
            if out.len() > 128 * 1024 || i + 1 == keys.len() {
                self.conn.send(&out);
                out.clear();
            }
        }
        self.conn.rt(b"mn\r\n", b"MN\r\n");
    }

    /// Reads every key (a read, as `get` is) and returns the ones that missed.
    fn missing<K: AsRef<str> + Clone>(&mut self, keys: &[K]) -> Vec<K> {
        let mut out = Vec::with_capacity(keys.len() * 16);
        for k in keys {
            out.extend_from_slice(format!("mg {}\r\n", k.as_ref()).as_bytes());
        }
        out.extend_from_slice(b"mn\r\n");
        self.conn.send(&out);
        let reply = self.conn.read_until(b"MN\r\n");
        let lines: Vec<&[u8]> = reply
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(lines.len(), keys.len() + 1, "one reply per probe");
        keys.iter()
            .zip(&lines)
            .filter(|(_, l)| l.starts_with(b"EN"))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Reads every key and writes back those that missed (demand fill); returns how many
    /// missed.
    fn read_through(&mut self, keys: &[String], len: usize) -> usize {
        let missed = self.missing(keys);
        if !missed.is_empty() {
            self.set_all(&missed, len, 0);
        }
        missed.len()
    }

    /// One numeric `stats` value.
    /// `name` from `stats`, or from `stats eviction` (shoald's own counters).
    fn stat(&mut self, name: &str) -> u64 {
        let mut all = self.conn.request_until(b"stats\r\n", b"END\r\n");
        all.extend(self.conn.request_until(b"stats eviction\r\n", b"END\r\n"));
        let text = common::show(&all);
        let prefix = format!("STAT {name} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no stat {name}"))
    }
}

fn keys(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}:{i}")).collect()
}

fn server() -> Server {
    Server::with_args(&["-m", &MEMORY_MB.to_string()])
}

#[test]
fn a_hot_set_that_is_read_survives_a_scan_of_twice_the_cache() {
    let s = server();
    let mut c = Client::new(&s);
    let hot = keys("hot", 1000);
    c.set_all(&hot, 1000, 0);
    for _ in 0..2 {
        assert_eq!(c.read_through(&hot, 1000), 0);
    }
    // 32 MiB of keys written once and never read, in bursts, the hot set read between.
    let (chunk, chunks) = (1000, 2 * MEMORY_MB * 1024 * 1024 / (1000 * 1000));
    let mut misses = 0;
    for i in 0..chunks {
        c.set_all(&keys(&format!("scan{i}"), chunk), 1000, 0);
        misses += c.read_through(&hot, 1000);
    }
    let reads = chunks * hot.len();
    // FIFO misses each hot key once per turn of the cache: about two per key here.
    assert!(
        misses * 100 <= reads,
        "{misses} of {reads} hot reads missed during the scan"
    );
    assert!(c.stat("evictions") > 0, "the scan was evicted");
    assert!(c.stat("evictions_promoted") > 0);
}

#[test]
fn small_items_that_are_read_survive_a_flood_of_large_values() {
    let s = server();
    let mut c = Client::new(&s);
    let small = keys("small", 5000);
    c.set_all(&small, 100, 0);
    assert_eq!(c.read_through(&small, 100), 0);
    // 2.5x the cache in 100 KB values written once, the small keys read in between.
    let large = keys("large", MEMORY_MB * 1024 * 1024 * 5 / 2 / (100 * 1024));
    let mut misses = 0;
    let mut reads = 0;
    for burst in large.chunks(20) {
        c.set_all(burst, 100 * 1024, 0);
        misses += c.read_through(&small, 100);
        reads += small.len();
    }
    assert!(
        misses * 100 <= reads,
        "{misses} of {reads} small reads missed during the flood"
    );
    assert!(c.stat("evictions") > 0);
}

#[test]
fn expired_memory_is_reused_before_live_items_are_evicted() {
    let s = server();
    let mut c = Client::new(&s);
    // Live items, never read, written among items that expire in a second (three times
    // their size), so the segments they share end up mostly expired: a quarter live.
    let live = keys("live", 4000);
    for (i, pair) in live.chunks(100).enumerate() {
        c.set_all(pair, 500, 0);
        c.set_all(&keys(&format!("ttl0-{i}"), 100), 1500, 1);
    }
    // Then rounds of short-lived items that with the live ones nearly fill the cache
    // (2 MiB live + 12 MiB of each round, in 16 MiB), each written after the last one
    // expired: room for each round exists only as expired memory.
    for round in 1..=4 {
        std::thread::sleep(Duration::from_millis(1500));
        c.set_all(&keys(&format!("ttl{round}"), 8000), 1500, 1);
    }
    let lost = c.missing(&live);
    assert!(
        lost.is_empty(),
        "{} of {} live items evicted (e.g. {:?}) while expired ones held memory",
        lost.len(),
        live.len(),
        lost.first()
    );
    assert!(c.stat("reclaimed") > 0, "expired items were reclaimed");
}
