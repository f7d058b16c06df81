//! Zipf popularity for any exponent, by rejection-inversion.
//!
//! The load generator's [`crate::workload::Zipf`] (Gray et al., as YCSB has it) only
//! works for exponents below 1, and cache studies quote Zipf 1.0 and above. This sampler
//! follows W. Hörmann and G. Derflinger, "Rejection-inversion to generate variates from
//! monotone discrete distributions" (ACM TOMACS, 1996): it inverts the integral of a
//! continuous hat function over the ranks and accepts or retries, constant expected time
//! per draw for every exponent > 0 and every population size, with no table.

use crate::rng::Rng;

/// Ranks `0..n` with P(rank k) proportional to 1 / (k + 1)^exponent.
#[derive(Clone, Debug)]
pub struct ZipfRanks {
    n: u64,
    exponent: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    /// The squeeze: a draw whose rounding error is below this is accepted at once.
    s: f64,
}

impl ZipfRanks {
    /// A sampler over `0..n` (`n` >= 1). An exponent of 0 is uniform.
    pub fn new(n: u64, exponent: f64) -> Self {
        let n = n.max(1);
        let exponent = exponent.max(0.0);
        let mut z = ZipfRanks {
            n,
            exponent,
            h_integral_x1: 0.0,
            h_integral_n: 0.0,
            s: 0.0,
        };
        z.h_integral_x1 = z.h_integral(1.5) - 1.0;
        z.h_integral_n = z.h_integral(n as f64 + 0.5);
        z.s = 2.0 - z.h_integral_inverse(z.h_integral(2.5) - z.h(2.0));
        z
    }

    /// How many ranks there are.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// Whether the population is a single rank (never empty: `new` clamps to 1).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// One rank in `0..n`; 0 is the most frequent.
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        if self.exponent == 0.0 {
            return rng.below(self.n);
        }
        loop {
            let u = self.h_integral_n + rng.unit() * (self.h_integral_x1 - self.h_integral_n);
            let x = self.h_integral_inverse(u);
            let k = ((x + 0.5) as u64).clamp(1, self.n);
            let kf = k as f64;
            if kf - x <= self.s || u >= self.h_integral(kf + 0.5) - self.h(kf) {
                return k - 1;
            }
        }
    }

    /// The hat function, x^-exponent.
    fn h(&self, x: f64) -> f64 {
        (-self.exponent * x.ln()).exp()
    }

    /// Its integral (up to a constant), continuous through exponent 1.
    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        expm1_over_x((1.0 - self.exponent) * log_x) * log_x
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        // Rounding can push t below -1, where log1p is undefined.
        let t = (x * (1.0 - self.exponent)).max(-1.0);
        (log1p_over_x(t) * x).exp()
    }
}

/// ln(1 + x) / x, accurate near 0.
fn log1p_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// (e^x - 1) / x, accurate near 0.
fn expm1_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sampled frequencies of the first ranks match 1/k^s normalised over n.
    fn check(n: u64, exponent: f64) {
        let z = ZipfRanks::new(n, exponent);
        let mut rng = Rng::new(42);
        let draws = 400_000;
        let mut counts = [0u64; 4];
        for _ in 0..draws {
            let k = z.sample(&mut rng);
            assert!(k < n);
            if (k as usize) < counts.len() {
                counts[k as usize] += 1;
            }
        }
        let norm: f64 = (1..=n).map(|k| (k as f64).powf(-exponent)).sum();
        for (k, &c) in counts.iter().enumerate() {
            let want = ((k + 1) as f64).powf(-exponent) / norm;
            let got = c as f64 / draws as f64;
            assert!(
                (got - want).abs() < 0.01 + want * 0.05,
                "n {n} s {exponent} rank {k}: got {got:.4} want {want:.4}"
            );
        }
    }

    #[test]
    fn frequencies_follow_the_law_below_at_and_above_one() {
        check(1000, 0.8);
        check(100_000, 1.0);
        check(10_000, 1.2);
    }

    #[test]
    fn exponent_zero_is_uniform_and_one_rank_is_always_zero() {
        let z = ZipfRanks::new(10, 0.0);
        let mut rng = Rng::new(1);
        let mut seen = [false; 10];
        for _ in 0..1000 {
            seen[z.sample(&mut rng) as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        let one = ZipfRanks::new(1, 1.0);
        assert!((0..100).all(|_| one.sample(&mut rng) == 0));
    }
}
