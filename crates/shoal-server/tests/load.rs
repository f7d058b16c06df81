//! Pipelining and concurrency: replies in order, no lost updates.

mod common;

use common::Server;
use std::sync::{Arc, Barrier};

#[test]
fn thousand_pipelined_sets_and_gets_in_one_write() {
    let s = Server::start();
    let mut c = s.conn();
    let mut req = Vec::new();
    let mut expected = Vec::new();
    for i in 0..1000 {
        let value = format!("value-{i}-{}", "x".repeat(i % 50));
        req.extend_from_slice(
            format!(
                "set key{i} {i} 0 {}\r\n{value}\r\nget key{i}\r\n",
                value.len()
            )
            .as_bytes(),
        );
        expected.extend_from_slice(b"STORED\r\n");
        expected.extend_from_slice(
            format!("VALUE key{i} {i} {}\r\n{value}\r\nEND\r\n", value.len()).as_bytes(),
        );
    }
    // Mixed meta commands in the same pipeline.
    req.extend_from_slice(b"mg key999 s v\r\nmn\r\n");
    expected.extend_from_slice(b"VA 59 s59\r\n");
    expected.extend_from_slice(format!("value-999-{}\r\nMN\r\n", "x".repeat(49)).as_bytes());
    c.send(&req);
    let got = c.read_n(expected.len());
    if got != expected {
        let at = got
            .iter()
            .zip(&expected)
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        let from = at.saturating_sub(80);
        panic!(
            "replies differ at byte {at}: got {:?}, expected {:?}",
            common::show(&got[from..(at + 80).min(got.len())]),
            common::show(&expected[from..(at + 80).min(expected.len())])
        );
    }
    c.assert_alive();
    let st = c.stats("");
    assert_eq!(st["cmd_set"], "1000");
    assert_eq!(st["get_hits"], "1001");
    assert_eq!(st["curr_items"], "1000");
}

#[test]
fn pipelined_multiget_of_large_values() {
    // Replies far larger than the socket buffers, requested in one write.
    let s = Server::start();
    let mut c = s.conn();
    let value = vec![b'q'; 200_000];
    c.set("big", &value);
    let mut req = Vec::new();
    for _ in 0..50 {
        req.extend_from_slice(b"get big big\r\n");
    }
    c.send(&req);
    let mut one = b"VALUE big 0 200000\r\n".to_vec();
    one.extend_from_slice(&value);
    one.extend_from_slice(b"\r\n");
    for _ in 0..50 {
        let got = c.read_n(2 * one.len() + 5);
        assert_eq!(&got[..one.len()], &one[..]);
        assert_eq!(&got[one.len()..2 * one.len()], &one[..]);
        assert_eq!(&got[2 * one.len()..], b"END\r\n");
    }
    c.assert_alive();
}

#[test]
fn concurrent_incr_loses_nothing() {
    const THREADS: usize = 8;
    const OPS: usize = 2000;
    const BATCH: usize = 50;
    let s = Server::with_args(&["-t", "4"]);
    s.conn().set("counter", b"0");
    let addr = s.addr.expect("tcp");
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let mut c = common::Conn::tcp(addr);
                barrier.wait();
                let mut last = 0u64;
                let mut done = 0;
                while done < OPS {
                    // Alternate single requests and small pipelines.
                    let n = if t % 2 == 0 { 1 } else { BATCH.min(OPS - done) };
                    c.send("incr counter 1\r\n".repeat(n).as_bytes());
                    for _ in 0..n {
                        let line = common::show(&c.read_line());
                        let v: u64 = line
                            .trim_end()
                            .parse()
                            .unwrap_or_else(|_| panic!("thread {t}: bad incr reply {line:?}"));
                        assert!(v > last, "values seen by one client increase");
                        last = v;
                    }
                    done += n;
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("client thread");
    }
    let mut c = s.conn();
    let expected = (THREADS * OPS).to_string();
    assert_eq!(c.get("counter").as_deref(), Some(expected.as_bytes()));
    assert_eq!(c.stat("incr_hits"), (THREADS * OPS) as u64);
}

#[test]
fn concurrent_writers_on_distinct_and_shared_keys() {
    // Readers never see a torn value: every value read is one some writer wrote whole.
    const THREADS: usize = 6;
    let s = Server::with_args(&["-t", "3"]);
    let addr = s.addr.expect("tcp");
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            std::thread::spawn(move || {
                let mut c = common::Conn::tcp(addr);
                for i in 0..300 {
                    let fill = b'a' + (t as u8);
                    let len = 100 + (i * 37 + t * 11) % 3000;
                    let value = vec![fill; len];
                    c.set("shared", &value);
                    c.set(&format!("own{t}"), &value);
                    if let Some(v) = c.get("shared") {
                        assert!(!v.is_empty());
                        assert!(v.iter().all(|&b| b == v[0]), "torn value");
                    }
                    assert_eq!(c.get(&format!("own{t}")), Some(value));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("client thread");
    }
}
