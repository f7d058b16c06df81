//! Maglev hashing (Eisenbud et al., NSDI 2016): a fixed-size lookup table filled by
//! per-server permutations, giving near-perfect balance and small disruption.

use md5::{Digest, Md5};

/// A Maglev lookup table. Its size is the smallest prime at least `max(65537, 100 * n)`
/// for `n` table turns per round, so each server owns about `M / n` slots. Weights set
/// the turns per round (divided by their gcd, and scaled down to at most 10 000 turns per
/// round so odd weights cannot blow up the table).
#[derive(Debug, Clone)]
pub struct Maglev {
    table: Vec<u32>,
}

fn is_prime(n: u64) -> bool {
    if n < 2 {
        return false;
    }
    let mut d = 2u64;
    while d * d <= n {
        if n % d == 0 {
            return false;
        }
        d += 1;
    }
    true
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl Maglev {
    /// Builds the table. `live` holds `(server index, name, weight)`; the permutation of
    /// each server comes from the MD5 of its name, so the table depends only on names and
    /// weights, not on list order beyond tie-breaking within a round.
    pub(crate) fn new(live: &[(u32, String, u32)]) -> Maglev {
        const MAX_TURNS: u64 = 10_000;
        let g = live.iter().fold(0, |g, (_, _, w)| gcd(g, *w)).max(1);
        let mut turns: Vec<u32> = live.iter().map(|(_, _, w)| w / g).collect();
        let sum: u64 = turns.iter().map(|&t| u64::from(t)).sum();
        if sum > MAX_TURNS {
            turns = turns
                .iter()
                .map(|&t| ((u64::from(t) * MAX_TURNS / sum).max(1)) as u32)
                .collect();
        }
        let per_round: u64 = turns.iter().map(|&t| u64::from(t)).sum();
        let mut m = 65_537u64.max(per_round.saturating_mul(100));
        while !is_prime(m) {
            m += 1;
        }
        let perms: Vec<(u64, u64)> = live
            .iter()
            .map(|(_, name, _)| {
                let d: [u8; 16] = Md5::digest(name.as_bytes()).into();
                let mut a = [0u8; 8];
                let mut b = [0u8; 8];
                a.copy_from_slice(&d[..8]);
                b.copy_from_slice(&d[8..]);
                let offset = u64::from_le_bytes(a) % m;
                let skip = u64::from_le_bytes(b) % (m - 1) + 1;
                (offset, skip)
            })
            .collect();
        let size = m as usize;
        let mut table = vec![u32::MAX; size];
        if per_round == 0 {
            return Maglev { table: Vec::new() };
        }
        let mut next = vec![0u64; live.len()];
        let mut filled = 0usize;
        'fill: loop {
            for (j, (idx, _, _)) in live.iter().enumerate() {
                for _ in 0..turns[j] {
                    let (offset, skip) = perms[j];
                    let mut c = ((offset + next[j] * skip) % m) as usize;
                    while table[c] != u32::MAX {
                        next[j] += 1;
                        c = ((offset + next[j] * skip) % m) as usize;
                    }
                    table[c] = *idx;
                    next[j] += 1;
                    filled += 1;
                    if filled == size {
                        break 'fill;
                    }
                }
            }
        }
        Maglev { table }
    }

    /// Table size (a prime).
    pub fn table_size(&self) -> usize {
        self.table.len()
    }

    /// The server for a key hash; `None` only for an empty table.
    #[inline]
    pub fn lookup(&self, hash: u32) -> Option<u32> {
        let n = self.table.len();
        if n == 0 {
            return None;
        }
        self.table.get(hash as usize % n).copied()
    }
}
