//! Segment files: naming, and scanning one for recovery.
//!
//! A queue's log is a sequence of segment files named by a hex id that only grows. The
//! scan decides, at the first bytes that are not a valid record, whether they are a torn
//! tail (an interrupted append: safe to cut) or corruption (valid records follow, so
//! cutting would silently drop data: quarantine instead).

use crate::record::{self, Decoded, Header, HEADER_LEN};
use std::path::{Path, PathBuf};

/// Suffix of live segment files.
pub const SEGMENT_SUFFIX: &str = ".seg";
/// Suffix added to a quarantined segment.
pub const QUARANTINE_SUFFIX: &str = ".corrupt";

/// Path of segment `id` in `dir`.
pub fn segment_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:016x}{SEGMENT_SUFFIX}"))
}

/// The id of a segment file name, or of a quarantined one (`*.seg.corrupt`), and whether it
/// is quarantined.
pub fn parse_segment_name(name: &str) -> Option<(u64, bool)> {
    let (stem, quarantined) = match name.strip_suffix(QUARANTINE_SUFFIX) {
        Some(s) => (s, true),
        None => (name, false),
    };
    let hex = stem.strip_suffix(SEGMENT_SUFFIX)?;
    if hex.len() != 16 {
        return None;
    }
    u64::from_str_radix(hex, 16)
        .ok()
        .map(|id| (id, quarantined))
}

/// How a scan ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanEnd {
    /// Every byte belongs to a valid record.
    Clean,
    /// Bytes from `at` on are an interrupted append with no valid record after them.
    Torn {
        /// Offset to cut the file at.
        at: usize,
    },
    /// The record at `at` is invalid but a valid record follows it.
    Corrupt {
        /// Offset of the first invalid byte.
        at: usize,
    },
}

/// The records of one segment, in order, up to the first invalid byte.
#[derive(Debug)]
pub struct Scan {
    /// `(offset, header)` of each valid record.
    pub records: Vec<(usize, Header)>,
    /// How the scan ended.
    pub end: ScanEnd,
}

/// Scans a whole segment's bytes.
pub fn scan(buf: &[u8]) -> Scan {
    let mut records = Vec::new();
    let mut pos = 0usize;
    while pos < buf.len() {
        match record::decode(&buf[pos..]) {
            Decoded::Record(h) => {
                records.push((pos, h));
                pos += h.total();
            }
            Decoded::Truncated | Decoded::Invalid => {
                let end = if records_resume_after(buf, pos + 1) {
                    ScanEnd::Corrupt { at: pos }
                } else {
                    ScanEnd::Torn { at: pos }
                };
                return Scan { records, end };
            }
        }
    }
    Scan {
        records,
        end: ScanEnd::Clean,
    }
}

/// Most candidate record starts examined after damage: bounds the work a segment full of
/// record-like client bytes can cause at recovery.
const MAX_RESUME_CANDIDATES: usize = 4096;

/// Whether, at some offset at or after `from`, valid records resume and run on to the
/// end of the file (the last one possibly cut short): then the damage at `from - 1` is
/// corruption with acknowledged records after it. A write cut short instead leaves, after
/// its header, only the part of its payload that was written; a client's payload may
/// hold what decodes as a record, but not a run of them ending exactly at the end of the
/// file, so a torn tail is never taken for corruption (which would quarantine every
/// message before it). A cheap header check gates the checksum.
fn records_resume_after(buf: &[u8], from: usize) -> bool {
    let mut candidates = 0;
    let mut p = from;
    while p + HEADER_LEN <= buf.len() {
        let h = &buf[p..];
        if (1..=3).contains(&h[8]) && h[9..12] == [0, 0, 0] {
            if let Decoded::Record(first) = record::decode(h) {
                if runs_to_end(buf, p + first.total()) {
                    return true;
                }
                candidates += 1;
                if candidates >= MAX_RESUME_CANDIDATES {
                    return false;
                }
            }
        }
        p += 1;
    }
    false
}

/// Whether valid records follow one another from `at` to the end of `buf`, the last one
/// possibly cut short by the end.
fn runs_to_end(buf: &[u8], mut at: usize) -> bool {
    loop {
        if at == buf.len() {
            return true;
        }
        match record::decode(&buf[at..]) {
            Decoded::Record(h) => at += h.total(),
            Decoded::Truncated => return plausible_header_start(&buf[at..]),
            Decoded::Invalid => return false,
        }
    }
}

/// Whether the bytes (fewer than a record) could begin a record header: its kind byte
/// and the zero bytes after it, as far as they are there.
fn plausible_header_start(b: &[u8]) -> bool {
    b.get(8).map_or(true, |k| (1..=3).contains(k)) && b.iter().skip(9).take(3).all(|&z| z == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{encode, Kind};

    fn log(n: u64) -> Vec<u8> {
        let mut v = Vec::new();
        encode(&mut v, Kind::SegmentStart, 0, 0, 0, b"");
        for i in 0..n {
            encode(&mut v, Kind::Message, 0, i, 0, &[b'x'; 100]);
        }
        v
    }

    #[test]
    fn names() {
        assert_eq!(
            parse_segment_name("00000000000000ff.seg"),
            Some((255, false))
        );
        assert_eq!(
            parse_segment_name("00000000000000ff.seg.corrupt"),
            Some((255, true))
        );
        assert_eq!(parse_segment_name("ff.seg"), None);
        assert_eq!(parse_segment_name("LOCK"), None);
    }

    #[test]
    fn clean_torn_and_corrupt() {
        let v = log(5);
        let s = scan(&v);
        assert_eq!(s.end, ScanEnd::Clean);
        assert_eq!(s.records.len(), 6);

        // A partial last record is a torn tail.
        let cut = &v[..v.len() - 40];
        let s = scan(cut);
        assert_eq!(s.records.len(), 5);
        assert!(matches!(s.end, ScanEnd::Torn { .. }));

        // Zeros after the last record (a file extended but never written) are torn too.
        let mut z = v.clone();
        z.extend_from_slice(&[0u8; 500]);
        assert_eq!(scan(&z).end, ScanEnd::Torn { at: v.len() });

        // A write cut short inside a payload that holds an encoded record (a client's
        // bytes): still a torn tail, not corruption.
        let mut inner = Vec::new();
        encode(&mut inner, Kind::Message, 0, 99, 0, b"looks valid");
        let mut p = v.clone();
        let mut payload = vec![b'y'; 40];
        payload.extend_from_slice(&inner);
        payload.extend_from_slice(&[b'z'; 200]);
        encode(&mut p, Kind::Message, 0, 5, 0, &payload);
        let cut = &p[..v.len() + HEADER_LEN + 40 + inner.len() + 10];
        assert_eq!(scan(cut).end, ScanEnd::Torn { at: v.len() });
        assert_eq!(scan(cut).records.len(), 6);

        // A length field corrupted so that its record seems to run past the end of the
        // file, with valid records after it: corruption, not a torn tail.
        let mut l = v.clone();
        l[HEADER_LEN + HEADER_LEN + 4 + 4] ^= 0x7F;
        assert!(
            matches!(scan(&l).end, ScanEnd::Corrupt { .. }),
            "{:?}",
            scan(&l).end
        );

        // A flipped byte in the middle, with valid records after it, is corruption.
        let mut c = v.clone();
        c[HEADER_LEN + HEADER_LEN + 10] ^= 0xFF;
        let s = scan(&c);
        assert_eq!(s.end, ScanEnd::Corrupt { at: HEADER_LEN });
        assert_eq!(s.records.len(), 1);
    }
}
