//! The command generator: random text, meta and binary commands over a few keys, every
//! flag in every order, well-formed or deliberately broken.
//!
//! It keeps a small model of the cache (which keys it expects to exist, and whether their
//! values are numbers) to steer commands where replies are interesting: `incr` and `ma`
//! go mostly to numeric values, CAS-carrying commands mostly to keys that exist, and CAS
//! tokens are the ones the servers showed last ([`CasRef`]). The model only steers; what
//! is right is whatever memcached answers.
//!
//! Generated commands avoid what would make the comparison meaningless rather than find a
//! difference: values never contain `M` (so no data block holds a line `MN`, the text
//! sentinel's reply), TTLs are either already past or at least an hour (nothing expires
//! during a run, where the two servers' clocks tick at different moments), and text
//! commands never start with byte `0x80` (memcached would switch the connection to the
//! binary protocol).

use super::case::{CasForm, CasRef, Channel, Command, Part};
use std::collections::BTreeMap;

/// A small deterministic random number generator (SplitMix64): the same seed gives the
/// same commands on every machine.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        (self.next_u64() % n as u64) as usize
    }

    /// True with probability `pct` percent.
    pub fn chance(&mut self, pct: u32) -> bool {
        self.below(100) < pct as usize
    }

    /// One element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }

    /// One of a non-empty list of byte strings.
    pub fn pick_bytes(&mut self, xs: &[&'static [u8]]) -> &'static [u8] {
        xs[self.below(xs.len())]
    }

    /// Shuffles `xs` in place.
    pub fn shuffle<T>(&mut self, xs: &mut [T]) {
        for i in (1..xs.len()).rev() {
            let j = self.below(i + 1);
            xs.swap(i, j);
        }
    }
}

/// One generated command.
#[derive(Debug, Clone)]
pub struct Generated {
    /// The command.
    pub command: Command,
    /// Whether it was deliberately broken.
    pub malformed: bool,
    /// A short name for reports and for grouping differences ("meta md", "bin GETQ", ...).
    pub label: String,
}

/// Values stored by the generated commands: numbers at the edges of `incr`'s range,
/// strings that only look like numbers, an embedded line break, a long one.
const VALUES: &[&[u8]] = &[
    b"",
    b"0",
    b"1",
    b"7",
    b"42",
    b"100",
    b"18446744073709551615",
    b"18446744073709551614",
    b"99999999999999999999",
    b"4294967296",
    b"abc",
    b"hello world",
    b"a\r\nb",
    b" 5",
    b"5 ",
    b"-1",
    b"007",
    b"1.5",
];

/// TTLs: none, an hour or more, already past (negative, or an absolute time in 1970 or
/// 2001), and the last relative value (30 days).
const TTLS: &[&[u8]] = &[
    b"0",
    b"0",
    b"3600",
    b"86400",
    b"2592000",
    b"-1",
    b"2592001",
    b"1000000000",
];

const CLIENT_FLAGS: &[&[u8]] = &[b"0", b"0", b"1", b"123", b"4294967295"];
const DELTAS: &[&[u8]] = &[b"1", b"0", b"5", b"100", b"18446744073709551615"];

/// Tokens that replace a well-formed one in a broken command. Numbers just past 32 bits
/// are left out: memcached truncates a storage command's flags and exptime into 32 bits
/// where shoald refuses them (documented: numbers are never silently changed).
const BAD_TOKENS: &[&[u8]] = &[
    b"-1",
    b"abc",
    b"99999999999999999999",
    b"+5",
    b"1x",
    b"0x10",
    b"-0",
    b"\t5",
    b"5\t",
    b"noreply",
    b"0",
    b"",
];

/// Whole lines sent as a broken command (each gets `\r\n`, or is sent as is if it has a
/// newline already).
const JUNK_LINES: &[&[u8]] = &[
    b"",
    b"a",
    b"ab",
    b"abc",
    b"\n",
    b"\r\n",
    b" \r\n",
    b"get",
    b"gets",
    b"gat",
    b"gat 10",
    b"gats abc a",
    b"mg",
    b"ms",
    b"ms a",
    b"ms a abc",
    b"ms a -1",
    b"md",
    b"ma",
    b"me",
    b"mn x",
    b"mz a",
    b"set a",
    b"set a 0 0",
    b"cas a 0 0 1\r\nx",
    b"incr",
    b"incr a",
    b"decr",
    b"touch a",
    b"touch",
    b"delete",
    b"delete a 0",
    b"delete a 0 noreply",
    // Not `delete a 5` or `delete a x y`: shoald refuses extra tokens as memcached
    // 1.6.18 and memccapable expect, where 1.6.45 ignores them (protocol-deviations.md).
    b"verbosity",
    b"verbosity x",
    b"verbosity 1 2 3",
    b"version x",
    b"flush_all abc",
    b"flush_all -1",
    b"flush_all 0 0",
    b"flush_all noreply 0",
    b"stats nonsense",
    b"GET a",
    b"Set a 0 0 1",
    b"gett a",
    b"\x00get a",
    b"get a\x00b",
    b"\tget a",
    b"get\ta",
    b"  get a",
    b"get a  b ",
    b"get a\r\r",
    b"quit x",
    b"shutdown",
    b"shutdown graceful",
    b"shutdown x",
    b"cache_memlimit",
    b"cache_memlimit abc",
    b"cache_memlimit 2",
    b"GET / HTTP/1.1",
];

/// Keys only ever sent in base64, with the meta `b` flag (one holds a space, which no
/// other form of a command can carry). memcached remembers on the item whether its key
/// was sent in base64 and echoes an `mg` hit's `k` (and `me`'s key) that way; shoald
/// echoes the request's form (documented). Keeping each key to one form, and leaving
/// `k` off `mg` and `me` off these keys (whose items `mg N`, `ma N` and `md x` create
/// without that mark), keeps the comparison to what both servers promise.
const BINARY_KEYS: &[&[u8]] = &[b"bin key", b"\x00\xffraw"];

/// The keys commands address: a few short ones (so commands collide), one at the length
/// limit, one with a control byte and one with a colon.
fn keys() -> Vec<Vec<u8>> {
    vec![
        b"a".to_vec(),
        b"b".to_vec(),
        b"c".to_vec(),
        b"d".to_vec(),
        b"n1".to_vec(),
        b"n2".to_vec(),
        b"k:1".to_vec(),
        b"\x01ctl".to_vec(),
        vec![b'L'; 250],
    ]
}

/// What the generator expects of one key.
#[derive(Debug, Clone, Copy)]
struct Expect {
    numeric: bool,
}

/// Which flags each meta command takes (each may carry a token), in memcached 1.6.45.
const MG_FLAGS: &[u8] = b"bcfhklOqstuvCENRT";
const MS_FLAGS: &[u8] = b"bcCEFIkOqsTMN";
const MD_FLAGS: &[u8] = b"bCEIkOqTx";
const MA_FLAGS: &[u8] = b"bCENJDTMqOtcvk";

/// The generator: the random source, the share of broken commands and the model.
#[derive(Debug)]
pub struct Generator {
    rng: Rng,
    malformed_pct: u32,
    keys: Vec<Vec<u8>>,
    model: BTreeMap<Vec<u8>, Expect>,
    opaque: u32,
}

impl Generator {
    /// A generator from `seed` that breaks `malformed_pct` percent of its commands.
    pub fn new(seed: u64, malformed_pct: u32) -> Generator {
        Generator {
            rng: Rng::new(seed),
            malformed_pct,
            keys: keys(),
            model: BTreeMap::new(),
            opaque: 1,
        }
    }

    /// Forgets what it expects of the cache (after both servers were flushed).
    pub fn forget(&mut self) {
        self.model.clear();
    }

    /// The next command.
    pub fn next_command(&mut self) -> Generated {
        let malformed = self.rng.chance(self.malformed_pct);
        let (command, label) = match self.rng.below(100) {
            0..=34 => self.text(malformed),
            35..=79 => self.meta(malformed),
            _ => self.binary(malformed),
        };
        Generated {
            command,
            malformed,
            label: if malformed {
                format!("{label} (malformed)")
            } else {
                label
            },
        }
    }

    /// A key: mostly the short ones, numeric-valued ones for arithmetic.
    fn key(&mut self, want_numeric: bool) -> Vec<u8> {
        if want_numeric && self.rng.chance(70) {
            let numeric: Vec<Vec<u8>> = self
                .model
                .iter()
                .filter(|(_, e)| e.numeric)
                .map(|(k, _)| k.clone())
                .collect();
            if !numeric.is_empty() {
                let i = self.rng.below(numeric.len());
                return numeric[i].clone();
            }
        }
        // The long and odd keys less often than the short ones.
        let i = if self.rng.chance(85) {
            self.rng.below(6)
        } else {
            self.rng.below(self.keys.len())
        };
        self.keys[i].clone()
    }

    fn value(&mut self) -> Vec<u8> {
        if self.rng.chance(3) {
            return vec![b'x'; 300];
        }
        self.rng.pick_bytes(VALUES).to_vec()
    }

    fn ttl(&mut self) -> Vec<u8> {
        self.rng.pick_bytes(TTLS).to_vec()
    }

    fn cas_ref(&mut self, key: &[u8]) -> CasRef {
        if self.rng.chance(75) {
            CasRef::Latest(key.to_vec())
        } else {
            CasRef::Previous(key.to_vec())
        }
    }

    /// An explicit CAS unique (`E` flags): far above memcached's counter and shoald's
    /// derived values, few enough to repeat.
    fn explicit_cas(&mut self) -> Vec<u8> {
        (1_000_000_000_000u64 + self.rng.below(20) as u64)
            .to_string()
            .into_bytes()
    }

    fn remember(&mut self, key: &[u8], value: Option<&[u8]>) {
        match value {
            Some(v) => {
                let numeric = !v.is_empty() && v.len() <= 20 && v.iter().all(u8::is_ascii_digit);
                self.model.insert(key.to_vec(), Expect { numeric });
            }
            None => {
                self.model.remove(key);
            }
        }
    }

    // -------------------------------------------------------------------------------
    // Text commands.
    // -------------------------------------------------------------------------------

    fn text(&mut self, malformed: bool) -> (Command, String) {
        if malformed && self.rng.chance(25) {
            let line = self.rng.pick_bytes(JUNK_LINES).to_vec();
            let mut bytes = line;
            if !bytes.ends_with(b"\n") {
                bytes.extend_from_slice(b"\r\n");
            }
            return (
                Command::plain(Channel::Text, bytes, None),
                "text junk".into(),
            );
        }
        let kind = self.rng.below(100);
        let key = self.key(matches!(kind, 55..=69));
        let mut t = TextCmd::default();
        let label;
        match kind {
            0..=11 => {
                let name: &[u8] = if self.rng.chance(50) { b"get" } else { b"gets" };
                label = format!("text {}", String::from_utf8_lossy(name));
                t.tok(name);
                t.tok(&key);
                for _ in 0..self.rng.below(3) {
                    let k = self.key(false);
                    t.tok(&k);
                }
            }
            12..=17 => {
                let name: &[u8] = if self.rng.chance(50) { b"gat" } else { b"gats" };
                label = format!("text {}", String::from_utf8_lossy(name));
                t.tok(name);
                let ttl = self.ttl();
                t.tok(&ttl);
                t.tok(&key);
                if self.rng.chance(30) {
                    let k = self.key(false);
                    t.tok(&k);
                }
            }
            18..=44 => {
                let name: &[u8] = self.rng.pick_bytes(&[
                    &b"set"[..],
                    b"set",
                    b"add",
                    b"replace",
                    b"append",
                    b"prepend",
                    b"cas",
                ]);
                label = format!("text {}", String::from_utf8_lossy(name));
                let value = self.value();
                t.tok(name);
                t.tok(&key);
                let flags = self.rng.pick_bytes(CLIENT_FLAGS).to_vec();
                t.tok(&flags);
                let ttl = self.ttl();
                t.tok(&ttl);
                t.tok(value.len().to_string().as_bytes());
                if name == b"cas" {
                    if self.rng.chance(85) {
                        let r = self.cas_ref(&key);
                        t.cas(r);
                    } else {
                        t.tok(b"0");
                    }
                }
                if self.rng.chance(15) {
                    t.tok(b"noreply");
                }
                if name == b"set" || (name == b"add" && !self.model.contains_key(&key)) {
                    self.remember(&key, Some(&value));
                }
                t.data = Some(value);
                t.len_token = Some(4);
            }
            45..=54 => {
                label = "text delete".into();
                t.tok(b"delete");
                t.tok(&key);
                if self.rng.chance(15) {
                    t.tok(b"noreply");
                }
                self.remember(&key, None);
            }
            55..=69 => {
                let name: &[u8] = if self.rng.chance(60) {
                    b"incr"
                } else {
                    b"decr"
                };
                label = format!("text {}", String::from_utf8_lossy(name));
                t.tok(name);
                t.tok(&key);
                let d = self.rng.pick_bytes(DELTAS).to_vec();
                t.tok(&d);
                if self.rng.chance(15) {
                    t.tok(b"noreply");
                }
            }
            70..=79 => {
                label = "text touch".into();
                t.tok(b"touch");
                t.tok(&key);
                let ttl = self.ttl();
                t.tok(&ttl);
                if self.rng.chance(15) {
                    t.tok(b"noreply");
                }
            }
            80..=81 => {
                label = "text flush_all".into();
                t.tok(b"flush_all");
                if self.rng.chance(30) {
                    t.tok(b"0");
                }
                if self.rng.chance(30) {
                    t.tok(b"noreply");
                }
                self.model.clear();
            }
            82..=84 => {
                label = "text verbosity".into();
                t.tok(b"verbosity");
                t.tok(if self.rng.chance(50) { b"0" } else { b"1" });
                if self.rng.chance(30) {
                    t.tok(b"noreply");
                }
            }
            85..=87 => {
                label = "text version".into();
                t.tok(b"version");
            }
            _ => {
                label = "text mn".into();
                t.tok(b"mn");
            }
        }
        if malformed {
            if label == "text delete" {
                self.break_delete(&mut t);
            } else {
                self.break_text(&mut t);
            }
        }
        (t.finish(Some(key)), label)
    }

    /// Breaks a `delete` without giving it a token after the key other than `noreply`:
    /// shoald refuses those where memcached 1.6.45 ignores them, a documented deviation
    /// (protocol-deviations.md) the generator stays off.
    fn break_delete(&mut self, t: &mut TextCmd) {
        match self.rng.below(6) {
            0 if t.toks.len() > 1 => {
                t.toks.remove(1);
            }
            1 if t.toks.len() > 1 => t.toks[1] = TextTok::Bytes(vec![b'K'; 251]),
            2 => {
                // A tab glued to `noreply` would make it another token.
                t.toks.truncate(2);
                t.sep = self.rng.pick_bytes(&[&b"  "[..], b"\t", b" \t"]).to_vec();
            }
            3 => t.lead = b" ".to_vec(),
            4 => t.trail = b" ".to_vec(),
            _ => t.eol = b"\n".to_vec(),
        }
    }

    /// Breaks a command: a token replaced, dropped or added, odd spacing or case, a bare
    /// `\n`, or a data block whose length or ending is wrong.
    fn break_text(&mut self, t: &mut TextCmd) {
        let n = t.toks.len();
        match self.rng.below(11) {
            0 | 1 if n > 1 => {
                let i = 1 + self.rng.below(n - 1);
                t.toks[i] = TextTok::Bytes(self.rng.pick_bytes(BAD_TOKENS).to_vec());
            }
            2 if n > 1 => {
                let i = 1 + self.rng.below(n - 1);
                t.toks.remove(i);
            }
            3 => {
                let i = 1 + self.rng.below(n);
                let extra: &[u8] =
                    self.rng
                        .pick_bytes(&[&b"noreply"[..], b"x", b"0", b"extra", b"1"]);
                t.toks
                    .insert(i.min(t.toks.len()), TextTok::Bytes(extra.to_vec()));
            }
            4 if n > 1 => t.toks[1] = TextTok::Bytes(vec![b'K'; 251]),
            5 => t.sep = self.rng.pick_bytes(&[&b"  "[..], b"\t", b" \t"]).to_vec(),
            6 => t.lead = b" ".to_vec(),
            7 => t.trail = b" ".to_vec(),
            8 => t.eol = b"\n".to_vec(),
            9 if t.data.is_some() => {
                // Declared length off by a little; the bytes after the declared block
                // still end in a line, so nothing waits for more.
                let len = t.data.as_ref().map_or(0, Vec::len);
                let declared = if self.rng.chance(50) {
                    len + 1
                } else {
                    len.saturating_sub(1)
                };
                if let Some(i) = t.len_token {
                    if i < t.toks.len() {
                        t.toks[i] = TextTok::Bytes(declared.to_string().into_bytes());
                    }
                }
            }
            // Two bytes, as the `\r\n` they replace: a server reads exactly the declared
            // length plus two, so the sentinel after them stays whole.
            9 | 10 if t.data.is_some() => {
                t.data_end = self
                    .rng
                    .pick_bytes(&[&b"xx"[..], b"\r\r", b"\n\n", b" \n"])
                    .to_vec()
            }
            _ => {
                if let Some(TextTok::Bytes(cmd)) = t.toks.first_mut() {
                    cmd.make_ascii_uppercase();
                }
            }
        }
    }

    // -------------------------------------------------------------------------------
    // Meta commands.
    // -------------------------------------------------------------------------------

    fn meta(&mut self, malformed: bool) -> (Command, String) {
        let which = self.rng.below(100);
        let key = self.key(matches!(which, 70..=89));
        let (name, allowed): (&[u8], &[u8]) = match which {
            0..=34 => (b"mg", MG_FLAGS),
            35..=59 => (b"ms", MS_FLAGS),
            60..=69 => (b"md", MD_FLAGS),
            70..=89 => (b"ma", MA_FLAGS),
            _ => (b"me", b"b"),
        };
        let base64 = name != b"me" && self.rng.chance(12);
        let key = if base64 {
            self.rng.pick_bytes(BINARY_KEYS).to_vec()
        } else {
            key
        };
        // memcached keeps a broken `ms`'s `E` and gives the connection's next stored
        // item that CAS unique (documented), so a broken `ms` has none.
        let mut letters: Vec<u8> = allowed
            .iter()
            .copied()
            .filter(|&f| f != b'b' && !(base64 && name == b"mg" && f == b'k'))
            .filter(|&f| !(malformed && name == b"ms" && f == b'E'))
            .filter(|_| self.rng.chance(25))
            .collect();
        if base64 {
            letters.push(b'b');
        }
        self.rng.shuffle(&mut letters);
        let mut t = TextCmd::default();
        t.tok(name);
        if base64 {
            t.tok(&base64_encode(&key));
        } else {
            t.tok(&key);
        }
        let mut value = None;
        if name == b"ms" {
            let v = self.value();
            t.tok(v.len().to_string().as_bytes());
            t.len_token = Some(2);
            value = Some(v);
        }
        if name == b"me" {
            // `me` takes only a `b` right after the key.
            if base64 {
                t.tok(b"b");
            }
        } else {
            let stale_ok = name == b"ms" && letters.contains(&b'I');
            for &f in &letters {
                self.meta_flag(&mut t, f, &key, stale_ok);
            }
        }
        // memcached applies an `ma`'s `E` and `T` to the item it replaces when the
        // counter grows a digit, so they are lost (documented); only a decrement, which
        // never grows, carries them.
        if name == b"ma" && letters.iter().any(|f| matches!(f, b'E' | b'T')) {
            let decr: &[u8] = if self.rng.chance(50) { b"MD" } else { b"M-" };
            t.toks
                .retain(|tk| !matches!(tk, TextTok::Bytes(b) if b.first() == Some(&b'M')));
            t.toks.push(TextTok::Bytes(decr.to_vec()));
        }
        let mode = letters
            .contains(&b'M')
            .then(|| {
                t.toks.iter().find_map(|tk| match tk {
                    TextTok::Bytes(b) if b.len() == 2 && b[0] == b'M' => Some(b[1]),
                    _ => None,
                })
            })
            .flatten();
        match name {
            b"ms" if matches!(mode, None | Some(b'S')) && !letters.contains(&b'C') => {
                self.remember(&key, value.as_deref());
            }
            b"md" if !letters.contains(&b'I') && !letters.contains(&b'C') => {
                self.remember(&key, None)
            }
            b"ma" if letters.contains(&b'N') && !self.model.contains_key(&key) => {
                self.remember(&key, Some(b"0"));
            }
            _ => {}
        }
        t.data = value;
        if malformed {
            self.break_meta(&mut t, name);
        }
        let label = format!("meta {}", String::from_utf8_lossy(name));
        (t.finish(Some(key)), label)
    }

    /// One flag with its token, as `cmd` takes it.
    fn meta_flag(&mut self, t: &mut TextCmd, f: u8, key: &[u8], stale_ok: bool) {
        let mut tok = vec![f];
        match f {
            // With `I`, an `ms` whose CAS is older than the item's lands as a stale
            // value. Which of two CAS uniques is older holds across servers only for
            // explicit (`E`) ones: shoald derives its own from where an item is stored,
            // not from a counter (documented), so there a stale token is an explicit one.
            b'C' if stale_ok => tok.extend_from_slice(&self.explicit_cas()),
            b'C' => {
                let r = self.cas_ref(key);
                t.toks.push(TextTok::FlagCas(f, r));
                return;
            }
            b'E' => tok.extend_from_slice(&self.explicit_cas()),
            b'T' | b'N' | b'R' => tok.extend_from_slice(&self.ttl()),
            b'F' => tok.extend_from_slice(self.rng.pick_bytes(CLIENT_FLAGS)),
            b'J' => tok.extend_from_slice(self.rng.pick_bytes(&[
                &b"0"[..],
                b"10",
                b"18446744073709551615",
            ])),
            b'D' => tok.extend_from_slice(self.rng.pick_bytes(DELTAS)),
            b'M' => {
                let modes: &[u8] = if t.toks.first() == Some(&TextTok::Bytes(b"ma".to_vec())) {
                    b"I+D-"
                } else {
                    b"EAPRS"
                };
                tok.push(*self.rng.pick(modes));
            }
            b'O' => {
                let len = self.rng.below(9);
                for _ in 0..len {
                    tok.push(*self.rng.pick(b"abcxyz0123456789"));
                }
            }
            _ => {}
        }
        t.toks.push(TextTok::Bytes(tok));
    }

    /// Breaks a meta command: unknown, duplicate or malformed flags, too many flags, an
    /// over-long opaque, a bad mode, a bad key, or one of the text breakages.
    fn break_meta(&mut self, t: &mut TextCmd, name: &[u8]) {
        let first_flag = if name == b"ms" { 3 } else { 2 };
        match self.rng.below(10) {
            0 => {
                let f: &[u8] =
                    self.rng
                        .pick_bytes(&[&b"z"[..], b"!", b"1", b"\xe9", b"Z", b"a", b"_", b"S5"]);
                t.toks.push(TextTok::Bytes(f.to_vec()));
            }
            1 => {
                let f: &[u8] = self.rng.pick_bytes(&[&b"v"[..], b"q", b"T10", b"k"]);
                t.toks.push(TextTok::Bytes(f.to_vec()));
                t.toks.push(TextTok::Bytes(f.to_vec()));
            }
            2 => {
                let f: &[u8] = self.rng.pick_bytes(&[
                    &b"T"[..],
                    b"Tabc",
                    b"N-",
                    b"R1x",
                    b"C",
                    b"Cabc",
                    b"E-1",
                    b"Fx",
                    b"F-1",
                    b"J-5",
                    b"Dabc",
                    b"M",
                    b"MX",
                    b"MEE",
                    b"T99999999999",
                    b"T-2147483649",
                    b"T+5",
                ]);
                t.toks.push(TextTok::Bytes(f.to_vec()));
            }
            3 => {
                for i in 0..22 {
                    t.toks.push(TextTok::Bytes(vec![b"ckstfhlOvu"[i % 10]]));
                }
            }
            4 => {
                let mut o = b"O".to_vec();
                o.extend_from_slice(&[b'o'; 40]);
                t.toks.push(TextTok::Bytes(o));
            }
            5 => {
                if t.toks.len() > 1 {
                    t.toks[1] = TextTok::Bytes(vec![b'K'; 251]);
                }
            }
            6 => {
                // A `b` flag on a key that is not base64.
                if t.toks.len() > 1 {
                    t.toks[1] = TextTok::Bytes(b"a!".to_vec());
                }
                t.toks
                    .insert(first_flag.min(t.toks.len()), TextTok::Bytes(b"b".to_vec()));
            }
            _ => self.break_text(t),
        }
    }

    // -------------------------------------------------------------------------------
    // Binary commands.
    // -------------------------------------------------------------------------------

    fn binary(&mut self, malformed: bool) -> (Command, String) {
        // (opcode, name, extras kind)
        const OPS: &[(u8, &str, Extras)] = &[
            (0x00, "GET", Extras::None),
            (0x09, "GETQ", Extras::None),
            (0x0c, "GETK", Extras::None),
            (0x0d, "GETKQ", Extras::None),
            (0x01, "SET", Extras::Store),
            (0x11, "SETQ", Extras::Store),
            (0x02, "ADD", Extras::Store),
            (0x12, "ADDQ", Extras::Store),
            (0x03, "REPLACE", Extras::Store),
            (0x13, "REPLACEQ", Extras::Store),
            (0x0e, "APPEND", Extras::None),
            (0x19, "APPENDQ", Extras::None),
            (0x0f, "PREPEND", Extras::None),
            (0x1a, "PREPENDQ", Extras::None),
            (0x04, "DELETE", Extras::None),
            (0x14, "DELETEQ", Extras::None),
            (0x05, "INCR", Extras::Arith),
            (0x15, "INCRQ", Extras::Arith),
            (0x06, "DECR", Extras::Arith),
            (0x16, "DECRQ", Extras::Arith),
            (0x1c, "TOUCH", Extras::Ttl),
            (0x1d, "GAT", Extras::Ttl),
            (0x1e, "GATQ", Extras::Ttl),
            (0x23, "GATK", Extras::Ttl),
            (0x24, "GATKQ", Extras::Ttl),
            (0x0a, "NOOP", Extras::Keyless),
            (0x0b, "VERSION", Extras::Keyless),
            (0x08, "FLUSH", Extras::Keyless),
            (0x18, "FLUSHQ", Extras::Keyless),
        ];
        // Flushes are rare, or the cache would be empty most of the time.
        let mut i = self.rng.below(OPS.len());
        if matches!(OPS[i].1, "FLUSH" | "FLUSHQ") && !self.rng.chance(15) {
            i = 0;
        }
        let (op, name, kind) = OPS[i];
        let key = self.key(kind == Extras::Arith);
        let mut extras = Vec::new();
        let mut value = Vec::new();
        let mut cas = None;
        match kind {
            Extras::Store => {
                value = self.value();
                let flags: u32 = *self.rng.pick(&[0, 1, 123, u32::MAX]);
                extras.extend_from_slice(&flags.to_be_bytes());
                extras.extend_from_slice(&self.binary_ttl().to_be_bytes());
                if self.rng.chance(30) {
                    cas = Some(self.cas_ref(&key));
                }
                if name.starts_with("SET")
                    || (name.starts_with("ADD") && !self.model.contains_key(&key))
                {
                    self.remember(&key, Some(&value));
                }
            }
            Extras::Arith => {
                let delta: u64 = *self.rng.pick(&[1, 0, 5, u64::MAX]);
                let initial: u64 = *self.rng.pick(&[0, 10, u64::MAX]);
                extras.extend_from_slice(&delta.to_be_bytes());
                extras.extend_from_slice(&initial.to_be_bytes());
                // 0xffffffff: do not create a missing key.
                let ttl = if self.rng.chance(30) {
                    u32::MAX
                } else {
                    self.binary_ttl()
                };
                extras.extend_from_slice(&ttl.to_be_bytes());
                if self.rng.chance(20) {
                    cas = Some(self.cas_ref(&key));
                }
            }
            Extras::Ttl => extras.extend_from_slice(&self.binary_ttl().to_be_bytes()),
            Extras::None => {
                if name.starts_with("APPEND") || name.starts_with("PREPEND") {
                    value = self.value();
                }
                if name.starts_with("DELETE") && self.rng.chance(30) {
                    cas = Some(self.cas_ref(&key));
                }
                if name.starts_with("DELETE") {
                    self.remember(&key, None);
                }
            }
            Extras::Keyless => {
                if name.starts_with("FLUSH") {
                    self.model.clear();
                }
            }
        }
        let mut pkt_key = if kind == Extras::Keyless {
            Vec::new()
        } else {
            key.clone()
        };
        let magic = 0x80;
        let mut opcode = op;
        let mut datatype = 0u8;
        let mut label = format!("bin {name}");
        if malformed {
            match self.rng.below(8) {
                0 => {
                    if extras.is_empty() {
                        extras = vec![0; 4];
                    } else {
                        extras.truncate(extras.len() / 2);
                    }
                }
                1 => pkt_key.clear(),
                2 => pkt_key = vec![b'K'; 251],
                // An unknown opcode without a body: memcached reads an unknown
                // command's key and extras and then swallows its whole body length
                // again, eating into the next request (documented deviation).
                // (A bad magic byte is not sent: memcached closes the binary-bound
                // connection, shoald reads the request as text, a documented deviation.)
                3 | 4 => {
                    opcode = *self.rng.pick(&[0x30u8, 0x45, 0xfe, 0x1b, 0x25]);
                    pkt_key.clear();
                    extras.clear();
                    value.clear();
                }
                5 => datatype = 1,
                // A value where none is taken. memcached leaves a touch's or gat's
                // value bytes to be read as the next request (documented deviation), so
                // those get none.
                6 if kind != Extras::Ttl => value = b"unexpected".to_vec(),
                _ => extras.extend_from_slice(&[0; 3]),
            }
            label = format!("bin {name}");
        }
        let opaque = self.opaque;
        self.opaque = self.opaque.wrapping_add(1);
        let cmd = binary_packet(BinaryPacket {
            magic,
            opcode,
            datatype,
            key: &pkt_key,
            extras: &extras,
            value: &value,
            opaque,
            cas,
            item: (kind != Extras::Keyless).then_some(key),
        });
        (cmd, label)
    }

    fn binary_ttl(&mut self) -> u32 {
        *self
            .rng
            .pick(&[0u32, 0, 3600, 86400, 2_592_001, 1_000_000_000])
    }
}

/// The extras a binary opcode takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Extras {
    None,
    Keyless,
    Store,
    Arith,
    Ttl,
}

/// The fields of a binary request.
struct BinaryPacket<'a> {
    magic: u8,
    opcode: u8,
    datatype: u8,
    key: &'a [u8],
    extras: &'a [u8],
    value: &'a [u8],
    opaque: u32,
    cas: Option<CasRef>,
    item: Option<Vec<u8>>,
}

fn binary_packet(p: BinaryPacket<'_>) -> Command {
    let body = p.extras.len() + p.key.len() + p.value.len();
    let mut head = vec![p.magic, p.opcode];
    head.extend_from_slice(&u16::try_from(p.key.len()).unwrap_or(u16::MAX).to_be_bytes());
    head.push(u8::try_from(p.extras.len()).unwrap_or(u8::MAX));
    head.push(p.datatype);
    head.extend_from_slice(&[0, 0]);
    head.extend_from_slice(&u32::try_from(body).unwrap_or(u32::MAX).to_be_bytes());
    head.extend_from_slice(&p.opaque.to_be_bytes());
    let mut parts = vec![Part::Bytes(head)];
    match p.cas {
        Some(r) => parts.push(Part::Cas(r, CasForm::Be64)),
        None => parts.push(Part::Bytes(vec![0; 8])),
    }
    let mut tail = p.extras.to_vec();
    tail.extend_from_slice(p.key);
    tail.extend_from_slice(p.value);
    parts.push(Part::Bytes(tail));
    Command {
        channel: Channel::Binary,
        parts,
        key: p.item,
    }
}

/// The longest data block a broken command is padded to.
const MAX_PADDED: usize = 4096;

/// A token of a text command being built.
#[derive(Debug, Clone, PartialEq, Eq)]
enum TextTok {
    Bytes(Vec<u8>),
    /// A CAS unique: a bare one (the `cas` command's), or after a flag letter (`C`).
    Cas(CasRef),
    FlagCas(u8, CasRef),
}

/// A text command being built: tokens, separators and the data block, so breakages can
/// work on its parts before it is rendered.
#[derive(Debug, Clone)]
struct TextCmd {
    toks: Vec<TextTok>,
    sep: Vec<u8>,
    lead: Vec<u8>,
    trail: Vec<u8>,
    eol: Vec<u8>,
    data: Option<Vec<u8>>,
    data_end: Vec<u8>,
    /// Which token is the data length (4 for storage commands, 2 for `ms`).
    len_token: Option<usize>,
}

impl Default for TextCmd {
    fn default() -> Self {
        TextCmd {
            toks: Vec::new(),
            sep: b" ".to_vec(),
            lead: Vec::new(),
            trail: Vec::new(),
            eol: b"\r\n".to_vec(),
            data: None,
            data_end: b"\r\n".to_vec(),
            len_token: None,
        }
    }
}

impl TextCmd {
    fn tok(&mut self, b: &[u8]) {
        self.toks.push(TextTok::Bytes(b.to_vec()));
    }

    fn cas(&mut self, r: CasRef) {
        self.toks.push(TextTok::Cas(r));
    }

    /// Renders the command. A server may read the data block with the length the line
    /// now declares (a breakage can move another number there): the block is padded with
    /// spaces up to that length so no server waits for bytes that never come. A length
    /// too long to pad (a TTL moved there), or a CAS unique (each server's differs), is
    /// replaced by a token that is no length at all.
    fn finish(mut self, key: Option<Vec<u8>>) -> Command {
        // Positions as a server counts them: an empty token vanishes between two
        // separators, moving the ones after it forward.
        let effective: Vec<usize> = (0..self.toks.len())
            .filter(|&i| !matches!(&self.toks[i], TextTok::Bytes(b) if b.is_empty()))
            .collect();
        // A CAS unique moved into the key's place would make each server's key differ.
        if let Some(&i) = effective.get(1) {
            if matches!(self.toks[i], TextTok::Cas(_) | TextTok::FlagCas(..)) {
                self.toks[i] = TextTok::Bytes(b"k".to_vec());
            }
        }
        // memcached reads a storage command's flags and exptime with `strtoul`/`strtol`
        // and truncates them to 32 bits where shoald refuses them (documented): a
        // breakage that moves a wider number there is given a plain 0 instead.
        if self.len_token == Some(4) {
            for (pos, min, max) in [
                (2, 0, i128::from(u32::MAX)),
                (3, i128::from(i32::MIN), i128::from(i32::MAX)),
            ] {
                if let Some(&i) = effective.get(pos) {
                    if let TextTok::Bytes(b) = &self.toks[i] {
                        let n = std::str::from_utf8(b)
                            .ok()
                            .and_then(|v| v.trim().parse::<i128>().ok());
                        if n.is_some_and(|n| n < min || n > max) {
                            self.toks[i] = TextTok::Bytes(b"0".to_vec());
                        }
                    }
                }
            }
        }
        // A delayed flush: memcached invalidates items stored during the second before
        // the time asked for as soon as that second begins, shoald once (documented), so
        // a broken `flush_all` never gets a positive delay.
        if matches!(self.toks.first(), Some(TextTok::Bytes(b)) if b == b"flush_all") {
            if let Some(&i) = effective.get(1) {
                if let TextTok::Bytes(b) = &self.toks[i] {
                    let delay = std::str::from_utf8(b)
                        .ok()
                        .and_then(|v| v.parse::<i64>().ok());
                    if delay.is_some_and(|d| d > 0) {
                        self.toks[i] = TextTok::Bytes(b"0".to_vec());
                    }
                }
            }
        }
        self.len_token = self.len_token.and_then(|i| effective.get(i).copied());
        if let Some(tok) = self.len_token.and_then(|i| self.toks.get_mut(i)) {
            let too_long = match tok {
                TextTok::Bytes(b) => std::str::from_utf8(b)
                    .ok()
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .is_some_and(|d| d > MAX_PADDED),
                TextTok::Cas(_) | TextTok::FlagCas(..) => true,
            };
            if too_long {
                *tok = TextTok::Bytes(b"len".to_vec());
            }
        }
        let mut parts = Vec::new();
        let mut cur = self.lead.clone();
        for (i, t) in self.toks.iter().enumerate() {
            if i > 0 {
                cur.extend_from_slice(&self.sep);
            }
            match t {
                TextTok::Bytes(b) => cur.extend_from_slice(b),
                TextTok::Cas(r) => {
                    parts.push(Part::Bytes(std::mem::take(&mut cur)));
                    parts.push(Part::Cas(r.clone(), CasForm::Decimal));
                }
                TextTok::FlagCas(f, r) => {
                    cur.push(*f);
                    parts.push(Part::Bytes(std::mem::take(&mut cur)));
                    parts.push(Part::Cas(r.clone(), CasForm::Decimal));
                }
            }
        }
        cur.extend_from_slice(&self.trail);
        cur.extend_from_slice(&self.eol);
        if let Some(mut data) = self.data {
            let declared = self
                .len_token
                .and_then(|i| self.toks.get(i))
                .and_then(|t| match t {
                    TextTok::Bytes(b) => std::str::from_utf8(b).ok()?.trim().parse::<usize>().ok(),
                    _ => None,
                });
            // Padding that is neither a digit nor a space: memcached's incr reads a value
            // of spaces past its end (into whatever memory follows).
            if let Some(d) = declared.filter(|&d| d > data.len()) {
                data.resize(d, b'_');
            }
            cur.extend_from_slice(&data);
            cur.extend_from_slice(&self.data_end);
        }
        parts.push(Part::Bytes(cur));
        parts.retain(|p| !matches!(p, Part::Bytes(b) if b.is_empty()));
        Command {
            channel: Channel::Text,
            parts,
            key,
        }
    }
}

/// Standard base64 with padding (meta keys sent with `b`).
pub fn base64_encode(b: &[u8]) -> Vec<u8> {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::with_capacity(b.len().div_ceil(3) * 4);
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        out.push(A[(n >> 18) as usize & 63]);
        out.push(A[(n >> 12) as usize & 63]);
        out.push(if c.len() > 1 {
            A[(n >> 6) as usize & 63]
        } else {
            b'='
        });
        out.push(if c.len() > 2 {
            A[n as usize & 63]
        } else {
            b'='
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_commands() {
        let mut a = Generator::new(7, 30);
        let mut b = Generator::new(7, 30);
        for _ in 0..2000 {
            assert_eq!(a.next_command().command, b.next_command().command);
        }
    }

    #[test]
    fn well_formed_text_commands_end_their_lines_and_never_hold_mn() {
        let mut g = Generator::new(11, 0);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..5000 {
            let gen = g.next_command();
            assert!(!gen.malformed);
            seen.insert(gen.label.clone());
            let bytes = gen.command.render(|_| 1);
            match gen.command.channel {
                Channel::Text => {
                    assert!(bytes.ends_with(b"\r\n"), "{}", gen.command.describe());
                    assert_ne!(bytes.first(), Some(&0x80));
                    if gen.label != "text mn" {
                        assert!(!bytes.windows(4).any(|w| w == b"\nMN\r"));
                    }
                }
                Channel::Binary => assert_eq!(bytes[0], 0x80),
            }
        }
        for label in [
            "text get",
            "text cas",
            "meta mg",
            "meta ms",
            "meta md",
            "meta ma",
            "meta me",
            "bin GETKQ",
            "bin INCR",
        ] {
            assert!(seen.contains(label), "{label} never generated");
        }
    }

    #[test]
    fn base64_known_answers() {
        assert_eq!(base64_encode(b"f"), b"Zg==");
        assert_eq!(base64_encode(b"fo"), b"Zm8=");
        assert_eq!(base64_encode(b"foo"), b"Zm9v");
    }

    #[test]
    fn a_moved_length_pads_the_data_block() {
        let mut t = TextCmd::default();
        for tok in ["set", "a", "0", "9", "1"] {
            t.tok(tok.as_bytes());
        }
        t.len_token = Some(3);
        t.data = Some(b"x".to_vec());
        let cmd = t.finish(None);
        assert_eq!(cmd.render(|_| 0), b"set a 0 9 1\r\nx________\r\n");
    }
}
