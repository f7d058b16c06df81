//! The io_uring data path against real loopback sockets: byte streams of every size in
//! both directions arrive intact and in order (copied small writes, direct large ones,
//! provided-buffer and direct reads), many connections share one thread's ring, a client
//! that closes or stalls is handled, and streams dropped with operations in flight clean
//! up. Skipped, with a note, where the kernel has no io_uring.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::thread;
use std::time::Duration;

use shoal_net::uring::{self, UringStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn supported() -> bool {
    if uring::supported() {
        return true;
    }
    eprintln!(
        "SKIPPED: io_uring unavailable here: {}",
        uring::unsupported_reason().unwrap_or_default()
    );
    false
}

/// Runs `f` on a current-thread runtime inside a LocalSet, as a worker thread does.
fn on_worker<F: std::future::Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, f)
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_add((i % 251) as u8))
        .collect()
}

/// An echo server on a worker thread: every connection through a UringStream, echoed in
/// reads of whatever size arrives (so small and large writes both happen).
fn echo_server(conns: usize) -> (std::net::SocketAddr, thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let h = thread::spawn(move || {
        on_worker(async move {
            let mut tasks = Vec::new();
            for _ in 0..conns {
                let (s, _) = listener.accept().expect("accept");
                let mut s = UringStream::new(OwnedFd::from(s)).expect("uring stream");
                tasks.push(tokio::task::spawn_local(async move {
                    let mut buf = vec![0u8; 256 * 1024];
                    loop {
                        let n = s.read(&mut buf).await.expect("read");
                        if n == 0 {
                            break;
                        }
                        s.write_all(&buf[..n]).await.expect("write");
                    }
                    s.shutdown().await.expect("shutdown");
                }));
            }
            for t in tasks {
                t.await.expect("echo task");
            }
        })
    });
    (addr, h)
}

#[test]
fn echoes_every_size_intact_over_many_connections() {
    if !supported() {
        return;
    }
    const CONNS: usize = 24;
    let (addr, server) = echo_server(CONNS);
    let clients: Vec<_> = (0..CONNS)
        .map(|i| {
            thread::spawn(move || {
                let mut c = TcpStream::connect(addr).expect("connect");
                c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut sent = Vec::new();
                // Small messages one at a time (a request/reply pattern), then larger ones.
                for (k, len) in [1usize, 10, 100, 1000, 16 * 1024, 40_000, 300_000]
                    .into_iter()
                    .enumerate()
                {
                    let msg = pattern((i * 7 + k) as u8, len);
                    c.write_all(&msg).unwrap();
                    let mut back = vec![0u8; len];
                    c.read_exact(&mut back).expect("echo");
                    assert_eq!(back, msg, "conn {i} message {k} ({len} bytes)");
                    sent.extend_from_slice(&msg);
                }
                c.shutdown(std::net::Shutdown::Write).unwrap();
                let mut rest = Vec::new();
                c.read_to_end(&mut rest).expect("eof");
                assert!(rest.is_empty());
            })
        })
        .collect();
    for c in clients {
        c.join().expect("client");
    }
    server.join().expect("server");
}

#[test]
fn a_pipelined_stream_arrives_in_order() {
    if !supported() {
        return;
    }
    let (addr, server) = echo_server(1);
    let mut c = TcpStream::connect(addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let all = pattern(3, 4 << 20);
    let writer = {
        let mut w = c.try_clone().unwrap();
        let all = all.clone();
        thread::spawn(move || {
            // Writes of uneven sizes, so the server sees reads of every size.
            let mut off = 0;
            let mut step = 1;
            while off < all.len() {
                let end = (off + step).min(all.len());
                w.write_all(&all[off..end]).unwrap();
                off = end;
                step = step * 3 % 70_001 + 1;
            }
            w.shutdown(std::net::Shutdown::Write).unwrap();
        })
    };
    let mut back = Vec::new();
    c.read_to_end(&mut back).expect("read back");
    writer.join().unwrap();
    assert_eq!(back.len(), all.len());
    assert!(back == all, "echoed stream differs");
    server.join().unwrap();
}

#[test]
fn a_client_that_does_not_read_stalls_only_itself() {
    if !supported() {
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().unwrap();
    // The slow client: never reads what the server writes.
    let slow = TcpStream::connect(addr).unwrap();
    let fast = TcpStream::connect(addr).unwrap();
    let server = thread::spawn(move || {
        on_worker(async move {
            let (a, _) = listener.accept().unwrap();
            let (b, _) = listener.accept().unwrap();
            let mut a = UringStream::new(OwnedFd::from(a)).unwrap();
            let mut b = UringStream::new(OwnedFd::from(b)).unwrap();
            // Write to the slow client until it blocks (bounded by a timeout)...
            let stalled = tokio::task::spawn_local(async move {
                let chunk = vec![7u8; 64 * 1024];
                let mut written = 0usize;
                let r = tokio::time::timeout(Duration::from_millis(500), async {
                    loop {
                        a.write_all(&chunk).await.unwrap();
                        written += chunk.len();
                    }
                })
                .await;
                assert!(
                    r.is_err(),
                    "a client that never reads must block the writer"
                );
                // ...and drop it with its write pending.
                written
            });
            // ...while the other connection is served normally.
            let mut buf = [0u8; 5];
            b.read_exact(&mut buf).await.unwrap();
            b.write_all(b"world").await.unwrap();
            b.shutdown().await.unwrap();
            let written = stalled.await.unwrap();
            assert!(
                written < 64 << 20,
                "the stalled writer was bounded: {written}"
            );
        })
    });
    let mut fast = fast;
    fast.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    fast.write_all(b"hello").unwrap();
    let mut back = [0u8; 5];
    fast.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"world");
    server.join().expect("server");
    drop(slow);
}

#[test]
fn streams_dropped_mid_read_are_cleaned_up() {
    if !supported() {
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().unwrap();
    let clients: Vec<TcpStream> = (0..50).map(|_| TcpStream::connect(addr).unwrap()).collect();
    // Each client reads until its socket closes; all of them together within 10 s.
    let end = std::time::Instant::now() + Duration::from_secs(10);
    let checker = thread::spawn(move || {
        clients
            .into_iter()
            .map(|mut c| {
                let left = end.saturating_duration_since(std::time::Instant::now());
                c.set_read_timeout(Some(left.max(Duration::from_millis(1))))
                    .unwrap();
                let mut b = [0u8; 1];
                c.read(&mut b).map_err(|e| e.to_string())
            })
            .collect::<Vec<_>>()
    });
    let checked = &checker;
    on_worker(async move {
        for _ in 0..50 {
            let (s, _) = listener.accept().unwrap();
            let mut s = UringStream::new(OwnedFd::from(s)).unwrap();
            let mut buf = [0u8; 16];
            // A read that never completes (the client sends nothing) is dropped.
            let r = tokio::time::timeout(Duration::from_millis(5), s.read(&mut buf)).await;
            assert!(r.is_err());
        }
        // The driver answers the cancelled receives and closes the sockets while this
        // runtime runs: keep it running until every client has seen the end (bounded by
        // the clients' shared deadline).
        while !checked.is_finished() && std::time::Instant::now() < end {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    for read in checker.join().expect("checker") {
        assert_eq!(read.expect("closed"), 0, "socket closed after drop");
    }
}
