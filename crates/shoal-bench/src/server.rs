//! Starting and stopping the servers under test, and reading their `stats`.

use crate::BenchError;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A server process this program started; killed when dropped.
pub struct ServerProcess {
    /// A label for reports (`shoald`, `memcached`).
    pub name: String,
    /// Where it listens.
    pub addr: SocketAddr,
    child: Child,
}

/// A free loopback TCP port (bound and released; another process could take it, which
/// the caller notices when the server fails to start).
pub fn free_port() -> Result<u16, BenchError> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| BenchError::io("find a free port", e))?;
    let port = l
        .local_addr()
        .map_err(|e| BenchError::io("find a free port", e))?
        .port();
    Ok(port)
}

/// The address in a `listening on 127.0.0.1:PORT` log line, ANSI colours and all.
pub fn parse_listening(line: &str) -> Option<SocketAddr> {
    let rest = &line[line.find("listening on ")? + "listening on ".len()..];
    let end = rest
        .find(|c: char| c.is_whitespace() || c == '\u{1b}')
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

fn spawn_err(name: &str, reason: impl std::fmt::Display) -> BenchError {
    BenchError::Spawn {
        name: name.to_string(),
        reason: reason.to_string(),
    }
}

impl ServerProcess {
    /// Starts shoald with `args` plus `-p 0 -v`, and learns its port from the
    /// `listening on` line on stderr.
    pub fn start_shoald(bin: &Path, args: &[String]) -> Result<Self, BenchError> {
        let mut child = Command::new(bin)
            .args(args)
            .args(["-p", "0", "-v"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| spawn_err("shoald", format!("{}: {e}", bin.display())))?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| spawn_err("shoald", "no stderr"))?;
        let (tx, rx) = mpsc::channel();
        // Keeps reading stderr for the process's life so logging never blocks it.
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(addr) = parse_listening(&line) {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(addr);
                    }
                }
            }
        });
        let mut proc = ServerProcess {
            name: "shoald".into(),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            child,
        };
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(addr) => proc.addr = addr,
            Err(_) => return Err(spawn_err("shoald", "no `listening on` line within 10 s")),
        }
        proc.wait_ready()?;
        Ok(proc)
    }

    /// Starts memcached with `args` on a free loopback port (`-u root` added when running
    /// as root, which memcached otherwise refuses).
    pub fn start_memcached(bin: &Path, args: &[String]) -> Result<Self, BenchError> {
        let port = free_port()?;
        let mut cmd = Command::new(bin);
        cmd.args(args)
            .args(["-p", &port.to_string(), "-U", "0", "-l", "127.0.0.1"]);
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            cmd.args(["-u", "root"]);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| spawn_err("memcached", format!("{}: {e}", bin.display())))?;
        let mut proc = ServerProcess {
            name: "memcached".into(),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            child,
        };
        proc.wait_ready()?;
        Ok(proc)
    }

    /// Waits until the server answers `version`.
    fn wait_ready(&mut self) -> Result<(), BenchError> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(spawn_err(&self.name, format!("exited with {status}")));
            }
            if let Ok(mut s) = TcpStream::connect(self.addr) {
                let mut b = [0u8; 64];
                if s.write_all(b"version\r\n").is_ok() && matches!(s.read(&mut b), Ok(n) if n > 0) {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(spawn_err(&self.name, "not answering within 10 s"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident set size in KiB, from `/proc/PID/status` (VmRSS).
    pub fn rss_kib(&self) -> Result<u64, BenchError> {
        rss_kib(self.pid())
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// VmRSS of process `pid` in KiB.
pub fn rss_kib(pid: u32) -> Result<u64, BenchError> {
    let path = format!("/proc/{pid}/status");
    let s = std::fs::read_to_string(&path).map_err(|e| BenchError::io(path.clone(), e))?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| BenchError::Protocol(format!("no VmRSS in {path}")))
}

/// The server's `stats` as name → value.
pub fn stats(addr: SocketAddr) -> Result<HashMap<String, String>, BenchError> {
    let mut s =
        TcpStream::connect(addr).map_err(|e| BenchError::io(format!("connect to {addr}"), e))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| BenchError::io("set timeout", e))?;
    s.write_all(b"stats\r\n")
        .map_err(|e| BenchError::io(format!("write to {addr}"), e))?;
    let mut out = HashMap::new();
    for line in BufReader::new(s).lines() {
        let line = line.map_err(|e| BenchError::io(format!("read from {addr}"), e))?;
        let line = line.trim_end();
        if line == "END" {
            return Ok(out);
        }
        let mut parts = line.splitn(3, ' ');
        match (parts.next(), parts.next(), parts.next()) {
            (Some("STAT"), Some(k), Some(v)) => {
                out.insert(k.to_string(), v.to_string());
            }
            _ => return Err(BenchError::Protocol(line.to_string())),
        }
    }
    Err(BenchError::Closed(addr.to_string()))
}

/// One numeric `stats` value.
pub fn stat_u64(stats: &HashMap<String, String>, name: &str) -> Result<u64, BenchError> {
    stats
        .get(name)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| BenchError::Protocol(format!("stats has no numeric {name}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_listening_address() {
        let l = "2025-01-01T00:00:00Z  INFO shoald: listening on 127.0.0.1:40123";
        assert_eq!(parse_listening(l), Some("127.0.0.1:40123".parse().unwrap()));
        let l = "\u{1b}[32m INFO\u{1b}[0m listening on 127.0.0.1:5\u{1b}[0m";
        assert_eq!(parse_listening(l), Some("127.0.0.1:5".parse().unwrap()));
        assert_eq!(parse_listening("listening on unix:/tmp/x"), None);
    }
}
