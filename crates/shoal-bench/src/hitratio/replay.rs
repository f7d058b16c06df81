//! Demand-fill replay of a trace against a live server.
//!
//! Each read is a `get`; when it misses, the object is written back with a `set` (with
//! its TTL), as an application in front of a database does. Requests go out in windows of
//! pipelined commands on one connection, and the fills of a window's misses are written
//! ahead of the next window, in the same write. A window never holds the same key twice
//! (it ends before the repeat), so every request sees the fills of all the requests
//! before it, exactly as in a sequential replay, at the speed of a pipelined one. Hits
//! are counted from the replies themselves: object hits (share of reads answered) and
//! byte hits (share of bytes read that came from the cache), after a warm-up; each miss
//! is put down to a new key, a TTL run out, or an eviction (see [`ReplayResult`]).

use super::{push_key, ratio, Op, Request};
use crate::{resp, text, BenchError};
use serde::Serialize;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// The wire protocol of the server replayed against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Wire {
    /// memcached's text protocol (shoald, memcached).
    Memcache,
    /// Redis RESP (`GET`, `SET ... EX`, `DEL`).
    Redis,
}

/// How to replay.
#[derive(Clone, Debug)]
pub struct ReplayConfig {
    /// The server.
    pub server: SocketAddr,
    /// Its protocol.
    pub wire: Wire,
    /// Requests per pipelined window.
    pub window: usize,
    /// Requests replayed before hits are counted.
    pub warmup: u64,
    /// Requests per second to replay at, at most (TTLs are wall-clock time, so a trace
    /// with TTLs must run at the same pace against every server to compare them).
    pub rate: Option<f64>,
    /// Requests between two points of the hit-ratio timeline (0: none).
    pub interval: u64,
}

/// What a replay measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ReplayResult {
    /// Requests replayed.
    pub requests: u64,
    /// Reads counted (after warm-up).
    pub gets: u64,
    /// Of which answered with a value.
    pub hits: u64,
    /// Bytes of value the counted reads asked for.
    pub bytes_requested: u64,
    /// Of which answered from the cache.
    pub bytes_hit: u64,
    /// Writes sent (fills and the trace's own sets).
    pub sets: u64,
    /// Writes the server refused (too large, out of memory).
    pub set_errors: u64,
    /// Counted misses of keys the replay had never stored, or deleted since (no cache
    /// avoids them).
    #[serde(default)]
    pub misses_new: u64,
    /// Counted misses of keys whose last fill's TTL may have run out (memcached's clock
    /// has one-second steps, so from a second before the TTL on): the trace's own.
    #[serde(default)]
    pub misses_expired: u64,
    /// Counted misses of keys stored and still live: the server evicted them. The misses
    /// an eviction policy can avoid.
    #[serde(default)]
    pub misses_evicted: u64,
    /// Seconds the replay took.
    pub secs: f64,
    /// (requests replayed, object hit ratio in the interval before), for a timeline.
    pub timeline: Vec<(u64, f64)>,
}

impl ReplayResult {
    /// Share of counted reads that hit.
    pub fn hit_ratio(&self) -> f64 {
        ratio(self.hits, self.gets)
    }

    /// Share of counted reads that missed.
    pub fn miss_ratio(&self) -> f64 {
        1.0 - self.hit_ratio()
    }

    /// `n` as a share of the counted reads (e.g. of [`misses_new`](Self::misses_new)).
    pub fn share_of_reads(&self, n: u64) -> f64 {
        ratio(n, self.gets)
    }

    /// Share of counted reads that missed because the server evicted a live item.
    pub fn eviction_miss_ratio(&self) -> f64 {
        self.share_of_reads(self.misses_evicted)
    }

    /// Share of requested bytes served from the cache.
    pub fn byte_hit_ratio(&self) -> f64 {
        ratio(self.bytes_hit, self.bytes_requested)
    }
}

/// The largest value a replay writes; larger trace objects are sent at this size (and
/// refused by servers with a smaller item limit, counted in `set_errors`).
pub const MAX_VALUE: usize = 64 << 20;

/// One open connection and its buffers.
struct Conn {
    stream: TcpStream,
    addr: SocketAddr,
    wire: Wire,
    out: Vec<u8>,
    inbuf: Vec<u8>,
    /// Read buffer, reused for every read.
    chunk: Vec<u8>,
    filler: Vec<u8>,
    /// The key being encoded, reused.
    key: Vec<u8>,
}

/// What a reply said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    Hit,
    Miss,
    Done,
    Refused,
}

impl Conn {
    fn open(server: SocketAddr, wire: Wire) -> Result<Conn, BenchError> {
        let stream = TcpStream::connect(server)
            .map_err(|e| BenchError::io(format!("connect to {server}"), e))?;
        stream
            .set_nodelay(true)
            .map_err(|e| BenchError::io("TCP_NODELAY", e))?;
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .map_err(|e| BenchError::io("read timeout", e))?;
        Ok(Conn {
            stream,
            addr: server,
            wire,
            out: Vec::with_capacity(1 << 16),
            inbuf: Vec::with_capacity(1 << 16),
            chunk: vec![0; 256 * 1024],
            filler: Vec::new(),
            key: Vec::with_capacity(256),
        })
    }

    fn value(&mut self, len: usize) -> &[u8] {
        let len = len.min(MAX_VALUE);
        if self.filler.len() < len {
            self.filler
                .resize(len.next_power_of_two().min(MAX_VALUE), b'v');
        }
        &self.filler[..len]
    }

    fn encode(&mut self, op: Op, r: &Request) {
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        push_key(&mut key, r.key, r.key_len);
        let mut out = std::mem::take(&mut self.out);
        match (self.wire, op) {
            (Wire::Memcache, Op::Get) => {
                out.extend_from_slice(b"get ");
                out.extend_from_slice(&key);
                out.extend_from_slice(b"\r\n");
            }
            (Wire::Memcache, Op::Delete) => {
                out.extend_from_slice(b"delete ");
                out.extend_from_slice(&key);
                out.extend_from_slice(b"\r\n");
            }
            (Wire::Memcache, Op::Set) => {
                let value = self.value(r.value_len as usize);
                out.extend_from_slice(b"set ");
                out.extend_from_slice(&key);
                out.extend_from_slice(format!(" 0 {} {}\r\n", r.ttl, value.len()).as_bytes());
                out.extend_from_slice(value);
                out.extend_from_slice(b"\r\n");
            }
            (Wire::Redis, Op::Get) => resp::encode_command(&mut out, &[b"GET", &key]),
            (Wire::Redis, Op::Delete) => resp::encode_command(&mut out, &[b"DEL", &key]),
            (Wire::Redis, Op::Set) => {
                let value = self.value(r.value_len as usize);
                if r.ttl > 0 {
                    let ttl = r.ttl.to_string();
                    resp::encode_command(&mut out, &[b"SET", &key, value, b"EX", ttl.as_bytes()]);
                } else {
                    resp::encode_command(&mut out, &[b"SET", &key, value]);
                }
            }
        }
        self.out = out;
        self.key = key;
    }

    fn flush(&mut self) -> Result<(), BenchError> {
        self.stream
            .write_all(&self.out)
            .map_err(|e| BenchError::io(format!("write to {}", self.addr), e))?;
        self.out.clear();
        Ok(())
    }

    /// Reads the reply to one request of kind `op`.
    fn answer(&mut self, op: Op) -> Result<Answer, BenchError> {
        loop {
            if let Some((answer, used)) = self.parse(op)? {
                self.inbuf.drain(..used);
                return Ok(answer);
            }
            let n = self
                .stream
                .read(&mut self.chunk)
                .map_err(|e| BenchError::io(format!("read from {}", self.addr), e))?;
            if n == 0 {
                return Err(BenchError::Closed(self.addr.to_string()));
            }
            self.inbuf.extend_from_slice(&self.chunk[..n]);
        }
    }

    fn parse(&self, op: Op) -> Result<Option<(Answer, usize)>, BenchError> {
        let buf = &self.inbuf[..];
        match self.wire {
            Wire::Memcache if op == Op::Delete => {
                let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
                    return Ok(None);
                };
                let line = &buf[..nl];
                let answer = if line.starts_with(b"DELETED") || line.starts_with(b"NOT_FOUND") {
                    Answer::Done
                } else {
                    Answer::Refused
                };
                Ok(Some((answer, nl + 1)))
            }
            Wire::Memcache => {
                let text_op = if op == Op::Get {
                    text::Op::Get
                } else {
                    text::Op::Set
                };
                Ok(text::parse_reply(buf, text_op)?.map(|(r, n)| (from_reply(r), n)))
            }
            Wire::Redis => Ok(resp::parse_reply(buf)?.map(|(r, n)| {
                let a = match (op, from_reply(r)) {
                    (Op::Get, a) => a,
                    (_, Answer::Refused) => Answer::Refused,
                    _ => Answer::Done,
                };
                (a, n)
            })),
        }
    }
}

fn from_reply(r: text::Reply) -> Answer {
    match r {
        text::Reply::Hit => Answer::Hit,
        text::Reply::Miss => Answer::Miss,
        text::Reply::Stored | text::Reply::NotStored => Answer::Done,
        text::Reply::Error => Answer::Refused,
    }
}

/// Replays `trace` against the server in `cfg` and counts its hits.
pub fn replay(
    cfg: &ReplayConfig,
    trace: impl IntoIterator<Item = Result<Request, BenchError>>,
    mut progress: impl FnMut(u64),
) -> Result<ReplayResult, BenchError> {
    let mut conn = Conn::open(cfg.server, cfg.wire)?;
    let window = cfg.window.max(1);
    let mut res = ReplayResult::default();
    let started = Instant::now();
    let mut batch: Vec<Request> = Vec::with_capacity(window);
    let mut fills: Vec<Request> = Vec::with_capacity(window);
    let (mut iv_gets, mut iv_hits) = (0u64, 0u64);
    let mut trace = trace.into_iter();
    // A request read but left for the next window.
    let mut held: Option<Request> = None;
    // Fills sent whose answers are not read yet.
    let mut unanswered = 0;
    let mut stored = Stored::default();
    loop {
        batch.clear();
        // A window ends early before a key it already holds: the second request must see
        // the first one's fill, as it would in a sequential replay.
        if let Some(r) = held.take() {
            batch.push(r);
        }
        for r in trace.by_ref() {
            let r = r?;
            if batch.iter().any(|b| b.key == r.key) {
                held = Some(r);
                break;
            }
            batch.push(r);
            if batch.len() == window {
                break;
            }
        }
        if batch.is_empty() {
            break;
        }
        if let Some(rate) = cfg.rate.filter(|r| *r > 0.0) {
            let due = Duration::from_secs_f64(res.requests as f64 / rate);
            let elapsed = started.elapsed();
            if due > elapsed {
                std::thread::sleep(due - elapsed);
            }
        }
        for r in &batch {
            conn.encode(r.op, r);
        }
        conn.flush()?;
        answer_fills(&mut conn, &mut res, unanswered)?;
        fills.clear();
        for r in &batch {
            let answer = conn.answer(r.op)?;
            res.requests += 1;
            let counted = res.requests > cfg.warmup;
            match r.op {
                Op::Get => {
                    let hit = answer == Answer::Hit;
                    if counted {
                        res.gets += 1;
                        res.bytes_requested += u64::from(r.value_len);
                        if hit {
                            res.hits += 1;
                            res.bytes_hit += u64::from(r.value_len);
                        }
                    }
                    iv_gets += 1;
                    iv_hits += u64::from(hit);
                    if !hit && counted {
                        match stored.why_missing(r.key, started.elapsed()) {
                            Missing::New => res.misses_new += 1,
                            Missing::Expired => res.misses_expired += 1,
                            Missing::Evicted => res.misses_evicted += 1,
                        }
                    }
                    if !hit && r.value_len > 0 {
                        fills.push(*r);
                    }
                }
                Op::Set => {
                    res.sets += 1;
                    res.set_errors += u64::from(answer == Answer::Refused);
                    stored.filled(r, started.elapsed());
                }
                Op::Delete => stored.deleted(r.key),
            }
            if cfg.interval > 0 && res.requests % cfg.interval == 0 {
                res.timeline.push((res.requests, ratio(iv_hits, iv_gets)));
                (iv_gets, iv_hits) = (0, 0);
            }
        }
        // The fills go out with the next window, in the same write: the server takes a
        // connection's requests in order, so each fill is stored before any later request
        // is read, as in a sequential replay, at one round trip per window rather than
        // two. (At two, a paced shape fell 10-30% behind its rate on two cores, and a
        // replay that runs late lets more of its TTLs run out between requests.)
        for r in &fills {
            conn.encode(Op::Set, r);
            stored.filled(r, started.elapsed());
        }
        unanswered = fills.len();
        progress(res.requests);
    }
    conn.flush()?;
    answer_fills(&mut conn, &mut res, unanswered)?;
    res.secs = started.elapsed().as_secs_f64();
    Ok(res)
}

/// Why a read missed, from what the replay wrote.
enum Missing {
    New,
    Expired,
    Evicted,
}

/// When the replay last wrote each key, and until when that write lives: enough to tell
/// a miss the server chose (eviction) from one the trace made (a new key, a TTL run out).
/// A write refused by the server still counts as written: its miss is the server's.
/// It holds an entry per distinct key written (about 20 bytes each, so a trace of 100
/// million keys needs 2 GB in the replaying client).
#[derive(Default)]
struct Stored {
    /// Key → the time its last write's TTL may run out, in milliseconds since the replay
    /// began (`u32::MAX`: never). A deleted key has no entry.
    until: std::collections::HashMap<u64, u32>,
}

impl Stored {
    fn filled(&mut self, r: &Request, at: Duration) {
        let until = if r.ttl == 0 {
            u32::MAX
        } else {
            // memcached's clock has one-second steps: an item may expire up to a second
            // before its TTL is over.
            let ms = at.as_millis() as u64 + u64::from(r.ttl.saturating_sub(1)) * 1000;
            ms.min(u64::from(u32::MAX - 1)) as u32
        };
        self.until.insert(r.key, until);
    }

    fn deleted(&mut self, key: u64) {
        self.until.remove(&key);
    }

    fn why_missing(&self, key: u64, at: Duration) -> Missing {
        match self.until.get(&key) {
            None => Missing::New,
            Some(&until) if u128::from(until) <= at.as_millis() => Missing::Expired,
            Some(_) => Missing::Evicted,
        }
    }
}

/// Reads the answers to `n` fills sent before the window just sent.
fn answer_fills(conn: &mut Conn, res: &mut ReplayResult, n: usize) -> Result<(), BenchError> {
    for _ in 0..n {
        res.sets += 1;
        if conn.answer(Op::Set)? == Answer::Refused {
            res.set_errors += 1;
        }
    }
    Ok(())
}
