//! Engine behaviour through its public API: durability across reopen, torn tails,
//! quarantine, disk reclamation, limits, expiry, open reads and write errors.

use shoal_queue::{
    unix_now, Engine, EngineConfig, FsyncPolicy, FullPolicy, QueueError, QueueLimits,
    QueueOverrides, Take, WriteFault,
};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn cfg(dir: &Path) -> EngineConfig {
    let mut c = EngineConfig::new(dir);
    c.fsync = FsyncPolicy::Never;
    c
}

fn segs(dir: &Path, q: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir.join("queues").join(q))
        .map(|rd| rd.map(|e| e.expect("entry").path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn put(e: &Engine, q: &str, s: &str) {
    e.queue_or_create(q)
        .expect("queue")
        .enqueue(0, 0, s.as_bytes(), unix_now())
        .expect("enqueue");
}

fn take(e: &Engine, q: &str) -> Option<String> {
    let q = e.queue(q)?;
    let d = q.dequeue(Take::Remove, unix_now()).expect("dequeue");
    q.commit().expect("commit");
    d.map(|d| String::from_utf8(d.data.to_vec()).expect("utf8"))
}

#[test]
fn recovery_keeps_order_and_consumption() {
    let t = tempfile::tempdir().expect("tempdir");
    {
        let e = Engine::open(cfg(t.path())).expect("open");
        for i in 0..100 {
            put(&e, "q", &format!("m{i}"));
        }
        for i in 0..30 {
            assert_eq!(take(&e, "q"), Some(format!("m{i}")));
        }
    }
    let e = Engine::open(cfg(t.path())).expect("reopen");
    for i in 30..100 {
        assert_eq!(take(&e, "q"), Some(format!("m{i}")));
    }
    assert_eq!(take(&e, "q"), None);
}

#[test]
fn flags_and_memory_budget_spill_to_disk() {
    let t = tempfile::tempdir().expect("tempdir");
    let mut c = cfg(t.path());
    c.memory_per_queue = 1000;
    let e = Engine::open(c).expect("open");
    let q = e.queue_or_create("q").expect("q");
    for i in 0..50u32 {
        q.enqueue(i, 0, &[i as u8; 100], unix_now()).expect("enq");
    }
    assert!(q.stats(unix_now()).mem_bytes <= 1000);
    for i in 0..50u32 {
        let d = q
            .dequeue(Take::Remove, unix_now())
            .expect("deq")
            .expect("some");
        assert_eq!((d.flags, d.data.to_vec()), (i, vec![i as u8; 100]));
    }
}

#[test]
fn torn_tail_is_cut_and_appends_continue() {
    let t = tempfile::tempdir().expect("tempdir");
    {
        let e = Engine::open(cfg(t.path())).expect("open");
        for i in 0..10 {
            put(&e, "q", &format!("m{i}"));
        }
    }
    let seg = segs(t.path(), "q").pop().expect("a segment");
    let len = fs::metadata(&seg).expect("meta").len();
    // Tear the last record (as a crash mid-write would) and add garbage zeros.
    let f = fs::OpenOptions::new().write(true).open(&seg).expect("open");
    f.set_len(len - 3).expect("truncate");
    drop(f);
    {
        let e = Engine::open(cfg(t.path())).expect("reopen");
        assert!(e.quarantined().is_empty());
        assert_eq!(e.queue("q").expect("q").stats(unix_now()).items, 9);
        put(&e, "q", "after");
    }
    let e = Engine::open(cfg(t.path())).expect("reopen twice");
    for i in 0..9 {
        assert_eq!(take(&e, "q"), Some(format!("m{i}")));
    }
    assert_eq!(take(&e, "q"), Some("after".into()));
    assert_eq!(take(&e, "q"), None);
}

#[test]
fn crc_mismatch_quarantines_segment_and_other_queues_serve() {
    let t = tempfile::tempdir().expect("tempdir");
    {
        let e = Engine::open(cfg(t.path())).expect("open");
        for i in 0..10 {
            put(&e, "bad", &format!("payload-{i:04}"));
            put(&e, "good", &format!("g{i}"));
        }
    }
    let seg = segs(t.path(), "bad").pop().expect("segment");
    let mut bytes = fs::read(&seg).expect("read");
    // Flip a payload byte of the third message: its CRC no longer matches, and valid
    // records follow, so this is corruption, not a torn tail.
    let at = 32 + 2 * (32 + 12) + 32 + 3;
    bytes[at] ^= 0x55;
    fs::write(&seg, &bytes).expect("write");
    let e = Engine::open(cfg(t.path())).expect("reopen despite corruption");
    let quarantined = e.quarantined();
    assert_eq!(quarantined.len(), 1);
    assert!(quarantined[0].to_string_lossy().ends_with(".seg.corrupt"));
    assert!(quarantined[0].exists());
    for i in 0..10 {
        assert_eq!(take(&e, "good"), Some(format!("g{i}")));
    }
    // The damaged queue still accepts and serves new messages.
    put(&e, "bad", "fresh");
    assert_eq!(take(&e, "bad"), Some("fresh".into()));
}

#[test]
fn drained_queue_gives_disk_back() {
    let t = tempfile::tempdir().expect("tempdir");
    let mut c = cfg(t.path());
    c.segment_size = 64 * 1024;
    let e = Engine::open(c).expect("open");
    let payload = vec![b'x'; 256];
    let q = e.queue_or_create("q").expect("q");
    for _ in 0..2000 {
        q.enqueue(0, 0, &payload, unix_now()).expect("enq");
    }
    let s = q.stats(unix_now());
    assert!(s.segments > 5, "{s:?}");
    // Disk cost per message is payload + 32 bytes of header (plus segment headers).
    let per_msg = s.disk_bytes as f64 / 2000.0;
    assert!(per_msg <= 256.0 + 64.0, "{per_msg}");
    let on_disk: u64 = segs(t.path(), "q")
        .iter()
        .map(|p| fs::metadata(p).expect("meta").len())
        .sum();
    assert_eq!(on_disk, s.disk_bytes);
    // Consuming half deletes the segments holding only consumed messages.
    for _ in 0..1000 {
        q.dequeue(Take::Remove, unix_now())
            .expect("deq")
            .expect("msg");
        q.commit().expect("commit");
    }
    let half = q.stats(unix_now());
    assert!(half.segments < s.segments, "{half:?} vs {s:?}");
    for _ in 0..1000 {
        q.dequeue(Take::Remove, unix_now())
            .expect("deq")
            .expect("msg");
        q.commit().expect("commit");
    }
    let s = q.stats(unix_now());
    assert_eq!(s.items, 0);
    assert_eq!(s.segments, 1, "{s:?}");
    // Files are unlinked by a background thread.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while segs(t.path(), "q").len() > 1 {
        assert!(std::time::Instant::now() < deadline, "segments not deleted");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // Consumed per message, including its ack: payload + at most 64 bytes.
    assert!(s.disk_bytes <= 32 * 1024 + 1024, "{s:?}");
}

#[test]
fn limits_reject_or_discard_oldest() {
    let t = tempfile::tempdir().expect("tempdir");
    let mut c = cfg(t.path());
    c.default_limits = QueueLimits {
        max_items: 3,
        ..QueueLimits::default()
    };
    c.queue_limits.insert(
        "ring".into(),
        QueueOverrides {
            max_bytes: Some(10),
            full: Some(FullPolicy::DiscardOldest),
            ..QueueOverrides::default()
        },
    );
    let e = Engine::open(c).expect("open");
    let q = e.queue_or_create("q").expect("q");
    for i in 0..3 {
        q.enqueue(0, 0, format!("{i}").as_bytes(), unix_now())
            .expect("enq");
    }
    assert!(matches!(
        q.enqueue(0, 0, b"x", unix_now()),
        Err(QueueError::Full)
    ));
    let r = e.queue_or_create("ring").expect("ring");
    for i in 0..5 {
        r.enqueue(0, 0, format!("{i}{i}{i}{i}").as_bytes(), unix_now())
            .expect("enq");
    }
    assert_eq!(take(&e, "ring"), Some("3333".into()));
    assert_eq!(r.stats(unix_now()).discarded, 3);
}

#[test]
fn expired_messages_are_never_delivered() {
    let t = tempfile::tempdir().expect("tempdir");
    let e = Engine::open(cfg(t.path())).expect("open");
    let q = e.queue_or_create("q").expect("q");
    let now = unix_now();
    q.enqueue(0, now + 1, b"soon", now).expect("enq");
    q.enqueue(0, now.saturating_sub(5), b"past", now)
        .expect("enq");
    q.enqueue(0, 0, b"forever", now).expect("enq");
    let later = now + 2;
    let d = q.dequeue(Take::Remove, later).expect("deq").expect("msg");
    assert_eq!(&d.data[..], b"forever");
    assert_eq!(q.stats(later).expired, 2);
}

#[test]
fn open_close_abort() {
    let t = tempfile::tempdir().expect("tempdir");
    {
        let e = Engine::open(cfg(t.path())).expect("open");
        for m in ["a", "b", "c"] {
            put(&e, "q", m);
        }
        let q = e.queue("q").expect("q");
        let a = q.dequeue(Take::Open, unix_now()).expect("deq").expect("a");
        let b = q.dequeue(Take::Open, unix_now()).expect("deq").expect("b");
        assert_eq!(q.stats(unix_now()).open_reads, 2);
        assert!(q.abort(a.seq));
        assert!(q.close(b.seq));
        assert!(!q.close(b.seq));
        let p = q.dequeue(Take::Peek, unix_now()).expect("peek").expect("a");
        assert_eq!(&p.data[..], b"a");
        q.commit().expect("commit");
        // "c" stays open across the restart: an open read never closed is redelivered.
        let a2 = q.dequeue(Take::Open, unix_now()).expect("deq").expect("a");
        assert_eq!(&a2.data[..], b"a");
        assert!(q.close(a2.seq));
        let c = q.dequeue(Take::Open, unix_now()).expect("deq").expect("c");
        assert_eq!(&c.data[..], b"c");
        q.commit().expect("commit");
    }
    let e = Engine::open(cfg(t.path())).expect("reopen");
    assert_eq!(take(&e, "q"), Some("c".into()));
    assert_eq!(take(&e, "q"), None);
}

#[test]
fn write_error_stores_nothing_and_service_resumes() {
    let t = tempfile::tempdir().expect("tempdir");
    let fault = Arc::new(WriteFault::default());
    let mut c = cfg(t.path());
    c.fault = Some(fault.clone());
    {
        let e = Engine::open(c.clone()).expect("open");
        put(&e, "q", "before");
        put(&e, "q", "before2");
        fault.set(true);
        let q = e.queue("q").expect("q");
        assert!(matches!(
            q.enqueue(0, 0, b"lost", unix_now()),
            Err(QueueError::Write(_))
        ));
        // A dequeue still delivers; its ack waits for space and is not lost.
        let d = q
            .dequeue(Take::Remove, unix_now())
            .expect("deq")
            .expect("m");
        assert_eq!(&d.data[..], b"before");
        assert!(q.commit().is_err());
        fault.set(false);
        put(&e, "q", "after");
        assert_eq!(q.stats(unix_now()).items, 2);
    }
    let e = Engine::open(c).expect("reopen");
    assert_eq!(take(&e, "q"), Some("before2".into()));
    assert_eq!(take(&e, "q"), Some("after".into()));
    assert_eq!(take(&e, "q"), None);
}

#[test]
fn bad_names_and_sizes_are_refused() {
    let t = tempfile::tempdir().expect("tempdir");
    let mut c = cfg(t.path());
    c.max_item_size = 10;
    let e = Engine::open(c).expect("open");
    for bad in ["", "..", "a/b", "../x", ".x", "a b"] {
        assert!(matches!(e.queue_or_create(bad), Err(QueueError::BadName)));
    }
    let q = e.queue_or_create("q").expect("q");
    assert!(matches!(
        q.enqueue(0, 0, &[0u8; 11], unix_now()),
        Err(QueueError::TooLarge)
    ));
    assert!(e.delete("q"));
    assert!(!e.delete("q"));
    assert!(e.queue("q").is_none());
}

#[test]
fn data_dir_is_locked() {
    let t = tempfile::tempdir().expect("tempdir");
    let _e = Engine::open(cfg(t.path())).expect("open");
    assert!(Engine::open(cfg(t.path())).is_err());
}

#[test]
fn always_group_commit_makes_writes_durable() {
    let t = tempfile::tempdir().expect("tempdir");
    let mut c = cfg(t.path());
    c.fsync = FsyncPolicy::Always;
    let e = Arc::new(Engine::open(c).expect("open"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    rt.block_on(async {
        let mut tasks = Vec::new();
        for p in 0..8 {
            let e = e.clone();
            tasks.push(tokio::spawn(async move {
                let q = e.queue_or_create("q").expect("q");
                for i in 0..20 {
                    let lsn = q
                        .enqueue(0, 0, format!("{p}-{i}").as_bytes(), unix_now())
                        .expect("enq");
                    e.durable(&q, lsn).await.expect("durable");
                }
            }));
        }
        for t in tasks {
            t.await.expect("task");
        }
    });
    assert_eq!(e.queue("q").expect("q").stats(unix_now()).items, 160);
}

#[test]
fn flush_and_delete_remove_files() {
    let t = tempfile::tempdir().expect("tempdir");
    let e = Engine::open(cfg(t.path())).expect("open");
    for i in 0..10 {
        put(&e, "q", &format!("{i}"));
    }
    assert_eq!(e.queue("q").expect("q").flush().expect("flush"), 10);
    assert_eq!(take(&e, "q"), None);
    put(&e, "q", "x");
    drop(e);
    let e = Engine::open(cfg(t.path())).expect("reopen");
    assert_eq!(take(&e, "q"), Some("x".into()));
    assert!(e.delete("q"));
    assert!(!t.path().join("queues/q").exists());
}

#[test]
fn max_age_caps_expiry() {
    let t = tempfile::tempdir().expect("tempdir");
    let mut c = cfg(t.path());
    c.default_limits.max_age_secs = 10;
    let e = Engine::open(c).expect("open");
    let q = e.queue_or_create("q").expect("q");
    let now = unix_now();
    q.enqueue(0, 0, b"a", now).expect("enq");
    q.enqueue(0, now + 3600, b"b", now).expect("enq");
    assert!(q.dequeue(Take::Peek, now + 9).expect("peek").is_some());
    assert_eq!(q.dequeue(Take::Remove, now + 11).expect("deq"), None);
    assert_eq!(q.stats(now + 11).expired, 2);
}

#[test]
fn unreadable_queue_is_fenced_off_others_serve() {
    let t = tempfile::tempdir().expect("tempdir");
    {
        let e = Engine::open(cfg(t.path())).expect("open");
        put(&e, "ok", "fine");
    }
    // A "segment" that cannot be read (a directory) makes recovery of that queue fail.
    fs::create_dir_all(t.path().join("queues/broken/0000000000000000.seg")).expect("mkdir");
    let e = Engine::open(cfg(t.path())).expect("open despite a broken queue");
    assert_eq!(e.unavailable(), vec!["broken".to_string()]);
    assert!(matches!(
        e.queue_or_create("broken"),
        Err(QueueError::Unavailable)
    ));
    assert_eq!(take(&e, "ok"), Some("fine".into()));
}

#[test]
fn flush_leaves_open_reads_to_their_holders() {
    let t = tempfile::tempdir().expect("tempdir");
    let e = Engine::open(cfg(t.path())).expect("open");
    for i in 0..5 {
        put(&e, "q", &format!("{i}"));
    }
    let q = e.queue("q").expect("q");
    let open = q
        .dequeue(Take::Open, unix_now())
        .expect("dequeue")
        .expect("a message");
    assert_eq!(q.flush().expect("flush"), 4);
    assert_eq!(q.stats(unix_now()).open_reads, 1);
    assert!(q.abort(open.seq));
    assert_eq!(take(&e, "q"), Some("0".into()));
    assert_eq!(take(&e, "q"), None);
}

/// A queue deleted while a writer keeps setting into it: the writer's sets after the
/// delete go to a queue of their own, and survive a restart. (The old directory used to
/// be removed after the new queue had started writing into it.)
#[test]
fn a_queue_recreated_during_its_delete_keeps_its_messages() {
    use shoal_queue::{unix_now, Engine, EngineConfig, FsyncPolicy, Take};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let t = tempfile::tempdir().expect("tempdir");
    let cfg = || {
        let mut c = EngineConfig::new(t.path());
        c.fsync = FsyncPolicy::Never;
        c.segment_size = 4096;
        c
    };
    for round in 0..3 {
        let e = Arc::new(Engine::open(cfg()).expect("open"));
        // A long queue, so that removing its files takes a while.
        let q = e.queue_or_create("q").expect("queue");
        for _ in 0..100_000 {
            q.enqueue(0, 0, &[b'o'; 100], unix_now()).expect("enqueue");
        }
        let done = Arc::new(AtomicBool::new(false));
        let writer = {
            let (e, done) = (e.clone(), done.clone());
            std::thread::spawn(move || {
                let mut acked = Vec::new();
                let mut n = 0u64;
                while !done.load(Ordering::Relaxed) && n < 1_000_000 {
                    let body = format!("new{n}");
                    if let Ok(q) = e.queue_or_create("q") {
                        if q.enqueue(0, 0, body.as_bytes(), unix_now()).is_ok() {
                            acked.push(n);
                        }
                    }
                    n += 1;
                }
                acked
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert!(e.delete("q"));
        std::thread::sleep(std::time::Duration::from_millis(20));
        done.store(true, Ordering::Relaxed);
        let acked = writer.join().expect("writer");
        drop(e);
        // After a restart, the queue holds an unbroken run of the writer's messages
        // ending with its last acknowledged one: what was set after the delete.
        let e = Engine::open(cfg()).expect("reopen");
        let q = e.queue("q").expect("the recreated queue");
        let mut got = Vec::new();
        while let Some(d) = q.dequeue(Take::Remove, unix_now()).expect("dequeue") {
            let s = String::from_utf8(d.data.to_vec()).expect("utf8");
            assert!(
                s.starts_with("new"),
                "round {round}: an old message survived"
            );
            got.push(s[3..].parse::<u64>().expect("number"));
        }
        assert!(
            !got.is_empty(),
            "round {round}: nothing set after the delete survived"
        );
        let first = got[0];
        let expected: Vec<u64> = acked.iter().copied().filter(|&n| n >= first).collect();
        assert_eq!(got, expected, "round {round}: acknowledged messages lost");
        assert!(e.delete("q"));
    }
}
