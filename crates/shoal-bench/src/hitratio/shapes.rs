//! The named workload shapes the hit-ratio reports use.
//!
//! The first six are the shapes of issue 24's measurements: fixed small values, a
//! long-tailed size law, the field report's 1 KB / 10 KB / 100 KB values, sizes spread
//! over five orders of magnitude, short TTLs, and scans. The rest probe one more property
//! each. Each is defined for a 64 MiB cache: its working set is several times that, and
//! its requests turn such a cache over many times after the warm-up. For another cache
//! size the shape is [`SynthSpec::scaled`] by size / 64 MiB ([`Shape::for_memory`]), so
//! that the cache holds the same share of the working set; a miss-ratio curve instead
//! keeps one trace for every size.

use super::synth::Popularity::{self, Uniform, Zipf};
use super::synth::{Scans, Shift, SizeDist, SynthSpec, TtlMix};

/// A named synthetic workload.
#[derive(Clone, Debug)]
pub struct Shape {
    /// Short name for the command line and file names.
    pub name: &'static str,
    /// What it is, for reports.
    pub title: &'static str,
    /// The trace.
    pub spec: SynthSpec,
    /// Requests per second it must be replayed at (shapes with TTLs: expiry is wall-clock
    /// time, so every server must see the trace at the same pace).
    pub rate: Option<f64>,
}

fn spec(
    keys: u64,
    requests: u64,
    popularity: Popularity,
    sizes: SizeDist,
    ttl: TtlMix,
) -> SynthSpec {
    SynthSpec {
        popularity,
        sizes,
        ttl,
        ..SynthSpec::new(keys, requests)
    }
}

fn fixed(bytes: u32) -> SizeDist {
    SizeDist::Fixed { bytes }
}

fn lognormal() -> SizeDist {
    SizeDist::LogNormal {
        median: 230.0,
        sigma: 1.2,
        max: 512 * 1024,
    }
}

fn no_ttl() -> TtlMix {
    TtlMix::default()
}

/// The cache size, MiB, the shapes are defined for.
pub const BASE_MB: u64 = 64;

impl Shape {
    /// This shape for a cache of `memory_mb`: keys and requests scaled by
    /// `memory_mb / 64`.
    pub fn for_memory(&self, memory_mb: u64) -> Shape {
        Shape {
            spec: self.spec.scaled(memory_mb as f64 / BASE_MB as f64),
            ..self.clone()
        }
    }
}

/// Every named shape, the issue's six first.
pub fn all() -> Vec<Shape> {
    vec![
        Shape {
            name: "zipf0.8-100b",
            title: "Zipf 0.8, 2M keys, 100 B values",
            spec: spec(
                2_000_000,
                10_000_000,
                Zipf { exponent: 0.8 },
                fixed(100),
                no_ttl(),
            ),
            rate: None,
        },
        Shape {
            name: "zipf0.8-lognormal",
            title: "Zipf 0.8, 1M keys, lognormal sizes (median 230 B, sigma 1.2)",
            spec: spec(
                1_000_000,
                10_000_000,
                Zipf { exponent: 0.8 },
                lognormal(),
                no_ttl(),
            ),
            rate: None,
        },
        Shape {
            name: "zipf1-field-sizes",
            title: "Zipf 1.0, 200k keys, values of 1 KB / 10 KB / 100 KB",
            spec: spec(
                200_000,
                3_000_000,
                Zipf { exponent: 1.0 },
                SizeDist::Discrete {
                    sizes: vec![(1024, 1.0), (10 * 1024, 1.0), (100 * 1024, 1.0)],
                },
                no_ttl(),
            ),
            rate: None,
        },
        Shape {
            name: "zipf1-loguniform",
            title: "Zipf 1.0, 200k keys, log-uniform sizes 10 B-500 KB",
            spec: spec(
                200_000,
                3_000_000,
                Zipf { exponent: 1.0 },
                SizeDist::LogUniform {
                    min: 10,
                    max: 500 * 1024,
                },
                no_ttl(),
            ),
            rate: None,
        },
        Shape {
            name: "zipf1-ttl",
            title: "Zipf 1.0, 1M keys, lognormal sizes, half the keys with a 2 s TTL",
            spec: spec(
                1_000_000,
                4_000_000,
                Zipf { exponent: 1.0 },
                lognormal(),
                TtlMix {
                    classes: vec![(0.5, 2)],
                },
            ),
            rate: Some(100_000.0),
        },
        Shape {
            name: "zipf1-scan",
            title: "Zipf 1.0, 2M keys, 200 B values, bursts of one-time keys (scans)",
            spec: SynthSpec {
                // A fifth of the requests are scans, each a third of a 64 MiB cache: the
                // mix of issue 24's measurement (memcached's hit ratio 0.6).
                scans: Some(Scans {
                    every: 400_000,
                    len: 100_000,
                }),
                ..spec(
                    2_000_000,
                    10_000_000,
                    Zipf { exponent: 1.0 },
                    fixed(200),
                    no_ttl(),
                )
            },
            rate: None,
        },
        Shape {
            name: "uniform-100b",
            title: "Uniform, 1M keys, 100 B values",
            spec: spec(1_000_000, 4_000_000, Uniform, fixed(100), no_ttl()),
            rate: None,
        },
        Shape {
            name: "zipf1-shifting",
            title:
                "Zipf 1.0, 2M keys, 200 B values, the hot set moves 100k keys every 500k requests",
            spec: SynthSpec {
                shift: Some(Shift {
                    every: 500_000,
                    by: 100_000,
                }),
                ..spec(
                    2_000_000,
                    5_000_000,
                    Zipf { exponent: 1.0 },
                    fixed(200),
                    no_ttl(),
                )
            },
            rate: None,
        },
    ]
}

/// The shapes of issue 24's table, in its order.
pub const ISSUE_SHAPES: [&str; 6] = [
    "zipf0.8-100b",
    "zipf0.8-lognormal",
    "zipf1-field-sizes",
    "zipf1-loguniform",
    "zipf1-ttl",
    "zipf1-scan",
];

/// The shape called `name`.
pub fn by_name(name: &str) -> Option<Shape> {
    all().into_iter().find(|s| s.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_the_issue_shapes_exist() {
        let shapes = all();
        let mut names: Vec<&str> = shapes.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), shapes.len());
        for n in ISSUE_SHAPES {
            assert!(by_name(n).is_some(), "{n}");
        }
    }
}
