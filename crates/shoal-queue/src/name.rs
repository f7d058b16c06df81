//! Queue names, which are also directory names, so they are validated strictly.

/// Longest queue name, in bytes.
pub const MAX_NAME_LEN: usize = 128;

/// Whether `name` is a valid queue name: 1..=128 bytes of printable ASCII with no `/`,
/// `\`, space, or leading `.`, and no `..`. Guarantees a valid name is a single, plain
/// path component that cannot escape the data directory or name a hidden file.
pub fn validate_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name[0] != b'.'
        && name
            .iter()
            .all(|&b| b.is_ascii_graphic() && b != b'/' && b != b'\\')
        && !name.windows(2).any(|w| w == b"..")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in [&b"jobs"[..], b"a", b"q-1_x.y:z", &[b'x'; 128]] {
            assert!(validate_name(ok), "{ok:?}");
        }
        for bad in [
            &b""[..],
            b".",
            b"..",
            b".hidden",
            b"a/b",
            b"a\\b",
            b"a..b",
            b"a b",
            b"a\0b",
            b"a\x01",
            b"\xc3\xa9",
            &[b'x'; 129],
        ] {
            assert!(!validate_name(bad), "{bad:?}");
        }
    }
}
