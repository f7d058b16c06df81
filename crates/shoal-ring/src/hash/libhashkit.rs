//! The hash functions of libmemcached's libhashkit (1.0/1.1 series), bit for bit.
//!
//! libhashkit reads keys through `const char *`, and `char` is signed on x86-64 Linux,
//! so several functions see a byte `>= 0x80` as a sign-extended 32-bit (or 64-bit) value.
//! The `c_char` helper reproduces that; functions that cast to `unsigned char` / `uint8_t` in the C
//! source read plain bytes. Every function here is total: the empty key hashes to the
//! value the C code returns for length 0.

use md5::{Digest, Md5};

/// The value `(uint32_t) key[i]` has in C on a platform with signed `char`.
#[inline(always)]
fn c_char(b: u8) -> u32 {
    b as i8 as i32 as u32
}

/// `hashkit_one_at_a_time`: Bob Jenkins' one-at-a-time hash over sign-extended bytes.
pub fn one_at_a_time(key: &[u8]) -> u32 {
    let mut value: u32 = 0;
    for &b in key {
        value = value.wrapping_add(c_char(b));
        value = value.wrapping_add(value << 10);
        value ^= value >> 6;
    }
    value = value.wrapping_add(value << 3);
    value ^= value >> 11;
    value.wrapping_add(value << 15)
}

/// The 16-byte MD5 digest of `key` (`libhashkit_md5_signature`).
#[inline]
pub fn md5_digest(key: &[u8]) -> [u8; 16] {
    Md5::digest(key).into()
}

/// Reads 32-bit word `word` (0..4) of an MD5 digest little-endian, as every ketama
/// implementation does (`results[3 + 4*a] << 24 | ... | results[4*a]`).
#[inline(always)]
pub fn digest_word(digest: &[u8; 16], word: usize) -> u32 {
    let o = word * 4;
    u32::from_le_bytes([digest[o], digest[o + 1], digest[o + 2], digest[o + 3]])
}

/// `hashkit_md5`: the first four bytes of the MD5 digest, little-endian.
pub fn md5(key: &[u8]) -> u32 {
    digest_word(&md5_digest(key), 0)
}

/// The CRC-32 (IEEE, reflected) of `key`, as zlib and `java.util.zip.CRC32` compute it.
#[inline]
pub fn crc32_ieee(key: &[u8]) -> u32 {
    crc32fast::hash(key)
}

/// `hashkit_crc32`: bits 16..31 of the CRC-32, masked to 15 bits (0..=32767).
///
/// The C code sign-extends each byte before masking with `0xff`, which cannot change the
/// result, so this is the plain CRC-32 of the bytes.
pub fn crc(key: &[u8]) -> u32 {
    (crc32_ieee(key) >> 16) & 0x7fff
}

const FNV_32_INIT: u32 = 2_166_136_261;
const FNV_32_PRIME: u32 = 16_777_619;
const FNV_64_INIT: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_64_PRIME: u64 = 0x0100_0000_01b3;

/// `hashkit_fnv1_32`: 32-bit FNV-1 over sign-extended bytes.
pub fn fnv1_32(key: &[u8]) -> u32 {
    key.iter().fold(FNV_32_INIT, |h, &b| {
        h.wrapping_mul(FNV_32_PRIME) ^ c_char(b)
    })
}

/// `hashkit_fnv1a_32`: 32-bit FNV-1a over sign-extended bytes.
pub fn fnv1a_32(key: &[u8]) -> u32 {
    key.iter().fold(FNV_32_INIT, |h, &b| {
        (h ^ c_char(b)).wrapping_mul(FNV_32_PRIME)
    })
}

/// `hashkit_fnv1_64`: 64-bit FNV-1 over sign-extended bytes, truncated to the low 32 bits.
pub fn fnv1_64(key: &[u8]) -> u32 {
    key.iter().fold(FNV_64_INIT, |h, &b| {
        h.wrapping_mul(FNV_64_PRIME) ^ (b as i8 as i64 as u64)
    }) as u32
}

/// `hashkit_fnv1a_64`: libhashkit computes it in 32 bits with the 64-bit constants
/// truncated, which equals the low 32 bits of real 64-bit FNV-1a.
pub fn fnv1a_64(key: &[u8]) -> u32 {
    key.iter().fold(FNV_64_INIT as u32, |h, &b| {
        (h ^ c_char(b)).wrapping_mul(FNV_64_PRIME as u32)
    })
}

/// `hashkit_hsieh`: Paul Hsieh's SuperFastHash; 0 for the empty key. The third byte of a
/// 3-byte tail is sign-extended, as in the C source.
pub fn hsieh(key: &[u8]) -> u32 {
    if key.is_empty() {
        return 0;
    }
    #[inline(always)]
    fn get16(d: &[u8]) -> u32 {
        u32::from(d[0]) | (u32::from(d[1]) << 8)
    }
    let mut hash: u32 = 0;
    let mut chunks = key.chunks_exact(4);
    for c in &mut chunks {
        hash = hash.wrapping_add(get16(c));
        let tmp = (get16(&c[2..]) << 11) ^ hash;
        hash = (hash << 16) ^ tmp;
        hash = hash.wrapping_add(hash >> 11);
    }
    let rem = chunks.remainder();
    match rem.len() {
        3 => {
            hash = hash.wrapping_add(get16(rem));
            hash ^= hash << 16;
            hash ^= c_char(rem[2]) << 18;
            hash = hash.wrapping_add(hash >> 11);
        }
        2 => {
            hash = hash.wrapping_add(get16(rem));
            hash ^= hash << 11;
            hash = hash.wrapping_add(hash >> 17);
        }
        1 => {
            hash = hash.wrapping_add(u32::from(rem[0]));
            hash ^= hash << 10;
            hash = hash.wrapping_add(hash >> 1);
        }
        _ => {}
    }
    hash ^= hash << 3;
    hash = hash.wrapping_add(hash >> 5);
    hash ^= hash << 4;
    hash = hash.wrapping_add(hash >> 17);
    hash ^= hash << 25;
    hash.wrapping_add(hash >> 6)
}

/// `hashkit_murmur`: MurmurHash2 (32-bit, little-endian reads) seeded with
/// `0xdeadbeef * length`, as libhashkit and twemproxy seed it.
pub fn murmur(key: &[u8]) -> u32 {
    const M: u32 = 0x5bd1_e995;
    let len = key.len() as u32;
    let seed = 0xdead_beef_u32.wrapping_mul(len);
    let mut h = seed ^ len;
    let mut chunks = key.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    let rem = chunks.remainder();
    if !rem.is_empty() {
        if rem.len() == 3 {
            h ^= u32::from(rem[2]) << 16;
        }
        if rem.len() >= 2 {
            h ^= u32::from(rem[1]) << 8;
        }
        h ^= u32::from(rem[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^ (h >> 15)
}

/// MurmurHash3_x86_32 of `key` with `seed`, the reference algorithm.
pub fn murmur3_x86_32(key: &[u8], seed: u32) -> u32 {
    let mut h = seed;
    let mut chunks = key.chunks_exact(4);
    for c in &mut chunks {
        let k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        h ^= murmur3_mix_k(k);
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        let mut k = 0u32;
        for (i, &b) in tail.iter().enumerate() {
            k |= u32::from(b) << (8 * i);
        }
        h ^= murmur3_mix_k(k);
    }
    murmur3_finish(h, key.len())
}

#[inline(always)]
fn murmur3_mix_k(k: u32) -> u32 {
    k.wrapping_mul(0xcc9e_2d51)
        .rotate_left(15)
        .wrapping_mul(0x1b87_3593)
}

#[inline(always)]
fn murmur3_finish(mut h: u32, len: usize) -> u32 {
    // The reference code XORs the length as a C `int`; keys are far below 2^31 bytes.
    h ^= len as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// MurmurHash3_x86_32 over a byte stream of known length; lets pymemcache's variant feed
/// code points without building a buffer.
#[inline]
pub(crate) fn murmur3_x86_32_iter(bytes: impl Iterator<Item = u8>, len: usize, seed: u32) -> u32 {
    let mut h = seed;
    let mut word: u32 = 0;
    let mut n = 0usize;
    for b in bytes {
        word |= u32::from(b) << (8 * (n & 3));
        n += 1;
        if n & 3 == 0 {
            h ^= murmur3_mix_k(word);
            h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
            word = 0;
        }
    }
    if n & 3 != 0 {
        h ^= murmur3_mix_k(word);
    }
    murmur3_finish(h, len)
}

/// `hashkit_murmur3`: MurmurHash3_x86_32 seeded with `0xdeadbeef * length` (libhashkit's
/// choice, not the reference seed 0).
pub fn murmur3(key: &[u8]) -> u32 {
    murmur3_x86_32(key, 0xdead_beef_u32.wrapping_mul(key.len() as u32))
}

/// `hashkit_jenkins`: Bob Jenkins' lookup3 `hashlittle` with initval 13, reading the key
/// little-endian (all three of the C code's alignment paths agree on little-endian
/// machines, so one byte-wise path reproduces them).
pub fn jenkins(key: &[u8]) -> u32 {
    #[inline(always)]
    fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
        *a = a.wrapping_sub(*c);
        *a ^= c.rotate_left(4);
        *c = c.wrapping_add(*b);
        *b = b.wrapping_sub(*a);
        *b ^= a.rotate_left(6);
        *a = a.wrapping_add(*c);
        *c = c.wrapping_sub(*b);
        *c ^= b.rotate_left(8);
        *b = b.wrapping_add(*a);
        *a = a.wrapping_sub(*c);
        *a ^= c.rotate_left(16);
        *c = c.wrapping_add(*b);
        *b = b.wrapping_sub(*a);
        *b ^= a.rotate_left(19);
        *a = a.wrapping_add(*c);
        *c = c.wrapping_sub(*b);
        *c ^= b.rotate_left(4);
        *b = b.wrapping_add(*a);
    }
    #[inline(always)]
    fn fin(a: &mut u32, b: &mut u32, c: &mut u32) {
        *c ^= *b;
        *c = c.wrapping_sub(b.rotate_left(14));
        *a ^= *c;
        *a = a.wrapping_sub(c.rotate_left(11));
        *b ^= *a;
        *b = b.wrapping_sub(a.rotate_left(25));
        *c ^= *b;
        *c = c.wrapping_sub(b.rotate_left(16));
        *a ^= *c;
        *a = a.wrapping_sub(c.rotate_left(4));
        *b ^= *a;
        *b = b.wrapping_sub(a.rotate_left(14));
        *c ^= *b;
        *c = c.wrapping_sub(b.rotate_left(24));
    }
    #[inline(always)]
    fn le(d: &[u8]) -> u32 {
        // Zero-pads a short tail, which is what the C code's masking achieves.
        let mut w = [0u8; 4];
        w[..d.len()].copy_from_slice(d);
        u32::from_le_bytes(w)
    }
    let init = 0xdead_beef_u32
        .wrapping_add(key.len() as u32)
        .wrapping_add(13);
    let (mut a, mut b, mut c) = (init, init, init);
    let mut rest = key;
    while rest.len() > 12 {
        a = a.wrapping_add(le(&rest[0..4]));
        b = b.wrapping_add(le(&rest[4..8]));
        c = c.wrapping_add(le(&rest[8..12]));
        mix(&mut a, &mut b, &mut c);
        rest = &rest[12..];
    }
    if rest.is_empty() {
        return c;
    }
    a = a.wrapping_add(le(&rest[..rest.len().min(4)]));
    if rest.len() > 4 {
        b = b.wrapping_add(le(&rest[4..rest.len().min(8)]));
    }
    if rest.len() > 8 {
        c = c.wrapping_add(le(&rest[8..]));
    }
    fin(&mut a, &mut b, &mut c);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_extension_matters_for_high_bytes() {
        // With unsigned bytes one_at_a_time("\x80") would differ: the C code adds
        // 0xffffff80, not 0x80.
        let mut unsigned: u32 = 0x80;
        unsigned = unsigned.wrapping_add(unsigned << 10);
        unsigned ^= unsigned >> 6;
        unsigned = unsigned.wrapping_add(unsigned << 3);
        unsigned ^= unsigned >> 11;
        unsigned = unsigned.wrapping_add(unsigned << 15);
        assert_ne!(one_at_a_time(b"\x80"), unsigned);
        assert_eq!(hsieh(b""), 0);
    }

    #[test]
    fn murmur3_slice_and_stream_agree() {
        for len in 0..40 {
            let key: Vec<u8> = (0..len as u8).map(|i| i.wrapping_mul(37)).collect();
            assert_eq!(
                murmur3_x86_32(&key, 7),
                murmur3_x86_32_iter(key.iter().copied(), key.len(), 7)
            );
        }
    }

    #[test]
    fn murmur3_reference_vectors() {
        // Published MurmurHash3_x86_32 test values.
        assert_eq!(murmur3_x86_32(b"", 0), 0);
        assert_eq!(murmur3_x86_32(b"", 1), 0x514e_28b7);
        assert_eq!(murmur3_x86_32(b"hello", 0), 0x248b_fa47);
    }
}
