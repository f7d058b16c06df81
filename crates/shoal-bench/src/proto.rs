//! The wire protocols the generator speaks, behind one enum: memcached text, meta and
//! binary, and Redis RESP (strings, or lists for queues).

use crate::text::{self, Op, Reply};
use crate::{binary, meta, resp, BenchError};
use serde::Serialize;

/// A wire protocol for gets and sets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    /// memcached text: `get` / `set`.
    #[default]
    Text,
    /// memcached meta: `mg` / `ms`.
    Meta,
    /// memcached binary: `GET` / `SET`.
    Binary,
    /// Redis RESP: `GET` / `SET`.
    Resp,
    /// Redis RESP lists as a queue: sets are `LPUSH`, gets are `RPOP`.
    RespList,
}

impl Protocol {
    /// A short label for reports.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Text => "text",
            Protocol::Meta => "meta",
            Protocol::Binary => "binary",
            Protocol::Resp => "resp",
            Protocol::RespList => "resp-list",
        }
    }

    /// Whether this is a Redis protocol (stats come from `INFO commandstats`).
    pub fn is_redis(self) -> bool {
        matches!(self, Protocol::Resp | Protocol::RespList)
    }

    /// Appends one request of kind `op` for `key` (`value` is used by sets).
    pub fn encode(self, buf: &mut Vec<u8>, op: Op, key: &[u8], value: &[u8]) {
        match (self, op) {
            (Protocol::Text, Op::Get) => {
                buf.extend_from_slice(b"get ");
                buf.extend_from_slice(key);
                buf.extend_from_slice(b"\r\n");
            }
            (Protocol::Text, Op::Set) => text::encode_set_key(buf, key, value),
            (Protocol::Meta, Op::Get) => meta::encode_get(buf, key),
            (Protocol::Meta, Op::Set) => meta::encode_set(buf, key, value),
            (Protocol::Binary, Op::Get) => binary::encode_get(buf, key),
            (Protocol::Binary, Op::Set) => binary::encode_set(buf, key, value),
            (Protocol::Resp, Op::Get) => resp::encode_command(buf, &[b"GET", key]),
            (Protocol::Resp, Op::Set) => resp::encode_command(buf, &[b"SET", key, value]),
            (Protocol::RespList, Op::Get) => resp::encode_command(buf, &[b"RPOP", key]),
            (Protocol::RespList, Op::Set) => resp::encode_command(buf, &[b"LPUSH", key, value]),
        }
    }

    /// Parses the reply to one request of kind `op` at the start of `buf`: `Ok(None)` if
    /// more bytes are needed.
    pub fn parse(self, buf: &[u8], op: Op) -> Result<Option<(Reply, usize)>, BenchError> {
        match self {
            Protocol::Text => text::parse_reply(buf, op),
            Protocol::Meta => meta::parse_reply(buf),
            Protocol::Binary => binary::parse_reply(buf, op == Op::Get),
            Protocol::Resp | Protocol::RespList => resp::parse_reply(buf),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_protocol_round_trips_its_own_shapes() {
        let mut b = Vec::new();
        Protocol::Text.encode(&mut b, Op::Set, b"k", b"v");
        assert_eq!(b, b"set k 0 0 1\r\nv\r\n");
        b.clear();
        Protocol::Text.encode(&mut b, Op::Get, b"k", b"");
        assert_eq!(b, b"get k\r\n");
        b.clear();
        Protocol::RespList.encode(&mut b, Op::Set, b"q", b"m");
        assert_eq!(b, b"*3\r\n$5\r\nLPUSH\r\n$1\r\nq\r\n$1\r\nm\r\n");
        assert_eq!(
            Protocol::Resp.parse(b"$-1\r\n", Op::Get).unwrap(),
            Some((Reply::Miss, 5))
        );
        assert_eq!(
            Protocol::Meta.parse(b"HD\r\n", Op::Set).unwrap(),
            Some((Reply::Stored, 4))
        );
    }
}
