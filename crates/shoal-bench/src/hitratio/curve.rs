//! Miss-ratio curves: miss ratio against cache size, one line per server and per
//! libCacheSim reference policy.

use super::reference::RefPoint;
use super::run::Point;
use crate::chart::{line_chart, Series};
use crate::BenchError;
use std::collections::BTreeMap;
use std::path::Path;

/// Draws the miss-ratio curve of `points` (and `refs`, dashed in the legend by name)
/// into `dir/file`; x is the cache size in MiB on a log scale.
pub fn miss_ratio_chart(
    dir: &Path,
    file: &str,
    title: &str,
    points: &[Point],
    refs: &[RefPoint],
) -> Result<String, BenchError> {
    let mut lines: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for p in points {
        lines
            .entry(p.contender.clone())
            .or_default()
            .push((p.memory_mb as f64, p.result.miss_ratio()));
    }
    for r in refs {
        lines
            .entry(format!("libCacheSim {}", r.algorithm))
            .or_default()
            .push((r.memory_mb as f64, 1.0 - r.hit_ratio));
    }
    let series: Vec<Series> = lines
        .into_iter()
        .map(|(name, mut pts)| {
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series::new(name, pts)
        })
        .collect();
    line_chart(dir, file, title, "cache size (MiB)", "miss ratio", &series)
}
