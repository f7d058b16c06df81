//! Kestrel's `keep_journal=false`: a queue with no log, all in memory, empty after a
//! restart.

mod common;

use common::{cfg, drain, set};

use shoal_queue::{unix_now, Engine, QueueError, Take};
use std::path::Path;

fn segment_files(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".seg"))
        })
        .count()
    })
}

#[test]
fn a_memory_only_queue_writes_nothing_and_starts_empty() {
    let t = tempfile::tempdir().expect("tempdir");
    let lines = "fast keep_journal=false max_items=3 max_memory_size=1\n";
    let mut c = cfg(t.path(), lines);
    c.memory_per_queue = 0;
    let e = Engine::open(c.clone()).expect("open");
    for i in 0..3 {
        set(&e, "fast", &format!("m{i}"), 0).expect("set");
        set(&e, "kept", &format!("k{i}"), 0).expect("set");
    }
    assert!(matches!(set(&e, "fast", "m3", 0), Err(QueueError::Full)));
    let q = e.queue("fast").expect("queue");
    assert!(q.memory_only());
    let s = q.stats(unix_now());
    assert_eq!((s.items, s.disk_bytes, s.segments), (3, 0, 0));
    assert_eq!(
        s.mem_items, 3,
        "every payload in memory, whatever max_memory_size"
    );
    // Open, abort, open, close: the read path works without a log.
    let d = q
        .dequeue(Take::Open, unix_now())
        .expect("open")
        .expect("m0");
    assert_eq!(&d.data[..], b"m0");
    assert!(q.abort(d.seq));
    let d = q
        .dequeue(Take::Open, unix_now())
        .expect("open")
        .expect("m0");
    assert!(q.close(d.seq));
    q.commit().expect("commit");
    assert_eq!(segment_files(&t.path().join("queues/fast")), 0);
    assert!(segment_files(&t.path().join("queues/kept")) > 0);
    drop(e);

    // A restart: the journaled queue is back, the memory-only one is empty.
    let e = Engine::open(c.clone()).expect("reopen");
    assert_eq!(drain(&e, "kept"), ["k0", "k1", "k2"]);
    assert_eq!(drain(&e, "fast"), Vec::<String>::new());
    drop(e);

    // A journaled queue configured memory-only later: its files are discarded at the
    // next start, as Kestrel erases the journal.
    let e = Engine::open(cfg(t.path(), "")).expect("journaled");
    set(&e, "fast", "on disk", 0).expect("set");
    drop(e);
    assert!(segment_files(&t.path().join("queues/fast")) > 0);
    let e = Engine::open(c).expect("memory-only again");
    assert_eq!(segment_files(&t.path().join("queues/fast")), 0);
    assert_eq!(drain(&e, "fast"), Vec::<String>::new());
}
