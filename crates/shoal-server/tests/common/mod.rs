//! Shared helpers for shoald's integration tests: start the real binary on an ephemeral
//! loopback port, talk to it with timeouts, and kill it when the test ends.
//!
//! Every socket operation has a timeout and every wait is bounded, so a server bug shows
//! up as a failed assertion, never as a hung test run.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Timeout for every socket read and write.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// How long shoald may take to log its listening address.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Path of the shoald binary Cargo built for these tests.
pub fn shoald_bin() -> &'static str {
    env!("CARGO_BIN_EXE_shoald")
}

/// A running shoald, killed when dropped.
pub struct Server {
    child: Child,
    /// The TCP address it listens on (None for a unix-socket server).
    pub addr: Option<SocketAddr>,
    /// The unix socket path (with `-s`).
    pub socket: Option<PathBuf>,
    /// stderr lines after the listening line, for tests that look at logs.
    stderr: mpsc::Receiver<String>,
}

impl Server {
    /// shoald with default options (plus `-t 2`, enough for tests).
    pub fn start() -> Server {
        Server::with_args(&[])
    }

    /// shoald with `-p -1 -l 127.0.0.1 -v -t 2` plus `args` (later options win).
    pub fn with_args(args: &[&str]) -> Server {
        Server::with_env(args, &[])
    }

    /// Like [`Server::with_args`], with extra environment variables. Options in
    /// `SHOALD_TEST_ARGS` (whitespace-separated) come before `args`: how the suite runs
    /// again on the io_uring data path (`SHOALD_TEST_ARGS=--io-uring`).
    pub fn with_env(args: &[&str], env: &[(&str, &str)]) -> Server {
        Server::spawn(&[], args, env)
    }

    /// Like [`Server::with_args`], started through `wrapper` (a command and its
    /// arguments that execs what follows it, such as `fiu-run -x` for injected faults).
    pub fn under(wrapper: &[&str], args: &[&str]) -> Server {
        Server::spawn(wrapper, args, &[])
    }

    fn spawn(wrapper: &[&str], args: &[&str], env: &[(&str, &str)]) -> Server {
        let mut cmd = match wrapper.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(shoald_bin());
                c
            }
            None => Command::new(shoald_bin()),
        };
        let extra = std::env::var("SHOALD_TEST_ARGS").unwrap_or_default();
        cmd.args(["-p", "-1", "-l", "127.0.0.1", "-v", "-t", "2"])
            .args(extra.split_whitespace())
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn shoald");
        let stderr = child.stderr.take().expect("stderr piped");
        let (tx, rx) = mpsc::channel();
        // Drain stderr for the life of the process so logging can never block it.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    // Receiver gone: keep draining without storing.
                    continue;
                }
            }
        });
        let deadline = Instant::now() + START_TIMEOUT;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match rx.recv_timeout(left) {
                Ok(l) => l,
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("shoald did not report its address; stderr: {seen:#?}");
                }
            };
            if let Some(rest) = line.split("listening on ").nth(1) {
                let rest = rest.trim();
                let mut server = Server {
                    child,
                    addr: None,
                    socket: None,
                    stderr: rx,
                };
                if let Some(path) = rest.strip_prefix("unix:") {
                    server.socket = Some(PathBuf::from(path));
                } else {
                    server.addr = Some(rest.parse().expect("listening address"));
                }
                return server;
            }
            seen.push(line);
        }
    }

    /// Waits up to `wait` for a stderr line containing `needle`, returning it.
    pub fn wait_log(&self, needle: &str, wait: Duration) -> Option<String> {
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return Some(line),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.addr.expect("tcp server").port()
    }

    /// The process id.
    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).expect("pid fits i32")
    }

    /// A new client connection (TCP or unix, whichever the server listens on).
    pub fn conn(&self) -> Conn {
        match (&self.addr, &self.socket) {
            (Some(addr), _) => Conn::tcp(*addr),
            (None, Some(path)) => Conn::unix(path),
            _ => unreachable!("server has an address"),
        }
    }

    /// Sends `sig` to the process.
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        let rc = unsafe { libc::kill(self.pid(), sig) };
        assert_eq!(rc, 0, "kill failed");
    }

    /// Waits up to `timeout` for the process to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.child.try_wait().expect("try_wait") {
                Some(st) => return Some(st),
                None if Instant::now() >= deadline => return None,
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs shoald with `args` (no defaults added) and returns its exit status, killing it if
/// it does not exit within 5 s.
pub fn run_to_exit(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(shoald_bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn shoald");
    let status = exit_within(&mut child, Duration::from_secs(5));
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    (status.and_then(|s| s.code()), err)
}

pub use shoal_test_support::signals::exit_within;

pub mod binproto;

trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// One client connection with timeouts on every operation.
pub struct Conn {
    stream: Box<dyn Stream>,
    tcp: Option<TcpStream>,
}

/// Shows bytes readably in assertion messages.
pub fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

impl Conn {
    /// Connects over TCP.
    pub fn tcp(addr: SocketAddr) -> Conn {
        let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
        s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        s.set_write_timeout(Some(IO_TIMEOUT)).expect("timeout");
        s.set_nodelay(true).expect("nodelay");
        let clone = s.try_clone().expect("clone");
        Conn {
            stream: Box::new(s),
            tcp: Some(clone),
        }
    }

    /// Wraps an already-connected stream (e.g. a TLS session over `tcp`); `tcp` is the
    /// underlying socket, used for read timeouts and resets. Its timeouts must be set.
    pub fn wrap<S: Read + Write + Send + 'static>(stream: S, tcp: Option<TcpStream>) -> Conn {
        Conn {
            stream: Box::new(stream),
            tcp,
        }
    }

    /// Connects to a unix socket.
    pub fn unix(path: &Path) -> Conn {
        let s = UnixStream::connect(path).expect("connect unix");
        s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        s.set_write_timeout(Some(IO_TIMEOUT)).expect("timeout");
        Conn {
            stream: Box::new(s),
            tcp: None,
        }
    }

    /// Writes all of `data`.
    pub fn send(&mut self, data: &[u8]) {
        self.stream.write_all(data).expect("write");
        self.stream.flush().expect("flush");
    }

    /// Writes what it can of `data`, ignoring errors (for clients that misbehave).
    pub fn send_lossy(&mut self, data: &[u8]) {
        let _ = self.stream.write_all(data);
    }

    /// Reads exactly `n` bytes (panics on timeout or EOF, showing what arrived).
    pub fn read_n(&mut self, n: usize) -> Vec<u8> {
        let mut buf = vec![0u8; n];
        let mut got = 0;
        while got < n {
            match self.stream.read(&mut buf[got..]) {
                Ok(0) => panic!(
                    "EOF after {got} of {n} bytes: {:?}",
                    show(&buf[..got.min(400)])
                ),
                Ok(k) => got += k,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => panic!(
                    "read error after {got} of {n} bytes ({e}): {:?}",
                    show(&buf[..got.min(400)])
                ),
            }
        }
        buf
    }

    /// Reads exactly `expected.len()` bytes and asserts they are `expected`.
    #[track_caller]
    pub fn expect(&mut self, expected: &[u8]) {
        let got = self.read_n(expected.len());
        assert_eq!(show(&got), show(expected));
    }

    /// Sends `req` and asserts the reply is exactly `expected`.
    #[track_caller]
    pub fn rt(&mut self, req: &[u8], expected: &[u8]) {
        self.send(req);
        self.expect(expected);
    }

    /// Sends `req` and returns the reply up to and including `terminator`.
    pub fn request_until(&mut self, req: &[u8], terminator: &[u8]) -> Vec<u8> {
        self.send(req);
        self.read_until(terminator)
    }

    /// Reads until the data read so far ends with `terminator`.
    pub fn read_until(&mut self, terminator: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut byte = [0u8; 4096];
        while !out.ends_with(terminator) {
            // Read a byte at a time near the end so nothing after the terminator is eaten.
            let want = if out.len() > 1 << 16 { 4096 } else { 1 };
            let want = want.min(byte.len());
            match self.stream.read(&mut byte[..want]) {
                Ok(0) => panic!("EOF before terminator; got {:?}", show(&out)),
                Ok(k) => out.extend_from_slice(&byte[..k]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => panic!("read error ({e}); got {:?}", show(&out)),
            }
            assert!(out.len() < 64 << 20, "reply too long");
        }
        out
    }

    /// Reads one `\r\n`-terminated line (including the terminator).
    pub fn read_line(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut b = [0u8; 1];
        while !out.ends_with(b"\r\n") {
            match self.stream.read(&mut b) {
                Ok(0) => panic!("EOF mid-line; got {:?}", show(&out)),
                Ok(_) => out.push(b[0]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => panic!("read error ({e}); got {:?}", show(&out)),
            }
            assert!(out.len() < 1 << 20, "line too long");
        }
        out
    }

    /// Asserts the server closes the connection (EOF or reset) within the timeout, with
    /// nothing but `allowed_prefix` arriving first.
    #[track_caller]
    pub fn expect_closed(&mut self) {
        let mut buf = [0u8; 1024];
        let mut got = Vec::new();
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => break,
                Ok(k) => got.extend_from_slice(&buf[..k]),
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
                    ) =>
                {
                    break
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => panic!("connection not closed ({e}); got {:?}", show(&got)),
            }
            assert!(got.len() < 1 << 20, "unexpected data: {:?}", show(&got));
        }
        assert!(
            got.is_empty(),
            "unexpected reply before close: {:?}",
            show(&got)
        );
    }

    /// Reads whatever arrives within `wait`, returning it and whether the server closed
    /// the connection.
    pub fn drain_for(&mut self, wait: Duration) -> (Vec<u8>, bool) {
        let deadline = Instant::now() + wait;
        let mut got = Vec::new();
        let mut buf = [0u8; 16 * 1024];
        let closed = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break false;
            }
            self.set_read_timeout(left.max(Duration::from_millis(1)));
            match self.stream.read(&mut buf) {
                Ok(0) => break true,
                Ok(k) => got.extend_from_slice(&buf[..k]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    break false
                }
                Err(_) => break true,
            }
            assert!(got.len() < 64 << 20, "too much output");
        };
        self.set_read_timeout(IO_TIMEOUT);
        (got, closed)
    }

    fn set_read_timeout(&self, t: Duration) {
        if let Some(tcp) = &self.tcp {
            let _ = tcp.set_read_timeout(Some(t));
        }
    }

    /// Closes the connection with a TCP reset (SO_LINGER 0), as a crashed client would.
    pub fn reset(self) {
        if let Some(t) = &self.tcp {
            let sock = socket2::SockRef::from(t);
            let _ = sock.set_linger(Some(Duration::ZERO));
        }
        drop(self);
    }

    /// `stats [group]` as a map of name to value.
    pub fn stats(&mut self, group: &str) -> HashMap<String, String> {
        let cmd = if group.is_empty() {
            "stats\r\n".to_string()
        } else {
            format!("stats {group}\r\n")
        };
        let raw = self.request_until(cmd.as_bytes(), b"END\r\n");
        let text = show(&raw);
        let mut map = HashMap::new();
        for line in text.split("\r\n") {
            if line == "END" || line.is_empty() {
                continue;
            }
            let mut parts = line.splitn(3, ' ');
            assert_eq!(parts.next(), Some("STAT"), "bad stats line {line:?}");
            let name = parts.next().expect("stat name").to_string();
            let value = parts.next().unwrap_or("").to_string();
            map.insert(name, value);
        }
        map
    }

    /// One numeric general stat.
    pub fn stat(&mut self, name: &str) -> u64 {
        let s = self.stats("");
        s.get(name)
            .unwrap_or_else(|| panic!("no stat {name}"))
            .parse()
            .unwrap_or_else(|_| panic!("stat {name} not numeric"))
    }

    /// `set key 0 0 <len>` with `value`, asserting STORED.
    #[track_caller]
    pub fn set(&mut self, key: &str, value: &[u8]) {
        let mut req = format!("set {key} 0 0 {}\r\n", value.len()).into_bytes();
        req.extend_from_slice(value);
        req.extend_from_slice(b"\r\n");
        self.rt(&req, b"STORED\r\n");
    }

    /// `get key`: the value, or None on a miss.
    pub fn get(&mut self, key: &str) -> Option<Vec<u8>> {
        self.send(format!("get {key}\r\n").as_bytes());
        let header = self.read_line();
        if header == b"END\r\n" {
            return None;
        }
        let h = show(&header);
        let parts: Vec<&str> = h.trim_end().split(' ').collect();
        assert_eq!(parts.len(), 4, "bad VALUE line {h:?}");
        assert_eq!(parts[0], "VALUE");
        assert_eq!(parts[1], key);
        let len: usize = parts[3].parse().expect("length");
        let data = self.read_n(len + 2);
        assert_eq!(&data[len..], b"\r\n");
        self.expect(b"END\r\n");
        Some(data[..len].to_vec())
    }

    /// Asserts the connection still serves (`version` answers).
    #[track_caller]
    pub fn assert_alive(&mut self) {
        self.send(b"version\r\n");
        let line = self.read_line();
        assert!(line.starts_with(b"VERSION "), "got {:?}", show(&line));
    }
}

/// The `cas` unique from a `gets` reply for `key` (asserts it is a hit).
pub fn gets_cas(c: &mut Conn, key: &str) -> u64 {
    let reply = c.request_until(format!("gets {key}\r\n").as_bytes(), b"END\r\n");
    let text = show(&reply);
    let header = text.lines().next().expect("a line");
    let parts: Vec<&str> = header.split(' ').collect();
    assert_eq!(parts.len(), 5, "not a gets hit: {text:?}");
    parts[4].parse().expect("cas unique")
}

/// Starts shoald serving metrics on an ephemeral port (`--metrics-listen 127.0.0.1:0`,
/// plus `args`), and returns it with the metrics address it logged.
pub fn with_metrics(args: &[&str]) -> (Server, SocketAddr) {
    let mut all = vec!["--metrics-listen", "127.0.0.1:0"];
    all.extend_from_slice(args);
    let server = Server::with_args(&all);
    let line = server
        .wait_log("metrics on http://", START_TIMEOUT)
        .expect("shoald logs its metrics address");
    let addr = line
        .split("metrics on http://")
        .nth(1)
        .and_then(|r| r.trim().strip_suffix("/metrics"))
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("metrics address in {line:?}"));
    (server, addr)
}

/// `GET path`: the status and the body.
pub fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    let (status, text) = shoal_test_support::http_raw(addr, req.as_bytes());
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// One sample of a metrics page: family name, labels (in page order), value.
pub type Sample = (String, Vec<(String, String)>, f64);

/// Parses the samples of a text-format page (labels without escapes, as shoald's are).
pub fn parse_page(page: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in page
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (series, value) = line.rsplit_once(' ').expect("sample value");
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("value in {line:?}")),
        };
        let (name, labels) = match series.split_once('{') {
            None => (series.to_string(), Vec::new()),
            Some((name, rest)) => {
                let rest = rest.strip_suffix('}').expect("closing brace");
                let labels = rest
                    .split("\",")
                    .map(|kv| {
                        let (k, v) = kv.split_once("=\"").expect("label");
                        (k.to_string(), v.trim_end_matches('"').to_string())
                    })
                    .collect();
                (name.to_string(), labels)
            }
        };
        out.push((name, labels, value));
    }
    out
}
