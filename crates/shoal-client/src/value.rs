//! Typed replies: parsing the text protocol's retrieval replies into values.

use bytes::Bytes;

use crate::error::ClientError;

/// One item as returned by `get`/`gets`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Value {
    /// The key.
    pub key: Bytes,
    /// The item's client flags.
    pub flags: u32,
    /// The CAS unique (only from `gets`).
    pub cas: Option<u64>,
    /// The data.
    pub data: Bytes,
}

fn error_line(line: &[u8]) -> Option<ClientError> {
    if line == b"ERROR"
        || line.starts_with(b"CLIENT_ERROR")
        || line.starts_with(b"SERVER_ERROR")
        || line.starts_with(b"ERROR ")
    {
        Some(ClientError::Server(
            String::from_utf8_lossy(line).into_owned(),
        ))
    } else {
        None
    }
}

fn num<T: std::str::FromStr>(tok: Option<&[u8]>, reply: &[u8]) -> Result<T, ClientError> {
    tok.and_then(|t| std::str::from_utf8(t).ok())
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| unexpected(reply))
}

fn unexpected(reply: &[u8]) -> ClientError {
    let cut = &reply[..reply.len().min(80)];
    ClientError::Unexpected(String::from_utf8_lossy(cut).into_owned())
}

/// Parses a complete retrieval reply (`VALUE ...` blocks then `END`, already framed) into
/// its values, in the order the server sent them. Data and keys share `reply`'s buffer.
pub fn parse_values(reply: &Bytes) -> Result<Vec<Value>, ClientError> {
    let mut out = Vec::new();
    let mut pos = 0;
    loop {
        let rest = reply.get(pos..).unwrap_or_default();
        let nl = memchr::memchr(b'\n', rest).ok_or_else(|| unexpected(reply))?;
        let line = &rest[..nl.saturating_sub(1)];
        if line == b"END" {
            return Ok(out);
        }
        if let Some(e) = error_line(line) {
            return Err(e);
        }
        let fields = line
            .strip_prefix(b"VALUE ")
            .ok_or_else(|| unexpected(reply))?;
        let mut toks = fields.split(|&b| b == b' ').filter(|t| !t.is_empty());
        let key = toks.next().ok_or_else(|| unexpected(reply))?;
        let flags: u32 = num(toks.next(), reply)?;
        let len: usize = num(toks.next(), reply)?;
        let cas: Option<u64> = match toks.next() {
            Some(t) => Some(num(Some(t), reply)?),
            None => None,
        };
        let key_start = pos + 6;
        let data_start = pos + nl + 1;
        let data_end = data_start + len;
        if data_end + 2 > reply.len() {
            return Err(unexpected(reply));
        }
        out.push(Value {
            key: reply.slice(key_start..key_start + key.len()),
            flags,
            cas,
            data: reply.slice(data_start..data_end),
        });
        pos = data_end + 2;
    }
}

/// The single line of a one-line reply, without `\r\n`; error lines become errors.
pub fn line(reply: &[u8]) -> Result<&[u8], ClientError> {
    let l = reply.strip_suffix(b"\r\n").unwrap_or(reply);
    match error_line(l) {
        Some(e) => Err(e),
        None => Ok(l),
    }
}

/// Checks a key as memcached would: 1..=250 bytes, no space or control byte.
pub fn check_key(key: &[u8]) -> Result<(), ClientError> {
    if key.is_empty() || key.len() > 250 || key.iter().any(|&b| b <= b' ' || b == 0x7f) {
        Err(ClientError::BadKey)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_values_and_errors() {
        let r = Bytes::from_static(b"VALUE a 5 2 9\r\nhi\r\nVALUE bb 0 0\r\n\r\nEND\r\n");
        let v = parse_values(&r).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(
            (&v[0].key[..], v[0].flags, v[0].cas),
            (&b"a"[..], 5, Some(9))
        );
        assert_eq!(&v[0].data[..], b"hi");
        assert_eq!(&v[1].data[..], b"");
        assert!(parse_values(&Bytes::from_static(b"SERVER_ERROR x\r\n")).is_err());
        assert!(parse_values(&Bytes::from_static(b"VALUE a 0 9\r\nhi\r\nEND\r\n")).is_err());
        assert!(check_key(b"ok").is_ok());
        assert!(check_key(b"no space").is_err());
        assert!(check_key(&[b'k'; 251]).is_err());
    }
}
