//! The on-flash form of one value: a header with a CRC-32, the key, the value.
//!
//! ```text
//! +0  crc32     u32  over everything after it (lengths, key, value)
//! +4  key_len   u32
//! +8  value_len u32
//! +12 key, value, zero padding to a multiple of 8
//! ```
//!
//! The key is stored so that a read can check the record is the one its stub points at
//! (a page reused under it holds other keys), and so that compaction can find a record's
//! stub in the index without any map from flash back to memory.

/// Bytes before the key.
pub const RECORD_HEADER: usize = 12;

/// Records start on 8-byte boundaries.
const ALIGN: usize = 8;

/// The little-endian word at `at`, if the bytes are there.
pub(crate) fn le_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// Bytes a record of this key and value takes on flash, padding included.
pub fn record_len(key_len: usize, value_len: usize) -> usize {
    (RECORD_HEADER + key_len + value_len + ALIGN - 1) & !(ALIGN - 1)
}

/// Appends the record of `key` and `value` to `out`.
pub fn encode(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    let start = out.len();
    out.extend_from_slice(&[0u8; 4]);
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    let crc = crc32fast::hash(&out[start + 4..]);
    out[start..start + 4].copy_from_slice(&crc.to_le_bytes());
    out.resize(start + record_len(key.len(), value.len()), 0);
}

/// Why a record read back is not the value asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The bytes do not match their checksum: corrupted, or a page rewritten meanwhile.
    #[error("bad CRC")]
    BadCrc,
    /// A sound record of another key or length: the page was reused.
    #[error("record of another item")]
    Mismatch,
}

/// Checks that `bytes` (read from a record's start, at least the record's length) hold
/// `key` with a value of `value_len` bytes, and returns the value.
pub fn decode<'b>(bytes: &'b [u8], key: &[u8], value_len: usize) -> Result<&'b [u8], RecordError> {
    let word = |i: usize| le_u32(bytes, i);
    let (Some(crc), Some(klen), Some(vlen)) = (word(0), word(4), word(8)) else {
        return Err(RecordError::BadCrc);
    };
    let (klen, vlen) = (klen as usize, vlen as usize);
    if klen != key.len() || vlen != value_len {
        return Err(RecordError::Mismatch);
    }
    let body = bytes
        .get(4..RECORD_HEADER + klen + vlen)
        .ok_or(RecordError::BadCrc)?;
    if crc32fast::hash(body) != crc {
        return Err(RecordError::BadCrc);
    }
    if &body[8..8 + klen] != key {
        return Err(RecordError::Mismatch);
    }
    Ok(&body[8 + klen..])
}

/// The key and value length of the record at the start of `bytes` if its header is
/// plausible and its CRC checks (for compaction, which walks a page record by record).
pub fn parse(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let word = |i: usize| le_u32(bytes, i);
    let crc = word(0)?;
    let klen = word(4)? as usize;
    let vlen = word(8)? as usize;
    if klen == 0 || klen > 255 {
        return None;
    }
    let body = bytes.get(4..RECORD_HEADER.checked_add(klen)?.checked_add(vlen)?)?;
    (crc32fast::hash(body) == crc).then(|| (&body[8..8 + klen], &body[8 + klen..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_and_any_flipped_bit_is_caught() {
        let mut buf = Vec::new();
        encode(&mut buf, b"key", b"value bytes");
        assert_eq!(buf.len(), record_len(3, 11));
        assert_eq!(buf.len() % 8, 0);
        assert_eq!(decode(&buf, b"key", 11), Ok(&b"value bytes"[..]));
        assert_eq!(parse(&buf), Some((&b"key"[..], &b"value bytes"[..])));
        assert_eq!(decode(&buf, b"kez", 11), Err(RecordError::Mismatch));
        assert_eq!(decode(&buf, b"key", 10), Err(RecordError::Mismatch));
        for bit in 0..(RECORD_HEADER + 14) * 8 {
            let mut bad = buf.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(decode(&bad, b"key", 11).is_err(), "bit {bit}");
        }
        assert_eq!(decode(&buf[..10], b"key", 11), Err(RecordError::BadCrc));
    }
}
