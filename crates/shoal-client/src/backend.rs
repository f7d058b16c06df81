//! Backend connections: each server gets `server_connections` long-lived connections,
//! each shared by every client and pipelined. Requests are written in batches; replies
//! are framed ([`crate::frame`]) and handed back in order.
//!
//! A connection that fails (connect error, reset, a reply that is not memcached's, or no
//! reply within the pool's `timeout`) fails every request in flight on it with a
//! [`BackendError`], reports one failure to its [`HealthSink`], and reconnects on the
//! next request. Nothing waits on a dead or hung backend longer than `timeout`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::error::BackendError;
use crate::frame::{frame, Framed, ReplyKind, BINARY_NOOP_LEN, META_NOOP_LEN};
use crate::health::HealthSink;
use crate::stats::{decr, incr, ServerStats};

/// A backend's answer: the reply bytes exactly as sent (for quiet requests, without the
/// trailing `MN\r\n` or `noop` response), or why there is none.
pub type Reply = Result<Bytes, BackendError>;

/// The receiving end of one forwarded request.
pub type ReplyRx = oneshot::Receiver<Reply>;

/// Requests queued per connection before senders wait.
const QUEUE: usize = 4096;
/// Bytes written per batch before the writer stops taking more requests.
const MAX_BATCH: usize = 256 * 1024;

struct Forward {
    bytes: Vec<u8>,
    kind: ReplyKind,
    reply: Option<oneshot::Sender<Reply>>,
}

struct Waiter {
    kind: ReplyKind,
    reply: Option<oneshot::Sender<Reply>>,
    deadline: Option<Instant>,
    /// When the request was handed to the connection, if its reply is timed.
    sent: Option<Instant>,
    _in_flight: crate::stats::InFlight,
}

/// TLS to a server: the client configuration and the name its certificate must carry.
#[derive(Clone)]
pub struct BackendTls {
    /// The rustls client side (roots, optional client certificate).
    pub connector: tokio_rustls::TlsConnector,
    /// The name the server's certificate is verified for.
    pub server_name: rustls::pki_types::ServerName<'static>,
}

impl std::fmt::Debug for BackendTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BackendTls({:?})", self.server_name)
    }
}

/// How long a TLS handshake with a server may take when the pool has no timeout.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What a connection task needs to know about its server.
struct Target {
    index: usize,
    addr: String,
    timeout: Option<Duration>,
    health: Arc<dyn HealthSink>,
    stats: Arc<ServerStats>,
    tls: Option<BackendTls>,
}

/// One server's connections.
pub struct Backend {
    conns: Vec<mpsc::Sender<Forward>>,
    next: AtomicUsize,
    stats: Arc<ServerStats>,
}

impl Backend {
    /// Starts `connections` connection tasks for the server at `addr` (`host:port`);
    /// they connect lazily, on the first request, unless `preconnect`. Must be called
    /// inside a tokio runtime.
    pub fn start(
        index: usize,
        addr: String,
        connections: usize,
        timeout: Option<Duration>,
        preconnect: bool,
        health: Arc<dyn HealthSink>,
        stats: Arc<ServerStats>,
    ) -> Backend {
        Backend::start_tls(
            index,
            addr,
            connections,
            timeout,
            preconnect,
            health,
            stats,
            None,
        )
    }

    /// [`Backend::start`], with every connection wrapped in TLS when `tls` is given: a
    /// failed handshake (an unverifiable certificate included) counts as a failed
    /// connection, and is logged once until a connection succeeds again.
    #[allow(clippy::too_many_arguments)]
    pub fn start_tls(
        index: usize,
        addr: String,
        connections: usize,
        timeout: Option<Duration>,
        preconnect: bool,
        health: Arc<dyn HealthSink>,
        stats: Arc<ServerStats>,
        tls: Option<BackendTls>,
    ) -> Backend {
        let target = Arc::new(Target {
            index,
            addr,
            timeout,
            health,
            stats: stats.clone(),
            tls,
        });
        let conns = (0..connections.max(1))
            .map(|_| {
                let (tx, rx) = mpsc::channel(QUEUE);
                tokio::spawn(connection(target.clone(), rx, preconnect));
                tx
            })
            .collect();
        Backend {
            conns,
            next: AtomicUsize::new(0),
            stats,
        }
    }

    /// This server's counters.
    pub fn stats(&self) -> &Arc<ServerStats> {
        &self.stats
    }

    /// Forwards `bytes` (one or more complete requests) and returns where the reply will
    /// arrive. For [`ReplyKind::None`] nothing is expected and `None` is returned.
    /// Requests sent through one `Backend` from one task are written in call order.
    pub async fn send(&self, bytes: Vec<u8>, kind: ReplyKind) -> Option<ReplyRx> {
        let i = if self.conns.len() == 1 {
            0
        } else {
            self.next.fetch_add(1, Relaxed) % self.conns.len()
        };
        incr(&self.stats.requests);
        self.stats
            .request_bytes
            .fetch_add(bytes.len() as u64, Relaxed);
        let (tx, rx) = if kind == ReplyKind::None {
            (None, None)
        } else {
            let (tx, rx) = oneshot::channel();
            (Some(tx), Some(rx))
        };
        let fwd = Forward {
            bytes,
            kind,
            reply: tx,
        };
        if let Err(mpsc::error::SendError(f)) = self.conns[i].send(fwd).await {
            fail(f.reply, BackendError::Closed);
        }
        rx
    }

    /// Forwards `bytes` without waiting and without keeping the reply, which is read
    /// (framed as `kind` says) and dropped: for copies of requests nobody answers to
    /// (shadow traffic). Never blocks: when the connection's queue is full (the server is
    /// slow or gone) the request is dropped and `false` returned.
    pub fn try_send(&self, bytes: Vec<u8>, kind: ReplyKind) -> bool {
        let i = if self.conns.len() == 1 {
            0
        } else {
            self.next.fetch_add(1, Relaxed) % self.conns.len()
        };
        let len = bytes.len() as u64;
        let fwd = Forward {
            bytes,
            kind,
            reply: None,
        };
        if self.conns[i].try_send(fwd).is_err() {
            return false;
        }
        incr(&self.stats.requests);
        self.stats.request_bytes.fetch_add(len, Relaxed);
        true
    }
}

fn fail(reply: Option<oneshot::Sender<Reply>>, err: BackendError) {
    if let Some(tx) = reply {
        let _ = tx.send(Err(err));
    }
}

/// A connected server, in plain text or TLS.
enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

async fn connect(target: &Target, warned: &mut bool) -> Option<Stream> {
    let fut = TcpStream::connect(target.addr.as_str());
    let stream = match target.timeout {
        Some(t) => tokio::time::timeout(t, fut).await.ok()?.ok()?,
        None => fut.await.ok()?,
    };
    let _ = stream.set_nodelay(true);
    let Some(tls) = &target.tls else {
        return Some(Stream::Plain(stream));
    };
    let handshake = tls.connector.connect(tls.server_name.clone(), stream);
    let t = target.timeout.unwrap_or(TLS_HANDSHAKE_TIMEOUT);
    match tokio::time::timeout(t, handshake).await {
        Ok(Ok(s)) => {
            *warned = false;
            Some(Stream::Tls(Box::new(s)))
        }
        failed => {
            if !*warned {
                *warned = true;
                let why = match failed {
                    Ok(Err(e)) => e.to_string(),
                    _ => "timed out".to_string(),
                };
                tracing::warn!("TLS handshake with {} failed: {why}", target.addr);
            }
            None
        }
    }
}

/// One connection's life: connect when needed, pipeline, fail cleanly, reconnect.
async fn connection(target: Arc<Target>, mut rx: mpsc::Receiver<Forward>, preconnect: bool) {
    let mut pre = preconnect;
    let mut warned = false;
    loop {
        let first = if pre {
            pre = false;
            None
        } else {
            match rx.recv().await {
                Some(f) => Some(f),
                None => return,
            }
        };
        let Some(stream) = connect(&target, &mut warned).await else {
            incr(&target.stats.server_err);
            // Count (and possibly eject) before failing the requests, so a caller that
            // sees the error already sees the rebuilt ring.
            target.health.failure(target.index);
            if let Some(f) = first {
                fail(f.reply, BackendError::Connect);
            }
            while let Ok(f) = rx.try_recv() {
                fail(f.reply, BackendError::Connect);
            }
            continue;
        };
        incr(&target.stats.server_connections);
        let failed = Arc::new(AtomicBool::new(false));
        match stream {
            Stream::Plain(s) => {
                let (rd, wr) = s.into_split();
                session(&target, rd, wr, &mut rx, first, &failed).await;
            }
            Stream::Tls(s) => {
                let (rd, wr) = tokio::io::split(*s);
                session(&target, rd, wr, &mut rx, first, &failed).await;
            }
        }
        decr(&target.stats.server_connections);
    }
}

/// Runs one connected session until the connection fails or the pool shuts down.
async fn session<R, W>(
    target: &Arc<Target>,
    rd: R,
    mut wr: W,
    rx: &mut mpsc::Receiver<Forward>,
    first: Option<Forward>,
    failed: &Arc<AtomicBool>,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin,
{
    let (ptx, prx) = mpsc::unbounded_channel::<Waiter>();
    let mut reader = tokio::spawn(read_loop(target.clone(), rd, prx, failed.clone()));
    let mut wbuf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut next = first;
    loop {
        let f = match next.take() {
            Some(f) => f,
            None => {
                // The reader's end first: a request waiting while the connection has just
                // failed (a timeout, a reset) stays queued for the next connection, rather
                // than being failed as sent on this dead one.
                tokio::select! {
                    biased;
                    _ = &mut reader => {
                        // The reader failed (and counted the failure); start over.
                        return;
                    }
                    f = rx.recv() => match f {
                        Some(f) => f,
                        None => break,
                    },
                }
            }
        };
        let mut dead = false;
        let push = |f: Forward, wbuf: &mut Vec<u8>, dead: &mut bool| {
            if *dead {
                fail(f.reply, BackendError::Closed);
                return;
            }
            if f.kind != ReplyKind::None {
                // The clock is read only when something needs it: a deadline, or the
                // latency histogram while metrics are served.
                let timed = target.stats.timed.load(Relaxed);
                let sent = (timed || target.timeout.is_some()).then(Instant::now);
                let deadline = target.timeout.zip(sent).map(|(t, sent)| sent + t);
                let sent = sent.filter(|_| timed);
                let w = Waiter {
                    kind: f.kind,
                    reply: f.reply,
                    deadline,
                    sent,
                    _in_flight: crate::stats::InFlight::new(&target.stats),
                };
                if let Err(e) = ptx.send(w) {
                    fail(e.0.reply, BackendError::Closed);
                    *dead = true;
                    return;
                }
            }
            wbuf.extend_from_slice(&f.bytes);
        };
        push(f, &mut wbuf, &mut dead);
        while wbuf.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(f) => push(f, &mut wbuf, &mut dead),
                Err(_) => break,
            }
        }
        if dead {
            break;
        }
        // The flush sends what TLS still holds (a no-op for plain TCP).
        let write = async {
            wr.write_all(&wbuf).await?;
            wr.flush().await
        };
        let ok = match target.timeout {
            Some(t) => matches!(tokio::time::timeout(t, write).await, Ok(Ok(()))),
            None => write.await.is_ok(),
        };
        wbuf.clear();
        if !ok {
            if !failed.swap(true, Relaxed) {
                incr(&target.stats.server_err);
                target.health.failure(target.index);
            }
            break;
        }
    }
    // Dropping the waiters' senders fails every request still in flight.
    drop(ptx);
    reader.abort();
}

async fn read_loop<R: AsyncRead + Unpin>(
    target: Arc<Target>,
    mut rd: R,
    mut prx: mpsc::UnboundedReceiver<Waiter>,
    failed: Arc<AtomicBool>,
) {
    let mut buf = BytesMut::with_capacity(16 * 1024);
    let mut queue: VecDeque<Waiter> = VecDeque::new();
    let err = 'outer: loop {
        while let Ok(w) = prx.try_recv() {
            queue.push_back(w);
        }
        while let Some(w) = queue.front() {
            match frame(&buf, w.kind) {
                Framed::Complete { len } => {
                    let kind = w.kind;
                    let Some(w) = queue.pop_front() else { break };
                    let mut bytes = buf.split_to(len).freeze();
                    match kind {
                        ReplyKind::MetaQuiet => bytes.truncate(len.saturating_sub(META_NOOP_LEN)),
                        ReplyKind::BinaryQuiet => {
                            bytes.truncate(len.saturating_sub(BINARY_NOOP_LEN))
                        }
                        _ => {}
                    }
                    incr(&target.stats.responses);
                    if let Some(sent) = w.sent {
                        target.stats.latency.record_duration(sent.elapsed());
                    }
                    target.health.success(target.index);
                    target.stats.response_bytes.fetch_add(len as u64, Relaxed);
                    if let Some(tx) = w.reply {
                        let _ = tx.send(Ok(bytes));
                    }
                }
                Framed::Incomplete => break,
                Framed::Invalid => break 'outer BackendError::Garbage,
            }
        }
        if queue.is_empty() {
            if !buf.is_empty() {
                break BackendError::Garbage;
            }
            if buf.capacity() < 4096 {
                buf.reserve(16 * 1024);
            }
            tokio::select! {
                w = prx.recv() => match w {
                    Some(w) => queue.push_back(w),
                    None => return,
                },
                r = rd.read_buf(&mut buf) => match r {
                    Ok(0) | Err(_) => {
                        incr(&target.stats.server_eof);
                        break BackendError::Closed;
                    }
                    // Unsolicited bytes: caught as garbage on the next turn.
                    Ok(_) => {}
                },
            }
            continue;
        }
        if buf.capacity() - buf.len() < 4096 {
            buf.reserve(16 * 1024);
        }
        let deadline = queue.front().and_then(|w| w.deadline);
        let read = match deadline {
            Some(d) => match tokio::time::timeout_at(d, rd.read_buf(&mut buf)).await {
                Ok(r) => r,
                Err(_) => {
                    incr(&target.stats.server_timedout);
                    break BackendError::Timeout;
                }
            },
            None => rd.read_buf(&mut buf).await,
        };
        match read {
            Ok(0) => {
                incr(&target.stats.server_eof);
                break BackendError::Closed;
            }
            Ok(_) => {}
            Err(_) => {
                incr(&target.stats.server_err);
                break BackendError::Closed;
            }
        }
    };
    if err == BackendError::Garbage {
        incr(&target.stats.server_err);
    }
    if !failed.swap(true, Relaxed) {
        target.health.failure(target.index);
    }
    for w in queue.drain(..) {
        fail(w.reply, err.clone());
    }
    prx.close();
    while let Ok(w) = prx.try_recv() {
        fail(w.reply, err.clone());
    }
}
