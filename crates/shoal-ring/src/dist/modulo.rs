//! Modulo distributions: `hash % n` over servers, or over a bucket list in which each
//! server appears `weight` times.

/// A bucket list: `lookup(hash) = buckets[hash % buckets.len()]`.
///
/// libmemcached's `MODULA` uses one bucket per live server (weights ignored); twemproxy's
/// `modula`, XMemcached's `ArrayMemcachedSessionLocator` and python-memcached repeat each
/// server `weight` times in list order.
#[derive(Debug, Clone)]
pub struct Modulo {
    buckets: Vec<u32>,
}

impl Modulo {
    /// One bucket per live server.
    pub(crate) fn plain(live: &[u32]) -> Modulo {
        Modulo {
            buckets: live.to_vec(),
        }
    }

    /// Each live server repeated `weight` times, in order.
    pub(crate) fn weighted(live: &[(u32, u32)]) -> Modulo {
        let mut buckets = Vec::new();
        for &(idx, weight) in live {
            buckets.extend(std::iter::repeat(idx).take(weight as usize));
        }
        Modulo { buckets }
    }

    /// Number of buckets.
    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    /// Whether there are no buckets.
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// The server for a key hash; `None` only with no buckets.
    #[inline]
    pub fn lookup(&self, hash: u32) -> Option<u32> {
        let n = self.buckets.len();
        if n == 0 {
            return None;
        }
        self.buckets.get(hash as usize % n).copied()
    }
}
