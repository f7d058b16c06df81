use super::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
    let (s, _) = l.accept().expect("accept");
    c.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    (c, s)
}

#[test]
fn block_on_returns_the_main_futures_output_after_its_tasks_ran() {
    let counter = Rc::new(Cell::new(0));
    let c = counter.clone();
    let out = EventLoop::new().expect("loop").block_on(async move {
        for _ in 0..10 {
            let c = c.clone();
            spawn(async move {
                tokio::task::yield_now().await;
                c.set(c.get() + 1);
            });
        }
        until_idle().await;
        c.get() * 2
    });
    assert_eq!(out, 20);
    assert_eq!(counter.get(), 10);
    assert!(
        !is_current(),
        "the loop is no longer current once it returned"
    );
}

#[test]
fn a_stream_echoes_across_many_reads_and_writes() {
    let (mut client, server) = pair();
    let writer = std::thread::spawn(move || {
        let mut got = Vec::new();
        for i in 0..200u32 {
            let msg = format!("message {i}\n");
            client.write_all(msg.as_bytes()).expect("write");
            let mut buf = vec![0u8; msg.len()];
            client.read_exact(&mut buf).expect("read");
            got.push(String::from_utf8(buf).expect("utf8"));
        }
        drop(client);
        got
    });
    let echoed = EventLoop::new().expect("loop").block_on(async move {
        let mut s = EpollStream::new(OwnedFd::from(server)).expect("register");
        let mut buf = [0u8; 4096];
        let mut total = 0;
        loop {
            let n = s.read(&mut buf).await.expect("read");
            if n == 0 {
                break total;
            }
            total += n;
            s.write_all(&buf[..n]).await.expect("write");
        }
    });
    let got = writer.join().expect("client");
    assert_eq!(got.len(), 200);
    assert_eq!(got[199], "message 199\n");
    assert_eq!(echoed, got.iter().map(String::len).sum::<usize>());
}

#[test]
fn a_write_larger_than_the_socket_buffer_waits_for_the_reader() {
    let (mut client, server) = pair();
    const LEN: usize = 8 << 20;
    let reader = std::thread::spawn(move || {
        // Let the server fill the send buffer and block first.
        std::thread::sleep(Duration::from_millis(100));
        let mut all = Vec::new();
        client.read_to_end(&mut all).expect("read");
        all
    });
    EventLoop::new().expect("loop").block_on(async move {
        let mut s = EpollStream::new(OwnedFd::from(server)).expect("register");
        let data: Vec<u8> = (0..LEN).map(|i| (i % 251) as u8).collect();
        let halves = [
            std::io::IoSlice::new(&data[..LEN / 2]),
            std::io::IoSlice::new(&data[LEN / 2..]),
        ];
        let mut sent = 0;
        while sent < LEN {
            // Vectored, then plain once the first half is out.
            let n = if sent < LEN / 2 {
                let bufs = [std::io::IoSlice::new(&halves[0][sent..]), halves[1]];
                s.write_vectored(&bufs).await.expect("write")
            } else {
                s.write(&data[sent..]).await.expect("write")
            };
            sent += n;
        }
        s.shutdown().await.expect("shutdown");
    });
    let all = reader.join().expect("reader");
    assert_eq!(all.len(), LEN);
    assert!(all.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
}

#[test]
fn another_threads_wake_reaches_a_task_waiting_in_the_loop() {
    let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        tx.send(7).expect("send");
    });
    let got = EventLoop::new()
        .expect("loop")
        .block_on(async move { rx.await.expect("value") });
    sender.join().expect("sender");
    assert_eq!(got, 7);
}

#[test]
fn timers_fire_in_deadline_order_and_a_dropped_one_never_fires() {
    let order = Rc::new(RefCell::new(Vec::new()));
    let o = order.clone();
    let started = Instant::now();
    EventLoop::new().expect("loop").block_on(async move {
        for (ms, tag) in [(60u64, 'c'), (20, 'a'), (40, 'b')] {
            let o = o.clone();
            spawn(async move {
                sleep(Duration::from_millis(ms)).await;
                o.borrow_mut().push(tag);
            });
        }
        // A timer dropped before its deadline leaves nothing behind.
        {
            let mut early = Box::pin(sleep(Duration::from_secs(60)));
            let polled = std::future::poll_fn(|cx| Poll::Ready(early.as_mut().poll(cx))).await;
            assert!(polled.is_pending());
        }
        until_idle().await;
        let core = current().expect("loop");
        assert!(core.timers.borrow().is_empty(), "no timer left behind");
    });
    assert_eq!(*order.borrow(), vec!['a', 'b', 'c']);
    assert!(started.elapsed() >= Duration::from_millis(60));
}

#[test]
fn a_panicking_task_is_dropped_and_the_others_go_on() {
    let done = Rc::new(Cell::new(false));
    let d = done.clone();
    EventLoop::new().expect("loop").block_on(async move {
        spawn(async { panic!("a test task panics on purpose") });
        let d = d.clone();
        spawn(async move {
            sleep(Duration::from_millis(5)).await;
            d.set(true);
        });
        until_idle().await;
    });
    assert!(done.get());
}

#[test]
fn a_peer_that_closes_is_seen_as_end_of_stream() {
    let (client, server) = pair();
    let n = EventLoop::new().expect("loop").block_on(async move {
        let mut s = EpollStream::new(OwnedFd::from(server)).expect("register");
        let closer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            drop(client);
        });
        let mut buf = [0u8; 16];
        let n = s.read(&mut buf).await.expect("read");
        closer.join().expect("closer");
        n
    });
    assert_eq!(n, 0);
}

#[test]
fn tasks_still_running_when_main_returns_are_dropped() {
    struct Flag(Rc<Cell<bool>>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.set(true);
        }
    }
    let dropped = Rc::new(Cell::new(false));
    let d = dropped.clone();
    EventLoop::new().expect("loop").block_on(async move {
        let flag = Flag(d);
        spawn(async move {
            let _flag = flag;
            std::future::pending::<()>().await;
        });
        tokio::task::yield_now().await;
    });
    assert!(dropped.get());
}

#[test]
fn a_write_to_a_peer_that_only_stopped_sending_waits_rather_than_spins() {
    let (client, server) = pair();
    client
        .shutdown(std::net::Shutdown::Write)
        .expect("half-close");
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    // On its own thread: a write that spun would never return to the loop, so the
    // timer below would never run; the test then fails on the bound instead of hanging.
    std::thread::spawn(move || {
        let waited = EventLoop::new().expect("loop").block_on(async move {
            let mut s = EpollStream::new(OwnedFd::from(server)).expect("register");
            let mut b = [0u8; 8];
            assert_eq!(s.read(&mut b).await.expect("read"), 0, "end of stream");
            let big = vec![7u8; 8 << 20];
            tokio::select! {
                biased;
                _ = s.write_all(&big) => false,
                _ = sleep(Duration::from_millis(200)) => true,
            }
        });
        let _ = done_tx.send(waited);
    });
    let waited = done_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the loop came back: the write waited instead of spinning");
    assert!(waited, "8 MiB went out to a peer that reads nothing");
    drop(client);
}

#[test]
fn a_vectored_write_of_more_buffers_than_one_call_takes_goes_out_whole() {
    let (mut client, server) = pair();
    let reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        client.read_to_end(&mut all).expect("read");
        all
    });
    let parts: Vec<Vec<u8>> = (0..3000u32).map(|i| format!("{i},").into_bytes()).collect();
    let want: Vec<u8> = parts.concat();
    EventLoop::new().expect("loop").block_on(async move {
        let mut s = EpollStream::new(OwnedFd::from(server)).expect("register");
        let total: usize = parts.iter().map(Vec::len).sum();
        let mut sent = 0;
        while sent < total {
            // What is left, as slices (3,000 at first: more than one sendmsg takes).
            let mut skip = sent;
            let mut slices = Vec::new();
            for p in &parts {
                if skip >= p.len() {
                    skip -= p.len();
                    continue;
                }
                slices.push(std::io::IoSlice::new(&p[skip..]));
                skip = 0;
            }
            sent += s.write_vectored(&slices).await.expect("write");
        }
        s.shutdown().await.expect("shutdown");
    });
    assert_eq!(reader.join().expect("reader"), want);
}
