//! The RSS curve as a PNG, with lines at `-m` and at the budget.

use super::config::SoakConfig;
use super::sampling::Sample;
use crate::chart::{self, Series};
use crate::report::num;
use crate::BenchError;
use plotters::chart::SeriesLabelPosition;
use std::path::Path;

/// Draws `samples` (with lines at `-m` and at `budget_mb`) into `dir/file`; returns the
/// file name.
pub(super) fn rss_curve(
    dir: &Path,
    file: &str,
    c: &SoakConfig,
    samples: &[Sample],
    slow_conns: usize,
    budget_mb: f64,
) -> Result<String, BenchError> {
    let end = c.duration.as_secs_f64();
    let flat = |y: f64| vec![(0.0, y), (end, y)];
    let rss = samples.iter().map(|s| (s.t_secs, s.rss_mb)).collect();
    chart::line_chart_legend_at(
        dir,
        file,
        &format!(
            "{} RSS under soak: -m {}, {} connections, {} slow",
            c.server.name(),
            c.memory_mb,
            c.conns,
            slow_conns
        ),
        "seconds",
        "RSS (MiB)",
        &[
            Series::line("VmRSS", rss),
            Series::line(format!("-m {}", c.memory_mb), flat(c.memory_mb as f64)),
            Series::line(format!("budget {}", num(budget_mb)), flat(budget_mb)),
        ],
        SeriesLabelPosition::LowerRight,
    )
}
