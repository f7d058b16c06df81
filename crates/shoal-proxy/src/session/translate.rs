//! The binary protocol over meta-speaking backends: a binary request rewritten as the
//! meta (or text) command that does the same work, and the backend's reply rewritten as
//! the binary response packet memcached would have sent.
//!
//! Backends are spoken to over the shared pipelined connections, which carry text and meta
//! commands (a memcached connection speaks one protocol for its whole life), so a binary
//! client's request becomes:
//! - `GET`/`GETK`/`GAT`/`TOUCH` families: `mg <key> f c [v] [T<ttl>]` (the item's flags and
//!   CAS unique, which binary replies carry);
//! - `SET`/`ADD`/`REPLACE`/`APPEND`/`PREPEND`: `ms <key> <len> M<mode> [F<flags>
//!   T<ttl>] [C<cas>] c` (the new CAS unique comes back);
//! - `DELETE`: `md <key> [C<cas>]`;
//! - `INCREMENT`/`DECREMENT`: `ma <key> M<I|D> D<delta> [N<ttl> J<initial>] [C<cas>] v c`;
//! - `FLUSH`: `flush_all [delay]`, to every server.
//!
//! A key that text cannot carry (a space, a control character) goes base64-encoded with
//! meta's `b` flag, so any binary key reaches the server unchanged. Quiet opcodes are sent
//! loud and their successes (and get misses) dropped here, so an error still reaches the
//! client as memcached's quiet semantics require.

use std::io::Write;

use shoal_protocol::binary::{self, reply, Attrs, Command, Status};
use shoal_protocol::{encode_key_base64, StoreKind};

/// What kind of backend reply a binary request waits for, and so how it is translated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    /// `mg`: a hit (`VA` with the value, or `HD` for `TOUCH`) or `EN`.
    Get,
    /// `ms`: `HD`, `NS`, `EX` or `NF`; the binary status of `NS` depends on the command.
    Store(StoreKind),
    /// `md`: `HD`, `NF` or `EX`.
    Delete,
    /// `ma`: `VA` with the new value, `NF`, `NS` or `EX`.
    Arithmetic,
    /// `flush_all`: `OK`.
    Flush,
}

/// How to turn one backend reply into the binary response to a request.
#[derive(Debug)]
pub(super) struct BinaryReply {
    /// The request's opcode, opaque, CAS and quietness.
    pub(super) attrs: Attrs,
    pub(super) op: Op,
    /// The key, kept only for the `GETK` family (whose replies carry it).
    pub(super) key: Option<Box<[u8]>>,
}

/// Whether memcached's text tokenizer carries `key` unchanged: no space, no control
/// character (so no `\r` or `\n`), no DEL.
pub(super) fn text_safe(key: &[u8]) -> bool {
    key.iter().all(|&b| b > b' ' && b != 0x7f)
}

/// Appends `key` as a meta command's key token; true when it went base64-encoded (the
/// command then needs the `b` flag).
fn push_key(out: &mut Vec<u8>, key: &[u8]) -> bool {
    if text_safe(key) {
        out.extend_from_slice(key);
        false
    } else {
        encode_key_base64(key, out);
        true
    }
}

/// Longest key (in bytes) that can be sent base64-encoded: memcached limits the encoded
/// token to 250 characters (62 blocks of 4 characters, 3 bytes each).
const MAX_BASE64_KEY: usize = 186;

/// Appends ` <flag><number>` (formatting into a `Vec` allocates nothing beyond it).
fn flag(out: &mut Vec<u8>, f: u8, n: impl std::fmt::Display) {
    let _ = write!(out, " {}{n}", char::from(f));
}

/// Why a binary command could not be expressed as a backend command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Untranslatable {
    /// A key with bytes text cannot carry, too long to send base64-encoded.
    KeyTooLong,
    /// Not a command that goes to the backends.
    NotForwarded,
}

/// Writes the backend command for `cmd` into `out` (emptied first) and says how its reply
/// is translated.
pub(super) fn request(
    attrs: &Attrs,
    cmd: &Command<'_>,
    out: &mut Vec<u8>,
) -> Result<BinaryReply, Untranslatable> {
    out.clear();
    let key_of = |key: &[u8]| attrs.key_return.then(|| Box::<[u8]>::from(key));
    let check = |key: &[u8]| {
        if !text_safe(key) && key.len() > MAX_BASE64_KEY {
            Err(Untranslatable::KeyTooLong)
        } else {
            Ok(())
        }
    };
    let (op, key) = match *cmd {
        Command::Get { key } => {
            check(key)?;
            out.extend_from_slice(b"mg ");
            let b64 = push_key(out, key);
            out.extend_from_slice(b" v f c");
            if b64 {
                out.extend_from_slice(b" b");
            }
            (Op::Get, key_of(key))
        }
        Command::GetAndTouch {
            key,
            exptime,
            value,
        } => {
            check(key)?;
            out.extend_from_slice(b"mg ");
            let b64 = push_key(out, key);
            out.extend_from_slice(if value { b" v f c" } else { b" f c" });
            flag(out, b'T', exptime);
            if b64 {
                out.extend_from_slice(b" b");
            }
            (Op::Get, key_of(key))
        }
        Command::Store {
            kind,
            key,
            flags,
            exptime,
            data,
        } => {
            check(key)?;
            out.reserve(data.len() + 64);
            out.extend_from_slice(b"ms ");
            let b64 = push_key(out, key);
            let _ = write!(out, " {}", data.len());
            let mode = match kind {
                StoreKind::Add => b'E',
                StoreKind::Replace => b'R',
                StoreKind::Append => b'A',
                StoreKind::Prepend => b'P',
                StoreKind::Set | StoreKind::Cas => b'S',
            };
            out.extend_from_slice(b" M");
            out.push(mode);
            if !matches!(kind, StoreKind::Append | StoreKind::Prepend) {
                flag(out, b'F', flags);
                flag(out, b'T', exptime);
            }
            if let Some(cas) = attrs.compare_cas() {
                flag(out, b'C', cas);
            }
            out.extend_from_slice(b" c");
            if b64 {
                out.extend_from_slice(b" b");
            }
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(data);
            (Op::Store(kind), None)
        }
        Command::Delete { key } => {
            check(key)?;
            out.extend_from_slice(b"md ");
            let b64 = push_key(out, key);
            if let Some(cas) = attrs.compare_cas() {
                flag(out, b'C', cas);
            }
            if b64 {
                out.extend_from_slice(b" b");
            }
            (Op::Delete, None)
        }
        Command::Arithmetic {
            key,
            incr,
            delta,
            initial,
            create_exptime,
        } => {
            check(key)?;
            out.extend_from_slice(b"ma ");
            let b64 = push_key(out, key);
            out.extend_from_slice(if incr { b" MI" } else { b" MD" });
            flag(out, b'D', delta);
            if let Some(ttl) = create_exptime {
                flag(out, b'N', ttl);
                flag(out, b'J', initial);
            }
            if let Some(cas) = attrs.compare_cas() {
                flag(out, b'C', cas);
            }
            out.extend_from_slice(b" v c");
            if b64 {
                out.extend_from_slice(b" b");
            }
            (Op::Arithmetic, None)
        }
        Command::Flush { delay } => {
            out.extend_from_slice(b"flush_all");
            if delay != 0 {
                let _ = write!(out, " {delay}");
            }
            (Op::Flush, None)
        }
        _ => return Err(Untranslatable::NotForwarded),
    };
    out.extend_from_slice(b"\r\n");
    Ok(BinaryReply {
        attrs: *attrs,
        op,
        key,
    })
}

/// A meta reply's first line, split into its code and flag tokens, plus the data block of
/// a `VA` reply.
struct MetaReply<'a> {
    line: &'a [u8],
    data: &'a [u8],
}

impl<'a> MetaReply<'a> {
    fn parse(b: &'a [u8]) -> Option<MetaReply<'a>> {
        let nl = memchr::memchr(b'\n', b)?;
        let line = b.get(..nl)?.strip_suffix(b"\r")?;
        let rest = b.get(nl + 1..).unwrap_or_default();
        let data = match line.strip_prefix(b"VA ") {
            Some(va) => {
                let len: usize = number(va.split(|&c| c == b' ').next()?)?;
                rest.get(..len)?
            }
            None => &[],
        };
        Some(MetaReply { line, data })
    }

    /// The two-letter code (`VA`, `HD`, `EN`, ...) or the whole line for an error.
    fn code(&self) -> &'a [u8] {
        self.line.get(..2).unwrap_or(self.line)
    }

    /// The number after return flag `f` (`f123`), if present and valid.
    fn token<T: std::str::FromStr>(&self, f: u8) -> Option<T> {
        self.line
            .split(|&c| c == b' ')
            .skip(1)
            .find(|t| t.first() == Some(&f))
            .and_then(|t| number(t.get(1..)?))
    }
}

fn number<T: std::str::FromStr>(b: &[u8]) -> Option<T> {
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// Appends an error packet with `status` and `text` as its body.
fn error_with(out: &mut Vec<u8>, a: &Attrs, status: Status, text: &[u8]) {
    binary::response(out, a.opcode, status, a.opaque, 0, &[], &[], text);
}

/// The binary status for an error line from a backend (or made by the proxy for a backend
/// failure): memcached's status where one matches, else a temporary failure carrying the
/// line's text.
pub(super) fn error_line(out: &mut Vec<u8>, a: &Attrs, line: &[u8]) {
    let text = line
        .strip_prefix(b"SERVER_ERROR ")
        .or_else(|| line.strip_prefix(b"CLIENT_ERROR "))
        .unwrap_or(line);
    if line.starts_with(b"SERVER_ERROR object too large") {
        reply::status(out, a, Status::TooLarge);
    } else if line.starts_with(b"SERVER_ERROR out of memory") {
        reply::status(out, a, Status::OutOfMemory);
    } else if line.starts_with(b"CLIENT_ERROR cannot increment or decrement non-numeric") {
        reply::status(out, a, Status::NonNumeric);
    } else if line.starts_with(b"CLIENT_ERROR") {
        error_with(out, a, Status::InvalidArguments, text);
    } else if line.starts_with(b"SERVER_ERROR") {
        // What the proxy itself says when no server answered (refused, timed out, no live
        // servers): worth retrying.
        error_with(out, a, Status::TemporaryFailure, text);
    } else {
        // `ERROR` (a server that does not speak meta) or anything unexpected.
        error_with(out, a, Status::InternalError, line);
    }
}

/// Appends the binary response for backend reply `text` (a complete meta or text reply,
/// or the proxy's `SERVER_ERROR` line for a failure) to request `r`.
pub(super) fn response(r: &BinaryReply, text: &[u8], out: &mut Vec<u8>) {
    let a = &r.attrs;
    let key: &[u8] = r.key.as_deref().unwrap_or_default();
    let Some(m) = MetaReply::parse(text) else {
        error_with(out, a, Status::InternalError, b"unreadable server reply");
        return;
    };
    let code = m.code();
    match (r.op, code) {
        (Op::Get, b"VA" | b"HD") => {
            let flags = m.token::<u32>(b'f').unwrap_or(0);
            let cas = m.token::<u64>(b'c').unwrap_or(0);
            reply::hit(out, a, cas, flags, key, m.data);
        }
        (Op::Get, b"EN") => reply::miss(out, a, key),
        (Op::Store(_) | Op::Delete, b"HD") => reply::ok(out, a, m.token(b'c').unwrap_or(0)),
        (Op::Store(kind), b"NS") => reply::status(
            out,
            a,
            // memcached's binary statuses for a storage command that did not store.
            match kind {
                StoreKind::Add => Status::KeyExists,
                StoreKind::Replace => Status::KeyNotFound,
                _ => Status::NotStored,
            },
        ),
        (Op::Store(_) | Op::Delete | Op::Arithmetic, b"EX") => {
            reply::status(out, a, Status::KeyExists)
        }
        (Op::Store(_) | Op::Delete | Op::Arithmetic, b"NF") => {
            reply::status(out, a, Status::KeyNotFound)
        }
        (Op::Arithmetic, b"VA") => match number::<u64>(m.data) {
            Some(n) => {
                let cas = m.token::<u64>(b'c').unwrap_or(0);
                reply::ok_with_value(out, a, cas, &n.to_be_bytes());
            }
            None => error_with(out, a, Status::InternalError, b"unreadable counter"),
        },
        (Op::Arithmetic, b"NS") => reply::status(out, a, Status::NotStored),
        (Op::Flush, _) if m.line == b"OK" => reply::ok(out, a, 0),
        _ => error_line(out, a, m.line),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_protocol::binary::opcode as op;

    fn attrs(opcode: u8, quiet: bool, key_return: bool, cas: u64) -> Attrs {
        Attrs {
            opcode,
            opaque: 0x0102_0304,
            cas,
            quiet,
            key_return,
        }
    }

    fn req(a: &Attrs, cmd: Command<'_>) -> (String, BinaryReply) {
        let mut out = Vec::new();
        let r = request(a, &cmd, &mut out).expect("translatable");
        (String::from_utf8_lossy(&out).into_owned(), r)
    }

    #[test]
    fn requests_become_meta_commands() {
        let a = attrs(op::GETK, false, true, 0);
        let (s, r) = req(&a, Command::Get { key: b"k1" });
        assert_eq!(s, "mg k1 v f c\r\n");
        assert_eq!(r.key.as_deref(), Some(&b"k1"[..]));
        let (s, _) = req(
            &attrs(op::GET, false, false, 0),
            Command::Get { key: b"a b\r\n" },
        );
        assert_eq!(s, "mg YSBiDQo= v f c b\r\n");
        let (s, _) = req(
            &attrs(op::TOUCH, false, false, 0),
            Command::GetAndTouch {
                key: b"k",
                exptime: 100,
                value: false,
            },
        );
        assert_eq!(s, "mg k f c T100\r\n");
        let (s, _) = req(
            &attrs(op::ADDQ, true, false, 0),
            Command::Store {
                kind: StoreKind::Add,
                key: b"k",
                flags: 7,
                exptime: 0,
                data: b"xyz",
            },
        );
        assert_eq!(s, "ms k 3 ME F7 T0 c\r\nxyz\r\n");
        let (s, _) = req(
            &attrs(op::APPEND, false, false, 99),
            Command::Store {
                kind: StoreKind::Append,
                key: b"k",
                flags: 0,
                exptime: 0,
                data: b"",
            },
        );
        assert_eq!(s, "ms k 0 MA C99 c\r\n\r\n");
        let (s, _) = req(
            &attrs(op::DECREMENT, false, false, 0),
            Command::Arithmetic {
                key: b"n",
                incr: false,
                delta: 3,
                initial: 10,
                create_exptime: Some(0),
            },
        );
        assert_eq!(s, "ma n MD D3 N0 J10 v c\r\n");
        let (s, _) = req(
            &attrs(op::INCREMENT, false, false, 5),
            Command::Arithmetic {
                key: b"n",
                incr: true,
                delta: u64::MAX,
                initial: 0,
                create_exptime: None,
            },
        );
        assert_eq!(s, "ma n MI D18446744073709551615 C5 v c\r\n");
        let (s, _) = req(
            &attrs(op::FLUSH, false, false, 0),
            Command::Flush { delay: 0 },
        );
        assert_eq!(s, "flush_all\r\n");
        let long = [0u8; 187];
        assert_eq!(
            request(
                &attrs(op::GET, false, false, 0),
                &Command::Get { key: &long },
                &mut Vec::new()
            )
            .unwrap_err(),
            Untranslatable::KeyTooLong
        );
    }

    fn status_of(p: &[u8]) -> u16 {
        u16::from_be_bytes([p[6], p[7]])
    }

    #[test]
    fn replies_become_packets() {
        let r = BinaryReply {
            attrs: attrs(op::GETK, false, true, 0),
            op: Op::Get,
            key: Some(Box::from(&b"k"[..])),
        };
        let mut out = Vec::new();
        response(&r, b"VA 2 f5 c77\r\nhi\r\n", &mut out);
        assert_eq!(out[1], op::GETK);
        assert_eq!(&out[12..16], &0x0102_0304u32.to_be_bytes());
        assert_eq!(&out[16..24], &77u64.to_be_bytes());
        assert_eq!(&out[24..], b"\x00\x00\x00\x05khi");
        out.clear();
        response(&r, b"EN\r\n", &mut out);
        assert_eq!(status_of(&out), 1);
        assert_eq!(&out[24..], b"k");
        let quiet = BinaryReply {
            attrs: attrs(op::GETQ, true, false, 0),
            op: Op::Get,
            key: None,
        };
        out.clear();
        response(&quiet, b"EN\r\n", &mut out);
        assert!(out.is_empty(), "a quiet miss sends nothing");
        response(&quiet, b"SERVER_ERROR Connection refused\r\n", &mut out);
        assert_eq!(status_of(&out), Status::TemporaryFailure as u16);
        assert_eq!(&out[24..], b"Connection refused");

        let add = BinaryReply {
            attrs: attrs(op::ADD, false, false, 0),
            op: Op::Store(StoreKind::Add),
            key: None,
        };
        out.clear();
        response(&add, b"NS\r\n", &mut out);
        assert_eq!(status_of(&out), Status::KeyExists as u16);
        out.clear();
        response(&add, b"HD c42\r\n", &mut out);
        assert_eq!(
            (status_of(&out), &out[16..24]),
            (0, &42u64.to_be_bytes()[..])
        );
        out.clear();
        response(
            &add,
            b"SERVER_ERROR object too large for cache\r\n",
            &mut out,
        );
        assert_eq!(status_of(&out), Status::TooLarge as u16);

        let incr = BinaryReply {
            attrs: attrs(op::INCREMENT, false, false, 0),
            op: Op::Arithmetic,
            key: None,
        };
        out.clear();
        response(&incr, b"VA 2 c9\r\n15\r\n", &mut out);
        assert_eq!(&out[24..], &15u64.to_be_bytes());
        out.clear();
        response(
            &incr,
            b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
            &mut out,
        );
        assert_eq!(status_of(&out), Status::NonNumeric as u16);
        out.clear();
        response(&incr, b"VA 5 c9\r\n1", &mut out);
        assert_eq!(status_of(&out), Status::InternalError as u16, "truncated");
        out.clear();
        response(&incr, b"", &mut out);
        assert_eq!(status_of(&out), Status::InternalError as u16);
    }
}
