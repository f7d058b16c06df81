//! The optional first phase of a run: every key set once, pipelined, over the run's
//! protocol and placement (one blocking connection per server).

use super::{Counts, LoadConfig};
use crate::rng::Rng;
use crate::text::Op;
use crate::BenchError;

/// Sets every key once, pipelined, over the configured protocol and placement: one
/// thread per server. Returns the sets answered and the error replies.
pub fn prefill(cfg: &LoadConfig) -> Result<Counts, BenchError> {
    let results: Vec<Result<Counts, BenchError>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..cfg.servers.len())
            .map(|i| s.spawn(move || prefill_server(cfg, i)))
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(BenchError::Config("prefill thread panicked".into())))
            })
            .collect()
    });
    let mut c = Counts::default();
    for r in results {
        c.add(&r?);
    }
    Ok(c)
}

fn prefill_server(cfg: &LoadConfig, server: usize) -> Result<Counts, BenchError> {
    use std::io::{Read, Write};
    let addr = cfg.servers[server];
    let mut s = std::net::TcpStream::connect(addr)
        .map_err(|e| BenchError::io(format!("connect to {addr}"), e))?;
    let _ = s.set_nodelay(true);
    let mut rng = Rng::new(cfg.seed ^ 0xf111);
    let value = vec![b'v'; cfg.value_size.max];
    let mut key = Vec::new();
    let mut wbuf = Vec::new();
    let mut rbuf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut counts = Counts::default();
    let mut i = 0;
    while i < cfg.keys {
        let mut batch = 0;
        while i < cfg.keys && batch < 64 {
            cfg.key(i, &mut key);
            i += 1;
            if cfg.server_of(&key) != server {
                continue;
            }
            let len = cfg.value_size.next(&mut rng);
            cfg.protocol.encode(&mut wbuf, Op::Set, &key, &value[..len]);
            batch += 1;
        }
        s.write_all(&wbuf)
            .map_err(|e| BenchError::io(format!("write to {addr}"), e))?;
        wbuf.clear();
        while batch > 0 {
            match cfg.protocol.parse(&rbuf, Op::Set)? {
                Some((reply, used)) => {
                    rbuf.drain(..used);
                    counts.record(Op::Set, reply);
                    batch -= 1;
                }
                None => {
                    let n = s
                        .read(&mut chunk)
                        .map_err(|e| BenchError::io(format!("read from {addr}"), e))?;
                    if n == 0 {
                        return Err(BenchError::Closed(addr.to_string()));
                    }
                    rbuf.extend_from_slice(&chunk[..n]);
                }
            }
        }
    }
    Ok(counts)
}
