//! Balance and disruption of every distribution.
//!
//! For N equal servers it places K generated keys and reports max/mean keys per server
//! (1.00 is perfect), then the fraction of keys that move when one server is added
//! (ideal 1/(N+1)) or the middle server is removed (ideal 1/N).
//!
//! `cargo run --release -p shoal-ring --example balance -- [KEYS] [N...]`
//! (defaults: 1000000 keys, N = 10 and 100).

use shoal_ring::{Distribution, Ring, RingConfig, Server};

fn servers(n: usize) -> Vec<Server> {
    (0..n)
        .map(|i| Server::new(format!("10.0.{}.{}", i / 250, i % 250 + 1), 11211))
        .collect()
}

fn placements(ring: &Ring, keys: &[String]) -> Vec<usize> {
    keys.iter()
        .map(|k| ring.locate(k.as_bytes()).unwrap_or(usize::MAX))
        .collect()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let count: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let mut sizes: Vec<usize> = args.filter_map(|a| a.parse().ok()).collect();
    if sizes.is_empty() {
        sizes = vec![10, 100];
    }
    let keys: Vec<String> = (0..count).map(|i| format!("user:{i}:profile")).collect();
    println!(
        "| distribution (hash) | N | max/mean | moved on add (ideal) | moved on remove (ideal) |"
    );
    println!("|---|---|---|---|---|");
    for &n in &sizes {
        for d in Distribution::all() {
            let config = RingConfig::new(d);
            let Ok(ring) = Ring::new(config, servers(n)) else {
                continue;
            };
            let base = placements(&ring, &keys);
            let mut per = vec![0u64; n];
            for &i in &base {
                if let Some(c) = per.get_mut(i) {
                    *c += 1;
                }
            }
            let mean = count as f64 / n as f64;
            let max = per.iter().copied().max().unwrap_or(0) as f64;

            let added = ring
                .with_added(Server::new("10.200.0.1", 11211))
                .map(|r| placements(&r, &keys));
            let removed = ring.with_removed(n / 2).map(|r| placements(&r, &keys));
            let moved_add = added
                .map(|a| base.iter().zip(&a).filter(|(x, y)| x != y).count() as f64 / count as f64);
            // Indices after the removed one shift down; compare servers, not indices.
            let moved_rm = removed.map(|r| {
                base.iter()
                    .zip(&r)
                    .filter(|(&x, &y)| {
                        let y_orig = if y >= n / 2 { y + 1 } else { y };
                        x != y_orig
                    })
                    .count() as f64
                    / count as f64
            });
            let fmt = |r: Result<f64, _>| match r {
                Ok(v) => format!("{:.2}%", v * 100.0),
                Err(e) => format!("error: {e}"),
            };
            println!(
                "| {} ({}) | {n} | {:.3} | {} ({:.2}%) | {} ({:.2}%) |",
                d.name(),
                config.hash,
                max / mean,
                fmt(moved_add),
                100.0 / (n + 1) as f64,
                fmt(moved_rm),
                100.0 / n as f64,
            );
        }
    }
}
