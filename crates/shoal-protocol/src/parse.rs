//! The request parser: one call returns one request (or what to do instead).
//!
//! Behaviour mirrors memcached 1.6's `proto_text.c` command by command, including which
//! errors are suppressed by `noreply`, when a storage command's data block is swallowed,
//! and when the connection is closed without a reply. Comments mark the places where the
//! rules look arbitrary but are memcached's.

pub use crate::error::ProtocolError;
use crate::limits::{Limits, MAX_GET_LINE_LEN, MAX_KEY_LEN, MAX_LINE_LEN};
use crate::meta::{self, MetaFlags};
use crate::num::{parse_i32, parse_u32, parse_u64};
use crate::request::{Keys, Request, StatsGroup, StoreKind};

/// The result of [`parse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// One complete request; `consumed` bytes of `buf` belong to it (line + data block).
    Request {
        /// The request, borrowing from `buf`.
        request: Request<'a>,
        /// Bytes of `buf` to drop before parsing the next request.
        consumed: usize,
    },
    /// Need more bytes. `needed` is the total buffer length known to be required (line +
    /// data + 2 for a storage command whose line is complete), or 0 if unknown.
    Incomplete {
        /// Total buffer length required, or 0 if not yet known.
        needed: usize,
    },
    /// Send `error`'s reply (unless `silent`), drop `consumed` bytes, then discard the next
    /// `swallow` bytes of input (they may not have arrived yet), and close the connection
    /// after the reply if `close`.
    Error {
        /// The error; [`ProtocolError::reply`] is the exact reply.
        error: ProtocolError,
        /// Bytes of `buf` to drop now (always `<= buf.len()`).
        consumed: usize,
        /// Further input bytes to discard, possibly not yet received.
        swallow: usize,
        /// Close the connection after sending the reply (if any).
        close: bool,
        /// Send no reply (memcached suppresses it for this `noreply` request, or closes
        /// without replying).
        silent: bool,
    },
    /// A storage command (text or `ms`) whose data is larger than `limits.max_value_len`:
    /// reply `SERVER_ERROR object too large for cache` (unless `noreply`), drop `consumed`
    /// (the line), swallow `swallow` bytes (data + "\r\n"), and — as memcached does for
    /// `set` and every `ms` — remove the old value of `key` when `remove_old` is true.
    TooLarge {
        /// The key as sent (base64 if `key_base64`).
        key: &'a [u8],
        /// Bytes of `buf` to drop now (the command line).
        consumed: usize,
        /// Further input bytes to discard (data block + `\r\n`).
        swallow: usize,
        /// Suppress the reply (text `noreply`; never set for `ms`, whose errors always show).
        noreply: bool,
        /// Delete the current value of `key`, so a failed overwrite never leaves stale data.
        remove_old: bool,
        /// `key` is base64 (an `ms` with the `b` flag): decode it with
        /// [`crate::meta::decode_key`] before removing.
        key_base64: bool,
    },
}

/// memcached's tokenizer array size: at most 23 real tokens plus a terminal marker.
const MAX_TOKENS: usize = 24;
/// memcached's `MFLAG_MAX_OPT_LENGTH`, compared against its token count (which includes
/// the command, the key and the terminal marker).
const MAX_META_TOKENS: usize = 20;
/// memcached ignores at most this many leading spaces before deciding a long line is a
/// multiget.
const MAX_LEADING_SPACES: usize = 100;

/// A request line split the way memcached's `tokenize_command` splits it: on single
/// spaces only, at most 23 tokens, the remainder left unsplit.
struct Tokens<'a> {
    line: &'a [u8],
    toks: [&'a [u8]; MAX_TOKENS - 1],
    starts: [usize; MAX_TOKENS - 1],
    n: usize,
}

impl<'a> Tokens<'a> {
    fn new(line: &'a [u8]) -> Self {
        let mut t = Tokens {
            line,
            toks: [&[][..]; MAX_TOKENS - 1],
            starts: [0; MAX_TOKENS - 1],
            n: 0,
        };
        let mut i = 0;
        let len = line.len();
        while i < len && t.n < MAX_TOKENS - 1 {
            while i < len && line[i] == b' ' {
                i += 1;
            }
            if i >= len {
                break;
            }
            let s = i;
            while i < len && line[i] != b' ' {
                i += 1;
            }
            t.toks[t.n] = &line[s..i];
            t.starts[t.n] = s;
            t.n += 1;
        }
        t
    }

    /// memcached's `ntokens`: real tokens plus the terminal marker.
    fn ntokens(&self) -> usize {
        self.n + 1
    }

    fn get(&self, i: usize) -> &'a [u8] {
        if i < self.n {
            self.toks[i]
        } else {
            &[]
        }
    }

    /// memcached's `tokens[ntokens - 2]`: the last tokenized token.
    fn last(&self) -> &'a [u8] {
        self.n.checked_sub(1).map_or(&[][..], |i| self.toks[i])
    }

    /// `set_noreply_maybe`: the last tokenized token is exactly `noreply`.
    fn noreply(&self) -> bool {
        self.last() == b"noreply"
    }

    /// The rest of the line from token `i` on (including any tokens past the tokenizer's
    /// limit), without trailing spaces; empty if there is no token `i`.
    fn from(&self, i: usize) -> &'a [u8] {
        if i >= self.n {
            return &[];
        }
        let rest = self.line.get(self.starts[i]..).unwrap_or(&[]);
        let end = rest.iter().rposition(|&b| b != b' ').map_or(0, |p| p + 1);
        &rest[..end]
    }
}

/// Parses one request from the start of `buf`.
///
/// Guarantees: never panics, never allocates, runs in time linear in the bytes it looks
/// at (the request line and, for storage commands, two bytes after the data), and every
/// `consumed` is `<= buf.len()`. A `Request` or `Error` with `consumed > 0` always makes
/// progress; `Incomplete` means no decision can be made until more bytes arrive.
pub fn parse<'a>(buf: &'a [u8], limits: &Limits) -> Parsed<'a> {
    let Some(nl) = memchr::memchr(b'\n', buf) else {
        return no_newline(buf);
    };
    let line_len = nl + 1;
    let mut end = nl;
    // memcached strips the `\r` only when something precedes it; a bare "\r\n" is the
    // one-byte command "\r", which is an ERROR either way.
    if end > 1 && buf[end - 1] == b'\r' {
        end -= 1;
    }
    let mut line = &buf[..end];
    // memcached tokenizes with strlen(), so a NUL byte ends the command line early; the
    // bytes after it are still consumed as part of the line.
    if let Some(z) = memchr::memchr(0, line) {
        line = &line[..z];
    }
    parse_line(buf, line, line_len, limits)
}

/// No newline yet: wait, unless the line is already too long to be anything memcached
/// would accept (then close without a reply, as memcached does).
fn no_newline(buf: &[u8]) -> Parsed<'_> {
    if buf.len() <= MAX_LINE_LEN {
        return Parsed::Incomplete { needed: 0 };
    }
    let lead = buf.iter().take_while(|&&b| b == b' ').count();
    let rest = &buf[lead..];
    let multiget = rest.starts_with(b"get ") || rest.starts_with(b"gets ");
    if lead > MAX_LEADING_SPACES || !multiget || buf.len() > MAX_GET_LINE_LEN {
        return Parsed::Error {
            error: ProtocolError::LineTooLong,
            consumed: buf.len(),
            swallow: 0,
            close: true,
            silent: true,
        };
    }
    Parsed::Incomplete { needed: 0 }
}

fn ok(request: Request<'_>, consumed: usize) -> Parsed<'_> {
    Parsed::Request { request, consumed }
}

fn err<'a>(error: ProtocolError, consumed: usize, silent: bool) -> Parsed<'a> {
    Parsed::Error {
        error,
        consumed,
        swallow: 0,
        close: false,
        silent,
    }
}

fn unknown<'a>(consumed: usize) -> Parsed<'a> {
    err(ProtocolError::UnknownCommand, consumed, false)
}

fn parse_line<'a>(buf: &'a [u8], line: &'a [u8], line_len: usize, limits: &Limits) -> Parsed<'a> {
    let t = Tokens::new(line);
    let cmd = t.get(0);
    let (first, nt) = match cmd.first() {
        Some(&f) if cmd.len() >= 2 => (f, t.ntokens()),
        _ => return unknown(line_len),
    };

    if first == b'm' && cmd.len() == 2 {
        return match cmd[1] {
            b'g' => parse_mg_md_ma(&t, line_len, MetaCmd::Get),
            b's' => parse_ms(buf, &t, line_len, limits),
            b'd' => parse_mg_md_ma(&t, line_len, MetaCmd::Delete),
            b'n' => ok(Request::MetaNoop, line_len),
            b'a' => parse_mg_md_ma(&t, line_len, MetaCmd::Arithmetic),
            b'e' => parse_me(&t, line_len),
            _ => unknown(line_len),
        };
    }

    if first == b'g' {
        if nt < 3 {
            return unknown(line_len);
        }
        return match cmd {
            b"get" => parse_get(&t, line_len, false),
            b"gets" => parse_get(&t, line_len, true),
            b"gat" => parse_gat(&t, line_len, false),
            b"gats" => parse_gat(&t, line_len, true),
            _ => unknown(line_len),
        };
    }

    let storage = |kind: StoreKind| {
        let want = if kind == StoreKind::Cas { 7 } else { 6 };
        if nt != want && nt != want + 1 {
            return unknown(line_len);
        }
        parse_storage(buf, &t, line_len, kind, limits)
    };

    match cmd {
        b"set" => storage(StoreKind::Set),
        b"add" => storage(StoreKind::Add),
        b"append" => storage(StoreKind::Append),
        b"replace" => storage(StoreKind::Replace),
        b"prepend" => storage(StoreKind::Prepend),
        b"cas" => storage(StoreKind::Cas),
        b"stats" => parse_stats(&t, line_len),
        // Operator commands whose arguments only the server can judge (class ids, watch
        // types): passed through, as `stats` groups are.
        b"lru_crawler" => ok(Request::LruCrawler(t.from(1)), line_len),
        b"watch" => ok(Request::Watch(t.from(1)), line_len),
        b"slabs" => ok(Request::Slabs(t.from(1)), line_len),
        b"lru" => ok(Request::Lru(t.from(1)), line_len),
        b"refresh_certs" => ok(Request::RefreshCerts(t.from(1)), line_len),
        b"shutdown" => match (nt, t.get(1)) {
            (2, _) => ok(Request::Shutdown, line_len),
            (3, b"graceful") => ok(Request::ShutdownGraceful, line_len),
            _ => ok(Request::ShutdownInvalidMode, line_len),
        },
        b"cache_memlimit" => parse_memlimit(&t, line_len),
        b"incr" => parse_arith(&t, line_len, true),
        b"decr" => parse_arith(&t, line_len, false),
        b"delete" => parse_delete(&t, line_len),
        b"touch" => parse_touch(&t, line_len),
        // An ancient alias for `get` that memcached still accepts.
        b"bget" => {
            if nt < 3 {
                unknown(line_len)
            } else {
                parse_get(&t, line_len, false)
            }
        }
        b"flush_all" => parse_flush_all(&t, line_len),
        b"version" => ok(Request::Version, line_len),
        b"quit" => ok(Request::Quit, line_len),
        b"verbosity" => {
            if nt != 3 && nt != 4 {
                return unknown(line_len);
            }
            let noreply = t.noreply();
            match parse_u32(t.get(1)) {
                Some(level) => ok(Request::Verbosity { level, noreply }, line_len),
                None => err(ProtocolError::BadCommandLineFormat, line_len, noreply),
            }
        }
        _ => {
            // memcached only looks for an HTTP request line in its final fallback, which
            // commands starting with these letters never reach.
            let dispatched_by_letter = matches!(first, b's' | b'a' | b'c' | b'i' | b'd' | b't');
            if !dispatched_by_letter && t.last().starts_with(b"HTTP/") {
                Parsed::Error {
                    error: ProtocolError::HttpRequest,
                    consumed: line_len,
                    swallow: 0,
                    close: true,
                    silent: true,
                }
            } else {
                unknown(line_len)
            }
        }
    }
}

/// Validates space-separated keys (each at most 250 bytes; tokens are never empty).
fn valid_keys(raw: &[u8]) -> bool {
    raw.split(|&b| b == b' ').all(|k| k.len() <= MAX_KEY_LEN)
}

fn parse_get<'a>(t: &Tokens<'a>, line_len: usize, with_cas: bool) -> Parsed<'a> {
    let raw = t.from(1);
    if !valid_keys(raw) {
        return err(ProtocolError::BadCommandLineFormat, line_len, false);
    }
    ok(
        Request::Get {
            keys: Keys::from_validated(raw),
            with_cas,
        },
        line_len,
    )
}

fn parse_gat<'a>(t: &Tokens<'a>, line_len: usize, with_cas: bool) -> Parsed<'a> {
    let Some(exptime) = parse_i32(t.get(1)) else {
        return err(ProtocolError::InvalidExptime, line_len, false);
    };
    // `gat <exptime>` with no key is accepted by memcached and answers just END.
    let raw = t.from(2);
    if !valid_keys(raw) {
        return err(ProtocolError::BadCommandLineFormat, line_len, false);
    }
    ok(
        Request::GetAndTouch {
            exptime: i64::from(exptime),
            keys: Keys::from_validated(raw),
            with_cas,
        },
        line_len,
    )
}

fn parse_storage<'a>(
    buf: &'a [u8],
    t: &Tokens<'a>,
    line_len: usize,
    kind: StoreKind,
    limits: &Limits,
) -> Parsed<'a> {
    // memcached notes noreply before validating anything, so every error below is
    // suppressed for a noreply request, and none of them swallows the data block: the
    // client's data line is then read as a command (usually answered ERROR).
    let noreply = t.noreply();
    let bad = || err(ProtocolError::BadCommandLineFormat, line_len, noreply);
    let key = t.get(1);
    if key.len() > MAX_KEY_LEN {
        return bad();
    }
    let (Some(flags), Some(exptime), Some(vlen)) = (
        parse_u32(t.get(2)),
        parse_i32(t.get(3)),
        parse_i32(t.get(4)),
    ) else {
        return bad();
    };
    let cas_unique = if kind == StoreKind::Cas {
        match parse_u64(t.get(5)) {
            Some(c) => c,
            None => return bad(),
        }
    } else {
        0
    };
    let Ok(vlen) = usize::try_from(vlen) else {
        return bad();
    };
    if vlen > (i32::MAX as usize) - 2 {
        return bad();
    }
    if vlen > limits.max_value_len {
        return Parsed::TooLarge {
            key,
            consumed: line_len,
            swallow: vlen + 2,
            noreply,
            remove_old: kind == StoreKind::Set,
            key_base64: false,
        };
    }
    match data_block(buf, line_len, vlen) {
        DataBlock::Incomplete(needed) => Parsed::Incomplete { needed },
        DataBlock::Bad(consumed) => err(ProtocolError::BadDataChunk, consumed, noreply),
        DataBlock::Ok(data, consumed) => ok(
            Request::Store {
                kind,
                key,
                flags,
                exptime: i64::from(exptime),
                data,
                cas_unique,
                noreply,
            },
            consumed,
        ),
    }
}

enum DataBlock<'a> {
    Incomplete(usize),
    /// memcached reads exactly `vlen + 2` bytes, then rejects them if the last two are not
    /// `\r\n`; nothing more is swallowed.
    Bad(usize),
    Ok(&'a [u8], usize),
}

fn data_block(buf: &[u8], line_len: usize, vlen: usize) -> DataBlock<'_> {
    let data_end = line_len + vlen;
    let total = data_end + 2;
    match (buf.get(line_len..data_end), buf.get(data_end..total)) {
        (Some(data), Some(b"\r\n")) => DataBlock::Ok(data, total),
        (Some(_), Some(_)) => DataBlock::Bad(total),
        _ => DataBlock::Incomplete(total),
    }
}

fn parse_delete<'a>(t: &Tokens<'a>, line_len: usize) -> Parsed<'a> {
    let nt = t.ntokens();
    if !(3..=5).contains(&nt) {
        return unknown(line_len);
    }
    let mut noreply = false;
    if nt > 3 {
        // Only a legacy hold time of exactly "0" is tolerated.
        let zero = t.get(2) == b"0";
        noreply = t.noreply();
        let valid = (nt == 4 && (zero || noreply)) || (nt == 5 && zero && noreply);
        if !valid {
            return err(ProtocolError::DeleteUsage, line_len, noreply);
        }
    }
    let key = t.get(1);
    if key.len() > MAX_KEY_LEN {
        return err(ProtocolError::BadCommandLineFormat, line_len, noreply);
    }
    ok(Request::Delete { key, noreply }, line_len)
}

fn parse_arith<'a>(t: &Tokens<'a>, line_len: usize, incr: bool) -> Parsed<'a> {
    let nt = t.ntokens();
    if nt != 4 && nt != 5 {
        return unknown(line_len);
    }
    let noreply = t.noreply();
    let key = t.get(1);
    if key.len() > MAX_KEY_LEN {
        return err(ProtocolError::BadCommandLineFormat, line_len, noreply);
    }
    match parse_u64(t.get(2)) {
        Some(delta) => ok(
            Request::Arithmetic {
                key,
                delta,
                incr,
                noreply,
            },
            line_len,
        ),
        None => err(ProtocolError::InvalidDeltaArgument, line_len, noreply),
    }
}

fn parse_touch<'a>(t: &Tokens<'a>, line_len: usize) -> Parsed<'a> {
    let nt = t.ntokens();
    if nt != 4 && nt != 5 {
        return unknown(line_len);
    }
    let noreply = t.noreply();
    let key = t.get(1);
    if key.len() > MAX_KEY_LEN {
        return err(ProtocolError::BadCommandLineFormat, line_len, noreply);
    }
    match parse_i32(t.get(2)) {
        Some(exptime) => ok(
            Request::Touch {
                key,
                exptime: i64::from(exptime),
                noreply,
            },
            line_len,
        ),
        None => err(ProtocolError::InvalidExptime, line_len, noreply),
    }
}

fn parse_flush_all<'a>(t: &Tokens<'a>, line_len: usize) -> Parsed<'a> {
    let nt = t.ntokens();
    if !(2..=4).contains(&nt) {
        return unknown(line_len);
    }
    let noreply = t.noreply();
    // memcached reads a delay whenever the token count says one could be there, so
    // `flush_all noreply 5` tries to read "noreply" as the delay.
    let mut delay = 0;
    if nt != if noreply { 3 } else { 2 } {
        match parse_i32(t.get(1)) {
            Some(d) => delay = i64::from(d),
            None => return ok(Request::FlushAllInvalidDelay { noreply }, line_len),
        }
    }
    ok(Request::FlushAll { delay, noreply }, line_len)
}

fn parse_memlimit<'a>(t: &Tokens<'a>, line_len: usize) -> Parsed<'a> {
    let nt = t.ntokens();
    if nt != 3 && nt != 4 {
        return unknown(line_len);
    }
    let noreply = t.noreply();
    match parse_u32(t.get(1)) {
        None => err(ProtocolError::UnknownCommand, line_len, noreply),
        Some(mb) if mb < 8 => err(ProtocolError::MemlimitTooSmall, line_len, noreply),
        Some(mb) if mb > 1_000_000_000 => {
            err(ProtocolError::MemlimitNotMegabytes, line_len, noreply)
        }
        Some(mb) => ok(
            Request::CacheMemlimit {
                megabytes: u64::from(mb),
                noreply,
            },
            line_len,
        ),
    }
}

fn parse_stats<'a>(t: &Tokens<'a>, line_len: usize) -> Parsed<'a> {
    let group = match t.get(1) {
        b"" => StatsGroup::General,
        b"reset" => StatsGroup::Reset,
        b"settings" => StatsGroup::Settings,
        b"items" => StatsGroup::Items,
        b"slabs" => StatsGroup::Slabs,
        b"sizes" => StatsGroup::Sizes,
        b"conns" => StatsGroup::Conns,
        _ => StatsGroup::Other(t.from(1)),
    };
    ok(Request::Stats(group), line_len)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum MetaCmd {
    Get,
    Delete,
    Arithmetic,
}

fn parse_mg_md_ma<'a>(t: &Tokens<'a>, line_len: usize, which: MetaCmd) -> Parsed<'a> {
    let nt = t.ntokens();
    if nt < 3 {
        return unknown(line_len);
    }
    let bad = |e| err(e, line_len, false);
    let key = t.get(1);
    if key.len() > MAX_KEY_LEN {
        return bad(ProtocolError::BadCommandLineFormat);
    }
    if nt > MAX_META_TOKENS {
        return bad(if which == MetaCmd::Get {
            ProtocolError::MgFlagsTooLong
        } else {
            ProtocolError::FlagsTooLong
        });
    }
    let toks = t.toks.get(2..t.n).unwrap_or(&[]);
    let flags = match meta::preparse(key, toks, t.from(2)) {
        Ok(f) => f,
        // md and ma report every flag problem with one generic message.
        Err(e) if which == MetaCmd::Get => return bad(e),
        Err(_) => return bad(ProtocolError::InvalidOrDuplicateFlag),
    };
    if which == MetaCmd::Arithmetic {
        if let Some(tok) = flags.token(b'M') {
            if !matches!(tok, b"I" | b"+" | b"D" | b"-") {
                return bad(ProtocolError::InvalidMaMode);
            }
        }
    }
    if meta::opaque_too_long(toks) {
        return bad(ProtocolError::OpaqueTooLong);
    }
    let request = match which {
        MetaCmd::Get => Request::MetaGet { key, flags },
        MetaCmd::Delete => Request::MetaDelete { key, flags },
        MetaCmd::Arithmetic => Request::MetaArithmetic { key, flags },
    };
    ok(request, line_len)
}

fn parse_ms<'a>(buf: &'a [u8], t: &Tokens<'a>, line_len: usize, limits: &Limits) -> Parsed<'a> {
    let nt = t.ntokens();
    if nt < 3 {
        return unknown(line_len);
    }
    // Until the data length is known nothing can be swallowed, so these errors leave the
    // data block to be read as commands, as in memcached.
    let bad = |e| err(e, line_len, false);
    let key = t.get(1);
    if key.len() > MAX_KEY_LEN || nt == 3 {
        return bad(ProtocolError::BadCommandLineFormat);
    }
    if nt > MAX_META_TOKENS {
        return bad(ProtocolError::FlagsTooLong);
    }
    let vlen = match parse_i32(t.get(2)).map(usize::try_from) {
        Some(Ok(v)) if v <= (i32::MAX as usize) - 2 => v,
        _ => return bad(ProtocolError::BadCommandLineFormat),
    };
    let swallow_err = |error| Parsed::Error {
        error,
        consumed: line_len,
        swallow: vlen + 2,
        close: false,
        silent: false,
    };
    let toks = t.toks.get(3..t.n).unwrap_or(&[]);
    let flags = match meta::preparse(key, toks, t.from(3)) {
        Ok(f) => f,
        Err(e) => return swallow_err(e),
    };
    // memcached checks the mode before acting on an over-long opaque.
    if let Some(tok) = flags.token(b'M') {
        if !matches!(tok, b"E" | b"A" | b"P" | b"R" | b"S") {
            return swallow_err(ProtocolError::InvalidMsMode);
        }
    }
    if meta::opaque_too_long(toks) {
        return swallow_err(ProtocolError::OpaqueTooLong);
    }
    if vlen > limits.max_value_len {
        return Parsed::TooLarge {
            key,
            consumed: line_len,
            swallow: vlen + 2,
            noreply: false,
            remove_old: true,
            key_base64: flags.base64(),
        };
    }
    match data_block(buf, line_len, vlen) {
        DataBlock::Incomplete(needed) => Parsed::Incomplete { needed },
        DataBlock::Bad(consumed) => err(ProtocolError::BadDataChunk, consumed, false),
        DataBlock::Ok(data, consumed) => ok(Request::MetaSet { key, flags, data }, consumed),
    }
}

fn parse_me<'a>(t: &Tokens<'a>, line_len: usize) -> Parsed<'a> {
    let bad = || err(ProtocolError::BadCommandLineFormat, line_len, false);
    let key = t.get(1);
    if t.ntokens() < 3 || key.len() > MAX_KEY_LEN {
        return bad();
    }
    // `me` ignores every flag except a `b` right after the key.
    let flags = if t.get(2) == b"b" {
        let mut scratch = [0u8; 256];
        if meta::base64_decode(key, &mut scratch).is_none() {
            return bad();
        }
        MetaFlags::from_validated(t.get(2))
    } else {
        MetaFlags::EMPTY
    };
    ok(Request::MetaDebug { key, flags }, line_len)
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
