//! The request parser: one call returns one request (or what to do instead).
//!
//! Behaviour follows memcached 1.6.45 (`proto_parser.c`'s `process_request`, the command
//! handlers in `proto_text.c`, and the `mcmc` tokenizer) command by command: how a line is
//! split, which numbers each command reads strictly, which errors a `noreply` silences,
//! when a storage command's data block is swallowed, and when the connection is closed
//! without a reply. Comments mark the places where the rules look arbitrary but are
//! memcached's.
//!
//! In outline: a line shorter than four bytes (with its `\n`) is a format error; the
//! command is the bytes before the first space; the known commands are recognised by
//! that word alone, and anything else is looked up again by its first token (leading
//! spaces skipped) among the commands memcached dispatches from a table (`flush_all`,
//! `verbosity`, ...), else answered `ERROR`, silently when its last token is `noreply`.

pub use crate::error::ProtocolError;
use crate::limits::{Limits, MAX_GET_LINE_LEN, MAX_KEY_LEN, MAX_LINE_LEN};
use crate::meta::{self, MetaFlags};
use crate::num::{parse_i32, parse_u32, tok_i32, tok_u32, tok_u64};
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

/// The tokenizer's limit: at most 23 tokens; the rest of the line is not looked at.
const MAX_TOKENS: usize = 23;
/// memcached's `MFLAG_MAX_OPT_LENGTH`, compared against the token count (the command
/// and the key included).
const MAX_META_TOKENS: usize = 20;
/// memcached ignores at most this many leading spaces before deciding a long line is a
/// multiget.
const MAX_LEADING_SPACES: usize = 100;
/// The shortest line memcached parses, counting its `\n`: two command bytes and `\r\n`.
const MIN_LINE: usize = 4;

/// A request line split the way memcached's tokenizer (`mcmc_tokenize`) splits it: on
/// single spaces only, at most [`MAX_TOKENS`] tokens, the rest ignored.
///
/// Tokens are kept as 32-bit offsets into the line rather than slices: the whole value is
/// 200 bytes instead of 600, which every command builds and returns by value (the copy
/// showed up as the largest extra cost per pipelined request).
struct Tokens<'a> {
    line: &'a [u8],
    /// Start and end offset of each token in `line`.
    spans: [(u32, u32); MAX_TOKENS],
    n: usize,
}

impl<'a> Tokens<'a> {
    /// Splits `line`. From token `meta_start` on, a token must start with a letter
    /// (`A`..=`z`, which takes in ``[\]^_` ``) or a digit, as the meta tokenizer checks;
    /// `None` if one does not (memcached then sees no tokens at all).
    #[inline]
    fn new(line: &'a [u8], meta_start: usize) -> Option<Self> {
        // Offsets are 32-bit: a longer line (far beyond any line limit, so only a caller
        // passing a huge buffer) is looked at up to 4 GiB, as if it ended there.
        let line = &line[..line.len().min(u32::MAX as usize)];
        let mut t = Tokens {
            line,
            spans: [(0, 0); MAX_TOKENS],
            n: 0,
        };
        let mut i = 0;
        let len = line.len();
        while i < len && t.n < MAX_TOKENS {
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
            if t.n >= meta_start && !matches!(line[s], b'A'..=b'z' | b'0'..=b'9') {
                return None;
            }
            // Both fit: `line` was cut to u32::MAX bytes above.
            t.spans[t.n] = (s as u32, i as u32);
            t.n += 1;
        }
        Some(t)
    }

    /// Splits a line that is not a meta command.
    #[inline]
    fn plain(line: &'a [u8]) -> Self {
        Tokens::new(line, usize::MAX).unwrap_or(Tokens {
            line,
            spans: [(0, 0); MAX_TOKENS],
            n: 0,
        })
    }

    #[inline]
    fn get(&self, i: usize) -> &'a [u8] {
        if i < self.n {
            let (s, e) = self.spans[i];
            self.line.get(s as usize..e as usize).unwrap_or(&[])
        } else {
            &[]
        }
    }

    /// Tokens `from..` (none if there are fewer).
    fn range(&self, from: usize) -> impl Iterator<Item = &'a [u8]> + '_ {
        (from..self.n).map(|i| self.get(i))
    }

    /// The last token.
    fn last(&self) -> &'a [u8] {
        self.n.checked_sub(1).map_or(&[][..], |i| self.get(i))
    }

    /// `_process_request_noreply`: the last token is exactly `noreply`.
    fn noreply(&self) -> bool {
        self.last() == b"noreply"
    }

    /// The rest of the line from token `i` on (including any tokens past the tokenizer's
    /// limit), without trailing spaces; empty if there is no token `i`.
    fn from(&self, i: usize) -> &'a [u8] {
        if i >= self.n {
            return &[];
        }
        let rest = self.line.get(self.spans[i].0 as usize..).unwrap_or(&[]);
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
    if line_len < MIN_LINE {
        return err(ProtocolError::BadCommandLineFormat, line_len, false);
    }
    // A `\r` before the `\n` is not part of the line; a NUL is, as any other byte.
    let end = if buf[nl - 1] == b'\r' { nl - 1 } else { nl };
    parse_line(buf, &buf[..end], line_len, limits)
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

/// An error after which the data block the line announced (`swallow` bytes, its `\r\n`
/// included) is read and thrown away.
fn err_swallow<'a>(
    error: ProtocolError,
    consumed: usize,
    swallow: usize,
    silent: bool,
) -> Parsed<'a> {
    Parsed::Error {
        error,
        consumed,
        swallow,
        close: false,
        silent,
    }
}

/// `PROCESS_REQUEST_BAD_FORMAT`: too few tokens, or a data length that is not a number.
/// Never silent (memcached has not looked for `noreply` yet) and nothing is swallowed.
fn bad_format<'a>(consumed: usize) -> Parsed<'a> {
    err(ProtocolError::BadCommandLineFormat, consumed, false)
}

fn parse_line<'a>(buf: &'a [u8], line: &'a [u8], line_len: usize, limits: &Limits) -> Parsed<'a> {
    let cmd = line.split(|&b| b == b' ').next().unwrap_or(&[]);
    match cmd {
        b"mn" => ok(Request::MetaNoop, line_len),
        b"mg" => parse_meta(line, line_len, MetaCmd::Get),
        b"md" => parse_meta(line, line_len, MetaCmd::Delete),
        b"ma" => parse_meta(line, line_len, MetaCmd::Arithmetic),
        b"me" => parse_me(line, line_len),
        b"ms" => parse_ms(buf, line, line_len, limits),
        b"get" => parse_get(line, line_len, false),
        b"gets" => parse_get(line, line_len, true),
        b"gat" => parse_gat(line, line_len, false),
        b"gats" => parse_gat(line, line_len, true),
        b"set" => parse_storage(buf, line, line_len, StoreKind::Set, limits),
        b"add" => parse_storage(buf, line, line_len, StoreKind::Add, limits),
        b"replace" => parse_storage(buf, line, line_len, StoreKind::Replace, limits),
        b"append" => parse_storage(buf, line, line_len, StoreKind::Append, limits),
        b"prepend" => parse_storage(buf, line, line_len, StoreKind::Prepend, limits),
        b"cas" => parse_storage(buf, line, line_len, StoreKind::Cas, limits),
        b"delete" => parse_delete(line, line_len),
        b"incr" => parse_arith(line, line_len, true),
        b"decr" => parse_arith(line, line_len, false),
        b"touch" => parse_touch(line, line_len),
        b"stats" => parse_stats(&Tokens::plain(line), line_len),
        b"watch" => ok(Request::Watch(Tokens::plain(line).from(1)), line_len),
        // Both take (and ignore) any arguments.
        b"version" => ok(Request::Version, line_len),
        b"quit" => ok(Request::Quit, line_len),
        _ => parse_other(line, line_len),
    }
}

/// A line whose first word is not one of the main commands: memcached tokenizes it
/// (leading spaces skipped) and looks its first token up among the commands it
/// dispatches from a table; `noreply` as the last token silences whatever it answers.
fn parse_other<'a>(line: &'a [u8], line_len: usize) -> Parsed<'a> {
    let t = Tokens::plain(line);
    let noreply = t.noreply();
    match t.get(0) {
        b"flush_all" => parse_flush_all(&t, line_len, noreply),
        b"verbosity" => match tok_u32(t.get(1)).filter(|_| t.n > 1) {
            Some(level) => ok(Request::Verbosity { level, noreply }, line_len),
            None => err(ProtocolError::BadCommandLineFormat, line_len, noreply),
        },
        b"shutdown" => {
            // `graceful` is compared over the token's own length, so any prefix of it
            // (`g`, `grace`) is accepted too.
            let mode = t.get(1);
            let request = match t.n {
                1 => Request::Shutdown,
                2 if !mode.is_empty() && b"graceful".starts_with(mode) => Request::ShutdownGraceful,
                _ => Request::ShutdownInvalidMode,
            };
            ok(request, line_len)
        }
        b"cache_memlimit" => parse_memlimit(&t, line_len, noreply),
        // Operator commands whose arguments only the server can judge (class ids, watch
        // types): passed through, as `stats` groups are.
        b"lru_crawler" => ok(Request::LruCrawler(t.from(1)), line_len),
        b"slabs" => ok(Request::Slabs(t.from(1)), line_len),
        b"lru" => ok(Request::Lru(t.from(1)), line_len),
        b"extstore" => ok(Request::Extstore(t.from(1)), line_len),
        b"refresh_certs" => ok(Request::RefreshCerts(t.from(1)), line_len),
        b"debugtime" => ok(Request::DebugTime(t.from(1)), line_len),
        _ if t.n > 1 && t.last().starts_with(b"HTTP/") => Parsed::Error {
            error: ProtocolError::HttpRequest,
            consumed: line_len,
            swallow: 0,
            close: true,
            silent: true,
        },
        _ => err(ProtocolError::UnknownCommand, line_len, noreply),
    }
}

/// The keys of a retrieval line: from the first key's start to the end of the line, split
/// on spaces (past the tokenizer's limit too). A key over 250 bytes fails the whole
/// command with memcached's reply for it, which repeats the line end (its error path
/// copies the reply line, `\r\n` included, and adds another).
fn retrieval_keys<'a>(
    t: &Tokens<'a>,
    first: usize,
    line_len: usize,
) -> Result<Keys<'a>, Parsed<'a>> {
    let raw = t.from(first);
    if raw.split(|&b| b == b' ').any(|k| k.len() > MAX_KEY_LEN) {
        return Err(err(ProtocolError::GetKeyTooLong, line_len, false));
    }
    Ok(Keys::from_validated(raw))
}

fn parse_get<'a>(line: &'a [u8], line_len: usize, with_cas: bool) -> Parsed<'a> {
    // One key, the common case, without the tokenizer: the line is the command, one
    // space and a key without spaces, which is exactly what the tokenizer would find.
    let after = if with_cas { 5 } else { 4 };
    if let Some(key) = line.get(after..) {
        if !key.is_empty() && key.len() <= MAX_KEY_LEN && !key.contains(&b' ') {
            let keys = Keys::from_validated(key);
            return ok(Request::Get { keys, with_cas }, line_len);
        }
    }
    let t = Tokens::plain(line);
    if t.n < 2 {
        return bad_format(line_len);
    }
    match retrieval_keys(&t, 1, line_len) {
        Ok(keys) => ok(Request::Get { keys, with_cas }, line_len),
        Err(e) => e,
    }
}

fn parse_gat<'a>(line: &'a [u8], line_len: usize, with_cas: bool) -> Parsed<'a> {
    let t = Tokens::plain(line);
    if t.n < 3 {
        return bad_format(line_len);
    }
    let Some(exptime) = tok_i32(t.get(1)) else {
        return err(ProtocolError::InvalidExptime, line_len, false);
    };
    match retrieval_keys(&t, 2, line_len) {
        Ok(keys) => ok(
            Request::GetAndTouch {
                exptime: i64::from(exptime),
                keys,
                with_cas,
            },
            line_len,
        ),
        Err(e) => e,
    }
}

/// A data length as `ms` and the storage commands read it: strict, non-negative, and
/// leaving room for the `\r\n`.
fn data_len(tok: &[u8]) -> Option<usize> {
    tok_i32(tok)
        .and_then(|v| usize::try_from(v).ok())
        .filter(|&v| v <= (i32::MAX as usize) - 2)
}

fn parse_storage<'a>(
    buf: &'a [u8],
    line: &'a [u8],
    line_len: usize,
    kind: StoreKind,
    limits: &Limits,
) -> Parsed<'a> {
    let t = Tokens::plain(line);
    // Until the data length is known nothing can be swallowed: the data block is then
    // read as commands. Tokens after the length (and `cas`'s unique) are ignored, but for
    // a final `noreply`.
    if t.n < 5 {
        return bad_format(line_len);
    }
    let Some(vlen) = data_len(t.get(4)) else {
        return bad_format(line_len);
    };
    let noreply = t.noreply();
    let swallow = vlen + 2;
    let bad = || {
        err_swallow(
            ProtocolError::BadCommandLineFormat,
            line_len,
            swallow,
            noreply,
        )
    };
    let key = t.get(1);
    if key.len() > MAX_KEY_LEN {
        return bad();
    }
    // Flags and exptime are still read with the older `safe_strto*` rules.
    let (Some(flags), Some(exptime)) = (parse_u32(t.get(2)), parse_i32(t.get(3))) else {
        return bad();
    };
    let cas_unique = if kind == StoreKind::Cas {
        match tok_u64(t.get(5)).filter(|_| t.n > 5) {
            Some(c) => c,
            None => return bad(),
        }
    } else {
        0
    };
    if vlen > limits.max_value_len {
        return Parsed::TooLarge {
            key,
            consumed: line_len,
            swallow,
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

fn parse_delete<'a>(line: &'a [u8], line_len: usize) -> Parsed<'a> {
    let t = Tokens::plain(line);
    if t.n < 2 {
        return bad_format(line_len);
    }
    let noreply = t.noreply();
    let key = t.get(1);
    if key.len() > MAX_KEY_LEN {
        return err(ProtocolError::BadCommandLineFormat, line_len, noreply);
    }
    // After the key, only a legacy hold time of exactly `0` and/or `noreply`. memcached
    // 1.6.45 ignores any other tokens there, but 1.6.18 refuses them, and so does
    // libmemcached's conformance suite (memccapable sends `delete a b c d e` and expects
    // an error, and fails memcached 1.6.45 on it): a deliberate deviation from 1.6.45 on
    // malformed input only (docs/protocol-deviations.md).
    if t.n > 2 {
        let zero = t.get(2) == b"0";
        let valid = (t.n == 3 && (zero || noreply)) || (t.n == 4 && zero && noreply);
        if !valid {
            return err(ProtocolError::DeleteUsage, line_len, noreply);
        }
    }
    ok(Request::Delete { key, noreply }, line_len)
}

fn parse_arith<'a>(line: &'a [u8], line_len: usize, incr: bool) -> Parsed<'a> {
    let t = Tokens::plain(line);
    if t.n < 3 {
        return bad_format(line_len);
    }
    let noreply = t.noreply();
    let key = t.get(1);
    if key.len() > MAX_KEY_LEN {
        return err(ProtocolError::BadCommandLineFormat, line_len, noreply);
    }
    match tok_u64(t.get(2)) {
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

fn parse_touch<'a>(line: &'a [u8], line_len: usize) -> Parsed<'a> {
    let t = Tokens::plain(line);
    if t.n < 3 {
        return bad_format(line_len);
    }
    let noreply = t.noreply();
    let key = t.get(1);
    if key.len() > MAX_KEY_LEN {
        return err(ProtocolError::BadCommandLineFormat, line_len, noreply);
    }
    match tok_i32(t.get(2)) {
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

fn parse_flush_all<'a>(t: &Tokens<'a>, line_len: usize, noreply: bool) -> Parsed<'a> {
    // memcached reads a delay whenever the token count says one could be there, so
    // `flush_all noreply 5` tries to read "noreply" as the delay.
    let mut delay = 0;
    if t.n != if noreply { 2 } else { 1 } {
        match tok_i32(t.get(1)) {
            Some(d) => delay = i64::from(d),
            None => return ok(Request::FlushAllInvalidDelay { noreply }, line_len),
        }
    }
    ok(Request::FlushAll { delay, noreply }, line_len)
}

fn parse_memlimit<'a>(t: &Tokens<'a>, line_len: usize, noreply: bool) -> Parsed<'a> {
    match tok_u32(t.get(1)).filter(|_| t.n > 1) {
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

/// Splits a meta command's line, or `None` where memcached's meta tokenizer fails (a
/// flag token that starts with neither a letter nor a digit) or finds no key.
fn meta_tokens(line: &[u8], first_flag: usize) -> Option<Tokens<'_>> {
    Tokens::new(line, first_flag).filter(|t| t.n >= 2)
}

/// The checks every meta command's flag parser starts with: the key length, the number
/// of tokens, then the flags themselves ([`meta::preparse`]).
fn meta_flags<'a>(t: &Tokens<'a>, first_flag: usize) -> Result<MetaFlags<'a>, ProtocolError> {
    if t.get(1).len() > MAX_KEY_LEN {
        return Err(ProtocolError::BadCommandLineFormat);
    }
    if t.n > MAX_META_TOKENS {
        return Err(ProtocolError::FlagsTooLong);
    }
    meta::preparse(t.get(1), t.range(first_flag), t.from(first_flag))
}

fn parse_meta<'a>(line: &'a [u8], line_len: usize, which: MetaCmd) -> Parsed<'a> {
    let Some(t) = meta_tokens(line, 2) else {
        return bad_format(line_len);
    };
    let bad = |e| err(e, line_len, false);
    let key = t.get(1);
    let flags = match meta_flags(&t, 2) {
        Ok(f) => f,
        // ma reports every flag problem with one generic message.
        Err(_) if which == MetaCmd::Arithmetic => {
            return bad(ProtocolError::InvalidOrDuplicateFlag)
        }
        Err(e) => return bad(e),
    };
    let request = match which {
        // mg and ma check the opaque's length while they build the reply, after acting
        // on the item; the server does that.
        MetaCmd::Get => Request::MetaGet { key, flags },
        MetaCmd::Delete => {
            if meta::opaque_too_long(t.range(2)) {
                return bad(ProtocolError::OpaqueTooLong);
            }
            Request::MetaDelete { key, flags }
        }
        MetaCmd::Arithmetic => {
            if !matches!(
                flags.mode(),
                Ok(None | Some(meta::MetaMode::Incr | meta::MetaMode::Decr))
            ) {
                return bad(ProtocolError::InvalidMaMode);
            }
            Request::MetaArithmetic { key, flags }
        }
    };
    ok(request, line_len)
}

fn parse_ms<'a>(buf: &'a [u8], line: &'a [u8], line_len: usize, limits: &Limits) -> Parsed<'a> {
    let Some(t) = Tokens::new(line, 3).filter(|t| t.n >= 3) else {
        return bad_format(line_len);
    };
    let Some(vlen) = data_len(t.get(2)) else {
        return bad_format(line_len);
    };
    // From here on every error swallows the data block, and none is silenced by `q`.
    let swallow = vlen + 2;
    let fail = |e| err_swallow(e, line_len, swallow, false);
    let key = t.get(1);
    let flags = match meta_flags(&t, 3) {
        Ok(f) => f,
        Err(e) => return fail(e),
    };
    if !matches!(
        flags.mode(),
        Ok(None
            | Some(
                meta::MetaMode::Add
                    | meta::MetaMode::Append
                    | meta::MetaMode::Prepend
                    | meta::MetaMode::Replace
                    | meta::MetaMode::Set
            ))
    ) {
        return fail(ProtocolError::InvalidMsMode);
    }
    if vlen > limits.max_value_len {
        return Parsed::TooLarge {
            key,
            consumed: line_len,
            swallow,
            noreply: false,
            remove_old: true,
            key_base64: flags.base64(),
        };
    }
    // memcached checks the opaque only once the item is allocated (so a value too large
    // is reported first).
    if meta::opaque_too_long(t.range(3)) {
        return fail(ProtocolError::OpaqueTooLong);
    }
    match data_block(buf, line_len, vlen) {
        DataBlock::Incomplete(needed) => Parsed::Incomplete { needed },
        DataBlock::Bad(consumed) => err(ProtocolError::BadDataChunk, consumed, false),
        DataBlock::Ok(data, consumed) => ok(Request::MetaSet { key, flags, data }, consumed),
    }
}

fn parse_me<'a>(line: &'a [u8], line_len: usize) -> Parsed<'a> {
    let Some(t) = meta_tokens(line, 2) else {
        return bad_format(line_len);
    };
    let key = t.get(1);
    if key.len() > MAX_KEY_LEN {
        return bad_format(line_len);
    }
    // `me` ignores every flag but a `b` right after the key, and that one only when
    // another token follows it (memcached's check counts one token too many).
    let flags = if t.n >= 4 && t.get(2) == b"b" {
        let mut scratch = [0u8; 256];
        if meta::base64_decode(key, &mut scratch).is_none() {
            return bad_format(line_len);
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
