//! The worker pool and acceptor on loopback: connections are served on worker threads in
//! turn, shutdown calls `stopping` and waits for connections, a connection that never
//! ends is cut off after the drain bound, and the acceptor reports connections and
//! shutdown. Every wait is bounded.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shoal_net::event_loop::EpollStream;
use shoal_net::{Acceptor, Event, Executor, Incoming, Listener, WorkerPool, WorkerService};
use std::os::fd::OwnedFd;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

/// Answers each connection's first line with `<thread name> <line>`; a line `hang` makes
/// it count itself in `hanging` and wait forever.
struct Echo {
    stopped: Arc<AtomicUsize>,
    hanging: Arc<AtomicUsize>,
}

impl WorkerService for Echo {
    async fn serve(self: Rc<Self>, conn: Incoming) {
        let Incoming::Tcp(s, _) = conn else { return };
        if shoal_net::event_loop::is_current() {
            if let Ok(mut s) = EpollStream::new(OwnedFd::from(s)) {
                self.answer(&mut s).await;
            }
        } else if let Ok(mut s) = tokio::net::TcpStream::from_std(s) {
            self.answer(&mut s).await;
        }
    }

    fn stopping(&self) {
        self.stopped.fetch_add(1, Ordering::SeqCst);
    }
}

impl Echo {
    async fn answer<S: AsyncRead + AsyncWrite + Unpin>(&self, s: &mut S) {
        let mut buf = vec![0u8; 64];
        let n = s.read(&mut buf).await.unwrap_or(0);
        let line = String::from_utf8_lossy(&buf[..n]).trim().to_string();
        if line == "hang" {
            self.hanging.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<()>().await;
        }
        if line == "panic" {
            // A connection's drop guard must still run, and the worker keep serving.
            let _guard = Counted(self.stopped.clone());
            panic!("a connection task panicked on purpose");
        }
        let name = std::thread::current().name().unwrap_or("?").to_string();
        let _ = s.write_all(format!("{name} {line}\n").as_bytes()).await;
    }
}

/// Adds 100 to its counter when dropped, as a connection's accounting guard would.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(100, Ordering::SeqCst);
    }
}

fn pair(l: &TcpListener) -> (TcpStream, Incoming) {
    let client = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
    client
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let (server, addr) = l.accept().expect("accept");
    server.set_nonblocking(true).expect("nonblocking");
    (client, Incoming::Tcp(server, addr))
}

fn ask(client: &mut TcpStream, line: &str) -> String {
    client
        .write_all(format!("{line}\n").as_bytes())
        .expect("write");
    let mut out = String::new();
    let _ = client.read_to_string(&mut out);
    out
}

#[test]
fn connections_go_round_robin_and_shutdown_drains() {
    for executor in [Executor::Tokio, Executor::EventLoop] {
        round_robin_and_drain(executor);
    }
}

fn round_robin_and_drain(executor: Executor) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let (tx, rx) = watch::channel(false);
    let stopped = Arc::new(AtomicUsize::new(0));
    let s2 = stopped.clone();
    let hanging = Arc::new(AtomicUsize::new(0));
    let h2 = hanging.clone();
    let mut pool = WorkerPool::start(
        executor,
        2,
        "w",
        &rx,
        Duration::from_millis(300),
        move |_| Echo {
            stopped: s2.clone(),
            hanging: h2.clone(),
        },
    )
    .expect("pool");
    let mut names = Vec::new();
    for i in 0..4 {
        let (mut client, conn) = pair(&l);
        assert!(pool.dispatch(conn).is_ok());
        let reply = ask(&mut client, &format!("hi{i}"));
        assert!(reply.ends_with(&format!(" hi{i}\n")), "{reply:?}");
        names.push(reply.split(' ').next().unwrap_or_default().to_string());
    }
    assert_eq!(names, ["w-0", "w-1", "w-0", "w-1"]);

    // A connection that never finishes is cut off after the drain bound.
    let (mut hung, conn) = pair(&l);
    assert!(pool.dispatch(conn).is_ok());
    hung.write_all(b"hang\n").expect("write");
    // Shut down only once the worker is inside the connection that never ends.
    let deadline = Instant::now() + Duration::from_secs(5);
    while hanging.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the hang request was never read");
        std::thread::sleep(Duration::from_millis(5));
    }
    let t0 = Instant::now();
    let _ = tx.send(true);
    pool.join();
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(250), "joined after {took:?}");
    assert!(took < Duration::from_secs(3), "joined after {took:?}");
    assert_eq!(
        stopped.load(Ordering::SeqCst),
        2,
        "each worker told to stop"
    );
    let mut rest = Vec::new();
    assert_eq!(
        hung.read_to_end(&mut rest).map(|_| rest.len()).ok(),
        Some(0)
    );
}

#[test]
fn acceptor_reports_connections_and_shutdown() {
    let listener = Listener::bind_tcp("127.0.0.1:0".parse().expect("addr"), 16).expect("bind");
    let addr = listener.local_addr().expect("tcp");
    let (tx, rx) = watch::channel(false);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let mut acceptor = Acceptor::new(listener, rx).expect("acceptor");
        let _client = TcpStream::connect(addr).expect("connect");
        let event = tokio::time::timeout(Duration::from_secs(5), acceptor.next())
            .await
            .expect("an event");
        assert!(matches!(event, Event::Conn(Incoming::Tcp(..))));
        let _ = tx.send(true);
        let event = tokio::time::timeout(Duration::from_secs(5), acceptor.next())
            .await
            .expect("an event");
        assert!(matches!(event, Event::Shutdown));
    });
}

#[test]
fn a_panicking_connection_runs_its_guards_and_the_worker_keeps_serving() {
    for executor in [Executor::Tokio, Executor::EventLoop] {
        panicking_connection(executor);
    }
}

fn panicking_connection(executor: Executor) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let (_tx, rx) = watch::channel(false);
    let stopped = Arc::new(AtomicUsize::new(0));
    let s2 = stopped.clone();
    let mut pool = WorkerPool::start(
        executor,
        1,
        "panicky",
        &rx,
        Duration::from_secs(2),
        move |_| Echo {
            stopped: s2.clone(),
            hanging: Arc::default(),
        },
    )
    .expect("start");
    let (mut a, conn) = pair(&l);
    pool.dispatch(conn).ok().expect("dispatch");
    assert_eq!(
        ask(&mut a, "panic"),
        "",
        "the panicking connection is closed"
    );
    assert_eq!(stopped.load(Ordering::SeqCst), 100, "its guard ran");
    let (mut b, conn) = pair(&l);
    pool.dispatch(conn).ok().expect("dispatch");
    assert_eq!(ask(&mut b, "after"), "panicky-0 after\n");
    let started = Instant::now();
    pool.join();
    assert!(started.elapsed() < Duration::from_secs(5));
}
