//! Bulk loading and counting keys: the memory-efficiency benchmark's two halves, and the
//! load generator's prefill. Plain blocking sockets, one thread per connection.

use crate::text::{self, Op, Reply};
use crate::BenchError;
use serde::Serialize;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Instant;

/// Which keys to set, how, and where.
#[derive(Clone, Debug, Serialize)]
pub struct FillConfig {
    /// The server's address.
    pub server: SocketAddr,
    /// Keys `0..keys` are set, each once.
    pub keys: u64,
    /// Key prefix.
    pub key_prefix: String,
    /// Digits the key index is padded to.
    pub key_width: usize,
    /// Value size in bytes.
    pub value_size: usize,
    /// Connections (each on its own thread), each taking a contiguous range of keys.
    pub conns: usize,
    /// Sets written per batch before reading their replies.
    pub depth: usize,
}

/// What a fill did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FillReport {
    /// Sets answered.
    pub sets: u64,
    /// `STORED` replies.
    pub stored: u64,
    /// Error replies (e.g. `SERVER_ERROR out of memory` under `-M`).
    pub errors: u64,
    /// Wall time in seconds.
    pub secs: f64,
}

fn connect(addr: SocketAddr) -> Result<TcpStream, BenchError> {
    let s =
        TcpStream::connect(addr).map_err(|e| BenchError::io(format!("connect to {addr}"), e))?;
    s.set_nodelay(true)
        .map_err(|e| BenchError::io("TCP_NODELAY", e))?;
    Ok(s)
}

/// Reads from `s` into `buf` until `parse` yields a value; `parse` returns the value and
/// the bytes it used, which are removed from the front of `buf`.
fn read_until<T>(
    s: &mut TcpStream,
    buf: &mut Vec<u8>,
    addr: SocketAddr,
    mut parse: impl FnMut(&[u8]) -> Result<Option<(T, usize)>, BenchError>,
) -> Result<T, BenchError> {
    let mut chunk = [0u8; 64 * 1024];
    loop {
        if let Some((v, used)) = parse(buf)? {
            buf.drain(..used);
            return Ok(v);
        }
        let n = s
            .read(&mut chunk)
            .map_err(|e| BenchError::io(format!("read from {addr}"), e))?;
        if n == 0 {
            return Err(BenchError::Closed(addr.to_string()));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Sets every key once, pipelined, and counts the replies.
pub fn fill(cfg: &FillConfig) -> Result<FillReport, BenchError> {
    let start = Instant::now();
    let conns = cfg.conns.max(1) as u64;
    let per = cfg.keys.div_ceil(conns);
    let results: Vec<Result<FillReport, BenchError>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..conns)
            .map(|c| {
                let lo = (c * per).min(cfg.keys);
                let hi = ((c + 1) * per).min(cfg.keys);
                s.spawn(move || fill_range(cfg, lo, hi))
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(BenchError::Config("fill thread panicked".into())))
            })
            .collect()
    });
    let mut out = FillReport::default();
    for r in results {
        let r = r?;
        out.sets += r.sets;
        out.stored += r.stored;
        out.errors += r.errors;
    }
    out.secs = start.elapsed().as_secs_f64();
    Ok(out)
}

fn fill_range(cfg: &FillConfig, lo: u64, hi: u64) -> Result<FillReport, BenchError> {
    let mut out = FillReport::default();
    if lo >= hi {
        return Ok(out);
    }
    let addr = cfg.server;
    let mut s = connect(addr)?;
    let value = vec![b'v'; cfg.value_size];
    let prefix = cfg.key_prefix.as_bytes();
    let depth = cfg.depth.max(1) as u64;
    let mut wbuf = Vec::new();
    let mut rbuf = Vec::new();
    let mut i = lo;
    while i < hi {
        let n = depth.min(hi - i);
        wbuf.clear();
        for k in i..i + n {
            text::encode_set(&mut wbuf, prefix, k, cfg.key_width, &value);
        }
        s.write_all(&wbuf)
            .map_err(|e| BenchError::io(format!("write to {addr}"), e))?;
        for _ in 0..n {
            let r = read_until(&mut s, &mut rbuf, addr, |b| text::parse_reply(b, Op::Set))?;
            out.sets += 1;
            match r {
                Reply::Stored => out.stored += 1,
                Reply::Error => out.errors += 1,
                _ => {}
            }
        }
        i += n;
    }
    Ok(out)
}

/// How many of keys `0..keys` the server still returns, by multi-gets of `batch` keys.
pub fn count_present(
    server: SocketAddr,
    keys: u64,
    key_prefix: &str,
    key_width: usize,
    batch: u64,
) -> Result<u64, BenchError> {
    let mut s = connect(server)?;
    let batch = batch.max(1);
    let mut wbuf = Vec::new();
    let mut rbuf = Vec::new();
    let mut hits = 0;
    let mut i = 0;
    while i < keys {
        let n = batch.min(keys - i);
        wbuf.clear();
        text::encode_multi_get(&mut wbuf, key_prefix.as_bytes(), i..i + n, key_width);
        s.write_all(&wbuf)
            .map_err(|e| BenchError::io(format!("write to {server}"), e))?;
        hits += read_until(&mut s, &mut rbuf, server, text::parse_multi_get)?;
        i += n;
    }
    Ok(hits)
}
