//! Commands as the fuzzer sends them, and the regression-case file that keeps a shrunk
//! failure: the commands, one per line, each followed by the reply memcached gave.
//!
//! A command is bytes with holes for CAS uniques: a client sends back a CAS it was shown,
//! and each server showed its own, so the hole names *which* CAS ("the last one shown
//! for key `k`") and each server's connection fills in its own value.
//!
//! The file format is line based and meant to be read and edited by hand:
//!
//! ```text
//! # shoald must answer as memcached 1.6.45 did (a comment)
//! > text key=6b md k q\r\n
//! < NF\r\n
//! > bin key=6b \x80\x01...{cas8 latest 6b}...
//! < [op=01 st=0000 ...]
//! ```
//!
//! `> text` or `> bin` names the connection, `key=` (hex) the item the command addresses,
//! the rest of the line is the command, escaped ([`escape`]). `< ` lines hold the expected
//! reply in its canonical form ([`super::canon::Reply`]).

pub use super::canon::CasRef;
use super::canon::Reply;
pub use super::escape::{escape, hex};
use super::escape::{escape_part, unescape_one};
use std::fmt::Write as _;

/// The connection a command is sent on. Each server gets one of each, so text commands
/// never meet binary ones on one connection (memcached fixes a connection's protocol at
/// its first byte; shoald decides per request, a documented deviation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Channel {
    /// Text and meta commands.
    Text,
    /// Binary-protocol packets.
    Binary,
}

/// How a CAS hole is written into the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CasForm {
    /// Decimal digits (text and meta commands).
    Decimal,
    /// Eight bytes, big-endian (a binary header's CAS field).
    Be64,
}

/// A piece of a command.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Part {
    /// Bytes sent as they are.
    Bytes(Vec<u8>),
    /// A CAS unique, filled in per server.
    Cas(CasRef, CasForm),
}

/// One command: what is sent on one connection before the sentinel (`mn`, or a binary
/// `NOOP`) that marks the end of its reply.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Command {
    /// The connection it goes on.
    pub channel: Channel,
    /// The bytes, with CAS holes.
    pub parts: Vec<Part>,
    /// The item key it addresses (base64-decoded for a meta `b` key), to which CAS
    /// uniques in its reply are credited; `None` for keyless and multi-key commands.
    pub key: Option<Vec<u8>>,
}

impl Command {
    /// A command without CAS holes.
    pub fn plain(channel: Channel, bytes: Vec<u8>, key: Option<Vec<u8>>) -> Command {
        Command {
            channel,
            parts: vec![Part::Bytes(bytes)],
            key,
        }
    }

    /// The bytes to send, with each hole filled by `resolve`.
    pub fn render(&self, resolve: impl Fn(&CasRef) -> u64) -> Vec<u8> {
        let mut out = Vec::new();
        for part in &self.parts {
            match part {
                Part::Bytes(b) => out.extend_from_slice(b),
                Part::Cas(r, CasForm::Decimal) => {
                    out.extend_from_slice(resolve(r).to_string().as_bytes())
                }
                Part::Cas(r, CasForm::Be64) => out.extend_from_slice(&resolve(r).to_be_bytes()),
            }
        }
        out
    }

    /// A one-line human-readable form (escaped, holes shown), for reports.
    pub fn describe(&self) -> String {
        let mut s = String::from(match self.channel {
            Channel::Text => "text ",
            Channel::Binary => "bin ",
        });
        s.push_str(&self.body());
        s
    }

    /// The escaped command with its holes, as written in a case file.
    fn body(&self) -> String {
        let mut s = String::new();
        for part in &self.parts {
            match part {
                Part::Bytes(b) => s.push_str(&escape_part(
                    b,
                    std::ptr::eq(part, self.parts.last().unwrap_or(part)),
                )),
                Part::Cas(r, form) => {
                    let (which, key) = match r {
                        CasRef::Latest(k) => ("latest", k),
                        CasRef::Previous(k) => ("previous", k),
                    };
                    let form = match form {
                        CasForm::Decimal => "cas",
                        CasForm::Be64 => "cas8",
                    };
                    let _ = write!(s, "{{{form} {which} {}}}", hex(key));
                }
            }
        }
        s
    }
}

/// One step of a regression case: a command and the reply memcached gave to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The command.
    pub command: Command,
    /// memcached's reply, canonical.
    pub reply: Reply,
}

/// A regression case: the comment lines (what found it, why it matters) and the steps.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Case {
    /// Comment lines, without their `# `.
    pub comments: Vec<String>,
    /// The steps, in order.
    pub steps: Vec<Step>,
}

impl Case {
    /// The file text.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for c in &self.comments {
            let _ = writeln!(s, "# {c}");
        }
        for step in &self.steps {
            let channel = match step.command.channel {
                Channel::Text => "text",
                Channel::Binary => "bin",
            };
            let _ = write!(s, "> {channel}");
            if let Some(k) = &step.command.key {
                let _ = write!(s, " key={}", hex(k));
            }
            let _ = writeln!(s, " {}", step.command.body());
            let _ = writeln!(s, "< {}", step.reply.render());
        }
        s
    }

    /// Parses a case file; the error names the line.
    pub fn parse(text: &str) -> Result<Case, String> {
        let mut case = Case::default();
        let mut pending: Option<Command> = None;
        for (n, line) in text.lines().enumerate() {
            let at = |e: String| format!("line {}: {e}", n + 1);
            if let Some(c) = line.strip_prefix('#') {
                case.comments
                    .push(c.strip_prefix(' ').unwrap_or(c).to_string());
            } else if let Some(rest) = line.strip_prefix("> ") {
                if pending.is_some() {
                    return Err(at("a command without its reply before it".into()));
                }
                pending = Some(parse_command(rest).map_err(at)?);
            } else if let Some(rest) = line.strip_prefix("< ") {
                let command = pending
                    .take()
                    .ok_or_else(|| at("a reply without a command".into()))?;
                let reply = Reply::parse(rest).map_err(at)?;
                case.steps.push(Step { command, reply });
            } else if line == "<" {
                let command = pending
                    .take()
                    .ok_or_else(|| at("a reply without a command".into()))?;
                case.steps.push(Step {
                    command,
                    reply: Reply::default(),
                });
            } else if !line.trim().is_empty() {
                return Err(at(format!("expected `#`, `> ` or `< `: {line:?}")));
            }
        }
        if pending.is_some() {
            return Err("the last command has no reply".into());
        }
        Ok(case)
    }
}

fn parse_command(rest: &str) -> Result<Command, String> {
    let (channel, mut rest) = if let Some(r) = rest.strip_prefix("text ") {
        (Channel::Text, r)
    } else if let Some(r) = rest.strip_prefix("bin ") {
        (Channel::Binary, r)
    } else {
        return Err(format!("expected `text` or `bin`: {rest:?}"));
    };
    let mut key = None;
    if let Some(r) = rest.strip_prefix("key=") {
        let (k, r) = r
            .split_once(' ')
            .ok_or("`key=` without a command after it")?;
        key = Some(unhex(k)?);
        rest = r;
    }
    let mut parts = Vec::new();
    let mut bytes = Vec::new();
    let mut it = rest.as_bytes();
    while let Some((&b, tail)) = it.split_first() {
        if b == b'{' {
            let end = tail
                .iter()
                .position(|&c| c == b'}')
                .ok_or("`{` without `}`")?;
            let inner = std::str::from_utf8(&tail[..end]).map_err(|e| e.to_string())?;
            let mut words = inner.split(' ');
            let form = match words.next() {
                Some("cas") => CasForm::Decimal,
                Some("cas8") => CasForm::Be64,
                other => return Err(format!("unknown hole {other:?}")),
            };
            let which = words.next().ok_or("hole without `latest`/`previous`")?;
            let k = unhex(words.next().ok_or("hole without a key")?)?;
            let r = match which {
                "latest" => CasRef::Latest(k),
                "previous" => CasRef::Previous(k),
                other => return Err(format!("unknown CAS reference {other:?}")),
            };
            if !bytes.is_empty() {
                parts.push(Part::Bytes(std::mem::take(&mut bytes)));
            }
            parts.push(Part::Cas(r, form));
            it = &tail[end + 1..];
        } else {
            let used = unescape_one(it, &mut bytes)?;
            it = &it[used..];
        }
    }
    if !bytes.is_empty() {
        parts.push(Part::Bytes(bytes));
    }
    Ok(Command {
        channel,
        parts,
        key,
    })
}

fn unhex(s: &str) -> Result<Vec<u8>, String> {
    if !s.len().is_multiple_of(2) {
        return Err(format!("odd-length hex {s:?}"));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| {
            s.get(i..i + 2)
                .and_then(|p| u8::from_str_radix(p, 16).ok())
                .ok_or_else(|| format!("bad hex {s:?}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_round_trips_every_byte() {
        let all: Vec<u8> = (0..=255).chain([b' ']).collect();
        let text = escape(&all);
        assert!(!text.ends_with(' '));
        let mut back = Vec::new();
        let mut s = text.as_bytes();
        while !s.is_empty() {
            let used = unescape_one(s, &mut back).expect("valid escape");
            s = &s[used..];
        }
        assert_eq!(back, all);
    }

    #[test]
    fn case_file_round_trips() {
        let case = Case {
            comments: vec!["found by seed 7".into()],
            steps: vec![
                Step {
                    command: Command {
                        channel: Channel::Text,
                        parts: vec![
                            Part::Bytes(b"ms k 1 C".to_vec()),
                            Part::Cas(CasRef::Latest(b"k".to_vec()), CasForm::Decimal),
                            Part::Bytes(b" {q}\r\nx\r\n".to_vec()),
                        ],
                        key: Some(b"k".to_vec()),
                    },
                    reply: Reply::parse("EX\\r\\n").expect("reply"),
                },
                Step {
                    command: Command {
                        channel: Channel::Binary,
                        parts: vec![
                            Part::Bytes(vec![0x80, 0, 0, 1]),
                            Part::Cas(CasRef::Previous(vec![0xff]), CasForm::Be64),
                        ],
                        key: None,
                    },
                    reply: Reply::default(),
                },
            ],
        };
        let text = case.to_text();
        assert_eq!(Case::parse(&text), Ok(case), "{text}");
    }

    #[test]
    fn holes_are_filled_per_form() {
        let cmd = Command {
            channel: Channel::Text,
            parts: vec![
                Part::Bytes(b"C".to_vec()),
                Part::Cas(CasRef::Latest(b"k".to_vec()), CasForm::Decimal),
                Part::Cas(CasRef::Previous(b"k".to_vec()), CasForm::Be64),
            ],
            key: None,
        };
        let out = cmd.render(|r| match r {
            CasRef::Latest(_) => 42,
            CasRef::Previous(_) => 1,
        });
        assert_eq!(out, b"C42\0\0\0\0\0\0\0\x01");
    }

    #[test]
    fn bad_files_name_their_line() {
        assert!(Case::parse("> text x\n> text y\n")
            .unwrap_err()
            .contains("line 2"));
        assert!(Case::parse("< x\n").unwrap_err().contains("line 1"));
        assert!(Case::parse("> text {cas latest zz}\n< \n").is_err());
        assert!(Case::parse("> text ok\n").is_err());
    }
}
