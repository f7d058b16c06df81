//! Reply-by-reply parity with memcached 1.6.45, the reference.
//!
//! Starts the real shoald and the real memcached with the same options, sends both the
//! same corpus of request sequences, each case on a fresh connection, and compares the
//! replies byte for byte. Only what must differ is normalised: CAS uniques, the `VERSION`
//! text, `STAT` lines (stats are compared through chosen counters instead), `me`'s
//! `cas=`/`size=`, and times (`t`, `l`, `la=`, `exp=` may differ by a clock tick).
//!
//! Every request is followed by `mn`, and its reply is everything before that `MN`, so
//! `noreply`, quiet mode and swallowed data blocks are compared too (an empty reply is a
//! reply). Steps that close the connection, or leave it waiting, are read for a bounded
//! time instead. Every read has a timeout. All mismatches are collected and printed
//! (request, memcached's reply, shoald's reply) before the test fails.
//!
//! Differences that are deliberate, or that cannot be fixed in the protocol layer, are
//! marked with [`Case::allow`] and a reason; they are printed but do not fail the test
//! (and a note is printed when such a step stops differing).
//!
//! memcached is a peer: the test fails without it when `SHOAL_REQUIRE_PEERS` is set (CI),
//! else it prints a SKIPPED line and passes. `SHOAL_PARITY_VERBOSE=1` prints every step,
//! matching or not (`cargo test --release -p shoal-server --test parity -- --nocapture`).

mod common;

use common::Server;
use shoal_test_support::memcached::Memcached;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Longest wait for one reply.
const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// The whole run's time limit: steps not started by then are skipped (and the test fails),
/// so even a server that times out on every reply cannot hold the test for long.
const BUDGET: Duration = Duration::from_secs(60);
/// What a step skipped for the time budget shows.
const SKIPPED: &str = "<skipped: over the time budget>";
/// How long a step that may leave the connection open is read for.
const RAW_WAIT: Duration = Duration::from_millis(500);

// ---------------------------------------------------------------------------------------
// Documented differences (reasons shown when they occur; docs/protocol-deviations.md).
// ---------------------------------------------------------------------------------------

/// memcached stores numbers from `strtol`/`strtoul` into 32-bit fields without a range
/// check, so 2^32 becomes 0 and 2^31 becomes negative; shoald rejects them
/// (docs/protocol-deviations.md, "Numbers are never silently changed").
const NUMBERS: &str = "out-of-range number: memcached truncates it, shoald rejects it \
                       (documented: numbers are never silently changed)";
/// `delete <key>` followed by anything but a hold time of `0` and/or `noreply`: memcached
/// 1.6.45 ignores the extra tokens, shoald refuses them as 1.6.18 and memccapable expect
/// (docs/protocol-deviations.md).
const DELETE_TOKENS: &str = "delete with extra tokens: refused as memcached 1.6.18 and \
                             memccapable expect; 1.6.45 ignores them (documented)";
/// An item stored through a base64 (`b`) key is shown base64-encoded by memcached's `k`
/// flag even when fetched by its plain key; shoald's items do not record how the key was
/// sent (commands/meta and the store).
const KEY_BINARY: &str = "k flag: items do not remember that their key was sent in base64 \
                          (commands/meta/get.rs, store)";
/// memcached drops replies still queued when it closes a connection for an over-long
/// line that arrived in the same read; shoald sends them first (conn.rs).
const CLOSE_FLUSHES: &str = "replies queued before an over-long line are still sent \
                             (conn.rs); memcached discards them when both arrive together";
/// memcached frees a deleted item's chunk for reuse at once, and keeps free chunks in
/// slab classes it already has pages for; shoald's segments are reclaimed whole (documented:
/// eviction by segment), so what fits once `-M` memory is full differs.
const SEGMENTS: &str = "space in a full -M store is reclaimed by segment, not by item \
                        (documented)";
/// memcached allocates the new item before it looks at the old one, so when memory is
/// full an `add` of an existing key is refused for memory; shoald checks the condition
/// first and answers NOT_STORED (commands/storage.rs).
const CHECK_BEFORE_ALLOC: &str = "full store: add of an existing key answers NOT_STORED, \
                                  memcached's allocation fails first (commands/storage.rs)";

// ---------------------------------------------------------------------------------------
// The corpus.
// ---------------------------------------------------------------------------------------

/// One step of a case.
enum Step {
    /// Send the bytes (after placeholder expansion), then `mn`; the reply is everything
    /// before the `MN` (the sentinel's, after one `MN` per `mn` line in the request).
    Req(Vec<u8>),
    /// Send the bytes without a sentinel and read until the server closes the connection
    /// or `RAW_WAIT` passes.
    Raw(Vec<u8>),
    /// Pause (both servers at once).
    Sleep(Duration),
    /// `stats <group>` rendered as `name=value` for the given names, each relative to a
    /// [`Base`]; for `items` and `slabs` each value is the sum over all classes.
    Stats(&'static str, Vec<(&'static str, Base)>),
    /// `count` sets of `size`-byte values under `<prefix><i>`, rendered as the distinct replies
    /// in order of appearance, plus a check that every STORED came before every refusal.
    Fill {
        prefix: &'static str,
        count: usize,
        size: usize,
    },
}

impl Step {
    fn describe(&self) -> String {
        match self {
            Step::Req(b) => format!("{} (+ mn)", esc(b, 300)),
            Step::Raw(b) => format!("{} (raw, {} bytes)", esc(b, 300), b.len()),
            Step::Sleep(d) => format!("sleep {d:?}"),
            Step::Stats(g, names) => {
                let names: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
                format!("stats {g}: {}", names.join(", "))
            }
            Step::Fill {
                prefix,
                count,
                size,
            } => format!("{count} sets of {prefix}<i> with {size}-byte values"),
        }
    }
}

/// What a counter from [`Step::Stats`] is shown relative to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Base {
    /// The value itself.
    Abs,
    /// The number of STOREDs in the connection's last [`Step::Fill`].
    Stored,
    /// The number of refusals in the last fill.
    Refused,
}

struct Case {
    name: String,
    steps: Vec<(Step, Option<&'static str>)>,
}

impl Case {
    fn new(name: &str) -> Case {
        Case {
            name: name.to_string(),
            steps: Vec::new(),
        }
    }

    /// Adds one request (see [`Step::Req`]).
    fn req(mut self, b: impl AsRef<[u8]>) -> Case {
        self.steps.push((Step::Req(b.as_ref().to_vec()), None));
        self
    }

    /// Adds several requests, one step each.
    fn reqs(mut self, list: &[&[u8]]) -> Case {
        for b in list {
            self = self.req(b);
        }
        self
    }

    fn raw(mut self, b: impl AsRef<[u8]>) -> Case {
        self.steps.push((Step::Raw(b.as_ref().to_vec()), None));
        self
    }

    fn sleep(mut self, ms: u64) -> Case {
        self.steps
            .push((Step::Sleep(Duration::from_millis(ms)), None));
        self
    }

    fn stats(mut self, group: &'static str, names: &[(&'static str, Base)]) -> Case {
        self.steps.push((Step::Stats(group, names.to_vec()), None));
        self
    }

    fn fill(mut self, prefix: &'static str, count: usize, size: usize) -> Case {
        self.steps.push((
            Step::Fill {
                prefix,
                count,
                size,
            },
            None,
        ));
        self
    }

    /// Marks the last step as an allowed, documented difference.
    fn allow(mut self, reason: &'static str) -> Case {
        if let Some(last) = self.steps.last_mut() {
            last.1 = Some(reason);
        }
        self
    }
}

/// A set of cases run against one pair of servers started with the same options.
struct Group {
    name: &'static str,
    flags: Vec<&'static str>,
    cases: Vec<Case>,
}

fn key(n: usize, c: u8) -> Vec<u8> {
    vec![c; n]
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn main_cases() -> Vec<Case> {
    let k250 = key(250, b'a');
    let k251 = key(251, b'b');
    let many: Vec<u8> = (0..100)
        .map(|i| format!("mk{i}"))
        .collect::<Vec<_>>()
        .join(" ")
        .into_bytes();
    let big = vec![b'z'; 1024 * 1024 + 1];
    let mut cases = vec![
        Case::new("blank lines and unknown commands").reqs(&[
            b"\r\n",
            b"\n",
            b"   \r\n",
            b" \t \r\n",
            b"\r\r\n",
            b"\0\r\n",
            b"foo\r\n",
            b"foo bar baz\r\n",
            b"GET k\r\n",
            b"Set k 0 0 1\r\n",
            b"quitx\r\n",
            b"get\tk\r\n",
            b"m\r\n",
            b"mx k\r\n",
            b"mgg k\r\n",
            b"gett k\r\n",
            b"sets k 0 0 1\r\nx\r\n",
            b"stats nope\r\n",
            b"lru\r\n",
            b"slabs\r\n",
        ]),
        Case::new("tokenizer edge cases").reqs(&[
            b"set pk 0 0 1\r\nx\r\n",
            b"incr pk noreply\r\n",
            b"touch pk noreply\r\n",
            b"delete pk noreply noreply\r\n",
            b"set pk 0 0 1 noreply noreply\r\nx\r\n",
            b"get pk noreply\r\n",
            b"gat noreply pk\r\n",
            b"get pk\0junk\r\n",
            b"set pk2 0 0 1\0 junk\r\nx\r\n",
            b"get pk2\r\n",
            b"get pk\r\r\n",
            b"get pk\n",
            b"set pk3 0 0 1\nx\r\n",
            b"set pk3 0 0 1\r\nx\n\r\n",
            b"\r\n",
            b"set\tpk 0 0 1\r\nx\r\n",
            b"get pk\x01\r\n",
            b"  get pk\r\n",
            b" mn\r\n",
            b"set pk 0 0 1 \r\nx\r\n",
            b"set pk 0 0 1  noreply\r\nx\r\n",
            b"cas pk 0 0 1 0\r\nx\r\n",
            b"touch pk 0 extra\r\n",
            b"incr pk 1 extra\r\n",
            b"decr pk 1 noreply extra\r\n",
            b"get pk pk pk pk pk pk pk pk pk pk pk pk pk pk pk pk pk pk pk pk pk pk pk pk pk pk\r\n",
            b"delete pk 0 noreply extra\r\n",
            b"verbosity 1 noreply extra\r\n",
            b"version noreply\r\n",
            b"lru bogus\r\n",
            b"slabs automove 9\r\n",
            b"slabs\r\n",
            b"misbehave\r\n",
            b"debugtime 1\r\n",
            b"cache_memlimit 100 noreply\r\n",
            b"cache_memlimit 64\r\n",
        ]),
        Case::new("tuning commands of slabs and LRU queues")
            .reqs(&[
                b"slabs automove 0\r\n",
                b"slabs automove 2\r\n",
                b"slabs automove 3\r\n",
                b"slabs automove -1\r\n",
                b"slabs automove x\r\n",
                b"slabs automove\r\n",
                b"slabs automove 1 2\r\n",
                b"slabs automove 1 noreply\r\n",
                b"slabs automove x noreply\r\n",
                b"slabs automove ratio 0.5\r\n",
                b"slabs automove ratio\r\n",
                b"slabs automove ratio x\r\n",
                b"slabs reassign 1 2\r\n",
                b"slabs reassign 1\r\n",
                b"slabs reassign x y\r\n",
                b"slabs reassign -1 2\r\n",
                b"slabs reassign 1 1\r\n",
                b"slabs reassign 2 1\r\n",
                b"slabs reassign 39 1\r\n",
                b"slabs reassign 40 1\r\n",
                b"slabs reassign 1 0\r\n",
                b"slabs reassign 0 1\r\n",
                b"slabs reassign 100 1\r\n",
                b"slabs reassign 1 2 3\r\n",
                b"slabs reassign 1 2 noreply\r\n",
                b"slabs foo\r\n",
                b"lru tune 10 10 0.1 2\r\n",
                b"lru tune 10 10 0.1\r\n",
                b"lru tune 10 10 0.1 x\r\n",
                b"lru tune 90 50 0.1 2\r\n",
                b"lru tune 10 10 0 2\r\n",
                b"lru tune -1 10 0.1 2\r\n",
                b"lru tune 10 10 0.1 2 5\r\n",
                b"lru tune 15 25 0.3 3 noreply\r\n",
                b"lru tune\r\n",
                b"lru mode flat\r\n",
                b"lru mode x\r\n",
                b"lru mode\r\n",
                b"lru temp_ttl 5\r\n",
                b"lru temp_ttl x\r\n",
                b"lru temp_ttl\r\n",
                b"lru\r\n",
                b"refresh_certs\r\n",
                b"refresh_certs x\r\n",
                b"refresh_certs noreply\r\n",
            ])
            // What the commands set is what stats settings shows, as in memcached.
            .stats(
                "settings",
                &[
                    ("slab_automove", Base::Abs),
                    ("slab_automove_ratio", Base::Abs),
                    ("hot_lru_pct", Base::Abs),
                    ("warm_lru_pct", Base::Abs),
                    ("hot_max_factor", Base::Abs),
                    ("warm_max_factor", Base::Abs),
                    ("lru_segmented", Base::Abs),
                    ("temp_lru", Base::Abs),
                    ("temporary_ttl", Base::Abs),
                ],
            )
            .reqs(&[
                b"lru mode segmented\r\n",
                b"lru temp_ttl -1 noreply\r\n",
                b"lru_crawler sleep 250\r\n",
                b"lru_crawler tocrawl 7\r\n",
            ])
            .stats(
                "settings",
                &[
                    ("lru_segmented", Base::Abs),
                    ("temp_lru", Base::Abs),
                    ("temporary_ttl", Base::Abs),
                    ("lru_crawler_sleep", Base::Abs),
                    ("lru_crawler_tocrawl", Base::Abs),
                ],
            ),
        Case::new("stats groups with extra arguments")
            .req(b"stats detail dump extra\r\n")
            .req(b"stats extstore\r\n"),
        Case::new("long lines that do end")
            .req(cat(&[&vec![b'x'; 2000], b"\r\n"]))
            .req(cat(&[&vec![b'x'; 3000], b"\r\n"]))
            .req(cat(&[b"set ", &key(3000, b'k'), b" 0 0 1\r\na\r\n"]))
            .req(cat(&[b"mg ", &key(3000, b'k'), b" v\r\n"]))
            .req(cat(&[b"mn ", &b"O1 ".repeat(1000), b"\r\n"])),
        Case::new("storage commands, good").reqs(&[
            b"set sg 5 0 3\r\nabc\r\n",
            b"get sg\r\n",
            b"set sg 4294967295 0 0\r\n\r\n",
            b"get sg\r\n",
            b"add sg 0 0 1\r\nz\r\n",
            b"add sg2 0 0 1\r\nz\r\n",
            b"replace sg-nope 0 0 1\r\nz\r\n",
            b"replace sg 1 0 1\r\nr\r\n",
            b"append sg 5 0 2\r\nzz\r\n",
            b"prepend sg 5 0 2\r\nyy\r\n",
            b"append sg-nope 0 0 1\r\nz\r\n",
            b"prepend sg-nope 0 0 1\r\nz\r\n",
            b"get sg sg2 sg-nope\r\n",
            b"set sg +7 +0 +2\r\nhi\r\n",
            b"get sg\r\n",
            b"set sg \t8 0 2\r\nhi\r\n",
            b"get sg\r\n",
            b"set  sg   9  0  2 \r\nhi\r\n",
            b"get sg\r\n",
            b"set sg 0 0 5\r\na\r\nb\r\n\r\n",
            b"get sg\r\n",
            b"set sg 0 0 2\r\nabset sg2 0 0 1\r\nx\r\n",
        ]),
        Case::new("storage commands, bad arguments").reqs(&[
            b"set\r\n",
            b"set sb\r\n",
            b"set sb 0\r\n",
            b"set sb 0 0\r\n",
            b"add sb 0 0\r\n",
            b"replace sb\r\n",
            b"append sb 0\r\n",
            b"prepend\r\n",
            b"set sb 0 0 1 2 3\r\nx\r\n",
            b"set sb 0 0 1 noreply extra\r\nx\r\n",
            b"set sb x 0 1\r\na\r\n",
            b"set sb 0 x 1\r\na\r\n",
            b"set sb 0 0 x\r\na\r\n",
            b"set sb 1x 0 1\r\na\r\n",
            b"set sb 0 1.5 1\r\na\r\n",
            b"set sb -1 0 1\r\na\r\n",
            b"set sb 0 0 -1\r\na\r\n",
            b"set sb 0 0 -0\r\n\r\n",
            b"add sb 0 0 -5\r\na\r\n",
            b"replace sb x 0 1\r\na\r\n",
            b"append sb 0 0 -5\r\nz\r\n",
            b"prepend sb 0 x 1\r\nz\r\n",
            b"set sb 0 0 2147483647\r\n",
        ]),
        Case::new("storage commands, too-long keys")
            .req(cat(&[b"set ", &k251, b" 0 0 1\r\nx\r\n"]))
            .req(cat(&[b"add ", &k251, b" 0 0 1\r\nx\r\n"]))
            .req(cat(&[b"replace ", &k251, b" 0 0 1\r\nx\r\n"]))
            .req(cat(&[b"append ", &k251, b" 0 0 1\r\nx\r\n"]))
            .req(cat(&[b"prepend ", &k251, b" 0 0 1\r\nx\r\n"]))
            .req(cat(&[b"cas ", &k251, b" 0 0 1 1\r\nx\r\n"]))
            .req(cat(&[b"set ", &k251, b" 0 0 1 noreply\r\nx\r\n"]))
            .req(cat(&[b"set ", &k250, b" 0 0 1\r\nx\r\n"]))
            .req(cat(&[b"get ", &k250, b"\r\n"])),
        Case::new("storage commands, out-of-range numbers")
            .req(b"set sr 4294967296 0 1\r\na\r\n")
            .allow(NUMBERS)
            .req(b"set sr 0 2147483648 1\r\na\r\n")
            .allow(NUMBERS)
            .req(b"set sr 0 -2147483649 1\r\na\r\n")
            .allow(NUMBERS)
            .req(b"delete sr\r\n")
            .allow(NUMBERS)
            .req(b"set sr 0 0 4294967297\r\na\r\n")
            .req(b"get sr\r\n"),
        Case::new("storage commands, bad data chunk").reqs(&[
            b"set sd 0 0 3\r\nabcde\r\n",
            b"set sd 0 0 3\r\nabc\n\r\n",
            b"set sd 0 0 3\r\nabcd\r\n",
            b"set sd 0 0 3\r\nab\r\n\r\n",
            b"set sd 0 0 0\r\nxy\r\n",
            b"set sd 0 0 3 noreply\r\nabcde\r\n",
            b"add sd 0 0 1\r\nxyz\r\n",
            b"cas sd 0 0 1 1\r\nxyz\r\n",
            b"ms sd 3\r\nabcde\r\n",
            b"ms sd 3 q\r\nabcde\r\n",
            b"get sd\r\n",
        ]),
        Case::new("storage commands, noreply").reqs(&[
            b"set sn 0 0 1 noreply\r\na\r\n",
            b"add sn 0 0 1 noreply\r\nb\r\n",
            b"add sn2 0 0 1 noreply\r\nb\r\n",
            b"replace sn 0 0 1 noreply\r\nc\r\n",
            b"replace sn-nope 0 0 1 noreply\r\nc\r\n",
            b"append sn 0 0 1 noreply\r\nd\r\n",
            b"prepend sn 0 0 1 noreply\r\ne\r\n",
            b"append sn-nope 0 0 1 noreply\r\nd\r\n",
            b"get sn sn2\r\n",
            b"set sn x 0 1 noreply\r\na\r\n",
            b"set sn 0 0 -1 noreply\r\na\r\n",
            b"set sn 0 0 noreply\r\na\r\n",
            b"cas sn 0 0 1 1 noreply\r\na\r\n",
            b"cas sn-nope 0 0 1 1 noreply\r\na\r\n",
            b"cas sn 0 0 1 x noreply\r\na\r\n",
            b"set sn 0 0 1 NOREPLY\r\na\r\n",
            b"set sn 0 0 1 noreplyx\r\na\r\n",
            b"get sn\r\n",
        ]),
        Case::new("storage commands, too large")
            .req(b"set tl 0 0 5\r\nsmall\r\n")
            .req(cat(&[b"add tl 0 0 1048577\r\n", &big, b"\r\n"]))
            .req(b"get tl\r\n")
            .req(cat(&[b"append tl 0 0 1048577\r\n", &big, b"\r\n"]))
            .req(b"get tl\r\n")
            .req(cat(&[b"set tl 0 0 1048577\r\n", &big, b"\r\n"]))
            .req(b"get tl\r\n")
            .req(cat(&[b"set tl 0 0 1048577 noreply\r\n", &big, b"\r\n"]))
            .req(b"set tl 0 0 5\r\nsmall\r\n")
            .req(cat(&[b"ms tl 1048577 q\r\n", &big, b"\r\n"]))
            .req(b"get tl\r\n")
            .req(cat(&[b"set tl2 0 0 1048000\r\n", &big[..1048000], b"\r\n"]))
            .req(b"mg tl2 s\r\n")
            // Every refusal above counts in store_too_large (cases before this one store
            // nothing too large).
            .stats("", &[("store_too_large", Base::Abs)]),
        Case::new("cas").reqs(&[
            b"cas\r\n",
            b"cas ck\r\n",
            b"cas ck 0 0 1\r\nx\r\n",
            b"cas ck 0 0 1 abc\r\nx\r\n",
            b"cas ck 0 0 1 -1\r\nx\r\n",
            b"cas ck 0 0 1 1x\r\nx\r\n",
            b"cas ck 0 0 1 18446744073709551616\r\nx\r\n",
            b"cas ck 0 0 1 1 2 3\r\nx\r\n",
            b"cas ck 0 0 1 1\r\nx\r\n",
            b"set ck 0 0 1\r\na\r\n",
            b"cas ck 0 0 1 99999999999\r\nx\r\n",
            b"gets ck\r\n",
            b"cas ck 0 0 1 {CAS}\r\nC\r\n",
            b"cas ck 0 0 1 {CAS}\r\nD\r\n",
            b"gets ck\r\n",
            b"cas ck 7 0 1 {CAS} noreply\r\nE\r\n",
            b"gets ck\r\n",
            b"cas ck 0 0 1 1 noreply\r\nF\r\n",
            b"get ck\r\n",
            b"delete ck\r\n",
            b"cas ck 0 0 1 {CAS}\r\nG\r\n",
        ]),
        Case::new("get, gets, gat, gats")
            .reqs(&[
                b"get\r\n",
                b"gets\r\n",
                b"gat\r\n",
                b"gats\r\n",
                b"get \r\n",
                b"gat 0\r\n",
                b"gats 0\r\n",
                b"gat 0 \r\n",
                b"bget\r\n",
                b"set rk 3 0 2\r\nhi\r\n",
                b"get rk\r\n",
                b"gets rk\r\n",
                b"get rk rk-nope rk\r\n",
                b"gets rk-nope rk\r\n",
                b"get  rk   rk \r\n",
                b"bget rk\r\n",
                b"gat 100 rk rk-nope\r\n",
                b"gats 100 rk\r\n",
                b"gat abc rk\r\n",
                b"gat 1x rk\r\n",
                b"gats -1 rk\r\n",
                b"get rk\r\n",
            ])
            .req(cat(&[b"get ", &many, b"\r\n"]))
            .req(b"set mk7 0 0 1\r\n7\r\nset mk93 0 0 2\r\n93\r\n")
            .req(cat(&[b"get ", &many, b"\r\n"]))
            .req(cat(&[b"gets ", &many, b"\r\n"]))
            .req(cat(&[b"gat 0 ", &many, b"\r\n"]))
            .req(cat(&[b"set ", &k250, b" 0 0 1\r\nL\r\n"]))
            .req(cat(&[b"get ", &k250, b"\r\n"]))
            .req(cat(&[b"get ", &k251, b"\r\n"]))
            .req(cat(&[b"get mk7 ", &k251, b" mk93\r\n"]))
            .req(cat(&[b"gets mk7 ", &k251, b"\r\n"]))
            .req(cat(&[b"gat 0 mk7 ", &k251, b"\r\n"]))
            .req(cat(&[
                b"get ",
                &[&k250[..], b" "].concat().repeat(20),
                b"\r\n",
            ])),
        // Extra tokens go to a missing key, so that both servers keep the same items
        // whichever way they answer.
        Case::new("delete")
            .reqs(&[
                b"delete\r\n",
                b"delete dk-nope\r\n",
                b"set dk 0 0 1\r\na\r\n",
            ])
            .req(b"delete dk-nope 5\r\n")
            .allow(DELETE_TOKENS)
            .req(b"delete dk-nope x\r\n")
            .allow(DELETE_TOKENS)
            .req(b"delete dk-nope 0 0\r\n")
            .allow(DELETE_TOKENS)
            .reqs(&[
                b"delete dk-nope 5 noreply\r\n",
                b"delete dk 0\r\n",
                b"delete dk 0\r\n",
                b"set dk 0 0 1\r\na\r\n",
                b"delete dk noreply\r\n",
                b"delete dk\r\n",
                b"set dk 0 0 1\r\na\r\n",
                b"delete dk 0 noreply\r\n",
                b"get dk\r\n",
            ])
            .req(b"delete dk-nope noreply 0\r\n")
            .allow(DELETE_TOKENS)
            .req(b"delete a b c d\r\n")
            .allow(DELETE_TOKENS)
            .req(b"delete a b c d e\r\n")
            .allow(DELETE_TOKENS)
            .req(cat(&[b"delete ", &k251, b"\r\n"]))
            .req(cat(&[b"delete ", &k251, b" noreply\r\n"])),
        Case::new("incr and decr")
            .reqs(&[
                b"incr\r\n",
                b"incr n\r\n",
                b"decr n\r\n",
                b"incr n 1 2 3\r\n",
                b"incr n-nope 1\r\n",
                b"decr n-nope 1\r\n",
                b"set n 0 0 2\r\n10\r\n",
                b"incr n 5\r\n",
                b"incr n abc\r\n",
                b"incr n -1\r\n",
                b"incr n 1.5\r\n",
                b"incr n 18446744073709551616\r\n",
                b"decr n x\r\n",
                b"incr n 18446744073709551615\r\n",
                b"get n\r\n",
                b"decr n 100\r\n",
                b"get n\r\n",
                b"set n 0 0 2\r\n99\r\n",
                b"incr n 1\r\n",
                b"get n\r\n",
                b"decr n 1\r\n",
                b"get n\r\n",
                b"incr n 900\r\n",
                b"get n\r\n",
                b"set n 0 0 20\r\n18446744073709551615\r\n",
                b"incr n 1\r\n",
                b"get n\r\n",
                b"incr n 2\r\n",
                b"set n 0 0 20\r\n18446744073709551614\r\n",
                b"incr n 3\r\n",
                b"decr n 0\r\n",
                b"set n 0 0 20\r\n18446744073709551616\r\n",
                b"incr n 1\r\n",
                b"set s 0 0 3\r\nabc\r\n",
                b"incr s 1\r\n",
                b"decr s 1\r\n",
                b"set s 0 0 2\r\n-5\r\n",
                b"incr s 1\r\n",
                b"set s 0 0 3\r\n 12\r\n",
                b"incr s 1\r\n",
                b"set s 0 0 3\r\n12 \r\n",
                b"incr s 1\r\n",
                b"set s 0 0 3\r\n1 2\r\n",
                b"incr s 1\r\n",
                b"set s 0 0 0\r\n\r\n",
                b"incr s 1\r\n",
                b"set s 0 0 4\r\n12\0x\r\n",
                b"incr s 1\r\n",
                b"set s 0 0 2\r\n+5\r\n",
                b"incr s 1\r\n",
                b"set s 0 0 2\r\n-0\r\n",
                b"incr s 1\r\n",
                b"set s 0 0 2\r\n\x0b5\r\n",
                b"decr s 1\r\n",
                b"set s 0 0 3\r\n1.5\r\n",
                b"incr s 1\r\n",
                b"set s 0 0 1\r\n \r\n",
                b"incr s 1\r\n",
                b"set s 0 0 25\r\n1234567890123456789012345\r\n",
                b"incr s 1\r\n",
                b"set s 5 0 1\r\n9\r\n",
                b"incr s 1\r\n",
                b"gets s\r\n",
                b"incr n 1 noreply\r\n",
                b"incr n x noreply\r\n",
                b"incr n-nope 1 noreply\r\n",
                b"decr s 1 noreply\r\n",
                b"get s\r\n",
            ])
            .req(cat(&[b"incr ", &k251, b" 1\r\n"])),
        Case::new("touch")
            .reqs(&[
                b"touch\r\n",
                b"touch tk\r\n",
                b"touch tk 1 2 3\r\n",
                b"touch tk-nope 100\r\n",
                b"set tk 0 0 1\r\na\r\n",
                b"touch tk 100\r\n",
                b"mg tk t\r\n",
                b"touch tk abc\r\n",
                b"touch tk 1x\r\n",
                b"touch tk 0\r\n",
                b"mg tk t\r\n",
                b"touch tk 10 noreply\r\n",
                b"touch tk x noreply\r\n",
                b"touch tk-nope 10 noreply\r\n",
                b"mg tk t\r\n",
                b"touch tk -1\r\n",
                b"get tk\r\n",
            ])
            .req(cat(&[b"touch ", &k251, b" 1\r\n"])),
        Case::new("verbosity").reqs(&[
            b"verbosity\r\n",
            b"verbosity invalid\r\n",
            b"verbosity 1 noreply\r\n",
            b"verbosity 1\r\n",
            b"verbosity 0\r\n",
            b"verbosity 1 2\r\n",
            b"verbosity 1 2 3\r\n",
            b"verbosity -1\r\n",
            b"verbosity x noreply\r\n",
            b"verbosity noreply\r\n",
            b"verbosity 4294967295\r\n",
            b"verbosity 1\r\n",
        ]),
        Case::new("verbosity, out-of-range level").req(b"verbosity 99999999999\r\n"),
        Case::new("version").reqs(&[b"version\r\n", b"version x\r\n", b"version x y z\r\n"]),
        Case::new("shutdown without -A").reqs(&[b"shutdown\r\n", b"shutdown graceful\r\n"]),
        Case::new("shutdown with a bad mode, without -A")
            .req(b"shutdown foo\r\n")
            .req(b"shutdown graceful now\r\n"),
        Case::new("cache_memlimit").reqs(&[
            b"cache_memlimit\r\n",
            b"cache_memlimit 1 2 3\r\n",
            b"cache_memlimit 0\r\n",
            b"cache_memlimit 7\r\n",
            b"cache_memlimit 7 noreply\r\n",
            b"cache_memlimit abc\r\n",
            b"cache_memlimit abc noreply\r\n",
            b"cache_memlimit -1\r\n",
            b"cache_memlimit 8\r\n",
            b"cache_memlimit 8 noreply\r\n",
            b"cache_memlimit 1000000001\r\n",
            b"cache_memlimit 2000000000\r\n",
            b"cache_memlimit 4294967295\r\n",
            b"cache_memlimit 1000000000\r\n",
            b"cache_memlimit 64 extra\r\n",
            b"cache_memlimit 64\r\n",
        ]),
        Case::new("cache_memlimit, out-of-range value")
            .req(b"cache_memlimit 4294967296\r\n")
            .req(b"cache_memlimit 64\r\n"),
        Case::new("stats (shape only)").reqs(&[
            b"stats\r\n",
            b"stats  \r\n",
            b"stats settings\r\n",
            b"stats items\r\n",
            b"stats slabs\r\n",
            b"stats sizes\r\n",
            b"stats conns\r\n",
            b"stats detail\r\n",
            b"stats detail on\r\n",
            b"stats detail dump\r\n",
            b"stats detail off\r\n",
            b"stats detail bogus\r\n",
            b"stats cachedump\r\n",
            b"stats cachedump 1\r\n",
            b"stats bogus\r\n",
            b"stats reset\r\n",
            b"stats reset extra\r\n",
        ]),
        Case::new("expiry edge cases").reqs(&[
            // Negative: expired at once.
            b"set e1 0 -1 1\r\na\r\n",
            b"get e1\r\n",
            b"set e1 0 -2147483648 1\r\na\r\n",
            b"get e1\r\n",
            // Absolute times in the past and future.
            b"set e2 0 {NOW-100} 1\r\na\r\n",
            b"get e2\r\n",
            b"set e3 0 {NOW+100} 1\r\na\r\n",
            b"mg e3 t v\r\n",
            // Exactly 30 days is relative; one more second is an absolute time in 1970.
            b"set e4 0 2592000 1\r\na\r\n",
            b"mg e4 t v\r\n",
            b"set e5 0 2592001 1\r\na\r\n",
            b"get e5\r\n",
            b"set e6 0 2147483647 1\r\na\r\n",
            b"mg e6 t\r\n",
            // The same rules for touch, gat and the meta T/N flags.
            b"touch e3 -1\r\n",
            b"get e3\r\n",
            b"set e7 0 0 1\r\na\r\n",
            b"touch e7 {NOW-5}\r\n",
            b"get e7\r\n",
            b"set e7 0 0 1\r\na\r\n",
            b"touch e7 2592001\r\n",
            b"get e7\r\n",
            b"set e8 0 0 1\r\na\r\n",
            b"gat -1 e8\r\n",
            b"get e8\r\n",
            b"set e8 0 0 1\r\na\r\n",
            b"gats {NOW+1000} e8\r\n",
            b"mg e8 t\r\n",
            b"gat {NOW-10} e8\r\n",
            b"get e8\r\n",
            b"ms e9 1 T-1\r\na\r\n",
            b"mg e9\r\n",
            b"ms e9 1 T{NOW+50}\r\na\r\n",
            b"mg e9 t\r\n",
            b"ms e9 1 T{NOW-50}\r\na\r\n",
            b"mg e9\r\n",
            b"ma e10 N-1 J5\r\n",
            b"mg e10 v\r\n",
            b"ma e11 N0 J5 v t\r\n",
            b"set e12 0 0 1\r\na\r\n",
            b"mg e12 T-1\r\n",
            b"mg e12\r\n",
            b"mg e13 N{NOW+30} t v\r\n",
        ]),
        Case::new("pipelined requests in one write").reqs(&[
            b"set p1 0 0 1\r\na\r\nset p2 0 0 1\r\nb\r\nget p1 p2\r\ndelete p1\r\nget p1\r\n",
            b"incr p3 1\r\nbogus\r\nversion\r\nset p3 0 0 1 noreply\r\n5\r\nincr p3 2\r\n",
            b"mg p2 v q\r\nmg p9 v q\r\nmg p9 v k O1\r\nmn\r\nmg p2 k\r\n",
        ]),
        Case::new("meta commands with blank flags").reqs(&[
            b"mg  bk  v\r\n",
            b"mg bk \r\n",
            b"ms bk 1 \r\na\r\n",
            b"ms bk  1  \r\nb\r\n",
            b"mg bk  v \r\n",
            b"ma bk \r\n",
            b"md bk \r\n",
            b"me bk \r\n",
            b"mn \r\n",
        ]),
        Case::new("mg")
            .reqs(&[
                b"mg\r\n",
                b"mg gk\r\n",
                b"mg gk v\r\n",
                b"ms gk 1 F3\r\na\r\n",
                b"mg gk\r\n",
                b"mg gk v\r\n",
                b"mg gk s v f t\r\n",
                b"mg gk c\r\n",
                b"mg gk k O123 q\r\n",
                b"mg gk v q\r\n",
                b"mg gk-nope v q\r\n",
                b"mg gk-nope v\r\n",
                b"mg gk-nope v q O9 k\r\n",
                b"mg gk-nope v O9 k\r\n",
                b"mg gk !\r\n",
                b"mg gk vv\r\n",
                b"mg gk v v\r\n",
                b"mg gk \x80\r\n",
                b"mg gk O\r\n",
                b"mg gk Oabcdefghijabcdefghijabcdefghijab\r\n",
                b"mg gk Oabcdefghijabcdefghijabcdefghija\r\n",
                b"mg gk T\r\n",
                b"mg gk Tabc v\r\n",
                b"mg gk N30 v\r\n",
                b"mg gk R abc\r\n",
                b"mg gk R30 v c\r\n",
                b"mg gk u h l\r\n",
                b"mg gk h l\r\n",
                b"mg gk  v   f \r\n",
                b"mg gk P L\r\n",
                b"mg gk S1\r\n",
                b"mg gk O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1\r\n",
                b"mg gk s v f t c k h l u q O1 O2 O3 O4 O5 O6 O7\r\n",
                b"mg gk s f t k h l u q O1 O2 O3 O4 O5 O6 O7 O8\r\n",
            ])
            .req(cat(&[b"mg ", &k251, b" v\r\n"]))
            .req(cat(&[b"mg ", &k250, b" v\r\n"]))
            .req(b"mg gk v E5\r\n"),
        Case::new("base64 keys")
            .reqs(&[
                b"mg a2V5 b v k\r\n",
                b"ms a2V5 2 b\r\nhi\r\n",
                b"mg a2V5 b v k\r\n",
            ])
            .req(b"mg key v k\r\n")
            .allow(KEY_BINARY)
            .reqs(&[
                b"get key\r\n",
                b"mg a2V5= b v\r\n",
                b"mg !!!! b v\r\n",
                b"mg a2V5 b b\r\n",
                b"ms !!!! 2 b\r\nhi\r\n",
                b"ms a2V5 2 b k c\r\nho\r\n",
                b"ma a2V5 b\r\n",
                b"md a2V5 b q\r\n",
                b"mg key v\r\n",
                b"md a2V5 b\r\n",
                b"me a2V5 b\r\n",
                b"me !!! b\r\n",
                b"set key 0 0 1\r\n1\r\n",
                b"ma a2V5 b v k\r\n",
                b"mg AAEC b k v\r\n",
                b"ms AAEC 1 b k\r\nx\r\n",
                b"mg AAEC b k v\r\n",
            ]),
        Case::new("ms")
            .reqs(&[
                b"ms\r\n",
                b"ms mk\r\n",
                b"ms mk abc\r\na\r\n",
                b"ms mk -1\r\na\r\n",
                b"ms mk 1x\r\na\r\n",
                b"ms mk 1 MX\r\na\r\n",
                b"ms mk 1 Mx\r\na\r\n",
                b"ms mk 1 M\r\na\r\n",
                b"ms mk 1 MZZ\r\nz\r\n",
                b"ms mk 1 ME\r\na\r\n",
                b"ms mk 1 ME\r\nb\r\n",
                b"ms mk 1 MA\r\nb\r\n",
                b"ms mk 1 MP\r\nc\r\n",
                b"ms mk 1 MR\r\nd\r\n",
                b"ms mk 1 Ms\r\nd\r\n",
                b"ms mk 1 MS\r\ne\r\n",
                b"mg mk v\r\n",
                b"ms mk-nope 1 MR\r\na\r\n",
                b"ms mk-nope 1 MA\r\na\r\n",
                b"ms mk 1 !\r\na\r\n",
                b"ms mk 1 q\r\na\r\n",
                b"ms mk 1 q MA\r\na\r\n",
                b"ms mk-nope 1 q MR\r\na\r\n",
                b"ms mk 1 c\r\nz\r\n",
                b"ms mk 1 I\r\nz\r\n",
                b"ms mk 1 T-1\r\nz\r\n",
                b"mg mk v\r\n",
                b"ms mk 1 F5 T0 O77 k\r\nz\r\n",
                b"mg mk f v\r\n",
                b"ms mk 1 Fabc\r\nz\r\n",
                b"ms mk 1 F-1\r\nz\r\n",
                b"ms mk 1 Tx\r\nz\r\n",
                b"ms mk 1 C1\r\nz\r\n",
                b"ms mk 1 Cx\r\nz\r\n",
                b"mg mk c\r\n",
                b"ms mk 1 C{CAS} c\r\ny\r\n",
                b"ms mk 1 C{CAS} MA\r\ny\r\n",
                b"ms mk 1 S1\r\nz\r\n",
                b"ms mk 1 O1 O2\r\nz\r\n",
                b"ms mk 1 v\r\nz\r\n",
                b"ms mk 1 Oabcdefghijabcdefghijabcdefghijab\r\nz\r\n",
                b"ms mk 1 MX Oabcdefghijabcdefghijabcdefghijab\r\nz\r\n",
                b"ms mk 0\r\n\r\n",
                b"mg mk v s\r\n",
                b"ms mk 1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1\r\nz\r\n",
                b"ms mk 1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1\r\nz\r\n",
                b"ms mk 1 q T0 F0 O1 k c I MS\r\nz\r\n",
            ])
            .req(cat(&[b"ms ", &k251, b" 1\r\nz\r\n"]))
            .req(b"ms mk 2 E12345\r\nhi\r\n"),
        Case::new("md").reqs(&[
            b"md\r\n",
            b"md dk\r\n",
            b"set dk 0 0 1\r\na\r\n",
            b"md dk\r\n",
            b"md dk\r\n",
            b"md dk !\r\n",
            b"md dk vv\r\n",
            b"md dk O5 k\r\n",
            b"md dk v\r\n",
            b"md dk C1\r\n",
            b"md dk I\r\n",
            b"md dk Cx\r\n",
            b"md dk Tx\r\n",
            b"md dk Oabcdefghijabcdefghijabcdefghijab\r\n",
            b"set dk 0 0 1\r\na\r\n",
            b"md dk q\r\n",
            b"mg dk\r\n",
            b"set dk 0 0 1\r\na\r\n",
            b"md dk C1 q\r\n",
            b"md dk I T30 O9 k\r\n",
            b"mg dk v c t\r\n",
            b"mg dk v\r\n",
            b"mg dk v\r\n",
            b"md dk\r\n",
            b"md dk O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1\r\n",
        ]),
        Case::new("md and ma, quiet misses")
            .req(b"md dk-nope q\r\n")
            .req(b"ma ak-nope q\r\n"),
        Case::new("ma")
            .reqs(&[
                b"ma\r\n",
                b"ma an\r\n",
                b"ma an O1 k\r\n",
                b"ma an N0 J10\r\n",
                b"ma an v\r\n",
                b"ma an MD D100 v\r\n",
                b"ma an M- v\r\n",
                b"ma an M+ D5 v\r\n",
                b"ma an MI v\r\n",
                b"ma an Md v\r\n",
                b"ma an MX\r\n",
                b"ma an MDD\r\n",
                b"ma an Dabc\r\n",
                b"ma an D-1\r\n",
                b"ma an D\r\n",
                b"ma an Jabc N0\r\n",
                b"ma an !\r\n",
                b"ma an Nx\r\n",
                b"ma an v v\r\n",
                b"ma an q\r\n",
                b"mg an v\r\n",
                b"ma an M+ D18446744073709551615 v\r\n",
                b"ma an D18446744073709551616 v\r\n",
                b"ma an MI D5 v t\r\n",
                b"ma an C1\r\n",
                b"ma an v O1 k\r\n",
                b"ma an T30 v t\r\n",
                b"ma an Oabcdefghijabcdefghijabcdefghijab\r\n",
                b"set as 0 0 3\r\nabc\r\n",
                b"ma as\r\n",
                b"ma as v\r\n",
                b"ma as q\r\n",
                b"set as 0 0 2\r\n99\r\n",
                b"ma as v\r\n",
                b"ma as MD v\r\n",
                b"get as\r\n",
                b"ma an O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1 O1\r\n",
            ])
            .req(cat(&[b"ma ", &k251, b"\r\n"])),
        Case::new("ma, quiet hits")
            .req(b"ma aq N0 J1 q\r\n")
            .req(b"ma aq v O1 q\r\n")
            .req(b"ma aq q\r\n")
            .req(b"mg aq v\r\n"),
        Case::new("mn and me")
            .reqs(&[
                b"mn\r\n",
                b"mn x y\r\n",
                b"mn\r\nmn\r\n",
                b"me\r\n",
                b"me ek\r\n",
                b"set ek 3 0 2\r\nhi\r\n",
                b"me ek\r\n",
                b"mg ek v\r\n",
                b"me ek\r\n",
                b"me ek x y\r\n",
                b"me ek b\r\n",
                b"me ZWs b\r\n",
            ])
            .req(b"me ZWs= b\r\n")
            .req(b"me ZWs= b x\r\n")
            .allow(KEY_BINARY)
            .req(cat(&[b"me ", &k251, b"\r\n"]))
            .req(b"set ek 3 100 2\r\nhi\r\n")
            .req(b"me ek\r\n"),
    ];
    // Closing and long-line behaviour, each on its own connection.
    let closing: Vec<(&str, Vec<u8>, Option<&'static str>)> = vec![
        ("quit", b"quit\r\nversion\r\n".to_vec(), None),
        (
            "quit noreply",
            b"quit noreply\r\nversion\r\n".to_vec(),
            None,
        ),
        (
            "quit with an argument",
            b"quit now\r\nversion\r\n".to_vec(),
            None,
        ),
        (
            "HTTP request line",
            b"GET / HTTP/1.1\r\nversion\r\n".to_vec(),
            None,
        ),
        ("HTTP-like get", b"get / HTTP/1.1\r\n".to_vec(), None),
        ("2048 bytes, no newline", vec![b'x'; 2048], None),
        ("2049 bytes, no newline", vec![b'x'; 2049], None),
        ("3000 bytes, no newline", vec![b'x'; 3000], None),
        ("20000 bytes, no newline", vec![b'x'; 20000], None),
        (
            "long get, no newline",
            cat(&[b"get ", &key(3000, b'k')]),
            None,
        ),
        (
            "long gets, no newline",
            cat(&[b"gets ", &key(3000, b'k')]),
            None,
        ),
        (
            "long gat, no newline",
            cat(&[b"gat 0 ", &key(3000, b'k')]),
            None,
        ),
        (
            "long set, no newline",
            cat(&[b"set ", &key(3000, b'k')]),
            None,
        ),
        (
            "long mg, no newline",
            cat(&[b"mg ", &key(3000, b'k')]),
            None,
        ),
        (
            "long get after 150 spaces",
            cat(&[&[b' '; 150], b"get ", &key(3000, b'k')]),
            None,
        ),
        (
            "long get after 50 spaces",
            cat(&[&[b' '; 50], b"get ", &key(3000, b'k')]),
            None,
        ),
        (
            "reply before an over-long line",
            cat(&[b"version\r\n", &vec![b'x'; 5000]]),
            Some(CLOSE_FLUSHES),
        ),
    ];
    for (name, bytes, allow) in closing {
        let mut case = Case::new(&format!("close: {name}")).raw(bytes);
        if let Some(reason) = allow {
            case = case.allow(reason);
        }
        // What is left of the connection (if anything) then ends the line.
        cases.push(case.req(b"\r\n"));
    }
    cases
}

fn flush_cases() -> Vec<Case> {
    vec![
        Case::new("flush_all arguments")
            .reqs(&[
                b"set f1 0 0 1\r\na\r\n",
                b"flush_all\r\n",
                b"get f1\r\n",
                b"flush_all noreply\r\n",
                b"flush_all 0\r\n",
                b"flush_all 0 noreply\r\n",
                b"flush_all -1\r\n",
                b"flush_all -5 noreply\r\n",
                b"flush_all 0 0\r\n",
                b"flush_all 1 2 3\r\n",
                b"set f1 0 0 1\r\na\r\n",
                b"flush_all {NOW-10}\r\n",
                b"get f1\r\n",
                b"set f1 0 0 1\r\na\r\n",
                b"get f1\r\n",
            ])
            .stats("", &[("cmd_flush", Base::Abs)])
            .reqs(&[
                b"flush_all abc\r\n",
                b"flush_all 1x\r\n",
                b"flush_all abc noreply\r\n",
                b"flush_all noreply 5\r\n",
                b"flush_all x noreply\r\n",
            ])
            .stats("", &[("cmd_flush", Base::Abs)]),
        // memcached's clock ticks once a second (and may lag the wall clock by up to a
        // tick); a delayed flush takes effect one tick early and also hides items stored in
        // its last tick. Delays of 3 s and waits of 4.3 s keep both effects away from the
        // checks.
        Case::new("flush_all with a delay")
            .reqs(&[
                b"set f2 0 0 1\r\na\r\n",
                b"flush_all 3\r\n",
                b"get f2\r\n",
                b"set f3 0 0 1\r\nb\r\n",
            ])
            .sleep(4300)
            .reqs(&[
                b"get f2 f3\r\n",
                b"set f4 0 0 1\r\nc\r\n",
                b"get f4\r\n",
                b"set f5 0 0 1\r\nd\r\n",
                b"flush_all {NOW+3} noreply\r\n",
                b"get f5\r\n",
            ])
            .sleep(4300)
            .reqs(&[b"get f5\r\n", b"set f5 0 0 1\r\ne\r\n", b"get f5\r\n"]),
        Case::new("flush_all, out-of-range delay").req(b"flush_all 99999999999\r\n"),
    ]
}

fn expiry_cases() -> Vec<Case> {
    vec![Case::new("items expire")
        .reqs(&[
            b"set x1 0 2 1\r\na\r\n",
            b"set x2 0 2 1\r\nb\r\n",
            b"ms x3 1 T2\r\nc\r\n",
            b"set x4 0 2 1\r\nd\r\n",
            b"touch x2 100\r\n",
            b"gat 0 x4\r\n",
            b"get x1 x2 x3 x4\r\n",
        ])
        .sleep(3200)
        .reqs(&[
            b"get x1 x2 x3 x4\r\n",
            b"touch x1 100\r\n",
            b"incr x3 1\r\n",
            b"add x1 0 0 1\r\nn\r\n",
            b"get x1\r\n",
        ])]
}

fn flush_disabled_cases() -> Vec<Case> {
    vec![
        Case::new("flush_all with -F")
            .reqs(&[
                b"set fd 0 0 1\r\na\r\n",
                b"flush_all\r\n",
                b"flush_all 0\r\n",
                b"flush_all 10\r\n",
                b"flush_all noreply\r\n",
                b"flush_all 5 noreply\r\n",
                b"flush_all 1 2 3\r\n",
                b"get fd\r\n",
            ])
            .stats("", &[("cmd_flush", Base::Abs)]),
        Case::new("flush_all with -F and a bad delay")
            .req(b"flush_all abc\r\n")
            .req(b"flush_all abc noreply\r\n"),
    ]
}

fn shutdown_enabled_cases() -> Vec<Case> {
    // The last step shuts both servers down (extra spaces do not count as tokens).
    vec![Case::new("shutdown with -A")
        .reqs(&[b"shutdown foo\r\n", b"shutdown graceful now\r\n"])
        .raw(b"shutdown  graceful \r\nversion\r\n")]
}

fn no_evictions_cases() -> Vec<Case> {
    // 100 KB values in 8 MB: both stores fill up after some tens of items (how many is
    // the store's business; the counters are compared relative to what was stored).
    let value = vec![b'v'; 100_000];
    let store = |cmd: &str, k: &str| {
        cat(&[
            cmd.as_bytes(),
            b" ",
            k.as_bytes(),
            b" 0 0 100000\r\n",
            &value,
            b"\r\n",
        ])
    };
    vec![
        Case::new("-M: fill up")
            .reqs(&[
                b"set counter 0 0 2\r\n99\r\n",
                b"set keep 0 0 4\r\nkeep\r\n",
            ])
            .fill("fill", 200, 100_000)
            .stats(
                "",
                &[
                    ("evictions", Base::Abs),
                    ("curr_items", Base::Stored),
                    ("total_items", Base::Stored),
                ],
            )
            .stats(
                "",
                &[
                    ("cmd_set", Base::Stored),
                    ("store_no_memory", Base::Refused),
                ],
            )
            .stats(
                "items",
                &[("outofmemory", Base::Refused), ("evicted", Base::Abs)],
            ),
        // Each refusal below is compared, and so is what it leaves behind (a set/ms refused
        // for memory removes the old value); what fits afterwards differs (SEGMENTS).
        Case::new("-M: full store")
            .req(b"get keep\r\n")
            .req(store("add", "keep"))
            .allow(CHECK_BEFORE_ALLOC)
            .req(store("append", "keep"))
            .req(store("prepend", "keep"))
            .req(store("replace", "keep"))
            .req(b"get keep\r\n")
            .req(b"incr counter 1\r\n")
            .allow(SEGMENTS)
            .req(b"get counter\r\n")
            .allow(SEGMENTS)
            .req(cat(&[b"ms fill1 100000\r\n", &value, b"\r\n"]))
            .req(b"mg fill1 s\r\n")
            .req(store("set", "refill"))
            // memcached reuses the chunk fill1's removal freed; a segment is reclaimed whole.
            .allow(SEGMENTS)
            .req(store("set", "fill0"))
            .req(b"get fill0\r\n")
            .req(b"delete fill2\r\n")
            .req(store("set", "fill2"))
            .allow(SEGMENTS)
            .stats("", &[("evictions", Base::Abs)]),
    ]
}

fn groups() -> Vec<Group> {
    vec![
        Group {
            name: "defaults",
            flags: vec![],
            cases: main_cases(),
        },
        Group {
            name: "flush",
            flags: vec![],
            cases: flush_cases(),
        },
        Group {
            name: "expiry",
            flags: vec![],
            cases: expiry_cases(),
        },
        Group {
            name: "-F",
            flags: vec!["-F"],
            cases: flush_disabled_cases(),
        },
        Group {
            name: "-A",
            flags: vec!["-A"],
            cases: shutdown_enabled_cases(),
        },
        Group {
            name: "-M -m 8",
            flags: vec!["-M", "-m", "8"],
            cases: no_evictions_cases(),
        },
    ]
}

// ---------------------------------------------------------------------------------------
// Running a case.
// ---------------------------------------------------------------------------------------

/// One client connection with a deadline on every read.
struct Client {
    stream: Option<TcpStream>,
    /// The last CAS unique seen in a reply, for `{CAS}`.
    cas: u64,
    /// The last fill's (attempts, STOREDs, refusals).
    fill: (i64, i64, i64),
}

/// How a step's reply ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The sentinel arrived (or the raw wait ran out with the connection open).
    Normal,
    /// The server closed the connection.
    Closed,
    /// No complete reply within the timeout; the connection is abandoned.
    Timeout,
    /// The connection was already gone before this step.
    Gone,
}

struct Reply {
    bytes: Vec<u8>,
    end: End,
}

impl Client {
    fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect_timeout(&addr, READ_TIMEOUT).expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        stream
            .set_write_timeout(Some(READ_TIMEOUT))
            .expect("write timeout");
        Client {
            stream: Some(stream),
            cas: 0,
            fill: (0, 0, 0),
        }
    }

    /// Sends `data`, then reads until `done` says the reply is complete, the server
    /// closes, or `deadline` passes (`timeout_is_normal`: a raw step's wait running out
    /// is not an error).
    fn exchange(
        &mut self,
        data: &[u8],
        wait: Duration,
        timeout_is_normal: bool,
        done: impl Fn(&[u8]) -> bool,
    ) -> Reply {
        let Some(stream) = self.stream.as_mut() else {
            return Reply {
                bytes: Vec::new(),
                end: End::Gone,
            };
        };
        let mut got = Vec::new();
        if let Err(e) = stream.write_all(data) {
            // The server may close while we write (an over-long line); whatever it sent
            // before is still readable.
            if !matches!(
                e.kind(),
                ErrorKind::BrokenPipe | ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
            ) {
                panic!("write: {e}");
            }
        }
        let deadline = Instant::now() + wait;
        let mut buf = vec![0u8; 64 * 1024];
        let end = loop {
            if done(&got) {
                break End::Normal;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break if timeout_is_normal {
                    End::Normal
                } else {
                    End::Timeout
                };
            }
            stream.set_read_timeout(Some(left)).expect("read timeout");
            match stream.read(&mut buf) {
                Ok(0) => break End::Closed,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(_) => break End::Closed,
            }
            assert!(got.len() < 64 << 20, "reply too long");
        };
        if end != End::Normal {
            self.stream = None;
        }
        Reply { bytes: got, end }
    }
}

/// The number of `mn` command lines in a request.
fn mn_lines(req: &[u8]) -> usize {
    req.split(|&b| b == b'\n')
        .map(|line| {
            let lead = line.iter().take_while(|&&b| b == b' ').count();
            &line[lead..]
        })
        .filter(|line| {
            line.starts_with(b"mn") && matches!(line.get(2), None | Some(b' ') | Some(b'\r'))
        })
        .count()
}

/// The number of `MN\r\n` lines in a reply.
fn mn_replies(reply: &[u8]) -> usize {
    let mut n = 0;
    let mut at = 0;
    while let Some(p) = find(&reply[at..], b"MN\r\n") {
        let pos = at + p;
        if pos == 0 || reply[pos - 1] == b'\n' {
            n += 1;
        }
        at = pos + 4;
    }
    n
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64
}

/// Replaces `{CAS}` with the client's last CAS and `{NOW+n}`/`{NOW-n}` with Unix times.
fn expand(req: &[u8], cas: u64) -> Vec<u8> {
    if !req.contains(&b'{') {
        return req.to_vec();
    }
    let now = unix_now();
    let mut out = Vec::with_capacity(req.len() + 16);
    let mut i = 0;
    while i < req.len() {
        if req[i] == b'{' {
            if let Some(len) = req[i..].iter().position(|&b| b == b'}') {
                let tag = std::str::from_utf8(&req[i + 1..i + len]).unwrap_or("");
                let value = if tag == "CAS" {
                    Some(cas.to_string())
                } else if let Some(off) = tag.strip_prefix("NOW") {
                    off.parse::<i64>().ok().map(|o| (now + o).to_string())
                } else {
                    None
                };
                if let Some(v) = value {
                    out.extend_from_slice(v.as_bytes());
                    i += len + 1;
                    continue;
                }
            }
        }
        out.push(req[i]);
        i += 1;
    }
    out
}

/// What one server said for one step, normalised.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    pieces: Vec<Piece>,
}

/// A normalised reply fragment: text compared exactly, or a time compared with a little
/// slack (the two servers' clocks tick at different moments).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Time(String, i64),
}

impl Outcome {
    fn render(&self) -> String {
        let mut s = String::new();
        for p in &self.pieces {
            match p {
                Piece::Text(t) => s.push_str(t),
                Piece::Time(prefix, v) => {
                    let _ = write!(s, "{prefix}{v}");
                }
            }
        }
        if s.is_empty() {
            s.push_str("(nothing)");
        }
        s
    }

    fn matches(&self, other: &Outcome) -> bool {
        self.pieces.len() == other.pieces.len()
            && self
                .pieces
                .iter()
                .zip(&other.pieces)
                .all(|(a, b)| match (a, b) {
                    (Piece::Time(pa, va), Piece::Time(pb, vb)) => {
                        pa == pb && (va - vb).abs() <= 2 && (*va < 0) == (*vb < 0)
                    }
                    _ => a == b,
                })
    }
}

/// Escapes bytes for display, eliding the middle of long runs.
fn esc(b: &[u8], max: usize) -> String {
    let shown = if b.len() > max {
        let head = &b[..max / 2];
        let tail = &b[b.len() - max / 2..];
        format!(
            "{}...[{} bytes]...{}",
            head.escape_ascii(),
            b.len() - max,
            tail.escape_ascii()
        )
    } else {
        b.escape_ascii().to_string()
    };
    format!("\"{shown}\"")
}

/// Builds the normalised pieces of a reply, noting the last CAS unique in `cas`.
struct Normaliser<'a> {
    pieces: Vec<Piece>,
    text: String,
    cas: &'a mut u64,
}

impl Normaliser<'_> {
    fn text(&mut self, s: &str) {
        self.text.push_str(s);
    }

    fn bytes(&mut self, b: &[u8]) {
        let s = b.escape_ascii().to_string();
        self.text.push_str(&s);
    }

    fn time(&mut self, prefix: &str, v: i64) {
        let t = std::mem::take(&mut self.text);
        if !t.is_empty() {
            self.pieces.push(Piece::Text(t));
        }
        self.pieces.push(Piece::Time(prefix.to_string(), v));
    }

    fn cas_value(&mut self, tok: &[u8]) -> bool {
        match std::str::from_utf8(tok).ok().and_then(|s| s.parse().ok()) {
            Some(v) => {
                *self.cas = v;
                true
            }
            None => false,
        }
    }

    /// A meta reply's flag tokens.
    fn meta_flags(&mut self, flags: &[&[u8]]) {
        for f in flags {
            self.text(" ");
            match f.split_first() {
                Some((b'c', rest)) if self.cas_value(rest) => self.text("c<cas>"),
                Some((&c @ (b't' | b'l'), rest)) => {
                    match std::str::from_utf8(rest).ok().and_then(|s| s.parse().ok()) {
                        Some(v) => self.time(if c == b't' { "t" } else { "l" }, v),
                        None => self.bytes(f),
                    }
                }
                _ => self.bytes(f),
            }
        }
    }

    fn finish(mut self) -> Vec<Piece> {
        let t = std::mem::take(&mut self.text);
        if !t.is_empty() {
            self.pieces.push(Piece::Text(t));
        }
        self.pieces
    }
}

fn normalise(raw: &[u8], cas: &mut u64) -> Vec<Piece> {
    let mut n = Normaliser {
        pieces: Vec::new(),
        text: String::new(),
        cas,
    };
    let mut at = 0;
    let mut in_stats = false;
    while at < raw.len() {
        let Some(eol) = find(&raw[at..], b"\r\n") else {
            n.bytes(&raw[at..]);
            break;
        };
        let line = &raw[at..at + eol];
        at += eol + 2;
        let toks: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
        // A block of STAT lines is compared by shape only.
        if line.starts_with(b"STAT ") {
            if !in_stats {
                n.text("STAT <...>\\r\\n");
            }
            in_stats = true;
            continue;
        }
        in_stats = false;
        let data_len =
            |tok: Option<&&[u8]>| -> Option<usize> { std::str::from_utf8(tok?).ok()?.parse().ok() };
        match toks[0] {
            b"VALUE" if toks.len() >= 4 => {
                n.bytes(&toks[..4].join(&b' '));
                if let Some(c) = toks.get(4) {
                    if n.cas_value(c) {
                        n.text(" <cas>");
                    } else {
                        n.text(" ");
                        n.bytes(c);
                    }
                }
                for extra in toks.iter().skip(5) {
                    n.text(" ");
                    n.bytes(extra);
                }
                n.text("\\r\\n");
                if let Some(len) = data_len(toks.get(3)) {
                    let end = (at + len + 2).min(raw.len());
                    let data = &raw[at..end];
                    at = end;
                    n.text(&esc(data, 200));
                }
            }
            b"VA" if toks.len() >= 2 => {
                n.text("VA ");
                n.bytes(toks[1]);
                n.meta_flags(&toks[2..]);
                n.text("\\r\\n");
                if let Some(len) = data_len(toks.get(1)) {
                    let end = (at + len + 2).min(raw.len());
                    let data = &raw[at..end];
                    at = end;
                    n.text(&esc(data, 200));
                }
            }
            b"HD" | b"EN" | b"NF" | b"NS" | b"EX" => {
                n.bytes(toks[0]);
                n.meta_flags(&toks[1..]);
                n.text("\\r\\n");
            }
            b"VERSION" => n.text("VERSION <version>\\r\\n"),
            b"ME" if toks.len() >= 2 => {
                n.text("ME ");
                n.bytes(toks[1]);
                for t in &toks[2..] {
                    n.text(" ");
                    let (name, value) = match t.iter().position(|&b| b == b'=') {
                        Some(p) => (&t[..p], &t[p + 1..]),
                        None => (&t[..], &b""[..]),
                    };
                    match name {
                        b"cas" => n.text("cas=<cas>"),
                        // Item size in memory is the store's own business.
                        b"size" => n.text("size=<size>"),
                        b"exp" | b"la" => {
                            match std::str::from_utf8(value).ok().and_then(|s| s.parse().ok()) {
                                Some(v) => {
                                    let prefix = format!("{}=", String::from_utf8_lossy(name));
                                    n.time(&prefix, v);
                                }
                                None => n.bytes(t),
                            }
                        }
                        _ => n.bytes(t),
                    }
                }
                n.text("\\r\\n");
            }
            _ => {
                n.bytes(line);
                n.text("\\r\\n");
            }
        }
    }
    n.finish()
}

/// Notes how a reply ended, when not normally.
fn tail(end: End, pieces: &mut Vec<Piece>) {
    match end {
        End::Normal => {}
        End::Closed => pieces.push(Piece::Text(" <closed>".into())),
        End::Timeout => pieces.push(Piece::Text(" <timeout>".into())),
        End::Gone => pieces.push(Piece::Text("<connection gone>".into())),
    }
}

/// Runs one step on one server.
fn run_step(client: &mut Client, step: &Step) -> Outcome {
    let mut pieces = Vec::new();
    match step {
        Step::Req(req) => {
            let mut data = expand(req, client.cas);
            let want = mn_lines(&data) + 1;
            data.extend_from_slice(b"mn\r\n");
            let reply = client.exchange(&data, READ_TIMEOUT, false, |got| {
                got.ends_with(b"MN\r\n") && mn_replies(got) >= want
            });
            let body = if reply.end == End::Normal {
                &reply.bytes[..reply.bytes.len() - 4]
            } else {
                &reply.bytes[..]
            };
            pieces = normalise(body, &mut client.cas);
            tail(reply.end, &mut pieces);
        }
        Step::Raw(req) => {
            let data = expand(req, client.cas);
            let reply = client.exchange(&data, RAW_WAIT, true, |_| false);
            pieces = normalise(&reply.bytes, &mut client.cas);
            tail(reply.end, &mut pieces);
        }
        Step::Sleep(d) => std::thread::sleep(*d),
        Step::Stats(group, names) => {
            let req = if group.is_empty() {
                "stats\r\n".to_string()
            } else {
                format!("stats {group}\r\n")
            };
            let reply = client.exchange(req.as_bytes(), READ_TIMEOUT, false, |got| {
                got.ends_with(b"END\r\n")
            });
            let text = String::from_utf8_lossy(&reply.bytes).into_owned();
            let mut sums: HashMap<&str, i64> = HashMap::new();
            let mut words: HashMap<&str, String> = HashMap::new();
            for line in text.split("\r\n") {
                let mut parts = line.splitn(3, ' ');
                let (Some("STAT"), Some(stat), Some(value)) =
                    (parts.next(), parts.next(), parts.next())
                else {
                    continue;
                };
                // `items:3:outofmemory` and `3:chunk_size` are summed over classes.
                let base = if group.is_empty() {
                    stat
                } else {
                    stat.rsplit(':').next().unwrap_or(stat)
                };
                if let Some((name, _)) = names.iter().find(|(n, _)| *n == base) {
                    match value.trim().parse::<i64>() {
                        Ok(v) => *sums.entry(name).or_default() += v,
                        // `stats settings` values such as `0.10` or `yes` are compared as
                        // text.
                        Err(_) => {
                            words.insert(name, value.trim().to_string());
                        }
                    }
                }
            }
            let mut s = String::new();
            for (name, base) in names {
                if let Some(word) = words.get(name) {
                    let _ = write!(s, "{name}={word} ");
                    continue;
                }
                let Some(v) = sums.get(name) else {
                    let _ = write!(s, "{name}=<missing> ");
                    continue;
                };
                let (label, reference) = match base {
                    Base::Abs => ("", 0),
                    Base::Stored => ("stored", client.fill.1),
                    Base::Refused => ("refused", client.fill.2),
                };
                let diff = v - reference;
                let _ = match (label, diff) {
                    ("", _) => write!(s, "{name}={v} "),
                    (_, 0) => write!(s, "{name}={label} "),
                    _ => write!(s, "{name}={label}{diff:+} "),
                };
            }
            pieces.push(Piece::Text(s.trim_end().to_string()));
            tail(reply.end, &mut pieces);
        }
        Step::Fill {
            prefix,
            count,
            size,
        } => {
            let value = vec![b'v'; *size];
            let mut kinds: Vec<String> = Vec::new();
            let mut stored_after_refusal = false;
            let (mut attempts, mut stored, mut refused) = (0, 0, 0);
            let mut last_end = End::Normal;
            for i in 0..*count {
                attempts += 1;
                let mut req = format!("set {prefix}{i} 0 0 {size}\r\n").into_bytes();
                req.extend_from_slice(&value);
                req.extend_from_slice(b"\r\n");
                let reply =
                    client.exchange(&req, READ_TIMEOUT, false, |got| got.ends_with(b"\r\n"));
                last_end = reply.end;
                let line = String::from_utf8_lossy(&reply.bytes).trim_end().to_string();
                if line == "STORED" {
                    stored += 1;
                    stored_after_refusal |= refused > 0;
                } else {
                    refused += 1;
                }
                if !kinds.contains(&line) {
                    kinds.push(line);
                }
                if reply.end != End::Normal {
                    break;
                }
            }
            let mut s = kinds.join(", then ");
            if stored_after_refusal {
                s.push_str(" (a STORED after a refusal)");
            }
            if refused == 0 {
                s.push_str(" (never refused)");
            }
            pieces.push(Piece::Text(s));
            tail(last_end, &mut pieces);
            client.fill = (attempts, stored, refused);
        }
    }
    Outcome { pieces }
}

struct StepResult {
    group: &'static str,
    case: String,
    step: String,
    allow: Option<&'static str>,
    memcached: Outcome,
    shoald: Outcome,
}

/// Runs every step of `case` on one server, skipping what is left once `deadline` passes.
fn run_steps(addr: SocketAddr, case: &Case, deadline: Instant) -> Vec<Outcome> {
    let mut c = Client::connect(addr);
    case.steps
        .iter()
        .map(|(step, _)| {
            if Instant::now() > deadline {
                Outcome {
                    pieces: vec![Piece::Text(SKIPPED.into())],
                }
            } else {
                run_step(&mut c, step)
            }
        })
        .collect()
}

fn run_case(
    mc_addr: SocketAddr,
    sh_addr: SocketAddr,
    case: &Case,
    deadline: Instant,
) -> Vec<(Outcome, Outcome)> {
    // Both servers at once, so sleeps overlap.
    std::thread::scope(|s| {
        let mc = s.spawn(|| run_steps(mc_addr, case, deadline));
        let sh = run_steps(sh_addr, case, deadline);
        let mc = mc.join().expect("memcached side");
        mc.into_iter().zip(sh).collect()
    })
}

fn run_group(memcached: &Path, group: Group, deadline: Instant) -> Vec<StepResult> {
    let memcached = Memcached::start_bin(memcached, &group.flags);
    let shoald = Server::with_args(&group.flags);
    let sh_addr = shoald.addr.expect("tcp");
    let mut out = Vec::new();
    for case in &group.cases {
        let results = run_case(memcached.addr(), sh_addr, case, deadline);
        for ((step, allow), (mc, sh)) in case.steps.iter().zip(results) {
            out.push(StepResult {
                group: group.name,
                case: case.name.clone(),
                step: step.describe(),
                allow: *allow,
                memcached: mc,
                shoald: sh,
            });
        }
    }
    out
}

#[test]
fn replies_match_memcached() {
    // memcached 1.6.45 is the reference for shoald's replies (Debian's 1.6.18 answers
    // many malformed requests differently).
    let Some(memcached) = shoal_test_support::memcached::reference() else {
        return;
    };
    let memcached = memcached.as_path();
    let started = Instant::now();
    let deadline = started + BUDGET;
    let groups = groups();
    let results: Vec<StepResult> = std::thread::scope(|s| {
        let handles: Vec<_> = groups
            .into_iter()
            .map(|g| s.spawn(move || run_group(memcached, g, deadline)))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("group thread"))
            .collect()
    });
    let cases: std::collections::HashSet<(&str, &str)> =
        results.iter().map(|r| (r.group, r.case.as_str())).collect();
    let mut failures = 0;
    let mut allowed = 0;
    let mut report = String::new();
    // SHOAL_PARITY_VERBOSE=1 also prints every step that matches, to review the corpus.
    let verbose = std::env::var_os("SHOAL_PARITY_VERBOSE").is_some();
    for r in &results {
        let same = r.memcached.matches(&r.shoald);
        match (same, r.allow) {
            (true, None) => {
                if verbose {
                    let _ = writeln!(
                        report,
                        "same [{}] {}\n  request:   {}\n  both:      {}",
                        r.group,
                        r.case,
                        r.step,
                        r.memcached.render()
                    );
                }
            }
            (true, Some(reason)) => {
                let _ = writeln!(
                    report,
                    "NOTE [{}] {}: {}\n  allowed difference no longer differs ({reason})",
                    r.group, r.case, r.step
                );
            }
            (false, allow) => {
                let label = match allow {
                    Some(reason) => {
                        allowed += 1;
                        format!("ALLOWED ({reason})")
                    }
                    None => {
                        failures += 1;
                        "MISMATCH".to_string()
                    }
                };
                let _ = writeln!(
                    report,
                    "{label} [{}] {}\n  request:   {}\n  memcached: {}\n  shoald:    {}",
                    r.group,
                    r.case,
                    r.step,
                    r.memcached.render(),
                    r.shoald.render()
                );
            }
        }
    }
    eprintln!("{report}");
    eprintln!(
        "parity: {} cases, {} steps, {failures} mismatches, {allowed} allowed differences, {:?}",
        cases.len(),
        results.len(),
        started.elapsed()
    );
    let skipped = results
        .iter()
        .filter(|r| r.shoald.render() == SKIPPED || r.memcached.render() == SKIPPED)
        .count();
    assert_eq!(skipped, 0, "{skipped} steps skipped: over the time budget");
    assert_eq!(failures, 0, "shoald differs from memcached; see above");
}
