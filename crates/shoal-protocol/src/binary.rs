//! memcached's binary protocol: request framing, decoding into typed commands
//! ([`command`]) and reply encoding ([`reply`]), with no I/O.
//!
//! A request is a 24-byte header (magic `0x80`) followed by a body of extras, key and
//! value whose lengths the header gives. [`parse_binary`] validates the framing exactly as
//! memcached does before anything is buffered: a key over 250 bytes or lengths that
//! disagree are a protocol error that closes the connection; a value larger than the item
//! limit is rejected with its body swallowed, never buffered.

use crate::limits::{Limits, MAX_KEY_LEN};

pub mod command;
pub mod reply;

pub use command::{decode, Attrs, Command, Malformed};

/// Request magic byte.
pub const REQUEST_MAGIC: u8 = 0x80;
/// Response magic byte.
pub const RESPONSE_MAGIC: u8 = 0x81;
/// Header length.
pub const HEADER_LEN: usize = 24;

/// Binary opcodes memcached serves.
#[allow(missing_docs)]
pub mod opcode {
    pub const GET: u8 = 0x00;
    pub const SET: u8 = 0x01;
    pub const ADD: u8 = 0x02;
    pub const REPLACE: u8 = 0x03;
    pub const DELETE: u8 = 0x04;
    pub const INCREMENT: u8 = 0x05;
    pub const DECREMENT: u8 = 0x06;
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
    pub const INCREMENTQ: u8 = 0x15;
    pub const DECREMENTQ: u8 = 0x16;
    pub const QUITQ: u8 = 0x17;
    pub const FLUSHQ: u8 = 0x18;
    pub const APPENDQ: u8 = 0x19;
    pub const PREPENDQ: u8 = 0x1a;
    /// Not served by memcached 1.6.45 (answered `Unknown command`).
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

/// Response status codes, with memcached's error texts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum Status {
    /// Success.
    Ok = 0x0000,
    /// Key not found.
    KeyNotFound = 0x0001,
    /// Key exists (add of a present key, CAS mismatch).
    KeyExists = 0x0002,
    /// Value too large.
    TooLarge = 0x0003,
    /// Invalid arguments.
    InvalidArguments = 0x0004,
    /// Item not stored.
    NotStored = 0x0005,
    /// Incr/decr on a non-numeric value.
    NonNumeric = 0x0006,
    /// Authentication failed (or the command needs authentication).
    AuthError = 0x0020,
    /// SASL continues.
    AuthContinue = 0x0021,
    /// Unknown command.
    UnknownCommand = 0x0081,
    /// Out of memory.
    OutOfMemory = 0x0082,
    /// Not supported (the protocol's code; memcached itself never sends it).
    NotSupported = 0x0083,
    /// Internal error (the protocol's code; what a proxy answers when a server's reply
    /// cannot be translated).
    InternalError = 0x0084,
    /// Busy (the protocol's code).
    Busy = 0x0085,
    /// Temporary failure (the protocol's code; what a proxy answers when no server could
    /// be reached: the request may succeed if retried).
    TemporaryFailure = 0x0086,
}

impl Status {
    /// The body memcached sends with this status.
    pub fn message(self) -> &'static [u8] {
        match self {
            Status::Ok => b"",
            Status::KeyNotFound => b"Not found",
            Status::KeyExists => b"Data exists for key.",
            Status::TooLarge => b"Too large.",
            Status::InvalidArguments => b"Invalid arguments",
            Status::NotStored => b"Not stored.",
            Status::NonNumeric => b"Non-numeric server-side value for incr or decr",
            Status::AuthError => b"Auth failure.",
            Status::AuthContinue => b"Auth continue",
            Status::UnknownCommand => b"Unknown command",
            Status::OutOfMemory => b"Out of memory",
            Status::NotSupported => b"Not supported",
            Status::InternalError => b"Internal error",
            Status::Busy => b"Busy",
            Status::TemporaryFailure => b"Temporary failure",
        }
    }
}

/// A complete binary request, borrowing its body from the read buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BinaryRequest<'a> {
    /// The opcode.
    pub opcode: u8,
    /// Opaque, echoed in the response.
    pub opaque: u32,
    /// CAS unique (0 = none).
    pub cas: u64,
    /// Extras.
    pub extras: &'a [u8],
    /// Key.
    pub key: &'a [u8],
    /// Value.
    pub value: &'a [u8],
}

impl BinaryRequest<'_> {
    /// Big-endian u32 at `offset` of the extras, if present.
    pub fn extra_u32(&self, offset: usize) -> Option<u32> {
        let b = self.extras.get(offset..offset + 4)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Big-endian u64 at `offset` of the extras, if present.
    pub fn extra_u64(&self, offset: usize) -> Option<u64> {
        let b = self.extras.get(offset..offset + 8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Some(u64::from_be_bytes(a))
    }
}

/// The result of [`parse_binary`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryParsed<'a> {
    /// A complete request using `consumed` bytes.
    Request {
        /// The request.
        request: BinaryRequest<'a>,
        /// Bytes used.
        consumed: usize,
    },
    /// More bytes needed; `needed` is the total required if known, else 0.
    Incomplete {
        /// Total bytes required.
        needed: usize,
    },
    /// A storage request whose value exceeds the limit: reply `Too large.` (even for quiet
    /// opcodes), drop `consumed` bytes (header, extras, key), and swallow `swallow` more.
    TooLarge {
        /// Opcode.
        opcode: u8,
        /// Opaque.
        opaque: u32,
        /// The key (memcached removes the old value of a `set`).
        key: &'a [u8],
        /// Bytes to drop now.
        consumed: usize,
        /// Value bytes still to discard.
        swallow: usize,
    },
    /// Framing that cannot be trusted: reply `Invalid arguments` (with `opaque` and
    /// `opcode` when the header was readable) and close the connection, as memcached does.
    Invalid {
        /// Opcode of the bad header.
        opcode: u8,
        /// Opaque of the bad header.
        opaque: u32,
    },
}

fn is_storage(op: u8) -> bool {
    use opcode::*;
    matches!(
        op,
        SET | ADD | REPLACE | APPEND | PREPEND | SETQ | ADDQ | REPLACEQ | APPENDQ | PREPENDQ
    )
}

/// Largest body accepted for requests that carry no value (keys are ≤ 250 bytes and
/// extras ≤ 20): anything bigger is garbage and must not be buffered.
const MAX_NON_VALUE_BODY: usize = 1024;

/// Parses one binary request from the start of `buf` (which starts with `0x80`).
///
/// Guarantees: never panics, never allocates; never asks for more than the item limit plus
/// a small header, so a hostile length cannot make the caller buffer without bound.
pub fn parse_binary<'a>(buf: &'a [u8], limits: &Limits) -> BinaryParsed<'a> {
    if buf.len() < HEADER_LEN {
        return BinaryParsed::Incomplete { needed: HEADER_LEN };
    }
    let h = &buf[..HEADER_LEN];
    let opcode = h[1];
    let key_len = u16::from_be_bytes([h[2], h[3]]) as usize;
    let extras_len = h[4] as usize;
    let body_len = u32::from_be_bytes([h[8], h[9], h[10], h[11]]) as usize;
    let opaque = u32::from_be_bytes([h[12], h[13], h[14], h[15]]);
    let mut cas_bytes = [0u8; 8];
    cas_bytes.copy_from_slice(&h[16..24]);
    let cas = u64::from_be_bytes(cas_bytes);
    let invalid = BinaryParsed::Invalid { opcode, opaque };
    if h[0] != REQUEST_MAGIC || key_len > MAX_KEY_LEN || key_len + extras_len > body_len {
        return invalid;
    }
    let value_len = body_len - key_len - extras_len;
    if value_len > 0 && !is_storage(opcode) && body_len > MAX_NON_VALUE_BODY {
        // SASL bodies are small too; nothing else carries a value.
        return invalid;
    }
    if is_storage(opcode) && value_len > limits.max_value_len {
        let head = HEADER_LEN + extras_len + key_len;
        if buf.len() < head {
            return BinaryParsed::Incomplete { needed: head };
        }
        return BinaryParsed::TooLarge {
            opcode,
            opaque,
            key: &buf[HEADER_LEN + extras_len..head],
            consumed: head,
            swallow: value_len,
        };
    }
    let total = HEADER_LEN + body_len;
    if buf.len() < total {
        return BinaryParsed::Incomplete { needed: total };
    }
    let body = &buf[HEADER_LEN..total];
    BinaryParsed::Request {
        request: BinaryRequest {
            opcode,
            opaque,
            cas,
            extras: &body[..extras_len],
            key: &body[extras_len..extras_len + key_len],
            value: &body[extras_len + key_len..],
        },
        consumed: total,
    }
}

/// Appends a response packet.
#[allow(clippy::too_many_arguments)]
pub fn response(
    out: &mut Vec<u8>,
    opcode: u8,
    status: Status,
    opaque: u32,
    cas: u64,
    extras: &[u8],
    key: &[u8],
    value: &[u8],
) {
    response_header(
        out,
        opcode,
        status,
        opaque,
        cas,
        extras.len(),
        key.len(),
        value.len(),
    );
    out.extend_from_slice(extras);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
}

/// Appends only a response header, for callers that append the body themselves (a value
/// copied straight from the store).
#[allow(clippy::too_many_arguments)]
pub fn response_header(
    out: &mut Vec<u8>,
    opcode: u8,
    status: Status,
    opaque: u32,
    cas: u64,
    extras_len: usize,
    key_len: usize,
    value_len: usize,
) {
    let body = (extras_len + key_len + value_len) as u32;
    out.push(RESPONSE_MAGIC);
    out.push(opcode);
    out.extend_from_slice(&(key_len as u16).to_be_bytes());
    out.push(extras_len as u8);
    out.push(0);
    out.extend_from_slice(&(status as u16).to_be_bytes());
    out.extend_from_slice(&body.to_be_bytes());
    out.extend_from_slice(&opaque.to_be_bytes());
    out.extend_from_slice(&cas.to_be_bytes());
}

/// Appends an error response whose body is memcached's text for `status`.
pub fn error(out: &mut Vec<u8>, opcode: u8, status: Status, opaque: u32) {
    response(out, opcode, status, opaque, 0, &[], &[], status.message());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(op: u8, extras: &[u8], key: &[u8], value: &[u8], opaque: u32, cas: u64) -> Vec<u8> {
        let mut v = vec![REQUEST_MAGIC, op];
        v.extend_from_slice(&(key.len() as u16).to_be_bytes());
        v.push(extras.len() as u8);
        v.extend_from_slice(&[0, 0, 0]);
        v.extend_from_slice(&((extras.len() + key.len() + value.len()) as u32).to_be_bytes());
        v.extend_from_slice(&opaque.to_be_bytes());
        v.extend_from_slice(&cas.to_be_bytes());
        v.extend_from_slice(extras);
        v.extend_from_slice(key);
        v.extend_from_slice(value);
        v
    }

    #[test]
    fn parses_a_set() {
        let extras = [0, 0, 0, 7, 0, 0, 0, 0];
        let buf = request(opcode::SET, &extras, b"key", b"value", 42, 9);
        let BinaryParsed::Request { request, consumed } = parse_binary(&buf, &Limits::default())
        else {
            panic!("not a request");
        };
        assert_eq!(consumed, buf.len());
        assert_eq!(
            (request.key, request.value, request.opaque, request.cas),
            (&b"key"[..], &b"value"[..], 42, 9)
        );
        assert_eq!(request.extra_u32(0), Some(7));
        assert_eq!(request.extra_u32(4), Some(0));
        assert_eq!(request.extra_u32(6), None);
    }

    #[test]
    fn incomplete_until_whole() {
        let buf = request(opcode::GET, &[], b"k", &[], 0, 0);
        for cut in 0..buf.len() {
            assert!(matches!(
                parse_binary(&buf[..cut], &Limits::default()),
                BinaryParsed::Incomplete { .. }
            ));
        }
    }

    #[test]
    fn inconsistent_lengths_are_invalid() {
        let mut buf = request(opcode::GET, &[], b"key", &[], 5, 0);
        buf[11] = 1; // body length 1 < key length 3
        assert_eq!(
            parse_binary(&buf, &Limits::default()),
            BinaryParsed::Invalid {
                opcode: 0,
                opaque: 5
            }
        );
        let long_key = vec![b'k'; 251];
        let buf = request(opcode::GET, &[], &long_key, &[], 0, 0);
        assert!(matches!(
            parse_binary(&buf, &Limits::default()),
            BinaryParsed::Invalid { .. }
        ));
        let mut huge_get = request(opcode::GET, &[], b"k", &[], 0, 0);
        huge_get[8..12].copy_from_slice(&(1u32 << 30).to_be_bytes());
        assert!(matches!(
            parse_binary(&huge_get, &Limits::default()),
            BinaryParsed::Invalid { .. }
        ));
    }

    #[test]
    fn oversized_values_are_swallowed_not_buffered() {
        let limits = Limits { max_value_len: 10 };
        let extras = [0u8; 8];
        let mut buf = request(opcode::SET, &extras, b"key", &[0u8; 11], 1, 0);
        buf.truncate(HEADER_LEN + 8 + 3);
        assert_eq!(
            parse_binary(&buf, &limits),
            BinaryParsed::TooLarge {
                opcode: opcode::SET,
                opaque: 1,
                key: b"key",
                consumed: 35,
                swallow: 11
            }
        );
    }

    #[test]
    fn responses_have_memcached_layout() {
        let mut out = Vec::new();
        error(&mut out, opcode::GET, Status::KeyNotFound, 7);
        assert_eq!(out[0], RESPONSE_MAGIC);
        assert_eq!(&out[6..8], &[0, 1]);
        assert_eq!(&out[8..12], &9u32.to_be_bytes());
        assert_eq!(&out[12..16], &7u32.to_be_bytes());
        assert_eq!(&out[24..], b"Not found");
    }

    proptest::proptest! {
        #[test]
        fn never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let mut buf = bytes;
            if let Some(b) = buf.first_mut() { *b = REQUEST_MAGIC; }
            match parse_binary(&buf, &Limits::default()) {
                BinaryParsed::Request { consumed, .. } => proptest::prop_assert!(consumed <= buf.len()),
                BinaryParsed::TooLarge { consumed, .. } => proptest::prop_assert!(consumed <= buf.len()),
                _ => {}
            }
        }
    }
}
