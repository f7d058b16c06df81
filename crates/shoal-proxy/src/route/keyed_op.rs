//! A one-key request (storage, `delete`, `incr`/`decr`, `touch`, the meta commands) in
//! the form routes forward and copy it: its key, its bytes and the reply it expects.

use crate::frame::ReplyKind;

/// A one-key request as routes forward it.
pub(crate) struct KeyedOp {
    /// The key (decoded, for a base64 meta key): what places and routes it.
    pub(crate) key: Vec<u8>,
    /// The complete request as forwarded (a quiet meta command followed by `mn`).
    pub(crate) bytes: Vec<u8>,
    /// The reply it expects.
    pub(crate) kind: ReplyKind,
    /// A read (meta `mg`, `me`): fails over on misses too, and is never replicated.
    pub(crate) read: bool,
}

/// An `add` (or, for `gets`, the same with a reply) copying a warm hit into a cold pool:
/// `add <key> <flags> <exptime> <bytes>[ noreply]`.
pub(crate) fn add_op(key: &[u8], flags: &[u8], exptime: i64, data: &[u8], reply: bool) -> KeyedOp {
    let mut bytes = Vec::with_capacity(key.len() + data.len() + 48);
    bytes.extend_from_slice(b"add ");
    bytes.extend_from_slice(key);
    bytes.push(b' ');
    bytes.extend_from_slice(flags);
    bytes.extend_from_slice(format!(" {exptime} {}", data.len()).as_bytes());
    if !reply {
        bytes.extend_from_slice(b" noreply");
    }
    bytes.extend_from_slice(b"\r\n");
    bytes.extend_from_slice(data);
    bytes.extend_from_slice(b"\r\n");
    KeyedOp {
        key: key.to_vec(),
        bytes,
        kind: if reply {
            ReplyKind::Line
        } else {
            ReplyKind::None
        },
        read: false,
    }
}
