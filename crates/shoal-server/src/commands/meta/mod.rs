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
use shoal_protocol::meta::MAX_OPAQUE_TOKEN_LEN;
use shoal_protocol::{reply, MetaFlags, ProtocolError};

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

/// Echoes the flags every reply carries, even misses: the opaque and the key. An opaque
/// longer than memcached echoes is an error, found (as memcached finds it) while the
/// reply is being written.
pub(crate) fn echo_opaque_and_key(
    out: &mut Vec<u8>,
    flags: &MetaFlags<'_>,
    key: &[u8],
) -> Result<(), ProtocolError> {
    for (f, tok) in flags.iter() {
        match f {
            b'O' => opaque(out, tok)?,
            b'k' => reply::meta_key(out, key, flags.base64()),
            _ => {}
        }
    }
    Ok(())
}

/// Appends ` O<token>`, or fails if the token (with its `O`) is over
/// [`MAX_OPAQUE_TOKEN_LEN`].
pub(crate) fn opaque(out: &mut Vec<u8>, tok: &[u8]) -> Result<(), ProtocolError> {
    if tok.len() + 1 > MAX_OPAQUE_TOKEN_LEN {
        return Err(ProtocolError::OpaqueTooLong);
    }
    reply::meta_opaque(out, tok);
    Ok(())
}

/// A status line with only opaque and key echoed: `NF`, `NS`, `EX`, `EN`, `HD`; an
/// over-long opaque turns it into memcached's error.
pub(crate) fn status(out: &mut Vec<u8>, code: &[u8; 2], flags: &MetaFlags<'_>, key: &[u8]) {
    let start = out.len();
    reply::meta_header(out, code);
    match echo_opaque_and_key(out, flags, key) {
        Ok(()) => reply::crlf(out),
        Err(e) => {
            out.truncate(start);
            out.extend_from_slice(e.reply());
        }
    }
}

/// How far memcached's clock is ahead of shoald's: memcached's starts at 62 (it backdates
/// its start by its 60-second update interval plus 2), shoald's at 2.
const MEMCACHED_CLOCK_LEAD: u32 = 60;

/// A TTL as the `t` flag shows it: `-1` for none, else the expiry minus now as memcached
/// computes it, in unsigned 32-bit arithmetic. An expiry already past (a command that
/// just set a TTL in the past) so shows as a number near 2^32 that depends on the clock's
/// reading; it is computed against memcached's clock, so the two servers agree.
pub(crate) fn ttl_flag(out: &mut Vec<u8>, exptime: u32, now: u32) {
    if exptime == 0 {
        reply::meta_flag_i64(out, b't', -1);
    } else if exptime <= now {
        let memcached_now = now.wrapping_add(MEMCACHED_CLOCK_LEAD);
        reply::meta_flag_u64(out, b't', u64::from(exptime.wrapping_sub(memcached_now)));
    } else {
        reply::meta_flag_u64(out, b't', u64::from(exptime - now));
    }
}

/// A numeric flag token that the parser has already validated.
pub(crate) fn number<T: shoal_protocol::MetaNumber>(flags: &MetaFlags<'_>, f: u8) -> Option<T> {
    flags.number(f).ok().flatten()
}

/// The CAS unique as clients see it.
pub(crate) fn cas(w: &Worker, cas: u64) -> u64 {
    super::visible_cas(w, cas)
}
