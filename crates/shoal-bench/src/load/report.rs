//! What a load run measured: latency percentiles, per-operation counts and the report
//! that sums them.

use super::LoadConfig;
use crate::text::{Op, Reply};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::time::Instant;

/// Latency percentiles of the measured window, in microseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Latency {
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Slowest request.
    pub max_us: f64,
    /// Mean.
    pub mean_us: f64,
}

impl Latency {
    /// Percentiles of a histogram recorded in nanoseconds.
    pub fn from_histogram(h: &Histogram<u64>) -> Self {
        let us = |ns: u64| ns as f64 / 1000.0;
        Latency {
            p50_us: us(h.value_at_quantile(0.50)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
            mean_us: h.mean() / 1000.0,
        }
    }
}

/// Counts of requests and replies.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Counts {
    /// Gets answered.
    pub gets: u64,
    /// Sets answered.
    pub sets: u64,
    /// Gets that returned a value.
    pub hits: u64,
    /// Gets that returned nothing.
    pub misses: u64,
    /// `ERROR`, `CLIENT_ERROR` and `SERVER_ERROR` replies.
    pub errors: u64,
}

impl Counts {
    pub(super) fn record(&mut self, op: Op, reply: Reply) {
        match op {
            Op::Get => self.gets += 1,
            Op::Set => self.sets += 1,
        }
        match reply {
            Reply::Hit => self.hits += 1,
            Reply::Miss => self.misses += 1,
            Reply::Error => self.errors += 1,
            Reply::Stored | Reply::NotStored => {}
        }
    }

    pub(super) fn add(&mut self, o: &Counts) {
        self.gets += o.gets;
        self.sets += o.sets;
        self.hits += o.hits;
        self.misses += o.misses;
        self.errors += o.errors;
    }

    /// Gets and sets answered.
    pub fn ops(&self) -> u64 {
        self.gets + self.sets
    }
}

/// The result of one load run.
#[derive(Clone, Debug, Serialize)]
pub struct LoadReport {
    /// What was run.
    pub config: LoadConfig,
    /// Requests answered in the measured window.
    pub measured: Counts,
    /// Requests answered per second in the measured window.
    pub ops_per_sec: f64,
    /// Length of the measured window in seconds (shorter than asked if a server died).
    pub window_secs: f64,
    /// Latency in the measured window.
    pub latency: Latency,
    /// Every request answered, prefill and warm-up included (what the server counted).
    pub total: Counts,
    /// Wall time of the whole run, prefill included, in seconds.
    pub elapsed_secs: f64,
    /// Why connections stopped early (a server closed them or died), with how many.
    /// Empty when the run completed; the numbers above are what was measured before.
    pub failures: Vec<String>,
}

impl LoadReport {
    /// Every request answered: prefill, warm-up and measured window.
    pub fn total_ops(&self) -> u64 {
        self.total.ops()
    }

    /// Whether the run stopped early.
    pub fn failed(&self) -> bool {
        !self.failures.is_empty()
    }

    /// A few lines for a person.
    pub fn summary(&self) -> String {
        let c = &self.config;
        let m = &self.measured;
        let l = &self.latency;
        let servers: Vec<String> = c.servers.iter().map(|s| s.to_string()).collect();
        let mut out = format!(
            "{server} ({proto}{placement}): {conns} conns x depth {depth} on {threads} threads, \
             {keys} keys ({dist}), {vs}-byte values, {set:.0}% sets, {window}\n\
             ops/s {ops:.0}  ({gets} gets, {sets} sets, hit rate {hit:.1}%, {err} errors)\n\
             latency us: p50 {p50:.1}  p99 {p99:.1}  p99.9 {p999:.1}  max {max:.1}  mean {mean:.1}",
            server = servers.join(","),
            proto = c.protocol.name(),
            placement = c
                .placement_name
                .as_deref()
                .map(|p| format!(", {p}"))
                .unwrap_or_default(),
            conns = c.conns,
            depth = c.depth,
            threads = c.threads,
            keys = c.keys,
            dist = c.key_dist,
            vs = c.value_size,
            set = c.set_ratio * 100.0,
            window = match c.requests {
                Some(n) => format!("{n} requests in {:.2}s", self.window_secs),
                None => format!(
                    "{:.1}s (+{:.1}s warm-up)",
                    self.window_secs,
                    c.warmup.as_secs_f64()
                ),
            },
            ops = self.ops_per_sec,
            gets = m.gets,
            sets = m.sets,
            hit = if m.gets > 0 {
                m.hits as f64 * 100.0 / m.gets as f64
            } else {
                0.0
            },
            err = m.errors,
            p50 = l.p50_us,
            p99 = l.p99_us,
            p999 = l.p999_us,
            max = l.max_us,
            mean = l.mean_us,
        );
        for f in &self.failures {
            out.push_str("\nstopped early: ");
            out.push_str(f);
        }
        out
    }
}

/// One connection's results.
pub(super) struct ConnResult {
    pub(super) hist: Histogram<u64>,
    pub(super) measured: Counts,
    pub(super) total: Counts,
    /// When the last measured reply arrived.
    pub(super) last: Option<Instant>,
    /// Why and when the connection stopped early.
    pub(super) failure: Option<(String, Instant)>,
}

pub(super) fn new_histogram() -> Histogram<u64> {
    // 1 ns to 100 s at 3 significant digits; cannot fail with these bounds.
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("constant bounds are valid")
}
