//! memcached binary protocol: `GET` and `SET` requests and their responses. No I/O.

use crate::text::Reply;
use crate::BenchError;

/// Request magic byte.
pub const REQUEST: u8 = 0x80;
/// Response magic byte.
pub const RESPONSE: u8 = 0x81;
/// `GET` opcode.
pub const OP_GET: u8 = 0x00;
/// `SET` opcode.
pub const OP_SET: u8 = 0x01;
/// `DECREMENT` opcode.
pub const OP_DECR: u8 = 0x06;

fn header(buf: &mut Vec<u8>, op: u8, key_len: usize, extras: u8, body: usize) {
    buf.push(REQUEST);
    buf.push(op);
    buf.extend_from_slice(&(key_len as u16).to_be_bytes());
    buf.push(extras);
    buf.push(0); // data type
    buf.extend_from_slice(&[0, 0]); // vbucket
    buf.extend_from_slice(&(body as u32).to_be_bytes());
    buf.extend_from_slice(&[0; 4]); // opaque
    buf.extend_from_slice(&[0; 8]); // cas
}

/// Appends a `GET` for `key` (at most 250 bytes, checked by the caller).
pub fn encode_get(buf: &mut Vec<u8>, key: &[u8]) {
    header(buf, OP_GET, key.len(), 0, key.len());
    buf.extend_from_slice(key);
}

/// Appends a `SET` of `value` under `key`, flags 0, no expiry.
pub fn encode_set(buf: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    header(buf, OP_SET, key.len(), 8, 8 + key.len() + value.len());
    buf.extend_from_slice(&[0; 8]); // flags, exptime
    buf.extend_from_slice(key);
    buf.extend_from_slice(value);
}

/// Appends a `DECREMENT` of `key` by one (initial 0, expiry 0xffffffff: no auto-create).
pub fn encode_decr(buf: &mut Vec<u8>, key: &[u8]) {
    header(buf, OP_DECR, key.len(), 20, 20 + key.len());
    buf.extend_from_slice(&1u64.to_be_bytes());
    buf.extend_from_slice(&0u64.to_be_bytes());
    buf.extend_from_slice(&u32::MAX.to_be_bytes());
    buf.extend_from_slice(key);
}

/// Parses one response at the start of `buf`. Status 0 is a hit (get) or stored (set);
/// 1 (key not found) a miss; 2, 5 (exists, not stored) not stored; anything else an error.
pub fn parse_reply(buf: &[u8], is_get: bool) -> Result<Option<(Reply, usize)>, BenchError> {
    if buf.len() < 24 {
        return Ok(None);
    }
    if buf[0] != RESPONSE {
        return Err(BenchError::Protocol(format!(
            "binary response magic {:#04x}",
            buf[0]
        )));
    }
    let status = u16::from_be_bytes([buf[6], buf[7]]);
    let body = u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize;
    let need = 24 + body;
    if buf.len() < need {
        return Ok(None);
    }
    let reply = match (status, is_get) {
        (0, true) => Reply::Hit,
        (0, false) => Reply::Stored,
        (1, true) => Reply::Miss,
        (1, false) | (2, _) | (5, _) => Reply::NotStored,
        _ => Reply::Error,
    };
    Ok(Some((reply, need)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_shapes() {
        let mut b = Vec::new();
        encode_get(&mut b, b"abc");
        assert_eq!(b.len(), 27);
        assert_eq!(&b[..2], &[0x80, 0x00]);
        assert_eq!(u32::from_be_bytes([b[8], b[9], b[10], b[11]]), 3);
        b.clear();
        encode_set(&mut b, b"k", b"vv");
        assert_eq!(b.len(), 24 + 8 + 1 + 2);
        assert_eq!(b[4], 8);
        b.clear();
        encode_decr(&mut b, b"k");
        assert_eq!(b.len(), 24 + 20 + 1);
    }

    #[test]
    fn parses_responses() {
        let mut r = vec![0x81, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 6];
        r.extend_from_slice(&[0; 12]);
        r.extend_from_slice(&[0, 0, 0, 0, b'h', b'i']);
        assert_eq!(parse_reply(&r, true).unwrap(), Some((Reply::Hit, 30)));
        for cut in 0..r.len() {
            assert_eq!(parse_reply(&r[..cut], true).unwrap(), None);
        }
        let mut miss = vec![0x81, 0, 0, 0, 0, 0, 0, 1];
        miss.extend_from_slice(&[0; 16]);
        assert_eq!(parse_reply(&miss, true).unwrap(), Some((Reply::Miss, 24)));
        miss[7] = 0x82;
        assert_eq!(parse_reply(&miss, false).unwrap(), Some((Reply::Error, 24)));
        miss[0] = b'E';
        assert!(parse_reply(&miss, false).is_err());
    }
}
