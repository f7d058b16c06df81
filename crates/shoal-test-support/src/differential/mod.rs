//! A differential fuzzer: the same random command stream sent to a reference server
//! (memcached 1.6.45) and to the server under test (shoald), replies compared one by one.
//!
//! - [`gen`] makes the commands (text, meta and binary; well-formed or broken),
//! - [`peer`] sends them, each followed by a sentinel that marks where its reply ends,
//! - [`canon`] puts replies in a form two correct servers agree on (CAS uniques by the
//!   change they mark, times within a clock tick),
//! - [`fuzz`] runs a seed for a time budget and collects the differences,
//! - [`shrink`] cuts a difference down to the fewest commands that still show it, and
//!   [`save`] keeps it as a regression case ([`case`]), which [`replay`] checks against
//!   a server on its own, without the reference.
//!
//! Both servers are flushed, reconnected and their CAS books cleared every
//! [`RESET_EVERY`] commands and after each difference, so a difference is reproduced from
//! a short history and does not cascade into the commands after it.

pub mod canon;
pub mod case;
pub mod escape;
pub mod gen;
pub mod peer;

use canon::Reply;
use case::{Case, Channel, Command, Step};
use peer::Peer;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Commands between two resets of both servers.
pub const RESET_EVERY: usize = 400;

/// Two servers fed the same commands.
pub struct Pair {
    /// The reference (memcached).
    pub reference: Peer,
    /// The server under test (shoald).
    pub subject: Peer,
}

impl Pair {
    /// A pair of servers at these addresses.
    pub fn new(reference: SocketAddr, subject: SocketAddr) -> Pair {
        Pair {
            reference: Peer::new(reference),
            subject: Peer::new(subject),
        }
    }

    /// Sends `cmd` to both (the reference first; both work at once) and returns both
    /// replies, reference first.
    pub fn step(&mut self, cmd: &Command) -> (Reply, Reply) {
        let a = self.reference.send(cmd);
        let b = self.subject.send(cmd);
        let ra = match a {
            Ok(()) => self.reference.receive(cmd),
            Err(_) => closed(),
        };
        let rb = match b {
            Ok(()) => self.subject.receive(cmd),
            Err(_) => closed(),
        };
        (ra, rb)
    }

    /// Empties both caches (`flush_all` on fresh connections), closes the connections and
    /// forgets the CAS uniques seen.
    pub fn reset(&mut self) {
        for peer in [&mut self.reference, &mut self.subject] {
            reset_peer(peer);
        }
    }
}

fn closed() -> Reply {
    let mut r = Reply::default();
    r.end(canon::End::Closed);
    r
}

fn reset_peer(peer: &mut Peer) {
    peer.disconnect();
    let flush = Command::plain(Channel::Text, b"flush_all\r\n".to_vec(), None);
    if peer.send(&flush).is_ok() {
        let _ = peer.receive(&flush);
    }
    peer.disconnect();
    peer.book.clear();
}

/// What a fuzz run does.
#[derive(Debug, Clone)]
pub struct Config {
    /// The generator's seed.
    pub seed: u64,
    /// Percent of commands deliberately broken.
    pub malformed_pct: u32,
    /// Stop after this long...
    pub budget: Duration,
    /// ...or this many commands, whichever comes first.
    pub max_commands: usize,
}

/// A reply that differed, with the commands since the last reset that led to it.
#[derive(Debug, Clone)]
pub struct Difference {
    /// The differing command's label ([`gen::Generated::label`]).
    pub label: String,
    /// The commands since the last reset, the differing one last.
    pub history: Vec<Command>,
    /// The reference's reply to the last command.
    pub reference: Reply,
    /// The subject's reply to it.
    pub subject: Reply,
}

/// Counts for one command label.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tally {
    /// Commands sent.
    pub sent: usize,
    /// Commands whose replies differed, and did again when the commands since the last
    /// reset were replayed from a reset.
    pub differing: usize,
    /// Commands whose replies differed once but not on the replay: the reference's reply
    /// depended on timing (memcached's background threads briefly holding an item make
    /// an in-place `incr` a copy, for one).
    pub unreproduced: usize,
    /// Replies (from either server) that ended without the sentinel's: the server waited
    /// for bytes that never came, which costs [`peer::STUCK_AFTER`].
    pub stuck: usize,
}

/// What a fuzz run found.
#[derive(Debug, Default)]
pub struct Report {
    /// Well-formed commands sent and how many differed.
    pub well_formed: Tally,
    /// Broken commands sent and how many differed.
    pub malformed: Tally,
    /// Per label.
    pub by_label: BTreeMap<String, Tally>,
    /// The first difference of each label.
    pub differences: Vec<Difference>,
    /// Replies that ended without the sentinel's (the server waited for more bytes),
    /// from either server.
    pub stuck: usize,
    /// How long it ran.
    pub elapsed: Duration,
}

impl Report {
    /// A summary: totals, then every label that differed.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} well-formed commands, {} differing; {} malformed, {} differing; \
             {} more differed once but not on a replay (timing); {} stuck replies; {:.1} s",
            self.well_formed.sent,
            self.well_formed.differing,
            self.malformed.sent,
            self.malformed.differing,
            self.well_formed.unreproduced + self.malformed.unreproduced,
            self.stuck,
            self.elapsed.as_secs_f64()
        );
        for (label, t) in &self.by_label {
            if t.differing + t.unreproduced + t.stuck > 0 {
                s.push_str(&format!(
                    "\n  {label}: {} of {} differ, {} more once; {} stuck",
                    t.differing, t.sent, t.unreproduced, t.stuck
                ));
            }
        }
        s
    }
}

/// Runs the generator from `cfg.seed` against both servers of `pair` until the budget is
/// spent, collecting differences (the first of each label keeps its history).
pub fn fuzz(pair: &mut Pair, cfg: &Config) -> Report {
    let started = Instant::now();
    let mut generator = gen::Generator::new(cfg.seed, cfg.malformed_pct);
    let mut report = Report::default();
    let mut history: Vec<Command> = Vec::new();
    pair.reset();
    for n in 0..cfg.max_commands {
        if started.elapsed() >= cfg.budget {
            break;
        }
        if n > 0 && n % RESET_EVERY == 0 {
            pair.reset();
            generator.forget();
            history.clear();
        }
        let g = generator.next_command();
        let (a, b) = pair.step(&g.command);
        let stuck = [&a, &b]
            .iter()
            .filter(|r| r.ended() == Some(canon::End::Stuck))
            .count();
        report.stuck += stuck;
        report.by_label.entry(g.label.clone()).or_default().stuck += stuck;
        history.push(g.command.clone());
        let same = a.matches(&b);
        let tally = if g.malformed {
            &mut report.malformed
        } else {
            &mut report.well_formed
        };
        tally.sent += 1;
        let per = report.by_label.entry(g.label.clone()).or_default();
        per.sent += 1;
        if !same {
            let (last, prefix) = history.split_last().unwrap_or((&g.command, &[]));
            if reproduces(pair, prefix, last) {
                tally.differing += 1;
                per.differing += 1;
                if !report.differences.iter().any(|d| d.label == g.label) {
                    report.differences.push(Difference {
                        label: g.label.clone(),
                        history: history.clone(),
                        reference: a,
                        subject: b,
                    });
                }
            } else {
                tally.unreproduced += 1;
                per.unreproduced += 1;
            }
            // Start over from empty caches, so one difference does not make the replies
            // to later commands differ too.
            pair.reset();
            generator.forget();
            history.clear();
        }
    }
    report.elapsed = started.elapsed();
    report
}

/// Whether replaying `prefix` (every reply matching) and then `last` shows a difference
/// at `last`, on freshly reset servers.
fn reproduces(pair: &mut Pair, prefix: &[Command], last: &Command) -> bool {
    pair.reset();
    for c in prefix {
        let (a, b) = pair.step(c);
        if !a.matches(&b) {
            return false;
        }
    }
    let (a, b) = pair.step(last);
    !a.matches(&b)
}

/// The fewest commands (a subsequence of `history`, ending with its last command) that
/// still make the last command's replies differ, found by delta debugging until
/// `deadline`. `None` if the full history does not reproduce the difference (a
/// difference that depends on timing).
pub fn shrink(pair: &mut Pair, history: &[Command], deadline: Instant) -> Option<Vec<Command>> {
    let (last, prefix) = history.split_last()?;
    if !reproduces(pair, prefix, last) {
        return None;
    }
    let mut cur: Vec<Command> = prefix.to_vec();
    // Most differences need only the last few commands: try short suffixes first.
    let mut k = 0;
    while k < cur.len() {
        let suffix = &cur[cur.len() - k..];
        if reproduces(pair, suffix, last) {
            cur = suffix.to_vec();
            break;
        }
        k = if k == 0 { 1 } else { k * 2 };
    }
    // Then remove chunks, halving their size when no chunk can go.
    let mut chunks = 2usize;
    while !cur.is_empty() && Instant::now() < deadline {
        let size = cur.len().div_ceil(chunks);
        let removed = (0..chunks).find_map(|i| {
            let start = i * size;
            if start >= cur.len() {
                return None;
            }
            let end = (start + size).min(cur.len());
            let candidate: Vec<Command> = cur[..start].iter().chain(&cur[end..]).cloned().collect();
            reproduces(pair, &candidate, last).then_some(candidate)
        });
        if let Some(candidate) = removed {
            cur = candidate;
            chunks = (chunks - 1).max(2);
        } else {
            if size <= 1 {
                break;
            }
            chunks = (chunks * 2).min(cur.len());
        }
    }
    cur.push(last.clone());
    Some(cur)
}

/// Replays `commands` on reset servers and keeps them with the reference's replies as a
/// regression case; the last command is the one whose replies differ.
pub fn record(pair: &mut Pair, commands: &[Command], comments: Vec<String>) -> (Case, Reply) {
    pair.reset();
    let mut steps = Vec::new();
    let mut subject_last = Reply::default();
    for c in commands {
        let (a, b) = pair.step(c);
        subject_last = b;
        steps.push(Step {
            command: c.clone(),
            reply: a,
        });
    }
    (Case { comments, steps }, subject_last)
}

/// Writes `case` into `dir` under a name made from `label` and `seed`, returning the path.
pub fn save(dir: &Path, label: &str, seed: u64, case: &Case) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let slug: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let mut path = dir.join(format!("{slug}-{seed}.case"));
    let mut n = 2;
    while path.exists() {
        path = dir.join(format!("{slug}-{seed}-{n}.case"));
        n += 1;
    }
    std::fs::write(&path, case.to_text())?;
    Ok(path)
}

/// Replays a case against one server (flushed first), comparing each reply with the
/// recorded one; the error describes the first step that differs.
pub fn replay(addr: SocketAddr, case: &Case) -> Result<(), String> {
    let mut peer = Peer::new(addr);
    reset_peer(&mut peer);
    for (i, step) in case.steps.iter().enumerate() {
        peer.send(&step.command)
            .map_err(|e| format!("step {}: send: {e}", i + 1))?;
        let got = peer.receive(&step.command);
        if !got.matches(&step.reply) {
            return Err(format!(
                "step {} of {}: {}\n  expected: {}\n  got:      {}",
                i + 1,
                case.steps.len(),
                step.command.describe(),
                step.reply.render(),
                got.render()
            ));
        }
    }
    Ok(())
}

/// The case files in `dir` (`*.case`), sorted; none if it does not exist.
pub fn case_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "case"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}
