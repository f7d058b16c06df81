//! A blocking request/reply connection for the seed experiments that drive a server one
//! step at a time (the hash experiment's pipelined mget, the CAS contention threads).

use crate::BenchError;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One TCP connection with a read buffer; every read waits at most 10 s.
pub struct SyncConn {
    s: TcpStream,
    buf: Vec<u8>,
    addr: SocketAddr,
}

impl SyncConn {
    /// Connects to `addr` with `TCP_NODELAY`.
    pub fn open(addr: SocketAddr) -> Result<Self, BenchError> {
        let s = TcpStream::connect(addr)
            .map_err(|e| BenchError::io(format!("connect to {addr}"), e))?;
        let _ = s.set_nodelay(true);
        let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
        Ok(SyncConn {
            s,
            buf: Vec::with_capacity(4096),
            addr,
        })
    }

    /// Writes `req` whole.
    pub fn send(&mut self, req: &[u8]) -> Result<(), BenchError> {
        self.s
            .write_all(req)
            .map_err(|e| BenchError::io(format!("write to {}", self.addr), e))
    }

    /// Reads until `parse` finds a complete reply at the start of the buffer (it returns
    /// the value and the bytes used), then drops those bytes.
    pub fn read<T>(
        &mut self,
        mut parse: impl FnMut(&[u8]) -> Result<Option<(T, usize)>, BenchError>,
    ) -> Result<T, BenchError> {
        let mut chunk = [0u8; 32 * 1024];
        loop {
            if let Some((v, used)) = parse(&self.buf)? {
                self.buf.drain(..used);
                return Ok(v);
            }
            let n = self
                .s
                .read(&mut chunk)
                .map_err(|e| BenchError::io(format!("read from {}", self.addr), e))?;
            if n == 0 {
                return Err(BenchError::Closed(self.addr.to_string()));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Reads `count` complete lines, returned without their line ends.
    pub fn lines(&mut self, count: usize) -> Result<Vec<String>, BenchError> {
        self.read(|b| {
            let mut out = Vec::with_capacity(count);
            let mut pos = 0;
            while out.len() < count {
                let Some(nl) = b[pos..].iter().position(|&c| c == b'\n') else {
                    return Ok(None);
                };
                out.push(
                    String::from_utf8_lossy(&b[pos..pos + nl])
                        .trim_end()
                        .to_string(),
                );
                pos += nl + 1;
            }
            Ok(Some((out, pos)))
        })
    }

    /// Reads one line.
    pub fn line(&mut self) -> Result<String, BenchError> {
        Ok(self.lines(1)?.remove(0))
    }
}
