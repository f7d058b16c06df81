//! XMemcached's `HashAlgorithm` (2.4.x) and Java's `String.hashCode`, bit for bit.
//!
//! Java hashes a `String`, not bytes: most algorithms walk its UTF-16 code units
//! (`charAt`), while `CRC32_HASH`, `KETAMA_HASH`, `ELECTION_HASH` and `ONE_AT_A_TIME`
//! hash its UTF-8 encoding. A memcached key arrives here as bytes; it is taken to be the
//! UTF-8 encoding of the Java `String` (which is how XMemcached encodes keys on the
//! wire). Bytes that are not valid UTF-8 are decoded with U+FFFD replacement, as
//! `new String(bytes, UTF_8)` would do, and the result hashed. All results are the
//! `long` XMemcached returns truncated to 32 bits, as an unsigned value.

use std::borrow::Cow;

use super::libhashkit::{crc32_ieee, digest_word, md5_digest};

/// Calls `f` with each UTF-16 code unit of the Java `String` whose UTF-8 encoding is
/// `key`; ASCII keys take a path with no allocation.
#[inline]
fn for_each_char(key: &[u8], mut f: impl FnMut(u16)) {
    if key.is_ascii() {
        key.iter().for_each(|&b| f(u16::from(b)));
    } else {
        String::from_utf8_lossy(key).encode_utf16().for_each(f);
    }
}

/// The bytes Java's `String.getBytes("UTF-8")` returns for the decoded key.
#[inline]
fn utf8_bytes(key: &[u8]) -> Cow<'_, [u8]> {
    match String::from_utf8_lossy(key) {
        Cow::Borrowed(_) => Cow::Borrowed(key),
        Cow::Owned(s) => Cow::Owned(s.into_bytes()),
    }
}

/// `String.hashCode()`: `s[0]*31^(n-1) + ... + s[n-1]` over UTF-16 units, wrapping `int`.
pub fn string_hash_code(key: &[u8]) -> i32 {
    let mut h: i32 = 0;
    for_each_char(key, |c| h = h.wrapping_mul(31).wrapping_add(i32::from(c)));
    h
}

/// `NATIVE_HASH`: `String.hashCode()` reinterpreted as unsigned 32 bits.
pub fn native(key: &[u8]) -> u32 {
    string_hash_code(key) as u32
}

/// `CRC32_HASH`: bits 16..30 of `java.util.zip.CRC32` over the UTF-8 bytes (equal to
/// libhashkit's `crc`).
pub fn crc32(key: &[u8]) -> u32 {
    (crc32_ieee(&utf8_bytes(key)) >> 16) & 0x7fff
}

const FNV_64_INIT: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_64_PRIME: u64 = 0x0100_0000_01b3;
const FNV_32_INIT: u64 = 2_166_136_261;
const FNV_32_PRIME: u64 = 16_777_619;

/// `FNV1_64_HASH`: 64-bit FNV-1 over UTF-16 units, low 32 bits.
pub fn fnv1_64(key: &[u8]) -> u32 {
    let mut rv = FNV_64_INIT;
    for_each_char(key, |c| rv = rv.wrapping_mul(FNV_64_PRIME) ^ u64::from(c));
    rv as u32
}

/// `FNV1A_64_HASH`: 64-bit FNV-1a over UTF-16 units, low 32 bits.
pub fn fnv1a_64(key: &[u8]) -> u32 {
    let mut rv = FNV_64_INIT;
    for_each_char(key, |c| rv = (rv ^ u64::from(c)).wrapping_mul(FNV_64_PRIME));
    rv as u32
}

/// `FNV1_32_HASH`: FNV-1 with the 32-bit constants computed in a `long`, low 32 bits.
pub fn fnv1_32(key: &[u8]) -> u32 {
    let mut rv = FNV_32_INIT;
    for_each_char(key, |c| rv = rv.wrapping_mul(FNV_32_PRIME) ^ u64::from(c));
    rv as u32
}

/// `FNV1A_32_HASH`: FNV-1a with the 32-bit constants computed in a `long`, low 32 bits.
pub fn fnv1a_32(key: &[u8]) -> u32 {
    let mut rv = FNV_32_INIT;
    for_each_char(key, |c| rv = (rv ^ u64::from(c)).wrapping_mul(FNV_32_PRIME));
    rv as u32
}

/// `KETAMA_HASH` (and `ELECTION_HASH`, which shares its code): the first four MD5 digest
/// bytes of the UTF-8 key, little-endian.
pub fn ketama(key: &[u8]) -> u32 {
    digest_word(&md5_digest(&utf8_bytes(key)), 0)
}

/// `MYSQL_HASH`: MySQL's `hash_sort` style mix over UTF-16 units in a `long`.
pub fn mysql(key: &[u8]) -> u32 {
    let mut rv: i64 = 0;
    let mut nr2: i32 = 4;
    for_each_char(key, |c| {
        let t = ((rv & 63).wrapping_add(i64::from(nr2)))
            .wrapping_mul(i64::from(c))
            .wrapping_add(rv.wrapping_shl(8));
        rv ^= t;
        nr2 = nr2.wrapping_add(3);
    });
    rv as u32
}

/// `ELF_HASH`: the System V ELF hash over UTF-16 units, masked to 31 bits.
pub fn elf(key: &[u8]) -> u32 {
    let mut rv: i64 = 0;
    for_each_char(key, |c| {
        rv = rv.wrapping_shl(4).wrapping_add(i64::from(c));
        let x = rv & 0xF000_0000;
        if x != 0 {
            rv ^= x >> 24;
            rv &= !x;
        }
    });
    (rv & 0x7FFF_FFFF) as u32
}

/// `RS_HASH`: Robert Sedgewick's hash over UTF-16 units, masked to 31 bits.
pub fn rs(key: &[u8]) -> u32 {
    let b: i64 = 378_551;
    let mut a: i64 = 63_689;
    let mut rv: i64 = 0;
    for_each_char(key, |c| {
        rv = rv.wrapping_mul(a).wrapping_add(i64::from(c));
        a = a.wrapping_mul(b);
    });
    (rv & 0x7FFF_FFFF) as u32
}

/// `LUA_HASH`: Lua 5.1's string hash (samples at most ~32 units from the end) seeded with
/// the length, in a `long` with arithmetic right shift.
pub fn lua(key: &[u8]) -> u32 {
    let units: Vec<u16> = if key.is_ascii() {
        key.iter().map(|&b| u16::from(b)).collect()
    } else {
        String::from_utf8_lossy(key).encode_utf16().collect()
    };
    let len = units.len();
    let step = (len >> 5) + 1;
    let mut rv = len as i64;
    let mut l = len;
    while l >= step {
        let c = i64::from(units[l - 1]);
        rv ^= rv.wrapping_shl(5).wrapping_add(rv >> 2).wrapping_add(c);
        l -= step;
    }
    rv as u32
}

/// `ONE_AT_A_TIME`: one-at-a-time over the UTF-8 bytes read as *unsigned* (`bt & 0xFF`),
/// unlike libhashkit's sign-extending version; the two differ for bytes >= 0x80.
pub fn one_at_a_time(key: &[u8]) -> u32 {
    let mut hash: u32 = 0;
    for &b in utf8_bytes(key).iter() {
        hash = hash.wrapping_add(u32::from(b));
        hash = hash.wrapping_add(hash << 10);
        hash ^= hash >> 6;
    }
    hash = hash.wrapping_add(hash << 3);
    hash ^= hash >> 11;
    hash.wrapping_add(hash << 15)
}

/// `String.length()` of the decoded key: its number of UTF-16 code units (a character
/// outside the Basic Multilingual Plane counts twice).
pub fn utf16_len(key: &[u8]) -> usize {
    if key.is_ascii() {
        key.len()
    } else {
        String::from_utf8_lossy(key).encode_utf16().count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_code_matches_java() {
        assert_eq!(string_hash_code(b"hello"), 99_162_322);
        // "é" is one UTF-16 unit (0xE9) but two UTF-8 bytes.
        assert_eq!(string_hash_code("é".as_bytes()), 0xE9);
        // A supplementary character is a surrogate pair: two units.
        assert_eq!(utf16_len("😀".as_bytes()), 2);
    }

    #[test]
    fn unsigned_one_at_a_time_differs_from_libhashkit_on_high_bytes() {
        let k = "é".as_bytes();
        assert_ne!(one_at_a_time(k), super::super::libhashkit::one_at_a_time(k));
        assert_eq!(
            one_at_a_time(b"abc"),
            super::super::libhashkit::one_at_a_time(b"abc")
        );
    }
}
