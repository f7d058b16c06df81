//! Meta-command flags (`mg`, `ms`, `md`, `ma`, `me`) and base64 key handling.
//!
//! The parser validates a meta command's flags exactly as memcached's shared flag
//! pre-parser does (known letters only, no duplicates, numeric tokens well formed), so the
//! server can read them back through [`MetaFlags`] without re-checking.

use crate::error::ProtocolError;
use crate::num;

/// The flag section of a meta command as sent (space-separated tokens, each a flag letter
/// followed by its optional token), plus a bitmask of which letters are present.
///
/// Guarantees for flags produced by [`crate::parse()`] for `mg`/`ms`/`md`/`ma`: every token
/// starts with a letter memcached knows, no letter appears twice, and the tokens of
/// `N`/`T`/`R` (i32), `F` (u32), `C`/`J`/`D` (u64) and `M` (exactly one byte) are valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MetaFlags<'a> {
    /// The raw flag tokens separated by one or more spaces (no leading/trailing space).
    pub(crate) raw: &'a [u8],
    /// One bit per ASCII letter present: `A`..=`Z` are bits 0..=25, `a`..=`z` 26..=51.
    pub(crate) present: u64,
}

/// Bit for a flag letter in [`MetaFlags::present`]; 0 for anything that is not a letter,
/// so non-letters are simply never "present".
#[inline]
pub(crate) fn flag_bit(flag: u8) -> u64 {
    match flag {
        b'A'..=b'Z' => 1u64 << (flag - b'A'),
        b'a'..=b'z' => 1u64 << (flag - b'a' + 26),
        _ => 0,
    }
}

/// A number type a meta flag token can be read as, with memcached's parsing rules.
pub trait MetaNumber: Sized {
    /// Parses `token` (the bytes after the flag letter); `None` if memcached would reject it.
    fn parse_token(token: &[u8]) -> Option<Self>;
}

// Flag tokens are read with memcached's strict tokenizer rules, and need at least one
// byte after the letter. TTLs (`T`, `N`, `R`) are 32-bit in memcached whatever type they
// are read into.
impl MetaNumber for u32 {
    fn parse_token(token: &[u8]) -> Option<Self> {
        (!token.is_empty()).then(|| num::tok_u32(token)).flatten()
    }
}
impl MetaNumber for u64 {
    fn parse_token(token: &[u8]) -> Option<Self> {
        (!token.is_empty()).then(|| num::tok_u64(token)).flatten()
    }
}
impl MetaNumber for i32 {
    fn parse_token(token: &[u8]) -> Option<Self> {
        (!token.is_empty()).then(|| num::tok_i32(token)).flatten()
    }
}
impl MetaNumber for i64 {
    fn parse_token(token: &[u8]) -> Option<Self> {
        i32::parse_token(token).map(i64::from)
    }
}

/// The `M` (mode switch) flag of `ms` and `ma`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaMode {
    /// `ME`: store only if absent (like `add`).
    Add,
    /// `MA`: append to the existing value.
    Append,
    /// `MP`: prepend to the existing value.
    Prepend,
    /// `MR`: store only if present (like `replace`).
    Replace,
    /// `MS`: store unconditionally (the default for `ms`).
    Set,
    /// `MI` or `M+`: increment (the default for `ma`).
    Incr,
    /// `MD` or `M-`: decrement.
    Decr,
}

impl<'a> MetaFlags<'a> {
    /// No flags at all.
    pub const EMPTY: MetaFlags<'static> = MetaFlags {
        raw: b"",
        present: 0,
    };

    /// Wraps an already-validated flag section; `present` is recomputed from the tokens.
    /// Intended for tests and for building requests by hand; the parser validates its own.
    pub fn from_validated(raw: &'a [u8]) -> Self {
        let mut present = 0;
        for tok in raw.split(|&b| b == b' ') {
            if let Some(&f) = tok.first() {
                present |= flag_bit(f);
            }
        }
        MetaFlags { raw, present }
    }

    /// The raw flag section as sent (tokens separated by spaces).
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// The bitmask of present letters (`A`..=`Z` bits 0..=25, `a`..=`z` bits 26..=51).
    pub fn present(&self) -> u64 {
        self.present
    }

    /// True if flag letter `flag` was sent. Always false for non-letters.
    #[inline]
    pub fn has(&self, flag: u8) -> bool {
        let bit = flag_bit(flag);
        bit != 0 && self.present & bit != 0
    }

    /// The token right after flag letter `flag` (empty if the flag was sent bare), or
    /// `None` if the flag is absent.
    pub fn token(&self, flag: u8) -> Option<&'a [u8]> {
        if !self.has(flag) {
            return None;
        }
        self.iter().find(|&(f, _)| f == flag).map(|(_, t)| t)
    }

    /// Every flag with its token, in request order.
    pub fn iter(&self) -> impl Iterator<Item = (u8, &'a [u8])> + 'a {
        self.raw
            .split(|&b| b == b' ')
            .filter_map(|tok| tok.split_first().map(|(&f, rest)| (f, rest)))
    }

    /// The numeric token of `flag`: `Ok(None)` if the flag is absent,
    /// `Err(BadTokenFormat)` if its token is not a valid number of type `T`.
    pub fn number<T: MetaNumber>(&self, flag: u8) -> Result<Option<T>, ProtocolError> {
        match self.token(flag) {
            None => Ok(None),
            Some(tok) => T::parse_token(tok)
                .map(Some)
                .ok_or(ProtocolError::BadTokenFormat),
        }
    }

    /// True if the `b` flag was sent: the key is base64 and keys echoed back with `k`
    /// must be base64-encoded (see [`encode_key_base64`]).
    #[inline]
    pub fn base64(&self) -> bool {
        self.has(b'b')
    }

    /// True if the `q` flag was sent (suppress nominal replies).
    #[inline]
    pub fn quiet(&self) -> bool {
        self.has(b'q')
    }

    /// The `M` flag: `Ok(None)` if absent. As memcached, the mode is the byte right after
    /// the `M`, whatever follows it (`MEE` is `E`); a bare `M` has no mode byte and is
    /// `Err(InvalidMsMode)`, as is a byte neither `ms` (`E A P R S`) nor `ma` (`I + D -`)
    /// takes. Modes are case-sensitive. The caller checks the mode is legal for its
    /// command (the parser already does this for the requests it returns).
    pub fn mode(&self) -> Result<Option<MetaMode>, ProtocolError> {
        let Some(tok) = self.token(b'M') else {
            return Ok(None);
        };
        Ok(Some(match tok.first() {
            Some(b'E') => MetaMode::Add,
            Some(b'A') => MetaMode::Append,
            Some(b'P') => MetaMode::Prepend,
            Some(b'R') => MetaMode::Replace,
            Some(b'S') => MetaMode::Set,
            Some(b'I' | b'+') => MetaMode::Incr,
            Some(b'D' | b'-') => MetaMode::Decr,
            _ => return Err(ProtocolError::InvalidMsMode),
        }))
    }

    /// Bytes `O` (opaque) contributes to a reply when echoed: the whole token including the
    /// letter, as memcached copies it verbatim.
    pub fn opaque(&self) -> Option<&'a [u8]> {
        self.token(b'O')
    }
}

/// Validates the flag tokens of `mg`/`ms`/`md`/`ma` the way memcached 1.6.45's
/// `_meta_flag_preparse` does, returning memcached's error text for the first hard error
/// (unknown or duplicate flag) or the last soft error (bad numeric token etc.).
///
/// Every command accepts every flag memcached knows (`mg k M` is fine; the flags a
/// command has no use for are ignored). A numeric flag needs a token after its letter,
/// read with the tokenizer's strict rules. `M` takes the byte after it as the mode,
/// whatever follows; the command checks the mode.
pub(crate) fn preparse<'a, 't>(
    key: &[u8],
    tokens: impl IntoIterator<Item = &'t [u8]>,
    raw: &'a [u8],
) -> Result<MetaFlags<'a>, ProtocolError> {
    let mut seen = [false; 128];
    let mut present = 0u64;
    // memcached keeps going after a bad token so a later bad token's message wins, and a
    // bad `F` token keeps whatever message was current (it sets no message of its own).
    let mut error: Option<ProtocolError> = None;
    let mut errstr = ProtocolError::BadCommandLineFormat;
    let mut soft = |e: Option<ProtocolError>| {
        if let Some(e) = e {
            errstr = e;
        }
        error = Some(errstr);
    };
    for tok in tokens {
        let Some((&o, val)) = tok.split_first() else {
            continue;
        };
        let idx = usize::from(o);
        match seen.get_mut(idx) {
            Some(s) if idx < 127 && !*s => *s = true,
            _ => return Err(ProtocolError::DuplicateFlag),
        }
        match o {
            b'b' => {
                let mut scratch = [0u8; 256];
                if base64_decode(key, &mut scratch).is_none() {
                    soft(Some(ProtocolError::KeyDecode));
                }
            }
            b'N' | b'T' | b'R' => {
                if val.is_empty() || num::tok_i32(val).is_none() {
                    soft(Some(ProtocolError::BadTokenFormat));
                }
            }
            b'F' => {
                if val.is_empty() || num::tok_u32(val).is_none() {
                    soft(None);
                }
            }
            b'C' | b'E' => {
                if val.is_empty() || num::tok_u64(val).is_none() {
                    soft(Some(ProtocolError::BadTokenFormat));
                }
            }
            b'J' => {
                if val.is_empty() || num::tok_u64(val).is_none() {
                    soft(Some(ProtocolError::InvalidInitialValue));
                }
            }
            b'D' => {
                if val.is_empty() || num::tok_u64(val).is_none() {
                    soft(Some(ProtocolError::InvalidDeltaValue));
                }
            }
            b'M' | b'l' | b'O' | b'P' | b'L' | b'k' | b's' | b't' | b'c' | b'f' | b'v' | b'h'
            | b'u' | b'q' | b'x' | b'I' => {}
            _ => return Err(ProtocolError::InvalidFlag),
        }
        present |= flag_bit(o);
    }
    match error {
        Some(e) => Err(e),
        None => Ok(MetaFlags { raw, present }),
    }
}

/// Longest opaque (`O`) token memcached echoes, counting the `O` itself; a longer one is
/// answered `CLIENT_ERROR opaque token too long`.
pub const MAX_OPAQUE_TOKEN_LEN: usize = 32;

/// True if an `O` token is longer than memcached allows.
pub(crate) fn opaque_too_long<'t>(tokens: impl IntoIterator<Item = &'t [u8]>) -> bool {
    tokens
        .into_iter()
        .any(|t| t.first() == Some(&b'O') && t.len() > MAX_OPAQUE_TOKEN_LEN)
}

/// The key a meta command operates on: `raw` itself copied into `out` when `base64` is
/// false, else `raw` base64-decoded into `out`. Never allocates.
///
/// Decoding follows memcached's decoder exactly (characters outside the alphabet are
/// skipped, the number of alphabet characters must be a non-zero multiple of 4, decoding
/// stops after the first padded block). Errors: `KeyDecode` if that fails,
/// `BadCommandLineFormat` if the key cannot fit in `out`.
pub fn decode_key<'k>(
    raw: &[u8],
    base64: bool,
    out: &'k mut [u8; 256],
) -> Result<&'k [u8], ProtocolError> {
    if !base64 {
        let dst = out
            .get_mut(..raw.len())
            .ok_or(ProtocolError::BadCommandLineFormat)?;
        dst.copy_from_slice(raw);
        return Ok(dst);
    }
    let n = base64_decode(raw, &mut out[..]).ok_or(ProtocolError::KeyDecode)?;
    out.get(..n).ok_or(ProtocolError::KeyDecode)
}

const B64_ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Value of a base64 character; `=` decodes as 0 like in memcached's table.
#[inline]
fn b64_value(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        b'=' => Some(0),
        _ => None,
    }
}

/// memcached-compatible base64 decode into `out`; `None` where memcached returns 0.
pub(crate) fn base64_decode(src: &[u8], out: &mut [u8]) -> Option<usize> {
    let count = src.iter().filter(|&&c| b64_value(c).is_some()).count();
    if count == 0 || count % 4 != 0 || count / 4 * 3 > out.len() {
        return None;
    }
    let mut block = [0u8; 4];
    let mut n = 0;
    let mut pos = 0;
    let mut pad = 0;
    for &c in src {
        let Some(v) = b64_value(c) else {
            continue;
        };
        if c == b'=' {
            pad += 1;
        }
        block[n] = v;
        n += 1;
        if n == 4 {
            let dst = out.get_mut(pos..pos + 3)?;
            dst[0] = (block[0] << 2) | (block[1] >> 4);
            dst[1] = (block[1] << 4) | (block[2] >> 2);
            dst[2] = (block[2] << 6) | block[3];
            pos += 3;
            n = 0;
            if pad > 0 {
                match pad {
                    1 => pos -= 1,
                    2 => pos -= 2,
                    _ => return None,
                }
                break;
            }
        }
    }
    if pos == 0 {
        None
    } else {
        Some(pos)
    }
}

/// Appends `key` base64-encoded (standard alphabet, `=` padding) to `out`, for echoing a
/// binary key back with `k` when the request had `b`.
pub fn encode_key_base64(key: &[u8], out: &mut Vec<u8>) {
    out.reserve(key.len().div_ceil(3) * 4);
    let mut chunks = key.chunks_exact(3);
    for c in &mut chunks {
        let n = (u32::from(c[0]) << 16) | (u32::from(c[1]) << 8) | u32::from(c[2]);
        out.extend_from_slice(&[
            B64_ALPHABET[(n >> 18) as usize & 63],
            B64_ALPHABET[(n >> 12) as usize & 63],
            B64_ALPHABET[(n >> 6) as usize & 63],
            B64_ALPHABET[n as usize & 63],
        ]);
    }
    match *chunks.remainder() {
        [a] => {
            let n = u32::from(a) << 16;
            out.extend_from_slice(&[
                B64_ALPHABET[(n >> 18) as usize & 63],
                B64_ALPHABET[(n >> 12) as usize & 63],
                b'=',
                b'=',
            ]);
        }
        [a, b] => {
            let n = (u32::from(a) << 16) | (u32::from(b) << 8);
            out.extend_from_slice(&[
                B64_ALPHABET[(n >> 18) as usize & 63],
                B64_ALPHABET[(n >> 12) as usize & 63],
                B64_ALPHABET[(n >> 6) as usize & 63],
                b'=',
            ]);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn flags(raw: &[u8]) -> MetaFlags<'_> {
        let toks: Vec<&[u8]> = raw
            .split(|&b| b == b' ')
            .filter(|t| !t.is_empty())
            .collect();
        preparse(b"key", toks.iter().copied(), raw).unwrap()
    }

    #[test]
    fn accessors() {
        let f = flags(b"v t T30 Oabc k q");
        assert!(f.has(b'v') && f.has(b'T') && f.has(b'q') && f.quiet());
        assert!(!f.has(b'c') && !f.has(b'1') && !f.base64());
        assert_eq!(f.token(b'T'), Some(&b"30"[..]));
        assert_eq!(f.token(b'v'), Some(&b""[..]));
        assert_eq!(f.token(b'c'), None);
        assert_eq!(f.opaque(), Some(&b"abc"[..]));
        assert_eq!(f.number::<i64>(b'T'), Ok(Some(30)));
        assert_eq!(f.number::<u32>(b'c'), Ok(None));
        assert_eq!(f.number::<u32>(b'O'), Err(ProtocolError::BadTokenFormat));
        let order: Vec<u8> = f.iter().map(|(c, _)| c).collect();
        assert_eq!(order, b"vtTOkq");
        assert_eq!(MetaFlags::from_validated(b"v t T30 Oabc k q"), f);
    }

    #[test]
    fn modes() {
        for (tok, m) in [
            (&b"ME"[..], MetaMode::Add),
            (b"MA", MetaMode::Append),
            (b"MP", MetaMode::Prepend),
            (b"MR", MetaMode::Replace),
            (b"MS", MetaMode::Set),
            (b"MI", MetaMode::Incr),
            (b"M+", MetaMode::Incr),
            (b"MD", MetaMode::Decr),
            (b"M-", MetaMode::Decr),
        ] {
            assert_eq!(flags(tok).mode(), Ok(Some(m)));
        }
        assert_eq!(flags(b"v").mode(), Ok(None));
        assert_eq!(
            MetaFlags::from_validated(b"Ms").mode(),
            Err(ProtocolError::InvalidMsMode)
        );
        assert_eq!(
            MetaFlags::from_validated(b"MSS").mode(),
            Ok(Some(MetaMode::Set))
        );
        assert_eq!(
            MetaFlags::from_validated(b"M").mode(),
            Err(ProtocolError::InvalidMsMode)
        );
    }

    #[test]
    fn preparse_errors() {
        let check = |raw: &[u8]| {
            let toks: Vec<&[u8]> = raw.split(|&b| b == b' ').collect();
            preparse(b"key", toks.iter().copied(), raw).err()
        };
        assert_eq!(check(b"v v"), Some(ProtocolError::DuplicateFlag));
        assert_eq!(check(b"\xff"), Some(ProtocolError::DuplicateFlag));
        assert_eq!(check(b"z"), Some(ProtocolError::InvalidFlag));
        assert_eq!(
            check(b"x I P L"),
            None,
            "flags memcached knows, for any command"
        );
        assert_eq!(check(b"1"), Some(ProtocolError::InvalidFlag));
        assert_eq!(check(b"Tx"), Some(ProtocolError::BadTokenFormat));
        assert_eq!(check(b"T"), Some(ProtocolError::BadTokenFormat));
        assert_eq!(check(b"Fx"), Some(ProtocolError::BadCommandLineFormat));
        assert_eq!(check(b"Tx Fx"), Some(ProtocolError::BadTokenFormat));
        assert_eq!(check(b"Tx Jx"), Some(ProtocolError::InvalidInitialValue));
        assert_eq!(check(b"Dx"), Some(ProtocolError::InvalidDeltaValue));
        assert_eq!(
            check(b"MSS"),
            None,
            "any mode byte is the command's to judge"
        );
        assert_eq!(check(b"Cx"), Some(ProtocolError::BadTokenFormat));
        // A hard error after a soft one still wins.
        assert_eq!(check(b"Tx z"), Some(ProtocolError::InvalidFlag));
        // Numbers are read strictly, and need a digit.
        assert_eq!(check(b"T+5"), Some(ProtocolError::BadTokenFormat));
        assert_eq!(
            check(b"T-"),
            None,
            "a lone minus reads as 0, as in memcached"
        );
        assert_eq!(check(b"C-0"), Some(ProtocolError::BadTokenFormat));
        let toks: [&[u8]; 1] = [b"b"];
        assert_eq!(
            preparse(b"a", toks.iter().copied(), b"b").err(),
            Some(ProtocolError::KeyDecode)
        );
        assert!(preparse(b"Zm9v", toks.iter().copied(), b"b").is_ok());
    }

    #[test]
    fn decode_key_cases() {
        let mut out = [0u8; 256];
        assert_eq!(decode_key(b"foo", false, &mut out), Ok(&b"foo"[..]));
        assert_eq!(decode_key(b"Zm9v", true, &mut out), Ok(&b"foo"[..]));
        assert_eq!(decode_key(b"Zm8=", true, &mut out), Ok(&b"fo"[..]));
        assert_eq!(decode_key(b"Zg==", true, &mut out), Ok(&b"f"[..]));
        // memcached skips characters outside the alphabet.
        assert_eq!(decode_key(b"Zm!9v", true, &mut out), Ok(&b"foo"[..]));
        assert_eq!(
            decode_key(b"Zm9", true, &mut out),
            Err(ProtocolError::KeyDecode)
        );
        assert_eq!(
            decode_key(b"Z===", true, &mut out),
            Err(ProtocolError::KeyDecode)
        );
        assert_eq!(
            decode_key(&[b'a'; 300], false, &mut out),
            Err(ProtocolError::BadCommandLineFormat)
        );
        assert_eq!(
            decode_key(&[b'A'; 400], true, &mut out),
            Err(ProtocolError::KeyDecode)
        );
    }

    #[test]
    fn encode_known() {
        for (plain, enc) in [
            (&b""[..], &b""[..]),
            (b"f", b"Zg=="),
            (b"fo", b"Zm8="),
            (b"foo", b"Zm9v"),
            (b"foobar", b"Zm9vYmFy"),
        ] {
            let mut out = Vec::new();
            encode_key_base64(plain, &mut out);
            assert_eq!(out, enc);
        }
    }

    proptest! {
        #[test]
        fn base64_round_trip(key in proptest::collection::vec(any::<u8>(), 1..=187)) {
            let mut enc = Vec::new();
            encode_key_base64(&key, &mut enc);
            let mut out = [0u8; 256];
            prop_assert_eq!(decode_key(&enc, true, &mut out), Ok(&key[..]));
        }

        #[test]
        fn base64_decode_never_panics(raw in proptest::collection::vec(any::<u8>(), 0..400)) {
            let mut out = [0u8; 256];
            let _ = decode_key(&raw, true, &mut out);
            let _ = decode_key(&raw, false, &mut out);
        }
    }
}
