//! The classic text protocol.

use std::io::Write;

use bytes::Bytes;

use super::{command, data_block, unexpected, Op, Outcome, StoreMode};
use crate::error::ClientError;
use crate::frame::ReplyKind;
use crate::value::line;

pub(super) fn encode(op: &Op<'_>) -> (Vec<u8>, ReplyKind) {
    let mut req = Vec::new();
    // Writing to a Vec cannot fail; `write!` is used for the numbers.
    let kind = match *op {
        Op::Store {
            mode,
            key,
            value,
            flags,
            exptime,
            noreply,
        } => {
            let cmd: &[u8] = match mode {
                StoreMode::Set => b"set ",
                StoreMode::Add => b"add ",
                StoreMode::Replace => b"replace ",
                StoreMode::Append => b"append ",
                StoreMode::Prepend => b"prepend ",
                StoreMode::Cas(_) => b"cas ",
            };
            command(&mut req, cmd, key, value.len());
            let _ = write!(req, " {flags} {exptime} {}", value.len());
            if let StoreMode::Cas(c) = mode {
                let _ = write!(req, " {c}");
            }
            if noreply {
                req.extend_from_slice(b" noreply");
            }
            data_block(&mut req, value);
            if noreply {
                ReplyKind::None
            } else {
                ReplyKind::Line
            }
        }
        Op::Delete { key } => {
            command(&mut req, b"delete ", key, 2);
            req.extend_from_slice(b"\r\n");
            ReplyKind::Line
        }
        Op::Touch { key, exptime } => {
            command(&mut req, b"touch ", key, 0);
            let _ = write!(req, " {exptime}\r\n");
            ReplyKind::Line
        }
        Op::Arith { incr, key, delta } => {
            command(&mut req, if incr { b"incr " } else { b"decr " }, key, 0);
            let _ = write!(req, " {delta}\r\n");
            ReplyKind::Line
        }
        Op::FlushAll => {
            req.extend_from_slice(b"flush_all\r\n");
            ReplyKind::Line
        }
    };
    (req, kind)
}

pub(super) fn decode(op: &Op<'_>, reply: &Bytes) -> Result<Outcome, ClientError> {
    let l = line(reply)?;
    let outcome = match l {
        b"STORED" => Outcome::Stored,
        b"NOT_STORED" => Outcome::NotStored,
        b"EXISTS" => Outcome::Exists,
        b"NOT_FOUND" => Outcome::NotFound,
        b"DELETED" => Outcome::Deleted,
        b"TOUCHED" => Outcome::Touched,
        b"OK" => Outcome::Ok,
        n if matches!(op, Op::Arith { .. }) => std::str::from_utf8(n)
            .ok()
            .and_then(|s| s.parse().ok())
            .map(Outcome::Number)
            .ok_or_else(|| unexpected(n))?,
        other => return Err(unexpected(other)),
    };
    Ok(outcome)
}

pub(super) fn encode_get(keys: &[&[u8]], cas: bool) -> (Vec<u8>, ReplyKind) {
    let len: usize = keys.iter().map(|k| k.len() + 1).sum();
    let mut req = Vec::with_capacity(len + 6);
    req.extend_from_slice(if cas { b"gets" } else { b"get" });
    for k in keys {
        req.push(b' ');
        req.extend_from_slice(k);
    }
    req.extend_from_slice(b"\r\n");
    (req, ReplyKind::Retrieval)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_memcached_text() {
        let op = Op::Store {
            mode: StoreMode::Cas(9),
            key: b"k",
            value: b"xy",
            flags: 1,
            exptime: 2,
            noreply: false,
        };
        assert_eq!(
            encode(&op),
            (b"cas k 1 2 2 9\r\nxy\r\n".to_vec(), ReplyKind::Line)
        );
        let op = Op::Store {
            mode: StoreMode::Set,
            key: b"k",
            value: b"",
            flags: 0,
            exptime: 0,
            noreply: true,
        };
        assert_eq!(
            encode(&op),
            (b"set k 0 0 0 noreply\r\n\r\n".to_vec(), ReplyKind::None)
        );
        assert_eq!(encode_get(&[b"a", b"b"], true).0, b"gets a b\r\n");
        let arith = Op::Arith {
            incr: true,
            key: b"n",
            delta: 1,
        };
        assert_eq!(
            decode(&arith, &Bytes::from_static(b"42\r\n")),
            Ok(Outcome::Number(42))
        );
        assert!(decode(&Op::FlushAll, &Bytes::from_static(b"42\r\n")).is_err());
        assert!(decode(&Op::FlushAll, &Bytes::from_static(b"SERVER_ERROR x\r\n")).is_err());
    }
}
