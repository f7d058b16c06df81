//! The meta text protocol (`mg`, `ms`, `md`, `ma`), as the transport for the typed API.
//!
//! Retrievals ask for the value, client flags and key (`v f k`, plus `c` for the CAS
//! unique) so a reply can be read without remembering the request; a multi-get is one quiet
//! `mg` per key closed by `mn`, so misses cost no reply bytes.

use std::io::Write;

use bytes::Bytes;
use memchr::memchr;

use super::{command, data_block, unexpected, Op, Outcome, StoreMode};
use crate::error::ClientError;
use crate::frame::ReplyKind;
use crate::value::{line, Value};

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
            command(&mut req, b"ms ", key, value.len());
            let _ = write!(req, " {} F{flags} T{exptime}", value.len());
            match mode {
                StoreMode::Set => {}
                StoreMode::Add => req.extend_from_slice(b" ME"),
                StoreMode::Replace => req.extend_from_slice(b" MR"),
                StoreMode::Append => req.extend_from_slice(b" MA"),
                StoreMode::Prepend => req.extend_from_slice(b" MP"),
                StoreMode::Cas(c) => {
                    let _ = write!(req, " C{c}");
                }
            }
            if noreply {
                req.extend_from_slice(b" q");
            }
            data_block(&mut req, value);
            if noreply {
                // Quiet mode still answers failures; `mn` bounds what there is to read.
                req.extend_from_slice(b"mn\r\n");
                ReplyKind::MetaQuiet
            } else {
                ReplyKind::Meta
            }
        }
        Op::Delete { key } => {
            command(&mut req, b"md ", key, 2);
            req.extend_from_slice(b"\r\n");
            ReplyKind::Meta
        }
        Op::Touch { key, exptime } => {
            command(&mut req, b"mg ", key, 0);
            let _ = write!(req, " T{exptime}\r\n");
            ReplyKind::Meta
        }
        Op::Arith { incr, key, delta } => {
            command(&mut req, b"ma ", key, 0);
            let mode = if incr { "" } else { " MD" };
            let _ = write!(req, " D{delta}{mode} v\r\n");
            ReplyKind::Meta
        }
        // The meta protocol has no flush; it shares the connection with the text
        // protocol's admin commands, as in memcached.
        Op::FlushAll => {
            req.extend_from_slice(b"flush_all\r\n");
            ReplyKind::Line
        }
    };
    (req, kind)
}

/// The two-letter code of a meta reply line.
fn code(l: &[u8]) -> Result<&[u8], ClientError> {
    match l.get(..2) {
        Some(c) if l.len() == 2 || l[2] == b' ' => Ok(c),
        _ => Err(unexpected(l)),
    }
}

pub(super) fn decode(op: &Op<'_>, reply: &Bytes) -> Result<Outcome, ClientError> {
    if matches!(op, Op::FlushAll) {
        return super::text::decode(op, reply);
    }
    if reply.is_empty() {
        // A quiet store sends nothing before `MN` when it succeeds.
        return Ok(Outcome::Stored);
    }
    let nl = memchr(b'\n', reply).map_or(reply.len(), |i| i + 1);
    let l = line(&reply[..nl])?;
    let outcome = match (code(l)?, op) {
        (b"HD", Op::Store { .. }) => Outcome::Stored,
        (b"NS", Op::Store { .. }) => Outcome::NotStored,
        (b"EX", Op::Store { .. }) => Outcome::Exists,
        (b"NF", Op::Store { .. } | Op::Delete { .. } | Op::Arith { .. }) => Outcome::NotFound,
        (b"HD", Op::Delete { .. }) => Outcome::Deleted,
        (b"HD", Op::Touch { .. }) => Outcome::Touched,
        (b"EN", Op::Touch { .. }) => Outcome::NotFound,
        (b"VA", Op::Arith { .. }) => {
            let digits = reply
                .get(nl..reply.len().saturating_sub(2))
                .unwrap_or_default();
            std::str::from_utf8(digits)
                .ok()
                .and_then(|s| s.parse().ok())
                .map(Outcome::Number)
                .ok_or_else(|| unexpected(reply))?
        }
        _ => return Err(unexpected(l)),
    };
    Ok(outcome)
}

pub(super) fn encode_get(keys: &[&[u8]], cas: bool) -> (Vec<u8>, ReplyKind) {
    let flags: &[u8] = if cas { b" v f k c" } else { b" v f k" };
    let len: usize = keys.iter().map(|k| k.len() + 16).sum();
    let mut req = Vec::with_capacity(len + 4);
    if let [key] = keys {
        // One key: a plain `mg` answers `EN` on a miss, no `mn` needed.
        req.extend_from_slice(b"mg ");
        req.extend_from_slice(key);
        req.extend_from_slice(flags);
        req.extend_from_slice(b"\r\n");
        return (req, ReplyKind::Meta);
    }
    for k in keys {
        req.extend_from_slice(b"mg ");
        req.extend_from_slice(k);
        req.extend_from_slice(flags);
        req.extend_from_slice(b" q\r\n");
    }
    req.extend_from_slice(b"mn\r\n");
    (req, ReplyKind::MetaQuiet)
}

fn number<T: std::str::FromStr>(tok: &[u8], reply: &[u8]) -> Result<T, ClientError> {
    std::str::from_utf8(tok)
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| unexpected(reply))
}

/// Decodes `VA` and `EN` replies (the `MN` of a quiet batch is already stripped).
pub(super) fn decode_values(reply: &Bytes) -> Result<Vec<Value>, ClientError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < reply.len() {
        let rest = &reply[pos..];
        let nl = memchr(b'\n', rest).ok_or_else(|| unexpected(reply))?;
        let l = line(&rest[..=nl])?;
        let head_end = pos + nl + 1;
        match code(l)? {
            b"EN" => {
                pos = head_end;
                continue;
            }
            b"VA" => {}
            _ => return Err(unexpected(l)),
        }
        let mut toks = l
            .get(3..)
            .unwrap_or_default()
            .split(|&b| b == b' ')
            .filter(|t| !t.is_empty());
        let len: usize = number(toks.next().unwrap_or_default(), l)?;
        let (mut key, mut flags, mut cas) = (None, 0u32, None);
        for t in toks {
            // `t` lies inside `reply` (line() returns a subslice), so its offset lets the
            // key share the reply's buffer instead of being copied.
            let at = t.as_ptr() as usize - reply.as_ptr() as usize;
            match t[0] {
                b'k' => key = Some(reply.slice(at + 1..at + t.len())),
                b'f' => flags = number(&t[1..], l)?,
                b'c' => cas = Some(number(&t[1..], l)?),
                _ => {}
            }
        }
        let data_end = head_end + len;
        if reply.get(data_end..data_end + 2) != Some(&b"\r\n"[..]) {
            return Err(unexpected(reply));
        }
        out.push(Value {
            key: key.ok_or_else(|| unexpected(l))?,
            flags,
            cas,
            data: reply.slice(head_end..data_end),
        });
        pos = data_end + 2;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_meta_commands() {
        let set = Op::Store {
            mode: StoreMode::Add,
            key: b"k",
            value: b"xy",
            flags: 5,
            exptime: 9,
            noreply: true,
        };
        assert_eq!(
            encode(&set),
            (
                b"ms k 2 F5 T9 ME q\r\nxy\r\nmn\r\n".to_vec(),
                ReplyKind::MetaQuiet
            )
        );
        let decr = Op::Arith {
            incr: false,
            key: b"n",
            delta: 3,
        };
        assert_eq!(encode(&decr).0, b"ma n D3 MD v\r\n");
        assert_eq!(encode_get(&[b"a"], true).0, b"mg a v f k c\r\n");
        assert_eq!(
            encode_get(&[b"a", b"b"], false).0,
            b"mg a v f k q\r\nmg b v f k q\r\nmn\r\n"
        );
    }

    #[test]
    fn decodes_meta_replies() {
        let r = Bytes::from_static(b"EN\r\nVA 2 f3 kab c77\r\nhi\r\nVA 0 f0 kc\r\n\r\n");
        let v = decode_values(&r).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(
            (&v[0].key[..], v[0].flags, v[0].cas),
            (&b"ab"[..], 3, Some(77))
        );
        assert_eq!(&v[0].data[..], b"hi");
        assert_eq!((&v[1].key[..], &v[1].data[..]), (&b"c"[..], &b""[..]));
        assert!(decode_values(&Bytes::from_static(b"VA 5 kx\r\nhi\r\n")).is_err());
        assert!(decode_values(&Bytes::from_static(b"VA 2 f1\r\nhi\r\n")).is_err());
        assert!(decode_values(&Bytes::from_static(b"SERVER_ERROR no\r\n")).is_err());

        let incr = Op::Arith {
            incr: true,
            key: b"n",
            delta: 1,
        };
        assert_eq!(
            decode(&incr, &Bytes::from_static(b"VA 2\r\n10\r\n")),
            Ok(Outcome::Number(10))
        );
        assert_eq!(
            decode(&incr, &Bytes::from_static(b"NF\r\n")),
            Ok(Outcome::NotFound)
        );
        let del = Op::Delete { key: b"k" };
        assert_eq!(
            decode(&del, &Bytes::from_static(b"HD\r\n")),
            Ok(Outcome::Deleted)
        );
        assert!(decode(&del, &Bytes::from_static(b"EN\r\n")).is_err());
    }
}
