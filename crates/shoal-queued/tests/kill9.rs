//! Durability under `kill -9`: concurrent producers and consumers against
//! `--fsync always`, SIGKILL in the middle of the load, restart, drain.
//!
//! Checked: every acknowledged (STORED) message is either received by a consumer before
//! the kill or present after the restart; nothing is delivered twice except an open read
//! that was never closed; each producer's messages come out in order. A plain `get` is
//! at-most-once, so a message whose get reply was cut off by the kill may be missing:
//! at most one per plain-get consumer (each has one request in flight).
//!
//! Under `always` the segments are the smallest allowed (4 KiB, ~40 messages), so the load
//! crosses many segment rolls: a message acknowledged just before or after a roll, whose
//! segment is sealed or new (the sealed one and the directory are fsynced by the sync
//! thread, not by the roll), must survive like any other.

mod common;

use common::deliveries::{consume, parse_msg, Deliveries, Msg};
use common::{Client, Server};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PRODUCERS: u32 = 4;
const RELIABLE_CONSUMERS: usize = 2;
const PLAIN_CONSUMERS: usize = 1;
const LOAD_TIME: Duration = Duration::from_millis(700);

/// Bytes a message of this test takes in the log at the least: the 32-byte record header
/// and a body of `<p>:<seq>:` and 64 bytes of padding.
const MIN_RECORD: usize = 32 + 4 + 64;

#[test]
fn kill9_fsync_always_keeps_every_acknowledged_message_once() {
    scenario("always", 4 << 10, 5);
}

/// A kill (unlike a power loss) never loses what reached the kernel, so the interval
/// policy gives the same guarantee against it.
#[test]
fn kill9_fsync_interval_keeps_every_acknowledged_message_once() {
    scenario("5", 64 << 10, 0);
}

/// `min_segments`: how many segments the acknowledged messages must have filled at least.
fn scenario(fsync: &str, segment_size: usize, min_segments: usize) {
    let d = tempfile::tempdir().expect("tempdir");
    let seg = segment_size.to_string();
    let server = Server::start(d.path(), &["--fsync", fsync, "--segment-size", &seg]);
    let addr = server.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Arc<Mutex<HashMap<u32, Vec<u64>>>> = Arc::default();
    let consumed: Arc<Mutex<Deliveries>> = Arc::default();

    let mut threads = Vec::new();
    for p in 0..PRODUCERS {
        let (stop, acked) = (stop.clone(), acked.clone());
        threads.push(std::thread::spawn(move || {
            let mut c = Client::connect(addr);
            let mut seq = 0u64;
            // Bounded even if the kill never came.
            while !stop.load(Ordering::Relaxed) && seq < 200_000 {
                let body = format!("{p}:{seq}:{}", "x".repeat(64));
                match c.try_set("kq", 0, 0, body.as_bytes()) {
                    Ok(r) if r == "STORED" => {
                        acked.lock().expect("lock").entry(p).or_default().push(seq)
                    }
                    Ok(r) => panic!("unexpected set reply {r:?}"),
                    Err(_) => return,
                }
                seq += 1;
            }
        }));
    }
    for i in 0..RELIABLE_CONSUMERS + PLAIN_CONSUMERS {
        let (stop, consumed) = (stop.clone(), consumed.clone());
        let stream = consumed.lock().expect("lock").new_stream();
        threads.push(std::thread::spawn(move || {
            // Bounded even if the kill never came.
            consume(
                addr,
                i < RELIABLE_CONSUMERS,
                stream,
                &consumed,
                |d| d,
                &stop,
                400_000,
            );
        }));
    }

    std::thread::sleep(LOAD_TIME);
    server.kill9();
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("client thread");
    }

    let server = Server::start(d.path(), &[]);
    let mut c = server.client();
    let mut drained: Vec<Msg> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while let Some((_, data)) = c.get("kq") {
        drained.push(parse_msg(&data));
        assert!(Instant::now() < deadline, "drain took too long");
    }

    let acked = acked.lock().expect("lock");
    let consumed = consumed.lock().expect("lock");
    let total_acked: usize = acked.values().map(Vec::len).sum();
    assert!(
        total_acked > 50,
        "too little load to mean anything: {total_acked}"
    );
    // Each segment holds at most `segment_size` bytes of records, so the acknowledged
    // messages alone filled at least this many.
    let segments = total_acked * MIN_RECORD / segment_size;
    assert!(
        segments >= min_segments,
        "too few segment rolls to mean anything: {segments} segments"
    );
    assert!(
        consumed.confirmed.len() > 10,
        "consumers got too little: {}",
        consumed.confirmed.len()
    );

    // No duplicates in the drain; a drained message received before the kill must have
    // been an open read that was never confirmed closed.
    let mut seen = HashSet::new();
    for m in &drained {
        assert!(seen.insert(*m), "delivered twice after restart: {m:?}");
        assert!(
            !consumed.confirmed.contains(m),
            "consumed before the kill but delivered again: {m:?}"
        );
    }
    // Nothing delivered twice before the kill either.
    let mut before = HashSet::new();
    for s in &consumed.streams {
        for m in s {
            assert!(before.insert(*m), "delivered twice before the kill: {m:?}");
        }
    }

    // Order per producer: in the drain and in every consumer's stream.
    let ordered = |stream: &[Msg], what: &str| {
        let mut last: HashMap<u32, u64> = HashMap::new();
        for &(p, s) in stream {
            if let Some(&prev) = last.get(&p) {
                assert!(s > prev, "{what}: producer {p} seq {s} after {prev}");
            }
            last.insert(p, s);
        }
    };
    ordered(&drained, "drain");
    for (i, s) in consumed.streams.iter().enumerate() {
        ordered(s, &format!("consumer {i}"));
    }

    // Every acknowledged message is somewhere.
    let mut missing = Vec::new();
    for (&p, seqs) in acked.iter() {
        for &s in seqs {
            let m = (p, s);
            if !seen.contains(&m) && !before.contains(&m) {
                missing.push(m);
            }
        }
    }
    assert!(
        missing.len() <= PLAIN_CONSUMERS,
        "acknowledged messages lost: {missing:?}"
    );
    // Unacknowledged survivors can only be each producer's one set in flight.
    for &(p, s) in seen.iter().chain(before.iter()) {
        let last_acked = acked.get(&p).and_then(|v| v.last().copied());
        let ok = match last_acked {
            Some(l) => s <= l + 1,
            None => s == 0,
        };
        assert!(ok, "message {p}:{s} was never sent or acknowledged");
    }
    eprintln!(
        "kill9 --fsync {fsync}: acked {total_acked} (filling at least {segments} segments of {segment_size} bytes), consumed before kill {}, open-unconfirmed {}, drained after restart {}, missing (plain get in flight) {}",
        consumed.confirmed.len(),
        consumed.open.len(),
        drained.len(),
        missing.len()
    );
}
