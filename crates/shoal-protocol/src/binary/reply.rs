//! Binary replies framed from a request's [`Attrs`]: the opcode and opaque echoed,
//! quietness applied, and the key returned for the `GETK` family, so a server's command
//! outcome needs no knowledge of which opcode asked for it.

use super::command::Attrs;
use super::{error, response, response_header, Status};

/// A success without a body (`SET`, `DELETE`, `FLUSH`, `QUIT`, `NOOP`, ...) carrying
/// `cas`; nothing for a quiet opcode.
pub fn ok(out: &mut Vec<u8>, a: &Attrs, cas: u64) {
    ok_with_value(out, a, cas, &[]);
}

/// A success whose body is `value` (an incr/decr result, `VERSION`, the SASL texts);
/// nothing for a quiet opcode.
pub fn ok_with_value(out: &mut Vec<u8>, a: &Attrs, cas: u64, value: &[u8]) {
    if !a.quiet {
        response(out, a.opcode, Status::Ok, a.opaque, cas, &[], &[], value);
    }
}

/// A failure: `status` with memcached's error text. Sent for quiet opcodes too, which
/// are only quiet about success.
pub fn status(out: &mut Vec<u8>, a: &Attrs, status: Status) {
    error(out, a.opcode, status, a.opaque);
}

/// A retrieval hit: the item's flags as extras, `key` when the opcode returns keys, then
/// `value` (empty for `TOUCH`). Sent for quiet opcodes too.
pub fn hit(out: &mut Vec<u8>, a: &Attrs, cas: u64, flags: u32, key: &[u8], value: &[u8]) {
    hit_header(out, a, cas, flags, key, value.len());
    out.extend_from_slice(value);
}

/// A retrieval hit's packet up to its value, for a value of `value_len` bytes the caller
/// sends next (from where it lies, without copying it here).
pub fn hit_header(
    out: &mut Vec<u8>,
    a: &Attrs,
    cas: u64,
    flags: u32,
    key: &[u8],
    value_len: usize,
) {
    let key: &[u8] = if a.key_return { key } else { &[] };
    response_header(
        out,
        a.opcode,
        Status::Ok,
        a.opaque,
        cas,
        4,
        key.len(),
        value_len,
    );
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(key);
}

/// A retrieval miss: nothing for a quiet opcode; for the `GETK` family the key and no
/// error text (memcached's framing); otherwise `Not found`.
pub fn miss(out: &mut Vec<u8>, a: &Attrs, key: &[u8]) {
    if a.quiet {
        return;
    }
    if a.key_return {
        response(
            out,
            a.opcode,
            Status::KeyNotFound,
            a.opaque,
            0,
            &[],
            key,
            &[],
        );
    } else {
        status(out, a, Status::KeyNotFound);
    }
}

/// One `STAT` packet: a statistic's name as the key and its value as the body; the
/// empty name and value terminate the list.
pub fn stat(out: &mut Vec<u8>, a: &Attrs, name: &[u8], value: &[u8]) {
    response(out, a.opcode, Status::Ok, a.opaque, 0, &[], name, value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binary::opcode;

    fn attrs(opcode: u8, quiet: bool, key_return: bool) -> Attrs {
        Attrs {
            opcode,
            opaque: 3,
            cas: 0,
            quiet,
            key_return,
        }
    }

    #[test]
    fn quiet_opcodes_send_failures_only() {
        let mut out = Vec::new();
        ok(&mut out, &attrs(opcode::SETQ, true, false), 9);
        miss(&mut out, &attrs(opcode::GETQ, true, false), b"k");
        assert!(out.is_empty());
        status(
            &mut out,
            &attrs(opcode::SETQ, true, false),
            Status::NotStored,
        );
        assert_eq!(&out[24..], b"Not stored.");
    }

    #[test]
    fn getk_returns_the_key_on_hit_and_miss() {
        let a = attrs(opcode::GETK, false, true);
        let mut out = Vec::new();
        hit(&mut out, &a, 5, 0x01020304, b"key", b"val");
        assert_eq!(&out[2..4], &3u16.to_be_bytes());
        assert_eq!(&out[24..], b"\x01\x02\x03\x04keyval");
        let mut out = Vec::new();
        miss(&mut out, &a, b"key");
        assert_eq!(&out[6..8], &1u16.to_be_bytes());
        assert_eq!(&out[24..], b"key");
    }
}
