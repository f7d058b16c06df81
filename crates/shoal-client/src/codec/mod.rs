//! The wire protocols the client speaks: each typed command ([`Op`], or a retrieval of
//! keys) is encoded for the configured [`Protocol`], and the framed reply decoded back into
//! an [`Outcome`] or values. Framing itself (how many bytes form the reply) is
//! [`crate::frame`]'s job; the codecs only see complete replies.

mod binary;
mod meta;
mod text;

use bytes::Bytes;

use crate::error::ClientError;
use crate::frame::ReplyKind;
use crate::value::Value;

/// The protocol the client uses to talk to every server.
///
/// All three give the same results through the [`crate::Client`] API. memcached fixes a
/// connection's protocol at its first byte, so the raw meta commands
/// ([`crate::Client::meta_get`] and friends) need [`Protocol::Text`] or [`Protocol::Meta`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// The classic text protocol (`get`, `set`, `cas`, `incr`...).
    #[default]
    Text,
    /// The meta text protocol (`mg`, `ms`, `md`, `ma`): multi-gets are pipelined quiet
    /// `mg` commands closed by `mn`, and `noreply` is quiet mode, so a failed fire-and-forget
    /// write is still read back (and dropped) rather than left to desynchronise replies.
    Meta,
    /// The binary protocol: multi-gets are pipelined `getkq` packets closed by `noop`;
    /// `noreply` stores are `setq` followed by `noop`.
    Binary,
}

/// How a storage command stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoreMode {
    Set,
    Add,
    Replace,
    Append,
    Prepend,
    /// Store only if the item's CAS unique is still this.
    Cas(u64),
}

/// A typed command other than retrieval. Keys have been checked with
/// [`crate::value::check_key`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum Op<'a> {
    Store {
        mode: StoreMode,
        key: &'a [u8],
        value: &'a [u8],
        flags: u32,
        exptime: u32,
        noreply: bool,
    },
    Delete {
        key: &'a [u8],
    },
    Touch {
        key: &'a [u8],
        exptime: u32,
    },
    Arith {
        incr: bool,
        key: &'a [u8],
        delta: u64,
    },
    FlushAll,
}

/// What a command's reply said, in protocol-independent terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Stored,
    NotStored,
    Exists,
    NotFound,
    Deleted,
    Touched,
    Number(u64),
    Ok,
}

impl Protocol {
    /// The request bytes for `op` and the reply shape to frame.
    pub(crate) fn encode(self, op: &Op<'_>) -> (Vec<u8>, ReplyKind) {
        match self {
            Protocol::Text => text::encode(op),
            Protocol::Meta => meta::encode(op),
            Protocol::Binary => binary::encode(op),
        }
    }

    /// Decodes the complete reply to `op`. Server error replies become
    /// [`ClientError::Server`]; a reply `op` cannot get is [`ClientError::Unexpected`].
    pub(crate) fn decode(self, op: &Op<'_>, reply: &Bytes) -> Result<Outcome, ClientError> {
        match self {
            Protocol::Text => text::decode(op, reply),
            Protocol::Meta => meta::decode(op, reply),
            Protocol::Binary => binary::decode(op, reply),
        }
    }

    /// One request retrieving `keys` (all for one server), with CAS uniques if `cas`.
    pub(crate) fn encode_get(self, keys: &[&[u8]], cas: bool) -> (Vec<u8>, ReplyKind) {
        match self {
            Protocol::Text => text::encode_get(keys, cas),
            Protocol::Meta => meta::encode_get(keys, cas),
            Protocol::Binary => binary::encode_get(keys),
        }
    }

    /// The hits in a retrieval reply, in the order the server sent them (its request
    /// order). Keys and data share `reply`'s buffer.
    pub(crate) fn decode_values(self, reply: &Bytes, cas: bool) -> Result<Vec<Value>, ClientError> {
        match self {
            Protocol::Text => crate::value::parse_values(reply),
            Protocol::Meta => meta::decode_values(reply),
            Protocol::Binary => binary::decode_values(reply, cas),
        }
    }
}

/// Starts a text-protocol command line (text and meta share the form): `cmd`, which ends
/// with its space, then the key; room is reserved for `extra` more bytes.
fn command(req: &mut Vec<u8>, cmd: &[u8], key: &[u8], extra: usize) {
    req.reserve(cmd.len() + key.len() + extra + 32);
    req.extend_from_slice(cmd);
    req.extend_from_slice(key);
}

/// Ends a storage command line and appends its data block.
fn data_block(req: &mut Vec<u8>, value: &[u8]) {
    req.extend_from_slice(b"\r\n");
    req.extend_from_slice(value);
    req.extend_from_slice(b"\r\n");
}

fn unexpected(reply: &[u8]) -> ClientError {
    let cut = &reply[..reply.len().min(80)];
    ClientError::Unexpected(String::from_utf8_lossy(cut).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Starts that steer random replies into each decoder's deeper paths.
    const STARTS: [&[u8]; 8] = [
        b"",
        b"VALUE k 1 ",
        b"VA 2 ",
        b"EN\r\nVA ",
        b"HD ",
        b"\x81\x0d\x00\x01\x04\x00\x00\x00\x00\x00\x00\x07",
        b"\x81\x05\x00\x00\x00\x00\x00\x00\x00\x00\x00\x08",
        b"42\r\n",
    ];

    proptest! {
        /// Whatever a server sends, decoding returns a value or an error, never panics.
        #[test]
        fn decoding_any_reply_never_panics(
            start in 0..STARTS.len(),
            tail in proptest::collection::vec(any::<u8>(), 0..96),
            cas in any::<bool>(),
        ) {
            let mut bytes = STARTS[start].to_vec();
            bytes.extend_from_slice(&tail);
            let reply = Bytes::from(bytes);
            let ops = [
                Op::Store { mode: StoreMode::Add, key: b"k", value: b"", flags: 0, exptime: 0, noreply: false },
                Op::Delete { key: b"k" },
                Op::Touch { key: b"k", exptime: 0 },
                Op::Arith { incr: true, key: b"k", delta: 1 },
                Op::FlushAll,
            ];
            for p in ALL {
                let _ = p.decode_values(&reply, cas);
                for op in &ops {
                    let _ = p.decode(op, &reply);
                }
            }
        }
    }

    const ALL: [Protocol; 3] = [Protocol::Text, Protocol::Meta, Protocol::Binary];

    #[test]
    fn every_protocol_encodes_every_op_with_a_reply_kind() {
        let ops = [
            Op::Store {
                mode: StoreMode::Cas(7),
                key: b"k",
                value: b"v",
                flags: 3,
                exptime: 60,
                noreply: false,
            },
            Op::Delete { key: b"k" },
            Op::Touch {
                key: b"k",
                exptime: 5,
            },
            Op::Arith {
                incr: false,
                key: b"k",
                delta: 2,
            },
            Op::FlushAll,
        ];
        for p in ALL {
            for op in &ops {
                let (bytes, kind) = p.encode(op);
                assert!(!bytes.is_empty());
                assert_ne!(kind, ReplyKind::None, "{p:?} {op:?}");
            }
        }
    }
}
