//! Binding the listening socket.

use std::io;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// A bound, non-blocking listener, so callers can learn the port (of port 0) before serving.
pub enum Listener {
    /// TCP.
    Tcp(std::net::TcpListener),
    /// A unix domain socket.
    Unix(std::os::unix::net::UnixListener),
}

/// An accepted connection, as plain std sockets so it can move to a worker thread and be
/// registered with that thread's event loop there.
pub enum Incoming {
    /// A TCP connection and its peer.
    Tcp(std::net::TcpStream, SocketAddr),
    /// A unix socket connection.
    Unix(std::os::unix::net::UnixStream),
}

impl Listener {
    /// Binds TCP on `addr` with `SO_REUSEADDR` and a listen backlog of `backlog`.
    pub fn bind_tcp(addr: SocketAddr, backlog: u32) -> io::Result<Listener> {
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )?;
        socket.set_reuse_address(true)?;
        socket.bind(&addr.into())?;
        socket.listen(i32::try_from(backlog).unwrap_or(i32::MAX))?;
        socket.set_nonblocking(true)?;
        Ok(Listener::Tcp(socket.into()))
    }

    /// Binds a unix socket at `path` (replacing a stale one) with permissions `mode`.
    pub fn bind_unix(path: &Path, mode: u32) -> io::Result<Listener> {
        let _ = std::fs::remove_file(path);
        let l = std::os::unix::net::UnixListener::bind(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o777))?;
        l.set_nonblocking(true)?;
        Ok(Listener::Unix(l))
    }

    /// The bound TCP address (`None` for a unix socket).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        match self {
            Listener::Tcp(l) => l.local_addr().ok(),
            Listener::Unix(_) => None,
        }
    }
}
