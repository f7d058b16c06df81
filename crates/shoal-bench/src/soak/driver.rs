//! The load: churners that send one request at a time and reconnect, and slow readers
//! that ask for a large multi-get and read it a few KB at a time, on single-threaded
//! runtimes, counting what they get.

use crate::load::{connect, fill_buf};
use crate::rng::Rng;
use crate::text::{self, Op, Reply};
use crate::workload::ValueSize;
use crate::BenchError;
use serde::Serialize;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// Every socket operation waits at most this long.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Wait before reconnecting after a failed connect (the server may be at its limit).
const RETRY: Duration = Duration::from_millis(100);
/// A churner closes its connection after 1 to this many requests.
pub(super) const MAX_REQUESTS_PER_CONN: u64 = 200;
/// Share of churner connections closed with their last request unanswered.
pub(super) const ABANDON: f64 = 0.05;
/// A slow reader's receive buffer (the kernel doubles it).
pub(super) const SLOW_RCVBUF: u32 = 16 * 1024;
/// A slow reader reads once per tick.
const SLOW_TICK: Duration = Duration::from_millis(100);
/// Chance per tick that a slow reader stops reading for 2-5 s.
pub(super) const SLOW_PAUSE: f64 = 0.02;
/// A slow reader hangs up 5 s + up to this many ms after sending, done or not.
const SLOW_LIFE_MS: (u64, u64) = (5_000, 25_000);

/// What the clients did and what went wrong.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct SoakCounts {
    /// Gets answered (churners).
    pub gets: u64,
    /// Sets answered.
    pub sets: u64,
    /// Gets that returned a value.
    pub hits: u64,
    /// Gets that returned nothing.
    pub misses: u64,
    /// Slow readers' multi-gets read to the end.
    pub multigets_done: u64,
    /// Values in those multi-gets.
    pub multiget_values: u64,
    /// Slow readers that hung up before their reply was complete.
    pub multigets_abandoned: u64,
    /// Bytes slow readers read.
    pub slow_bytes_read: u64,
    /// Connections opened.
    pub connects: u64,
    /// `ERROR`, `CLIENT_ERROR` and `SERVER_ERROR` replies.
    pub error_replies: u64,
    /// Connections that failed, were refused, or were closed by the server.
    pub conn_errors: u64,
    /// Replies that were not the memcache protocol.
    pub protocol_errors: u64,
    /// Socket operations that waited 10 s.
    pub timeouts: u64,
}

impl SoakCounts {
    /// Requests answered: gets, sets and completed multi-gets.
    pub fn ops(&self) -> u64 {
        self.gets + self.sets + self.multigets_done
    }

    /// Every kind of error.
    pub fn errors(&self) -> u64 {
        self.error_replies + self.conn_errors + self.protocol_errors + self.timeouts
    }
}

/// Counters shared by every client task.
#[derive(Default)]
pub(super) struct Counters {
    gets: AtomicU64,
    sets: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    multigets_done: AtomicU64,
    multiget_values: AtomicU64,
    multigets_abandoned: AtomicU64,
    slow_bytes_read: AtomicU64,
    connects: AtomicU64,
    error_replies: AtomicU64,
    conn_errors: AtomicU64,
    protocol_errors: AtomicU64,
    timeouts: AtomicU64,
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

impl Counters {
    fn record(&self, op: Op, reply: Reply) {
        bump(
            match op {
                Op::Get => &self.gets,
                Op::Set => &self.sets,
            },
            1,
        );
        match reply {
            Reply::Hit => bump(&self.hits, 1),
            Reply::Miss => bump(&self.misses, 1),
            Reply::Error => bump(&self.error_replies, 1),
            Reply::Stored | Reply::NotStored => {}
        }
    }

    fn fault(&self, f: Fault) {
        bump(
            match f {
                Fault::Timeout => &self.timeouts,
                Fault::Broken => &self.conn_errors,
                Fault::Protocol => &self.protocol_errors,
            },
            1,
        );
    }

    /// Requests answered so far.
    pub(super) fn ops(&self) -> u64 {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        g(&self.gets) + g(&self.sets) + g(&self.multigets_done)
    }

    /// The counts now.
    pub(super) fn snapshot(&self) -> SoakCounts {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        SoakCounts {
            gets: g(&self.gets),
            sets: g(&self.sets),
            hits: g(&self.hits),
            misses: g(&self.misses),
            multigets_done: g(&self.multigets_done),
            multiget_values: g(&self.multiget_values),
            multigets_abandoned: g(&self.multigets_abandoned),
            slow_bytes_read: g(&self.slow_bytes_read),
            connects: g(&self.connects),
            error_replies: g(&self.error_replies),
            conn_errors: g(&self.conn_errors),
            protocol_errors: g(&self.protocol_errors),
            timeouts: g(&self.timeouts),
        }
    }
}

/// Why a connection ended early.
#[derive(Clone, Copy, Debug)]
enum Fault {
    Timeout,
    Broken,
    Protocol,
}

/// What every client task reads.
pub(super) struct Shared {
    pub(super) addr: SocketAddr,
    pub(super) prefix: &'static [u8],
    pub(super) width: usize,
    pub(super) keys: u64,
    pub(super) sizes: ValueSize,
    pub(super) set_ratio: f64,
    pub(super) multiget_keys: usize,
    pub(super) slow_read_bytes: usize,
    /// The bytes every set's value is cut from.
    pub(super) value: Vec<u8>,
    /// Set when the run ends early (the server died).
    pub(super) stop: AtomicBool,
    pub(super) c: Counters,
}

impl Shared {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// One client thread: a single-threaded runtime driving its tasks until `end`.
pub(super) fn client_thread(
    sh: Arc<Shared>,
    tasks: Vec<(bool, u64)>,
    end: Instant,
) -> Result<(), BenchError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| BenchError::io("client runtime", e))?;
    rt.block_on(async move {
        let end = tokio::time::Instant::from_std(end);
        let mut set = tokio::task::JoinSet::new();
        for (slow, seed) in tasks {
            let sh = sh.clone();
            // The deadline drops each task wherever it is: mid-request connections are
            // simply closed, as churn does anyway.
            set.spawn(async move {
                if slow {
                    let _ = tokio::time::timeout_at(end, slow_reader(sh, seed)).await;
                } else {
                    let _ = tokio::time::timeout_at(end, churner(sh, seed)).await;
                }
            });
        }
        while let Some(r) = set.join_next().await {
            r.map_err(|e| BenchError::Config(format!("client task: {e}")))?;
        }
        Ok(())
    })
}

/// Runs `f` for at most [`IO_TIMEOUT`].
async fn within<T>(f: impl Future<Output = T>) -> Result<T, Fault> {
    tokio::time::timeout(IO_TIMEOUT, f)
        .await
        .map_err(|_| Fault::Timeout)
}

/// Connect, send 1-200 requests one at a time, close; again until stopped.
async fn churner(sh: Arc<Shared>, seed: u64) {
    let mut rng = Rng::new(seed);
    let mut wbuf = Vec::with_capacity(64 * 1024);
    let mut rbuf = Vec::with_capacity(64 * 1024);
    while !sh.stopped() {
        let mut stream = match connect(sh.addr).await {
            Ok(s) => s,
            Err(_) => {
                sh.c.fault(Fault::Broken);
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        bump(&sh.c.connects, 1);
        let requests = 1 + rng.below(MAX_REQUESTS_PER_CONN);
        let abandon = rng.unit() < ABANDON;
        let r = session(
            &sh,
            &mut stream,
            &mut rng,
            requests,
            abandon,
            &mut wbuf,
            &mut rbuf,
        );
        if let Err(f) = r.await {
            sh.c.fault(f);
        }
        rbuf.clear();
    }
}

/// One churner connection's requests; with `abandon`, the last one's reply is not read.
async fn session(
    sh: &Shared,
    stream: &mut TcpStream,
    rng: &mut Rng,
    requests: u64,
    abandon: bool,
    wbuf: &mut Vec<u8>,
    rbuf: &mut Vec<u8>,
) -> Result<(), Fault> {
    for i in 0..requests {
        if sh.stopped() {
            return Ok(());
        }
        let k = rng.below(sh.keys);
        wbuf.clear();
        let op = if rng.unit() < sh.set_ratio {
            let len = sh.sizes.next_log_uniform(rng);
            text::encode_set(wbuf, sh.prefix, k, sh.width, &sh.value[..len]);
            Op::Set
        } else {
            text::encode_get(wbuf, sh.prefix, k, sh.width);
            Op::Get
        };
        within(stream.write_all(wbuf))
            .await?
            .map_err(|_| Fault::Broken)?;
        if abandon && i + 1 == requests {
            return Ok(());
        }
        let reply = loop {
            if let Some((r, used)) = text::parse_reply(rbuf, op).map_err(|_| Fault::Protocol)? {
                rbuf.drain(..used);
                break r;
            }
            within(fill_buf(stream, rbuf, sh.addr))
                .await?
                .map_err(|_| Fault::Broken)?;
        };
        sh.c.record(op, reply);
    }
    Ok(())
}

/// Connects with a small receive buffer, set before connecting so the advertised window
/// is small from the start: what the reader has not read stays in the server.
async fn connect_slow(addr: SocketAddr) -> Result<TcpStream, Fault> {
    let sock = if addr.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .map_err(|_| Fault::Broken)?;
    sock.set_recv_buffer_size(SLOW_RCVBUF)
        .map_err(|_| Fault::Broken)?;
    within(sock.connect(addr)).await?.map_err(|_| Fault::Broken)
}

/// Connect, send a big multi-get, read it slowly, hang up; again until stopped.
async fn slow_reader(sh: Arc<Shared>, seed: u64) {
    let mut rng = Rng::new(seed);
    let mut wbuf = Vec::with_capacity(sh.multiget_keys * 16);
    let mut rbuf = Vec::new();
    let mut chunk = vec![0u8; sh.slow_read_bytes];
    while !sh.stopped() {
        let mut stream = match connect_slow(sh.addr).await {
            Ok(s) => s,
            Err(f) => {
                sh.c.fault(f);
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        bump(&sh.c.connects, 1);
        let r = slow_session(&sh, &mut stream, &mut rng, &mut wbuf, &mut rbuf, &mut chunk);
        if let Err(f) = r.await {
            sh.c.fault(f);
        }
        rbuf.clear();
    }
}

/// One slow reader connection: the multi-get, then a few KB per tick until the reply is
/// complete or the connection's life is over.
async fn slow_session(
    sh: &Shared,
    stream: &mut TcpStream,
    rng: &mut Rng,
    wbuf: &mut Vec<u8>,
    rbuf: &mut Vec<u8>,
    chunk: &mut [u8],
) -> Result<(), Fault> {
    wbuf.clear();
    let keys = (0..sh.multiget_keys).map(|_| rng.below(sh.keys));
    text::encode_multi_get(wbuf, sh.prefix, keys, sh.width);
    within(stream.write_all(wbuf))
        .await?
        .map_err(|_| Fault::Broken)?;
    let life = Instant::now() + Duration::from_millis(SLOW_LIFE_MS.0 + rng.below(SLOW_LIFE_MS.1));
    loop {
        if sh.stopped() || Instant::now() >= life {
            bump(&sh.c.multigets_abandoned, 1);
            return Ok(());
        }
        if rng.unit() < SLOW_PAUSE {
            tokio::time::sleep(Duration::from_millis(2000 + rng.below(3000))).await;
            continue;
        }
        let n = within(stream.read(chunk))
            .await?
            .map_err(|_| Fault::Broken)?;
        if n == 0 {
            return Err(Fault::Broken);
        }
        bump(&sh.c.slow_bytes_read, n as u64);
        rbuf.extend_from_slice(&chunk[..n]);
        if let Some((values, _)) = text::parse_multi_get(rbuf).map_err(|_| Fault::Protocol)? {
            bump(&sh.c.multigets_done, 1);
            bump(&sh.c.multiget_values, values);
            return Ok(());
        }
        tokio::time::sleep(SLOW_TICK).await;
    }
}
