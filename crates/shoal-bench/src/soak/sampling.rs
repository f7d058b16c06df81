//! The server's RSS, once a second, and the curve summed up for the verdict.

use super::SoakConfig;
use crate::report::num;
use crate::server::ServerProcess;
use serde::Serialize;
use std::time::{Duration, Instant};

/// One RSS sample.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Sample {
    /// Seconds since the load started.
    pub t_secs: f64,
    /// VmRSS, MiB.
    pub rss_mb: f64,
    /// Requests answered so far.
    pub ops: u64,
}

/// The RSS curve summed up, MiB.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RssSummary {
    /// Before any load.
    pub idle_mb: f64,
    /// Smallest sample.
    pub min_mb: f64,
    /// Median sample.
    pub median_mb: f64,
    /// Largest sample.
    pub max_mb: f64,
    /// Largest sample after the warm-up: what the verdict judges.
    pub max_after_warmup_mb: Option<f64>,
    /// Median of the first window after the warm-up.
    pub first_window_mb: Option<f64>,
    /// Median of the last window.
    pub last_window_mb: Option<f64>,
    /// Last window minus first: how far from flat the curve is.
    pub growth_mb: Option<f64>,
    /// The first window, seconds from the start.
    pub first_window_secs: (f64, f64),
    /// The last window, seconds from the start.
    pub last_window_secs: (f64, f64),
}

/// What [`sample`] saw.
pub(super) struct Sampled {
    /// One sample a second on the second, and one at the end.
    pub(super) samples: Vec<Sample>,
    /// Whether the server was alive at every sample.
    pub(super) survived: bool,
    /// When sampling stopped: the end, or when the server was found dead.
    pub(super) stopped_at: Instant,
}

/// Samples `srv`'s VmRSS once a second on the second over `(start, end)`, and once at the
/// end, stopping early if the server dies. `ops` and `errors` read the clients' progress,
/// which is printed every 10 s with the RSS.
pub(super) fn sample(
    srv: &mut ServerProcess,
    name: &str,
    (t0, end): (Instant, Instant),
    ops: impl Fn() -> u64,
    errors: impl Fn() -> u64,
) -> Sampled {
    let secs = end.saturating_duration_since(t0).as_secs();
    let mut samples = Vec::with_capacity(secs.min(86_400) as usize + 2);
    for k in 0u64.. {
        let at = (t0 + Duration::from_secs(k)).min(end);
        std::thread::sleep(at.saturating_duration_since(Instant::now()));
        if !srv.alive() {
            return Sampled {
                samples,
                survived: false,
                stopped_at: Instant::now(),
            };
        }
        if let Ok(kib) = srv.rss_kib() {
            let ops = ops();
            let t_secs = t0.elapsed().as_secs_f64();
            samples.push(Sample {
                t_secs,
                rss_mb: kib as f64 / 1024.0,
                ops,
            });
            if k % 10 == 0 || at >= end {
                eprintln!(
                    "[soak {name}] {t_secs:>5.0}s  RSS {:>7.1} MiB  ops {:>11}  errors {}",
                    kib as f64 / 1024.0,
                    count(ops),
                    errors()
                );
            }
        }
        if at >= end {
            break;
        }
    }
    Sampled {
        samples,
        survived: true,
        stopped_at: end,
    }
}

/// A count with thousands separators (`num` would give small ones decimals).
pub(super) fn count(n: u64) -> String {
    if n >= 100 {
        num(n as f64)
    } else {
        n.to_string()
    }
}

/// The median of `v` (0 when empty).
fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Sums the curve up: extremes, the largest sample after warm-up, and the medians of the
/// first and last windows of the judged part.
pub(super) fn summarize(cfg: &SoakConfig, idle_mb: f64, samples: &[Sample]) -> RssSummary {
    let all: Vec<f64> = samples.iter().map(|s| s.rss_mb).collect();
    let within = |from: f64, to: f64| -> Option<f64> {
        let v: Vec<f64> = samples
            .iter()
            .filter(|s| s.t_secs >= from && s.t_secs <= to)
            .map(|s| s.rss_mb)
            .collect();
        (!v.is_empty()).then(|| median(v))
    };
    let warm = cfg.warmup.as_secs_f64();
    let dur = cfg.duration.as_secs_f64();
    let win = cfg.window().as_secs_f64();
    // Samples are taken on the second, up to a few ms late: a small tolerance keeps the
    // window's last sample in it.
    let slack = 0.5;
    let first = (warm, warm + win);
    let last = (dur - win, dur);
    let first_mb = within(first.0, first.1 + slack);
    let last_mb = within(last.0, last.1 + slack);
    RssSummary {
        idle_mb,
        min_mb: all.iter().copied().reduce(f64::min).unwrap_or(0.0),
        median_mb: median(all.clone()),
        max_mb: all.iter().copied().reduce(f64::max).unwrap_or(0.0),
        max_after_warmup_mb: samples
            .iter()
            .filter(|s| s.t_secs >= warm)
            .map(|s| s.rss_mb)
            .reduce(f64::max),
        first_window_mb: first_mb,
        last_window_mb: last_mb,
        growth_mb: first_mb.zip(last_mb).map(|(a, b)| b - a),
        first_window_secs: first,
        last_window_secs: last,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seeds::ServerKind;
    use std::path::PathBuf;
    use std::time::Duration;

    fn cfg(kind: ServerKind) -> SoakConfig {
        SoakConfig::new(kind, PathBuf::from("/bin/true"))
    }

    #[test]
    fn summarizes_a_curve() {
        let mut c = cfg(ServerKind::Shoald);
        c.duration = Duration::from_secs(10);
        c.warmup = Duration::from_secs(2);
        // Climbs to 2 s, then 50 MiB flat except one 90 MiB spike at 7 s.
        let samples: Vec<Sample> = (0..=10)
            .map(|t| Sample {
                t_secs: t as f64 + 0.002,
                rss_mb: match t {
                    0 => 5.0,
                    1 => 30.0,
                    7 => 90.0,
                    _ => 50.0,
                },
                ops: t * 100,
            })
            .collect();
        let r = summarize(&c, 4.0, &samples);
        assert_eq!(r.min_mb, 5.0);
        assert_eq!(r.max_mb, 90.0);
        assert_eq!(r.median_mb, 50.0);
        assert_eq!(r.max_after_warmup_mb, Some(90.0));
        assert_eq!(r.first_window_secs, (2.0, 6.0));
        assert_eq!(r.last_window_secs, (6.0, 10.0));
        assert_eq!(r.first_window_mb, Some(50.0));
        assert_eq!(r.last_window_mb, Some(50.0));
        assert_eq!(r.growth_mb, Some(0.0));
        let empty = summarize(&c, 4.0, &[]);
        assert_eq!(empty.max_after_warmup_mb, None);
        assert_eq!(empty.growth_mb, None);
    }

    #[test]
    fn medians() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(Vec::new()), 0.0);
    }
}
