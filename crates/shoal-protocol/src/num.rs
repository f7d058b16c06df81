//! Decimal number parsing with memcached's two sets of rules.
//!
//! memcached 1.6.45 reads most numbers with its strict tokenizer (`mcmc_tokto*`: digits
//! only, a `-` only for signed numbers, a length cap, overflow rejected): [`tok_u32`],
//! [`tok_u64`], [`tok_i32`]. Only a storage command's flags and exptime still go through
//! the older `safe_strto*` helpers, below.
//!
//! memcached parses numeric tokens with C's `strtol`/`strtoul`/`strtoull` and then checks
//! the character after the digits. That means a few inputs that look odd are accepted
//! (leading tabs or other C whitespace, a leading `+`, trailing C whitespace followed by
//! anything) and clients rely on replies matching, so we reproduce those rules here.
//!
//! Where memcached silently truncates (a `long` result stored into an `int32_t`) or wraps
//! (`strtoul("-18446744073709551615")` is 1), we reject instead: those inputs are bugs in
//! the client and accepting a different number than the one sent would corrupt data.

/// C's `isspace` in the "C" locale.
#[inline]
pub(crate) fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Sign and magnitude of a token as `strtoull` would read it, or `None` where
/// `safe_strtoull` fails (no digits, overflow, junk right after the digits).
fn sign_magnitude(tok: &[u8]) -> Option<(bool, u64)> {
    let mut i = 0;
    while i < tok.len() && is_c_space(tok[i]) {
        i += 1;
    }
    let mut negative = false;
    match tok.get(i) {
        Some(b'-') => {
            negative = true;
            i += 1;
        }
        Some(b'+') => i += 1,
        _ => {}
    }
    let digits_start = i;
    let mut value: u64 = 0;
    while let Some(&b) = tok.get(i) {
        if !b.is_ascii_digit() {
            break;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
        i += 1;
    }
    if i == digits_start {
        return None;
    }
    match tok.get(i) {
        None => Some((negative, value)),
        Some(&b) if is_c_space(b) => Some((negative, value)),
        Some(_) => None,
    }
}

/// `safe_strtoull`: an unsigned 64-bit number; negatives other than `-0` are rejected.
pub(crate) fn parse_u64(tok: &[u8]) -> Option<u64> {
    match sign_magnitude(tok)? {
        (true, 0) => Some(0),
        (true, _) => None,
        (false, v) => Some(v),
    }
}

/// `safe_strtoul` into a `uint32_t`: like [`parse_u64`] but values above `u32::MAX` are
/// rejected rather than truncated.
pub(crate) fn parse_u32(tok: &[u8]) -> Option<u32> {
    parse_u64(tok).and_then(|v| u32::try_from(v).ok())
}

/// `safe_strtoll`: a signed 64-bit number.
pub(crate) fn parse_i64(tok: &[u8]) -> Option<i64> {
    let (negative, mag) = sign_magnitude(tok)?;
    if negative {
        if mag == 1u64 << 63 {
            Some(i64::MIN)
        } else {
            i64::try_from(mag).ok().map(|v| -v)
        }
    } else {
        i64::try_from(mag).ok()
    }
}

/// `safe_strtol` into an `int32_t`: values outside `i32` are rejected rather than truncated.
pub(crate) fn parse_i32(tok: &[u8]) -> Option<i32> {
    parse_i64(tok).and_then(|v| i32::try_from(v).ok())
}

/// `mcmc_toktou32`'s and `mcmc_toktou64`'s length caps, and `mcmc_tokto32`'s.
const TOK32_MAX_LEN: usize = 11;
const TOK64_MAX_LEN: usize = 22;

/// `mcmc_toktou64`: ASCII digits only (no sign, no spaces), at most 22 bytes, no
/// overflow. An empty token is 0, as in memcached (its callers never pass one).
pub(crate) fn tok_u64(tok: &[u8]) -> Option<u64> {
    if tok.len() > TOK64_MAX_LEN {
        return None;
    }
    tok.iter().try_fold(0u64, |sum, &b| {
        let d = b.checked_sub(b'0').filter(|d| *d < 10)?;
        sum.checked_mul(10)?.checked_add(u64::from(d))
    })
}

/// `mcmc_toktou32`: as [`tok_u64`], at most 11 bytes and within `u32`.
pub(crate) fn tok_u32(tok: &[u8]) -> Option<u32> {
    if tok.len() > TOK32_MAX_LEN {
        return None;
    }
    tok_u64(tok).and_then(|v| u32::try_from(v).ok())
}

/// `mcmc_tokto32`: an optional leading `-` and ASCII digits, at most 11 bytes, within
/// `i32`. A lone `-` is 0, as in memcached.
pub(crate) fn tok_i32(tok: &[u8]) -> Option<i32> {
    if tok.len() > TOK32_MAX_LEN {
        return None;
    }
    let (negative, digits) = match tok.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, tok),
    };
    let mag = digits.iter().try_fold(0i64, |sum, &b| {
        let d = b.checked_sub(b'0').filter(|d| *d < 10)?;
        Some(sum * 10 + i64::from(d))
    })?;
    i32::try_from(if negative { -mag } else { mag }).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_tokenizer_rules() {
        assert_eq!(tok_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(tok_u64(b"18446744073709551616"), None);
        assert_eq!(tok_u64(b"0000000000000000000001"), Some(1));
        assert_eq!(tok_u64(b"00000000000000000000001"), None, "over 22 bytes");
        for bad in [
            &b"+5"[..],
            b"-0",
            b"-1",
            b" 5",
            b"5 ",
            b"5\t",
            b"0x10",
            b"1.5",
        ] {
            assert_eq!(tok_u64(bad), None, "{bad:?}");
        }
        assert_eq!(tok_u64(b""), Some(0));
        assert_eq!(tok_u32(b"4294967295"), Some(u32::MAX));
        assert_eq!(tok_u32(b"4294967296"), None);
        assert_eq!(tok_u32(b"000000000001"), None, "over 11 bytes");
        assert_eq!(tok_i32(b"-2147483648"), Some(i32::MIN));
        assert_eq!(tok_i32(b"2147483647"), Some(i32::MAX));
        assert_eq!(tok_i32(b"2147483648"), None);
        assert_eq!(tok_i32(b"-"), Some(0));
        assert_eq!(tok_i32(b"--1"), None);
        assert_eq!(tok_i32(b"+1"), None);
        assert_eq!(tok_i32(b"-00000000001"), None, "over 11 bytes");
    }

    #[test]
    fn unsigned_rules() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b"+7"), Some(7));
        assert_eq!(parse_u64(b"-0"), Some(0));
        assert_eq!(parse_u64(b"-1"), None);
        assert_eq!(parse_u64(b"\t5"), Some(5));
        assert_eq!(parse_u64(b"5\tjunk"), Some(5));
        assert_eq!(parse_u64(b"5\r"), Some(5));
        assert_eq!(parse_u64(b"5x"), None);
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"-"), None);
        assert_eq!(parse_u64(b"abc"), None);
        assert_eq!(parse_u32(b"4294967295"), Some(u32::MAX));
        assert_eq!(parse_u32(b"4294967296"), None);
    }

    #[test]
    fn signed_rules() {
        assert_eq!(parse_i32(b"-1"), Some(-1));
        assert_eq!(parse_i32(b"2147483647"), Some(i32::MAX));
        assert_eq!(parse_i32(b"2147483648"), None);
        assert_eq!(parse_i32(b"-2147483648"), Some(i32::MIN));
        assert_eq!(parse_i32(b"-2147483649"), None);
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b"--1"), None);
    }
}
