//! A blocking binary-protocol client for packet-level tests, over any stream (TCP or a
//! TLS session), with the timeouts of the underlying socket.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

pub use shoal_protocol::binary::opcode as op;

use super::IO_TIMEOUT;

/// Status codes.
pub mod status {
    pub const OK: u16 = 0x00;
    pub const NOT_FOUND: u16 = 0x01;
    pub const EXISTS: u16 = 0x02;
    pub const TOO_LARGE: u16 = 0x03;
    pub const INVALID: u16 = 0x04;
    pub const NOT_STORED: u16 = 0x05;
    pub const NON_NUMERIC: u16 = 0x06;
    pub const AUTH_ERROR: u16 = 0x20;
    pub const UNKNOWN: u16 = 0x81;
    pub const OUT_OF_MEMORY: u16 = 0x82;
    pub const TEMPORARY_FAILURE: u16 = 0x86;
}

/// One response packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resp {
    pub opcode: u8,
    pub status: u16,
    pub opaque: u32,
    pub cas: u64,
    pub extras: Vec<u8>,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

impl Resp {
    /// The flags of a get hit.
    pub fn flags(&self) -> u32 {
        u32::from_be_bytes(self.extras[..4].try_into().expect("4 bytes of flags"))
    }

    /// The counter of an incr/decr reply.
    pub fn counter(&self) -> u64 {
        u64::from_be_bytes(self.value[..8].try_into().expect("8-byte counter"))
    }
}

/// A request packet.
pub fn packet(
    opcode: u8,
    opaque: u32,
    cas: u64,
    extras: &[u8],
    key: &[u8],
    value: &[u8],
) -> Vec<u8> {
    let mut v = Vec::new();
    shoal_protocol::encode_request(&mut v, opcode, opaque, cas, extras, key, value);
    v
}

/// Extras of a storage command.
pub fn store_extras(flags: u32, exptime: u32) -> [u8; 8] {
    let mut e = [0u8; 8];
    e[..4].copy_from_slice(&flags.to_be_bytes());
    e[4..].copy_from_slice(&exptime.to_be_bytes());
    e
}

/// Extras of incr/decr.
pub fn arith_extras(delta: u64, initial: u64, exptime: u32) -> [u8; 20] {
    let mut e = [0u8; 20];
    e[..8].copy_from_slice(&delta.to_be_bytes());
    e[8..16].copy_from_slice(&initial.to_be_bytes());
    e[16..].copy_from_slice(&exptime.to_be_bytes());
    e
}

/// A binary-protocol connection.
pub struct Bin<S: Read + Write = TcpStream> {
    pub s: S,
    buf: Vec<u8>,
}

impl Bin<TcpStream> {
    pub fn connect(addr: SocketAddr) -> Bin<TcpStream> {
        let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
        s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        s.set_write_timeout(Some(IO_TIMEOUT)).expect("timeout");
        let _ = s.set_nodelay(true);
        Bin::over(s)
    }
}

impl<S: Read + Write> Bin<S> {
    pub fn over(s: S) -> Bin<S> {
        Bin { s, buf: Vec::new() }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).expect("write");
        self.s.flush().expect("flush");
    }

    /// Reads more; false on EOF or a reset.
    fn fill(&mut self) -> bool {
        let mut tmp = [0u8; 65536];
        loop {
            match self.s.read(&mut tmp) {
                Ok(0) => return false,
                Ok(n) => {
                    self.buf.extend_from_slice(&tmp[..n]);
                    return true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return false,
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return false,
                Err(e) => panic!(
                    "read failed (timed out?): {e}; have {} bytes",
                    self.buf.len()
                ),
            }
        }
    }

    /// The next response packet; `None` if the connection closed first.
    pub fn try_recv(&mut self) -> Option<Resp> {
        loop {
            if self.buf.len() >= 24 {
                let h = &self.buf[..24];
                assert_eq!(h[0], 0x81, "response magic; have {:?}", &self.buf[..24]);
                let key_len = u16::from_be_bytes([h[2], h[3]]) as usize;
                let extras_len = h[4] as usize;
                let body = u32::from_be_bytes([h[8], h[9], h[10], h[11]]) as usize;
                if self.buf.len() >= 24 + body {
                    let r = Resp {
                        opcode: h[1],
                        status: u16::from_be_bytes([h[6], h[7]]),
                        opaque: u32::from_be_bytes([h[12], h[13], h[14], h[15]]),
                        cas: u64::from_be_bytes(h[16..24].try_into().expect("8")),
                        extras: self.buf[24..24 + extras_len].to_vec(),
                        key: self.buf[24 + extras_len..24 + extras_len + key_len].to_vec(),
                        value: self.buf[24 + extras_len + key_len..24 + body].to_vec(),
                    };
                    self.buf.drain(..24 + body);
                    return Some(r);
                }
            }
            if !self.fill() {
                return None;
            }
        }
    }

    pub fn recv(&mut self) -> Resp {
        self.try_recv()
            .expect("a response, not a closed connection")
    }

    /// Sends one request and reads one response.
    pub fn call(
        &mut self,
        opcode: u8,
        opaque: u32,
        cas: u64,
        extras: &[u8],
        key: &[u8],
        value: &[u8],
    ) -> Resp {
        self.send(&packet(opcode, opaque, cas, extras, key, value));
        let r = self.recv();
        assert_eq!(
            (r.opcode, r.opaque),
            (opcode, opaque),
            "echoed opcode and opaque"
        );
        r
    }

    pub fn set(&mut self, key: &[u8], value: &[u8], flags: u32) -> Resp {
        self.call(op::SET, 0, 0, &store_extras(flags, 0), key, value)
    }

    pub fn get(&mut self, key: &[u8]) -> Resp {
        self.call(op::GET, 0, 0, &[], key, &[])
    }

    /// True once the peer has closed (reads EOF before any further packet).
    pub fn closed(&mut self) -> bool {
        self.buf.clear();
        !self.fill()
    }
}
