//! Side-by-side queue benchmark: shoal-queued under each fsync policy against
//! redis-server LPUSH/RPOP with `appendfsync always` and `everysec`.
//!
//! For each connection count: set-only, then get-only (the queue topped up first so it never
//! runs dry), then mixed (every connection alternates set and get). All systems run at
//! once; each cell runs on every system in turn, repeated, and the table shows the median,
//! so load from elsewhere on the machine hits every system alike. Closed loop, one request
//! in flight per connection (`--depth` to pipeline), 256-byte messages by default. Reports
//! ops/s, p99 latency, disk bytes per queued message (after set-only) and the bytes left
//! on disk once drained.
//!
//! ```text
//! cargo build --release -p shoal-queued --bins --examples
//! target/release/examples/queue_bench
//! ```

use clap::Parser;
use hdrhistogram::Histogram;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Parser, Debug, Clone)]
struct Opts {
    /// Length of each measured phase.
    #[arg(long, default_value_t = 1000)]
    duration_ms: u64,
    /// Connection counts.
    #[arg(long, value_delimiter = ',', default_value = "1,10,100")]
    conns: Vec<usize>,
    /// Message size in bytes.
    #[arg(long, default_value_t = 256)]
    size: usize,
    /// The queue is topped up to this many messages before each get-only phase.
    #[arg(long, default_value_t = 150_000)]
    fill: usize,
    /// Runs of each cell (systems interleaved); the table shows the median.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// shoal-queued fsync policies to run.
    #[arg(long, value_delimiter = ',', default_value = "never,5,always")]
    fsync: Vec<String>,
    /// redis appendfsync settings to run (empty to skip redis).
    #[arg(long, value_delimiter = ',', default_value = "always,everysec")]
    redis: Vec<String>,
    /// shoal-queued binary (default: next to this example's directory).
    #[arg(long)]
    bin: Option<PathBuf>,
    /// Server worker threads for shoal-queued. One by default: the load generator shares
    /// this machine's cores, redis runs its commands on one thread, and with one hot queue
    /// a second worker mostly contends for that queue's lock.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Requests in flight per connection (1 = strict request/reply, as the seed's tool).
    #[arg(long, default_value_t = 1)]
    depth: usize,
    /// Client threads (the load generator shares the machine with the server).
    #[arg(long, default_value_t = 1)]
    client_threads: usize,
    /// Directory for data (a temporary directory under it is used and removed).
    #[arg(long, default_value = "/tmp")]
    dir: PathBuf,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Proto {
    Memcache,
    Redis,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Work {
    Set,
    Get,
    Mixed,
}

struct Server {
    child: Child,
    addr: SocketAddr,
    data: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

fn start_shoal(bin: &Path, data: &Path, fsync: &str, threads: usize) -> Server {
    let mut child = Command::new(bin)
        .args([
            "-p",
            "0",
            "-v",
            "--fsync",
            fsync,
            "-t",
            &threads.to_string(),
            "-d",
        ])
        .arg(data)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn shoal-queued");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let addr = loop {
        let line = lines.next().expect("listening line").expect("stderr line");
        if let Some(rest) = line.split("listening on ").nth(1) {
            break rest
                .split_whitespace()
                .next()
                .and_then(|a| a.parse().ok())
                .expect("address");
        }
    };
    std::thread::spawn(move || for _ in lines {});
    Server {
        child,
        addr,
        data: data.to_path_buf(),
    }
}

fn start_redis(data: &Path, appendfsync: &str) -> Server {
    std::fs::create_dir_all(data).expect("redis dir");
    let port = free_port();
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            appendfsync,
            "--dir",
        ])
        .arg(data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn redis-server (apt-get install -y redis-server)");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < deadline, "redis did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Server {
        child,
        addr,
        data: data.to_path_buf(),
    }
}

fn dir_bytes(p: &Path) -> u64 {
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let path = e.path();
            if path.is_dir() {
                n += dir_bytes(&path);
            } else if let Ok(m) = e.metadata() {
                n += m.len();
            }
        }
    }
    n
}

/// One client connection speaking either protocol.
struct Conn {
    s: TcpStream,
    proto: Proto,
    buf: Vec<u8>,
    set_req: Vec<u8>,
    get_req: Vec<u8>,
}

impl Conn {
    async fn new(addr: SocketAddr, proto: Proto, size: usize) -> Conn {
        let s = TcpStream::connect(addr).await.expect("connect");
        s.set_nodelay(true).expect("nodelay");
        let payload = vec![b'q'; size];
        let (mut set_req, get_req) = match proto {
            Proto::Memcache => (
                format!("set bench 0 0 {size}\r\n").into_bytes(),
                b"get bench\r\n".to_vec(),
            ),
            Proto::Redis => (
                format!("*3\r\n$5\r\nLPUSH\r\n$5\r\nbench\r\n${size}\r\n").into_bytes(),
                b"*2\r\n$4\r\nRPOP\r\n$5\r\nbench\r\n".to_vec(),
            ),
        };
        set_req.extend_from_slice(&payload);
        set_req.extend_from_slice(b"\r\n");
        Conn {
            s,
            proto,
            buf: Vec::with_capacity(4096),
            set_req,
            get_req,
        }
    }

    async fn read_more(&mut self) {
        let mut chunk = [0u8; 16384];
        let n = self.s.read(&mut chunk).await.expect("read");
        assert!(n > 0, "server closed the connection");
        self.buf.extend_from_slice(&chunk[..n]);
    }

    /// Length of one complete reply at the start of the buffer, and whether it was a hit.
    fn reply_len(&self) -> Option<(usize, bool)> {
        let b = &self.buf;
        let nl = b.windows(2).position(|w| w == b"\r\n")? + 2;
        let line = &b[..nl - 2];
        match self.proto {
            Proto::Memcache => {
                if line.starts_with(b"VALUE ") {
                    let n: usize = std::str::from_utf8(line.rsplit(|&c| c == b' ').next()?)
                        .ok()?
                        .parse()
                        .ok()?;
                    let total = nl + n + 2 + 5;
                    (b.len() >= total).then_some((total, true))
                } else {
                    assert!(
                        line == b"END" || line == b"STORED",
                        "unexpected reply {:?}",
                        String::from_utf8_lossy(line)
                    );
                    Some((nl, false))
                }
            }
            Proto::Redis => match line.first() {
                Some(b'$') => {
                    let n: i64 = std::str::from_utf8(&line[1..]).ok()?.parse().ok()?;
                    if n < 0 {
                        return Some((nl, false));
                    }
                    let total = nl + n as usize + 2;
                    (b.len() >= total).then_some((total, true))
                }
                Some(b':') => Some((nl, false)),
                _ => panic!("unexpected redis reply {:?}", String::from_utf8_lossy(line)),
            },
        }
    }

    async fn reply(&mut self) -> bool {
        loop {
            if let Some((n, hit)) = self.reply_len() {
                self.buf.drain(..n);
                return hit;
            }
            self.read_more().await;
        }
    }

    /// Sends `depth` requests in one write (alternating set/get for mixed, starting with
    /// a set when `i` is even) and reads their replies. Returns the number of hits.
    async fn ops(&mut self, work: Work, i: u64, depth: usize, out: &mut Vec<u8>) -> u64 {
        out.clear();
        for k in 0..depth as u64 {
            let set = match work {
                Work::Set => true,
                Work::Get => false,
                Work::Mixed => (i + k) % 2 == 0,
            };
            out.extend_from_slice(if set { &self.set_req } else { &self.get_req });
        }
        self.s.write_all(out).await.expect("write");
        let mut hits = 0;
        for _ in 0..depth {
            if self.reply().await {
                hits += 1;
            }
        }
        hits
    }

    /// Sends `n` sets pipelined in batches.
    async fn fill(&mut self, n: usize) {
        let mut left = n;
        while left > 0 {
            let batch = left.min(500);
            let mut out = Vec::with_capacity(batch * self.set_req.len());
            for _ in 0..batch {
                out.extend_from_slice(&self.set_req);
            }
            self.s.write_all(&out).await.expect("write");
            for _ in 0..batch {
                self.reply().await;
            }
            left -= batch;
        }
    }
}

struct CellResult {
    ops: u64,
    hits: u64,
    secs: f64,
    p99_us: u64,
}

async fn run_cell(
    addr: SocketAddr,
    proto: Proto,
    work: Work,
    conns: usize,
    size: usize,
    dur: Duration,
    depth: usize,
) -> CellResult {
    let mut handles = Vec::new();
    let mut cs = Vec::new();
    for _ in 0..conns {
        cs.push(Conn::new(addr, proto, size).await);
    }
    let start = Instant::now();
    let deadline = start + dur;
    for mut c in cs {
        handles.push(tokio::spawn(async move {
            let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram");
            let (mut ops, mut hits) = (0u64, 0u64);
            let mut buf = Vec::new();
            while Instant::now() < deadline {
                let t = Instant::now();
                hits += c.ops(work, ops, depth, &mut buf).await;
                // With pipelining, every request of a batch waited for the batch.
                let _ = h.record_n(t.elapsed().as_micros().max(1) as u64, depth as u64);
                ops += depth as u64;
            }
            (h, ops, hits)
        }));
    }
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram");
    let (mut ops, mut hits) = (0, 0);
    for h in handles {
        let (hh, o, hi) = h.await.expect("client task");
        hist.add(hh).expect("merge");
        ops += o;
        hits += hi;
    }
    CellResult {
        ops,
        hits,
        secs: start.elapsed().as_secs_f64(),
        p99_us: hist.value_at_quantile(0.99),
    }
}

async fn queue_len(addr: SocketAddr, proto: Proto) -> u64 {
    let mut c = Conn::new(addr, proto, 1).await;
    let req: &[u8] = match proto {
        Proto::Memcache => b"stats\r\n",
        Proto::Redis => b"*2\r\n$4\r\nLLEN\r\n$5\r\nbench\r\n",
    };
    c.s.write_all(req).await.expect("write");
    loop {
        let text = String::from_utf8_lossy(&c.buf).into_owned();
        match proto {
            Proto::Memcache if text.ends_with("END\r\n") => {
                return text
                    .lines()
                    .find_map(|l| l.strip_prefix("STAT queue_bench_items "))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
            }
            Proto::Redis if text.ends_with("\r\n") => {
                return text.trim().trim_start_matches(':').parse().unwrap_or(0);
            }
            _ => c.read_more().await,
        }
    }
}

async fn clear(addr: SocketAddr, proto: Proto) {
    let mut c = Conn::new(addr, proto, 1).await;
    let req: &[u8] = match proto {
        Proto::Memcache => b"flush bench\r\n",
        Proto::Redis => b"*2\r\n$3\r\nDEL\r\n$5\r\nbench\r\n",
    };
    c.s.write_all(req).await.expect("write");
    c.read_more().await;
}

async fn fill(addr: SocketAddr, proto: Proto, size: usize, n: usize) {
    let per = n / 4;
    let mut hs = Vec::new();
    for _ in 0..4 {
        hs.push(tokio::spawn(async move {
            Conn::new(addr, proto, size).await.fill(per).await;
        }));
    }
    for h in hs {
        h.await.expect("fill");
    }
}

/// One system under test.
struct System {
    name: &'static str,
    durability: String,
    server: Server,
    proto: Proto,
}

/// Median ops/s and median p99 over repetitions, with the worst hit rate of a get phase.
fn summary(work: Work, runs: &[CellResult]) -> String {
    let mut ops: Vec<f64> = runs.iter().map(|r| r.ops as f64 / r.secs).collect();
    let mut p99: Vec<u64> = runs.iter().map(|r| r.p99_us).collect();
    ops.sort_by(f64::total_cmp);
    p99.sort_unstable();
    let (ops, p99) = (ops[ops.len() / 2], p99[p99.len() / 2]);
    // A get phase that ran dry would measure misses, not dequeues: show the hit rate.
    let hit = runs
        .iter()
        .map(|r| {
            let gets = match work {
                Work::Set => 0,
                Work::Get => r.ops,
                Work::Mixed => r.ops / 2,
            };
            if gets == 0 {
                1.0
            } else {
                r.hits as f64 / gets as f64
            }
        })
        .fold(1.0, f64::min);
    let miss = if hit < 0.99 {
        format!(" ({:.0}% hits)", 100.0 * hit)
    } else {
        String::new()
    };
    format!("{ops:.0}{miss} | {p99}")
}

/// Every phase, for each connection count, with the systems interleaved and each cell
/// repeated, so that noise from other work on the machine hits all systems alike.
async fn bench_all(o: &Opts, systems: &[System]) -> Vec<String> {
    let dur = Duration::from_millis(o.duration_ms);
    let mut rows = Vec::new();
    for &conns in &o.conns {
        let n = systems.len();
        let mut set: Vec<Vec<CellResult>> = (0..n).map(|_| Vec::new()).collect();
        let mut get: Vec<Vec<CellResult>> = (0..n).map(|_| Vec::new()).collect();
        let mut mixed: Vec<Vec<CellResult>> = (0..n).map(|_| Vec::new()).collect();
        let mut per_msg = vec![String::from("-"); n];
        for sys in systems {
            clear(sys.server.addr, sys.proto).await;
        }
        for rep in 0..o.repeat {
            for (i, sys) in systems.iter().enumerate() {
                let (addr, proto) = (sys.server.addr, sys.proto);
                set[i].push(run_cell(addr, proto, Work::Set, conns, o.size, dur, o.depth).await);
                if rep == 0 {
                    let items = queue_len(addr, proto).await;
                    if items > 0 {
                        let disk = dir_bytes(&sys.server.data);
                        per_msg[i] = format!("{:.0}", disk as f64 / items as f64);
                    }
                }
            }
        }
        for _ in 0..o.repeat {
            for (i, sys) in systems.iter().enumerate() {
                let (addr, proto) = (sys.server.addr, sys.proto);
                let have = queue_len(addr, proto).await as usize;
                if have < o.fill {
                    fill(addr, proto, o.size, o.fill - have).await;
                }
                // Write the fill's dirty pages back first, so the get phase's fsyncs do
                // not pay for the fill's writeback (the same for every system).
                let _ = Command::new("sync").status();
                get[i].push(run_cell(addr, proto, Work::Get, conns, o.size, dur, o.depth).await);
            }
        }
        for sys in systems {
            clear(sys.server.addr, sys.proto).await;
        }
        for _ in 0..o.repeat {
            for (i, sys) in systems.iter().enumerate() {
                let (addr, proto) = (sys.server.addr, sys.proto);
                mixed[i]
                    .push(run_cell(addr, proto, Work::Mixed, conns, o.size, dur, o.depth).await);
            }
        }
        for (i, sys) in systems.iter().enumerate() {
            let row = format!(
                "| {} | {} | {conns} | {} | {} | {} | {} |",
                sys.name,
                sys.durability,
                summary(Work::Set, &set[i]),
                summary(Work::Get, &get[i]),
                summary(Work::Mixed, &mixed[i]),
                per_msg[i]
            );
            println!("{row}");
            rows.push(row);
        }
    }
    rows
}

const HEADER: &str = "| system | durability | conns | set-only ops/s | p99 µs | get-only ops/s | p99 µs | mixed ops/s | p99 µs | disk B/msg |\n|---|---|---|---|---|---|---|---|---|---|";

fn main() {
    let o = Opts::parse();
    let bin = o.bin.clone().unwrap_or_else(|| {
        let exe = std::env::current_exe().expect("current exe");
        exe.parent()
            .and_then(Path::parent)
            .map(|p| p.join("shoal-queued"))
            .expect("binary path")
    });
    let rt = if o.client_threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(o.client_threads)
            .enable_all()
            .build()
    }
    .expect("runtime");
    let root = tempfile::Builder::new()
        .prefix("queue-bench")
        .tempdir_in(&o.dir)
        .expect("tempdir");
    let mut systems = Vec::new();
    for f in o.fsync.iter().filter(|f| !f.is_empty()) {
        let data = root.path().join(format!("shoal-{f}"));
        systems.push(System {
            name: "shoal-queued",
            durability: match f.as_str() {
                "never" | "always" => format!("fsync {f}"),
                ms => format!("fsync every {ms} ms"),
            },
            server: start_shoal(&bin, &data, f, o.threads),
            proto: Proto::Memcache,
        });
    }
    for a in o.redis.iter().filter(|a| !a.is_empty()) {
        let data = root.path().join(format!("redis-{a}"));
        systems.push(System {
            name: "redis 7 LPUSH/RPOP",
            durability: format!("appendfsync {a}"),
            server: start_redis(&data, a),
            proto: Proto::Redis,
        });
    }
    println!(
        "{}-byte messages, {} ms per phase, median of {} interleaved runs, closed loop ({} request(s) in flight per connection, {} client thread(s)), shoal-queued -t {}",
        o.size, o.duration_ms, o.repeat, o.depth, o.client_threads, o.threads
    );
    println!();
    println!("{HEADER}");
    let rows = rt.block_on(bench_all(&o, &systems));
    let drained: Vec<String> = rt.block_on(async {
        for sys in &systems {
            clear(sys.server.addr, sys.proto).await;
        }
        // Give the interval fsync and redis' background rewrite a moment, then measure
        // what an empty queue keeps on disk.
        tokio::time::sleep(Duration::from_millis(500)).await;
        systems
            .iter()
            .map(|s| {
                format!(
                    "| {} | {} | {} |",
                    s.name,
                    s.durability,
                    dir_bytes(&s.server.data)
                )
            })
            .collect()
    });
    // Again, in one piece, for pasting.
    println!();
    println!("{HEADER}");
    for r in &rows {
        println!("{r}");
    }
    println!();
    println!("| system | durability | bytes on disk with the queue drained |");
    println!("|---|---|---|");
    for d in &drained {
        println!("{d}");
    }
}
