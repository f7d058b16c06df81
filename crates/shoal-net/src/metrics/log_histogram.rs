//! A log-linear histogram for latency quantiles: HdrHistogram's bucket layout, recorded
//! with relaxed atomics so that the one thread writing it never takes a lock and a scrape
//! never blocks it.
//!
//! # Why not the `hdrhistogram` crate
//!
//! `hdrhistogram::Histogram::record` takes `&mut self`, so a worker recording while a
//! scrape reads would need a lock between them (or a double-buffer swap), on the request
//! path. The layout itself is simple enough to keep here with atomics: values below
//! 2^[`SUB_BITS`] get a bucket each, and every octave above is split into
//! 2^([`SUB_BITS`] - 1) equal buckets. A bucket is at most 1/64 of its values wide, so a
//! quantile reported at its bucket's midpoint is within 0.8% of the true value: the "two
//! significant digits" HdrHistogram users ask for. The tests check the quantiles against
//! the `hdrhistogram` crate.
//!
//! # Cost
//!
//! Recording is a `leading_zeros`, two shifts and one uncontended relaxed add. Memory is
//! [`BUCKETS`] counters (16 KB) per histogram, values up to 2^[`MAX_EXPONENT`] ns (68.7 s)
//! kept apart and larger ones counted in the last bucket.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bits of resolution: values below 2^SUB_BITS are exact, and each octave above has
/// 2^(SUB_BITS - 1) buckets.
pub const SUB_BITS: u32 = 7;
/// Buckets per octave above the exact range.
const HALF: usize = 1 << (SUB_BITS - 1);
/// The largest octave kept apart: values at or above 2^(MAX_EXPONENT + 1) share the last
/// bucket. 2^37 ns is 137 s, far past any request a client waits for.
pub const MAX_EXPONENT: u32 = 36;
/// Counters per histogram.
pub const BUCKETS: usize = (MAX_EXPONENT - SUB_BITS + 3) as usize * HALF;

/// The bucket a value falls in.
#[inline]
fn index(value: u64) -> usize {
    if value < (1 << SUB_BITS) {
        return value as usize;
    }
    let exponent = 63 - value.leading_zeros();
    if exponent > MAX_EXPONENT {
        return BUCKETS - 1;
    }
    let shift = exponent - SUB_BITS + 1;
    // `value >> shift` is in [HALF, 2 * HALF): the position within the octave, offset by
    // the HALF buckets every octave before it added.
    shift as usize * HALF + (value >> shift) as usize
}

/// The smallest value and the width of bucket `i` (the inverse of [`index`]).
fn bucket_range(i: usize) -> (u64, u64) {
    if i < (1 << SUB_BITS) {
        return (i as u64, 1);
    }
    let shift = (i / HALF) as u32 - 1;
    let position = (i % HALF + HALF) as u64;
    (position << shift, 1 << shift)
}

/// A log-linear histogram one thread records into and any thread snapshots.
#[derive(Debug)]
pub struct LogHistogram {
    counts: Box<[AtomicU64]>,
}

impl Default for LogHistogram {
    fn default() -> LogHistogram {
        LogHistogram::new()
    }
}

impl LogHistogram {
    /// An empty histogram.
    pub fn new() -> LogHistogram {
        LogHistogram {
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Records `n` observations of `value`. Relaxed: the recording thread is the only
    /// writer, so the add never contends; a scrape sees it now or at the next scrape.
    #[inline]
    pub fn record_n(&self, value: u64, n: u64) {
        if let Some(c) = self.counts.get(index(value)) {
            c.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// The counts now. A histogram nothing was recorded in snapshots to an empty vector,
    /// so idle histograms cost nothing to keep or merge.
    pub fn snapshot(&self) -> LogSnapshot {
        let mut counts: Vec<u64> = self
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        if counts.iter().all(|&c| c == 0) {
            counts = Vec::new();
        }
        LogSnapshot { counts }
    }
}

/// A [`LogHistogram`]'s counts at one moment: mergeable across threads, subtractable to
/// get what happened between two moments, and queried for quantiles.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogSnapshot {
    /// Per bucket; empty when every count is zero.
    counts: Vec<u64>,
}

impl LogSnapshot {
    /// Adds another snapshot's counts.
    pub fn merge(&mut self, other: &LogSnapshot) {
        if other.counts.is_empty() {
            return;
        }
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS];
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
    }

    /// What was recorded after `earlier` (a snapshot of the same histograms taken
    /// before): counts that went down, which only a reset could do, count as zero.
    pub fn since(&self, earlier: &LogSnapshot) -> LogSnapshot {
        if earlier.counts.is_empty() {
            return self.clone();
        }
        let counts = self
            .counts
            .iter()
            .zip(&earlier.counts)
            .map(|(now, then)| now.saturating_sub(*then))
            .collect();
        LogSnapshot { counts }
    }

    /// Observations in all.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The value at quantile `q` (0.0 to 1.0): the midpoint of the bucket holding the
    /// observation of rank ceil(q * count), within 0.8% of the recorded value (exact below
    /// 2^[`SUB_BITS`]). `None` when nothing was recorded.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (low, width) = bucket_range(i);
                return Some(low + (width - 1) / 2);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn buckets_tile_the_range_in_order() {
        let mut expected_low = 0u64;
        for i in 0..BUCKETS {
            let (low, width) = bucket_range(i);
            assert_eq!(low, expected_low, "bucket {i}");
            assert_eq!(index(low), i);
            assert_eq!(index(low + width - 1), i);
            expected_low = low + width;
        }
        assert_eq!(expected_low, 1 << (MAX_EXPONENT + 1));
        assert_eq!(index(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn a_bucket_is_at_most_a_64th_of_its_values() {
        for i in 1..BUCKETS {
            let (low, width) = bucket_range(i);
            assert!(width * 64 <= low.max(64), "bucket {i}: {low}+{width}");
        }
    }

    #[test]
    fn empty_histograms_have_no_quantiles_and_cost_nothing() {
        let h = LogHistogram::new();
        let s = h.snapshot();
        assert_eq!(s.quantile(0.5), None);
        assert!(s.counts.is_empty());
        let mut sum = LogSnapshot::default();
        sum.merge(&s);
        assert!(sum.counts.is_empty());
    }

    #[test]
    fn since_subtracts_an_earlier_snapshot() {
        let h = LogHistogram::new();
        h.record_n(1_000, 10);
        let before = h.snapshot();
        h.record_n(50_000, 5);
        let window = h.snapshot().since(&before);
        assert_eq!(window.count(), 5);
        let p50 = window.quantile(0.5).unwrap_or(0);
        assert!((49_600..=50_400).contains(&p50), "{p50}");
    }

    /// Quantiles agree with the `hdrhistogram` crate (2 significant digits) on a spread
    /// of 20,000 values over ten decades, within the precision both promise.
    #[test]
    fn quantiles_match_hdrhistogram() {
        let ours = LogHistogram::new();
        let mut reference =
            hdrhistogram::Histogram::<u64>::new_with_bounds(1, 1 << 40, 2).expect("valid bounds");
        // A deterministic log-uniform spread (xorshift), 10 ns to 100 s.
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = 10f64.powf(1.0 + (x % 1_000_000) as f64 / 100_000.0) as u64;
            ours.record_n(v, 1);
            reference.record(v).expect("in bounds");
        }
        let snapshot = ours.snapshot();
        for q in [0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 0.9999] {
            let got = snapshot.quantile(q).unwrap_or(0) as f64;
            let want = reference.value_at_quantile(q) as f64;
            assert!(
                (got / want - 1.0).abs() < 0.02,
                "q={q}: ours {got}, hdr {want}"
            );
        }
    }

    proptest! {
        /// The reported quantile is within 0.8% of the exact one (the value of rank
        /// ceil(q * n) among the sorted observations).
        #[test]
        fn quantiles_are_within_a_percent_of_exact(
            values in proptest::collection::vec((1u64..(1 << 36), 1u64..20), 1..100),
            q in 0.0f64..=1.0,
        ) {
            let h = LogHistogram::new();
            let mut all = Vec::new();
            for &(v, n) in &values {
                h.record_n(v, n);
                all.extend(std::iter::repeat_n(v, n as usize));
            }
            all.sort_unstable();
            let rank = ((q * all.len() as f64).ceil() as usize).clamp(1, all.len());
            let exact = all[rank - 1] as f64;
            let got = h.snapshot().quantile(q).unwrap_or(0) as f64;
            prop_assert!((got / exact - 1.0).abs() <= 0.008, "q={q}: {exact} -> {got}");
        }
    }
}
