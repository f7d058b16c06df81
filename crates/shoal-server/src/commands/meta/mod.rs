//! Meta commands: `mg`, `ms`, `md`, `ma`, `me`.
//!
//! Return flags are echoed in request order, as memcached does, so pipelining clients can
//! rely on the layout.

pub mod arithmetic;
pub mod debug;
pub mod delete;
pub mod get;
pub mod set;

use crate::worker::Worker;
use shoal_protocol::{reply, MetaFlags};

/// Decodes the key of a meta request into `buf` (base64 with the `b` flag), or appends the
/// error reply and returns `None`.
pub(crate) fn key<'k>(
    raw: &[u8],
    flags: &MetaFlags<'_>,
    buf: &'k mut [u8; 256],
    out: &mut Vec<u8>,
) -> Option<&'k [u8]> {
    match shoal_protocol::decode_key(raw, flags.base64(), buf) {
        Ok(k) if !k.is_empty() => Some(k),
        Ok(_) => {
            out.extend_from_slice(shoal_protocol::ProtocolError::BadCommandLineFormat.reply());
            None
        }
        Err(e) => {
            out.extend_from_slice(e.reply());
            None
        }
    }
}

/// Echoes the flags every reply carries, even misses: the opaque and the key.
pub(crate) fn echo_opaque_and_key(out: &mut Vec<u8>, flags: &MetaFlags<'_>, key: &[u8]) {
    for (f, tok) in flags.iter() {
        match f {
            b'O' => reply::meta_opaque(out, tok),
            b'k' => reply::meta_key(out, key, flags.base64()),
            _ => {}
        }
    }
}

/// A status line with only opaque and key echoed: `NF`, `NS`, `EX`, `EN`, `HD`.
pub(crate) fn status(out: &mut Vec<u8>, code: &[u8; 2], flags: &MetaFlags<'_>, key: &[u8]) {
    reply::meta_header(out, code);
    echo_opaque_and_key(out, flags, key);
    reply::crlf(out);
}

/// A numeric flag token that the parser has already validated.
pub(crate) fn number<T: shoal_protocol::MetaNumber>(flags: &MetaFlags<'_>, f: u8) -> Option<T> {
    flags.number(f).ok().flatten()
}

/// The CAS unique as clients see it.
pub(crate) fn cas(w: &Worker, cas: u64) -> u64 {
    super::visible_cas(w, cas)
}
