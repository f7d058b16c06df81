//! The client side of memcached's binary protocol: request encoding and response framing,
//! with no I/O. The server side (request framing, response encoding) is in
//! [`crate::binary`]; both share its opcodes and status codes.

use crate::binary::{HEADER_LEN, REQUEST_MAGIC, RESPONSE_MAGIC};
use crate::limits::MAX_KEY_LEN;

/// Largest response body [`parse_response`] accepts: memcached's hard item-size ceiling
/// (1 GiB) plus room for extras and a key. A bigger length is garbage, and refusing it
/// keeps a misbehaving server from making the client buffer without bound.
pub const MAX_RESPONSE_BODY: usize = (1 << 30) + 1024;

/// Appends one request packet: header (magic `0x80`, data type 0, vbucket 0), then
/// extras, key and value.
///
/// Guarantees: the header's lengths describe exactly the bytes appended. The caller keeps
/// `key` within 250 bytes and `extras` within 255; longer inputs are truncated in the
/// header fields, which the server then rejects, so they must be checked before calling.
pub fn encode_request(
    out: &mut Vec<u8>,
    opcode: u8,
    opaque: u32,
    cas: u64,
    extras: &[u8],
    key: &[u8],
    value: &[u8],
) {
    let body = (extras.len() + key.len() + value.len()) as u32;
    out.reserve(HEADER_LEN + body as usize);
    out.push(REQUEST_MAGIC);
    out.push(opcode);
    out.extend_from_slice(&(key.len() as u16).to_be_bytes());
    out.push(extras.len() as u8);
    out.push(0);
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(&body.to_be_bytes());
    out.extend_from_slice(&opaque.to_be_bytes());
    out.extend_from_slice(&cas.to_be_bytes());
    out.extend_from_slice(extras);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
}

/// One complete response packet, borrowing its body from the read buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BinaryResponse<'a> {
    /// The opcode the response answers.
    pub opcode: u8,
    /// The status code (see [`crate::binary::Status`]; servers may send others).
    pub status: u16,
    /// The opaque copied from the request.
    pub opaque: u32,
    /// The item's CAS unique (0 where the command has none).
    pub cas: u64,
    /// Extras (a get's 4-byte flags).
    pub extras: &'a [u8],
    /// Key (getk/getkq).
    pub key: &'a [u8],
    /// Value, a counter's 8 bytes, or an error's text.
    pub value: &'a [u8],
}

/// The result of [`parse_response`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseParsed<'a> {
    /// A complete response using the first `consumed` bytes.
    Response {
        /// The response.
        response: BinaryResponse<'a>,
        /// Bytes used.
        consumed: usize,
    },
    /// More bytes are needed.
    Incomplete,
    /// Not a response: wrong magic, lengths that disagree, a key over 250 bytes or a body
    /// over [`MAX_RESPONSE_BODY`].
    Invalid,
}

/// Frames the response packet at the start of `buf`.
///
/// Guarantees: never panics or allocates; `Invalid` as soon as the header is readable
/// and wrong, so garbage is detected without waiting for a body that will never come.
pub fn parse_response(buf: &[u8]) -> ResponseParsed<'_> {
    if buf.first().is_some_and(|&m| m != RESPONSE_MAGIC) {
        return ResponseParsed::Invalid;
    }
    if buf.len() < HEADER_LEN {
        return ResponseParsed::Incomplete;
    }
    let h = &buf[..HEADER_LEN];
    let key_len = u16::from_be_bytes([h[2], h[3]]) as usize;
    let extras_len = h[4] as usize;
    let body_len = u32::from_be_bytes([h[8], h[9], h[10], h[11]]) as usize;
    if key_len > MAX_KEY_LEN || key_len + extras_len > body_len || body_len > MAX_RESPONSE_BODY {
        return ResponseParsed::Invalid;
    }
    let total = HEADER_LEN + body_len;
    let Some(body) = buf.get(HEADER_LEN..total) else {
        return ResponseParsed::Incomplete;
    };
    let mut cas = [0u8; 8];
    cas.copy_from_slice(&h[16..24]);
    ResponseParsed::Response {
        response: BinaryResponse {
            opcode: h[1],
            status: u16::from_be_bytes([h[6], h[7]]),
            opaque: u32::from_be_bytes([h[12], h[13], h[14], h[15]]),
            cas: u64::from_be_bytes(cas),
            extras: &body[..extras_len],
            key: &body[extras_len..extras_len + key_len],
            value: &body[extras_len + key_len..],
        },
        consumed: total,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binary::{opcode, parse_binary, response, BinaryParsed, Status};
    use crate::limits::Limits;

    #[test]
    fn requests_parse_on_the_server_side() {
        let mut out = Vec::new();
        encode_request(
            &mut out,
            opcode::SET,
            7,
            99,
            &[0, 0, 0, 5, 0, 0, 0, 0],
            b"k",
            b"v",
        );
        let BinaryParsed::Request { request, consumed } = parse_binary(&out, &Limits::default())
        else {
            panic!("not a request");
        };
        assert_eq!(consumed, out.len());
        assert_eq!(
            (request.opcode, request.opaque, request.cas),
            (opcode::SET, 7, 99)
        );
        assert_eq!((request.key, request.value), (&b"k"[..], &b"v"[..]));
        assert_eq!(request.extra_u32(0), Some(5));
    }

    #[test]
    fn responses_round_trip_and_frame() {
        let mut out = Vec::new();
        response(
            &mut out,
            opcode::GETK,
            Status::Ok,
            3,
            42,
            &[0, 0, 0, 1],
            b"key",
            b"value",
        );
        let ResponseParsed::Response {
            response: r,
            consumed,
        } = parse_response(&out)
        else {
            panic!("not a response");
        };
        assert_eq!(consumed, out.len());
        assert_eq!(
            (r.opcode, r.status, r.opaque, r.cas),
            (opcode::GETK, 0, 3, 42)
        );
        assert_eq!(
            (r.extras, r.key, r.value),
            (&[0, 0, 0, 1][..], &b"key"[..], &b"value"[..])
        );
        for cut in 0..out.len() {
            assert_eq!(parse_response(&out[..cut]), ResponseParsed::Incomplete);
        }
    }

    #[test]
    fn garbage_is_invalid_early() {
        assert_eq!(parse_response(b"STORED\r\n"), ResponseParsed::Invalid);
        let mut h = vec![RESPONSE_MAGIC, 0, 0, 10, 0, 0, 0, 0];
        h.extend_from_slice(&5u32.to_be_bytes()); // key 10 > body 5
        h.resize(HEADER_LEN, 0);
        assert_eq!(parse_response(&h), ResponseParsed::Invalid);
        let mut h = vec![RESPONSE_MAGIC, 0, 0, 0, 0, 0, 0, 0];
        h.extend_from_slice(&u32::MAX.to_be_bytes());
        h.resize(HEADER_LEN, 0);
        assert_eq!(parse_response(&h), ResponseParsed::Invalid);
    }
}
