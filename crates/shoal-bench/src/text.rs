//! memcached text protocol: encoding the requests the generator sends and parsing the
//! replies it reads. No I/O here, so every case is unit-tested.

use crate::BenchError;

/// The kind of request in flight, which decides how its reply is parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `get <key>`: one key.
    Get,
    /// `set <key> 0 0 <n>`.
    Set,
}

/// One parsed reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// A get that returned a value (`VALUE ... END`).
    Hit,
    /// A get that returned nothing (`END`).
    Miss,
    /// `STORED`.
    Stored,
    /// `NOT_STORED`, `EXISTS` or `NOT_FOUND`.
    NotStored,
    /// `ERROR`, `CLIENT_ERROR ...` or `SERVER_ERROR ...`.
    Error,
}

/// Appends a key made of `prefix` and `index` zero-padded to `width` digits
/// (`key:%08d` is prefix `key:`, width 8). No allocation.
pub fn push_key(buf: &mut Vec<u8>, prefix: &[u8], index: u64, width: usize) {
    buf.extend_from_slice(prefix);
    let mut digits = [0u8; 20];
    let mut n = index;
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for _ in len..width {
        buf.push(b'0');
    }
    buf.extend(digits[..len].iter().rev());
}

/// Appends a decimal number.
fn push_u64(buf: &mut Vec<u8>, n: u64) {
    push_key(buf, b"", n, 0);
}

/// Appends `get <key>\r\n`.
pub fn encode_get(buf: &mut Vec<u8>, prefix: &[u8], index: u64, width: usize) {
    buf.extend_from_slice(b"get ");
    push_key(buf, prefix, index, width);
    buf.extend_from_slice(b"\r\n");
}

/// Appends `get <key> <key> ...\r\n` for every index in `indexes`.
pub fn encode_multi_get(
    buf: &mut Vec<u8>,
    prefix: &[u8],
    indexes: impl IntoIterator<Item = u64>,
    width: usize,
) {
    buf.extend_from_slice(b"get");
    for i in indexes {
        buf.push(b' ');
        push_key(buf, prefix, i, width);
    }
    buf.extend_from_slice(b"\r\n");
}

/// Appends `set <key> 0 0 <len>\r\n<value>\r\n` for a key given whole.
pub fn encode_set_key(buf: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    buf.extend_from_slice(b"set ");
    buf.extend_from_slice(key);
    buf.extend_from_slice(b" 0 0 ");
    push_u64(buf, value.len() as u64);
    buf.extend_from_slice(b"\r\n");
    buf.extend_from_slice(value);
    buf.extend_from_slice(b"\r\n");
}

/// Appends `set <key> 0 0 <len>\r\n<value>\r\n`.
pub fn encode_set(buf: &mut Vec<u8>, prefix: &[u8], index: u64, width: usize, value: &[u8]) {
    buf.extend_from_slice(b"set ");
    push_key(buf, prefix, index, width);
    buf.extend_from_slice(b" 0 0 ");
    push_u64(buf, value.len() as u64);
    buf.extend_from_slice(b"\r\n");
    buf.extend_from_slice(value);
    buf.extend_from_slice(b"\r\n");
}

/// The first line of `buf` without its `\r\n`, and the bytes it takes, if complete.
fn line(buf: &[u8]) -> Option<(&[u8], usize)> {
    let nl = buf.iter().position(|&b| b == b'\n')?;
    let end = if nl > 0 && buf[nl - 1] == b'\r' {
        nl - 1
    } else {
        nl
    };
    Some((&buf[..end], nl + 1))
}

fn is_error_line(l: &[u8]) -> bool {
    l == b"ERROR" || l.starts_with(b"CLIENT_ERROR") || l.starts_with(b"SERVER_ERROR")
}

fn unexpected(l: &[u8]) -> BenchError {
    let shown: String = String::from_utf8_lossy(&l[..l.len().min(80)]).into_owned();
    BenchError::Protocol(shown)
}

/// Parses one `VALUE <key> <flags> <bytes> [<cas>]\r\n<data>\r\n` block at the start of
/// `buf`, given its first line. Returns the bytes the block takes, if complete.
fn value_block(l: &[u8], line_len: usize, buf: &[u8]) -> Result<Option<usize>, BenchError> {
    let bytes = l
        .split(|&b| b == b' ')
        .nth(3)
        .and_then(|t| std::str::from_utf8(t).ok())
        .and_then(|t| t.parse::<usize>().ok())
        .ok_or_else(|| unexpected(l))?;
    let need = line_len
        .checked_add(bytes)
        .and_then(|n| n.checked_add(2))
        .ok_or_else(|| unexpected(l))?;
    if buf.len() < need {
        return Ok(None);
    }
    if &buf[need - 2..need] != b"\r\n" {
        return Err(unexpected(l));
    }
    Ok(Some(need))
}

/// Parses the reply to one request of kind `op` at the start of `buf`.
///
/// `Ok(None)` means more bytes are needed; `Ok(Some((reply, consumed)))` a whole reply.
/// A get's reply is the `VALUE` block (if any) and its `END`.
pub fn parse_reply(buf: &[u8], op: Op) -> Result<Option<(Reply, usize)>, BenchError> {
    let Some((l, n)) = line(buf) else {
        return Ok(None);
    };
    if is_error_line(l) {
        return Ok(Some((Reply::Error, n)));
    }
    match op {
        Op::Set => match l {
            b"STORED" => Ok(Some((Reply::Stored, n))),
            b"NOT_STORED" | b"EXISTS" | b"NOT_FOUND" => Ok(Some((Reply::NotStored, n))),
            _ => Err(unexpected(l)),
        },
        Op::Get => {
            if l == b"END" {
                return Ok(Some((Reply::Miss, n)));
            }
            if !l.starts_with(b"VALUE ") {
                return Err(unexpected(l));
            }
            let Some(block) = value_block(l, n, buf)? else {
                return Ok(None);
            };
            let Some((end, m)) = line(&buf[block..]) else {
                return Ok(None);
            };
            if end != b"END" {
                return Err(unexpected(end));
            }
            Ok(Some((Reply::Hit, block + m)))
        }
    }
}

/// Parses the reply to one multi-key get: the number of `VALUE` blocks before `END`, and
/// the bytes taken, or `Ok(None)` if incomplete.
pub fn parse_multi_get(buf: &[u8]) -> Result<Option<(u64, usize)>, BenchError> {
    let mut pos = 0;
    let mut hits = 0;
    loop {
        let Some((l, n)) = line(&buf[pos..]) else {
            return Ok(None);
        };
        if l == b"END" {
            return Ok(Some((hits, pos + n)));
        }
        if is_error_line(l) {
            return Err(unexpected(l));
        }
        if !l.starts_with(b"VALUE ") {
            return Err(unexpected(l));
        }
        match value_block(l, n, &buf[pos..])? {
            Some(b) => {
                pos += b;
                hits += 1;
            }
            None => return Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_zero_padded() {
        let mut b = Vec::new();
        push_key(&mut b, b"key:", 42, 8);
        assert_eq!(b, b"key:00000042");
        assert_eq!(b.len(), 12);
        b.clear();
        push_key(&mut b, b"k", 123456789, 3);
        assert_eq!(b, b"k123456789");
        b.clear();
        push_key(&mut b, b"", 0, 0);
        assert_eq!(b, b"0");
    }

    #[test]
    fn encodes_requests() {
        let mut b = Vec::new();
        encode_get(&mut b, b"key:", 7, 8);
        assert_eq!(b, b"get key:00000007\r\n");
        b.clear();
        encode_set(&mut b, b"key:", 7, 8, b"hello");
        assert_eq!(b, b"set key:00000007 0 0 5\r\nhello\r\n");
        b.clear();
        encode_multi_get(&mut b, b"k", 1..4, 2);
        assert_eq!(b, b"get k01 k02 k03\r\n");
    }

    #[test]
    fn parses_set_replies() {
        assert_eq!(
            parse_reply(b"STORED\r\nEND", Op::Set).unwrap(),
            Some((Reply::Stored, 8))
        );
        assert_eq!(
            parse_reply(b"NOT_STORED\r\n", Op::Set).unwrap(),
            Some((Reply::NotStored, 12))
        );
        assert_eq!(
            parse_reply(b"SERVER_ERROR out of memory storing object\r\n", Op::Set).unwrap(),
            Some((Reply::Error, 43))
        );
        assert_eq!(parse_reply(b"STOR", Op::Set).unwrap(), None);
        assert!(parse_reply(b"VALUE x 0 1\r\n", Op::Set).is_err());
    }

    #[test]
    fn parses_get_replies() {
        assert_eq!(
            parse_reply(b"END\r\n", Op::Get).unwrap(),
            Some((Reply::Miss, 5))
        );
        let hit = b"VALUE key:00000001 0 5\r\nhello\r\nEND\r\n";
        assert_eq!(
            parse_reply(hit, Op::Get).unwrap(),
            Some((Reply::Hit, hit.len()))
        );
        // With a CAS unique, and data containing the protocol's own words.
        let hit = b"VALUE k 3 7 99\r\nEND\r\n\r\n\r\nEND\r\nSTORED\r\n";
        assert_eq!(parse_reply(hit, Op::Get).unwrap(), Some((Reply::Hit, 30)));
        assert_eq!(
            parse_reply(b"ERROR\r\n", Op::Get).unwrap(),
            Some((Reply::Error, 7))
        );
    }

    #[test]
    fn incomplete_get_replies_wait_at_every_split() {
        let hit = b"VALUE key 0 5\r\nhello\r\nEND\r\n";
        for cut in 0..hit.len() {
            assert_eq!(
                parse_reply(&hit[..cut], Op::Get).unwrap(),
                None,
                "cut {cut}"
            );
        }
    }

    #[test]
    fn rejects_malformed_get_replies() {
        assert!(parse_reply(b"STORED\r\n", Op::Get).is_err());
        assert!(parse_reply(b"VALUE k 0 x\r\n", Op::Get).is_err());
        assert!(parse_reply(b"VALUE k 0\r\n", Op::Get).is_err());
        assert!(parse_reply(b"VALUE k 0 2\r\nabcd\r\nEND\r\n", Op::Get).is_err());
        assert!(parse_reply(b"VALUE k 0 2\r\nab\r\nEND2\r\n", Op::Get).is_err());
        assert!(parse_reply(b"VALUE k 0 18446744073709551615\r\n", Op::Get).is_err());
    }

    #[test]
    fn parses_multi_get() {
        let r = b"VALUE a 0 1\r\nx\r\nVALUE c 0 2\r\nyz\r\nEND\r\nEND\r\n";
        assert_eq!(parse_multi_get(r).unwrap(), Some((2, r.len() - 5)));
        assert_eq!(parse_multi_get(b"END\r\n").unwrap(), Some((0, 5)));
        for cut in 0..r.len() - 5 {
            assert_eq!(parse_multi_get(&r[..cut]).unwrap(), None, "cut {cut}");
        }
        assert!(parse_multi_get(b"SERVER_ERROR x\r\n").is_err());
    }
}
