//! memcached binary protocol packets for tests: request building and response reading.

use super::{show, Conn};

/// Request magic.
pub const REQ: u8 = 0x80;
/// Response magic.
pub const RES: u8 = 0x81;

/// Opcodes.
#[allow(missing_docs)]
pub mod op {
    pub const GET: u8 = 0x00;
    pub const SET: u8 = 0x01;
    pub const ADD: u8 = 0x02;
    pub const REPLACE: u8 = 0x03;
    pub const DELETE: u8 = 0x04;
    pub const INCR: u8 = 0x05;
    pub const DECR: u8 = 0x06;
    pub const QUIT: u8 = 0x07;
    pub const FLUSH: u8 = 0x08;
    pub const GETQ: u8 = 0x09;
    pub const NOOP: u8 = 0x0a;
    pub const VERSION: u8 = 0x0b;
    pub const GETK: u8 = 0x0c;
    pub const GETKQ: u8 = 0x0d;
    pub const APPEND: u8 = 0x0e;
    pub const PREPEND: u8 = 0x0f;
    pub const STAT: u8 = 0x10;
    pub const SETQ: u8 = 0x11;
    pub const ADDQ: u8 = 0x12;
    pub const REPLACEQ: u8 = 0x13;
    pub const DELETEQ: u8 = 0x14;
    pub const INCRQ: u8 = 0x15;
    pub const DECRQ: u8 = 0x16;
    pub const QUITQ: u8 = 0x17;
    pub const FLUSHQ: u8 = 0x18;
    pub const APPENDQ: u8 = 0x19;
    pub const PREPENDQ: u8 = 0x1a;
    pub const VERBOSITY: u8 = 0x1b;
    pub const TOUCH: u8 = 0x1c;
    pub const GAT: u8 = 0x1d;
    pub const GATQ: u8 = 0x1e;
    pub const SASL_LIST_MECHS: u8 = 0x20;
    pub const SASL_AUTH: u8 = 0x21;
    pub const SASL_STEP: u8 = 0x22;
    pub const GATK: u8 = 0x23;
    pub const GATKQ: u8 = 0x24;
}

/// Status codes.
#[allow(missing_docs)]
pub mod status {
    pub const OK: u16 = 0x0000;
    pub const NOT_FOUND: u16 = 0x0001;
    pub const EXISTS: u16 = 0x0002;
    pub const TOO_LARGE: u16 = 0x0003;
    pub const INVALID: u16 = 0x0004;
    pub const NOT_STORED: u16 = 0x0005;
    pub const NON_NUMERIC: u16 = 0x0006;
    pub const AUTH_ERROR: u16 = 0x0020;
    pub const UNKNOWN: u16 = 0x0081;
}

/// A request packet with explicit fields.
pub fn packet(
    opcode: u8,
    extras: &[u8],
    key: &[u8],
    value: &[u8],
    opaque: u32,
    cas: u64,
) -> Vec<u8> {
    let mut v = vec![REQ, opcode];
    v.extend_from_slice(&u16::try_from(key.len()).expect("key len").to_be_bytes());
    v.push(u8::try_from(extras.len()).expect("extras len"));
    v.extend_from_slice(&[0, 0, 0]);
    let body = extras.len() + key.len() + value.len();
    v.extend_from_slice(&u32::try_from(body).expect("body").to_be_bytes());
    v.extend_from_slice(&opaque.to_be_bytes());
    v.extend_from_slice(&cas.to_be_bytes());
    v.extend_from_slice(extras);
    v.extend_from_slice(key);
    v.extend_from_slice(value);
    v
}

/// A request with no extras, value, opaque or CAS.
pub fn simple(opcode: u8, key: &[u8]) -> Vec<u8> {
    packet(opcode, &[], key, &[], 0, 0)
}

/// Storage extras: flags and expiration.
pub fn store_extras(flags: u32, exptime: u32) -> Vec<u8> {
    let mut e = flags.to_be_bytes().to_vec();
    e.extend_from_slice(&exptime.to_be_bytes());
    e
}

/// A set/add/replace (or quiet form) packet.
pub fn store(opcode: u8, key: &[u8], value: &[u8], flags: u32, opaque: u32, cas: u64) -> Vec<u8> {
    packet(opcode, &store_extras(flags, 0), key, value, opaque, cas)
}

/// incr/decr extras: delta, initial value, expiration.
pub fn arith_extras(delta: u64, initial: u64, exptime: u32) -> Vec<u8> {
    let mut e = delta.to_be_bytes().to_vec();
    e.extend_from_slice(&initial.to_be_bytes());
    e.extend_from_slice(&exptime.to_be_bytes());
    e
}

/// One response packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resp {
    /// Opcode echoed.
    pub opcode: u8,
    /// Status.
    pub status: u16,
    /// Opaque echoed.
    pub opaque: u32,
    /// CAS.
    pub cas: u64,
    /// Extras.
    pub extras: Vec<u8>,
    /// Key.
    pub key: Vec<u8>,
    /// Value (or error text).
    pub value: Vec<u8>,
}

impl Resp {
    /// The flags in a get response's extras.
    pub fn flags(&self) -> u32 {
        assert_eq!(self.extras.len(), 4, "no flags in {self:?}");
        u32::from_be_bytes([
            self.extras[0],
            self.extras[1],
            self.extras[2],
            self.extras[3],
        ])
    }

    /// The value as a big-endian u64 (incr/decr).
    pub fn counter(&self) -> u64 {
        assert_eq!(self.value.len(), 8, "not a counter: {self:?}");
        let mut a = [0u8; 8];
        a.copy_from_slice(&self.value);
        u64::from_be_bytes(a)
    }

    /// The value as text, for assertion messages and error texts.
    pub fn text(&self) -> String {
        show(&self.value)
    }
}

/// Reads one response packet (panics on timeout/EOF or a bad magic byte).
pub fn read(c: &mut Conn) -> Resp {
    let h = c.read_n(24);
    assert_eq!(h[0], RES, "bad response magic in {:02x?}", h);
    let key_len = usize::from(u16::from_be_bytes([h[2], h[3]]));
    let extras_len = usize::from(h[4]);
    let body = u32::from_be_bytes([h[8], h[9], h[10], h[11]]) as usize;
    assert!(
        key_len + extras_len <= body,
        "inconsistent response header {h:02x?}"
    );
    let b = if body > 0 { c.read_n(body) } else { Vec::new() };
    let mut cas = [0u8; 8];
    cas.copy_from_slice(&h[16..24]);
    Resp {
        opcode: h[1],
        status: u16::from_be_bytes([h[6], h[7]]),
        opaque: u32::from_be_bytes([h[12], h[13], h[14], h[15]]),
        cas: u64::from_be_bytes(cas),
        extras: b[..extras_len].to_vec(),
        key: b[extras_len..extras_len + key_len].to_vec(),
        value: b[extras_len + key_len..].to_vec(),
    }
}

/// Sends `req` and reads one response.
pub fn rt(c: &mut Conn, req: &[u8]) -> Resp {
    c.send(req);
    read(c)
}

/// Sends `req` and asserts the single response has `status`.
#[track_caller]
pub fn expect_status(c: &mut Conn, req: &[u8], status: u16) -> Resp {
    let r = rt(c, req);
    assert_eq!(
        r.status,
        status,
        "unexpected status in {r:?} ({})",
        r.text()
    );
    r
}

/// Sends a noop and asserts the next response is the noop's, i.e. nothing else was pending.
#[track_caller]
pub fn expect_only_noop(c: &mut Conn) {
    let r = rt(c, &packet(op::NOOP, &[], &[], &[], NOOP_OPAQUE, 0));
    assert_eq!(
        (r.opcode, r.status, r.opaque),
        (op::NOOP, status::OK, NOOP_OPAQUE),
        "{r:?}"
    );
}

/// The opaque of [`expect_only_noop`]'s noop.
const NOOP_OPAQUE: u32 = 0x0000_beef;

/// Binary set asserting success; returns the CAS.
#[track_caller]
pub fn set(c: &mut Conn, key: &[u8], value: &[u8], flags: u32) -> u64 {
    let r = expect_status(c, &store(op::SET, key, value, flags, 0, 0), status::OK);
    r.cas
}

/// Binary get: Some((flags, value, cas)) or None on a miss.
pub fn get(c: &mut Conn, key: &[u8]) -> Option<(u32, Vec<u8>, u64)> {
    let r = rt(c, &simple(op::GET, key));
    match r.status {
        status::OK => Some((r.flags(), r.value.clone(), r.cas)),
        status::NOT_FOUND => None,
        s => panic!("get status {s:#x}: {r:?}"),
    }
}
