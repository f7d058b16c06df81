//! PNG charts with plotters: lines against concurrency and bars by name. Text is drawn
//! with a bundled DejaVu Sans (ab_glyph), so no system fonts or fontconfig are needed.

use crate::BenchError;
use plotters::prelude::*;
use std::path::Path;
use std::sync::Once;

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
static REGISTER: Once = Once::new();

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

fn register() {
    REGISTER.call_once(|| {
        // The bundled font is valid; if it were not, text would fail to draw and the
        // chart call would report that.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// One line: a name and its (x, y) points.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Points, in x order.
    pub points: Vec<(f64, f64)>,
    /// A dot at every point (off for dense time series, where dots would hide the line).
    pub markers: bool,
}

impl Series {
    /// A named series.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            name: name.into(),
            points,
            markers: true,
        }
    }

    /// A named series drawn as a bare line, without a dot at every point.
    pub fn line(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            markers: false,
            ..Series::new(name, points)
        }
    }
}

fn draw_err(e: impl std::fmt::Display) -> BenchError {
    BenchError::Config(format!("drawing a chart: {e}"))
}

/// Draws `series` into `dir/file` (800x500 PNG); x is on a log scale when it spans 20x
/// or more. Returns the file name.
pub fn line_chart(
    dir: &Path,
    file: &str,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> Result<String, BenchError> {
    line_chart_legend_at(
        dir,
        file,
        title,
        x_label,
        y_label,
        series,
        SeriesLabelPosition::UpperRight,
    )
}

/// [`line_chart`] with the legend where the lines are not (a curve that rises and stays
/// high wants it at the lower right).
pub fn line_chart_legend_at(
    dir: &Path,
    file: &str,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    legend: SeriesLabelPosition,
) -> Result<String, BenchError> {
    register();
    let path = dir.join(file);
    let pts = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1) = (0.0, 1.0);
    }
    let log = x0 > 0.0 && x1 / x0 >= 20.0;
    let tx = |x: f64| if log { x.log10() } else { x };
    let (lo, hi) = (tx(x0), tx(x1));
    let pad = ((hi - lo) * 0.05).max(0.05);
    let y1 = if y1 > 0.0 { y1 * 1.1 } else { 1.0 };
    {
        let root = BitMapBackend::new(&path, (800, 500)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((lo - pad)..(hi + pad), 0.0..y1)
            .map_err(draw_err)?;
        let fmt_x = |v: &f64| {
            let x = if log { 10f64.powf(*v) } else { *v };
            axis_num(round2(x))
        };
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .x_label_formatter(&fmt_x)
            .y_label_formatter(&|v| axis_num(*v))
            .draw()
            .map_err(draw_err)?;
        for (i, s) in series.iter().enumerate() {
            let c = COLORS[i % COLORS.len()];
            let pts: Vec<(f64, f64)> = s.points.iter().map(|&(x, y)| (tx(x), y)).collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                .map_err(draw_err)?
                .label(s.name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                });
            if s.markers {
                chart
                    .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, c.filled())))
                    .map_err(draw_err)?;
            }
        }
        if series.iter().any(|s| !s.name.is_empty()) {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .position(legend)
                .draw()
                .map_err(draw_err)?;
        }
        root.present().map_err(draw_err)?;
    }
    Ok(file.to_string())
}

/// An axis label: whole numbers without decimals (`1`, `250`, `12,000`), else one.
fn axis_num(v: f64) -> String {
    if v.abs() >= 100.0 {
        crate::report::num(v)
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// `x` rounded to two significant digits (log-axis labels: 1.58 -> 1.6, 251 -> 250).
fn round2(x: f64) -> f64 {
    if x <= 0.0 || !x.is_finite() {
        return x;
    }
    let scale = 10f64.powf(x.log10().floor() - 1.0);
    (x / scale).round() * scale
}

/// Draws one bar per (name, value) into `dir/file`. Returns the file name.
pub fn bar_chart(
    dir: &Path,
    file: &str,
    title: &str,
    y_label: &str,
    bars: &[(String, f64)],
) -> Result<String, BenchError> {
    register();
    let path = dir.join(file);
    let n = bars.len().max(1);
    let y1 = bars.iter().map(|b| b.1).fold(0.0f64, f64::max);
    let y1 = if y1 > 0.0 { y1 * 1.15 } else { 1.0 };
    {
        let root = BitMapBackend::new(&path, (800, 500)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..n as f64, 0.0..y1)
            .map_err(draw_err)?;
        let names: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
        let fmt_x = move |v: &f64| {
            let i = (*v - 0.5).round();
            if (*v - 0.5 - i).abs() < 0.01 && i >= 0.0 {
                names.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n * 2 + 1)
            .x_label_formatter(&fmt_x)
            .y_desc(y_label)
            .y_label_formatter(&|v| axis_num(*v))
            .draw()
            .map_err(draw_err)?;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, b)| {
                let c = COLORS[i % COLORS.len()];
                Rectangle::new([(i as f64 + 0.15, 0.0), (i as f64 + 0.85, b.1)], c.filled())
            }))
            .map_err(draw_err)?;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, b)| {
                Text::new(
                    crate::report::num(b.1),
                    (i as f64 + 0.3, b.1 + y1 * 0.02),
                    ("sans-serif", 14),
                )
            }))
            .map_err(draw_err)?;
        root.present().map_err(draw_err)?;
    }
    Ok(file.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_labels() {
        assert_eq!(axis_num(1.0), "1");
        assert_eq!(axis_num(0.0), "0");
        assert_eq!(axis_num(1.6), "1.6");
        assert_eq!(axis_num(12000.0), "12,000");
    }

    #[test]
    fn log_labels_round() {
        assert_eq!(round2(1.58), 1.6);
        assert_eq!(round2(251.2), 250.0);
        assert_eq!(round2(1000.0), 1000.0);
    }

    #[test]
    fn draws_pngs() {
        let dir = std::env::temp_dir().join(format!("shoal-bench-chart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let s = vec![
            Series::new("a", vec![(1.0, 10.0), (10.0, 50.0), (100.0, 40.0)]),
            Series::new("b", vec![(1.0, 5.0), (100.0, 60.0)]),
            Series::line("c", vec![(1.0, 20.0), (100.0, 20.0)]),
        ];
        line_chart(&dir, "l.png", "title", "x", "y", &s).unwrap();
        bar_chart(
            &dir,
            "b.png",
            "bars",
            "y",
            &[("one".into(), 3.0), ("two".into(), 7.5)],
        )
        .unwrap();
        for f in ["l.png", "b.png"] {
            let bytes = std::fs::read(dir.join(f)).unwrap();
            assert_eq!(&bytes[1..4], b"PNG");
            assert!(bytes.len() > 2000);
        }
        line_chart(&dir, "e.png", "empty", "x", "y", &[]).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
