//! Noticing that a client has gone while its request is still being served.
//!
//! The connection loop reads a client's socket only between requests, so a request that
//! waits (a blocking queue read, a proxied read waiting on a backend) does not see the
//! client disconnect. For most requests that only wastes the wait; for a read that takes
//! a message off a queue it loses the message, dequeued and written to a closed socket.
//! [`PeerWatch`] lets such a wait end when the client closes.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use crate::event_loop::{self, Registration};

/// Watches a connected socket for its peer closing, through a duplicate of its
/// descriptor, without taking any of its bytes. Made and used on one thread, which runs
/// either a tokio runtime with I/O enabled or a [`crate::event_loop::EventLoop`].
pub struct PeerWatch(Watched);

enum Watched {
    Tokio(AsyncFd<OwnedFd>),
    // The registration is declared first, so it leaves the loop before the descriptor
    // closes.
    Loop(Registration, OwnedFd),
}

impl std::fmt::Debug for PeerWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let fd = match &self.0 {
            Watched::Tokio(a) => a.get_ref().as_raw_fd(),
            Watched::Loop(_, fd) => fd.as_raw_fd(),
        };
        f.debug_tuple("PeerWatch").field(&fd).finish()
    }
}

impl PeerWatch {
    /// A watch over the socket `fd` (TCP or unix stream), which the caller keeps open
    /// for at least the duration of this call. `None` if the descriptor cannot be
    /// duplicated or registered (the caller then waits without a watch).
    pub fn new(fd: RawFd) -> Option<PeerWatch> {
        // SAFETY: F_DUPFD_CLOEXEC on a descriptor the caller owns and keeps open; the
        // duplicate is a new descriptor this watch owns from here on.
        let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
        if dup < 0 {
            return None;
        }
        // SAFETY: `dup` was just returned by fcntl and is owned by nothing else.
        let owned = unsafe { OwnedFd::from_raw_fd(dup) };
        if event_loop::is_current() {
            let registration = Registration::new(owned.as_raw_fd()).ok()?;
            return Some(PeerWatch(Watched::Loop(registration, owned)));
        }
        // SAFETY: `owned` is a valid open descriptor that the AsyncFd owns and never
        // replaces, so it stays open and the same for the AsyncFd's whole life.
        unsafe { AsyncFd::register_with_interest(owned, Interest::READABLE) }
            .ok()
            .map(|a| PeerWatch(Watched::Tokio(a)))
    }

    /// Completes once the peer has closed the connection (an orderly close or a reset).
    /// Never completes while the connection is open, including when the peer has sent
    /// more bytes (a pipelined request: it is still there); those bytes stay unread for
    /// the connection.
    pub async fn closed(&self) {
        loop {
            let peeked = match &self.0 {
                Watched::Tokio(a) => {
                    let Ok(mut ready) = a.readable().await else {
                        return;
                    };
                    // try_io clears stale readiness when the peek would block.
                    match ready.try_io(|fd| peek(fd.as_raw_fd())) {
                        Ok(r) => r,
                        Err(_would_block) => continue,
                    }
                }
                Watched::Loop(registration, fd) => {
                    std::future::poll_fn(|cx| registration.poll_readable(cx)).await;
                    match peek(fd.as_raw_fd()) {
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            registration.io.read.blocked();
                            continue;
                        }
                        r => r,
                    }
                }
            };
            match peeked {
                Ok(0) | Err(_) => return,
                // Bytes are waiting: the client is there, and the watch has nothing more
                // to learn without reading them.
                Ok(_) => return std::future::pending().await,
            }
        }
    }
}

/// Peeks at one byte without blocking or consuming it: 0 at end of stream.
fn peek(fd: RawFd) -> io::Result<isize> {
    let mut byte = 0u8;
    // SAFETY: a one-byte peek into a local on a descriptor the watch owns; MSG_DONTWAIT
    // so it never blocks, MSG_PEEK so nothing is consumed.
    let n = unsafe {
        libc::recv(
            fd,
            (&mut byte as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::time::Duration;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    fn pair() -> (std::net::TcpStream, std::net::TcpStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let c = std::net::TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (s, _) = l.accept().expect("accept");
        s.set_nonblocking(true).expect("nonblocking");
        (s, c)
    }

    #[test]
    fn completes_when_the_peer_closes_not_before() {
        let rt = runtime();
        let (server, client) = pair();
        rt.block_on(async {
            let watch = PeerWatch::new(server.as_raw_fd()).expect("watch");
            let early = tokio::time::timeout(Duration::from_millis(100), watch.closed()).await;
            assert!(early.is_err(), "completed while the peer was connected");
            drop(client);
            tokio::time::timeout(Duration::from_secs(5), watch.closed())
                .await
                .expect("noticed the close");
        });
    }

    #[test]
    fn on_the_event_loop_it_completes_when_the_peer_closes_not_before() {
        let (server, client) = pair();
        let fd = server.as_raw_fd();
        event_loop::EventLoop::new()
            .expect("loop")
            .block_on(async move {
                let watch = PeerWatch::new(fd).expect("watch");
                let early = crate::time::timeout(Duration::from_millis(100), watch.closed()).await;
                assert!(early.is_err(), "completed while the peer was connected");
                let closer = std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(50));
                    drop(client);
                });
                crate::time::timeout(Duration::from_secs(5), watch.closed())
                    .await
                    .expect("noticed the close");
                closer.join().expect("closer");
            });
        drop(server);
    }

    #[test]
    fn on_the_event_loop_pending_bytes_are_left_for_the_connection() {
        let (mut server, mut client) = pair();
        client.write_all(b"get q\r\n").expect("write");
        let fd = server.as_raw_fd();
        event_loop::EventLoop::new()
            .expect("loop")
            .block_on(async move {
                let watch = PeerWatch::new(fd).expect("watch");
                let r = crate::time::timeout(Duration::from_millis(200), watch.closed()).await;
                assert!(r.is_err(), "a peer that sent bytes is not gone");
            });
        server.set_nonblocking(false).expect("blocking");
        let mut buf = [0u8; 16];
        let n = std::io::Read::read(&mut server, &mut buf).expect("read");
        assert_eq!(&buf[..n], b"get q\r\n", "the watch took nothing");
    }

    #[test]
    fn pending_bytes_are_left_for_the_connection() {
        let rt = runtime();
        let (mut server, mut client) = pair();
        client.write_all(b"get q\r\n").expect("write");
        rt.block_on(async {
            let watch = PeerWatch::new(server.as_raw_fd()).expect("watch");
            let r = tokio::time::timeout(Duration::from_millis(200), watch.closed()).await;
            assert!(r.is_err(), "a peer that sent bytes is not gone");
        });
        server.set_nonblocking(false).expect("blocking");
        let mut buf = [0u8; 16];
        let n = std::io::Read::read(&mut server, &mut buf).expect("read");
        assert_eq!(&buf[..n], b"get q\r\n", "the watch took nothing");
    }
}
