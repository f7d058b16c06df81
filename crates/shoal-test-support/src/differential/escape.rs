//! How case files write bytes: escaping for command and reply text, and hex for keys.
//! Its own module because both the case format ([`super::case`]) and the canonical
//! replies ([`super::canon`]) write bytes this way.

use std::fmt::Write as _;

/// Bytes as a case file writes them: printable ASCII as is (but `\` and `{`, which are
/// escaped, and a final space, so an editor cannot lose it), `\r`, `\n`, `\t`, and
/// `\xNN` for everything else.
pub fn escape(b: &[u8]) -> String {
    escape_part(b, true)
}

/// [`escape`] for a part of a line: `last` says whether nothing follows it, so a final
/// space needs protecting.
pub(crate) fn escape_part(b: &[u8], last: bool) -> String {
    let mut s = String::with_capacity(b.len());
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'\\' => s.push_str("\\\\"),
            b'{' => s.push_str("\\{"),
            b'\r' => s.push_str("\\r"),
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            b' ' if last && i + 1 == b.len() => s.push_str("\\x20"),
            0x20..=0x7e => s.push(char::from(c)),
            _ => {
                let _ = write!(s, "\\x{c:02x}");
            }
        }
    }
    s
}

/// Decodes one escaped byte (or a plain character) from the front of `s` into `out`,
/// returning how many input bytes it used.
pub(crate) fn unescape_one(s: &[u8], out: &mut Vec<u8>) -> Result<usize, String> {
    match s {
        [b'\\', b'\\', ..] => out.push(b'\\'),
        [b'\\', b'{', ..] => out.push(b'{'),
        [b'\\', b'r', ..] => out.push(b'\r'),
        [b'\\', b'n', ..] => out.push(b'\n'),
        [b'\\', b't', ..] => out.push(b'\t'),
        [b'\\', b'x', h, l, ..] => {
            let hexpair = [*h, *l];
            let text = std::str::from_utf8(&hexpair).map_err(|e| e.to_string())?;
            out.push(u8::from_str_radix(text, 16).map_err(|e| format!("\\x{text}: {e}"))?);
            return Ok(4);
        }
        [b'\\', ..] => return Err(format!("bad escape in {:?}", String::from_utf8_lossy(s))),
        [c, ..] => {
            out.push(*c);
            return Ok(1);
        }
        [] => return Ok(0),
    }
    Ok(2)
}

/// Lowercase hex.
pub fn hex(b: &[u8]) -> String {
    b.iter().fold(String::new(), |mut s, c| {
        let _ = write!(s, "{c:02x}");
        s
    })
}
