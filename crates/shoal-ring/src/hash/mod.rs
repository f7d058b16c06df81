//! Key hash functions, one module per source library.
//!
//! [`HashAlgorithm`] names every function and dispatches to it; the free functions in the
//! submodules can be called directly when the algorithm is fixed at compile time.

pub mod java;
pub mod libhashkit;
pub mod python;
pub mod twemproxy;

use std::fmt;
use std::str::FromStr;

use crate::RingError;

/// A key hash function of a specific client library. [`HashAlgorithm::hash`] returns
/// exactly the 32-bit value that library's function returns for the same key bytes
/// (Java's signed results are reported as their unsigned 32-bit pattern).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
// Variant names keep the libraries' own spellings (fnv1a_32, FNV1A_64_HASH) so they can be
// matched against configs and docs at a glance.
#[allow(non_camel_case_types)]
pub enum HashAlgorithm {
    /// libhashkit / twemproxy `one_at_a_time` (bytes sign-extended).
    OneAtATime,
    /// libhashkit / twemproxy `md5`: first four digest bytes, little-endian.
    Md5,
    /// libhashkit `crc` = twemproxy `crc32`: 15 bits of the CRC-32.
    Crc,
    /// libhashkit `fnv1_32`.
    Fnv1_32,
    /// libhashkit `fnv1a_32`.
    Fnv1a_32,
    /// libhashkit `fnv1_64` (low 32 bits).
    Fnv1_64,
    /// libhashkit `fnv1a_64` (low 32 bits).
    Fnv1a_64,
    /// libhashkit / twemproxy `hsieh`.
    Hsieh,
    /// libhashkit / twemproxy `murmur` (MurmurHash2, seed `0xdeadbeef * len`).
    Murmur,
    /// libhashkit `murmur3` (MurmurHash3_x86_32, seed `0xdeadbeef * len`).
    Murmur3,
    /// libhashkit / twemproxy `jenkins` (lookup3, initval 13).
    Jenkins,
    /// twemproxy `crc16` (CRC-16/XMODEM steps in an unmasked 32-bit accumulator).
    Crc16,
    /// twemproxy `crc32a` (standard CRC-32).
    Crc32a,
    /// XMemcached `NATIVE_HASH` (`String.hashCode`).
    JavaNative,
    /// XMemcached `CRC32_HASH`.
    JavaCrc32,
    /// XMemcached `FNV1_64_HASH` (UTF-16 units).
    JavaFnv1_64,
    /// XMemcached `FNV1A_64_HASH` (UTF-16 units).
    JavaFnv1a_64,
    /// XMemcached `FNV1_32_HASH` (UTF-16 units).
    JavaFnv1_32,
    /// XMemcached `FNV1A_32_HASH` (UTF-16 units).
    JavaFnv1a_32,
    /// XMemcached / spymemcached `KETAMA_HASH` (MD5 of UTF-8).
    JavaKetama,
    /// XMemcached `MYSQL_HASH`.
    JavaMysql,
    /// XMemcached `ELF_HASH`.
    JavaElf,
    /// XMemcached `RS_HASH`.
    JavaRs,
    /// XMemcached `LUA_HASH`.
    JavaLua,
    /// XMemcached `ELECTION_HASH` (same function as `KETAMA_HASH`).
    JavaElection,
    /// XMemcached `ONE_AT_A_TIME` (unsigned UTF-8 bytes).
    JavaOneAtATime,
    /// pymemcache `murmur3_32` with seed 0 (code points).
    PyMurmur3_32,
    /// python-memcached `cmemcache_hash`.
    CmemcacheHash,
}

/// Canonical name, algorithm, and accepted aliases. Names are matched case-insensitively
/// with `-` and `_` treated alike.
const NAMES: &[(&str, HashAlgorithm, &[&str])] = &[
    (
        "one_at_a_time",
        HashAlgorithm::OneAtATime,
        &["default", "oaat"],
    ),
    ("md5", HashAlgorithm::Md5, &[]),
    ("crc", HashAlgorithm::Crc, &["crc32"]),
    ("fnv1_32", HashAlgorithm::Fnv1_32, &[]),
    ("fnv1a_32", HashAlgorithm::Fnv1a_32, &[]),
    ("fnv1_64", HashAlgorithm::Fnv1_64, &[]),
    ("fnv1a_64", HashAlgorithm::Fnv1a_64, &[]),
    ("hsieh", HashAlgorithm::Hsieh, &[]),
    ("murmur", HashAlgorithm::Murmur, &["murmur2"]),
    ("murmur3", HashAlgorithm::Murmur3, &[]),
    ("jenkins", HashAlgorithm::Jenkins, &[]),
    ("crc16", HashAlgorithm::Crc16, &[]),
    ("crc32a", HashAlgorithm::Crc32a, &[]),
    (
        "native",
        HashAlgorithm::JavaNative,
        &["native_hash", "java_native"],
    ),
    ("java_crc32", HashAlgorithm::JavaCrc32, &["crc32_hash"]),
    (
        "java_fnv1_64",
        HashAlgorithm::JavaFnv1_64,
        &["fnv1_64_hash"],
    ),
    (
        "java_fnv1a_64",
        HashAlgorithm::JavaFnv1a_64,
        &["fnv1a_64_hash"],
    ),
    (
        "java_fnv1_32",
        HashAlgorithm::JavaFnv1_32,
        &["fnv1_32_hash"],
    ),
    (
        "java_fnv1a_32",
        HashAlgorithm::JavaFnv1a_32,
        &["fnv1a_32_hash"],
    ),
    (
        "ketama_hash",
        HashAlgorithm::JavaKetama,
        &["java_ketama", "ketama"],
    ),
    ("mysql", HashAlgorithm::JavaMysql, &["mysql_hash"]),
    ("elf", HashAlgorithm::JavaElf, &["elf_hash"]),
    ("rs", HashAlgorithm::JavaRs, &["rs_hash"]),
    ("lua", HashAlgorithm::JavaLua, &["lua_hash"]),
    ("election_hash", HashAlgorithm::JavaElection, &["election"]),
    ("java_one_at_a_time", HashAlgorithm::JavaOneAtATime, &[]),
    (
        "murmur3_32",
        HashAlgorithm::PyMurmur3_32,
        &["murmur3_32_seed0", "pymemcache"],
    ),
    (
        "cmemcache_hash",
        HashAlgorithm::CmemcacheHash,
        &["cmemcache"],
    ),
];

impl HashAlgorithm {
    /// Every algorithm, in a stable order (used by benchmarks and `--help`).
    pub const ALL: &'static [HashAlgorithm] = &[
        HashAlgorithm::OneAtATime,
        HashAlgorithm::Md5,
        HashAlgorithm::Crc,
        HashAlgorithm::Fnv1_32,
        HashAlgorithm::Fnv1a_32,
        HashAlgorithm::Fnv1_64,
        HashAlgorithm::Fnv1a_64,
        HashAlgorithm::Hsieh,
        HashAlgorithm::Murmur,
        HashAlgorithm::Murmur3,
        HashAlgorithm::Jenkins,
        HashAlgorithm::Crc16,
        HashAlgorithm::Crc32a,
        HashAlgorithm::JavaNative,
        HashAlgorithm::JavaCrc32,
        HashAlgorithm::JavaFnv1_64,
        HashAlgorithm::JavaFnv1a_64,
        HashAlgorithm::JavaFnv1_32,
        HashAlgorithm::JavaFnv1a_32,
        HashAlgorithm::JavaKetama,
        HashAlgorithm::JavaMysql,
        HashAlgorithm::JavaElf,
        HashAlgorithm::JavaRs,
        HashAlgorithm::JavaLua,
        HashAlgorithm::JavaElection,
        HashAlgorithm::JavaOneAtATime,
        HashAlgorithm::PyMurmur3_32,
        HashAlgorithm::CmemcacheHash,
    ];

    /// Hashes `key` exactly as the source library does. Total: the empty key gets the
    /// value the library's function computes for zero-length input.
    #[inline]
    pub fn hash(self, key: &[u8]) -> u32 {
        use HashAlgorithm as H;
        match self {
            H::OneAtATime => libhashkit::one_at_a_time(key),
            H::Md5 => libhashkit::md5(key),
            H::Crc => libhashkit::crc(key),
            H::Fnv1_32 => libhashkit::fnv1_32(key),
            H::Fnv1a_32 => libhashkit::fnv1a_32(key),
            H::Fnv1_64 => libhashkit::fnv1_64(key),
            H::Fnv1a_64 => libhashkit::fnv1a_64(key),
            H::Hsieh => libhashkit::hsieh(key),
            H::Murmur => libhashkit::murmur(key),
            H::Murmur3 => libhashkit::murmur3(key),
            H::Jenkins => libhashkit::jenkins(key),
            H::Crc16 => twemproxy::crc16(key),
            H::Crc32a => twemproxy::crc32a(key),
            H::JavaNative => java::native(key),
            H::JavaCrc32 => java::crc32(key),
            H::JavaFnv1_64 => java::fnv1_64(key),
            H::JavaFnv1a_64 => java::fnv1a_64(key),
            H::JavaFnv1_32 => java::fnv1_32(key),
            H::JavaFnv1a_32 => java::fnv1a_32(key),
            H::JavaKetama | H::JavaElection => java::ketama(key),
            H::JavaMysql => java::mysql(key),
            H::JavaElf => java::elf(key),
            H::JavaRs => java::rs(key),
            H::JavaLua => java::lua(key),
            H::JavaOneAtATime => java::one_at_a_time(key),
            H::PyMurmur3_32 => python::murmur3_32(key),
            H::CmemcacheHash => python::cmemcache_hash(key),
        }
    }

    /// The canonical name accepted by [`FromStr`] and printed by [`fmt::Display`].
    pub fn name(self) -> &'static str {
        NAMES
            .iter()
            .find(|(_, a, _)| *a == self)
            .map_or("unknown", |(n, _, _)| n)
    }

    /// Whether the function is the first four little-endian bytes of the MD5 of the raw
    /// key bytes (lets rings reuse a digest state instead of re-hashing a prefix).
    pub(crate) fn is_md5_le(self) -> bool {
        matches!(
            self,
            HashAlgorithm::Md5 | HashAlgorithm::JavaKetama | HashAlgorithm::JavaElection
        )
    }
}

fn normalize(s: &str) -> String {
    s.trim().to_ascii_lowercase().replace('-', "_")
}

impl FromStr for HashAlgorithm {
    type Err = RingError;

    /// Parses a canonical name or alias (see [`HashAlgorithm::name`]); unknown names give
    /// [`RingError::UnknownHash`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let want = normalize(s);
        NAMES
            .iter()
            .find(|(n, _, aliases)| *n == want || aliases.contains(&want.as_str()))
            .map(|(_, a, _)| *a)
            .ok_or_else(|| RingError::UnknownHash(s.to_string()))
    }
}

impl fmt::Display for HashAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for &a in HashAlgorithm::ALL {
            assert_eq!(a.name().parse::<HashAlgorithm>().ok(), Some(a));
        }
        assert!("nope".parse::<HashAlgorithm>().is_err());
        assert_eq!(
            "FNV1A-32".parse::<HashAlgorithm>().ok(),
            Some(HashAlgorithm::Fnv1a_32)
        );
    }
}
