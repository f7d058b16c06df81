//! Hash throughput per function and key length, and lookup cost per distribution and
//! server count.
//!
//! `cargo bench -p shoal-ring --bench ring -- --warm-up-time 1 --measurement-time 2`
//!
//! Times are the benchmark thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), not wall time:
//! the build and CI machines are small and shared, and time spent descheduled behind
//! other work is not a cost of the code under test.

// `criterion_group!` generates a public function that cannot carry a doc comment.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::{Measurement, ValueFormatter};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use shoal_ring::{Distribution, HashAlgorithm, Ring, RingConfig, Server};

/// CPU time consumed by the calling thread.
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant Linux supports.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Criterion measurement of thread CPU time, reported in nanoseconds.
struct CpuTime;

impl Measurement for CpuTime {
    type Intermediate = Duration;
    type Value = Duration;

    fn start(&self) -> Duration {
        thread_cpu_time()
    }
    fn end(&self, start: Duration) -> Duration {
        thread_cpu_time().saturating_sub(start)
    }
    fn add(&self, a: &Duration, b: &Duration) -> Duration {
        *a + *b
    }
    fn zero(&self) -> Duration {
        Duration::ZERO
    }
    fn to_f64(&self, v: &Duration) -> f64 {
        v.as_nanos() as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        &Nanos
    }
}

/// Prints values as plain nanoseconds and throughput as elements (or bytes) per second.
struct Nanos;

impl ValueFormatter for Nanos {
    fn scale_values(&self, _typical: f64, _values: &mut [f64]) -> &'static str {
        "ns"
    }
    fn scale_throughputs(&self, _typical: f64, t: &Throughput, values: &mut [f64]) -> &'static str {
        let (n, unit) = match t {
            Throughput::Bytes(n) | Throughput::BytesDecimal(n) => (*n as f64, "B/s"),
            Throughput::Elements(n) => (*n as f64, "elem/s"),
        };
        for v in values {
            *v = n * 1e9 / *v;
        }
        unit
    }
    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}

/// Printable pseudo-random keys of exactly `len` bytes (deterministic).
fn keys(len: usize, count: usize) -> Vec<Vec<u8>> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..count)
        .map(|_| {
            (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    b'!' + (x % 94) as u8
                })
                .collect()
        })
        .collect()
}

fn servers(n: usize) -> Vec<Server> {
    (0..n)
        .map(|i| {
            Server::new(
                format!("10.{}.{}.{}", i / 62500, (i / 250) % 250, i % 250 + 1),
                11211,
            )
        })
        .collect()
}

fn bench_hashes(c: &mut Criterion<CpuTime>) {
    let mut group = c.benchmark_group("hash");
    group.throughput(Throughput::Elements(1));
    for len in [10usize, 50, 250] {
        let ks = keys(len, 256);
        for &alg in HashAlgorithm::ALL {
            group.bench_with_input(BenchmarkId::new(alg.name(), len), &ks, |b, ks| {
                let mut i = 0usize;
                b.iter(|| {
                    i = (i + 1) & 255;
                    black_box(alg.hash(black_box(&ks[i])))
                })
            });
        }
    }
    group.finish();
}

fn bench_lookups(c: &mut Criterion<CpuTime>) {
    let ks = keys(20, 4096);
    let mut group = c.benchmark_group("locate");
    group.throughput(Throughput::Elements(1));
    for n in [3usize, 10, 100, 1000] {
        for d in Distribution::all() {
            let Ok(ring) = Ring::new(RingConfig::new(d), servers(n)) else {
                continue;
            };
            group.bench_with_input(BenchmarkId::new(d.name(), n), &ring, |b, ring| {
                let mut i = 0usize;
                b.iter(|| {
                    i = (i + 1) & 4095;
                    black_box(ring.locate(black_box(&ks[i])))
                })
            });
        }
    }
    group.finish();

    // Dispatch alone: the key hash is precomputed, so this is the ring walk.
    let mut group = c.benchmark_group("dispatch");
    group.throughput(Throughput::Elements(1));
    for n in [3usize, 10, 100, 1000] {
        for d in Distribution::all().filter(|d| d.is_hash_based()) {
            let Ok(ring) = Ring::new(RingConfig::new(d), servers(n)) else {
                continue;
            };
            let hashes: Vec<u32> = ks.iter().map(|k| ring.config().hash.hash(k)).collect();
            group.bench_with_input(BenchmarkId::new(d.name(), n), &ring, |b, ring| {
                let mut i = 0usize;
                b.iter(|| {
                    i = (i + 1) & 4095;
                    black_box(ring.locate_hash(black_box(hashes[i])))
                })
            });
        }
    }
    group.finish();
}

/// Whole lookups with a fast key hash instead of each library's default (md5 for ketama).
fn bench_fast_hash_lookups(c: &mut Criterion<CpuTime>) {
    let ks = keys(20, 4096);
    let mut group = c.benchmark_group("locate_fast_hash");
    group.throughput(Throughput::Elements(1));
    for (d, h) in [
        (
            Distribution::LibmemcachedKetama { weighted: true },
            HashAlgorithm::Murmur,
        ),
        (
            Distribution::LibmemcachedKetama { weighted: true },
            HashAlgorithm::Fnv1a_64,
        ),
        (Distribution::Maglev, HashAlgorithm::Murmur3),
    ] {
        let Ok(ring) = Ring::new(RingConfig::new(d).with_hash(h), servers(1000)) else {
            continue;
        };
        let id = format!("{}+{}", d.name(), h.name());
        group.bench_with_input(BenchmarkId::new(id, 1000), &ring, |b, ring| {
            let mut i = 0usize;
            b.iter(|| {
                i = (i + 1) & 4095;
                black_box(ring.locate(black_box(&ks[i])))
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(CpuTime);
    targets = bench_hashes, bench_lookups, bench_fast_hash_lookups
}
criterion_main!(benches);
