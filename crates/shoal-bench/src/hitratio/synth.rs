//! Synthetic cache workloads: who asks for what, how big it is, how long it lives.
//!
//! A workload is a popularity law over a fixed key population, a value-size law, a TTL
//! mix, and optional disturbances (bursts of one-time keys, a hot set that moves). Every
//! key keeps one size and one TTL for the whole trace, drawn from a hash of the key and
//! the seed, as real objects do; popularity ranks map to keys through a bijective
//! scramble, so the hottest keys are not the lowest ids. The same spec and seed always
//! give the same trace.

use super::zipf::ZipfRanks;
use super::{Op, Request};
use crate::rng::Rng;
use crate::BenchError;
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// How popular each key is.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Popularity {
    /// Zipf with this exponent (0.8, 1.0, 1.2: higher is more skewed).
    Zipf {
        /// The exponent.
        exponent: f64,
    },
    /// Every key equally likely.
    Uniform,
}

impl FromStr for Popularity {
    type Err = BenchError;

    /// `uniform` or `zipf:EXPONENT`.
    fn from_str(s: &str) -> Result<Self, BenchError> {
        match s.split_once(':') {
            None if s == "uniform" => Ok(Popularity::Uniform),
            Some(("zipf", e)) => match e.parse::<f64>() {
                Ok(exponent) if exponent.is_finite() && (0.0..=4.0).contains(&exponent) => {
                    Ok(Popularity::Zipf { exponent })
                }
                _ => Err(BenchError::Config(format!(
                    "zipf exponent must be between 0 and 4, not {e:?}"
                ))),
            },
            _ => Err(BenchError::Config(format!(
                "bad popularity {s:?} (uniform or zipf:0.8)"
            ))),
        }
    }
}

impl fmt::Display for Popularity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Popularity::Uniform => f.write_str("uniform"),
            Popularity::Zipf { exponent } => write!(f, "zipf:{exponent}"),
        }
    }
}

/// Value sizes, per key.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum SizeDist {
    /// Every value this many bytes.
    Fixed {
        /// Bytes.
        bytes: u32,
    },
    /// Log-normal: `median * e^(sigma * N(0,1))`, clamped to `1..=max`.
    LogNormal {
        /// The median size in bytes.
        median: f64,
        /// The spread of ln(size).
        sigma: f64,
        /// The largest size drawn.
        max: u32,
    },
    /// Log-uniform in `min..=max`: every order of magnitude equally likely.
    LogUniform {
        /// Smallest size.
        min: u32,
        /// Largest size.
        max: u32,
    },
    /// A few sizes, each with a weight.
    Discrete {
        /// (bytes, weight) pairs.
        sizes: Vec<(u32, f64)>,
    },
}

/// Bytes in a size such as `100`, `10k` or `1m` (KiB and MiB).
pub fn parse_bytes(s: &str) -> Result<u32, BenchError> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mult) = if let Some(n) = t.strip_suffix('k') {
        (n, 1024)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 1024 * 1024)
    } else {
        (t.as_str(), 1)
    };
    num.parse::<u32>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .filter(|&n| n > 0)
        .ok_or_else(|| BenchError::Config(format!("bad size {s:?} (100, 10k, 1m)")))
}

impl FromStr for SizeDist {
    type Err = BenchError;

    /// `100`, `lognormal:MEDIAN:SIGMA[:MAX]`, `loguniform:MIN:MAX`, or
    /// `mix:1k,10k,100k` (equal weights) / `mix:1k=3,100k=1`.
    fn from_str(s: &str) -> Result<Self, BenchError> {
        let bad = |why: &str| BenchError::Config(format!("bad size law {s:?}: {why}"));
        let parts: Vec<&str> = s.split(':').collect();
        match parts.as_slice() {
            [one] => Ok(SizeDist::Fixed {
                bytes: parse_bytes(one)?,
            }),
            ["lognormal", median, sigma, rest @ ..] if rest.len() <= 1 => {
                let median = f64::from(parse_bytes(median)?);
                let sigma: f64 = sigma.parse().map_err(|_| bad("sigma"))?;
                if !(sigma.is_finite() && (0.0..=5.0).contains(&sigma)) {
                    return Err(bad("sigma must be between 0 and 5"));
                }
                let max = match rest.first() {
                    Some(m) => parse_bytes(m)?,
                    None => 1 << 20,
                };
                Ok(SizeDist::LogNormal { median, sigma, max })
            }
            ["loguniform", min, max] => {
                let (min, max) = (parse_bytes(min)?, parse_bytes(max)?);
                if min > max {
                    return Err(bad("min above max"));
                }
                Ok(SizeDist::LogUniform { min, max })
            }
            ["mix", list] => {
                let mut sizes = Vec::new();
                for item in list.split(',') {
                    let (size, weight) = match item.split_once('=') {
                        Some((s, w)) => (s, w.parse::<f64>().map_err(|_| bad("weight"))?),
                        None => (item, 1.0),
                    };
                    if !(weight.is_finite() && weight > 0.0) {
                        return Err(bad("weights must be positive"));
                    }
                    sizes.push((parse_bytes(size)?, weight));
                }
                Ok(SizeDist::Discrete { sizes })
            }
            _ => Err(bad(
                "try 100, lognormal:230:1.2, loguniform:10:500k or mix:1k,10k,100k",
            )),
        }
    }
}

impl fmt::Display for SizeDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeDist::Fixed { bytes } => write!(f, "{bytes} B"),
            SizeDist::LogNormal { median, sigma, max } => {
                write!(
                    f,
                    "lognormal (median {median} B, sigma {sigma}, max {max} B)"
                )
            }
            SizeDist::LogUniform { min, max } => write!(f, "log-uniform {min} B-{max} B"),
            SizeDist::Discrete { sizes } => {
                let list: Vec<String> = sizes.iter().map(|(s, w)| format!("{s} B x{w}")).collect();
                write!(f, "mix of {}", list.join(", "))
            }
        }
    }
}

impl SizeDist {
    /// The size of a value, from a generator seeded for its key.
    pub fn draw(&self, rng: &mut Rng) -> u32 {
        match self {
            SizeDist::Fixed { bytes } => *bytes,
            SizeDist::LogNormal { median, sigma, max } => {
                let v = median.ln() + sigma * standard_normal(rng);
                (v.exp() as u32).clamp(1, *max)
            }
            SizeDist::LogUniform { min, max } => {
                let (lo, hi) = (f64::from(*min).ln(), (f64::from(*max) + 1.0).ln());
                ((lo + (hi - lo) * rng.unit()).exp() as u32).clamp(*min, *max)
            }
            SizeDist::Discrete { sizes } => {
                let total: f64 = sizes.iter().map(|(_, w)| w).sum();
                let mut x = rng.unit() * total;
                for (size, w) in sizes {
                    if x < *w {
                        return *size;
                    }
                    x -= w;
                }
                sizes.last().map_or(1, |(s, _)| *s)
            }
        }
    }
}

/// A standard normal variate (Box-Muller).
fn standard_normal(rng: &mut Rng) -> f64 {
    let u1 = rng.unit().max(f64::MIN_POSITIVE);
    let u2 = rng.unit();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Which share of the keys lives how long.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TtlMix {
    /// (share of keys, TTL in seconds); keys in no class never expire.
    pub classes: Vec<(f64, u32)>,
}

impl FromStr for TtlMix {
    type Err = BenchError;

    /// `none`, or `SHARE:SECONDS[,SHARE:SECONDS...]` (`0.5:2`: half the keys live 2 s).
    fn from_str(s: &str) -> Result<Self, BenchError> {
        if s == "none" || s.is_empty() {
            return Ok(TtlMix::default());
        }
        let bad = || BenchError::Config(format!("bad TTL mix {s:?} (none, or 0.5:2,0.1:60)"));
        let mut classes = Vec::new();
        for item in s.split(',') {
            let (share, secs) = item.split_once(':').ok_or_else(bad)?;
            let share: f64 = share.parse().map_err(|_| bad())?;
            let secs: u32 = secs.parse().map_err(|_| bad())?;
            if !(share.is_finite() && share > 0.0) || secs == 0 {
                return Err(bad());
            }
            classes.push((share, secs));
        }
        if classes.iter().map(|(s, _)| s).sum::<f64>() > 1.0 + 1e-9 {
            return Err(BenchError::Config(format!(
                "TTL shares in {s:?} add up to over 1"
            )));
        }
        Ok(TtlMix { classes })
    }
}

impl fmt::Display for TtlMix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.classes.is_empty() {
            return f.write_str("no TTL");
        }
        let list: Vec<String> = self
            .classes
            .iter()
            .map(|(share, secs)| format!("{:.0}% of keys {secs} s", share * 100.0))
            .collect();
        f.write_str(&list.join(", "))
    }
}

impl TtlMix {
    /// The TTL of a key whose class draw is `u` in `[0, 1)` (0: never expires).
    fn pick(&self, u: f64) -> u32 {
        let mut x = u;
        for (share, secs) in &self.classes {
            if x < *share {
                return *secs;
            }
            x -= share;
        }
        0
    }
}

/// Bursts of keys read once and never again (a batch job scanning through), which a
/// cache should not let push its working set out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Scans {
    /// A burst starts after every this many regular requests.
    pub every: u64,
    /// Keys per burst.
    pub len: u64,
}

/// A hot set that moves: every `every` requests the popularity ranks slide `by` keys
/// along the population, so yesterday's hot keys cool down and new ones heat up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Shift {
    /// Requests between moves.
    pub every: u64,
    /// Keys moved each time.
    pub by: u64,
}

/// Everything that defines a synthetic trace.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SynthSpec {
    /// Distinct keys (not counting scan keys).
    pub keys: u64,
    /// Requests in the trace, scan requests included.
    pub requests: u64,
    /// Who is asked for.
    pub popularity: Popularity,
    /// How big values are.
    pub sizes: SizeDist,
    /// How long keys live.
    pub ttl: TtlMix,
    /// Key length in bytes (at least 11, the length of a base-62 key id).
    pub key_len: u8,
    /// One-time key bursts.
    pub scans: Option<Scans>,
    /// A moving hot set.
    pub shift: Option<Shift>,
    /// Seed: the same spec and seed give the same trace.
    pub seed: u64,
}

impl SynthSpec {
    /// A trace of `requests` reads over `keys` keys: Zipf 1.0, 100-byte values, no TTL.
    pub fn new(keys: u64, requests: u64) -> Self {
        SynthSpec {
            keys,
            requests,
            popularity: Popularity::Zipf { exponent: 1.0 },
            sizes: SizeDist::Fixed { bytes: 100 },
            ttl: TtlMix::default(),
            key_len: 16,
            scans: None,
            shift: None,
            seed: 1,
        }
    }

    /// The same workload for a cache `factor` times larger: keys, requests, scan and
    /// shift sizes multiplied, so the cache holds the same share of the working set and
    /// turns over as often.
    pub fn scaled(&self, factor: f64) -> SynthSpec {
        let f = |n: u64| ((n as f64 * factor).round() as u64).max(1);
        SynthSpec {
            keys: f(self.keys),
            requests: f(self.requests),
            scans: self.scans.map(|s| Scans {
                every: f(s.every),
                len: f(s.len),
            }),
            shift: self.shift.map(|s| Shift {
                every: f(s.every),
                by: f(s.by),
            }),
            ..self.clone()
        }
    }

    /// The requests, in order.
    pub fn generate(&self) -> SynthTrace {
        let ranks = ZipfRanks::new(
            self.keys,
            match self.popularity {
                Popularity::Zipf { exponent } => exponent,
                Popularity::Uniform => 0.0,
            },
        );
        SynthTrace {
            spec: self.clone(),
            ranks,
            rng: Rng::new(self.seed ^ 0x005e_ed0f_7ace),
            emitted: 0,
            regular: 0,
            scan_left: 0,
            scan_next: 0,
        }
    }

    /// The value size and TTL of key `id`, fixed for the whole trace.
    pub fn attributes(&self, id: u64) -> (u32, u32) {
        let mut rng = Rng::new(mix64(id ^ self.seed.rotate_left(17)));
        let size = self.sizes.draw(&mut rng);
        let ttl = self.ttl.pick(rng.unit());
        (size, ttl)
    }
}

/// Scan keys live in their own id space, above every regular key.
const SCAN_IDS: u64 = 1 << 62;

/// The requests of a [`SynthSpec`], generated lazily.
pub struct SynthTrace {
    spec: SynthSpec,
    ranks: ZipfRanks,
    rng: Rng,
    emitted: u64,
    regular: u64,
    scan_left: u64,
    scan_next: u64,
}

impl Iterator for SynthTrace {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        if self.emitted >= self.spec.requests {
            return None;
        }
        self.emitted += 1;
        let spec = &self.spec;
        let id = if self.scan_left > 0 {
            self.scan_left -= 1;
            self.scan_next += 1;
            SCAN_IDS + self.scan_next
        } else {
            self.regular += 1;
            if let Some(s) = spec.scans {
                if s.every > 0 && self.regular % s.every == 0 {
                    self.scan_left = s.len;
                }
            }
            let mut rank = self.ranks.sample(&mut self.rng);
            if let Some(sh) = spec.shift {
                if let Some(moves) = self.regular.checked_div(sh.every) {
                    let offset = moves.wrapping_mul(sh.by);
                    rank = (rank + offset % spec.keys) % spec.keys;
                }
            }
            // Ranks map to keys through a bijection, so key ids carry no popularity.
            scramble(rank)
        };
        let (value_len, ttl) = spec.attributes(id);
        Some(Request {
            time: 0,
            key: id,
            key_len: spec.key_len,
            value_len,
            ttl,
            op: Op::Get,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = usize::try_from(self.spec.requests - self.emitted).unwrap_or(usize::MAX);
        (left, Some(left))
    }
}

/// A bijection on 62-bit ids (xor-shift and odd multiplies, masked), so that distinct
/// ranks give distinct keys and no regular key reaches the scan id space.
pub fn scramble(rank: u64) -> u64 {
    const MASK: u64 = SCAN_IDS - 1;
    let mut x = rank & MASK;
    x ^= x >> 31;
    x = x.wrapping_mul(0x7fb5_d329_728e_a185) & MASK;
    x ^= x >> 27;
    x = x.wrapping_mul(0x81da_def4_bc2d_d44d) & MASK;
    x ^= x >> 33;
    x
}

/// A 64-bit finaliser (SplitMix64's), to seed per-key draws.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    #[test]
    fn laws_parse_and_print() {
        assert_eq!(
            "100".parse::<SizeDist>().unwrap(),
            SizeDist::Fixed { bytes: 100 }
        );
        assert_eq!(
            "loguniform:10:500k".parse::<SizeDist>().unwrap(),
            SizeDist::LogUniform {
                min: 10,
                max: 500 * 1024
            }
        );
        let mix: SizeDist = "mix:1k,10k=2".parse().unwrap();
        assert_eq!(
            mix,
            SizeDist::Discrete {
                sizes: vec![(1024, 1.0), (10240, 2.0)]
            }
        );
        assert!("lognormal:230:9".parse::<SizeDist>().is_err());
        assert!("loguniform:10k:10".parse::<SizeDist>().is_err());
        assert_eq!("0.5:2".parse::<TtlMix>().unwrap().classes, vec![(0.5, 2)]);
        assert!("0.7:2,0.7:3".parse::<TtlMix>().is_err());
        assert!("zipf:9".parse::<Popularity>().is_err());
        assert_eq!(
            "zipf:0.8".parse::<Popularity>().unwrap(),
            Popularity::Zipf { exponent: 0.8 }
        );
    }

    #[test]
    fn a_key_keeps_its_size_and_ttl_and_the_trace_repeats() {
        let mut spec = SynthSpec::new(1000, 20_000);
        spec.sizes = "loguniform:10:500k".parse().unwrap();
        spec.ttl = "0.5:2".parse().unwrap();
        let mut seen: HashMap<u64, (u32, u32)> = HashMap::new();
        for r in spec.generate() {
            let prev = seen.insert(r.key, (r.value_len, r.ttl));
            assert!(prev.is_none() || prev == Some((r.value_len, r.ttl)));
            assert!((10..=500 * 1024).contains(&r.value_len));
        }
        let with_ttl = seen.values().filter(|(_, t)| *t == 2).count();
        assert!(
            (350..650).contains(&with_ttl),
            "{with_ttl} of {}",
            seen.len()
        );
        let a: Vec<u64> = spec.generate().map(|r| r.key).collect();
        let b: Vec<u64> = spec.generate().map(|r| r.key).collect();
        assert_eq!(a, b);
    }

    #[test]
    fn log_uniform_sizes_spread_over_every_decade() {
        let spec = SynthSpec {
            sizes: "loguniform:10:100k".parse().unwrap(),
            ..SynthSpec::new(40_000, 0)
        };
        let mut decades = [0u32; 4];
        for id in 0..40_000 {
            let (size, _) = spec.attributes(id);
            let d = ((f64::from(size).log10() - 1.0).floor() as usize).min(3);
            decades[d] += 1;
        }
        assert!(
            decades.iter().all(|&d| (8_000..12_000).contains(&d)),
            "{decades:?}"
        );
    }

    #[test]
    fn scans_are_one_time_keys_and_shifts_move_the_hot_set() {
        let mut spec = SynthSpec::new(10_000, 11_000);
        spec.scans = Some(Scans {
            every: 1000,
            len: 100,
        });
        let keys: Vec<u64> = spec.generate().map(|r| r.key).collect();
        let scan: Vec<u64> = keys.iter().copied().filter(|&k| k >= SCAN_IDS).collect();
        assert_eq!(scan.len(), 1000);
        assert_eq!(scan.iter().collect::<HashSet<_>>().len(), 1000);

        let mut moving = SynthSpec::new(100_000, 200_000);
        moving.shift = Some(Shift {
            every: 100_000,
            by: 50_000,
        });
        let trace: Vec<u64> = moving.generate().map(|r| r.key).collect();
        let hottest = |part: &[u64]| {
            let mut c: HashMap<u64, u32> = HashMap::new();
            for k in part {
                *c.entry(*k).or_default() += 1;
            }
            c.into_iter().max_by_key(|(_, n)| *n).map(|(k, _)| k)
        };
        assert_ne!(hottest(&trace[..90_000]), hottest(&trace[110_000..]));
    }

    #[test]
    fn scramble_is_injective_on_a_range() {
        let set: HashSet<u64> = (0..100_000).map(scramble).collect();
        assert_eq!(set.len(), 100_000);
        assert!(set.iter().all(|&k| k < SCAN_IDS));
    }
}
