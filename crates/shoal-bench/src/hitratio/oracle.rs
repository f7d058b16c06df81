//! Two reference caches computed offline on a trace, under demand fill and its TTLs: what
//! a measured server's hit ratio should be held against.
//!
//! - **Never evicting**: an unbounded cache. Its misses are the trace's own (a key's first
//!   request, a read after a delete, a read after the TTL of the key's last fill ran out)
//!   and no cache does better, so it is the ceiling of every eviction policy.
//! - **Popularity oracle**: a cache of the given bytes that knows in advance how often
//!   each key will be asked for and keeps, from its first request on, the keys without a
//!   TTL worth the most requests per byte (a greedy knapsack), in the memory left after
//!   the most that items with a TTL ever hold at once. For requests drawn independently
//!   from fixed popularities, as the synthetic shapes are, keeping the most popular items
//!   is the best an online cache can do (the A0 policy; Aho, Denning and Ullman, JACM
//!   1971, for equal sizes): a cache that does not know the future request order can at
//!   best learn the popularities. So a target above the oracle's hit ratio is out of
//!   reach of any eviction policy on that workload. It is generous in two ways: its
//!   popularities are the trace's own counts (what an online cache would have to learn),
//!   and every item with a TTL is kept while live.
//!
//! Expiry follows memcached's and shoald's: an item filled at server second `s` with a
//! TTL of `n` seconds reads as expired from second `s + n` on. Each request's time is its
//! index over the replay rate, or the trace's own seconds when there is no rate.

use super::{ratio, Op, Request, MAX_KEY_LEN, MIN_KEY_LEN};
use crate::BenchError;
use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// What the references are computed for.
#[derive(Clone, Copy, Debug)]
pub struct OracleConfig {
    /// Bytes of memory for items.
    pub capacity: u64,
    /// Bytes every item takes beyond its key and value (sizes are rounded up to 4, as
    /// shoald's items are).
    pub item_overhead: u32,
    /// Requests per second the trace is replayed at; `None` uses the trace's own times.
    pub rate: Option<f64>,
    /// Requests before counting.
    pub warmup: u64,
}

/// The two references' hits over the counted reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct OracleResult {
    /// Reads counted.
    pub reads: u64,
    /// Hits of a cache that never evicts.
    pub hits_never_evicting: u64,
    /// Hits of the popularity oracle at `capacity`.
    pub hits_popularity_oracle: u64,
    /// Hits of the popularity oracle if items with a TTL took no memory at all: above
    /// what any cache can do with them (the same as `hits_popularity_oracle` on a trace
    /// without TTLs).
    pub hits_popularity_oracle_free_ttl: u64,
    /// The most bytes items with a TTL held at once in the cache that never evicts: what
    /// the oracle sets aside for them.
    pub ttl_bytes_peak: u64,
}

impl OracleResult {
    /// The never-evicting cache's hit ratio: the ceiling of every policy.
    pub fn never_evicting(&self) -> f64 {
        ratio(self.hits_never_evicting, self.reads)
    }

    /// The popularity oracle's hit ratio.
    pub fn popularity_oracle(&self) -> f64 {
        ratio(self.hits_popularity_oracle, self.reads)
    }

    /// The popularity oracle's hit ratio with items with a TTL kept for free.
    pub fn popularity_oracle_free_ttl(&self) -> f64 {
        ratio(self.hits_popularity_oracle_free_ttl, self.reads)
    }
}

/// A demand-fill cache's view of the trace: when each key's item was filled, if held.
struct Replay<'a> {
    cfg: &'a OracleConfig,
    /// Key → server second of its item's fill.
    held: HashMap<u64, u64>,
    index: u64,
    reads: u64,
    hits: u64,
}

impl<'a> Replay<'a> {
    fn new(cfg: &'a OracleConfig) -> Self {
        Replay {
            cfg,
            held: HashMap::new(),
            index: 0,
            reads: 0,
            hits: 0,
        }
    }

    fn millis(&self, r: &Request) -> u64 {
        match self.cfg.rate.filter(|rate| *rate > 0.0) {
            Some(rate) => (self.index as f64 * 1000.0 / rate) as u64,
            None => u64::from(r.time) * 1000,
        }
    }

    /// Applies `r`, holding its item afterwards only if `keep`; returns the millisecond
    /// of the request and whether it filled (wrote) the item.
    fn step(&mut self, r: &Request, keep: bool) -> (u64, bool) {
        let ms = self.millis(r);
        let now = ms / 1000;
        let counted = self.index >= self.cfg.warmup;
        self.index += 1;
        let filled = match r.op {
            Op::Delete => {
                self.held.remove(&r.key);
                false
            }
            Op::Set => true,
            Op::Get => {
                if counted {
                    self.reads += 1;
                }
                let live = self
                    .held
                    .get(&r.key)
                    .is_some_and(|&s| r.ttl == 0 || now < s + u64::from(r.ttl));
                if live && counted {
                    self.hits += 1;
                }
                !live
            }
        };
        if filled && keep {
            self.held.insert(r.key, now);
        }
        (ms, filled)
    }
}

/// Computes both references for the trace `requests` gives (called twice: the oracle
/// needs every key's count before it starts).
pub fn references<I>(
    mut requests: impl FnMut() -> Result<I, BenchError>,
    cfg: &OracleConfig,
) -> Result<OracleResult, BenchError>
where
    I: Iterator<Item = Result<Request, BenchError>>,
{
    // Pass 1: the cache that never evicts, each key's request count and footprint, and
    // the bytes of live TTL items over time (+ at a fill, − when it expires).
    let mut unbounded = Replay::new(cfg);
    let mut counts: HashMap<u64, (u64, u64)> = HashMap::new();
    let mut ttl_events: Vec<(u64, i64)> = Vec::new();
    for r in requests()? {
        let r = r?;
        let (ms, filled) = unbounded.step(&r, true);
        if r.op == Op::Delete {
            continue;
        }
        let footprint = footprint(&r, cfg.item_overhead);
        if r.ttl > 0 {
            if filled {
                let size = i64::try_from(footprint).unwrap_or(i64::MAX);
                ttl_events.push((ms, size));
                // Expired from the start of server second `fill + ttl`.
                ttl_events.push(((ms / 1000 + u64::from(r.ttl)) * 1000, -size));
            }
        } else {
            counts.entry(r.key).or_insert((0, footprint)).0 += 1;
        }
    }
    ttl_events.sort_unstable();
    let (mut live, mut peak) = (0i64, 0i64);
    for (_, d) in ttl_events {
        live += d;
        peak = peak.max(live);
    }
    let ttl_bytes_peak = u64::try_from(peak).unwrap_or(0);

    // The keys without a TTL worth the most requests per byte, in what is left.
    let mut ranked: Vec<(u64, u64, u64)> =
        counts.into_iter().map(|(k, (n, f))| (k, n, f)).collect();
    // n1/f1 > n2/f2 compared without division; ties by key, so that the result does not
    // depend on the hash map's order.
    ranked.sort_unstable_by(|a, b| {
        (u128::from(b.1) * u128::from(a.2))
            .cmp(&(u128::from(a.1) * u128::from(b.2)))
            .then(a.0.cmp(&b.0))
    });
    let with_reserve = oracle_hits(&mut requests, cfg, &ranked, ttl_bytes_peak)?;
    let free_ttl = if ttl_bytes_peak == 0 {
        with_reserve
    } else {
        oracle_hits(&mut requests, cfg, &ranked, 0)?
    };
    Ok(OracleResult {
        reads: unbounded.reads,
        hits_never_evicting: unbounded.hits,
        hits_popularity_oracle: with_reserve,
        hits_popularity_oracle_free_ttl: free_ttl,
        ttl_bytes_peak,
    })
}

/// Replays the trace keeping the first keys of `ranked` (key, requests, footprint) that
/// fit beside `reserve` bytes for items with a TTL (all kept while live); returns the
/// counted hits.
fn oracle_hits<I>(
    mut requests: impl FnMut() -> Result<I, BenchError>,
    cfg: &OracleConfig,
    ranked: &[(u64, u64, u64)],
    reserve: u64,
) -> Result<u64, BenchError>
where
    I: Iterator<Item = Result<Request, BenchError>>,
{
    let mut room = cfg.capacity.saturating_sub(reserve);
    let mut kept = HashSet::new();
    for &(key, _, footprint) in ranked {
        if footprint <= room {
            room -= footprint;
            kept.insert(key);
        }
    }
    let mut oracle = Replay::new(cfg);
    for r in requests()? {
        let r = r?;
        let keep = r.ttl > 0 || kept.contains(&r.key);
        oracle.step(&r, keep);
    }
    Ok(oracle.hits)
}

/// Bytes `r`'s item takes: header, key and value, rounded up to 4.
fn footprint(r: &Request, overhead: u32) -> u64 {
    let key = u64::from(r.key_len.clamp(MIN_KEY_LEN, MAX_KEY_LEN));
    (u64::from(overhead) + key + u64::from(r.value_len) + 3) & !3
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(key: u64, value_len: u32, ttl: u32, op: Op) -> Request {
        Request {
            time: 0,
            key,
            key_len: 16,
            value_len,
            ttl,
            op,
        }
    }

    fn get(key: u64) -> Request {
        // 12 + 16 + 72: 100 bytes.
        req(key, 72, 0, Op::Get)
    }

    fn run(trace: &[Request], cfg: &OracleConfig) -> OracleResult {
        references(|| Ok(trace.iter().copied().map(Ok)), cfg).unwrap()
    }

    fn cfg(capacity: u64) -> OracleConfig {
        OracleConfig {
            capacity,
            item_overhead: 12,
            rate: None,
            warmup: 0,
        }
    }

    #[test]
    fn never_evicting_hits_every_repeat() {
        let trace: Vec<_> = (0..12).map(|i| get(i % 3)).collect();
        let r = run(&trace, &cfg(100));
        assert_eq!((r.reads, r.hits_never_evicting), (12, 9));
    }

    #[test]
    fn the_oracle_keeps_the_most_popular_key() {
        // Key 7 is asked for six times, keys 1-3 twice each; room for one item.
        let mut trace = Vec::new();
        for k in [1, 7, 2, 7, 3, 7, 1, 7, 2, 7, 3, 7] {
            trace.push(get(k));
        }
        let r = run(&trace, &cfg(100));
        assert_eq!(r.hits_never_evicting, 8);
        assert_eq!(r.hits_popularity_oracle, 5);
        // Room for all four.
        assert_eq!(run(&trace, &cfg(400)).hits_popularity_oracle, 8);
        // A TTL item held while live takes room from the others unless it is free.
        let mut with_ttl = trace.clone();
        with_ttl.insert(0, req(9, 72, 60, Op::Get));
        let r = run(&with_ttl, &cfg(200));
        assert_eq!(r.ttl_bytes_peak, 100);
        assert_eq!(r.hits_popularity_oracle, 5);
        // Free, the room it held keeps one of keys 1-3 as well (its second request hits).
        assert_eq!(r.hits_popularity_oracle_free_ttl, 5 + 1);
    }

    #[test]
    fn requests_per_byte_decide_not_requests() {
        // Key 1 (100 bytes) is asked for 3 times, key 2 (400 bytes) 4 times: in 400
        // bytes, key 1 is worth more per byte.
        let big = |k| req(k, 372, 0, Op::Get);
        let trace = [get(1), big(2), get(1), big(2), get(1), big(2), big(2)];
        let r = run(&trace, &cfg(400));
        assert_eq!(r.hits_popularity_oracle, 2);
    }

    #[test]
    fn ttl_items_expire_on_the_second_clock_and_are_set_aside_for() {
        // 10 requests/s: key 1 (TTL 1 s) filled at 0 ms is live through 900 ms, and
        // expired at 1,000 ms (server second 1 = fill second 0 + 1), then filled again.
        let cfg = OracleConfig {
            rate: Some(10.0),
            ..cfg(1000)
        };
        let t = |k| req(k, 72, 1, Op::Get);
        let mut trace = vec![t(1)];
        trace.extend((0..8).map(|i| get(100 + i)));
        trace.push(t(1)); // 900 ms: hit
        trace.push(t(1)); // 1,000 ms: expired, filled again
        trace.push(t(1)); // 1,100 ms: hit
        let r = run(&trace, &cfg);
        assert_eq!(r.hits_never_evicting, 2);
        assert_eq!(r.hits_popularity_oracle, 2);
        assert_eq!(r.hits_popularity_oracle_free_ttl, 2);
        // The item lives 1 s at most, two fills apart: 100 bytes at a time.
        assert_eq!(r.ttl_bytes_peak, 100);
    }

    #[test]
    fn a_delete_or_warmup_is_not_a_hit() {
        let mut trace = vec![get(1), req(1, 72, 0, Op::Delete), get(1), get(1)];
        let r = run(&trace, &cfg(1000));
        assert_eq!((r.reads, r.hits_never_evicting), (3, 1));
        trace.push(get(1));
        let warm = OracleConfig {
            warmup: 3,
            ..cfg(1000)
        };
        let r = run(&trace, &warm);
        assert_eq!((r.reads, r.hits_never_evicting), (2, 2));
    }
}
