//! memcached meta protocol (`mg`/`ms`): encoding requests and parsing replies. No I/O.

use crate::text::Reply;
use crate::BenchError;

/// Appends `mg <key> v\r\n`.
pub fn encode_get(buf: &mut Vec<u8>, key: &[u8]) {
    buf.extend_from_slice(b"mg ");
    buf.extend_from_slice(key);
    buf.extend_from_slice(b" v\r\n");
}

/// Appends `ms <key> <len>\r\n<value>\r\n`.
pub fn encode_set(buf: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    buf.extend_from_slice(b"ms ");
    buf.extend_from_slice(key);
    buf.push(b' ');
    buf.extend_from_slice(value.len().to_string().as_bytes());
    buf.extend_from_slice(b"\r\n");
    buf.extend_from_slice(value);
    buf.extend_from_slice(b"\r\n");
}

/// Appends `ma <key> MD\r\n` (decrement by one, no value returned).
pub fn encode_decr(buf: &mut Vec<u8>, key: &[u8]) {
    buf.extend_from_slice(b"ma ");
    buf.extend_from_slice(key);
    buf.extend_from_slice(b" MD\r\n");
}

fn line(buf: &[u8]) -> Option<(&[u8], usize)> {
    let nl = memchr_nl(buf)?;
    let end = if nl > 0 && buf[nl - 1] == b'\r' {
        nl - 1
    } else {
        nl
    };
    Some((&buf[..end], nl + 1))
}

fn memchr_nl(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b == b'\n')
}

fn unexpected(l: &[u8]) -> BenchError {
    BenchError::Protocol(String::from_utf8_lossy(&l[..l.len().min(80)]).into_owned())
}

/// Parses one meta reply at the start of `buf`: `VA <n> ...` + data (hit), `EN` (miss),
/// `HD` (stored / done), `NS`/`EX`/`NF` (not stored), or an error line.
pub fn parse_reply(buf: &[u8]) -> Result<Option<(Reply, usize)>, BenchError> {
    let Some((l, n)) = line(buf) else {
        return Ok(None);
    };
    if l == b"ERROR" || l.starts_with(b"CLIENT_ERROR") || l.starts_with(b"SERVER_ERROR") {
        return Ok(Some((Reply::Error, n)));
    }
    match l.get(..2) {
        Some(b"HD") => Ok(Some((Reply::Stored, n))),
        Some(b"EN") => Ok(Some((Reply::Miss, n))),
        Some(b"NS") | Some(b"EX") | Some(b"NF") => Ok(Some((Reply::NotStored, n))),
        Some(b"VA") => {
            let len = l
                .split(|&b| b == b' ')
                .nth(1)
                .and_then(|t| std::str::from_utf8(t).ok())
                .and_then(|t| t.parse::<usize>().ok())
                .ok_or_else(|| unexpected(l))?;
            let need = n
                .checked_add(len)
                .and_then(|x| x.checked_add(2))
                .ok_or_else(|| unexpected(l))?;
            if buf.len() < need {
                return Ok(None);
            }
            if &buf[need - 2..need] != b"\r\n" {
                return Err(unexpected(l));
            }
            Ok(Some((Reply::Hit, need)))
        }
        _ => Err(unexpected(l)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes() {
        let mut b = Vec::new();
        encode_get(&mut b, b"k1");
        encode_set(&mut b, b"k1", b"abc");
        encode_decr(&mut b, b"c");
        assert_eq!(b, b"mg k1 v\r\nms k1 3\r\nabc\r\nma c MD\r\n");
    }

    #[test]
    fn parses() {
        assert_eq!(parse_reply(b"HD\r\n").unwrap(), Some((Reply::Stored, 4)));
        assert_eq!(parse_reply(b"EN\r\n").unwrap(), Some((Reply::Miss, 4)));
        assert_eq!(parse_reply(b"NS\r\n").unwrap(), Some((Reply::NotStored, 4)));
        let hit = b"VA 3 f0\r\nabc\r\n";
        assert_eq!(parse_reply(hit).unwrap(), Some((Reply::Hit, hit.len())));
        for cut in 0..hit.len() {
            assert_eq!(parse_reply(&hit[..cut]).unwrap(), None);
        }
        assert_eq!(
            parse_reply(b"SERVER_ERROR x\r\n").unwrap(),
            Some((Reply::Error, 16))
        );
        assert!(parse_reply(b"VA x\r\n").is_err());
        assert!(parse_reply(b"VA 1\r\nab\r\n").is_err());
        assert!(parse_reply(b"WAT\r\n").is_err());
    }
}
