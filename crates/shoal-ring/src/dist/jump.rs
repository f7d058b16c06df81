//! Jump consistent hash (Lamping & Veach, 2014) over weight-repeated buckets.

/// Jump consistent hash: maps `key` to a bucket in `0..buckets`, moving only `1/n` of keys
/// when a bucket is appended. `buckets` must be at least 1 (returns 0 otherwise).
pub fn jump_consistent_hash(mut key: u64, buckets: u32) -> u32 {
    let mut b: i64 = -1;
    let mut j: i64 = 0;
    while j < i64::from(buckets) {
        b = j;
        key = key.wrapping_mul(2_862_933_555_777_941_757).wrapping_add(1);
        let r = ((key >> 33) + 1) as f64;
        j = ((b + 1) as f64 * ((1u64 << 31) as f64 / r)) as i64;
    }
    b.max(0) as u32
}

/// Jump hash over a bucket list in which each live server appears `weight` times.
///
/// Jump itself has no weights or removals: appending a server moves the ideal fraction;
/// removing one from the middle renumbers the buckets after it (measured in the README).
#[derive(Debug, Clone)]
pub struct Jump {
    buckets: Vec<u32>,
}

impl Jump {
    pub(crate) fn new(buckets: Vec<u32>) -> Jump {
        Jump { buckets }
    }

    /// The server for a key hash; `None` only with no buckets.
    #[inline]
    pub fn lookup(&self, hash: u32) -> Option<u32> {
        let n = u32::try_from(self.buckets.len()).ok()?;
        if n == 0 {
            return None;
        }
        // Spread the 32-bit hash over 64 bits so jump's LCG starts from a full-width key.
        let key = u64::from(hash).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.buckets
            .get(jump_consistent_hash(key, n) as usize)
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_values() {
        // Values from the paper's reference implementation (Guava agrees).
        assert_eq!(jump_consistent_hash(0, 1), 0);
        assert_eq!(jump_consistent_hash(1, 1), 0);
        assert_eq!(jump_consistent_hash(0xDEAD_BEEF, 1), 0);
        for k in 0..1000u64 {
            assert!(jump_consistent_hash(k, 10) < 10);
        }
    }
}
