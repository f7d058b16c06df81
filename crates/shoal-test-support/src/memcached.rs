//! The real memcached as a test peer: started on an ephemeral loopback port under the
//! [`peer`](crate::peer) rule, and killed when the test is done with it.
//!
//! Tests compare shoald with memcached (reply parity, exporter families, hostile-client
//! RSS) or run clients against it as a reference server; they all start it the same way
//! here instead of each spawning `memcached` and treating a failed spawn as "not
//! installed", which let a missing memcached pass a test silently.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running memcached listening on `127.0.0.1`, killed (and reaped) when dropped.
pub struct Memcached {
    child: Child,
    addr: SocketAddr,
}

impl Memcached {
    /// memcached with `-l 127.0.0.1 -U 0 -u root -t 2` on an ephemeral port, plus `args`
    /// (later options win), once it accepts connections.
    ///
    /// `None` when memcached is not installed, under the peer rule: CI
    /// (`SHOAL_REQUIRE_PEERS=1`) fails instead, a plain `cargo test` prints `SKIPPED` and
    /// the caller returns from the test. An installed memcached that does not start
    /// fails the test.
    pub fn start(args: &[&str]) -> Option<Memcached> {
        let bin = crate::peer("memcached", "memcached")?;
        Some(Memcached::start_bin(&bin, args))
    }

    /// Like [`Memcached::start`] with a binary the caller already found with
    /// [`peer`](crate::peer) (tests that start many and check the peer rule once).
    ///
    /// Panics if memcached does not accept connections within 5 s on any of five ports
    /// (a port can be taken by another process between choosing and binding it).
    pub fn start_bin(bin: &Path, args: &[&str]) -> Memcached {
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("ephemeral port")
                .port();
            // `-u root` is only read (and only needed) when the tests run as root.
            let child = Command::new(bin)
                .args(["-p", &port.to_string(), "-l", "127.0.0.1", "-U", "0"])
                .args(["-u", "root", "-t", "2"])
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
            let mut mc = Memcached {
                child,
                addr: ([127, 0, 0, 1], port).into(),
            };
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = mc.child.try_wait() {
                    break; // Most likely the port was taken meanwhile: try another.
                }
                if TcpStream::connect_timeout(&mc.addr, Duration::from_millis(200)).is_ok() {
                    return mc;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        panic!("memcached {args:?} did not start");
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its process id, for RSS sampling.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// The memcached release shoald's replies are compared with.
pub const REFERENCE_VERSION: &str = "1.6.45";

/// memcached [`REFERENCE_VERSION`], the reference for shoald's replies: Debian ships an
/// older memcached, so this one is built from the peers tarball by
/// `scripts/memcached-reference.sh` into the workspace's ignored `.peers/` directory.
///
/// `SHOAL_REFERENCE_MEMCACHED` names the binary instead; when it is set the binary must
/// exist (`scripts/test.sh` sets it after building). Otherwise a missing build prints a
/// `SKIPPED` line and returns `None`, even under `SHOAL_REQUIRE_PEERS`: the tarball is
/// not a Debian package, and a machine without it skips what needs it (the script says
/// so too).
pub fn reference() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("SHOAL_REFERENCE_MEMCACHED") {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "SHOAL_REFERENCE_MEMCACHED={} does not exist",
            path.display()
        );
        return Some(path);
    }
    let built = crate::workspace_root()
        .join(".peers")
        .join(format!("memcached-{REFERENCE_VERSION}"))
        .join("memcached");
    if built.is_file() {
        return Some(built);
    }
    eprintln!(
        "SKIPPED: memcached {REFERENCE_VERSION} is not built \
         (bash scripts/memcached-reference.sh builds it from the peers tarball)"
    );
    None
}

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};

    #[test]
    fn memcached_starts_answers_and_goes_away() {
        let Some(mc) = Memcached::start(&["-m", "8"]) else {
            return;
        };
        let mut s = TcpStream::connect(mc.addr()).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        s.write_all(b"version\r\n").expect("write");
        let mut line = String::new();
        BufReader::new(&s).read_line(&mut line).expect("read");
        assert!(line.starts_with("VERSION "), "{line:?}");
        let pid = mc.pid();
        assert!(crate::rss_kib(pid) > 0);
        drop(mc);
        // Dropping reaps the process, so its /proc entry is gone.
        assert_eq!(crate::rss_kib(pid), 0);
    }
}
