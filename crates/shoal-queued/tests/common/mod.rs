//! Shared helpers for shoal-queued's integration tests: start the real binary on an
//! ephemeral loopback port with a temporary data directory, talk to it with timeouts.
//!
//! Every socket operation has a timeout and every wait is bounded, so a server bug shows
//! up as a failed assertion, never as a hung test run.

#![allow(dead_code)]

pub mod deliveries;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Timeout for every socket read and write.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Path of the binary Cargo built for these tests.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_shoal-queued")
}

/// A running shoal-queued, killed when dropped.
pub struct Server {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its stderr lines after the listening line.
    pub stderr: mpsc::Receiver<String>,
    /// Its stderr lines up to the listening line (recovery reports).
    pub startup_logs: Vec<String>,
}

impl Server {
    /// `shoal-queued -p 0 -l 127.0.0.1 -v -t 2 -d <dir>` plus `args`.
    pub fn start(dir: &Path, args: &[&str]) -> Server {
        Server::start_under(&[], dir, args)
    }

    /// [`Server::start`] through a wrapper command (`wrapper` then the binary and its
    /// arguments), such as `fiu-run -x` for injected IO errors. The wrapper must exec the
    /// binary, so that the child's pid is the server's.
    pub fn start_under(wrapper: &[&str], dir: &Path, args: &[&str]) -> Server {
        let mut cmd = match wrapper.split_first() {
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(bin());
                c
            }
            None => Command::new(bin()),
        };
        let mut child = cmd
            .args(["-p", "0", "-l", "127.0.0.1", "-v", "-t", "2", "-d"])
            .arg(dir)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn shoal-queued");
        let stderr = child.stderr.take().expect("stderr piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + START_TIMEOUT;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = rx.recv_timeout(left) else {
                let _ = child.kill();
                let _ = child.wait();
                panic!("shoal-queued did not report its address; stderr: {seen:#?}");
            };
            if let Some(rest) = line.split("listening on ").nth(1) {
                let addr = rest
                    .split_whitespace()
                    .next()
                    .and_then(|a| a.parse().ok())
                    .expect("address in listening line");
                return Server {
                    child,
                    addr,
                    stderr: rx,
                    startup_logs: seen,
                };
            }
            seen.push(line);
        }
    }

    /// A new client connection.
    pub fn client(&self) -> Client {
        Client::connect(self.addr)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGKILL and reaps the process.
    pub fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends `sig` and waits (bounded) for the exit status.
    pub fn signal_and_wait(mut self, sig: i32) -> ExitStatus {
        // SAFETY: signalling our own child by pid.
        unsafe { libc::kill(self.child.id() as i32, sig) };
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(st) = self.child.try_wait().expect("wait") {
                return st;
            }
            assert!(
                Instant::now() < deadline,
                "server did not exit after signal {sig}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stderr lines logged so far (startup included).
    pub fn logs(&self) -> Vec<String> {
        let mut v = self.startup_logs.clone();
        v.extend(self.stderr.try_iter());
        v
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A blocking client with timeouts on every operation.
pub struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    /// Connects to `addr`.
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
        stream.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        stream.set_write_timeout(Some(IO_TIMEOUT)).expect("timeout");
        stream.set_nodelay(true).expect("nodelay");
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    /// Sends raw bytes.
    pub fn send(&mut self, b: &[u8]) {
        self.stream.write_all(b).expect("send");
    }

    /// Sends raw bytes, returning the error (a server that closes mid-request).
    pub fn try_send(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(b)
    }

    fn fill(&mut self) -> std::io::Result<()> {
        let mut chunk = [0u8; 16384];
        let n = self.stream.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    /// Reads one line (without `\r\n`).
    pub fn try_line(&mut self) -> std::io::Result<String> {
        loop {
            if let Some(p) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..p]).into_owned();
                self.buf.drain(..p + 2);
                return Ok(line);
            }
            self.fill()?;
        }
    }

    /// Reads one line if one arrives within `wait`; `None` if none does (a partial line
    /// is kept for the next read).
    pub fn line_within(&mut self, wait: Duration) -> Option<String> {
        self.stream.set_read_timeout(Some(wait)).expect("timeout");
        let line = self.try_line();
        self.stream
            .set_read_timeout(Some(IO_TIMEOUT))
            .expect("timeout");
        match line {
            Ok(l) => Some(l),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                None
            }
            Err(e) => panic!("read line: {e}"),
        }
    }

    /// Reads one line, panicking on error.
    pub fn line(&mut self) -> String {
        self.try_line().expect("read line")
    }

    /// Reads exactly `n` bytes plus `\r\n`.
    pub fn try_data(&mut self, n: usize) -> std::io::Result<Vec<u8>> {
        while self.buf.len() < n + 2 {
            self.fill()?;
        }
        let d = self.buf[..n].to_vec();
        self.buf.drain(..n + 2);
        Ok(d)
    }

    /// Reads exactly `n` bytes, whatever they are.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n {
            self.fill().expect("read bytes");
        }
        self.buf.drain(..n).collect()
    }

    /// Whether the server closed the connection (EOF or reset, within the IO timeout).
    pub fn closed(&mut self) -> bool {
        self.try_line().is_err()
    }

    /// Sends a command line and returns the reply's lines up to `END` (not included):
    /// `dump_stats`, `dump_config` and the like.
    pub fn lines_until_end(&mut self, line: &str) -> Vec<String> {
        self.send(format!("{line}\r\n").as_bytes());
        let mut lines = Vec::new();
        loop {
            let l = self.line();
            if l == "END" {
                return lines;
            }
            lines.push(l);
        }
    }

    /// Sends a command line and returns the reply line.
    pub fn cmd(&mut self, line: &str) -> String {
        self.send(format!("{line}\r\n").as_bytes());
        self.line()
    }

    /// `set` and return the reply line.
    pub fn try_set(
        &mut self,
        key: &str,
        flags: u32,
        exptime: i64,
        data: &[u8],
    ) -> std::io::Result<String> {
        let mut m = format!("set {key} {flags} {exptime} {}\r\n", data.len()).into_bytes();
        m.extend_from_slice(data);
        m.extend_from_slice(b"\r\n");
        self.stream.write_all(&m)?;
        self.try_line()
    }

    /// `set`, panicking on error.
    pub fn set(&mut self, key: &str, data: &[u8]) -> String {
        self.try_set(key, 0, 0, data).expect("set")
    }

    /// `get key`: `Some((flags, data))` or None on `END`.
    pub fn try_get(&mut self, key: &str) -> std::io::Result<Option<(u32, Vec<u8>)>> {
        self.stream.write_all(format!("get {key}\r\n").as_bytes())?;
        let line = self.try_line()?;
        if line == "END" {
            return Ok(None);
        }
        let parts: Vec<&str> = line.split(' ').collect();
        assert!(
            parts.len() == 4 && parts[0] == "VALUE",
            "unexpected reply {line:?}"
        );
        // A key with Kestrel options is answered with the bare queue name.
        assert_eq!(parts[1], key.split('/').next().unwrap_or(key));
        let flags = parts[2].parse().expect("flags");
        let n: usize = parts[3].parse().expect("len");
        let data = self.try_data(n)?;
        let end = self.try_line()?;
        assert_eq!(end, "END");
        Ok(Some((flags, data)))
    }

    /// `get`, panicking on error.
    pub fn get(&mut self, key: &str) -> Option<(u32, Vec<u8>)> {
        self.try_get(key).expect("get")
    }

    /// `get` returning the data as a string.
    pub fn get_str(&mut self, key: &str) -> Option<String> {
        self.get(key)
            .map(|(_, d)| String::from_utf8(d).expect("utf8"))
    }

    /// `stats` as (name, value) pairs.
    pub fn stats(&mut self, group: &str) -> Vec<(String, String)> {
        self.lines_until_end(&format!("stats{group}"))
            .into_iter()
            .map(|l| {
                let mut it = l.splitn(3, ' ');
                assert_eq!(it.next(), Some("STAT"), "{l}");
                (
                    it.next().unwrap_or_default().to_string(),
                    it.next().unwrap_or_default().to_string(),
                )
            })
            .collect()
    }

    /// One `stats` value.
    pub fn stat(&mut self, name: &str) -> Option<String> {
        self.stats("")
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }
}
