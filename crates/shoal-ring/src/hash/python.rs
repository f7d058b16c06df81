//! Hashes of the Python clients: pymemcache's pure-Python `murmur3_32` and
//! python-memcached's `cmemcache_hash`.

use super::libhashkit::{crc32_ieee, murmur3_x86_32, murmur3_x86_32_iter};

/// pymemcache's `murmur3_32(data, seed=0)`.
///
/// It runs over a Python `str` with `ord(c) & 0xff`, so each *code point* contributes its
/// low byte and the length is counted in code points. For ASCII this is the reference
/// MurmurHash3_x86_32; for other text it is not. `key` is taken as the UTF-8 encoding of
/// the `str` (invalid sequences decode to U+FFFD, as `bytes.decode(errors="replace")`).
pub fn murmur3_32(key: &[u8]) -> u32 {
    murmur3_32_seeded(key, 0)
}

/// [`murmur3_32`] with an explicit seed (pymemcache's `RendezvousHash(seed=...)`).
pub fn murmur3_32_seeded(key: &[u8], seed: u32) -> u32 {
    if key.is_ascii() {
        return murmur3_x86_32(key, seed);
    }
    let text = String::from_utf8_lossy(key);
    let len = text.chars().count();
    murmur3_x86_32_iter(text.chars().map(|c| (u32::from(c) & 0xff) as u8), len, seed)
}

/// python-memcached's `cmemcache_hash`: `((crc32(key) >> 16) & 0x7fff) or 1`, i.e.
/// libhashkit's `crc` except that 0 becomes 1.
///
/// python-memcached 1.62 hashes `key.encode('ascii')` and so raises on non-ASCII `str`
/// keys; this function hashes whatever bytes it is given, which is what the client
/// computes for every key it accepts.
pub fn cmemcache_hash(key: &[u8]) -> u32 {
    match (crc32_ieee(key) >> 16) & 0x7fff {
        0 => 1,
        h => h,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn zero_becomes_one() {
        assert_eq!(super::cmemcache_hash(b""), 1);
    }
}
