//! The real memcached as a test peer: started on an ephemeral loopback port under the
//! [`peer`](crate::peer) rule, and killed when the test is done with it.
//!
//! Tests compare shoald with memcached (reply parity, exporter families, hostile-client
//! RSS) or run clients against it as a reference server; they all start it the same way
//! here instead of each spawning `memcached` and treating a failed spawn as "not
//! installed", which let a missing memcached pass a test silently.

use std::net::SocketAddr;
#[cfg(test)]
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A running memcached listening on `127.0.0.1`, killed (and reaped) when dropped.
pub struct Memcached {
    child: Child,
    addr: SocketAddr,
}

/// The file a memcached started with `-p -1` names its port in
/// (`MEMCACHED_PORT_FILENAME`), as memcached's own test suite starts it: a port chosen by
/// the caller instead could be taken first by a server of a test running in parallel.
/// The file is removed when this is dropped.
pub struct PortFile {
    path: std::path::PathBuf,
}

impl PortFile {
    /// A path no other server of this process uses.
    pub fn new() -> PortFile {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "shoal-memcached-port-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_file(&path);
        PortFile { path }
    }

    /// The path, for `MEMCACHED_PORT_FILENAME`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The TCP port memcached wrote, once it has: memcached writes the file under another
    /// name and renames it once every socket is bound, so a file that exists is complete.
    pub fn port(&self) -> Option<u16> {
        std::fs::read_to_string(&self.path).ok().and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("TCP INET: "))
                .and_then(|p| p.trim().parse::<u16>().ok())
        })
    }
}

impl Default for PortFile {
    fn default() -> Self {
        PortFile::new()
    }
}

impl Drop for PortFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
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
    /// memcached picks its own port (`-p -1`) and says which in the file named by
    /// `MEMCACHED_PORT_FILENAME`, as its own test suite starts it. Choosing a free port
    /// here and passing it instead raced with the other tests starting servers in
    /// parallel: another process could take the port first, memcached would exit, and the
    /// readiness probe would reach the other process. Panics if memcached exits or has not
    /// written its port within 10 s.
    pub fn start_bin(bin: &Path, args: &[&str]) -> Memcached {
        let port_file = PortFile::new();
        // `-u root` is only read (and only needed) when the tests run as root.
        let child = Command::new(bin)
            .args(["-p", "-1", "-l", "127.0.0.1", "-U", "0"])
            .args(["-u", "root", "-t", "2"])
            .args(args)
            .env("MEMCACHED_PORT_FILENAME", port_file.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
        let mut mc = Memcached {
            child,
            addr: ([127, 0, 0, 1], 0).into(),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(port) = port_file.port() {
                mc.addr.set_port(port);
                return mc;
            }
            if let Ok(Some(status)) = mc.child.try_wait() {
                panic!("memcached {args:?} exited at startup: {status}");
            }
            assert!(
                Instant::now() < deadline,
                "memcached {args:?} did not say its port within 10 s"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
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
