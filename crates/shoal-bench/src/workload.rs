//! What the generator asks for: which keys (uniform or zipfian) and how large the values
//! are (fixed or a uniform range).

use crate::rng::Rng;
use crate::BenchError;
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// How keys are chosen from `0..keys`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum KeyDist {
    /// Every key equally likely.
    Uniform,
    /// Zipfian with exponent `theta` (YCSB's default is 0.99): key 0 is the hottest.
    Zipfian {
        /// The skew, 0 < theta < 1.
        theta: f64,
    },
}

impl FromStr for KeyDist {
    type Err = BenchError;

    /// `uniform`, `zipfian` (theta 0.99) or `zipfian:THETA`.
    fn from_str(s: &str) -> Result<Self, BenchError> {
        let bad = || {
            BenchError::Config(format!(
                "bad key distribution {s:?} (uniform, zipfian or zipfian:0.99)"
            ))
        };
        match s.split_once(':') {
            None if s == "uniform" => Ok(KeyDist::Uniform),
            None if s == "zipfian" || s == "zipf" => Ok(KeyDist::Zipfian { theta: 0.99 }),
            Some(("zipfian" | "zipf", t)) => {
                let theta: f64 = t.parse().map_err(|_| bad())?;
                if theta > 0.0 && theta < 1.0 {
                    Ok(KeyDist::Zipfian { theta })
                } else {
                    Err(BenchError::Config(format!(
                        "zipfian theta must be between 0 and 1 (exclusive), not {theta}"
                    )))
                }
            }
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for KeyDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyDist::Uniform => f.write_str("uniform"),
            KeyDist::Zipfian { theta } => write!(f, "zipfian:{theta}"),
        }
    }
}

/// The zipfian generator of Gray et al., "Quickly generating billion-record synthetic
/// databases" (SIGMOD 1994), as YCSB implements it: constant time per draw after an O(n)
/// computation of zeta(n, theta).
#[derive(Clone, Debug)]
pub struct Zipf {
    n: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

fn zeta(n: u64, theta: f64) -> f64 {
    (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum()
}

impl Zipf {
    /// A generator over `0..n` (`n` >= 1) with skew `theta` in (0, 1).
    pub fn new(n: u64, theta: f64) -> Self {
        let n = n.max(1);
        let zetan = zeta(n, theta);
        let zeta2 = zeta(2.min(n), theta);
        let alpha = 1.0 / (1.0 - theta);
        let eta = if n > 1 {
            (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan)
        } else {
            0.0
        };
        Zipf {
            n,
            theta,
            alpha,
            zetan,
            eta,
        }
    }

    /// One draw in `0..n`; 0 is the most frequent.
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        let u = rng.unit();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1.min(self.n - 1);
        }
        let v = (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        v.min(self.n - 1)
    }
}

/// A key chooser built from a [`KeyDist`] and a key count.
#[derive(Clone, Debug)]
pub enum KeyChooser {
    /// Uniform over `0..n`.
    Uniform(u64),
    /// Zipfian.
    Zipf(Zipf),
}

impl KeyChooser {
    /// A chooser over `0..keys`.
    pub fn new(dist: KeyDist, keys: u64) -> Self {
        match dist {
            KeyDist::Uniform => KeyChooser::Uniform(keys.max(1)),
            KeyDist::Zipfian { theta } => KeyChooser::Zipf(Zipf::new(keys, theta)),
        }
    }

    /// The next key index.
    pub fn next(&self, rng: &mut Rng) -> u64 {
        match self {
            KeyChooser::Uniform(n) => rng.below(*n),
            KeyChooser::Zipf(z) => z.sample(rng),
        }
    }
}

/// Value sizes: fixed, or uniform in `min..=max` (seed 000 used 20-256).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ValueSize {
    /// Smallest value.
    pub min: usize,
    /// Largest value.
    pub max: usize,
}

impl ValueSize {
    /// Always `n` bytes.
    pub fn fixed(n: usize) -> Self {
        ValueSize { min: n, max: n }
    }

    /// The size of the next value.
    pub fn next(&self, rng: &mut Rng) -> usize {
        if self.min == self.max {
            self.min
        } else {
            self.min + rng.below((self.max - self.min + 1) as u64) as usize
        }
    }

    /// The size of the next value drawn log-uniformly from `min..=max`: every order of
    /// magnitude equally likely (10 B-100 B as often as 100 KB-1 MB), which is how mixed
    /// caches see sizes; a uniform draw over 10 B-500 KB would be almost all large values.
    pub fn next_log_uniform(&self, rng: &mut Rng) -> usize {
        if self.min >= self.max || self.min == 0 {
            return self.next(rng);
        }
        let (lo, hi) = ((self.min as f64).ln(), ((self.max + 1) as f64).ln());
        let v = (lo + (hi - lo) * rng.unit()).exp() as usize;
        v.clamp(self.min, self.max)
    }

    /// The mean of [`ValueSize::next_log_uniform`]: (max - min) / ln(max / min).
    pub fn log_uniform_mean(&self) -> f64 {
        if self.min >= self.max || self.min == 0 {
            return (self.min + self.max) as f64 / 2.0;
        }
        (self.max - self.min) as f64 / (self.max as f64 / self.min as f64).ln()
    }
}

impl FromStr for ValueSize {
    type Err = BenchError;

    /// `100`, `20-256`, or sizes with `k`/`m` suffixes (`1k`, `100k`).
    fn from_str(s: &str) -> Result<Self, BenchError> {
        let one = |t: &str| -> Result<usize, BenchError> {
            let t = t.trim();
            let (num, mult) = if let Some(n) = t.strip_suffix(['k', 'K']) {
                (n, 1024)
            } else if let Some(n) = t.strip_suffix(['m', 'M']) {
                (n, 1024 * 1024)
            } else {
                (t, 1)
            };
            num.parse::<usize>()
                .ok()
                .and_then(|n| n.checked_mul(mult))
                .ok_or_else(|| {
                    BenchError::Config(format!("bad value size {s:?} (100, 1k, 20-256)"))
                })
        };
        let v = match s.split_once('-') {
            Some((a, b)) => ValueSize {
                min: one(a)?,
                max: one(b)?,
            },
            None => ValueSize::fixed(one(s)?),
        };
        if v.min > v.max {
            return Err(BenchError::Config(format!(
                "value size range {s:?} has min above max"
            )));
        }
        if v.max > 64 * 1024 * 1024 {
            return Err(BenchError::Config(format!(
                "value size {s:?} is above 64 MiB"
            )));
        }
        Ok(v)
    }
}

impl fmt::Display for ValueSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.min == self.max {
            write!(f, "{}", self.min)
        } else {
            write!(f, "{}-{}", self.min, self.max)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_distributions() {
        assert_eq!("uniform".parse::<KeyDist>().unwrap(), KeyDist::Uniform);
        assert_eq!(
            "zipfian".parse::<KeyDist>().unwrap(),
            KeyDist::Zipfian { theta: 0.99 }
        );
        assert_eq!(
            "zipfian:0.5".parse::<KeyDist>().unwrap(),
            KeyDist::Zipfian { theta: 0.5 }
        );
        assert!("zipfian:1.5".parse::<KeyDist>().is_err());
        assert!("normal".parse::<KeyDist>().is_err());
    }

    #[test]
    fn zipfian_is_skewed_and_in_range() {
        let z = Zipf::new(1000, 0.99);
        let mut rng = Rng::new(3);
        let mut counts = vec![0u32; 1000];
        for _ in 0..100_000 {
            counts[z.sample(&mut rng) as usize] += 1;
        }
        // For theta 0.99 and n = 1000, P(0) = 1/zeta(1000) ~ 0.134.
        assert!((11_000..16_000).contains(&counts[0]), "{}", counts[0]);
        assert!(counts[0] > counts[1] && counts[1] > counts[10]);
        assert!(counts[10] > counts[500]);
        // The tail is reached.
        assert!(counts[900..].iter().sum::<u32>() > 0);
        let one = Zipf::new(1, 0.99);
        assert_eq!(one.sample(&mut rng), 0);
    }

    #[test]
    fn parses_value_sizes() {
        assert_eq!("100".parse::<ValueSize>().unwrap(), ValueSize::fixed(100));
        assert_eq!(
            "20-256".parse::<ValueSize>().unwrap(),
            ValueSize { min: 20, max: 256 }
        );
        assert_eq!("1k".parse::<ValueSize>().unwrap(), ValueSize::fixed(1024));
        assert!("256-20".parse::<ValueSize>().is_err());
        assert!("x".parse::<ValueSize>().is_err());
        assert!("1000m".parse::<ValueSize>().is_err());
        let v = ValueSize { min: 20, max: 256 };
        let mut rng = Rng::new(1);
        let sizes: Vec<usize> = (0..10_000).map(|_| v.next(&mut rng)).collect();
        assert!(sizes.iter().all(|s| (20..=256).contains(s)));
        assert!(sizes.contains(&20) && sizes.contains(&256));
    }

    #[test]
    fn log_uniform_sizes_spread_over_orders_of_magnitude() {
        let v: ValueSize = "10-500k".parse().unwrap();
        let mut rng = Rng::new(9);
        let sizes: Vec<usize> = (0..100_000).map(|_| v.next_log_uniform(&mut rng)).collect();
        assert!(sizes.iter().all(|s| (10..=512_000).contains(s)));
        // ln(100)/ln(51200) of the draws fall in 10..1000: about 42%.
        let small = sizes.iter().filter(|&&s| s < 1000).count();
        assert!((40_000..45_000).contains(&small), "{small}");
        let mean = sizes.iter().sum::<usize>() as f64 / sizes.len() as f64;
        let want = v.log_uniform_mean();
        assert!((mean / want - 1.0).abs() < 0.03, "{mean} vs {want}");
        assert_eq!(ValueSize::fixed(7).next_log_uniform(&mut rng), 7);
    }
}
