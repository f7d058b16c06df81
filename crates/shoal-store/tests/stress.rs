//! Eviction under concurrent reads.
//!
//! A store of a handful of segments is refilled and evicted many times over by several
//! writers (each with its own `Writer`) while readers, a maintenance thread, deletes,
//! touches, `flush_all` and memory-limit changes run concurrently, and eviction moves the
//! items that were read (out of probation, and forward in the main queues). Every value is derived
//! from its key and a version (carried in the client flags), so every read can be checked
//! byte for byte: a value that is torn, stale memory from a reused segment, or another
//! key's bytes fails the test with the first differing offset.
//!
//! The run stops once it has lasted long enough *and* written enough bytes, seen enough
//! read hits and counted enough evictions, so what it asserts does not depend on timing;
//! a hard cap turns a store that never evicts into a failure rather than a hang. Under
//! Miri (no wall-clock budget, small values) it is a data-race and UB check of the same
//! protocol.

use shoal_store::{Item, Store, StoreConfig, StoreError, StoreOptions};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const WRITERS: usize = 4;
const READERS: usize = 3;
/// Few enough keys that readers hit often, enough that the live set outgrows memory.
const KEYS: u64 = 128;
/// Smallest segment the store uses (its `MIN_SEGMENT`).
const SEGMENT: usize = 64 << 10;
/// The memory limit in segments: the fewest the store accepts for this many writers (one
/// open segment each, and two more), plus one per reader (each may hold one pinned value,
/// as a reply being written does), so segments are switched and evicted all the time and
/// a writer that must wait for another to seal its segment would show up as an error.
const SEGMENTS: usize = WRITERS + 2 + READERS;
/// The limit the maintenance thread raises it to and back, in segments.
const RAISED_SEGMENTS: usize = SEGMENTS + 4;
/// Values at least this long start with a header: length, version, key.
const HEADER: usize = 16;
/// Low bits of a version name the writer thread that made it.
const THREAD_BITS: u32 = 3;

/// How long and how much to run; see the module comment.
struct Budget {
    min_time: Duration,
    min_written: u64,
    min_hits: u64,
    min_evictions: u64,
    hard_cap: Duration,
    max_value: usize,
    /// Writer 0 flushes everything once per this many of its operations.
    flush_every: u64,
}

fn budget(limit: usize) -> Budget {
    if cfg!(miri) {
        Budget {
            min_time: Duration::ZERO,
            // About one memory's worth, and live items evicted (not just segments whose
            // items were all replaced, deleted or flushed): what an interpreter can afford.
            min_written: limit as u64,
            min_hits: 20,
            min_evictions: 20,
            hard_cap: Duration::from_secs(3600),
            max_value: 4 << 10,
            flush_every: 500,
        }
    } else {
        let ms = std::env::var("SHOAL_STRESS_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2000);
        Budget {
            min_time: Duration::from_millis(ms),
            min_written: 50 * limit as u64,
            min_hits: 10_000,
            min_evictions: 1_000,
            hard_cap: Duration::from_millis(ms) + Duration::from_secs(60),
            max_value: 40_000,
            flush_every: 20_000,
        }
    }
}

/// splitmix64: a fixed, well-mixed function so values are reproducible from (key, version).
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Length of a version's value: a quarter each tiny (1-16 B, no embedded header), small,
/// medium and large (up to `max`), so segments end on items of every size and a segment
/// holds anywhere from one to hundreds of items.
fn value_len(key: u64, version: u32, max: usize) -> usize {
    let h = mix(key ^ (u64::from(version) << 32));
    let r = (h >> 2) as usize;
    match h & 3 {
        0 => 1 + r % 16,
        1 => 17 + r % 496,
        2 => 513 + r % (max / 4 - 512),
        _ => 1 + r % max,
    }
}

/// The value version `version` of key `key` has.
fn value_for(key: u64, version: u32, max: usize) -> Vec<u8> {
    let len = value_len(key, version, max);
    let seed = mix(key.rotate_left(17) ^ u64::from(version));
    let mut v = Vec::with_capacity(len + 8);
    let mut i = 0u64;
    while v.len() < len {
        v.extend_from_slice(&mix(seed.wrapping_add(i)).to_le_bytes());
        i += 1;
    }
    v.truncate(len);
    if len >= HEADER {
        v[0..4].copy_from_slice(&(len as u32).to_le_bytes());
        v[4..8].copy_from_slice(&version.to_le_bytes());
        v[8..16].copy_from_slice(&key.to_le_bytes());
    }
    v
}

fn key_bytes(key: u64) -> Vec<u8> {
    format!("stress:{key}").into_bytes()
}

struct Shared {
    store: Store,
    /// Highest sequence number each writer has handed out (before storing it).
    issued: [AtomicU32; WRITERS],
    stop: AtomicBool,
    written: AtomicU64,
    hits: AtomicU64,
    max_value: usize,
    flush_every: u64,
}

impl Shared {
    /// Checks that `value` with `flags` is exactly a value some writer stored for `key`.
    fn check(&self, key: u64, flags: u32, value: &[u8]) {
        let thread = (flags & ((1 << THREAD_BITS) - 1)) as usize;
        let seq = flags >> THREAD_BITS;
        assert!(
            thread < WRITERS && seq >= 1 && seq <= self.issued[thread].load(Ordering::Acquire),
            "key {key}: flags {flags:#x} name no version ever written"
        );
        if value.len() >= HEADER {
            let word = |at: usize| u32::from_le_bytes(value[at..at + 4].try_into().unwrap());
            let k = u64::from_le_bytes(value[8..16].try_into().unwrap());
            assert_eq!(
                (word(0) as usize, word(4), k),
                (value.len(), flags, key),
                "key {key}: embedded header (length, version, key) disagrees with the item"
            );
        }
        let want = value_for(key, flags, self.max_value);
        if value != want.as_slice() {
            let at = value.iter().zip(&want).position(|(a, b)| a != b);
            panic!(
                "key {key} version {flags:#x}: {} bytes read, {} expected, first difference at {at:?}",
                value.len(),
                want.len()
            );
        }
    }

    fn check_item(&self, key: u64, item: &Item<'_>) {
        assert_eq!(item.key(), key_bytes(key).as_slice());
        self.check(key, item.flags(), item.value());
    }
}

/// Deterministic per-thread choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(1);
        mix(self.0)
    }
}

fn writer_thread(sh: &Shared, t: usize) -> u64 {
    let s = &sh.store;
    let mut w = s.writer();
    let mut rng = Rng(t as u64 * 1_000_003);
    let mut seq = 0u32;
    let mut ops = 0u64;
    let mut sets = 0u64;
    while !sh.stop.load(Ordering::Relaxed) {
        ops += 1;
        let key = rng.next() % KEYS;
        let kb = key_bytes(key);
        let choice = rng.next() % 100;
        let r = if t == 0 && ops.is_multiple_of(sh.flush_every) {
            s.flush_all(0);
            Ok(())
        } else if choice < 75 {
            seq += 1;
            let version = (seq << THREAD_BITS) | t as u32;
            // Published before the store, so a reader can never see an unissued version.
            sh.issued[t].store(seq, Ordering::Release);
            let value = value_for(key, version, sh.max_value);
            // A few items expire within a second or two, for the maintenance scans.
            let exptime = if choice < 5 { s.clock().expiry(1) } else { 0 };
            let opts = StoreOptions {
                flags: version,
                exptime,
                ..StoreOptions::default()
            };
            let r = s.update(&mut w, &kb, |e| e.store(&[&value], opts));
            if r.is_ok() {
                sets += 1;
                sh.written.fetch_add(value.len() as u64, Ordering::Relaxed);
            }
            r.map(drop)
        } else if choice < 83 {
            // Touch: the value and CAS unique survive, even when the item is rewritten to
            // make room for an expiry field (which may re-run the closure).
            let exptime = if choice.is_multiple_of(2) {
                s.clock().expiry(3600)
            } else {
                0
            };
            s.update(&mut w, &kb, |e| {
                let Some(cas) = e.item().map(|i| {
                    sh.check_item(key, &i);
                    i.cas()
                }) else {
                    return Ok(());
                };
                assert!(e.set_exptime(exptime)?);
                let item = e.item().expect("touched item is live");
                sh.check_item(key, &item);
                assert_eq!(item.cas(), cas, "touch keeps the CAS unique");
                Ok(())
            })
        } else if choice < 91 {
            s.update(&mut w, &kb, |e| {
                e.remove();
                Ok(())
            })
        } else {
            // Read through the write path, under the shard lock.
            s.update(&mut w, &kb, |e| {
                if let Some(item) = e.item() {
                    sh.check_item(key, &item);
                }
                Ok(())
            })
        };
        if let Err(e) = r {
            // Items are at most 40 KB in 64 KiB segments and eviction is on.
            assert_ne!(e, StoreError::TooLarge);
            panic!("writer {t}: {e} with eviction on");
        }
    }
    sets
}

fn reader_thread(sh: &Shared, t: usize) -> (u64, u64) {
    let mut rng = Rng(0xdead_0000 + t as u64);
    let (mut hits, mut misses) = (0u64, 0u64);
    // A value read in place and held across the next reads, as a reply being written
    // holds one: checked when taken and again when let go, however many evictions ran in
    // between.
    let mut held: Option<(u64, u32, shoal_store::ValueRef<'_>)> = None;
    while !sh.stop.load(Ordering::Relaxed) {
        let key = rng.next() % KEYS;
        let kb = key_bytes(key);
        // A third of the reads check under the shard lock, a third copy out first (as a
        // server buffering would), a third pin the value and check it later (as a server
        // writing straight from segment memory does).
        let got = match rng.next() % 3 {
            0 => sh.store.get(&kb, |i| sh.check_item(key, i)),
            1 => sh
                .store
                .get(&kb, |i| (i.flags(), i.value().to_vec()))
                .map(|(flags, v)| sh.check(key, flags, &v)),
            _ => {
                if let Some((k, flags, v)) = held.take() {
                    sh.check(k, flags, v.as_ref());
                }
                sh.store
                    .get(&kb, |i| (i.flags(), sh.store.pin(i)))
                    .map(|(flags, v)| {
                        sh.check(key, flags, v.as_ref());
                        held = Some((key, flags, v));
                    })
            }
        };
        match got {
            Some(()) => {
                hits += 1;
                sh.hits.fetch_add(1, Ordering::Relaxed);
            }
            None => misses += 1,
        }
    }
    if let Some((k, flags, v)) = held.take() {
        sh.check(k, flags, v.as_ref());
    }
    (hits, misses)
}

/// Ticks the clock and runs housekeeping, and moves the memory limit up and down so that
/// segments are freed (their memory returned) and allocated again while readers run.
fn maintenance_thread(sh: &Shared) {
    let mut n = 0u64;
    while !sh.stop.load(Ordering::Relaxed) {
        n += 1;
        sh.store.maintain();
        if n.is_multiple_of(50) {
            let segments = if (n / 50).is_multiple_of(2) {
                SEGMENTS
            } else {
                RAISED_SEGMENTS
            };
            sh.store.set_memory_limit(segments * SEGMENT);
        }
        if cfg!(miri) {
            thread::yield_now();
        } else {
            thread::sleep(Duration::from_millis(1));
        }
    }
}

#[test]
fn eviction_under_concurrent_reads_keeps_every_value_intact() {
    let limit = SEGMENTS * SEGMENT;
    let store = Store::new(StoreConfig {
        memory_limit: limit,
        max_item_size: SEGMENT,
        evict: true,
        writers: WRITERS,
        index_capacity: 0,
        preallocate: false,
        // The reservation's reuse and release of segment memory, under the same churn as
        // the heap's (the store tests use the heap).
        huge_pages: true,
        slab_classes: Default::default(),
    })
    .expect("config");
    assert_eq!(store.max_item_bytes(), SEGMENT, "smallest segment size");
    let b = budget(limit);
    let sh = Arc::new(Shared {
        store,
        issued: Default::default(),
        stop: AtomicBool::new(false),
        written: AtomicU64::new(0),
        hits: AtomicU64::new(0),
        max_value: b.max_value,
        flush_every: b.flush_every,
    });
    let started = Instant::now();
    // A broken index can loop a chain forever, and a thread spinning in a lookup never sees
    // `stop`: rather than hang the test run, abort it once the hard cap is well past.
    // (Not under Miri, whose interpreter is too slow for a wall-clock bound and reports
    // deadlocks itself.)
    if !cfg!(miri) {
        let deadline = b.hard_cap + Duration::from_secs(30);
        thread::spawn(move || {
            thread::sleep(deadline);
            eprintln!("stress: no progress after {deadline:?}; a lookup is probably looping");
            std::process::abort();
        });
    }
    let (sets, reads) = thread::scope(|scope| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|t| {
                let sh = &*sh;
                scope.spawn(move || writer_thread(sh, t))
            })
            .collect();
        let readers: Vec<_> = (0..READERS)
            .map(|t| {
                let sh = &*sh;
                scope.spawn(move || reader_thread(sh, t))
            })
            .collect();
        let maint = {
            let sh = &*sh;
            scope.spawn(move || maintenance_thread(sh))
        };
        // The coordinator: stop once every part of the budget is met. A panicking worker
        // stops the run too, so its message is what the test reports.
        loop {
            let done = started.elapsed() >= b.min_time
                && sh.written.load(Ordering::Relaxed) >= b.min_written
                && sh.hits.load(Ordering::Relaxed) >= b.min_hits
                && sh.store.stats().evictions >= b.min_evictions;
            // Workers only finish early by panicking.
            let failed = writers.iter().any(|h| h.is_finished())
                || readers.iter().any(|h| h.is_finished())
                || maint.is_finished();
            if done || failed || started.elapsed() >= b.hard_cap {
                break;
            }
            thread::sleep(Duration::from_millis(if cfg!(miri) { 1 } else { 10 }));
        }
        sh.stop.store(true, Ordering::Relaxed);
        let sets: u64 = writers.into_iter().map(|h| h.join().unwrap()).sum();
        let reads: Vec<(u64, u64)> = readers.into_iter().map(|h| h.join().unwrap()).collect();
        maint.join().unwrap();
        (sets, reads)
    });
    let elapsed = started.elapsed();
    let st = sh.store.stats();
    let written = sh.written.load(Ordering::Relaxed);
    let hits: u64 = reads.iter().map(|r| r.0).sum();
    let misses: u64 = reads.iter().map(|r| r.1).sum();
    eprintln!(
        "stress: {elapsed:?}, {sets} sets ({} MiB, {:.0}x memory), {hits} read hits, \
         {misses} misses, {} evictions, {} reclaimed, {} promoted, {} retained",
        written >> 20,
        written as f64 / limit as f64,
        st.evictions,
        st.reclaimed,
        st.evict_promoted,
        st.evict_retained,
    );
    assert!(
        written >= b.min_written,
        "wrote only {written} bytes in {elapsed:?}"
    );
    assert!(hits >= b.min_hits, "only {hits} read hits in {elapsed:?}");
    assert!(
        st.evictions >= b.min_evictions,
        "only {} evictions in {elapsed:?}",
        st.evictions
    );
    assert!(st.total_items >= sets);
    // Eviction moved items too (read ones out of probation, and on within the main
    // queues), under the same concurrent reads, deletes and touches: every moved value
    // was checked like any other.
    assert!(
        cfg!(miri) || st.evict_promoted > 0,
        "no item was promoted out of probation"
    );

    // Quiesced: back to the base limit, then every key once more. The clock no longer
    // ticks, so after one pass (which reclaims anything expired) nothing else expires
    // and the remaining items must account for the store's counters exactly.
    sh.store.set_memory_limit(limit);
    sh.store.maintain_without_tick_for_test();
    for key in 0..KEYS {
        sh.store.get(&key_bytes(key), |i| sh.check_item(key, i));
    }
    let (mut items, mut bytes) = (0u64, 0u64);
    for key in 0..KEYS {
        if let Some(size) = sh.store.get(&key_bytes(key), |i| {
            sh.check_item(key, i);
            i.size()
        }) {
            items += 1;
            bytes += size as u64;
        }
    }
    let st = sh.store.stats();
    assert_eq!((st.curr_items, st.bytes), (items, bytes), "counters agree");
    assert_eq!(
        sh.store.draining_segments(),
        0,
        "every pinned segment came back once its value was let go"
    );
    assert!(
        st.segments_allocated * st.segment_size <= (RAISED_SEGMENTS * SEGMENT) as u64,
        "{} segments allocated",
        st.segments_allocated
    );
}
