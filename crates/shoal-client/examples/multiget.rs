//! Multi-get throughput of the cluster client against a server list.
//!
//! `cargo run --release -p shoal-client --example multiget -- HOST:PORT[,HOST:PORT...] [SECS] [TASKS] [KEYS_PER_GET] [text|meta|binary]`
//!
//! Prefills 10,000 keys (100-byte values), then runs TASKS concurrent loops of
//! `get_multi` over KEYS_PER_GET random keys for SECS seconds, and prints one JSON line:
//! multi-gets per second, keys per second, and p50/p99 latency in microseconds.

use std::time::{Duration, Instant};

use shoal_client::{Client, Protocol};
use shoal_ring::{Distribution, RingConfig, Server};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(list) = args.get(1) else {
        eprintln!("usage: multiget HOST:PORT[,HOST:PORT...] [SECS] [TASKS] [KEYS_PER_GET]");
        std::process::exit(2);
    };
    let secs: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5);
    let tasks: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(16);
    let per_get: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(100);
    let protocol = match args.get(5).map(String::as_str) {
        None | Some("text") => Protocol::Text,
        Some("meta") => Protocol::Meta,
        Some("binary") => Protocol::Binary,
        Some(other) => {
            eprintln!("unknown protocol {other:?}: text, meta or binary");
            std::process::exit(2);
        }
    };
    let servers: Vec<Server> = match shoal_ring::parse_server_list(list) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("bad server list: {e}");
            std::process::exit(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("runtime: {e}");
            std::process::exit(1);
        }
    };
    rt.block_on(async move {
        let client = match Client::builder(servers.clone())
            .ring(RingConfig::new(Distribution::TwemproxyKetama))
            .timeout(Some(Duration::from_secs(2)))
            .protocol(protocol)
            .build()
        {
            Ok(c) => c,
            Err(e) => {
                eprintln!("client: {e}");
                std::process::exit(1);
            }
        };
        let value = vec![b'v'; 100];
        for i in 0..10_000 {
            let k = format!("key:{i:08}");
            if let Err(e) = client.set(k.as_bytes(), &value, 0, 0).await {
                eprintln!("prefill: {e}");
                std::process::exit(1);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(secs);
        let mut handles = Vec::new();
        for t in 0..tasks {
            let client = client.clone();
            handles.push(tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut keys_seen = 0usize;
                let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ t as u64;
                while Instant::now() < deadline {
                    let keys: Vec<String> = (0..per_get)
                        .map(|_| {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            format!("key:{:08}", x % 10_000)
                        })
                        .collect();
                    let start = Instant::now();
                    match client.get_multi(&keys).await {
                        Ok(v) => keys_seen += v.len(),
                        Err(e) => {
                            eprintln!("get_multi: {e}");
                            break;
                        }
                    }
                    lat.push(start.elapsed().as_micros() as u64);
                }
                (lat, keys_seen)
            }));
        }
        let mut lat = Vec::new();
        let mut keys = 0;
        for h in handles {
            if let Ok((l, k)) = h.await {
                lat.extend(l);
                keys += k;
            }
        }
        lat.sort_unstable();
        let pct = |p: f64| {
            lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
                .copied()
                .unwrap_or(0)
        };
        println!(
            "{{\"protocol\": \"{protocol:?}\", \"servers\": {}, \"multigets_per_sec\": {:.0}, \"keys_per_sec\": {:.0}, \"p50_us\": {}, \"p99_us\": {}}}",
            servers.len(),
            lat.len() as f64 / secs as f64,
            keys as f64 / secs as f64,
            pct(0.50),
            pct(0.99)
        );
    });
}
