//! mcrouter's LatestRoute order: each proxy host reads from its own pick of the
//! replicas, so that many proxies spread their reads (and their connections) over the
//! replicas while each one keeps a stable choice.
//!
//! mcrouter seeds the pick with its host id; shoal-proxy with a hash of the host name
//! (`/proc/sys/kernel/hostname`), so every proxy process on one host, and every worker of
//! one process, reads in the same order.

use std::sync::OnceLock;

/// splitmix64's finalizer: spreads every input bit over the whole word.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// FNV-1a 64 of `bytes`.
pub(crate) fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// This host's seed: the same for the life of the process, and for every process on a
/// host with the same name.
pub fn host_seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| {
        let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        mix(fnv1a64(name.trim().as_bytes()))
    })
}

/// At most `count` of `items`, in this host's order: each pick takes the item at
/// `hash % remaining` and moves the last one into its place, then rehashes, as mcrouter's
/// LatestRoute does with its host id.
pub(crate) fn order<T: Clone>(items: &[T], count: usize) -> Vec<T> {
    order_with(host_seed(), items, count)
}

fn order_with<T: Clone>(seed: u64, items: &[T], count: usize) -> Vec<T> {
    let mut rest = items.to_vec();
    let mut out = Vec::with_capacity(count.min(items.len()));
    let mut h = seed;
    for i in 0..count.min(items.len()) {
        let id = (h % rest.len() as u64) as usize;
        out.push(rest.swap_remove(id));
        h = mix(h ^ (i as u64 + 1));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_a_stable_partial_permutation() {
        let items = [0, 1, 2, 3, 4];
        let a = order_with(42, &items, 5);
        assert_eq!(a, order_with(42, &items, 5), "stable for one seed");
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, items, "every item once");
        assert_eq!(order_with(42, &items, 2), a[..2], "a prefix when fewer");
        assert_eq!(order_with(42, &items, 9).len(), 5);
        // Different hosts start on different replicas.
        let firsts: std::collections::HashSet<i32> = (0..64u64)
            .map(|s| order_with(mix(s), &items, 1)[0])
            .collect();
        assert_eq!(firsts.len(), 5);
        assert_eq!(host_seed(), host_seed());
    }
}
