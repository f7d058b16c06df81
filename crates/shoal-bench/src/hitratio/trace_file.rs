//! Real traces on disk: libCacheSim's oracleGeneral binary format, and Twitter's open
//! cache-trace CSV (github.com/twitter/cache-trace).
//!
//! **oracleGeneral**: 24-byte little-endian records, `u32` timestamp, `u64` object id,
//! `u32` object size, `i64` index of the object's next request (-1 if none). There is no
//! operation field: every record is a read, replayed as get-then-set-on-miss. Object size
//! counts key and value, so on the wire a record becomes a key of `key_len` bytes and a
//! value of the rest. Records of size 0 are skipped, as libCacheSim does.
//!
//! **Twitter CSV**: `timestamp,anonymized key,key size,value size,client id,operation,TTL`.
//! Reads (`get`, `gets`) replay as demand fill; writes (`set`, `add`, `replace`, `cas`,
//! `append`, `prepend`, `incr`, `decr`) as sets of the value size given; `delete` as a
//! delete. A read whose value size is 0 (the production read missed) fills with the size
//! the key last had, or not at all if it never had one. The key keeps its size; its id is
//! a hash of the anonymized key. Decompress `.zst` files first (`zstd -dc file.zst | ...
//! --trace -`).

use super::{Op, Request, MIN_KEY_LEN};
use crate::BenchError;
use std::collections::HashMap;
use std::io::{BufRead, Read, Write};

/// Bytes per oracleGeneral record.
pub const ORACLE_RECORD: usize = 24;

/// The trace formats [`open`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
pub enum TraceFormat {
    /// libCacheSim's oracleGeneral binary records.
    Oracle,
    /// Twitter's cache-trace CSV.
    Twitter,
}

/// Reads oracleGeneral records as requests.
pub struct OracleReader<R> {
    input: R,
    key_len: u8,
    line: u64,
}

impl<R: Read> OracleReader<R> {
    /// Requests from `input`, each with a key of `key_len` bytes and the rest of the
    /// object as its value.
    pub fn new(input: R, key_len: u8) -> Self {
        OracleReader {
            input,
            key_len: key_len.max(MIN_KEY_LEN),
            line: 0,
        }
    }
}

impl<R: Read> Iterator for OracleReader<R> {
    type Item = Result<Request, BenchError>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut rec = [0u8; ORACLE_RECORD];
        loop {
            match read_record(&mut self.input, &mut rec) {
                Ok(false) => return None,
                Ok(true) => {}
                Err(e) => return Some(Err(e)),
            }
            self.line += 1;
            let le32 = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            let time = le32(&rec[0..4]);
            let mut id = [0u8; 8];
            id.copy_from_slice(&rec[4..12]);
            let size = le32(&rec[12..16]);
            if size == 0 {
                continue;
            }
            let value_len = size.saturating_sub(u32::from(self.key_len)).max(1);
            return Some(Ok(Request {
                time,
                key: u64::from_le_bytes(id),
                key_len: self.key_len,
                value_len,
                ttl: 0,
                op: Op::Get,
            }));
        }
    }
}

/// Reads one whole record; false at a clean end of input.
fn read_record(input: &mut impl Read, rec: &mut [u8; ORACLE_RECORD]) -> Result<bool, BenchError> {
    let mut got = 0;
    while got < rec.len() {
        match input.read(&mut rec[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => {
                return Err(BenchError::Config(format!(
                    "oracleGeneral trace ends inside a record ({got} of {ORACLE_RECORD} bytes)"
                )))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(BenchError::io("read trace", e)),
        }
    }
    Ok(true)
}

/// Writes `requests` as oracleGeneral records (object size = key + value), computing
/// each record's next-access index, which Belady's algorithm needs. Holds the trace in
/// memory (24 bytes per request).
pub fn write_oracle(
    out: &mut impl Write,
    requests: impl IntoIterator<Item = Request>,
) -> Result<u64, BenchError> {
    let reqs: Vec<Request> = requests.into_iter().collect();
    let mut next = vec![-1i64; reqs.len()];
    let mut last_seen: HashMap<u64, usize> = HashMap::new();
    for (i, r) in reqs.iter().enumerate().rev() {
        if let Some(&j) = last_seen.get(&r.key) {
            next[i] = j as i64;
        }
        last_seen.insert(r.key, i);
    }
    let mut buf = Vec::with_capacity(ORACLE_RECORD * 4096);
    for (r, n) in reqs.iter().zip(&next) {
        let size = r
            .value_len
            .saturating_add(u32::from(r.key_len.max(MIN_KEY_LEN)));
        buf.extend_from_slice(&r.time.to_le_bytes());
        buf.extend_from_slice(&r.key.to_le_bytes());
        buf.extend_from_slice(&size.to_le_bytes());
        buf.extend_from_slice(&n.to_le_bytes());
        if buf.len() >= ORACLE_RECORD * 4096 {
            out.write_all(&buf)
                .map_err(|e| BenchError::io("write trace", e))?;
            buf.clear();
        }
    }
    out.write_all(&buf)
        .map_err(|e| BenchError::io("write trace", e))?;
    Ok(reqs.len() as u64)
}

/// Reads Twitter cache-trace CSV lines as requests.
pub struct TwitterReader<R> {
    input: R,
    line: String,
    line_no: u64,
    sizes: HashMap<u64, u32>,
}

impl<R: BufRead> TwitterReader<R> {
    /// Requests from the CSV in `input`.
    pub fn new(input: R) -> Self {
        TwitterReader {
            input,
            line: String::new(),
            line_no: 0,
            sizes: HashMap::new(),
        }
    }

    fn parse(&mut self) -> Result<Option<Request>, BenchError> {
        let line = self.line.trim_end();
        if line.is_empty() {
            return Ok(None);
        }
        let bad =
            |why: &str| BenchError::Config(format!("trace line {}: {why}: {line:?}", self.line_no));
        // The key may itself contain commas, so the fixed fields are taken from both ends.
        let (time, rest) = line.split_once(',').ok_or_else(|| bad("too few fields"))?;
        let mut tail = rest.rsplitn(6, ',');
        let ttl = tail.next().ok_or_else(|| bad("no TTL"))?;
        let op = tail.next().ok_or_else(|| bad("no operation"))?;
        let _client = tail.next().ok_or_else(|| bad("no client id"))?;
        let value_size = tail.next().ok_or_else(|| bad("no value size"))?;
        let key_size = tail.next().ok_or_else(|| bad("no key size"))?;
        let key = tail.next().ok_or_else(|| bad("no key"))?;
        let num = |s: &str, what: &str| -> Result<u64, BenchError> {
            s.trim().parse::<u64>().map_err(|_| bad(what))
        };
        let time = u32::try_from(num(time, "timestamp")?).unwrap_or(u32::MAX);
        let key_len = u8::try_from(num(key_size, "key size")?.clamp(1, 250)).unwrap_or(250);
        let value_len = u32::try_from(num(value_size, "value size")?).unwrap_or(u32::MAX);
        let ttl = u32::try_from(num(ttl, "TTL")?).unwrap_or(u32::MAX);
        let id = fnv1a(key.as_bytes());
        let op = match op {
            "get" | "gets" => Op::Get,
            "set" | "add" | "replace" | "cas" | "append" | "prepend" | "incr" | "decr" => Op::Set,
            "delete" => Op::Delete,
            _ => return Ok(None),
        };
        let value_len = match op {
            Op::Set => {
                self.sizes.insert(id, value_len);
                value_len
            }
            Op::Get if value_len > 0 => {
                self.sizes.insert(id, value_len);
                value_len
            }
            Op::Get => self.sizes.get(&id).copied().unwrap_or(0),
            Op::Delete => 0,
        };
        Ok(Some(Request {
            time,
            key: id,
            key_len,
            value_len,
            ttl,
            op,
        }))
    }
}

impl<R: BufRead> Iterator for TwitterReader<R> {
    type Item = Result<Request, BenchError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            self.line.clear();
            match self.input.read_line(&mut self.line) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => return Some(Err(BenchError::io("read trace", e))),
            }
            self.line_no += 1;
            match self.parse() {
                Ok(Some(r)) => return Some(Ok(r)),
                Ok(None) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// FNV-1a over the anonymized key: a stable id for it.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The requests of the trace at `path` (`-` for stdin) in `format`.
pub fn open(
    path: &std::path::Path,
    format: TraceFormat,
    key_len: u8,
) -> Result<Box<dyn Iterator<Item = Result<Request, BenchError>> + Send>, BenchError> {
    let input: Box<dyn Read + Send> = if path.as_os_str() == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(
            std::fs::File::open(path).map_err(|e| BenchError::io(path.display().to_string(), e))?,
        )
    };
    let input = std::io::BufReader::with_capacity(1 << 20, input);
    Ok(match format {
        TraceFormat::Oracle => Box::new(OracleReader::new(input, key_len)),
        TraceFormat::Twitter => Box::new(TwitterReader::new(input)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(key: u64, value_len: u32) -> Request {
        Request {
            time: 7,
            key,
            key_len: 16,
            value_len,
            ttl: 0,
            op: Op::Get,
        }
    }

    #[test]
    fn oracle_roundtrip_with_next_access() {
        let trace = vec![req(1, 100), req(2, 50), req(1, 100), req(3, 9)];
        let mut bytes = Vec::new();
        assert_eq!(write_oracle(&mut bytes, trace.clone()).unwrap(), 4);
        assert_eq!(bytes.len(), 4 * ORACLE_RECORD);
        // Record 0's next access is record 2; record 1's is none.
        assert_eq!(i64::from_le_bytes(bytes[16..24].try_into().unwrap()), 2);
        assert_eq!(i64::from_le_bytes(bytes[40..48].try_into().unwrap()), -1);
        assert_eq!(u32::from_le_bytes(bytes[12..16].try_into().unwrap()), 116);
        let back: Vec<Request> = OracleReader::new(&bytes[..], 16)
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(back, trace);
    }

    #[test]
    fn oracle_skips_empty_objects_and_refuses_a_torn_record() {
        let mut bytes = Vec::new();
        write_oracle(&mut bytes, vec![req(1, 10)]).unwrap();
        bytes[12..16].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(OracleReader::new(&bytes[..], 16).count(), 0);
        let torn = &bytes[..20];
        assert!(OracleReader::new(torn, 16).next().unwrap().is_err());
    }

    #[test]
    fn twitter_csv_operations_sizes_and_commas_in_keys() {
        let csv = "0,a:b,3,100,1,set,60\n\
                   1,a:b,3,0,1,get,0\n\
                   2,x,y,1,7,2,gets,0\n\
                   3,a:b,3,0,1,delete,0\n\
                   4,new,3,0,1,get,0\n\
                   5,a:b,3,0,1,flush,0\n";
        let reqs: Vec<Request> = TwitterReader::new(csv.as_bytes())
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(reqs.len(), 5);
        assert_eq!(
            (reqs[0].op, reqs[0].value_len, reqs[0].ttl),
            (Op::Set, 100, 60)
        );
        // A read that missed in production fills with the key's last size.
        assert_eq!((reqs[1].op, reqs[1].value_len), (Op::Get, 100));
        assert_eq!(reqs[1].key, reqs[0].key);
        assert_eq!(
            (reqs[2].op, reqs[2].key_len, reqs[2].value_len),
            (Op::Get, 1, 7)
        );
        assert_eq!(reqs[3].op, Op::Delete);
        // A read of a key never sized cannot be filled.
        assert_eq!(reqs[4].value_len, 0);
        let bad = "0,k,3,x,1,get,0\n";
        assert!(TwitterReader::new(bad.as_bytes()).next().unwrap().is_err());
    }
}
