//! Network faults for tests, in the manner of Toxiproxy: a TCP proxy on loopback that
//! sits between a client (shoal-proxy, shoal-client) and one backend, and misbehaves on
//! demand while traffic flows. This machine's kernel has no `netem`, so faults are made
//! here, in user space, where a test can switch them per backend and per moment.
//!
//! Each accepted connection gets its own upstream connection and two pump threads (one
//! per direction). The pumps read the current [`Fault`] before every chunk they move, so
//! [`FaultProxy::set`] takes effect on connections already open as well as on new ones.
//! Dropping the proxy closes everything it opened and joins its threads.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often a pump blocked on a read looks at the fault and the stop flag again.
const POLL: Duration = Duration::from_millis(10);

/// What the proxy does to traffic. Latency, bandwidth and slicing apply to replies
/// (backend to client), which is where a slow backend shows; the others to both ways.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fault {
    /// Bytes pass through unchanged.
    #[default]
    None,
    /// Every chunk of reply is held back `delay`, plus up to `jitter` more, picked at
    /// random per chunk.
    Latency {
        /// Delay added to every chunk.
        delay: Duration,
        /// Most extra delay, uniformly distributed.
        jitter: Duration,
    },
    /// Replies flow at no more than this many bytes per second.
    Bandwidth(u64),
    /// Replies are written one byte per write (with `TCP_NODELAY`), so the client reads
    /// them in many pieces.
    Slice,
    /// Connections are accepted and requests read, but nothing is forwarded and nothing
    /// comes back: the backend looks alive and never answers.
    Blackhole,
    /// The backend is gone without a FIN or a reset, as when its host loses power:
    /// nothing comes back, and the client's requests are no longer read either, so they
    /// pile up in its send buffer until its writes block.
    HalfOpen,
    /// The next reply chunk on each connection is cut in half: its first half is sent,
    /// then the client connection is reset (`RST`, via `SO_LINGER` 0).
    ResetMidReply,
}

/// Shared between the proxy and its pumps.
struct State {
    fault: Mutex<Fault>,
    stop: AtomicBool,
    accepted: AtomicU64,
    resets: AtomicU64,
    /// Every socket the proxy opened, to shut down at drop (so blocked pumps wake up).
    sockets: Mutex<Vec<TcpStream>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl State {
    fn fault(&self) -> Fault {
        *self.fault.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn track(&self, s: &TcpStream) {
        if let Ok(c) = s.try_clone() {
            self.sockets
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(c);
        }
    }

    fn spawn(&self, f: impl FnOnce() + Send + 'static) {
        if let Ok(h) = std::thread::Builder::new()
            .name("fault-pump".into())
            .spawn(f)
        {
            self.threads
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(h);
        }
    }
}

/// A fault-injecting TCP proxy in front of one backend, listening on an ephemeral
/// loopback port ([`FaultProxy::addr`]).
pub struct FaultProxy {
    addr: SocketAddr,
    state: Arc<State>,
    acceptor: Option<JoinHandle<()>>,
}

impl FaultProxy {
    /// Starts a proxy to `upstream`, passing traffic unchanged until [`set`](Self::set)
    /// says otherwise. Panics if no loopback port can be bound (a test setup failure).
    pub fn start(upstream: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let addr = listener.local_addr().expect("listener address");
        let state = Arc::new(State {
            fault: Mutex::new(Fault::None),
            stop: AtomicBool::new(false),
            accepted: AtomicU64::new(0),
            resets: AtomicU64::new(0),
            sockets: Mutex::new(Vec::new()),
            threads: Mutex::new(Vec::new()),
        });
        let st = Arc::clone(&state);
        let acceptor = std::thread::Builder::new()
            .name("fault-accept".into())
            .spawn(move || accept_loop(&listener, upstream, &st))
            .expect("spawn the accept thread");
        FaultProxy {
            addr,
            state,
            acceptor: Some(acceptor),
        }
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Switches the fault, for open connections and new ones alike.
    pub fn set(&self, fault: Fault) {
        *self
            .state
            .fault
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = fault;
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.state.accepted.load(Ordering::Relaxed)
    }

    /// Client connections reset by [`Fault::ResetMidReply`] so far.
    pub fn resets(&self) -> u64 {
        self.state.resets.load(Ordering::Relaxed)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::Relaxed);
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
        for s in self
            .state
            .sockets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
        {
            let _ = s.shutdown(Shutdown::Both);
        }
        let threads = std::mem::take(
            &mut *self
                .state
                .threads
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for t in threads {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, upstream: SocketAddr, state: &Arc<State>) {
    while !state.stopping() {
        let client = match listener.accept() {
            Ok((c, _)) => c,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(POLL);
                continue;
            }
            Err(_) => continue,
        };
        state.accepted.fetch_add(1, Ordering::Relaxed);
        let Ok(backend) = TcpStream::connect_timeout(&upstream, Duration::from_secs(2)) else {
            // The backend itself is down: the client sees its connection closed, as it
            // would connecting to the backend directly (modulo refused vs closed).
            drop(client);
            continue;
        };
        let _ = client.set_nonblocking(false);
        state.track(&client);
        state.track(&backend);
        let (Ok(c_read), Ok(b_write), Ok(b_read)) =
            (client.try_clone(), backend.try_clone(), backend.try_clone())
        else {
            continue;
        };
        let c_write = client;
        let st = Arc::clone(state);
        state.spawn(move || requests(c_read, b_write, &st));
        let st = Arc::clone(state);
        state.spawn(move || replies(b_read, c_write, &st));
    }
}

/// Reads with a short timeout; `Ok(None)` when nothing arrived yet.
fn read_some(s: &mut TcpStream, buf: &mut [u8]) -> std::io::Result<Option<usize>> {
    s.set_read_timeout(Some(POLL))?;
    match s.read(buf) {
        Ok(n) => Ok(Some(n)),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Ok(None),
        Err(e) if e.kind() == ErrorKind::Interrupted => Ok(None),
        Err(e) => Err(e),
    }
}

/// Client to backend.
fn requests(mut client: TcpStream, mut backend: TcpStream, state: &State) {
    let mut buf = vec![0u8; 16 * 1024];
    while !state.stopping() {
        if state.fault() == Fault::HalfOpen {
            // A vanished peer acknowledges nothing: stop reading, let the client's
            // send buffer fill.
            std::thread::sleep(POLL);
            continue;
        }
        let n = match read_some(&mut client, &mut buf) {
            Ok(Some(0)) | Err(_) => break,
            Ok(None) => continue,
            Ok(Some(n)) => n,
        };
        if state.fault() == Fault::Blackhole {
            continue;
        }
        if backend.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = backend.shutdown(Shutdown::Write);
}

/// Backend to client, where latency, bandwidth, slicing and resets are applied.
fn replies(mut backend: TcpStream, mut client: TcpStream, state: &State) {
    let mut buf = vec![0u8; 16 * 1024];
    let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ u64::from(client.peer_addr().map_or(0, |a| a.port()));
    while !state.stopping() {
        let n = match read_some(&mut backend, &mut buf) {
            Ok(Some(0)) | Err(_) => break,
            Ok(None) => continue,
            Ok(Some(n)) => n,
        };
        let chunk = &buf[..n];
        let sent = match state.fault() {
            Fault::None => client.write_all(chunk),
            Fault::Latency { delay, jitter } => {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let extra = match u64::try_from(jitter.as_nanos()) {
                    Ok(j) if j > 0 => Duration::from_nanos(rng % j),
                    _ => Duration::ZERO,
                };
                std::thread::sleep(delay + extra);
                client.write_all(chunk)
            }
            Fault::Bandwidth(per_sec) => throttled(&mut client, chunk, per_sec.max(1)),
            Fault::Slice => {
                let _ = client.set_nodelay(true);
                chunk
                    .chunks(1)
                    .try_for_each(|b| client.write_all(b).and_then(|()| client.flush()))
            }
            // Nothing comes back; and no FIN either when the backend closes.
            Fault::Blackhole | Fault::HalfOpen => continue,
            Fault::ResetMidReply => {
                let _ = client.write_all(&chunk[..n / 2]);
                // Counted first: the client may look as soon as the reset reaches it.
                state.resets.fetch_add(1, Ordering::Relaxed);
                reset(&client);
                let _ = backend.shutdown(Shutdown::Both);
                return;
            }
        };
        if sent.is_err() {
            break;
        }
    }
    if !matches!(state.fault(), Fault::Blackhole | Fault::HalfOpen) {
        let _ = client.shutdown(Shutdown::Write);
    }
}

/// Writes `chunk` in slices of a tenth of a second's worth each.
fn throttled(client: &mut TcpStream, chunk: &[u8], per_sec: u64) -> std::io::Result<()> {
    let slice = usize::try_from(per_sec / 10).unwrap_or(usize::MAX).max(1);
    for part in chunk.chunks(slice) {
        client.write_all(part)?;
        let secs = part.len() as f64 / per_sec as f64;
        std::thread::sleep(Duration::from_secs_f64(secs));
    }
    Ok(())
}

/// Resets connection `s` (`RST`, not a FIN), whatever other descriptors of it are open:
/// `SO_LINGER` 0 alone resets only at the last close, and the pumps hold clones.
/// `connect(AF_UNSPEC)` disconnects a TCP socket on Linux, with a reset from an
/// established connection.
fn reset(s: &TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket descriptor and a correctly sized `linger` value.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            std::ptr::addr_of!(linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    // SAFETY: an all-zero sockaddr with family AF_UNSPEC is a valid argument of its size.
    unsafe {
        let mut unspec: libc::sockaddr = std::mem::zeroed();
        unspec.sa_family = libc::AF_UNSPEC as libc::sa_family_t;
        libc::connect(
            s.as_raw_fd(),
            &unspec,
            std::mem::size_of::<libc::sockaddr>() as libc::socklen_t,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// A backend that answers every line with `+<line>`.
    fn echo_backend() -> (SocketAddr, JoinHandle<()>, Arc<AtomicBool>) {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.set_nonblocking(true).expect("nonblocking");
        let addr = l.local_addr().expect("addr");
        let stop = Arc::new(AtomicBool::new(false));
        let st = Arc::clone(&stop);
        let h = std::thread::spawn(move || {
            let mut conns = Vec::new();
            while !st.load(Ordering::Relaxed) {
                if let Ok((c, _)) = l.accept() {
                    let c2 = c.try_clone().expect("clone");
                    conns.push(c2);
                    std::thread::spawn(move || {
                        let mut c = c;
                        let _ = c.set_nonblocking(false);
                        let mut buf = [0u8; 4096];
                        while let Ok(n) = c.read(&mut buf) {
                            if n == 0 {
                                break;
                            }
                            let mut out = b"+".to_vec();
                            out.extend_from_slice(&buf[..n]);
                            if c.write_all(&out).is_err() {
                                break;
                            }
                        }
                    });
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            for c in conns {
                let _ = c.shutdown(Shutdown::Both);
            }
        });
        (addr, h, stop)
    }

    fn roundtrip(c: &mut TcpStream, msg: &[u8]) -> std::io::Result<Vec<u8>> {
        c.write_all(msg)?;
        let mut got = Vec::new();
        let mut buf = [0u8; 256];
        while got.len() < msg.len() + 1 {
            let n = c.read(&mut buf)?;
            if n == 0 {
                return Err(ErrorKind::UnexpectedEof.into());
            }
            got.extend_from_slice(&buf[..n]);
        }
        Ok(got)
    }

    fn client(p: &FaultProxy) -> TcpStream {
        let c = TcpStream::connect(p.addr()).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(2)))
            .expect("timeout");
        c
    }

    #[test]
    fn faults_switch_on_a_connection_already_open() {
        let (backend, h, stop) = echo_backend();
        let p = FaultProxy::start(backend);
        let mut c = client(&p);
        assert_eq!(roundtrip(&mut c, b"a\n").expect("plain"), b"+a\n");

        p.set(Fault::Latency {
            delay: Duration::from_millis(150),
            jitter: Duration::from_millis(20),
        });
        let t = Instant::now();
        assert_eq!(roundtrip(&mut c, b"b\n").expect("slow"), b"+b\n");
        assert!(
            t.elapsed() >= Duration::from_millis(150),
            "{:?}",
            t.elapsed()
        );

        p.set(Fault::Slice);
        assert_eq!(
            roundtrip(&mut c, b"sliced\n").expect("sliced"),
            b"+sliced\n"
        );

        p.set(Fault::Bandwidth(2_000));
        let t = Instant::now();
        let long = vec![b'x'; 400];
        let got = roundtrip(&mut c, &long).expect("throttled");
        assert_eq!(got.len(), 401);
        assert!(
            t.elapsed() >= Duration::from_millis(150),
            "{:?}",
            t.elapsed()
        );

        p.set(Fault::Blackhole);
        c.set_read_timeout(Some(Duration::from_millis(300)))
            .expect("timeout");
        let err = roundtrip(&mut c, b"c\n").expect_err("a blackhole answers nothing");
        assert!(
            matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
            "{err:?}"
        );

        p.set(Fault::None);
        let mut fresh = client(&p);
        assert_eq!(roundtrip(&mut fresh, b"d\n").expect("recovered"), b"+d\n");
        drop((c, fresh, p));
        stop.store(true, Ordering::Relaxed);
        h.join().expect("backend");
    }

    #[test]
    fn reset_mid_reply_cuts_the_reply_and_resets() {
        let (backend, h, stop) = echo_backend();
        let p = FaultProxy::start(backend);
        p.set(Fault::ResetMidReply);
        let mut c = client(&p);
        c.write_all(b"0123456789\n").expect("write");
        let mut got = Vec::new();
        let mut buf = [0u8; 64];
        let err = loop {
            match c.read(&mut buf) {
                Ok(0) => break None,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) => break Some(e),
            }
        };
        assert_eq!(got, b"+01234");
        assert_eq!(
            err.map(|e| e.kind()),
            Some(ErrorKind::ConnectionReset),
            "a reset, not a FIN"
        );
        assert_eq!(p.resets(), 1);
        drop(p);
        stop.store(true, Ordering::Relaxed);
        h.join().expect("backend");
    }

    #[test]
    fn half_open_stops_reading_requests() {
        let (backend, h, stop) = echo_backend();
        let p = FaultProxy::start(backend);
        let c = client(&p);
        p.set(Fault::HalfOpen);
        // Writes succeed until the buffers on the way fill, then block.
        c.set_write_timeout(Some(Duration::from_millis(300)))
            .expect("timeout");
        let mut w = &c;
        let block = vec![0u8; 64 * 1024];
        let mut written = 0usize;
        let blocked = (0..1_000).any(|_| match w.write(&block) {
            Ok(n) => {
                written += n;
                false
            }
            Err(_) => true,
        });
        assert!(blocked, "writes never blocked ({written} bytes written)");
        assert!(written < 64 << 20, "{written} bytes went somewhere");
        drop((c, p));
        stop.store(true, Ordering::Relaxed);
        h.join().expect("backend");
    }
}
