//! Test harness: real shoald backends, shoal-proxy and nutcracker processes on loopback
//! ports, and a small blocking memcached client with timeouts on every operation.

#![allow(dead_code)]

pub mod bin;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Timeout for every socket read and write.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// The shoal-proxy binary.
pub fn proxy_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_shoal-proxy"))
}

/// shoald from this test's target directory, rebuilt if stale (see shoal-test-support).
pub fn shoald_bin() -> PathBuf {
    shoal_test_support::workspace_bin("shoald")
}

/// A child process killed on drop, with its stderr drained into a channel.
pub struct Proc {
    pub child: Child,
    pub lines: mpsc::Receiver<String>,
}

impl Proc {
    /// Sends the process SIGHUP (shoal-proxy reloads its configuration on it).
    pub fn sighup(&self) {
        let pid = i32::try_from(self.child.id()).expect("pid");
        // SAFETY: kill(2) on our own child's pid has no memory effects.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGHUP) }, 0);
    }

    pub fn spawn(mut cmd: Command) -> Proc {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn");
        let err = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        Proc { child, lines: rx }
    }

    /// Waits (10 s at most) for a stderr line containing `needle`; returns the text after it.
    pub fn wait_for(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    if let Some(rest) = l.split(needle).nth(1) {
                        return rest.trim().to_string();
                    }
                    seen.push(l);
                }
                Err(_) => panic!("no '{needle}' in stderr: {seen:#?}"),
            }
        }
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            // Show what the process said, to explain the failure.
            for l in self.lines.try_iter() {
                eprintln!("[child stderr] {l}");
            }
        }
    }
}

/// A shoald backend on an ephemeral port.
pub struct Shoald {
    pub proc: Proc,
    pub addr: SocketAddr,
}

impl Shoald {
    pub fn start() -> Shoald {
        let mut cmd = Command::new(shoald_bin());
        cmd.args(["-p", "-1", "-l", "127.0.0.1", "-v", "-t", "1", "-m", "64"]);
        let proc = Proc::spawn(cmd);
        let addr = proc.wait_for("listening on ").parse().expect("addr");
        Shoald { proc, addr }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn conn(&self) -> Conn {
        Conn::connect(self.addr)
    }
}

/// A real memcached on a loopback port of its choosing, in a [`Shoald`] (same handle), or
/// `None` after a visible skip when memcached is not installed (CI requires it).
/// memcached picks the port (`-p -1`) and names it in `MEMCACHED_PORT_FILENAME`: a port
/// chosen here could be taken by a server of a test running in parallel first.
pub fn memcached() -> Option<Shoald> {
    let bin = shoal_test_support::peer("memcached", "memcached")?;
    let port_file = shoal_test_support::memcached::PortFile::new();
    let mut cmd = Command::new(bin);
    // `-u root` only matters (and is only needed) when the tests run as root.
    cmd.args(["-p", "-1", "-U", "0", "-l", "127.0.0.1", "-m", "64"])
        .args(["-u", "root"])
        .env("MEMCACHED_PORT_FILENAME", port_file.path());
    let proc = Proc::spawn(cmd);
    let deadline = Instant::now() + Duration::from_secs(10);
    let port = loop {
        if let Some(port) = port_file.port() {
            break port;
        }
        assert!(Instant::now() < deadline, "memcached did not say its port");
        std::thread::sleep(Duration::from_millis(10));
    };
    Some(Shoald {
        proc,
        addr: ([127, 0, 0, 1], port).into(),
    })
}

/// Three shoald backends.
pub fn three_backends() -> Vec<Shoald> {
    (0..3).map(|_| Shoald::start()).collect()
}

static CONF_SEQ: AtomicUsize = AtomicUsize::new(0);

/// Writes a config file and returns its path.
pub fn write_conf(text: &str) -> PathBuf {
    let n = CONF_SEQ.fetch_add(1, Ordering::Relaxed);
    let path =
        std::env::temp_dir().join(format!("shoal-proxy-test-{}-{n}.yml", std::process::id()));
    std::fs::write(&path, text).expect("write conf");
    path
}

/// A free loopback port (bound and released; fine for tests on one machine).
pub fn free_port() -> u16 {
    free_ports(1)[0]
}

/// `n` distinct free loopback ports (all held until every one is chosen).
pub fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind"))
        .collect();
    held.iter()
        .map(|l| l.local_addr().expect("addr").port())
        .collect()
}

/// A running shoal-proxy.
pub struct Proxy {
    pub proc: Proc,
    /// Listening address of each pool, in config order.
    pub pools: Vec<SocketAddr>,
    pub stats: SocketAddr,
    pub conf: PathBuf,
}

impl Proxy {
    /// Starts shoal-proxy on `conf` (listen addresses may use port 0) with its default
    /// single-threaded event loop.
    pub fn start(conf: &str, npools: usize) -> Proxy {
        Proxy::start_threads(conf, npools, 1)
    }

    /// Like [`Proxy::start`] with `--threads threads` worker threads.
    pub fn start_threads(conf: &str, npools: usize, threads: usize) -> Proxy {
        Proxy::start_args(conf, npools, &["--threads", &threads.to_string()])
    }

    /// Like [`Proxy::start`] with more command-line arguments.
    pub fn start_args(conf: &str, npools: usize, args: &[&str]) -> Proxy {
        let path = write_conf(conf);
        let mut cmd = Command::new(proxy_bin());
        cmd.arg("-c").arg(&path).args(["-s", "0"]).args(args);
        let proc = Proc::spawn(cmd);
        let mut pools = Vec::new();
        for _ in 0..npools {
            let rest = proc.wait_for(" listening on ");
            pools.push(rest.parse().expect("pool addr"));
        }
        let stats = proc.wait_for("stats listening on ").parse().expect("stats");
        Proxy {
            proc,
            pools,
            stats,
            conf: path,
        }
    }

    pub fn conn(&self) -> Conn {
        Conn::connect(self.pools[0])
    }
}

/// A running nutcracker on the given config (its listen ports must be concrete).
pub struct Nutcracker {
    pub proc: Proc,
}

/// nutcracker: CI requires it, a plain `cargo test` prints a visible skip.
pub fn nutcracker_bin() -> Option<PathBuf> {
    shoal_test_support::peer("nutcracker", "nutcracker")
}

impl Nutcracker {
    /// Starts nutcracker, or returns `None` (after a visible skip) when it is not
    /// installed and the run does not require peers.
    pub fn start(conf: &str, ports: &[u16]) -> Option<Nutcracker> {
        Self::try_start(conf, ports).map(|r| r.unwrap_or_else(|e| panic!("{e}")))
    }

    /// [`Nutcracker::start`], but a nutcracker that does not come up (most often: one of
    /// its fixed ports was taken between choosing it and nutcracker binding it, by
    /// another process or a connection's ephemeral port) is an `Err` the caller can
    /// retry with other ports.
    pub fn try_start(conf: &str, ports: &[u16]) -> Option<Result<Nutcracker, String>> {
        let bin = nutcracker_bin()?;
        let path = write_conf(conf);
        let mut cmd = Command::new(bin);
        cmd.arg("-c").arg(&path).args([
            "-s",
            &free_port().to_string(),
            "-a",
            "127.0.0.1",
            "-v",
            "2",
        ]);
        let mut proc = Proc::spawn(cmd);
        // Wait until every listen port accepts.
        let deadline = Instant::now() + Duration::from_secs(10);
        for &p in ports {
            loop {
                if TcpStream::connect(("127.0.0.1", p)).is_ok() {
                    break;
                }
                if Instant::now() >= deadline {
                    let st = proc.child.try_wait();
                    let lines: Vec<String> = proc.lines.try_iter().collect();
                    return Some(Err(format!(
                        "nutcracker did not listen on {p}: {st:?} {lines:#?}"
                    )));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Some(Ok(Nutcracker { proc }))
    }
}

/// A blocking memcached text-protocol connection with timeouts.
pub struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    pub fn connect(addr: SocketAddr) -> Conn {
        let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
        s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        s.set_write_timeout(Some(IO_TIMEOUT)).expect("timeout");
        let _ = s.set_nodelay(true);
        Conn { s, buf: Vec::new() }
    }

    pub fn send(&mut self, data: &[u8]) {
        self.s.write_all(data).expect("write");
    }

    /// The socket, for a test that reads it raw (bytes buffered here are dropped).
    pub fn into_stream(self) -> TcpStream {
        self.s
    }

    fn fill(&mut self) {
        let mut tmp = [0u8; 65536];
        let n = loop {
            match self.s.read(&mut tmp) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => break r.expect("read (timed out?)"),
            }
        };
        assert!(
            n > 0,
            "connection closed; have {:?}",
            String::from_utf8_lossy(&self.buf)
        );
        self.buf.extend_from_slice(&tmp[..n]);
    }

    /// One line without `\r\n`.
    pub fn line(&mut self) -> String {
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let l = String::from_utf8_lossy(&self.buf[..i]).into_owned();
                self.buf.drain(..i + 2);
                return l;
            }
            self.fill();
        }
    }

    /// Exactly `n` bytes plus `\r\n`.
    pub fn data(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n + 2 {
            self.fill();
        }
        let d = self.buf[..n].to_vec();
        self.buf.drain(..n + 2);
        d
    }

    /// Sends `line` and reads one reply line.
    pub fn cmd(&mut self, line: &str) -> String {
        self.send(format!("{line}\r\n").as_bytes());
        self.line()
    }

    pub fn set(&mut self, key: &str, value: &str) -> String {
        self.send(format!("set {key} 0 0 {}\r\n{value}\r\n", value.len()).as_bytes());
        self.line()
    }

    /// Reads a retrieval reply: `(key, value)` pairs until `END`, or `Err(line)` for an
    /// error line.
    pub fn values(&mut self) -> Result<Vec<(String, String)>, String> {
        let mut out = Vec::new();
        loop {
            let l = self.line();
            if l == "END" {
                return Ok(out);
            }
            let toks: Vec<&str> = l.split(' ').collect();
            if toks.first() != Some(&"VALUE") || toks.len() < 4 {
                return Err(l);
            }
            let n: usize = toks[3].parse().expect("length");
            let key = toks[1].to_string();
            let d = self.data(n);
            out.push((key, String::from_utf8_lossy(&d).into_owned()));
        }
    }

    pub fn get(&mut self, keys: &[&str]) -> Result<Vec<(String, String)>, String> {
        self.send(format!("get {}\r\n", keys.join(" ")).as_bytes());
        self.values()
    }
}

/// The keys (of `keys`) each backend holds, asked directly with one multi-get each.
pub fn holders(backends: &[Shoald], keys: &[String]) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new(); keys.len()];
    for (b, backend) in backends.iter().enumerate() {
        let mut c = backend.conn();
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        for chunk in refs.chunks(100) {
            let got = c.get(chunk).expect("backend get");
            for (k, _) in got {
                if let Some(i) = keys.iter().position(|x| *x == k) {
                    out[i].push(b);
                }
            }
        }
    }
    out
}

/// `flush_all` on every backend.
pub fn flush(backends: &[Shoald]) {
    for b in backends {
        assert_eq!(b.conn().cmd("flush_all"), "OK");
    }
}

/// Sends `request` to a stats port and reads the whole answer (the port closes after it).
pub fn stats_port(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("stats");
    s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    s.write_all(request).expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read stats");
    out
}

/// Sends `reload` to `proxy`'s stats port; the answer.
pub fn reload(proxy: &Proxy) -> String {
    stats_port(proxy.stats, b"reload\r\n")
}

/// Sets every key through `addr`, pipelined, and checks each reply is `STORED`.
pub fn set_all(addr: SocketAddr, keys: &[String]) {
    set_over(&mut Conn::connect(addr), keys);
}

/// Sets every key over the open connection `c`, pipelined, and checks each reply is
/// `STORED`.
pub fn set_over(c: &mut Conn, keys: &[String]) {
    for chunk in keys.chunks(50) {
        let mut req = Vec::new();
        for k in chunk {
            req.extend_from_slice(format!("set {k} 0 0 1\r\nv\r\n").as_bytes());
        }
        c.send(&req);
        for k in chunk {
            assert_eq!(c.line(), "STORED", "set {k}");
        }
    }
}

/// The vectors directory: `SHOAL_VECTORS_DIR`, or the copy vendored in shoal-ring.
pub fn vectors_dir() -> PathBuf {
    if let Ok(d) = std::env::var("SHOAL_VECTORS_DIR") {
        return PathBuf::from(d);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shoal-ring/tests/data")
}

/// A backend that answers every read with `reply` (or never answers when `None`).
pub fn fake_backend(reply: Option<&'static [u8]>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = s.set_read_timeout(Some(Duration::from_secs(60)));
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    if let Some(r) = reply {
                        if s.write_all(r).is_err() {
                            break;
                        }
                    }
                }
            });
        }
    });
    addr
}

/// A backend that answers the first read of each connection with `first` and then reads
/// (and ignores) everything else without answering: a server that stalls mid-reply when
/// `first` is the start of a reply.
pub fn stalling_backend(first: Vec<u8>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    let first = std::sync::Arc::new(first);
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let first = first.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = s.set_read_timeout(Some(Duration::from_secs(60)));
                if !matches!(s.read(&mut buf), Ok(n) if n > 0) || s.write_all(&first).is_err() {
                    return;
                }
                while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
    addr
}

/// A one-pool (`alpha`) twemproxy config over `servers` (weight 1 each), md5 ketama, with
/// `extra` pool directives (each line indented two spaces).
pub fn conf(servers: &[String], extra: &str) -> String {
    let mut s = format!(
        "alpha:\n  listen: 127.0.0.1:0\n  hash: md5\n  distribution: ketama\n{extra}  servers:\n"
    );
    for sv in servers {
        s.push_str(&format!("   - {sv}:1\n"));
    }
    s
}

/// The index (into `addrs`) twemproxy's ketama (md5) picks for `key`, given ejected servers.
pub fn expected(addrs: &[String], ejected: &[usize], key: &str) -> usize {
    use shoal_ring::{Distribution, Ring, RingConfig, Server};
    let servers: Vec<Server> = addrs
        .iter()
        .map(|a| {
            let (h, p) = a.rsplit_once(':').expect("host:port");
            Server::new(h, p.parse().expect("port"))
        })
        .collect();
    let config =
        RingConfig::new(Distribution::TwemproxyKetama).with_hash(shoal_ring::HashAlgorithm::Md5);
    let mut ring = Ring::new(config, servers).expect("ring");
    for &e in ejected {
        ring = ring.with_ejected(e).expect("eject");
    }
    ring.locate(key.as_bytes()).expect("locate")
}

pub fn stats_json(proxy: &Proxy) -> serde_json::Value {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(proxy.stats).expect("stats");
    s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    let mut body = String::new();
    s.read_to_string(&mut body).expect("stats body");
    serde_json::from_str(&body).expect("stats json")
}

/// Keys (of `k:0..`) whose home among `addrs` is `index`.
pub fn keys_on(addrs: &[String], index: usize, n: usize) -> Vec<String> {
    (0..10_000)
        .map(|i| format!("k:{i}"))
        .filter(|k| expected(addrs, &[], k) == index)
        .take(n)
        .collect()
}

/// `addrs` in twemproxy's server order (sorted by name), which ring indexes refer to.
pub fn sorted_addrs(addrs: &[String]) -> Vec<String> {
    let servers: Vec<shoal_ring::Server> = addrs
        .iter()
        .map(|a| {
            let (h, p) = a.rsplit_once(':').expect("host:port");
            shoal_ring::Server::new(h, p.parse().expect("port"))
        })
        .collect();
    shoal_ring::twemproxy::sorted_servers(&servers)
        .iter()
        .map(|s| s.host_port())
        .collect()
}
