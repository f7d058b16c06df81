//! The flash tier through the store's public API: values eviction would drop are kept
//! on flash and read back byte for byte; forgetting them costs no IO; a corrupted file
//! gives misses, never wrong data.

use shoal_store::flash::{bucket, Rescue};
use shoal_store::{
    Fetch, Flash, FlashCleanStart, FlashConfig, FlashFile, FlashReads, Store, StoreConfig,
    StoreOptions, Writer,
};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A 16 MiB store (1 MiB segments) over a flash file of `pages` pages of 1 MiB.
fn tiered(dir: &tempfile::TempDir, pages: u64) -> Store {
    tiered_in(dir, pages, 16 << 20)
}

/// A store of `memory` bytes (1 MiB segments) over a flash file of `pages` pages of 1 MiB.
fn tiered_in(dir: &tempfile::TempDir, pages: u64, memory: usize) -> Store {
    let store = Store::new(StoreConfig {
        memory_limit: memory,
        max_item_size: 64 << 10,
        writers: 1,
        ..StoreConfig::default()
    })
    .expect("config");
    let mut cfg = FlashConfig::new(dir.path().join("ext"), pages << 20);
    cfg.page_size = 1 << 20;
    cfg.wbuf_size = 256 << 10;
    cfg.io_depth = 64;
    let flash = Flash::open(cfg).expect("flash file");
    assert!(store.attach_flash(flash));
    store
}

fn value(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i * 31 + j * 7) as u8).collect()
}

fn key(i: usize) -> Vec<u8> {
    format!("key:{i}").into_bytes()
}

/// Stores `n` values, letting the flash writes land every 100 (on a loaded machine the
/// disk could otherwise fall behind, and eviction drop values rather than wait).
fn fill(s: &Store, w: &mut Writer, n: usize, len: usize) {
    for i in 0..n {
        s.update(w, &key(i), |e| {
            e.store(&[&value(i, len)], StoreOptions::default())
        })
        .expect("store");
        if i % 100 == 99 && s.flash().is_some() {
            settle(s);
        }
    }
}

fn get(s: &Store, k: &[u8]) -> Option<Vec<u8>> {
    s.get(k, |i| i.value().to_vec())
}

/// Waits until every write buffer has reached the file.
fn settle(s: &Store) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.flash().expect("flash").stats().io_queue > 0 {
        assert!(Instant::now() < deadline, "flash writes never finished");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn evicted_values_are_read_back_from_flash() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = tiered(&dir, 64);
    let mut w = s.writer();
    // 40 MB of values into 16 MiB of memory.
    fill(&s, &mut w, 2000, 20_000);
    settle(&s);
    let st = s.flash().expect("flash").stats();
    assert!(st.objects_written > 1000, "values went to flash: {st:?}");
    for i in 0..2000 {
        assert!(
            get(&s, &key(i)) == Some(value(i, 20_000)),
            "key {i}: {:?}",
            s.stats()
        );
    }
    let st = s.flash().expect("flash").stats();
    assert!(st.objects_read > 1000 && st.get >= st.objects_read);
    assert_eq!(st.miss, 0);
    assert_eq!(st.badcrc, 0);
    assert_eq!(s.stats().evictions, 0, "nothing was lost");
    assert_eq!(
        st.objects_used, st.objects_written,
        "every value still live"
    );
}

#[test]
fn deletes_and_overwrites_free_pages_without_io() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = tiered(&dir, 64);
    let mut w = s.writer();
    fill(&s, &mut w, 2000, 20_000);
    settle(&s);
    let before = s.flash().expect("flash").stats();
    for i in 0..2000 {
        if i % 2 == 0 {
            assert!(s
                .update(&mut w, &key(i), |e| Ok(e.remove()))
                .expect("delete"));
        } else {
            s.update(&mut w, &key(i), |e| {
                e.store(&[b"small"], StoreOptions::default())
            })
            .expect("overwrite");
        }
    }
    let after = s.flash().expect("flash").stats();
    assert_eq!(after.objects_used, 0, "{after:?}");
    assert_eq!(after.bytes_used, 0);
    assert_eq!(after.objects_read, before.objects_read, "no value was read");
    assert!(
        after.page_reclaims > before.page_reclaims,
        "emptied pages were freed"
    );
    assert_eq!(
        after.page_evictions, before.page_evictions,
        "freed, not evicted"
    );
    assert!(after.pages_free > before.pages_free);
    for i in 0..2000 {
        let want = (i % 2 == 1).then(|| b"small".to_vec());
        assert!(get(&s, &key(i)) == want, "key {i}");
    }
}

#[test]
fn a_corrupted_file_gives_misses_not_wrong_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = tiered(&dir, 64);
    let mut w = s.writer();
    fill(&s, &mut w, 2000, 20_000);
    settle(&s);
    // Flip one byte every 4 KiB of the first pages.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.path().join("ext"))
        .expect("open");
    for at in (100..(8u64 << 20)).step_by(4096) {
        let mut b = [0u8; 1];
        file.read_exact_at(&mut b, at).expect("read");
        file.write_all_at(&[b[0] ^ 0x5a], at).expect("write");
    }
    let mut served = 0;
    let mut missed = 0;
    for i in 0..2000 {
        match get(&s, &key(i)) {
            Some(v) => {
                assert!(v == value(i, 20_000), "key {i}: wrong data served");
                served += 1;
            }
            None => missed += 1,
        }
    }
    let st = s.flash().expect("flash").stats();
    assert!(missed > 0 && served > 0, "served {served}, missed {missed}");
    assert_eq!(st.badcrc, missed as u64, "every miss is a CRC failure");
    assert_eq!(st.miss, missed as u64);
    // A miss unlinks the item: asked again, it is simply absent, without a disk read.
    let reads = st.objects_read;
    let gets = st.get;
    let first_missed = (0..2000)
        .find(|&i| get(&s, &key(i)).is_none())
        .expect("a miss");
    let _ = first_missed;
    assert!(s.flash().expect("flash").stats().get - gets <= (2000 - missed) as u64 + 1);
    assert!(s.flash().expect("flash").stats().objects_read >= reads);
}

#[test]
fn append_incr_and_touch_work_on_flash_resident_items() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = tiered(&dir, 64);
    let mut w = s.writer();
    fill(&s, &mut w, 2000, 20_000);
    settle(&s);
    // Key 0 was the first written: long since sent to flash.
    let on_flash = |s: &Store, k: &[u8]| s.get(k, |i| i.on_flash()).expect("present");
    assert!(on_flash(&s, &key(0)));
    s.update(&mut w, &key(0), |e| e.append(b"TAIL", false))
        .expect("append")
        .expect("item present");
    let mut want = value(0, 20_000);
    want.extend_from_slice(b"TAIL");
    assert!(get(&s, &key(0)) == Some(want));

    // Touch: the value stays on flash, the expiry changes, the value is intact.
    assert!(on_flash(&s, &key(1)));
    let before = s.flash().expect("flash").stats().objects_read;
    let exp = s.clock().expiry(1000);
    assert!(s
        .update(&mut w, &key(1), |e| e.set_exptime(exp))
        .expect("touch"));
    assert_eq!(
        s.flash().expect("flash").stats().objects_read,
        before,
        "touch reads nothing"
    );
    assert!(on_flash(&s, &key(1)));
    assert_eq!(s.get(&key(1), |i| i.exptime()), Some(exp));
    assert!(get(&s, &key(1)) == Some(value(1, 20_000)));

    // A counter flushed to flash: its value reads back for a read-modify-write.
    let digits = format!("{:0>1000}", 41);
    s.update(&mut w, b"counter", |e| {
        e.store(&[digits.as_bytes()], StoreOptions::default())
    })
    .expect("store");
    fill(&s, &mut w, 2000, 20_000);
    settle(&s);
    assert!(on_flash(&s, b"counter"));
    let new = s
        .update(&mut w, b"counter", |e| {
            e.load_value()?;
            let item = e.item().expect("present");
            let n: u64 = std::str::from_utf8(item.value())
                .expect("digits")
                .trim_start_matches('0')
                .parse()
                .expect("number");
            let next = (n + 1).to_string();
            e.store(&[next.as_bytes()], StoreOptions::default())?;
            Ok(next)
        })
        .expect("incr");
    assert_eq!(new, "42");
    assert_eq!(get(&s, b"counter"), Some(b"42".to_vec()));
}

#[test]
fn a_full_file_reuses_its_oldest_page() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 8 pages of flash: far less than what is written.
    let s = tiered(&dir, 8);
    let mut w = s.writer();
    fill(&s, &mut w, 3000, 20_000);
    settle(&s);
    let st = s.flash().expect("flash").stats();
    assert!(st.page_evictions > 0, "{st:?}");
    assert!(st.objects_evicted > 0);
    let mut served = 0;
    for i in 0..3000 {
        if let Some(v) = get(&s, &key(i)) {
            assert!(v == value(i, 20_000), "key {i}");
            served += 1;
        }
    }
    assert!(served > 100, "served {served}");
    let st = s.flash().expect("flash").stats();
    assert_eq!(
        st.badcrc, 0,
        "a reused page is a version miss, not a CRC one"
    );
}

#[test]
fn items_unread_for_ext_item_age_move_to_flash_without_memory_pressure() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Store::new(StoreConfig {
        memory_limit: 64 << 20,
        writers: 1,
        ..StoreConfig::default()
    })
    .expect("config");
    let mut cfg = FlashConfig::new(dir.path().join("ext"), 64 << 20);
    cfg.page_size = 1 << 20;
    cfg.item_age = 2;
    assert!(s.attach_flash(Flash::open(cfg).expect("flash")));
    let mut w = s.writer();
    // 200 large values and 200 small ones: 4 MB, nowhere near the limit.
    fill(&s, &mut w, 200, 20_000);
    for i in 0..200 {
        s.update(&mut w, format!("small:{i}").as_bytes(), |e| {
            e.store(&[b"tiny"], StoreOptions::default())
        })
        .expect("store");
    }
    // Open segments are never walked: a fresh writer seals the one in use.
    drop(w);
    let mut w = s.writer();
    fill(&s, &mut w, 1, 100);
    s.maintain_without_tick_for_test();
    assert_eq!(
        s.flash().expect("flash").stats().objects_written,
        0,
        "not old yet"
    );
    s.clock().advance_for_test(3);
    for _ in 0..100 {
        s.maintain_without_tick_for_test();
    }
    settle(&s);
    let st = s.flash().expect("flash").stats();
    assert!(st.flushed_by_age >= 199, "{st:?}");
    assert_eq!(s.stats().evictions, 0);
    for i in 1..200 {
        assert!(
            s.get(&key(i), |it| it.on_flash()) == Some(true),
            "key {i} on flash"
        );
        assert!(get(&s, &key(i)) == Some(value(i, 20_000)), "key {i}");
    }
    for i in 0..200 {
        let small = s.get(format!("small:{i}").as_bytes(), |it| it.on_flash());
        assert_eq!(small, Some(false), "small values stay in memory");
    }
}

/// A value that says which key and which write it is, so a reader can tell it intact.
fn stamped(key: usize, round: usize, len: usize) -> Vec<u8> {
    let mut v = format!("{key}:{round}:").into_bytes();
    let seed = v.clone();
    while v.len() < len {
        let b = seed[v.len() % seed.len()] ^ (v.len() as u8);
        v.push(b);
    }
    v
}

fn check_stamp(key: usize, v: &[u8]) {
    let text = String::from_utf8_lossy(&v[..v.len().min(24)]).to_string();
    let mut parts = text.splitn(3, ':');
    let k: usize = parts.next().and_then(|p| p.parse().ok()).expect("stamp");
    let round: usize = parts.next().and_then(|p| p.parse().ok()).expect("stamp");
    assert_eq!(k, key, "value of another key");
    assert!(
        v == stamped(key, round, v.len()),
        "key {key}: damaged value"
    );
}

#[test]
fn concurrent_writes_reads_deletes_and_compaction_never_serve_wrong_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 32 segments: eviction keeps a quarter of memory for the heads it moves items and
    // stubs into, and with 16 the heads of the values' size classes could take every
    // place, leaving stubs none (values then leave memory without going to flash).
    let s = tiered_in(&dir, 48, 32 << 20);
    s.flash().expect("flash").set_tunable("compact_under", 48);
    s.flash().expect("flash").set_max_frag(0.9);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let keys = 4000;
    let mut threads = Vec::new();
    for t in 0..2 {
        let s = s.clone();
        threads.push(std::thread::spawn(move || {
            let mut w = s.writer();
            for round in 0..4 {
                for i in (t..keys).step_by(2) {
                    let v = stamped(i, round, 8_000 + (i % 7) * 1_000);
                    s.update(&mut w, &key(i), |e| e.store(&[&v], StoreOptions::default()))
                        .expect("store");
                    if i % 5 == 0 {
                        let _ = s.update(&mut w, &key(i / 2), |e| Ok(e.remove()));
                    }
                }
            }
        }));
    }
    for r in 0..2 {
        let s = s.clone();
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || {
            let mut n = r;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let i = n % keys;
                if let Some(v) = get(&s, &key(i)) {
                    check_stamp(i, &v);
                }
                n += 7;
            }
        }));
    }
    {
        let s = s.clone();
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                s.maintain_without_tick_for_test();
                std::thread::sleep(Duration::from_millis(2));
            }
        }));
    }
    for t in threads.drain(..2) {
        t.join().expect("writer");
    }
    // Whether compaction met live records while the writers ran depends on timing (on
    // a loaded machine deletes can empty whole pages first). Deleting every other key
    // now leaves every page holding values half dead, so compaction has live records to
    // move while the readers go on checking every byte.
    let mut w = s.writer();
    for i in (0..keys).step_by(2) {
        let _ = s.update(&mut w, &key(i), |e| Ok(e.remove()));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while s.flash().expect("flash").stats().compact_rescues == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in threads {
        t.join().expect("reader");
    }
    settle(&s);
    let st = s.flash().expect("flash").stats();
    assert!(st.objects_written > 1000, "{st:?}");
    assert!(
        st.compact_rescues > 0,
        "compaction moved live records: {st:?}"
    );
    assert_eq!(st.badcrc, 0, "{st:?}");
    for i in 0..keys {
        if let Some(v) = get(&s, &key(i)) {
            check_stamp(i, &v);
        }
    }
}

#[test]
fn short_lived_values_get_pages_of_their_own_that_free_as_they_expire() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = tiered(&dir, 64);
    s.flash().expect("flash").set_tunable("low_ttl", 60);
    let mut w = s.writer();
    let short = s.clock().expiry(5);
    // Interleaved: a value that lives 5 s, one that lives forever.
    for i in 0..1000 {
        let v = value(i, 20_000);
        s.update(&mut w, &key(i), |e| {
            e.store(
                &[&v],
                StoreOptions {
                    exptime: short,
                    ..Default::default()
                },
            )
        })
        .expect("store");
        s.update(&mut w, format!("long:{i}").as_bytes(), |e| {
            e.store(&[&v], StoreOptions::default())
        })
        .expect("store");
        // A loaded machine's disk must not make eviction drop values instead of
        // writing them (every write buffer busy): let the writes land now and then.
        if i % 50 == 0 {
            settle(&s);
        }
    }
    settle(&s);
    let before = s.flash().expect("flash").stats();
    assert!(before.objects_written > 1000, "{before:?}");
    s.clock().advance_for_test(10);
    for _ in 0..50 {
        s.maintain_without_tick_for_test();
    }
    let after = s.flash().expect("flash").stats();
    assert!(
        after.page_reclaims >= before.page_reclaims + 2,
        "pages of expired values freed whole: {after:?}"
    );
    assert_eq!(
        after.page_evictions, before.page_evictions,
        "freed, not evicted"
    );
    assert_eq!(
        after.objects_read, before.objects_read,
        "freed without reading"
    );
    for i in (0..1000).step_by(97) {
        assert!(
            get(&s, format!("long:{i}").as_bytes()) == Some(value(i, 20_000)),
            "long:{i}"
        );
    }
}

/// memcached's JBOD: several files pooled as one tier. Values land in every file, are
/// read back byte for byte, a damaged second file gives misses (never wrong data), the
/// same file cannot be given twice, and a saved page table is used only with the same
/// files in the same order.
#[test]
fn several_files_are_pooled_as_one_tier() {
    let dir = tempfile::tempdir().expect("tempdir");
    let files = [dir.path().join("ext1"), dir.path().join("ext2")];
    let jbod = || -> FlashConfig {
        let mut cfg = FlashConfig::new(files[0].clone(), 12 << 20);
        cfg.files.push(FlashFile {
            path: files[1].clone(),
            size: 20 << 20,
            bucket: bucket::DEFAULT,
        });
        cfg.page_size = 1 << 20;
        cfg.wbuf_size = 256 << 10;
        cfg.io_depth = 64;
        cfg
    };
    assert_eq!(jbod().pages(), 32);
    let store = Store::new(StoreConfig {
        memory_limit: 16 << 20,
        max_item_size: 64 << 10,
        writers: 1,
        ..StoreConfig::default()
    })
    .expect("config");
    let flash = Flash::open(jbod()).expect("flash files");
    assert!(store.attach_flash(flash.clone()));
    let mut w = store.writer();
    // 40 MB of values: more than the first file's 12 pages.
    fill(&store, &mut w, 2000, 20_000);
    settle(&store);
    drop(w);
    assert!(flash.stats().objects_written > 1000);
    for f in &files {
        let bytes = std::fs::read(f).expect("flash file");
        assert!(
            bytes.iter().any(|&b| b != 0),
            "{} holds values",
            f.display()
        );
    }
    let mut from_flash = 0;
    for i in 0..2000 {
        if let Some(v) = get(&store, &key(i)) {
            assert_eq!(v, value(i, 20_000), "key {i}");
            from_flash += 1;
        }
    }
    assert!(from_flash > 1500, "{from_flash} of 2000 served");
    // Damage the second file: what it held reads as misses, never as other bytes.
    let second = std::fs::OpenOptions::new()
        .write(true)
        .open(&files[1])
        .expect("open");
    for at in (0..(20u64 << 20)).step_by(4096) {
        second.write_all_at(&[0xa5; 64], at).expect("write");
    }
    for i in 0..2000 {
        if let Some(v) = get(&store, &key(i)) {
            assert_eq!(v, value(i, 20_000), "key {i}");
        }
    }
    drop(store);
    flash.save().expect("save");
    drop(flash);

    // The page table saved for (ext1, ext2) is not used for (ext1, ext3), even where
    // ext3 is ext2's bytes under another name: pages must come back in the files they
    // were written to, as they were listed.
    std::fs::copy(&files[1], dir.path().join("ext3")).expect("copy");
    let mut other = jbod();
    other.files[1].path = dir.path().join("ext3");
    let deadline = Instant::now() + Duration::from_secs(5);
    let (reopened, restored) = loop {
        match Flash::open_restoring(other.clone(), true) {
            Ok(r) => break r,
            Err(e) => {
                assert!(Instant::now() < deadline, "{e}");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    };
    assert!(
        matches!(restored, Err(FlashCleanStart::Unusable(_))),
        "{restored:?}"
    );
    drop(reopened);

    // One file named twice (here under a second name) is refused.
    let link = dir.path().join("ext1-again");
    std::fs::hard_link(&files[0], &link).expect("link");
    let mut twice = FlashConfig::new(files[0].clone(), 4 << 20);
    twice.files.push(FlashFile {
        path: link,
        size: 4 << 20,
        bucket: bucket::DEFAULT,
    });
    twice.page_size = 1 << 20;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match Flash::open(twice.clone()) {
            Err(e) if e.to_string().contains("same file") => break,
            Err(e) => assert!(Instant::now() < deadline, "{e}"),
            Ok(_) => panic!("one file opened twice as two"),
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// memcached's tiered files: a file given to the compact bucket takes the values
/// compaction rescues, one given to lowttl the short-lived values, the default files
/// everything else; a bucket whose files are full falls back to default pages; without
/// such files rescues go where evicted values go. `stats extstore`'s buckets say so.
#[test]
fn files_given_to_a_bucket_take_its_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = |name: &str, b: u8| FlashFile {
        path: dir.path().join(name),
        size: 2 << 20,
        bucket: b,
    };
    let mut cfg = FlashConfig::new(PathBuf::new(), 0);
    cfg.files = vec![
        file("default", bucket::DEFAULT),
        file("compact", bucket::COMPACT),
        file("lowttl", bucket::LOW_TTL),
    ];
    cfg.page_size = 1 << 20;
    cfg.wbuf_size = 64 << 10;
    cfg.low_ttl = 60;
    let flash = Flash::open(cfg).expect("flash files");
    let value = vec![7u8; 100_000];
    let page_of = |loc: Option<shoal_store::flash::Locator>| loc.expect("written").page;
    // Pages 0-1 are the default file's, 2-3 the compact file's, 4-5 the lowttl file's.
    assert!(page_of(flash.write(b"evicted", &value, None)) < 2);
    assert!(page_of(flash.write(b"long", &value, Some(600))) < 2);
    assert!((4..6).contains(&page_of(flash.write(b"brief", &value, Some(5)))));
    let rescued = flash.rescue(b"rescued", &value, None, Rescue::Compact);
    assert!((2..4).contains(&page_of(rescued)));
    // Values read back from the compact file.
    let mut out = Vec::new();
    let at = flash
        .read(
            rescued.expect("written"),
            b"rescued",
            &mut out,
            shoal_store::flash::Disk::Wait,
        )
        .expect("read");
    assert_eq!(&out[at], &value[..]);
    let table = flash.stats().page_table;
    let p = rescued.expect("written").page as usize;
    assert_eq!(
        (table[p].bucket, table[p].free_bucket),
        (bucket::COMPACT, bucket::COMPACT)
    );
    assert_eq!(table[0].free_bucket, bucket::DEFAULT);
    assert_eq!(table[5].free_bucket, bucket::LOW_TTL);
    // 30 more rescues, 3 MB: the compact file's 2 pages fill, then default pages serve.
    // (Each waits for a write buffer: the disk may lag.)
    let pages: Vec<u32> = (0..30)
        .map(|i| {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                if let Some(l) =
                    flash.rescue(format!("r{i}").as_bytes(), &value, None, Rescue::Compact)
                {
                    break l.page;
                }
                assert!(Instant::now() < deadline, "no write buffer came free");
                std::thread::sleep(Duration::from_millis(2));
            }
        })
        .collect();
    assert!(
        pages.iter().any(|&p| p < 2),
        "fell back to default pages: {pages:?}"
    );
    assert!(
        pages.iter().all(|&p| p < 4),
        "never the lowttl file's: {pages:?}"
    );
    drop(flash);

    // Without a compact file, a rescue goes where an evicted value goes.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = FlashConfig::new(dir.path().join("ext"), 2 << 20);
    cfg.files.push(FlashFile {
        path: dir.path().join("lowttl"),
        size: 2 << 20,
        bucket: bucket::LOW_TTL,
    });
    cfg.page_size = 1 << 20;
    let flash = Flash::open(cfg).expect("flash files");
    assert!(page_of(flash.rescue(b"rescued", &value, None, Rescue::Compact)) < 2);
}

/// Compaction decides as memcached's `storage_compact_check`: a fragmented page is moved
/// whole, unread values included, even with `drop_unread` on; only when no page is
/// fragmented, with `drop_unread` on and free pages under `drop_under`, is the oldest page
/// compacted with its unread values dropped; with `drop_unread` off, nothing is.
#[test]
fn compaction_drops_unread_values_only_when_nothing_is_fragmented() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = tiered(&dir, 64);
    let mut w = s.writer();
    fill(&s, &mut w, 2000, 20_000);
    settle(&s);
    let flash = s.flash().expect("flash");
    // Always "short of free pages", so that only the rule decides.
    assert!(flash.set_tunable("compact_under", 1000));
    assert!(flash.set_tunable("drop_under", 1000));
    let run = |calls: usize| {
        for _ in 0..calls {
            s.maintain_without_tick_for_test();
            settle(&s);
        }
        s.flash().expect("flash").stats()
    };
    // Full pages, drop_unread off: nothing to do.
    let st = run(4);
    assert_eq!((st.compact_rescues, st.compact_skipped), (0, 0), "{st:?}");
    // Half the values deleted: fragmented pages are moved whole though drop_unread is on.
    for i in (0..2000).step_by(2) {
        s.update(&mut w, &key(i), |e| Ok(e.remove()))
            .expect("delete");
    }
    assert!(flash.set_tunable("drop_unread", 1));
    let st = run(1);
    assert!(st.compact_rescues > 0, "{st:?}");
    assert_eq!(
        st.compact_skipped, 0,
        "nothing dropped while a page is fragmented"
    );
    // Once no page is fragmented, the oldest page goes, its unread values dropped.
    let st = run(64);
    assert!(st.compact_skipped > 0, "{st:?}");
    for i in (1..2000).step_by(2) {
        if let Some(v) = get(&s, &key(i)) {
            assert_eq!(v, value(i, 20_000), "key {i}");
        }
    }
}

/// memcached's `coldcompact` and `old` files (its t/extstore-tiered2.t): with nothing
/// fragmented and no default page free, the oldest default page is compacted, its unread
/// values moved to the `coldcompact` file and the read ones to the `old` file; once those
/// files have no free page, their oldest page is evicted to keep one. Every value still
/// held reads back byte for byte.
#[test]
fn tiered_compaction_splits_unread_values_off_and_moves_the_oldest_page_to_old() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::new(StoreConfig {
        memory_limit: 16 << 20,
        max_item_size: 64 << 10,
        writers: 1,
        ..StoreConfig::default()
    })
    .expect("config");
    let file = |name: &str, mib: u64, b: u8| FlashFile {
        path: dir.path().join(name),
        size: mib << 20,
        bucket: b,
    };
    let mut cfg = FlashConfig::new(PathBuf::new(), 0);
    cfg.files = vec![
        file("default", 16, bucket::DEFAULT),
        file("cold", 8, bucket::COLD_COMPACT),
        file("old", 24, bucket::OLD),
    ];
    cfg.page_size = 1 << 20;
    cfg.wbuf_size = 256 << 10;
    cfg.io_depth = 64;
    cfg.compact_under = 1;
    cfg.drop_under = 1;
    assert!(store.attach_flash(Flash::open(cfg).expect("flash files")));
    let s = store;
    let mut w = s.writer();
    let used_in = |b: u8| {
        let st = s.flash().expect("flash").stats();
        st.page_table
            .iter()
            .filter(|p| p.free_bucket == b && p.objects > 0)
            .count()
    };
    // 30 MB into 16 MiB of memory: the rest on default pages, none elsewhere.
    fill(&s, &mut w, 1500, 20_000);
    settle(&s);
    assert_eq!(
        (used_in(bucket::COLD_COMPACT), used_in(bucket::OLD)),
        (0, 0)
    );
    // Every even key read once.
    for i in (0..1500).step_by(2) {
        assert_eq!(get(&s, &key(i)), Some(value(i, 20_000)), "key {i}");
    }
    // 40 MB more: the default pages run out.
    for i in 1500..3500 {
        s.update(&mut w, &key(i), |e| {
            e.store(&[&value(i, 20_000)], StoreOptions::default())
        })
        .expect("store");
        if i % 25 == 24 {
            settle(&s);
            s.maintain_without_tick_for_test();
            settle(&s);
        }
    }
    for _ in 0..8 {
        s.maintain_without_tick_for_test();
        settle(&s);
    }
    let st = s.flash().expect("flash").stats();
    assert!(st.compact_resc_cold > 5, "{st:?}");
    assert!(st.compact_resc_old > 5, "{st:?}");
    assert_eq!(st.compact_skipped, 0, "nothing dropped: drop_unread is off");
    assert!(used_in(bucket::COLD_COMPACT) > 0 && used_in(bucket::OLD) > 0);
    // The two files keep a free page each: their oldest is evicted when they fill.
    for b in [bucket::COLD_COMPACT, bucket::OLD] {
        let free = st
            .page_table
            .iter()
            .filter(|p| p.free_bucket == b && p.state == "free")
            .count();
        assert!(free >= 1, "bucket {b}: {free} free");
    }
    // What the old file holds was read; what the cold file holds was not.
    let (mut held, mut read_held) = (0, 0);
    for i in 0..3500 {
        if let Some(v) = get(&s, &key(i)) {
            assert_eq!(v, value(i, 20_000), "key {i}");
            held += 1;
            if i < 1500 && i % 2 == 0 {
                read_held += 1;
            }
        }
    }
    assert!(
        read_held >= 700,
        "read values survive in the old file: {read_held} of 750 ({held} held)"
    );
}

#[test]
fn a_second_process_cannot_open_the_same_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = FlashConfig::new(dir.path().join("ext"), 4 << 20);
    let mut cfg = cfg;
    cfg.page_size = 1 << 20;
    let first = Flash::open(cfg.clone()).expect("first");
    let second = Flash::open(cfg.clone());
    assert!(second.is_err(), "two tiers on one file");
    drop(first);
    // The lock goes with the file: once the tier's IO thread has let go, it opens again.
    let deadline = Instant::now() + Duration::from_secs(5);
    while Flash::open(cfg.clone()).is_err() {
        assert!(Instant::now() < deadline, "the file stays locked");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn recache_brings_a_flash_value_back_to_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = tiered(&dir, 64);
    let mut w = s.writer();
    fill(&s, &mut w, 2000, 20_000);
    settle(&s);
    assert_eq!(s.get(&key(3), |i| i.on_flash()), Some(true));
    s.flash().expect("flash").set_tunable("recache_rate", 1);
    assert!(get(&s, &key(3)) == Some(value(3, 20_000)));
    assert_eq!(
        s.get(&key(3), |i| i.on_flash()),
        Some(false),
        "back in memory"
    );
    assert!(get(&s, &key(3)) == Some(value(3, 20_000)), "the same bytes");
    let st = s.flash().expect("flash").stats();
    assert_eq!(st.recache, 1);
    assert_eq!(
        st.objects_used,
        st.objects_written - 1,
        "its flash copy let go"
    );
}

/// Fetches `k` without waiting for the disk: any read it records is run on another
/// thread, handed back, and the key fetched again.
fn fetch_elsewhere(s: &Store, reads: &mut FlashReads, k: &[u8]) -> Option<Vec<u8>> {
    for _ in 0..3 {
        match s.fetch(k, reads, |i| i.value().to_vec()) {
            Fetch::Found(v) => return Some(v),
            Fetch::Missing => return None,
            Fetch::Reading => {}
        }
        let wanted: Vec<_> = reads.take_wanted().collect();
        assert_eq!(wanted.len(), 1, "one read for one key");
        let store = s.clone();
        let done = std::thread::spawn(move || {
            wanted
                .into_iter()
                .map(|r| store.run_flash_read(r))
                .collect::<Vec<_>>()
        })
        .join()
        .expect("reader thread");
        for d in done {
            reads.done(d);
        }
    }
    panic!(
        "key {:?} still reading after three rounds",
        String::from_utf8_lossy(k)
    );
}

/// Drops the flash file's pages from the page cache, so its reads need the disk.
fn drop_page_cache(dir: &tempfile::TempDir) {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(dir.path().join("ext")).expect("flash file");
    f.sync_all().expect("sync");
    // SAFETY: advice on a descriptor we own; it only drops clean cached pages.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(rc, 0, "posix_fadvise");
}

#[test]
fn flash_values_are_read_off_the_serving_thread() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = tiered(&dir, 64);
    let mut w = s.writer();
    fill(&s, &mut w, 2000, 20_000);
    settle(&s);
    let mut reads = FlashReads::new();
    // Values in the page cache are read where they are asked for: no trip elsewhere.
    let inline = (0..2000)
        .filter(|&i| {
            let got = s.fetch(&key(i), &mut reads, |it| it.value().to_vec());
            assert_ne!(got, Fetch::Missing, "key {i}");
            got == Fetch::Found(value(i, 20_000))
        })
        .count();
    assert!(inline > 1900, "{inline} of 2000 read in place");
    reads.clear();
    // Values that need the disk are left to the caller.
    drop_page_cache(&dir);
    let before = s.flash().expect("flash").stats().objects_read;
    let mut read_elsewhere = 0;
    for i in (0..2000).step_by(7) {
        // Each read brings its neighbours in (the kernel reads ahead): dropped again.
        drop_page_cache(&dir);
        let probe = s.fetch(&key(i), &mut FlashReads::new(), |_| ());
        let on_flash = probe == Fetch::Reading;
        read_elsewhere += usize::from(on_flash);
        // A fetch that answered "reading" changed nothing: the next one serves it.
        assert_eq!(
            fetch_elsewhere(&s, &mut reads, &key(i)),
            Some(value(i, 20_000)),
            "key {i}"
        );
        assert!(reads.is_empty(), "served reads are taken out");
    }
    // About two thirds of the values are on flash (the rest fit in memory), but how many
    // the kernel still holds after each drop depends on the machine and its other load
    // (117 of 286 needed the disk in one CI run with other test binaries beside it, 190
    // or more alone): a score is enough to show that disk reads are left to the caller.
    assert!(
        read_elsewhere >= 20,
        "{read_elsewhere} of 286 values needed the disk"
    );
    let st = s.flash().expect("flash").stats();
    assert!(st.objects_read >= before + read_elsewhere as u64, "{st:?}");

    // Reading ahead: wanted together, served one by one, each for its own key.
    drop_page_cache(&dir);
    let on_flash: Vec<usize> = (0..2000)
        .filter(|&i| s.fetch(&key(i), &mut FlashReads::new(), |_| ()) == Fetch::Reading)
        .take(50)
        .collect();
    // How many values the kernel still holds after the drop depends on the machine's
    // page cache and readahead; a score of reads is enough to check their order.
    assert!(on_flash.len() >= 20, "{} still on flash", on_flash.len());
    for &i in &on_flash {
        assert!(s.want_read(&key(i), &mut reads), "key {i} wanted");
        assert!(!s.want_read(&key(i), &mut reads), "key {i} wanted once");
    }
    let wanted: Vec<_> = reads.take_wanted().collect();
    assert_eq!(wanted.len(), on_flash.len());
    for r in wanted {
        reads.done(s.run_flash_read(r));
    }
    for &i in on_flash.iter().rev() {
        let got = s.fetch(&key(i), &mut reads, |it| it.value().to_vec());
        assert_eq!(got, Fetch::Found(value(i, 20_000)), "key {i}");
    }
    assert!(reads.is_empty());
}

#[test]
fn a_value_read_for_a_replaced_item_is_not_served() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = tiered(&dir, 64);
    let mut w = s.writer();
    fill(&s, &mut w, 2000, 20_000);
    settle(&s);
    drop_page_cache(&dir);
    let mut reads = FlashReads::new();
    let i = (0..2000)
        .find(|&i| s.fetch(&key(i), &mut reads, |_| ()) == Fetch::Reading)
        .expect("a value on flash");
    // The read runs, then a client replaces the item before the fetch is asked again.
    let wanted: Vec<_> = reads.take_wanted().collect();
    for r in wanted {
        reads.done(s.run_flash_read(r));
    }
    s.update(&mut w, &key(i), |e| {
        e.store(&[b"new"], StoreOptions::default())
    })
    .expect("store");
    assert_eq!(
        s.fetch(&key(i), &mut reads, |it| it.value().to_vec()),
        Fetch::Found(b"new".to_vec())
    );
    reads.clear();
    assert!(reads.is_empty());

    // A read-modify-write waits for its read the same way, and appends to the value.
    drop_page_cache(&dir);
    let j = (0..2000)
        .find(|&j| s.fetch(&key(j), &mut reads, |_| ()) == Fetch::Reading)
        .expect("a value on flash");
    let append = |e: &mut shoal_store::Entry<'_>| {
        e.load_value()?;
        e.append(b"+tail", false)
    };
    let first = s.update_fetching(&mut w, &key(j), &mut reads, append);
    assert!(matches!(first, Ok(None)), "waits for the read: {first:?}");
    let wanted: Vec<_> = reads.take_wanted().collect();
    for r in wanted {
        reads.done(s.run_flash_read(r));
    }
    let second = s.update_fetching(&mut w, &key(j), &mut reads, append);
    assert!(matches!(second, Ok(Some(_))), "{second:?}");
    let mut expected = value(j, 20_000);
    expected.extend_from_slice(b"+tail");
    assert_eq!(get(&s, &key(j)), Some(expected));
}

#[test]
fn unread_flash_values_outlast_a_stream_of_new_items_read_in_memory() {
    // 40,000 values of 600 bytes (24 MB) into 16 MiB: unread, those evicted leave for
    // flash, leaving stubs of about 40 bytes; all of them, 1.6 MB, fit in the eighth of
    // memory stubs may hold.
    let dir = tempfile::tempdir().expect("tempdir");
    let s = tiered(&dir, 64);
    let mut w = s.writer();
    fill(&s, &mut w, 40_000, 600);
    settle(&s);
    let st = s.flash().expect("flash").stats();
    assert!(st.objects_used > 10_000, "{st:?} {:?}", s.stats());
    // Then 30 MB of new 20 KB values, each read twice: eviction makes room for them again
    // and again, and the rest of the 600-byte values leave for flash too. Their stubs,
    // though unread, are not what it takes (in a size class of their own, as unread
    // small items, they were taken first and most of them lost).
    for r in 0..5 {
        for i in 0..300 {
            let k = format!("hot:{r}:{i}");
            s.update(&mut w, k.as_bytes(), |e| {
                e.store(&[&value(i, 20_000)], StoreOptions::default())
            })
            .expect("store");
            assert!(get(&s, k.as_bytes()).is_some());
            assert!(get(&s, k.as_bytes()).is_some());
        }
        settle(&s);
    }
    let left = (0..40_000)
        .filter(|&i| get(&s, &key(i)) == Some(value(i, 600)))
        .count();
    assert_eq!(left, 40_000, "{:?}", s.stats());
}

#[test]
fn stubs_hold_at_most_an_eighth_of_memory() {
    // 120,000 unread values of 600 bytes (72 MB) into 16 MiB over a 64 MiB file: about
    // 100,000 stubs of 40 bytes would take 4 MB, twice what an eighth of 16 MiB allows.
    let dir = tempfile::tempdir().expect("tempdir");
    let s = tiered(&dir, 64);
    let mut w = s.writer();
    fill(&s, &mut w, 120_000, 600);
    settle(&s);
    let st = s.stats();
    assert!(
        (1..=3).contains(&st.segments_stubs),
        "2 sealed stub segments allowed, plus the one eviction takes from: {st:?}"
    );
    // The newest values, whose stubs are the youngest, are all still there.
    for i in 119_000..120_000 {
        assert_eq!(get(&s, &key(i)), Some(value(i, 600)), "key {i}");
    }
}
