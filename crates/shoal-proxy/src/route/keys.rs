//! The keys of a get-family request as routes carry them, and what each key came back as.

use bytes::Bytes;

use crate::pool_request::entries;

/// How a get-family request asks for its keys.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GetSpec {
    /// `get`, `gets`, `gat` or `gats`.
    pub(crate) cmd: &'static str,
    /// `gat`/`gats`'s expiration time.
    pub(crate) exptime: Option<i64>,
}

impl GetSpec {
    /// Whether replies carry CAS tokens (`gets`, `gats`).
    pub(crate) fn with_cas(&self) -> bool {
        self.cmd == "gets" || self.cmd == "gats"
    }
}

/// A list of keys in one buffer (a route keeps them until its last stage is answered;
/// one allocation, not one per key).
#[derive(Clone, Default)]
pub(crate) struct KeyList {
    buf: Vec<u8>,
    /// End offset of each key in `buf`.
    ends: Vec<usize>,
}

impl KeyList {
    /// The keys of `keys`, in order.
    pub(crate) fn from_slices(keys: &[&[u8]]) -> KeyList {
        let mut l = KeyList {
            buf: Vec::with_capacity(keys.iter().map(|k| k.len()).sum()),
            ends: Vec::with_capacity(keys.len()),
        };
        for k in keys {
            l.push(k);
        }
        l
    }

    fn push(&mut self, key: &[u8]) {
        self.buf.extend_from_slice(key);
        self.ends.push(self.buf.len());
    }

    /// How many keys.
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Key `i` (empty if out of range).
    pub(crate) fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 {
            0
        } else {
            self.ends.get(i - 1).copied().unwrap_or(0)
        };
        let end = self.ends.get(i).copied().unwrap_or(start);
        self.buf.get(start..end).unwrap_or_default()
    }

    /// Every key, in order.
    pub(crate) fn refs(&self) -> Vec<&[u8]> {
        (0..self.len()).map(|i| self.get(i)).collect()
    }

    /// The keys at `indexes`, in that order.
    pub(crate) fn subset(&self, indexes: &[usize]) -> KeyList {
        let mut l = KeyList::default();
        for &i in indexes {
            l.push(self.get(i));
        }
        l
    }
}

/// What one key of a get-family request came back as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum KeyOutcome {
    /// The whole entry: `VALUE <key> <flags> <bytes> [<cas>]\r\n<data>\r\n`.
    Hit(Bytes),
    /// Not found.
    Miss,
    /// The request failed; the error line the client would have got.
    Error(Bytes),
}

impl KeyOutcome {
    pub(crate) fn is_hit(&self) -> bool {
        matches!(self, KeyOutcome::Hit(_))
    }
}

/// The outcome of each of `keys` from a retrieval reply to a request for exactly those
/// keys: the reply's entries come in key order with misses left out (duplicates
/// included), so walking both in step matches them. A reply that is not `VALUE`s and
/// `END` (an error line) is every key's error.
pub(crate) fn outcomes(reply: Bytes, keys: &KeyList) -> Vec<KeyOutcome> {
    if !(reply.starts_with(b"VALUE ") || reply.starts_with(b"END")) {
        return vec![KeyOutcome::Error(reply); keys.len()];
    }
    let found: Vec<_> = entries(&reply).collect();
    let mut next = 0;
    let mut out = Vec::with_capacity(keys.len());
    for i in 0..keys.len() {
        match found.get(next) {
            Some(e) if reply.get(e.key.0..e.key.1) == Some(keys.get(i)) => {
                out.push(KeyOutcome::Hit(reply.slice(e.all.0..e.all.1)));
                next += 1;
            }
            _ => out.push(KeyOutcome::Miss),
        }
    }
    out
}

/// The flags and data of an entry (`VALUE <key> <flags> <bytes> [<cas>]\r\n<data>\r\n`).
pub(crate) fn flags_and_data(entry: &[u8]) -> Option<(&[u8], &[u8])> {
    let nl = memchr::memchr(b'\n', entry)?;
    let line = entry.get(..nl.checked_sub(1)?)?;
    let mut toks = line.split(|&b| b == b' ');
    let _value = toks.next()?;
    let _key = toks.next()?;
    let flags = toks.next()?;
    let len: usize = std::str::from_utf8(toks.next()?).ok()?.parse().ok()?;
    let data = entry.get(nl + 1..nl + 1 + len)?;
    Some((flags, data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_follow_key_order_with_misses_and_duplicates() {
        let keys = KeyList::from_slices(&[b"a", b"b", b"a", b"c"]);
        let reply = Bytes::from_static(b"VALUE a 1 2\r\nxy\r\nVALUE a 1 2\r\nxy\r\nEND\r\n");
        let o = outcomes(reply, &keys);
        assert_eq!(
            o[0],
            KeyOutcome::Hit(Bytes::from_static(b"VALUE a 1 2\r\nxy\r\n"))
        );
        assert_eq!(o[1], KeyOutcome::Miss);
        assert!(o[2].is_hit());
        assert_eq!(o[3], KeyOutcome::Miss);
        let err = Bytes::from_static(b"SERVER_ERROR Connection refused\r\n");
        assert_eq!(
            outcomes(err.clone(), &keys),
            vec![KeyOutcome::Error(err); 4]
        );
        assert_eq!(keys.subset(&[3, 0]).refs(), vec![&b"c"[..], &b"a"[..]]);
        assert_eq!(keys.get(9), b"");
    }

    #[test]
    fn entry_flags_and_data() {
        assert_eq!(
            flags_and_data(b"VALUE k 42 3 77\r\nabc\r\n"),
            Some((&b"42"[..], &b"abc"[..]))
        );
        assert_eq!(flags_and_data(b"VALUE k 42 30\r\nabc\r\n"), None);
        assert_eq!(flags_and_data(b"garbage"), None);
    }
}
