//! A queue client for several shoal-queued servers, the Kestrel way (issue 27, point 4).
//!
//! Kestrel clusters have no placement: every server is a full queue server, and the
//! clients spread the load. [`QueueClient`] behaves as kestrel-client (Ruby) does:
//!
//! - **Sets** go to a server chosen at random. A set answered `SERVER_ERROR` (a server in
//!   `status readonly`, a full disk) or cut by a connection failure is tried again on
//!   another server; a set answered `STORED` is never sent again, nor one answered
//!   `NOT_STORED` (the queue is full: a definite answer). A server that answers
//!   `SERVER_ERROR` to a set is skipped for sets for
//!   [`QueueClientBuilder::set_skip_time`]: a server being drained gets no sets but is
//!   still read from.
//! - **Reads** are sticky: the client reads from one server for
//!   [`QueueClientBuilder::gets_per_server`] reads, then moves on to the next server
//!   (round-robin, so every server is drained); an empty read moves on at once.
//! - **Reliable reads** ([`QueueClient::get_open`]) stay on the connection that opened
//!   them: the next `get_open` on the queue closes the open read and opens the next in
//!   one request (`/close/open`) on that connection; when the client moves on, it sends
//!   `/close` there first, then `/open` on the next server. [`QueueClient::close`] and
//!   [`QueueClient::abort`] end the open read on its own connection.
//! - A server whose connection fails is left alone (for sets and reads) for
//!   [`QueueClientBuilder::retry_delay`], then reconnected on demand.
//!
//! **Delivery.** A set that fails ambiguously (the connection was cut after the request
//! was sent) may have been stored; kestrel-client retries it anyway, and so does this
//! client, saying so in [`SetReceipt::maybe_duplicated`]. An open read whose connection
//! fails was neither confirmed nor aborted: its server gives it to a reader again
//! (at-least-once); the error says so ([`QueueError::Connection`]'s `open_read_lost`).
//!
//! One `QueueClient` is one reader and writer (methods take `&mut self`), as one
//! kestrel-client instance is; give each task its own.
//!
//! Connections: one plain tokio `TcpStream` per server, not the pipelined, shared
//! [`crate::backend`] pool. A reliable read is bound to the connection that opened it
//! (the server returns it to the queue when that connection closes), so requests must
//! not be spread over a pool or interleaved with other clients' requests on one socket;
//! and the requests are strictly one at a time. A private stream per server is exactly
//! that, with no framing engine in between.
//!
//! ```no_run
//! # async fn demo() -> Result<(), shoal_client::queue_client::QueueError> {
//! use shoal_client::queue_client::QueueClient;
//!
//! let mut q = QueueClient::builder(["10.0.0.1:22201", "10.0.0.2:22201"])
//!     .gets_per_server(100)
//!     .build()?;
//! q.set("jobs", b"work item", 0).await?;
//! while let Some(item) = q.get_open("jobs").await? {
//!     // ... process item; the next get_open confirms it.
//!     let _ = item;
//! }
//! q.close("jobs").await?; // nothing is open after an empty read, so this is a no-op
//! # Ok(()) }
//! ```

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Errors of the [`QueueClient`] API.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    /// A queue name shoal-queued would refuse (empty, over 128 bytes, or holding `/`, a
    /// space or a control character). Nothing was sent.
    #[error("invalid queue name")]
    BadQueueName,
    /// The client was configured wrongly (no servers).
    #[error("configuration: {0}")]
    Config(String),
    /// The connection to a server failed (connect, write, read, or no reply in time).
    #[error("server {server}: connection failed: {reason}")]
    Connection {
        /// The server's address.
        server: String,
        /// What failed.
        reason: String,
        /// This client held an open read on that connection. It was neither confirmed
        /// nor aborted: the server delivers it again (to this or another reader).
        open_read_lost: bool,
    },
    /// The server answered `SERVER_ERROR ...` (a read; sets are retried elsewhere).
    #[error("server {server}: {line}")]
    Server {
        /// The server's address.
        server: String,
        /// The reply line.
        line: String,
    },
    /// The server refused the request (`ERROR`, `CLIENT_ERROR ...`).
    #[error("server {server} refused the request: {line}")]
    Refused {
        /// The server's address.
        server: String,
        /// The reply line.
        line: String,
    },
    /// The queue is full on the chosen server (`NOT_STORED`). Not retried.
    #[error("server {server}: queue full (NOT_STORED)")]
    NotStored {
        /// The server's address.
        server: String,
    },
    /// The server's reply was not one this request can get.
    #[error("server {server}: unexpected reply: {line}")]
    Protocol {
        /// The server's address.
        server: String,
        /// What was received.
        line: String,
    },
    /// A set was tried on every server and none stored it.
    #[error("set failed on all {tried} servers; last: {last}")]
    AllServersFailed {
        /// Servers tried.
        tried: usize,
        /// The last server's failure.
        #[source]
        last: Box<QueueError>,
    },
}

/// What a successful [`QueueClient::set`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetReceipt {
    /// Index (in the builder's list) of the server that answered `STORED`.
    pub server: usize,
    /// An earlier attempt's connection was cut after the request was sent: that server
    /// may have stored the message too, which would then be delivered twice.
    pub maybe_duplicated: bool,
}

/// Configures a [`QueueClient`].
#[derive(Debug, Clone)]
pub struct QueueClientBuilder {
    servers: Vec<String>,
    gets_per_server: u32,
    timeout: Duration,
    retry_delay: Duration,
    set_skip_time: Duration,
    read_wait: Option<Duration>,
}

impl QueueClientBuilder {
    /// Reads from one server before moving on to the next (kestrel-client's
    /// `gets_per_server`, default 100). At least 1.
    pub fn gets_per_server(mut self, n: u32) -> Self {
        self.gets_per_server = n.max(1);
        self
    }

    /// Limit on connecting and on each request's reply (default 2 s). A server that
    /// does not answer in time is treated as a failed connection.
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = t;
        self
    }

    /// How long a server whose connection failed is left alone before it is tried
    /// again (default 1 s).
    pub fn retry_delay(mut self, t: Duration) -> Self {
        self.retry_delay = t;
        self
    }

    /// How long a server that answered `SERVER_ERROR` to a set (e.g. `status readonly`)
    /// gets no sets (default 30 s). Reads go on.
    pub fn set_skip_time(mut self, t: Duration) -> Self {
        self.set_skip_time = t;
        self
    }

    /// Make every read a blocking read (`/t=<ms>`) waiting up to `wait` on the current
    /// server (default: none; an empty server answers at once and the client moves on).
    /// Keep it below [`Self::timeout`].
    pub fn read_wait(mut self, wait: Option<Duration>) -> Self {
        self.read_wait = wait;
        self
    }

    /// The client. Fails on an empty server list. Connects lazily.
    pub fn build(self) -> Result<QueueClient, QueueError> {
        if self.servers.is_empty() {
            return Err(QueueError::Config("no servers".into()));
        }
        let mut seed = RandomState::new().build_hasher();
        seed.write_usize(self.servers.len());
        let slots = self
            .servers
            .iter()
            .map(|addr| Slot {
                addr: addr.clone(),
                conn: None,
                down_until: None,
                no_sets_until: None,
            })
            .collect();
        Ok(QueueClient {
            cfg: self,
            slots,
            rng: seed.finish() | 1,
            read_server: 0,
            reads_here: 0,
            open: HashMap::new(),
        })
    }
}

/// One server: its connection (if any) and why it is being avoided.
#[derive(Debug)]
struct Slot {
    addr: String,
    conn: Option<BufReader<TcpStream>>,
    down_until: Option<Instant>,
    no_sets_until: Option<Instant>,
}

impl Slot {
    fn is_down(&self, now: Instant) -> bool {
        self.down_until.is_some_and(|t| now < t)
    }

    fn takes_sets(&self, now: Instant) -> bool {
        !self.is_down(now) && !self.no_sets_until.is_some_and(|t| now < t)
    }
}

/// A failure of one exchange with one server.
enum Fail {
    /// Connecting failed: nothing was sent.
    Connect(String),
    /// The connection failed after (part of) the request may have been sent.
    Io(String),
}

/// A queue client over several shoal-queued (or Kestrel) servers; see the
/// [module documentation](self).
#[derive(Debug)]
pub struct QueueClient {
    cfg: QueueClientBuilder,
    slots: Vec<Slot>,
    rng: u64,
    /// The server reads go to now, and how many reads it has served.
    read_server: usize,
    reads_here: u32,
    /// Queue -> the server holding this client's open read on it.
    open: HashMap<String, usize>,
}

fn valid_queue(q: &str) -> bool {
    !q.is_empty() && q.len() <= 128 && q.bytes().all(|b| b.is_ascii_graphic() && b != b'/')
}

impl QueueClient {
    /// A builder for the servers `host:port`, in the order [`SetReceipt::server`] and
    /// reads use.
    pub fn builder<I, S>(servers: I) -> QueueClientBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        QueueClientBuilder {
            servers: servers.into_iter().map(Into::into).collect(),
            gets_per_server: 100,
            timeout: Duration::from_secs(2),
            retry_delay: Duration::from_secs(1),
            set_skip_time: Duration::from_secs(30),
            read_wait: None,
        }
    }

    /// The servers' addresses, in the builder's order.
    pub fn servers(&self) -> impl Iterator<Item = &str> {
        self.slots.iter().map(|s| s.addr.as_str())
    }

    /// The server holding this client's open read on `queue`, if any.
    pub fn open_on(&self, queue: &str) -> Option<usize> {
        self.open.get(queue).copied()
    }

    fn next_random(&mut self) -> u64 {
        // xorshift64*: enough to spread sets; not for anything secret.
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Enqueue `data` on `queue` (`set <queue> 0 <expiry> <n>`) on a random server;
    /// `expiry` is seconds as the server reads a `set`'s exptime (0: never).
    ///
    /// Tried on another server after `SERVER_ERROR` or a connection failure; each server
    /// at most once, those taking sets first (in random order), then those being
    /// avoided. `NOT_STORED` is returned as [`QueueError::NotStored`], not retried.
    pub async fn set(
        &mut self,
        queue: &str,
        data: &[u8],
        expiry: u32,
    ) -> Result<SetReceipt, QueueError> {
        if !valid_queue(queue) {
            return Err(QueueError::BadQueueName);
        }
        let now = Instant::now();
        let (mut first, mut later): (Vec<usize>, Vec<usize>) =
            (0..self.slots.len()).partition(|&i| self.slots[i].takes_sets(now));
        self.shuffle(&mut first);
        self.shuffle(&mut later);
        let order: Vec<usize> = first.into_iter().chain(later).collect();
        let mut req = format!("set {queue} 0 {expiry} {}\r\n", data.len()).into_bytes();
        req.extend_from_slice(data);
        req.extend_from_slice(b"\r\n");
        let mut maybe_duplicated = false;
        let mut last = None;
        for &i in &order {
            match self.exchange_line(i, &req).await {
                Ok(line) => {
                    let server = self.slots[i].addr.clone();
                    match line.as_str() {
                        "STORED" => {
                            return Ok(SetReceipt {
                                server: i,
                                maybe_duplicated,
                            })
                        }
                        "NOT_STORED" => return Err(QueueError::NotStored { server }),
                        // Too large for one server is too large for all: a definite
                        // answer, not a reason to send the value everywhere.
                        l if l.starts_with("SERVER_ERROR object too large") => {
                            return Err(QueueError::Server { server, line })
                        }
                        l if l.starts_with("SERVER_ERROR") => {
                            self.slots[i].no_sets_until =
                                Some(Instant::now() + self.cfg.set_skip_time);
                            last = Some(QueueError::Server { server, line });
                        }
                        l if l.starts_with("CLIENT_ERROR") || l == "ERROR" => {
                            return Err(QueueError::Refused { server, line })
                        }
                        _ => {
                            self.drop_conn(i);
                            return Err(QueueError::Protocol { server, line });
                        }
                    }
                }
                Err(f) => {
                    let reason = match f {
                        Fail::Connect(r) => r,
                        Fail::Io(r) => {
                            maybe_duplicated = true;
                            r
                        }
                    };
                    last = Some(self.conn_failed(i, reason));
                }
            }
        }
        Err(QueueError::AllServersFailed {
            tried: order.len(),
            last: Box::new(last.unwrap_or_else(|| QueueError::Config("no servers".into()))),
        })
    }

    /// Dequeue from `queue` (a plain read, consumed at once): the next message, or
    /// `None` when the current server had none (the next read goes to the next server).
    pub async fn get(&mut self, queue: &str) -> Result<Option<Vec<u8>>, QueueError> {
        if !valid_queue(queue) {
            return Err(QueueError::BadQueueName);
        }
        if self.open.contains_key(queue) {
            // A plain read while holding an open read is refused by Kestrel (and
            // shoal-queued in Kestrel mode) with a disconnect: confirm it first.
            self.close(queue).await?;
        }
        let i = self.pick_read_server();
        let key = self.read_key(queue, "");
        self.read(i, queue, &key, false).await
    }

    /// Reliable read of `queue`: confirms this client's open read on it (if any) and
    /// opens the next message, which stays on the server until the next `get_open`,
    /// [`close`](Self::close) (consumed) or [`abort`](Self::abort) (given back), or
    /// until the connection closes (given back). `None` when the current server had
    /// none (the previous open read, if on that server, is confirmed all the same).
    pub async fn get_open(&mut self, queue: &str) -> Result<Option<Vec<u8>>, QueueError> {
        if !valid_queue(queue) {
            return Err(QueueError::BadQueueName);
        }
        let i = self.pick_read_server();
        let opts = match self.open.get(queue) {
            Some(&held) if held == i => "/close/open",
            Some(_) => {
                // Moving on: confirm on the connection that opened it.
                self.close(queue).await?;
                "/open"
            }
            None => "/open",
        };
        let key = self.read_key(queue, opts);
        self.read(i, queue, &key, true).await
    }

    /// Look at the head of `queue` on the current read server without taking it (Kestrel's
    /// `/peek`); `None` when that server had none (the next read goes to the next one).
    pub async fn peek(&mut self, queue: &str) -> Result<Option<Vec<u8>>, QueueError> {
        if !valid_queue(queue) {
            return Err(QueueError::BadQueueName);
        }
        let i = self.pick_read_server();
        let key = self.read_key(queue, "/peek");
        self.read(i, queue, &key, false).await
    }

    /// How long reads wait on a server for a message to arrive (`/t=<ms>`) from now on;
    /// `None`: reads answer at once. The same setting as
    /// [`QueueClientBuilder::read_wait`], changed per read by a caller that forwards its
    /// own clients' waits (shoal-proxy's queue pools).
    pub fn set_read_wait(&mut self, wait: Option<Duration>) {
        self.cfg.read_wait = wait;
    }

    /// Sends one single-line command (`delete <q>`, `flush <q>`, `flush_all`, ...) to
    /// every server, one after the other, and returns each server's reply line (or why
    /// it has none), in the builder's order. Queues live on every server, so commands
    /// about a whole queue must reach them all. `command` is sent as given, followed by
    /// `\r\n`; it must not hold a line break.
    pub async fn broadcast(&mut self, command: &str) -> Vec<Result<String, QueueError>> {
        if command.contains(['\r', '\n']) {
            let e = QueueError::Config("a broadcast command is one line".into());
            return vec![Err(e); self.slots.len()];
        }
        let req = format!("{command}\r\n").into_bytes();
        let mut replies = Vec::with_capacity(self.slots.len());
        for i in 0..self.slots.len() {
            replies.push(match self.exchange_line(i, &req).await {
                Ok(line) => Ok(line),
                Err(Fail::Connect(r) | Fail::Io(r)) => Err(self.conn_failed(i, r)),
            });
        }
        replies
    }

    /// Forgets this client's open read on `queue` without a word to its server: for a
    /// caller that ended it another way (deleting the queue ends every open read on it).
    pub fn forget_open(&mut self, queue: &str) {
        self.open.remove(queue);
    }

    /// Confirm (consume) this client's open read on `queue`, on its own connection.
    /// Nothing to do when none is open.
    pub async fn close(&mut self, queue: &str) -> Result<(), QueueError> {
        self.end_open(queue, "/close").await
    }

    /// Give this client's open read on `queue` back to the head of the queue.
    pub async fn abort(&mut self, queue: &str) -> Result<(), QueueError> {
        self.end_open(queue, "/abort").await
    }

    async fn end_open(&mut self, queue: &str, how: &str) -> Result<(), QueueError> {
        let Some(i) = self.open.remove(queue) else {
            return Ok(());
        };
        let req = format!("get {queue}{how}\r\n").into_bytes();
        match self.exchange_line(i, &req).await {
            Ok(line) if line == "END" => Ok(()),
            Ok(line) => {
                if line.starts_with("SERVER_ERROR") {
                    // The connection stays, and with it the open read: it can be ended
                    // again later.
                    self.open.insert(queue.to_string(), i);
                }
                Err(self.bad_reply(i, line))
            }
            Err(Fail::Connect(r) | Fail::Io(r)) => {
                // The read was on that connection: lost with it, given back by the
                // server.
                self.open.insert(queue.to_string(), i);
                Err(self.conn_failed(i, r))
            }
        }
    }

    fn read_key(&self, queue: &str, opts: &str) -> String {
        match self.cfg.read_wait {
            Some(w) => format!("{queue}/t={}{opts}", w.as_millis().max(1)),
            None => format!("{queue}{opts}"),
        }
    }

    /// The server for the next read: the current one until it has served
    /// `gets_per_server` reads, skipping servers whose connection failed lately
    /// (unless all have).
    fn pick_read_server(&mut self) -> usize {
        if self.reads_here >= self.cfg.gets_per_server {
            self.move_on();
        }
        let now = Instant::now();
        let n = self.slots.len();
        for step in 0..n {
            let i = (self.read_server + step) % n;
            if !self.slots[i].is_down(now) {
                if i != self.read_server {
                    self.read_server = i;
                    self.reads_here = 0;
                }
                return i;
            }
        }
        self.read_server
    }

    fn move_on(&mut self) {
        self.read_server = (self.read_server + 1) % self.slots.len();
        self.reads_here = 0;
    }

    async fn read(
        &mut self,
        i: usize,
        queue: &str,
        key: &str,
        opening: bool,
    ) -> Result<Option<Vec<u8>>, QueueError> {
        let req = format!("get {key}\r\n").into_bytes();
        let timeout = self.cfg.timeout + self.cfg.read_wait.unwrap_or_default();
        let closing = key.contains("/close");
        let result = {
            let slot = &mut self.slots[i];
            match connect(slot, self.cfg.timeout).await {
                Err(r) => Err(Fail::Connect(r)),
                Ok(conn) => tokio::time::timeout(timeout, read_value(conn, &req))
                    .await
                    .unwrap_or_else(|_| Err(Fail::Io("no reply in time".into()))),
            }
        };
        if result.is_ok() {
            self.slots[i].down_until = None;
        }
        match result {
            Ok(Reply::Value(data)) => {
                self.reads_here += 1;
                if opening {
                    self.open.insert(queue.to_string(), i);
                } else if closing {
                    self.open.remove(queue);
                }
                Ok(Some(data))
            }
            Ok(Reply::Empty) => {
                if closing {
                    self.open.remove(queue);
                }
                self.move_on();
                Ok(None)
            }
            Ok(Reply::Line(line)) => {
                if closing {
                    // Refused (`ERROR`, `CLIENT_ERROR`): Kestrel disconnects, which
                    // gives the open read back. `SERVER_ERROR` (a quiescent or failing
                    // server): shoal-queued has closed it before refusing the read.
                    self.open.remove(queue);
                }
                if line.starts_with("SERVER_ERROR") {
                    // Reads go elsewhere rather than stay on a server that refuses them.
                    self.move_on();
                }
                Err(self.bad_reply(i, line))
            }
            Err(Fail::Connect(r) | Fail::Io(r)) => Err(self.conn_failed(i, r)),
        }
    }

    /// A connection failure on server `i`: drop the connection (and the open reads it
    /// held), avoid the server for `retry_delay`, move reads on.
    fn conn_failed(&mut self, i: usize, reason: String) -> QueueError {
        self.drop_conn(i);
        self.slots[i].down_until = Some(Instant::now() + self.cfg.retry_delay);
        if self.read_server == i {
            self.move_on();
        }
        let before = self.open.len();
        self.open.retain(|_, s| *s != i);
        QueueError::Connection {
            server: self.slots[i].addr.clone(),
            reason,
            open_read_lost: self.open.len() != before,
        }
    }

    fn drop_conn(&mut self, i: usize) {
        self.slots[i].conn = None;
    }

    /// An error line (or garbage) from server `i`. `ERROR` and `CLIENT_ERROR` are
    /// followed by a disconnect in Kestrel mode: the connection is dropped (and this
    /// client's open reads on it go back to the queue).
    fn bad_reply(&mut self, i: usize, line: String) -> QueueError {
        let server = self.slots[i].addr.clone();
        if line.starts_with("SERVER_ERROR") {
            return QueueError::Server { server, line };
        }
        self.drop_conn(i);
        self.open.retain(|_, s| *s != i);
        if line == "ERROR" || line.starts_with("CLIENT_ERROR") {
            QueueError::Refused { server, line }
        } else {
            QueueError::Protocol { server, line }
        }
    }

    /// Send `req` to server `i` and read one reply line.
    async fn exchange_line(&mut self, i: usize, req: &[u8]) -> Result<String, Fail> {
        let timeout = self.cfg.timeout;
        let slot = &mut self.slots[i];
        let conn = connect(slot, timeout).await.map_err(Fail::Connect)?;
        let r = tokio::time::timeout(timeout, async {
            conn.get_mut().write_all(req).await.map_err(io_fail)?;
            read_line(conn).await
        })
        .await
        .unwrap_or_else(|_| Err(Fail::Io("no reply in time".into())));
        if r.is_ok() {
            slot.down_until = None;
        }
        r
    }

    fn shuffle(&mut self, v: &mut [usize]) {
        for k in (1..v.len()).rev() {
            let j = (self.next_random() % (k as u64 + 1)) as usize;
            v.swap(k, j);
        }
    }
}

/// The slot's connection, connecting first if there is none.
async fn connect(slot: &mut Slot, timeout: Duration) -> Result<&mut BufReader<TcpStream>, String> {
    if slot.conn.is_none() {
        let s = tokio::time::timeout(timeout, TcpStream::connect(slot.addr.as_str()))
            .await
            .map_err(|_| "connect timed out".to_string())?
            .map_err(|e| e.to_string())?;
        let _ = s.set_nodelay(true);
        slot.conn = Some(BufReader::new(s));
    }
    Ok(slot.conn.as_mut().expect("just connected"))
}

fn io_fail(e: std::io::Error) -> Fail {
    Fail::Io(e.to_string())
}

/// One line, without its `\r\n`.
async fn read_line(conn: &mut BufReader<TcpStream>) -> Result<String, Fail> {
    let mut buf = Vec::new();
    let n = conn.read_until(b'\n', &mut buf).await.map_err(io_fail)?;
    if n == 0 || !buf.ends_with(b"\n") {
        return Err(Fail::Io("connection closed".into()));
    }
    buf.pop();
    if buf.ends_with(b"\r") {
        buf.pop();
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// The largest message a reply may carry.
const MAX_MESSAGE: usize = 128 << 20;

enum Reply {
    Value(Vec<u8>),
    Empty,
    Line(String),
}

/// Send a `get` and read its reply: one `VALUE` and `END`, `END`, or an error line.
async fn read_value(conn: &mut BufReader<TcpStream>, req: &[u8]) -> Result<Reply, Fail> {
    conn.get_mut().write_all(req).await.map_err(io_fail)?;
    let line = read_line(conn).await?;
    if line == "END" {
        return Ok(Reply::Empty);
    }
    let Some(rest) = line.strip_prefix("VALUE ") else {
        return Ok(Reply::Line(line));
    };
    let len = rest
        .split(' ')
        .nth(2)
        .and_then(|n| n.parse::<usize>().ok())
        // Nothing larger is a message any server sends (shoal-queued's largest item is
        // 128 MiB): a bigger length is a broken server, not an allocation to make.
        .filter(|&n| n <= MAX_MESSAGE)
        .ok_or_else(|| Fail::Io(format!("bad VALUE line: {line}")))?;
    let mut data = vec![0; len + 2];
    conn.read_exact(&mut data).await.map_err(io_fail)?;
    if !data.ends_with(b"\r\n") {
        return Err(Fail::Io("value not followed by \\r\\n".into()));
    }
    data.truncate(len);
    let end = read_line(conn).await?;
    if end != "END" {
        return Err(Fail::Io(format!("expected END, got {end}")));
    }
    Ok(Reply::Value(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names_shoal_queued_refuses_are_refused_here() {
        assert!(valid_queue("orders"));
        assert!(valid_queue("orders+audit"));
        for bad in ["", "a/b", "a b", "a\r\n", &"x".repeat(129)] {
            assert!(!valid_queue(bad), "{bad:?}");
        }
    }

    #[test]
    fn an_empty_server_list_is_a_configuration_error() {
        let none: [&str; 0] = [];
        assert!(matches!(
            QueueClient::builder(none).build(),
            Err(QueueError::Config(_))
        ));
    }

    #[test]
    fn shuffle_is_a_permutation_and_spreads() {
        let mut q = QueueClient::builder(["a:1", "b:1", "c:1"]).build().unwrap();
        let mut first = [0usize; 3];
        for _ in 0..3000 {
            let mut v = vec![0, 1, 2];
            q.shuffle(&mut v);
            let mut s = v.clone();
            s.sort_unstable();
            assert_eq!(s, [0, 1, 2]);
            first[v[0]] += 1;
        }
        assert!(first.iter().all(|&n| n > 800), "{first:?}");
    }

    #[test]
    fn reads_stay_for_gets_per_server_then_move_round_robin() {
        let mut q = QueueClient::builder(["a:1", "b:1", "c:1"])
            .gets_per_server(2)
            .build()
            .unwrap();
        let mut seen = Vec::new();
        for _ in 0..6 {
            let i = q.pick_read_server();
            q.reads_here += 1;
            seen.push(i);
        }
        assert_eq!(seen, [0, 0, 1, 1, 2, 2]);
        // A server whose connection failed is skipped until retry_delay passes.
        q.slots[0].down_until = Some(Instant::now() + Duration::from_secs(60));
        q.reads_here = 2;
        assert_eq!(q.pick_read_server(), 1);
    }
}
