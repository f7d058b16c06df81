//! Reply encoders. Each appends to a caller-owned `Vec<u8>` and allocates nothing beyond
//! growing that vector, so a connection can reuse one output buffer for every reply.

use std::mem::MaybeUninit;

use crate::meta::encode_key_base64;

/// `STORED\r\n`
pub const STORED: &[u8] = b"STORED\r\n";
/// `NOT_STORED\r\n`
pub const NOT_STORED: &[u8] = b"NOT_STORED\r\n";
/// `EXISTS\r\n`
pub const EXISTS: &[u8] = b"EXISTS\r\n";
/// `NOT_FOUND\r\n`
pub const NOT_FOUND: &[u8] = b"NOT_FOUND\r\n";
/// `DELETED\r\n`
pub const DELETED: &[u8] = b"DELETED\r\n";
/// `TOUCHED\r\n`
pub const TOUCHED: &[u8] = b"TOUCHED\r\n";
/// `OK\r\n`
pub const OK: &[u8] = b"OK\r\n";
/// `END\r\n`
pub const END: &[u8] = b"END\r\n";
/// `ERROR\r\n`
pub const ERROR: &[u8] = b"ERROR\r\n";
/// `RESET\r\n` (reply to `stats reset`).
pub const RESET: &[u8] = b"RESET\r\n";
/// `MN\r\n` (reply to `mn`).
pub const MN: &[u8] = b"MN\r\n";
/// `EN\r\n` (meta miss / `me` miss).
pub const EN: &[u8] = b"EN\r\n";
/// `SERVER_ERROR object too large for cache\r\n`
pub const OBJECT_TOO_LARGE: &[u8] = b"SERVER_ERROR object too large for cache\r\n";
/// `SERVER_ERROR out of memory storing object\r\n`
pub const OUT_OF_MEMORY_STORING: &[u8] = b"SERVER_ERROR out of memory storing object\r\n";
/// The reply when the server cannot take the memory to receive a request (memcached's
/// wording for a read buffer it cannot grow); the connection is then closed.
pub const OUT_OF_MEMORY_READING: &[u8] = b"SERVER_ERROR out of memory reading request\r\n";
/// The reply when a multi-get's reply cannot take more memory (memcached's wording); the
/// multi-get stops there.
pub const OUT_OF_MEMORY_WRITING_GET: &[u8] = b"SERVER_ERROR out of memory writing get response\r\n";
/// `CLIENT_ERROR cannot increment or decrement non-numeric value\r\n`
pub const NON_NUMERIC: &[u8] = b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n";
/// `CLIENT_ERROR flush_all not allowed\r\n` (memcached with flush disabled).
pub const FLUSH_NOT_ALLOWED: &[u8] = b"CLIENT_ERROR flush_all not allowed\r\n";
/// `SERVER_ERROR: shutdown not enabled\r\n` (memcached 1.6.45 without `-A`; older
/// releases answered `ERROR: shutdown not enabled`).
pub const SHUTDOWN_NOT_ENABLED: &[u8] = b"SERVER_ERROR: shutdown not enabled\r\n";
/// `MEMLIMIT_ADJUST_FAILED out of bounds or unable to adjust\r\n`
pub const MEMLIMIT_ADJUST_FAILED: &[u8] =
    b"MEMLIMIT_ADJUST_FAILED out of bounds or unable to adjust\r\n";

/// Meta status codes for [`meta_header`].
pub mod code {
    /// Value follows.
    pub const VA: &[u8; 2] = b"VA";
    /// Success, no value.
    pub const HD: &[u8; 2] = b"HD";
    /// Miss.
    pub const EN: &[u8; 2] = b"EN";
    /// Not found.
    pub const NF: &[u8; 2] = b"NF";
    /// Not stored.
    pub const NS: &[u8; 2] = b"NS";
    /// CAS mismatch.
    pub const EX: &[u8; 2] = b"EX";
    /// No-op reply.
    pub const MN: &[u8; 2] = b"MN";
    /// Debug reply.
    pub const ME: &[u8; 2] = b"ME";
}

/// Most digits a u64 has.
const U64_DIGITS: usize = 20;

/// Appends the decimal form of `n` (no sign, no padding), straight into spare capacity
/// (see [`push_value_tail`]).
#[inline]
pub fn push_u64(out: &mut Vec<u8>, n: u64) {
    out.reserve(U64_DIGITS);
    let written = put_digits(&mut out.spare_capacity_mut()[..U64_DIGITS], 0, n);
    let new_len = out.len() + written;
    // SAFETY: the capacity was reserved above, and the `written` bytes after the old
    // length were all written by put_digits.
    unsafe { out.set_len(new_len) };
}

/// Appends the decimal form of `n`.
#[inline]
pub fn push_u32(out: &mut Vec<u8>, n: u32) {
    push_u64(out, u64::from(n));
}

/// Appends the decimal form of `n`, with a leading `-` if negative.
#[inline]
pub fn push_i64(out: &mut Vec<u8>, n: i64) {
    if n < 0 {
        out.push(b'-');
    }
    push_u64(out, n.unsigned_abs());
}

/// Appends `\r\n`.
#[inline]
pub fn crlf(out: &mut Vec<u8>) {
    out.extend_from_slice(b"\r\n");
}

/// Most bytes [`push_value_tail`] appends: ` ` + u32 + ` ` + u64 + ` ` + u64 + `\r\n`.
const VALUE_TAIL_MAX: usize = 1 + 10 + 1 + U64_DIGITS + 1 + U64_DIGITS + 2;

/// Appends ` <flags> <bytes>[ <cas>]\r\n`, the end of a `VALUE` line, straight into the
/// vector's spare capacity.
///
/// Why not a `push` per field: every push reloads and stores the vector's length and
/// checks its capacity, and under callgrind a 100-byte hit's header cost 160
/// instructions that way, more than the index lookup that found it. Here the length
/// is set once.
fn push_value_tail(out: &mut Vec<u8>, flags: u32, len: usize, cas: Option<u64>) {
    out.reserve(VALUE_TAIL_MAX);
    let spare = &mut out.spare_capacity_mut()[..VALUE_TAIL_MAX];
    let mut at = put_field(spare, 0, u64::from(flags));
    at = put_field(spare, at, len as u64);
    if let Some(cas) = cas {
        at = put_field(spare, at, cas);
    }
    spare[at].write(b'\r');
    spare[at + 1].write(b'\n');
    let new_len = out.len() + at + 2;
    // SAFETY: the capacity was reserved above, and the `at + 2` bytes after the old
    // length were all written through `spare` (put_field writes every byte it counts).
    unsafe { out.set_len(new_len) };
}

/// Writes ` <n>` into `spare` at `at`; returns the index after it.
#[inline(always)]
fn put_field(spare: &mut [MaybeUninit<u8>], at: usize, n: u64) -> usize {
    spare[at].write(b' ');
    put_digits(spare, at + 1, n)
}

/// Writes `n` in decimal into `spare` at `at`; returns the index after it. Flags and
/// lengths are mostly short, so numbers under 1,000 are written digit by digit, without
/// the general path's stack buffer and copy (which cost more than the digits).
#[inline(always)]
fn put_digits(spare: &mut [MaybeUninit<u8>], at: usize, n: u64) -> usize {
    if n < 10 {
        spare[at].write(b'0' + n as u8);
        return at + 1;
    }
    if n < 100 {
        spare[at].write(b'0' + (n / 10) as u8);
        spare[at + 1].write(b'0' + (n % 10) as u8);
        return at + 2;
    }
    if n < 1000 {
        spare[at].write(b'0' + (n / 100) as u8);
        spare[at + 1].write(b'0' + (n / 10 % 10) as u8);
        spare[at + 2].write(b'0' + (n % 10) as u8);
        return at + 3;
    }
    let mut digits = [0u8; U64_DIGITS];
    let from = decimal(n, &mut digits);
    let mut at = at;
    for &d in &digits[from..] {
        spare[at].write(d);
        at += 1;
    }
    at
}

/// Writes `n` in decimal at the end of `buf`; returns where its digits start.
fn decimal(mut n: u64, buf: &mut [u8; U64_DIGITS]) -> usize {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return i;
        }
    }
}

/// Appends `VALUE <key> <flags> <bytes>[ <cas>]\r\n`.
pub fn value_header(out: &mut Vec<u8>, key: &[u8], flags: u32, len: usize, cas: Option<u64>) {
    out.reserve(6 + key.len() + VALUE_TAIL_MAX);
    out.extend_from_slice(b"VALUE ");
    out.extend_from_slice(key);
    push_value_tail(out, flags, len, cas);
}

/// Appends a whole retrieval item: [`value_header`], the data, `\r\n`.
pub fn value(out: &mut Vec<u8>, key: &[u8], flags: u32, data: &[u8], cas: Option<u64>) {
    out.reserve(6 + key.len() + VALUE_TAIL_MAX + data.len() + 2);
    value_header(out, key, flags, data.len(), cas);
    out.extend_from_slice(data);
    crlf(out);
}

/// Appends `END\r\n`.
#[inline]
pub fn end(out: &mut Vec<u8>) {
    out.extend_from_slice(END);
}

/// Appends a line with just a number, `<n>\r\n` (the reply to `incr`/`decr`).
pub fn number_line(out: &mut Vec<u8>, n: u64) {
    push_u64(out, n);
    crlf(out);
}

/// Appends `VERSION <version>\r\n`.
pub fn version(out: &mut Vec<u8>, version: &[u8]) {
    out.extend_from_slice(b"VERSION ");
    out.extend_from_slice(version);
    crlf(out);
}

/// Appends `STAT <name> <value>\r\n`.
pub fn stat(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(b"STAT ");
    out.extend_from_slice(name);
    out.push(b' ');
    out.extend_from_slice(value);
    crlf(out);
}

/// Appends `STAT <name> <value>\r\n` for a string value.
pub fn stat_str(out: &mut Vec<u8>, name: &str, value: &str) {
    stat(out, name.as_bytes(), value.as_bytes());
}

/// Appends `STAT <name> <value>\r\n` for an unsigned value.
pub fn stat_u64(out: &mut Vec<u8>, name: &str, value: u64) {
    out.extend_from_slice(b"STAT ");
    out.extend_from_slice(name.as_bytes());
    out.push(b' ');
    push_u64(out, value);
    crlf(out);
}

/// Appends `STAT <name> <value>\r\n` for a signed value.
pub fn stat_i64(out: &mut Vec<u8>, name: &str, value: i64) {
    out.extend_from_slice(b"STAT ");
    out.extend_from_slice(name.as_bytes());
    out.push(b' ');
    push_i64(out, value);
    crlf(out);
}

/// Appends a two-letter meta status code (`HD`, `EN`, ...) with no line ending, so flags
/// can follow; finish the line with [`crlf`].
#[inline]
pub fn meta_header(out: &mut Vec<u8>, code: &[u8; 2]) {
    out.extend_from_slice(code);
}

/// Appends `VA <len>` with no line ending; follow with flags, [`crlf`], the data, [`crlf`].
pub fn meta_value_header(out: &mut Vec<u8>, len: usize) {
    out.extend_from_slice(b"VA ");
    push_u64(out, len as u64);
}

/// Appends ` <flag><token>`.
#[inline]
pub fn meta_flag(out: &mut Vec<u8>, flag: u8, token: &[u8]) {
    out.push(b' ');
    out.push(flag);
    out.extend_from_slice(token);
}

/// Appends ` <flag><n>`.
#[inline]
pub fn meta_flag_u64(out: &mut Vec<u8>, flag: u8, n: u64) {
    out.push(b' ');
    out.push(flag);
    push_u64(out, n);
}

/// Appends ` <flag><n>` for a signed number (e.g. `t-1` for "never expires").
#[inline]
pub fn meta_flag_i64(out: &mut Vec<u8>, flag: u8, n: i64) {
    out.push(b' ');
    out.push(flag);
    push_i64(out, n);
}

/// Appends the opaque flag as memcached echoes it: ` O<token>`.
#[inline]
pub fn meta_opaque(out: &mut Vec<u8>, token: &[u8]) {
    meta_flag(out, b'O', token);
}

/// Appends the `k` return flag as memcached writes it: ` k<key>`, or for a binary key
/// (request had `b`) ` k<base64 key> b`.
pub fn meta_key(out: &mut Vec<u8>, key: &[u8], base64: bool) {
    out.extend_from_slice(b" k");
    if base64 {
        encode_key_base64(key, out);
        out.extend_from_slice(b" b");
    } else {
        out.extend_from_slice(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn short_numbers_take_the_direct_path_exactly() {
        for n in 0..=1000u64 {
            let mut out = b"x".to_vec();
            push_u64(&mut out, n);
            assert_eq!(out, format!("x{n}").into_bytes());
        }
    }

    #[test]
    fn numbers() {
        let mut out = Vec::new();
        push_u64(&mut out, 0);
        out.push(b' ');
        push_u64(&mut out, u64::MAX);
        out.push(b' ');
        push_i64(&mut out, i64::MIN);
        out.push(b' ');
        push_i64(&mut out, -1);
        out.push(b' ');
        push_u32(&mut out, 42);
        assert_eq!(
            out,
            b"0 18446744073709551615 -9223372036854775808 -1 42".to_vec()
        );
    }

    #[test]
    fn text_replies() {
        let mut out = Vec::new();
        value(&mut out, b"foo", 5, b"bar", None);
        value(&mut out, b"k", 0, b"", Some(99));
        end(&mut out);
        assert_eq!(
            out,
            b"VALUE foo 5 3\r\nbar\r\nVALUE k 0 0 99\r\n\r\nEND\r\n"
        );
        out.clear();
        stat_u64(&mut out, "pid", 12);
        stat_str(&mut out, "version", "1.6.18");
        stat_i64(&mut out, "x", -3);
        stat(&mut out, b"a", b"b");
        number_line(&mut out, 7);
        version(&mut out, b"1.6.18");
        assert_eq!(
            out,
            b"STAT pid 12\r\nSTAT version 1.6.18\r\nSTAT x -3\r\nSTAT a b\r\n7\r\nVERSION 1.6.18\r\n"
        );
    }

    #[test]
    fn meta_replies() {
        let mut out = Vec::new();
        meta_value_header(&mut out, 3);
        meta_flag_u64(&mut out, b'c', 17);
        meta_flag_i64(&mut out, b't', -1);
        meta_flag(&mut out, b'f', b"0");
        meta_opaque(&mut out, b"123");
        meta_key(&mut out, b"foo", false);
        crlf(&mut out);
        out.extend_from_slice(b"bar");
        crlf(&mut out);
        meta_header(&mut out, code::HD);
        meta_key(&mut out, b"foo", true);
        crlf(&mut out);
        assert_eq!(
            out,
            b"VA 3 c17 t-1 f0 O123 kfoo\r\nbar\r\nHD kZm9v b\r\n".to_vec()
        );
    }

    proptest! {
        #[test]
        fn push_matches_std(n in any::<u64>(), m in any::<i64>()) {
            let mut out = Vec::new();
            push_u64(&mut out, n);
            prop_assert_eq!(out, n.to_string().into_bytes());
            let mut out = Vec::new();
            push_i64(&mut out, m);
            prop_assert_eq!(out, m.to_string().into_bytes());
        }

        #[test]
        fn value_lines_match_std(
            key in proptest::collection::vec(33u8..127, 1..250),
            flags in prop_oneof![0u32..1100, any::<u32>()],
            len in prop_oneof![0usize..1100, any::<u32>().prop_map(|n| n as usize)],
            cas in proptest::option::of(prop_oneof![0u64..1100, any::<u64>()]),
        ) {
            let mut out = b"x".to_vec();
            value_header(&mut out, &key, flags, len, cas);
            let mut want = b"xVALUE ".to_vec();
            want.extend_from_slice(&key);
            want.extend_from_slice(format!(" {flags} {len}").as_bytes());
            if let Some(cas) = cas {
                want.extend_from_slice(format!(" {cas}").as_bytes());
            }
            want.extend_from_slice(b"\r\n");
            prop_assert_eq!(out, want);
        }
    }
}
