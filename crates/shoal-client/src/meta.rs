//! The meta protocol (`mg`, `ms`, `md`, `ma`): requests built from a key and flag tokens,
//! replies parsed into [`MetaReply`].

use bytes::Bytes;

use crate::error::ClientError;
use crate::value::line;

/// A meta reply: its two-letter code, its flag tokens, and (for `VA`) its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaReply {
    /// `VA`, `HD`, `EN`, `NF`, `NS` or `EX`.
    pub code: [u8; 2],
    /// The returned flags, e.g. `["v", "c123", "t-1"]` (for `VA`, after the size).
    pub flags: Vec<String>,
    /// The value, for `VA` replies.
    pub data: Option<Bytes>,
}

impl MetaReply {
    /// The token of return flag `flag` (`c` → the CAS value as text), if present.
    pub fn flag(&self, flag: char) -> Option<&str> {
        self.flags
            .iter()
            .find(|t| t.starts_with(flag))
            .map(|t| &t[flag.len_utf8()..])
    }

    /// Whether the command hit/stored (`VA` or `HD`).
    pub fn is_ok(&self) -> bool {
        &self.code == b"VA" || &self.code == b"HD"
    }
}

/// Checks flag tokens: space-separated, printable, no line breaks.
pub fn check_flags(flags: &str) -> Result<(), ClientError> {
    if flags.bytes().any(|b| b < b' ' || b == 0x7f) {
        Err(ClientError::Config(format!("bad meta flags {flags:?}")))
    } else {
        Ok(())
    }
}

/// Builds `cmd key [datalen] flags\r\n[data\r\n]`.
pub fn request(cmd: &str, key: &[u8], flags: &str, data: Option<&[u8]>) -> Vec<u8> {
    let mut req = Vec::with_capacity(key.len() + flags.len() + 24);
    req.extend_from_slice(cmd.as_bytes());
    req.push(b' ');
    req.extend_from_slice(key);
    if let Some(d) = data {
        req.extend_from_slice(format!(" {}", d.len()).as_bytes());
    }
    if !flags.is_empty() {
        req.push(b' ');
        req.extend_from_slice(flags.as_bytes());
    }
    req.extend_from_slice(b"\r\n");
    if let Some(d) = data {
        req.extend_from_slice(d);
        req.extend_from_slice(b"\r\n");
    }
    req
}

/// Parses one framed meta reply.
pub fn parse(reply: &Bytes) -> Result<MetaReply, ClientError> {
    let nl = memchr::memchr(b'\n', reply).unwrap_or(reply.len());
    let head = line(&reply[..(nl + 1).min(reply.len())])?;
    let text = String::from_utf8_lossy(head).into_owned();
    let mut toks = text.split(' ').filter(|t| !t.is_empty());
    let code_tok = toks.next().unwrap_or_default();
    let code: [u8; 2] = code_tok
        .as_bytes()
        .try_into()
        .map_err(|_| ClientError::Unexpected(text.clone()))?;
    let mut data = None;
    if &code == b"VA" {
        let len: usize = toks
            .next()
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| ClientError::Unexpected(text.clone()))?;
        let start = nl + 1;
        if start + len + 2 > reply.len() {
            return Err(ClientError::Unexpected(text));
        }
        data = Some(reply.slice(start..start + len));
    }
    Ok(MetaReply {
        code,
        flags: toks.map(str::to_string).collect(),
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_and_parses() {
        assert_eq!(request("mg", b"k", "v c", None), b"mg k v c\r\n");
        assert_eq!(
            request("ms", b"k", "T0", Some(b"xy")),
            b"ms k 2 T0\r\nxy\r\n"
        );
        let r = parse(&Bytes::from_static(b"VA 2 c42 f3\r\nhi\r\n")).unwrap();
        assert_eq!(&r.code, b"VA");
        assert_eq!(r.flag('c'), Some("42"));
        assert_eq!(r.data.as_deref(), Some(&b"hi"[..]));
        let r = parse(&Bytes::from_static(b"EN\r\n")).unwrap();
        assert!(!r.is_ok());
        assert!(parse(&Bytes::from_static(b"CLIENT_ERROR bad\r\n")).is_err());
    }
}
