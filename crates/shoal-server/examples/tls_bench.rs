//! The cost of TLS: shoald plain vs shoald with `-Z`, same load, ops/s and their ratio.
//!
//! Starts shoald itself (default: the `shoald` next to this example's directory, i.e.
//! `target/release/shoald` for `cargo run --release --example tls_bench`), with a
//! self-signed certificate made at start-up (rcgen), on ephemeral loopback ports. Each run
//! prefills the keys, then drives `--conns` connections (one client thread each) of text
//! `get`/`set` (90/10, `--value-size` bytes, one request in flight per connection) for
//! `--secs` seconds. Plain and TLS runs alternate `--runs` times; medians are reported.
//!
//! ```text
//! cargo run --release -p shoal-server --example tls_bench -- --conns 16 --secs 5 --runs 3
//! ```

use rustls::pki_types::{CertificateDer, ServerName};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const KEYS: usize = 1000;
const IO_TIMEOUT: Duration = Duration::from_secs(10);

struct Options {
    shoald: PathBuf,
    conns: usize,
    secs: u64,
    runs: usize,
    value_size: usize,
    server_threads: usize,
}

fn options() -> Options {
    let mut o = Options {
        shoald: std::env::current_exe()
            .ok()
            .and_then(|p| {
                p.parent()
                    .and_then(|d| d.parent())
                    .map(|d| d.join("shoald"))
            })
            .unwrap_or_else(|| PathBuf::from("target/release/shoald")),
        conns: 16,
        secs: 5,
        runs: 3,
        value_size: 100,
        server_threads: 2,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let value = args.get(i + 1).cloned().unwrap_or_default();
        let num = || value.parse::<usize>().expect("numeric option value");
        match args[i].as_str() {
            "--shoald" => o.shoald = PathBuf::from(&value),
            "--conns" => o.conns = num(),
            "--secs" => o.secs = num() as u64,
            "--runs" => o.runs = num(),
            "--value-size" => o.value_size = num(),
            "--server-threads" => o.server_threads = num(),
            other => panic!("unknown option {other}"),
        }
        i += 2;
    }
    assert!(
        o.runs > 0 && o.conns > 0 && o.secs > 0,
        "runs, conns and secs must be > 0"
    );
    o
}

/// A running shoald, killed when dropped.
struct Shoald(Child, SocketAddr);

impl Drop for Shoald {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(o: &Options, extra: &[String]) -> Shoald {
    let threads = o.server_threads.to_string();
    let mut child = Command::new(&o.shoald)
        .args([
            "-p",
            "-1",
            "-l",
            "127.0.0.1",
            "-v",
            "-m",
            "256",
            "-t",
            &threads,
        ])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", o.shoald.display()));
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if !sent {
                if let Some(rest) = line.split("listening on ").nth(1) {
                    let _ = tx.send(rest.trim().to_string());
                    sent = true;
                }
            }
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("shoald did not report its address");
    Shoald(child, addr.parse().expect("address"))
}

trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

fn connect(
    addr: SocketAddr,
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> BufReader<Box<dyn Stream>> {
    let tcp = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
    tcp.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    tcp.set_write_timeout(Some(IO_TIMEOUT)).expect("timeout");
    tcp.set_nodelay(true).expect("nodelay");
    let stream: Box<dyn Stream> = match tls {
        None => Box::new(tcp),
        Some(config) => {
            let name = ServerName::try_from("localhost").expect("name");
            let session = rustls::ClientConnection::new(config.clone(), name).expect("tls client");
            Box::new(rustls::StreamOwned::new(session, tcp))
        }
    };
    BufReader::with_capacity(64 * 1024, stream)
}

fn set(c: &mut BufReader<Box<dyn Stream>>, key: &str, value: &[u8], line: &mut String) {
    let mut req = format!("set {key} 0 0 {}\r\n", value.len()).into_bytes();
    req.extend_from_slice(value);
    req.extend_from_slice(b"\r\n");
    c.get_mut().write_all(&req).expect("write");
    line.clear();
    c.read_line(line).expect("read");
    assert_eq!(line, "STORED\r\n");
}

fn get(c: &mut BufReader<Box<dyn Stream>>, key: &str, line: &mut String, buf: &mut Vec<u8>) {
    c.get_mut()
        .write_all(format!("get {key}\r\n").as_bytes())
        .expect("write");
    line.clear();
    c.read_line(line).expect("read");
    if line.starts_with("VALUE ") {
        let len: usize = line
            .trim_end()
            .rsplit(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .expect("value length");
        buf.resize(len + 2, 0);
        c.read_exact(buf).expect("value");
        line.clear();
        c.read_line(line).expect("read");
    }
    assert_eq!(line, "END\r\n", "unexpected reply");
}

/// One timed run: ops/s over all connections.
fn run(o: &Options, addr: SocketAddr, tls: Option<Arc<rustls::ClientConfig>>) -> f64 {
    let value = vec![b'v'; o.value_size];
    {
        let mut c = connect(addr, tls.as_ref());
        let mut line = String::new();
        for k in 0..KEYS {
            set(&mut c, &format!("key:{k}"), &value, &mut line);
        }
    }
    let barrier = Arc::new(std::sync::Barrier::new(o.conns + 1));
    let secs = o.secs;
    let handles: Vec<_> = (0..o.conns)
        .map(|t| {
            let tls = tls.clone();
            let value = value.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let mut c = connect(addr, tls.as_ref());
                let (mut line, mut buf) = (String::new(), Vec::new());
                // Finish the handshake before the clock starts.
                get(&mut c, "key:0", &mut line, &mut buf);
                barrier.wait();
                let deadline = Instant::now() + Duration::from_secs(secs);
                let mut ops = 0u64;
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (t as u64);
                while Instant::now() < deadline {
                    for _ in 0..64 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let key = format!("key:{}", x % KEYS as u64);
                        if x % 100 < 10 {
                            set(&mut c, &key, &value, &mut line);
                        } else {
                            get(&mut c, &key, &mut line, &mut buf);
                        }
                        ops += 1;
                    }
                }
                ops
            })
        })
        .collect();
    barrier.wait();
    let started = Instant::now();
    let total: u64 = handles.into_iter().map(|h| h.join().expect("client")).sum();
    total as f64 / started.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let o = options();
    let dir = std::env::temp_dir().join(format!("shoal-tls-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_path, cert.cert.pem()).expect("write cert");
    std::fs::write(&key_path, cert.key_pair.serialize_pem()).expect("write key");
    let root: CertificateDer<'static> = cert.cert.der().clone();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(root).expect("root");
    let client = Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth(),
    );
    let tls_args = vec![
        "-Z".to_string(),
        "--tls-cert".to_string(),
        cert_path.display().to_string(),
        "--tls-key".to_string(),
        key_path.display().to_string(),
    ];
    println!(
        "shoald {} -t {} -m 256; {} connections, {} s per run, {} B values, 90% get / 10% set",
        o.shoald.display(),
        o.server_threads,
        o.conns,
        o.secs,
        o.value_size
    );
    let (mut plain, mut tls) = (Vec::new(), Vec::new());
    for i in 0..o.runs {
        let s = start(&o, &[]);
        let p = run(&o, s.1, None);
        drop(s);
        let s = start(&o, &tls_args);
        let t = run(&o, s.1, Some(client.clone()));
        drop(s);
        println!("run {}: plain {:.0} ops/s, tls {:.0} ops/s", i + 1, p, t);
        plain.push(p);
        tls.push(t);
    }
    let (p, t) = (median(plain), median(tls));
    println!(
        "median: plain {p:.0} ops/s, tls {t:.0} ops/s, tls/plain {:.3}",
        t / p
    );
    let _ = std::fs::remove_dir_all(&dir);
}
