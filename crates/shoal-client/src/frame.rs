//! Framing of backend replies: given what was asked, how many bytes of the read buffer
//! form the complete reply, and whether the bytes are a memcached reply at all.
//!
//! This is what lets one backend connection carry many clients' requests in a pipeline:
//! replies are matched to requests in order, so a reply must be framed exactly, and
//! anything that is not a valid reply (a misbehaving backend) is detected rather than
//! misattributed.

use memchr::memchr;
use shoal_protocol::binary::opcode;
use shoal_protocol::{parse_response, ResponseParsed};

/// Longest reply line accepted from a backend (a `VALUE` line with a 250-byte key is far
/// shorter); a longer line is garbage.
pub const MAX_REPLY_LINE: usize = 8192;
/// Largest value a backend reply may carry (memcached's hard maximum item size is 1 GiB;
/// this bounds what a garbage length can make the proxy buffer).
pub const MAX_REPLY_VALUE: usize = 1 << 30;

/// The shape of the reply a request expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyKind {
    /// The request carries `noreply`: the backend sends nothing.
    None,
    /// `get`/`gets`/`gat`/`gats`: `VALUE` blocks then `END`, or one error line.
    Retrieval,
    /// Storage, `delete`, `incr`/`decr`, `touch`, `flush_all`: one line.
    Line,
    /// A meta command: one meta reply (`VA` with its data, or one line).
    Meta,
    /// A quiet meta command sent followed by `mn`: zero or more meta replies ended by
    /// `MN` (the framed length includes the `MN\r\n`, which the proxy strips).
    MetaQuiet,
    /// A binary-protocol request: one response packet.
    Binary,
    /// Quiet binary requests followed by a `noop`: zero or more response packets ended by
    /// the `noop` response (the framed length includes it; [`BINARY_NOOP_LEN`] bytes).
    BinaryQuiet,
}

/// Length of the `noop` response that ends a [`ReplyKind::BinaryQuiet`] reply.
pub const BINARY_NOOP_LEN: usize = shoal_protocol::binary::HEADER_LEN;

/// Length of the `MN\r\n` that ends a [`ReplyKind::MetaQuiet`] reply.
pub const META_NOOP_LEN: usize = 4;

/// The result of [`frame`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framed {
    /// The first `len` bytes are the complete reply.
    Complete {
        /// Reply length in bytes.
        len: usize,
    },
    /// More bytes are needed.
    Incomplete,
    /// The bytes are not a valid reply to this kind of request.
    Invalid,
}

/// Frames the reply at the start of `buf` for a request of `kind`.
///
/// Guarantees: `Complete { len }` has `len <= buf.len()`; `Invalid` is returned as soon as
/// the bytes cannot start a valid reply, and for lines over [`MAX_REPLY_LINE`]. Never
/// panics.
pub fn frame(buf: &[u8], kind: ReplyKind) -> Framed {
    match kind {
        ReplyKind::None => Framed::Complete { len: 0 },
        ReplyKind::Line => match line(buf, 0) {
            Line::Done(end, l) if is_line_reply(l) => Framed::Complete { len: end },
            Line::Done(..) | Line::Invalid => Framed::Invalid,
            Line::More => Framed::Incomplete,
        },
        ReplyKind::Retrieval => retrieval(buf),
        ReplyKind::Meta => match meta_unit(buf, 0) {
            Unit::Done(end, _) => Framed::Complete { len: end },
            Unit::More => Framed::Incomplete,
            Unit::Invalid => Framed::Invalid,
        },
        ReplyKind::MetaQuiet => {
            let mut pos = 0;
            loop {
                match meta_unit(buf, pos) {
                    Unit::Done(end, true) => return Framed::Complete { len: end },
                    Unit::Done(end, false) => pos = end,
                    Unit::More => return Framed::Incomplete,
                    Unit::Invalid => return Framed::Invalid,
                }
            }
        }
        ReplyKind::Binary => match parse_response(buf) {
            ResponseParsed::Response { consumed, .. } => Framed::Complete { len: consumed },
            ResponseParsed::Incomplete => Framed::Incomplete,
            ResponseParsed::Invalid => Framed::Invalid,
        },
        ReplyKind::BinaryQuiet => {
            let mut pos = 0;
            loop {
                match parse_response(&buf[pos..]) {
                    ResponseParsed::Response { response, consumed } => {
                        pos += consumed;
                        if response.opcode == opcode::NOOP {
                            return Framed::Complete { len: pos };
                        }
                    }
                    ResponseParsed::Incomplete => return Framed::Incomplete,
                    ResponseParsed::Invalid => return Framed::Invalid,
                }
            }
        }
    }
}

enum Line<'a> {
    /// End offset (after `\r\n`) and the line without `\r\n`.
    Done(usize, &'a [u8]),
    More,
    Invalid,
}

fn line(buf: &[u8], pos: usize) -> Line<'_> {
    let rest = buf.get(pos..).unwrap_or_default();
    match memchr(b'\n', rest) {
        Some(i) if i > 0 && rest[i - 1] == b'\r' && i <= MAX_REPLY_LINE => {
            Line::Done(pos + i + 1, &rest[..i - 1])
        }
        Some(_) => Line::Invalid,
        None if rest.len() > MAX_REPLY_LINE => Line::Invalid,
        None => Line::More,
    }
}

fn is_error(l: &[u8]) -> bool {
    l == b"ERROR"
        || l.starts_with(b"ERROR ")
        || l.starts_with(b"CLIENT_ERROR")
        || l.starts_with(b"SERVER_ERROR")
}

fn is_line_reply(l: &[u8]) -> bool {
    matches!(
        l,
        b"STORED" | b"NOT_STORED" | b"EXISTS" | b"NOT_FOUND" | b"DELETED" | b"TOUCHED" | b"OK"
    ) || is_error(l)
        || (!l.is_empty() && l.len() <= 20 && l.iter().all(u8::is_ascii_digit))
        || l.starts_with(b"VERSION ")
}

fn parse_len(tok: &[u8]) -> Option<usize> {
    if tok.is_empty() || tok.len() > 10 || !tok.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(tok)
        .ok()?
        .parse::<usize>()
        .ok()
        .filter(|&n| n <= MAX_REPLY_VALUE)
}

/// Data block of `len` bytes plus `\r\n` starting at `pos`.
fn data(buf: &[u8], pos: usize, len: usize) -> Unit {
    let end = pos + len + 2;
    if buf.len() < end {
        return Unit::More;
    }
    if &buf[end - 2..end] != b"\r\n" {
        return Unit::Invalid;
    }
    Unit::Done(end, false)
}

fn retrieval(buf: &[u8]) -> Framed {
    let mut pos = 0;
    loop {
        match line(buf, pos) {
            Line::More => return Framed::Incomplete,
            Line::Invalid => return Framed::Invalid,
            Line::Done(end, l) => {
                if l == b"END" || (pos == 0 && is_error(l)) {
                    return Framed::Complete { len: end };
                }
                let Some(rest) = l.strip_prefix(b"VALUE ") else {
                    return Framed::Invalid;
                };
                let mut toks = rest.split(|&b| b == b' ').filter(|t| !t.is_empty());
                let (_key, _flags, len) = (toks.next(), toks.next(), toks.next());
                let Some(len) = len.and_then(parse_len) else {
                    return Framed::Invalid;
                };
                match data(buf, end, len) {
                    Unit::Done(e, _) => pos = e,
                    Unit::More => return Framed::Incomplete,
                    Unit::Invalid => return Framed::Invalid,
                }
            }
        }
    }
}

enum Unit {
    /// End offset, and whether the unit was `MN`.
    Done(usize, bool),
    More,
    Invalid,
}

fn meta_unit(buf: &[u8], pos: usize) -> Unit {
    match line(buf, pos) {
        Line::More => Unit::More,
        Line::Invalid => Unit::Invalid,
        Line::Done(end, l) => {
            if l == b"MN" {
                return Unit::Done(end, true);
            }
            if let Some(rest) = l.strip_prefix(b"VA ") {
                let tok = rest.split(|&b| b == b' ').next().unwrap_or_default();
                return match parse_len(tok) {
                    Some(n) => data(buf, end, n),
                    None => Unit::Invalid,
                };
            }
            let code = l.get(..2).unwrap_or_default();
            let ok_code = matches!(code, b"HD" | b"EN" | b"NF" | b"NS" | b"EX" | b"ME")
                && (l.len() == 2 || l[2] == b' ');
            if ok_code || is_error(l) {
                Unit::Done(end, false)
            } else {
                Unit::Invalid
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_retrieval() {
        let r = b"VALUE a 0 1\r\nx\r\nVALUE bb 5 2 7\r\nyz\r\nEND\r\n";
        assert_eq!(
            frame(r, ReplyKind::Retrieval),
            Framed::Complete { len: r.len() }
        );
        for cut in 0..r.len() {
            assert_eq!(frame(&r[..cut], ReplyKind::Retrieval), Framed::Incomplete);
        }
        assert_eq!(
            frame(b"SERVER_ERROR x\r\n", ReplyKind::Retrieval),
            Framed::Complete { len: 16 }
        );
        assert_eq!(frame(b"HELLO\r\n", ReplyKind::Retrieval), Framed::Invalid);
        assert_eq!(
            frame(b"VALUE a 0 1\r\nxyz\r\n", ReplyKind::Retrieval),
            Framed::Invalid
        );
        assert_eq!(
            frame(b"VALUE a 0 99999999999\r\n", ReplyKind::Retrieval),
            Framed::Invalid
        );
    }

    #[test]
    fn frames_lines_and_meta() {
        assert_eq!(
            frame(b"STORED\r\nEND", ReplyKind::Line),
            Framed::Complete { len: 8 }
        );
        assert_eq!(
            frame(b"42\r\n", ReplyKind::Line),
            Framed::Complete { len: 4 }
        );
        assert_eq!(frame(b"garbage\r\n", ReplyKind::Line), Framed::Invalid);
        assert_eq!(frame(b"STOR", ReplyKind::Line), Framed::Incomplete);
        assert_eq!(frame(&[b'x'; 9000], ReplyKind::Line), Framed::Invalid);
        assert_eq!(
            frame(b"VA 2 t\r\nhi\r\n", ReplyKind::Meta),
            Framed::Complete { len: 12 }
        );
        assert_eq!(
            frame(b"HD\r\nMN\r\n", ReplyKind::MetaQuiet),
            Framed::Complete { len: 8 }
        );
        assert_eq!(
            frame(b"MN\r\n", ReplyKind::MetaQuiet),
            Framed::Complete { len: 4 }
        );
        assert_eq!(frame(b"HD\r\n", ReplyKind::MetaQuiet), Framed::Incomplete);
        assert_eq!(frame(b"ZZ\r\n", ReplyKind::Meta), Framed::Invalid);
    }

    #[test]
    fn frames_binary() {
        use shoal_protocol::binary::{response, Status};
        let mut r = Vec::new();
        response(&mut r, opcode::GETKQ, Status::Ok, 1, 9, &[0; 4], b"k", b"v");
        let one = r.len();
        response(&mut r, opcode::NOOP, Status::Ok, 2, 0, &[], &[], &[]);
        assert_eq!(frame(&r, ReplyKind::Binary), Framed::Complete { len: one });
        assert_eq!(
            frame(&r, ReplyKind::BinaryQuiet),
            Framed::Complete { len: r.len() }
        );
        assert_eq!(r.len() - one, BINARY_NOOP_LEN);
        for cut in 0..r.len() {
            assert_eq!(frame(&r[..cut], ReplyKind::BinaryQuiet), Framed::Incomplete);
        }
        assert_eq!(frame(b"STORED\r\n", ReplyKind::Binary), Framed::Invalid);
        assert_eq!(frame(b"END\r\n", ReplyKind::BinaryQuiet), Framed::Invalid);
    }
}
