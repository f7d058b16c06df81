//! Replies in a form two servers can be compared in: the same bytes, except what must
//! differ between two correct servers.
//!
//! - **CAS uniques.** memcached counts them, shoald derives them from where an item is
//!   stored (documented in docs/protocol-deviations.md). What a client can rely on is
//!   which change a CAS unique marks, so each server's values are numbered in the order
//!   that server first showed them ([`CasBook`]): two servers agree when their `n`-th new
//!   CAS unique appears at the same place. 0 (no CAS) stays 0.
//! - **Times.** A TTL (`t`, `me`'s `exp=`) is read from each server's own clock, whose
//!   seconds tick at different moments, so times may differ by [`TIME_SLACK`] seconds.
//!   The time since last access (`l`, `me`'s `la=`) is masked: memcached updates it only
//!   on some fetches, depending on its LRU segments (documented). A meta `W` flag may
//!   differ where the two replies' times do: `R<ttl>` wins the recache when the TTL left
//!   is under the token, and a TTL set a moment ago has dropped below it on the server
//!   whose clock ticked in between.
//! - **Server identity.** `VERSION` text, and `me`'s `cls=` and `size=` (slab class and
//!   item size: shoald has one class and its own item layout, both documented).
//!
//! Text replies are walked line by line; a `VALUE` or `VA` line's data block is kept as
//! bytes without being read as lines. Binary replies are walked packet by packet and shown
//! one bracketed line per packet.

use super::escape::{escape_part, unescape_one};

/// Which CAS unique a hole stands for, resolved per server from the CAS uniques that
/// server showed for the key ([`CasBook`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CasRef {
    /// The last CAS unique shown for the key.
    Latest(Vec<u8>),
    /// The one shown before the last (a stale token).
    Previous(Vec<u8>),
}

use std::collections::HashMap;
use std::fmt::Write as _;

/// How far apart two servers' times may be, in seconds.
pub const TIME_SLACK: i64 = 2;

/// How a reply ended, when it did not end with the sentinel's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The server closed the connection.
    Closed,
    /// No sentinel reply in time: the server is waiting for more bytes (or is stuck).
    Stuck,
}

/// One token of a canonical reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    /// Bytes that must be equal.
    Bytes(Vec<u8>),
    /// The server's `n`-th distinct CAS unique.
    Cas(u32),
    /// Seconds, equal within [`TIME_SLACK`].
    Time(i64),
    /// Something that may differ freely (a version string, an item size).
    Masked,
    /// The reply ended without the sentinel.
    End(End),
}

/// A reply in canonical form.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Reply {
    toks: Vec<Tok>,
}

impl Reply {
    fn push_bytes(&mut self, b: &[u8]) {
        if b.is_empty() {
            return;
        }
        if let Some(Tok::Bytes(last)) = self.toks.last_mut() {
            last.extend_from_slice(b);
        } else {
            self.toks.push(Tok::Bytes(b.to_vec()));
        }
    }

    fn push(&mut self, t: Tok) {
        match t {
            Tok::Bytes(b) => self.push_bytes(&b),
            t => self.toks.push(t),
        }
    }

    /// Marks the reply as ended without its sentinel.
    pub fn end(&mut self, end: End) {
        self.toks.push(Tok::End(end));
    }

    /// The tokens.
    pub fn toks(&self) -> &[Tok] {
        &self.toks
    }

    /// Whether the reply ended without its sentinel.
    pub fn ended(&self) -> Option<End> {
        match self.toks.last() {
            Some(Tok::End(e)) => Some(*e),
            _ => None,
        }
    }

    /// Whether two replies match: equal token by token, times within [`TIME_SLACK`]; and
    /// where their times differ, equal but for a meta `W` flag (see the module docs).
    pub fn matches(&self, other: &Reply) -> bool {
        self.matches_exactly(other)
            || (self.times_differ(other)
                && self.without_win().matches_exactly(&other.without_win()))
    }

    /// Whether some time differs between the two (both list their times in order).
    fn times_differ(&self, other: &Reply) -> bool {
        let times = |r: &Reply| -> Vec<i64> {
            r.toks
                .iter()
                .filter_map(|t| match t {
                    Tok::Time(x) => Some(*x),
                    _ => None,
                })
                .collect()
        };
        let (a, b) = (times(self), times(other));
        a.len() == b.len() && a != b
    }

    /// The reply without meta `W` flags (` W` before a space or the line's end).
    fn without_win(&self) -> Reply {
        let mut r = Reply::default();
        for t in &self.toks {
            match t {
                Tok::Bytes(b) => {
                    let mut out = Vec::with_capacity(b.len());
                    let mut i = 0;
                    while i < b.len() {
                        let rest = &b[i..];
                        if rest.starts_with(b" W ") || rest.starts_with(b" W\r\n") {
                            i += 2;
                            continue;
                        }
                        out.push(b[i]);
                        i += 1;
                    }
                    r.push_bytes(&out);
                }
                t => r.push(t.clone()),
            }
        }
        r
    }

    fn matches_exactly(&self, other: &Reply) -> bool {
        self.toks.len() == other.toks.len()
            && self
                .toks
                .iter()
                .zip(&other.toks)
                .all(|(a, b)| match (a, b) {
                    (Tok::Time(x), Tok::Time(y)) => (x - y).abs() <= TIME_SLACK,
                    (a, b) => a == b,
                })
    }

    /// The reply as one line: bytes escaped, the rest in braces (`{cas 3}`, `{t 59}`,
    /// `{masked}`, `{closed}`, `{stuck}`).
    pub fn render(&self) -> String {
        let mut s = String::new();
        for (i, t) in self.toks.iter().enumerate() {
            match t {
                Tok::Bytes(b) => s.push_str(&escape_part(b, i + 1 == self.toks.len())),
                Tok::Cas(n) => {
                    let _ = write!(s, "{{cas {n}}}");
                }
                Tok::Time(t) => {
                    let _ = write!(s, "{{t {t}}}");
                }
                Tok::Masked => s.push_str("{masked}"),
                Tok::End(End::Closed) => s.push_str("{closed}"),
                Tok::End(End::Stuck) => s.push_str("{stuck}"),
            }
        }
        s
    }

    /// Parses [`Reply::render`]'s form.
    pub fn parse(s: &str) -> Result<Reply, String> {
        let mut r = Reply::default();
        let mut it = s.as_bytes();
        let mut bytes = Vec::new();
        while let Some((&b, tail)) = it.split_first() {
            if b == b'{' {
                let end = tail
                    .iter()
                    .position(|&c| c == b'}')
                    .ok_or("`{` without `}`")?;
                let inner = std::str::from_utf8(&tail[..end]).map_err(|e| e.to_string())?;
                r.push_bytes(&std::mem::take(&mut bytes));
                let tok = match inner.split_once(' ') {
                    Some(("cas", n)) => Tok::Cas(n.parse().map_err(|e| format!("{inner}: {e}"))?),
                    Some(("t", n)) => Tok::Time(n.parse().map_err(|e| format!("{inner}: {e}"))?),
                    None if inner == "masked" => Tok::Masked,
                    None if inner == "closed" => Tok::End(End::Closed),
                    None if inner == "stuck" => Tok::End(End::Stuck),
                    _ => return Err(format!("unknown token {{{inner}}}")),
                };
                r.push(tok);
                it = &tail[end + 1..];
            } else {
                let used = unescape_one(it, &mut bytes)?;
                it = &it[used..];
            }
        }
        r.push_bytes(&bytes);
        Ok(r)
    }
}

/// Where no CAS unique was shown for a key yet, a hole is filled with this value, which
/// neither server can have given an item (memcached counts up from 1; shoald's are
/// derived and far from it; the generator's explicit `E` values are elsewhere).
pub const UNSEEN_CAS: u64 = 987_654_321_987;

/// One server's CAS uniques: the order it first showed each (the canonical numbers), and
/// the last two it showed for each key (to fill the holes of later commands).
#[derive(Debug, Default)]
pub struct CasBook {
    ids: HashMap<u64, u32>,
    per_key: HashMap<Vec<u8>, (u64, Option<u64>)>,
}

impl CasBook {
    /// The canonical token for `cas`, shown for `key` (when known).
    fn see(&mut self, key: Option<&[u8]>, cas: u64) -> Tok {
        if cas == 0 {
            return Tok::Bytes(b"0".to_vec());
        }
        let next = u32::try_from(self.ids.len()).unwrap_or(u32::MAX);
        let id = *self.ids.entry(cas).or_insert(next);
        if let Some(k) = key {
            match self.per_key.get_mut(k) {
                Some((latest, _)) if *latest == cas => {}
                Some(slot) => *slot = (cas, Some(slot.0)),
                None => {
                    self.per_key.insert(k.to_vec(), (cas, None));
                }
            }
        }
        Tok::Cas(id)
    }

    /// The value this server's CAS hole stands for ([`UNSEEN_CAS`] if it showed none).
    pub fn resolve(&self, r: &CasRef) -> u64 {
        match r {
            CasRef::Latest(k) => self.per_key.get(k).map(|e| e.0),
            CasRef::Previous(k) => self.per_key.get(k).and_then(|e| e.1),
        }
        .unwrap_or(UNSEEN_CAS)
    }

    /// Forgets everything (after both servers were flushed).
    pub fn clear(&mut self) {
        self.ids.clear();
        self.per_key.clear();
    }
}

fn digits(b: &[u8]) -> Option<u64> {
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// The canonical form of a text reply. `key` is the item the command addressed, for meta
/// replies' `c` flags; `VALUE` lines name their own key.
pub fn text(raw: &[u8], key: Option<&[u8]>, book: &mut CasBook) -> Reply {
    let mut r = Reply::default();
    let mut pos = 0;
    while pos < raw.len() {
        let Some(nl) = raw[pos..].iter().position(|&b| b == b'\n') else {
            r.push_bytes(&raw[pos..]);
            break;
        };
        let line_end = pos + nl + 1;
        let line = &raw[pos..line_end];
        let body = line
            .strip_suffix(b"\r\n")
            .or_else(|| line.strip_suffix(b"\n"))
            .unwrap_or(line);
        let toks: Vec<&[u8]> = body.split(|&b| b == b' ').collect();
        let data_len = match toks.first().copied() {
            Some(b"VALUE") if toks.len() >= 4 => {
                for (i, t) in toks.iter().enumerate() {
                    if i > 0 {
                        r.push_bytes(b" ");
                    }
                    if i == 4 {
                        match digits(t) {
                            Some(c) => r.push(book.see(toks.get(1).copied(), c)),
                            None => r.push_bytes(t),
                        }
                    } else {
                        r.push_bytes(t);
                    }
                }
                digits(toks[3])
            }
            Some(b"VA") if toks.len() >= 2 => {
                r.push_bytes(b"VA ");
                r.push_bytes(toks[1]);
                meta_flags(&mut r, &toks[2..], key, book);
                digits(toks[1])
            }
            Some(b"VERSION") => {
                r.push_bytes(b"VERSION ");
                r.push(Tok::Masked);
                None
            }
            Some(b"ME") if toks.len() >= 3 => {
                me_line(&mut r, &toks, key, book);
                None
            }
            Some(code) if code.len() == 2 && code.iter().all(u8::is_ascii_uppercase) => {
                r.push_bytes(code);
                meta_flags(&mut r, &toks[1..], key, book);
                None
            }
            _ => {
                r.push_bytes(body);
                None
            }
        };
        r.push_bytes(&line[body.len()..]);
        pos = line_end;
        if let Some(n) = data_len.and_then(|n| usize::try_from(n).ok()) {
            let end = (pos + n + 2).min(raw.len());
            r.push_bytes(&raw[pos..end]);
            pos = end;
        }
    }
    r
}

/// A meta reply's flags after its code: `c` (CAS), `t` and `l` (times) canonical.
fn meta_flags(r: &mut Reply, toks: &[&[u8]], key: Option<&[u8]>, book: &mut CasBook) {
    for t in toks {
        r.push_bytes(b" ");
        match t.split_first() {
            Some((b'c', n)) if digits(n).is_some() => {
                r.push_bytes(b"c");
                r.push(book.see(key, digits(n).unwrap_or(0)));
            }
            Some((b't', n)) if digits(n).is_some() => {
                r.push_bytes(b"t");
                r.push(Tok::Time(
                    digits(n).map_or(0, |v| i64::try_from(v).unwrap_or(i64::MAX)),
                ));
            }
            Some((b'l', n)) if digits(n).is_some() => {
                r.push_bytes(b"l");
                r.push(Tok::Masked);
            }
            _ => r.push_bytes(t),
        }
    }
}

/// `ME <key> exp=<t> la=<t> cas=<cas> fetch=<yes|no> cls=<n> size=<n>`.
fn me_line(r: &mut Reply, toks: &[&[u8]], key: Option<&[u8]>, book: &mut CasBook) {
    r.push_bytes(b"ME ");
    r.push_bytes(toks[1]);
    for t in &toks[2..] {
        r.push_bytes(b" ");
        let (name, value) = match t.iter().position(|&b| b == b'=') {
            Some(i) => (&t[..=i], &t[i + 1..]),
            None => (&t[..], &b""[..]),
        };
        match name {
            // The last access time is masked: memcached moves it only on some fetches
            // (the second one, while the item sits in certain LRU segments, which a
            // background thread moves it between); shoald on every fetch (documented).
            b"la=" => {
                r.push_bytes(name);
                r.push(Tok::Masked);
            }
            b"exp=" => {
                r.push_bytes(name);
                match std::str::from_utf8(value)
                    .ok()
                    .and_then(|v| v.parse::<i64>().ok())
                {
                    // -1 (no expiry) is exact; anything else is a clock reading.
                    Some(v) if v != -1 => r.push(Tok::Time(v)),
                    _ => r.push_bytes(value),
                }
            }
            b"cas=" => {
                r.push_bytes(name);
                match digits(value) {
                    Some(c) => r.push(book.see(key, c)),
                    None => r.push_bytes(value),
                }
            }
            b"cls=" | b"size=" => {
                r.push_bytes(name);
                r.push(Tok::Masked);
            }
            _ => r.push_bytes(t),
        }
    }
}

/// Binary opcodes whose response body is a version string.
const OP_VERSION: u8 = 0x0b;

/// The canonical form of binary response packets, one bracketed line each:
/// `[op=.. st=.... opq=........ cas=.. dt=.. ext=<hex> key=<escaped> val=<escaped>]`.
/// Bytes that do not form a response packet are kept as they are.
pub fn binary(raw: &[u8], key: Option<&[u8]>, book: &mut CasBook) -> Reply {
    let mut r = Reply::default();
    let mut pos = 0;
    while pos < raw.len() {
        let rest = &raw[pos..];
        let Some(h) = rest.get(..24) else {
            r.push_bytes(rest);
            break;
        };
        let keylen = usize::from(u16::from_be_bytes([h[2], h[3]]));
        let extlen = usize::from(h[4]);
        let bodylen = u32::from_be_bytes([h[8], h[9], h[10], h[11]]) as usize;
        let Some(body) = rest.get(24..24 + bodylen) else {
            r.push_bytes(rest);
            break;
        };
        let ext = body.get(..extlen).unwrap_or(body);
        let pkey = body.get(extlen..extlen + keylen).unwrap_or(&[]);
        let val = body.get((extlen + keylen).min(body.len())..).unwrap_or(&[]);
        let cas = u64::from_be_bytes([h[16], h[17], h[18], h[19], h[20], h[21], h[22], h[23]]);
        let mut head = String::new();
        let _ = write!(
            head,
            "[{:02x} op={:02x} st={:02x}{:02x} opq={:02x}{:02x}{:02x}{:02x} dt={:02x} cas=",
            h[0], h[1], h[6], h[7], h[12], h[13], h[14], h[15], h[5]
        );
        r.push_bytes(head.as_bytes());
        let owner = if pkey.is_empty() { key } else { Some(pkey) };
        r.push(book.see(owner, cas));
        r.push_bytes(format!(" ext={} key=", super::escape::hex(ext)).as_bytes());
        r.push_bytes(pkey);
        r.push_bytes(b" val=");
        if h[1] == OP_VERSION && h[6] == 0 && h[7] == 0 {
            r.push(Tok::Masked);
        } else {
            r.push_bytes(val);
        }
        r.push_bytes(b"]\n");
        pos += 24 + bodylen;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cas_uniques_are_numbered_by_first_appearance() {
        let mut a = CasBook::default();
        let mut b = CasBook::default();
        let ra = text(
            b"VALUE k 0 1 77\r\nx\r\nEND\r\nHD c77 t10\r\n",
            Some(b"k"),
            &mut a,
        );
        let rb = text(
            b"VALUE k 0 1 9000\r\nx\r\nEND\r\nHD c9000 t11\r\n",
            Some(b"k"),
            &mut b,
        );
        assert!(ra.matches(&rb), "{} vs {}", ra.render(), rb.render());
        assert_eq!(a.resolve(&CasRef::Latest(b"k".to_vec())), 77);
        assert_eq!(b.resolve(&CasRef::Latest(b"k".to_vec())), 9000);
        assert_eq!(a.resolve(&CasRef::Previous(b"k".to_vec())), UNSEEN_CAS);
        // A new CAS for the same key: Previous is the old one.
        text(b"HD c78\r\n", Some(b"k"), &mut a);
        assert_eq!(a.resolve(&CasRef::Previous(b"k".to_vec())), 77);
        // A CAS shown twice is one change, not two.
        let ra = text(b"HD c78\r\nHD c77\r\n", Some(b"k"), &mut a);
        let rb = text(b"HD c9001\r\nHD c9000\r\n", Some(b"k"), &mut b);
        assert!(ra.matches(&rb));
        let rb = text(b"HD c9001\r\nHD c9001\r\n", Some(b"k"), &mut b);
        assert!(!ra.matches(&rb));
    }

    #[test]
    fn data_blocks_are_not_read_as_lines() {
        let mut book = CasBook::default();
        let r = text(b"VA 7 c5\r\nHD c6 \r\n\r\n", Some(b"k"), &mut book);
        assert_eq!(r.render(), "VA 7 c{cas 0}\\r\\nHD c6 \\r\\n\\r\\n");
    }

    #[test]
    fn times_match_within_the_slack() {
        let mut book = CasBook::default();
        let a = text(b"HD t100 l0\r\n", None, &mut book);
        let b = text(b"HD t99 l20\r\n", None, &mut book);
        let c = text(b"HD t96 l0\r\n", None, &mut book);
        assert!(a.matches(&b));
        assert!(!a.matches(&c));
        let d = text(b"HD t-1\r\n", None, &mut book);
        assert_eq!(d.render(), "HD t-1\\r\\n");
    }

    #[test]
    fn a_recache_win_may_differ_only_where_the_times_do() {
        let mut book = CasBook::default();
        let won = text(b"HD t3599 W\r\n", None, &mut book);
        let not_yet = text(b"HD t3600\r\n", None, &mut book);
        let same_time = text(b"HD t3599\r\n", None, &mut book);
        assert!(won.matches(&not_yet), "the clocks ticked apart");
        assert!(
            !won.matches(&same_time),
            "same TTL, different win: a real difference"
        );
        let other = text(b"HD t3600 X\r\n", None, &mut book);
        assert!(!won.matches(&other), "only W is forgiven");
    }

    #[test]
    fn me_version_and_binary_are_masked_where_servers_differ() {
        let mut book = CasBook::default();
        let r = text(
            b"ME k exp=-1 la=3 cas=12 fetch=no cls=1 size=70\r\nVERSION 1.6.45\r\n",
            Some(b"k"),
            &mut book,
        );
        assert_eq!(
            r.render(),
            "ME k exp=-1 la={masked} cas={cas 0} fetch=no cls={masked} size={masked}\\r\\n\
             VERSION {masked}\\r\\n"
        );
        let mut pkt = vec![0x81, 0x00, 0, 1, 4, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 9];
        pkt.extend_from_slice(&55u64.to_be_bytes());
        pkt.extend_from_slice(&[0, 0, 0, 5, b'k', b'v']);
        let r = binary(&pkt, None, &mut book);
        assert_eq!(
            r.render(),
            "[81 op=00 st=0000 opq=00000009 dt=00 cas={cas 1} ext=00000005 key=k val=v]\\n"
        );
        assert_eq!(book.resolve(&CasRef::Latest(b"k".to_vec())), 55);
    }

    #[test]
    fn render_parse_round_trip() {
        let mut book = CasBook::default();
        let mut r = text(
            b"VA 1 c5 t3 {x}\r\n\\\r\nVERSION 1\r\n",
            Some(b"k"),
            &mut book,
        );
        r.end(End::Stuck);
        assert_eq!(Reply::parse(&r.render()), Ok(r.clone()));
        assert_eq!(r.ended(), Some(End::Stuck));
    }
}
