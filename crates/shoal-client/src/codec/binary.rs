//! The binary protocol, framed and encoded by [`shoal_protocol::binary_client`].
//!
//! Status codes are mapped to the text protocol's outcomes command by command, so a
//! caller sees the same result whichever protocol it picked (binary `add` of a present key
//! is "key exists", which the text protocol calls `NOT_STORED`).

use bytes::Bytes;
use shoal_protocol::binary::{opcode, Status, HEADER_LEN};
use shoal_protocol::{encode_request, parse_response, BinaryResponse, ResponseParsed};

use super::{Op, Outcome, StoreMode};
use crate::error::ClientError;
use crate::frame::ReplyKind;
use crate::value::Value;

/// `incr`/`decr` expiration that tells the server not to create a missing counter, so a
/// miss is "not found" as in the text protocol.
const NO_CREATE: u32 = u32::MAX;

const OK: u16 = Status::Ok as u16;
const NOT_FOUND: u16 = Status::KeyNotFound as u16;
const EXISTS: u16 = Status::KeyExists as u16;
const NOT_STORED: u16 = Status::NotStored as u16;

fn noop(req: &mut Vec<u8>) {
    encode_request(req, opcode::NOOP, 0, 0, &[], &[], &[]);
}

fn flags_exptime(flags: u32, exptime: u32) -> [u8; 8] {
    let mut extras = [0u8; 8];
    extras[..4].copy_from_slice(&flags.to_be_bytes());
    extras[4..].copy_from_slice(&exptime.to_be_bytes());
    extras
}

pub(super) fn encode(op: &Op<'_>) -> (Vec<u8>, ReplyKind) {
    let mut req = Vec::new();
    let kind = match *op {
        Op::Store {
            mode,
            key,
            value,
            flags,
            exptime,
            noreply,
        } => {
            let (loud, quiet) = match mode {
                StoreMode::Set | StoreMode::Cas(_) => (opcode::SET, opcode::SETQ),
                StoreMode::Add => (opcode::ADD, opcode::ADDQ),
                StoreMode::Replace => (opcode::REPLACE, opcode::REPLACEQ),
                StoreMode::Append => (opcode::APPEND, opcode::APPENDQ),
                StoreMode::Prepend => (opcode::PREPEND, opcode::PREPENDQ),
            };
            let cas = match mode {
                StoreMode::Cas(c) => c,
                _ => 0,
            };
            let extras = flags_exptime(flags, exptime);
            // Append and prepend keep the item's flags and expiry: no extras.
            let extras: &[u8] = match mode {
                StoreMode::Append | StoreMode::Prepend => &[],
                _ => &extras,
            };
            let code = if noreply { quiet } else { loud };
            encode_request(&mut req, code, 0, cas, extras, key, value);
            if noreply {
                // A quiet store still answers failures; the `noop` bounds what to read.
                noop(&mut req);
                ReplyKind::BinaryQuiet
            } else {
                ReplyKind::Binary
            }
        }
        Op::Delete { key } => {
            encode_request(&mut req, opcode::DELETE, 0, 0, &[], key, &[]);
            ReplyKind::Binary
        }
        Op::Touch { key, exptime } => {
            encode_request(
                &mut req,
                opcode::TOUCH,
                0,
                0,
                &exptime.to_be_bytes(),
                key,
                &[],
            );
            ReplyKind::Binary
        }
        Op::Arith { incr, key, delta } => {
            let mut extras = [0u8; 20];
            extras[..8].copy_from_slice(&delta.to_be_bytes());
            extras[16..].copy_from_slice(&NO_CREATE.to_be_bytes());
            let code = if incr {
                opcode::INCREMENT
            } else {
                opcode::DECREMENT
            };
            encode_request(&mut req, code, 0, 0, &extras, key, &[]);
            ReplyKind::Binary
        }
        Op::FlushAll => {
            encode_request(&mut req, opcode::FLUSH, 0, 0, &[], &[], &[]);
            ReplyKind::Binary
        }
    };
    (req, kind)
}

/// An error status as the client reports it: the code and the server's text.
fn server_error(r: &BinaryResponse<'_>) -> ClientError {
    ClientError::Server(format!(
        "status {:#06x}: {}",
        r.status,
        String::from_utf8_lossy(r.value)
    ))
}

fn response(reply: &[u8]) -> Result<BinaryResponse<'_>, ClientError> {
    match parse_response(reply) {
        ResponseParsed::Response { response, .. } => Ok(response),
        _ => Err(super::unexpected(reply)),
    }
}

pub(super) fn decode(op: &Op<'_>, reply: &Bytes) -> Result<Outcome, ClientError> {
    if reply.is_empty() {
        // A quiet store sends nothing before the `noop` when it succeeds.
        return Ok(Outcome::Stored);
    }
    let r = response(reply)?;
    let outcome = match (op, r.status) {
        (Op::Store { .. }, OK) => Outcome::Stored,
        (Op::Store { mode, .. }, EXISTS) => match mode {
            StoreMode::Add => Outcome::NotStored,
            _ => Outcome::Exists,
        },
        (Op::Store { mode, .. }, NOT_FOUND) => match mode {
            StoreMode::Cas(_) => Outcome::NotFound,
            _ => Outcome::NotStored,
        },
        (Op::Store { .. }, NOT_STORED) => Outcome::NotStored,
        (Op::Delete { .. }, OK) => Outcome::Deleted,
        (Op::Touch { .. }, OK) => Outcome::Touched,
        (Op::Delete { .. } | Op::Touch { .. } | Op::Arith { .. }, NOT_FOUND) => Outcome::NotFound,
        (Op::Arith { .. }, OK) => {
            let n: [u8; 8] = r.value.try_into().map_err(|_| super::unexpected(reply))?;
            Outcome::Number(u64::from_be_bytes(n))
        }
        (Op::FlushAll, OK) => Outcome::Ok,
        _ => return Err(server_error(&r)),
    };
    Ok(outcome)
}

pub(super) fn encode_get(keys: &[&[u8]]) -> (Vec<u8>, ReplyKind) {
    let len: usize = keys.iter().map(|k| k.len() + HEADER_LEN).sum();
    let mut req = Vec::with_capacity(len + HEADER_LEN);
    if let [key] = keys {
        // One key: `getk` answers a miss with "not found", no `noop` needed.
        encode_request(&mut req, opcode::GETK, 0, 0, &[], key, &[]);
        return (req, ReplyKind::Binary);
    }
    for k in keys {
        encode_request(&mut req, opcode::GETKQ, 0, 0, &[], k, &[]);
    }
    noop(&mut req);
    (req, ReplyKind::BinaryQuiet)
}

/// Decodes `getk`/`getkq` responses; misses are skipped. Every binary get returns the CAS
/// unique; it is reported only when `cas` was asked for, as `gets` would.
pub(super) fn decode_values(reply: &Bytes, cas: bool) -> Result<Vec<Value>, ClientError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < reply.len() {
        let ResponseParsed::Response {
            response: r,
            consumed,
        } = parse_response(&reply[pos..])
        else {
            return Err(super::unexpected(&reply[pos..]));
        };
        match (r.opcode, r.status) {
            (opcode::NOOP, _) => break,
            (_, NOT_FOUND) => {}
            (_, OK) => {
                let flags = r
                    .extras
                    .get(..4)
                    .map_or(0, |f| u32::from_be_bytes([f[0], f[1], f[2], f[3]]));
                let key_at = pos + HEADER_LEN + r.extras.len();
                let data_at = key_at + r.key.len();
                out.push(Value {
                    key: reply.slice(key_at..data_at),
                    flags,
                    cas: cas.then_some(r.cas),
                    data: reply.slice(data_at..data_at + r.value.len()),
                });
            }
            _ => return Err(server_error(&r)),
        }
        pos += consumed;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_protocol::binary::response;

    fn reply(op: u8, status: Status, cas: u64, extras: &[u8], key: &[u8], v: &[u8]) -> Bytes {
        let mut out = Vec::new();
        response(&mut out, op, status, 0, cas, extras, key, v);
        Bytes::from(out)
    }

    #[test]
    fn maps_statuses_like_the_text_protocol() {
        let store = |mode| Op::Store {
            mode,
            key: b"k",
            value: b"v",
            flags: 0,
            exptime: 0,
            noreply: false,
        };
        let exists = reply(opcode::ADD, Status::KeyExists, 0, &[], &[], b"");
        assert_eq!(
            decode(&store(StoreMode::Add), &exists),
            Ok(Outcome::NotStored)
        );
        assert_eq!(
            decode(&store(StoreMode::Cas(1)), &exists),
            Ok(Outcome::Exists)
        );
        let missing = reply(opcode::SET, Status::KeyNotFound, 0, &[], &[], b"");
        assert_eq!(
            decode(&store(StoreMode::Replace), &missing),
            Ok(Outcome::NotStored)
        );
        assert_eq!(
            decode(&store(StoreMode::Cas(1)), &missing),
            Ok(Outcome::NotFound)
        );
        let big = reply(opcode::SET, Status::TooLarge, 0, &[], &[], b"Too large.");
        assert_eq!(
            decode(&store(StoreMode::Set), &big),
            Err(ClientError::Server("status 0x0003: Too large.".into()))
        );
        let n = reply(
            opcode::INCREMENT,
            Status::Ok,
            0,
            &[],
            &[],
            &7u64.to_be_bytes(),
        );
        let incr = Op::Arith {
            incr: true,
            key: b"k",
            delta: 1,
        };
        assert_eq!(decode(&incr, &n), Ok(Outcome::Number(7)));
        assert!(decode(&incr, &Bytes::from_static(b"STORED\r\n")).is_err());
    }

    #[test]
    fn decodes_quiet_gets() {
        let mut r = reply(opcode::GETKQ, Status::Ok, 5, &[0, 0, 0, 9], b"a", b"hi").to_vec();
        r.extend_from_slice(&reply(opcode::GETK, Status::KeyNotFound, 0, &[], b"b", b""));
        r.extend_from_slice(&reply(opcode::NOOP, Status::Ok, 0, &[], &[], &[]));
        let v = decode_values(&Bytes::from(r.clone()), true).unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(
            (&v[0].key[..], v[0].flags, v[0].cas),
            (&b"a"[..], 9, Some(5))
        );
        assert_eq!(&v[0].data[..], b"hi");
        assert_eq!(decode_values(&Bytes::from(r), false).unwrap()[0].cas, None);
        let (req, kind) = encode_get(&[b"a", b"b"]);
        assert_eq!(kind, ReplyKind::BinaryQuiet);
        assert_eq!(req.len(), 3 * HEADER_LEN + 2);
    }
}
