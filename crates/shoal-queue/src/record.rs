//! The on-disk record: a 32-byte header followed by the payload.
//!
//! ```text
//! 0..4   crc32c of bytes 4..32+len
//! 4..8   len      payload length (u32 LE)
//! 8      kind     1 message, 2 ack, 3 segment start
//! 9..12  zero
//! 12..16 flags    client flags (messages)
//! 16..24 a        message: sequence number; ack: first acked seq; start: base seq
//! 24..32 b        message: enqueue secs (low 32) | expiry secs (high 32, 0 = never);
//!                 ack: number of consecutive seqs acked
//! ```
//!
//! A message therefore costs its payload plus 32 bytes on disk; consuming it costs at
//! most one more 32-byte ack, and in-order consumption shares one ack among many.

use crate::crc;

/// Size of every record header.
pub const HEADER_LEN: usize = 32;

/// Largest payload a record may claim; anything larger is treated as corruption, so a
/// damaged length field can never make recovery allocate gigabytes.
pub const MAX_PAYLOAD: u32 = 256 << 20;

/// What a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A message with its payload.
    Message,
    /// `b` consecutive messages starting at seq `a` were consumed.
    Ack,
    /// First record of a segment; `a` is the next sequence number at creation.
    SegmentStart,
}

impl Kind {
    fn code(self) -> u8 {
        match self {
            Kind::Message => 1,
            Kind::Ack => 2,
            Kind::SegmentStart => 3,
        }
    }

    fn from_code(c: u8) -> Option<Kind> {
        match c {
            1 => Some(Kind::Message),
            2 => Some(Kind::Ack),
            3 => Some(Kind::SegmentStart),
            _ => None,
        }
    }
}

/// A decoded header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Record kind.
    pub kind: Kind,
    /// Payload length.
    pub len: u32,
    /// Client flags.
    pub flags: u32,
    /// First kind-specific field.
    pub a: u64,
    /// Second kind-specific field.
    pub b: u64,
}

impl Header {
    /// Total record length (header + payload).
    pub fn total(&self) -> usize {
        HEADER_LEN + self.len as usize
    }
}

/// Appends one record to `out`.
pub fn encode(out: &mut Vec<u8>, kind: Kind, flags: u32, a: u64, b: u64, payload: &[u8]) {
    let start = out.len();
    out.extend_from_slice(&[0u8; 4]);
    // Payloads are bounded by the configured item size, far below u32::MAX.
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&[kind.code(), 0, 0, 0]);
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&a.to_le_bytes());
    out.extend_from_slice(&b.to_le_bytes());
    out.extend_from_slice(payload);
    let c = crc::crc32c(&out[start + 4..]);
    out[start..start + 4].copy_from_slice(&c.to_le_bytes());
}

/// Packs enqueue and expiry times (unix seconds) into a message's `b` field.
pub fn pack_times(enq: u32, exp: u32) -> u64 {
    u64::from(enq) | (u64::from(exp) << 32)
}

/// Unpacks [`pack_times`]: `(enqueue, expiry)`.
pub fn unpack_times(b: u64) -> (u32, u32) {
    (b as u32, (b >> 32) as u32)
}

/// The result of decoding at one position.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    /// A valid record of `header.total()` bytes.
    Record(Header),
    /// The buffer ends inside the record (a torn write, if this is the end of the log).
    Truncated,
    /// The bytes are not a valid record (bad kind, absurd length, checksum mismatch).
    Invalid,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// Decodes the record at the start of `buf`, verifying its checksum.
pub fn decode(buf: &[u8]) -> Decoded {
    if buf.len() < HEADER_LEN {
        return Decoded::Truncated;
    }
    let len = u32_at(buf, 4);
    let Some(kind) = Kind::from_code(buf[8]) else {
        return Decoded::Invalid;
    };
    if len > MAX_PAYLOAD || buf[9..12] != [0, 0, 0] {
        return Decoded::Invalid;
    }
    let total = HEADER_LEN + len as usize;
    if buf.len() < total {
        return Decoded::Truncated;
    }
    if crc::crc32c(&buf[4..total]) != u32_at(buf, 0) {
        return Decoded::Invalid;
    }
    Decoded::Record(Header {
        kind,
        len,
        flags: u32_at(buf, 12),
        a: u64_at(buf, 16),
        b: u64_at(buf, 24),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let mut v = Vec::new();
        encode(&mut v, Kind::Message, 7, 42, pack_times(5, 9), b"hello");
        assert_eq!(v.len(), HEADER_LEN + 5);
        let Decoded::Record(h) = decode(&v) else {
            panic!("valid record")
        };
        assert_eq!((h.kind, h.len, h.flags, h.a), (Kind::Message, 5, 7, 42));
        assert_eq!(unpack_times(h.b), (5, 9));
        assert_eq!(decode(&v[..v.len() - 1]), Decoded::Truncated);
        assert_eq!(decode(&v[..10]), Decoded::Truncated);
        let mut bad = v.clone();
        bad[HEADER_LEN + 1] ^= 1;
        assert_eq!(decode(&bad), Decoded::Invalid);
        assert_eq!(decode(&[0u8; 64]), Decoded::Invalid);
    }
}
