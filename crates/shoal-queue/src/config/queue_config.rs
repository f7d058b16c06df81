//! The queue config file: per-queue settings with Kestrel's names, and how they inherit
//! (default -> queue -> fanout child).
//!
//! One line per queue: `<queue> key=value ...`, `#` starts a comment. Keys (Kestrel's
//! names, and the older shoal ones kept as aliases):
//!
//! | Key | Value |
//! |---|---|
//! | `max_items` | messages |
//! | `max_size` (alias `max_bytes`) | payload bytes, k/m/g suffixes |
//! | `max_item_size` | bytes, k/m/g suffixes |
//! | `max_age` | seconds, or a number with `ms`, `s`, `m`, `h` or `d` (rounded up to seconds) |
//! | `discard_old_when_full` | `true`/`false` (alias `policy=discard\|reject`) |
//! | `max_memory_size` | bytes kept in memory, k/m/g suffixes |
//! | `expire_to` | a queue name |
//! | `max_expire_sweep` | messages per sweep (0: all) |
//! | `fanout_only` | `true`/`false` |
//! | `max_queue_age` | a duration as `max_age`: an empty queue this old is deleted |
//! | `sync_journal` | this queue's fsync: `always` (or `0`, `0ms`, `true`), `never` (or `false`), or an interval (`5ms`, `1s`) |
//! | `keep_journal` | `false`: a memory-only queue, no log, emptied by a restart |
//!
//! A line `<alias> destination_queues=a,b` (and nothing else) is Kestrel's alias instead:
//! a name whose sets are written to each destination queue.

use crate::config::{FsyncPolicy, FullPolicy, QueueLimits};
use crate::name::validate_name;
use std::collections::HashMap;

/// Why a queue config file was refused (nothing of it is applied).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueConfigError {
    /// The first word of a line is not a valid queue name.
    #[error("line {line}: invalid queue name {name:?}")]
    BadName {
        /// 1-based line number.
        line: usize,
        /// The word.
        name: String,
    },
    /// A word that is not `key=value`.
    #[error("line {line}: expected key=value, got {word:?}")]
    NotKeyValue {
        /// 1-based line number.
        line: usize,
        /// The word.
        word: String,
    },
    /// A key this file does not know.
    #[error("line {line}: unknown key {key:?}")]
    UnknownKey {
        /// 1-based line number.
        line: usize,
        /// The key.
        key: String,
    },
    /// An alias line (`destination_queues=`) with queue settings too: an alias holds
    /// nothing, so they would mean nothing.
    #[error("line {line}: an alias (destination_queues) takes no other settings")]
    AliasWithSettings {
        /// 1-based line number.
        line: usize,
    },
    /// A value that does not parse for its key.
    #[error("line {line}: {key}: invalid value {value:?}")]
    BadValue {
        /// 1-based line number.
        line: usize,
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
}

/// One line's settings: only what it names; the rest is inherited.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueueOverrides {
    /// `max_items`.
    pub max_items: Option<u64>,
    /// `max_size` / `max_bytes`.
    pub max_bytes: Option<u64>,
    /// `max_age`, in seconds.
    pub max_age_secs: Option<u32>,
    /// `discard_old_when_full` / `policy`.
    pub full: Option<FullPolicy>,
    /// `max_item_size`.
    pub max_item_size: Option<u64>,
    /// `max_memory_size`.
    pub max_memory: Option<u64>,
    /// `expire_to`.
    pub expire_to: Option<String>,
    /// `max_expire_sweep`.
    pub max_expire_sweep: Option<u64>,
    /// `fanout_only`.
    pub fanout_only: Option<bool>,
    /// `max_queue_age`, in seconds.
    pub max_queue_age_secs: Option<u32>,
    /// `sync_journal`.
    pub fsync: Option<FsyncPolicy>,
    /// `keep_journal` (`Some(false)`: memory-only).
    pub keep_journal: Option<bool>,
    /// `destination_queues`: the line is an alias of these queues, not a queue.
    pub destination_queues: Option<Vec<String>>,
}

impl QueueOverrides {
    /// Applies the settings this line names over `l`.
    pub fn apply(&self, l: &mut QueueLimits) {
        if let Some(v) = self.max_items {
            l.max_items = v;
        }
        if let Some(v) = self.max_bytes {
            l.max_bytes = v;
        }
        if let Some(v) = self.max_age_secs {
            l.max_age_secs = v;
        }
        if let Some(v) = self.full {
            l.full = v;
        }
        if let Some(v) = self.max_item_size {
            l.max_item_size = v;
        }
        if let Some(v) = self.max_memory {
            l.max_memory = Some(v);
        }
        if let Some(v) = &self.expire_to {
            l.expire_to = Some(v.clone());
        }
        if let Some(v) = self.max_expire_sweep {
            l.max_expire_sweep = v;
        }
        if let Some(v) = self.fanout_only {
            l.fanout_only = v;
        }
        if let Some(v) = self.max_queue_age_secs {
            l.max_queue_age_secs = v;
        }
        if let Some(v) = self.fsync {
            l.fsync = Some(v);
        }
        if let Some(v) = self.keep_journal {
            l.memory_only = !v;
        }
    }
}

/// The fanout parent of `name` (`parent` for `parent+child`), if it is a child.
pub fn fanout_parent(name: &str) -> Option<&str> {
    name.split_once('+').map(|(p, _)| p)
}

/// The configuration of `name`: `default`, then its fanout parent's line, then its own
/// (each line overriding only what it names, as Kestrel's `QueueBuilder` resolves against
/// its parent).
pub fn resolve(
    default: &QueueLimits,
    lines: &HashMap<String, QueueOverrides>,
    name: &str,
) -> QueueLimits {
    let mut l = default.clone();
    if let Some(o) = fanout_parent(name).and_then(|p| lines.get(p)) {
        o.apply(&mut l);
    }
    if let Some(o) = lines.get(name) {
        o.apply(&mut l);
    }
    // A child inheriting `p expire_to=p+dead` would expire into itself: its expired
    // messages could never move, and would hold its log forever. They expire plainly.
    if l.expire_to.as_deref() == Some(name) {
        l.expire_to = None;
    }
    l
}

/// A size with an optional k/m/g suffix (powers of 1024).
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.as_bytes().last() {
        Some(b'k' | b'K') => (&s[..s.len() - 1], 1u64 << 10),
        Some(b'm' | b'M') => (&s[..s.len() - 1], 1 << 20),
        Some(b'g' | b'G') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>().ok().and_then(|n| n.checked_mul(mult))
}

/// A duration in whole seconds: a plain number is seconds (this file's unit since
/// before Kestrel's names); `ms`, `s`, `m`, `h`, `d` suffixes; milliseconds round up.
pub fn parse_secs(s: &str) -> Option<u32> {
    let (num, ms_per): (&str, u64) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1000)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60_000)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3_600_000)
    } else if let Some(n) = s.strip_suffix('d') {
        (n, 86_400_000)
    } else {
        (s, 1000)
    };
    let ms = num.parse::<u64>().ok()?.checked_mul(ms_per)?;
    u32::try_from(ms.div_ceil(1000)).ok()
}

/// Kestrel's `sync_journal`: a duration between fsyncs, where 0 means every write
/// (`always`) and Kestrel 1's booleans mean every write (`true`) or none (`false`).
pub fn parse_sync_journal(s: &str) -> Option<FsyncPolicy> {
    match s {
        "always" | "true" => return Some(FsyncPolicy::Always),
        "never" | "false" => return Some(FsyncPolicy::Never),
        _ => {}
    }
    let ms: u64 = if let Some(n) = s.strip_suffix("ms") {
        n.parse().ok()?
    } else if let Some(n) = s.strip_suffix('s') {
        n.parse::<u64>().ok()?.checked_mul(1000)?
    } else {
        s.parse().ok()?
    };
    match ms {
        0 => Some(FsyncPolicy::Always),
        1..=60_000 => Some(FsyncPolicy::Every(std::time::Duration::from_millis(ms))),
        _ => None,
    }
}

fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "true" | "yes" | "on" | "1" => Some(true),
        "false" | "no" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// Parses a queue config file's text into its lines' settings, by queue name.
pub fn parse(text: &str) -> Result<HashMap<String, QueueOverrides>, QueueConfigError> {
    let mut out = HashMap::new();
    for (n, line) in text.lines().enumerate() {
        let line_no = n + 1;
        let line = line.split('#').next().unwrap_or("").trim();
        let mut words = line.split_whitespace();
        let Some(name) = words.next() else { continue };
        if !validate_name(name.as_bytes()) {
            return Err(QueueConfigError::BadName {
                line: line_no,
                name: name.to_string(),
            });
        }
        let mut o = QueueOverrides::default();
        for w in words {
            let Some((k, v)) = w.split_once('=') else {
                return Err(QueueConfigError::NotKeyValue {
                    line: line_no,
                    word: w.to_string(),
                });
            };
            let bad = || QueueConfigError::BadValue {
                line: line_no,
                key: k.to_string(),
                value: v.to_string(),
            };
            match k {
                "max_items" => o.max_items = Some(v.parse().map_err(|_| bad())?),
                "max_size" | "max_bytes" => o.max_bytes = Some(parse_size(v).ok_or_else(bad)?),
                "max_item_size" => o.max_item_size = Some(parse_size(v).ok_or_else(bad)?),
                "max_memory_size" => o.max_memory = Some(parse_size(v).ok_or_else(bad)?),
                "max_age" => o.max_age_secs = Some(parse_secs(v).ok_or_else(bad)?),
                "max_queue_age" => o.max_queue_age_secs = Some(parse_secs(v).ok_or_else(bad)?),
                "discard_old_when_full" => {
                    o.full = Some(match parse_bool(v).ok_or_else(bad)? {
                        true => FullPolicy::DiscardOldest,
                        false => FullPolicy::Reject,
                    })
                }
                "policy" => {
                    o.full = Some(match v {
                        "reject" => FullPolicy::Reject,
                        "discard" | "discard_old" => FullPolicy::DiscardOldest,
                        _ => return Err(bad()),
                    })
                }
                "expire_to" => {
                    if !validate_name(v.as_bytes()) || v == name {
                        return Err(bad());
                    }
                    o.expire_to = Some(v.to_string());
                }
                "max_expire_sweep" => o.max_expire_sweep = Some(v.parse().map_err(|_| bad())?),
                "fanout_only" => o.fanout_only = Some(parse_bool(v).ok_or_else(bad)?),
                "destination_queues" => {
                    let dests: Vec<String> = v.split(',').map(str::to_string).collect();
                    if dests
                        .iter()
                        .any(|d| !validate_name(d.as_bytes()) || d == name)
                    {
                        return Err(bad());
                    }
                    o.destination_queues = Some(dests);
                }
                "keep_journal" => o.keep_journal = Some(parse_bool(v).ok_or_else(bad)?),
                "sync_journal" => o.fsync = Some(parse_sync_journal(v).ok_or_else(bad)?),
                _ => {
                    return Err(QueueConfigError::UnknownKey {
                        line: line_no,
                        key: k.to_string(),
                    })
                }
            }
        }
        if o.destination_queues.is_some()
            && o != (QueueOverrides {
                destination_queues: o.destination_queues.clone(),
                ..QueueOverrides::default()
            })
        {
            return Err(QueueConfigError::AliasWithSettings { line: line_no });
        }
        out.insert(name.to_string(), o);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kestrel_names_and_the_old_ones() {
        let text = "# limits\njobs max_items=10 policy=discard\nlogs max_bytes=1m max_age=60 # x\n\
                    orders max_size=2k max_item_size=100 discard_old_when_full=true \
                    max_memory_size=1k expire_to=dead max_expire_sweep=5 fanout_only=true \
                    keep_journal=false sync_journal=10ms\nd max_age=1500ms max_queue_age=1h\n";
        let m = parse(text).expect("parses");
        let d = QueueLimits::default();
        let jobs = resolve(&d, &m, "jobs");
        assert_eq!((jobs.max_items, jobs.full), (10, FullPolicy::DiscardOldest));
        let logs = resolve(&d, &m, "logs");
        assert_eq!((logs.max_bytes, logs.max_age_secs), (1 << 20, 60));
        let o = resolve(&d, &m, "orders");
        assert_eq!(o.max_bytes, 2048);
        assert_eq!(o.max_item_size, 100);
        assert_eq!(o.full, FullPolicy::DiscardOldest);
        assert_eq!(o.max_memory, Some(1024));
        assert_eq!(o.expire_to.as_deref(), Some("dead"));
        assert_eq!((o.max_expire_sweep, o.fanout_only), (5, true));
        assert!(o.memory_only);
        assert_eq!(
            o.fsync,
            Some(FsyncPolicy::Every(std::time::Duration::from_millis(10)))
        );
        assert!(
            !jobs.memory_only && jobs.fsync.is_none(),
            "not named: inherited"
        );
        assert_eq!(resolve(&d, &m, "d").max_age_secs, 2, "ms round up");
        assert_eq!(resolve(&d, &m, "d").max_queue_age_secs, 3600);
        assert!(parse("a/b max_items=1").is_err());
        assert!(parse("q color=red").is_err());
        assert!(parse("q max_items").is_err());
        assert!(parse("q max_items=x").is_err());
        assert!(
            parse("q expire_to=q").is_err(),
            "a queue cannot expire to itself"
        );
        assert!(parse("q fanout_only=maybe").is_err());
        let a = parse("all destination_queues=a,b+c\n").expect("an alias");
        assert_eq!(
            a["all"].destination_queues,
            Some(vec!["a".to_string(), "b+c".to_string()])
        );
        assert!(parse("all destination_queues=a max_items=1").is_err());
        assert!(parse("all destination_queues=a,,b").is_err());
        assert!(parse("all destination_queues=all").is_err());
    }

    #[test]
    fn sync_journal_values() {
        use std::time::Duration;
        let p = parse_sync_journal;
        assert_eq!(p("always"), Some(FsyncPolicy::Always));
        assert_eq!(p("0"), Some(FsyncPolicy::Always));
        assert_eq!(p("0ms"), Some(FsyncPolicy::Always));
        assert_eq!(p("true"), Some(FsyncPolicy::Always));
        assert_eq!(p("never"), Some(FsyncPolicy::Never));
        assert_eq!(p("false"), Some(FsyncPolicy::Never));
        assert_eq!(p("5"), Some(FsyncPolicy::Every(Duration::from_millis(5))));
        assert_eq!(p("2s"), Some(FsyncPolicy::Every(Duration::from_secs(2))));
        assert_eq!(p("61s"), None);
        assert_eq!(p("soon"), None);
        let m = parse(
            "orders sync_journal=always keep_journal=false
",
        )
        .expect("ok");
        let child = resolve(&QueueLimits::default(), &m, "orders+audit");
        assert_eq!(
            (child.fsync, child.memory_only),
            (Some(FsyncPolicy::Always), true)
        );
        assert!(parse("q keep_journal=perhaps").is_err());
    }

    #[test]
    fn inheritance_default_parent_child() {
        let m = parse("orders max_items=5 max_age=10\norders+audit max_age=20\n").expect("ok");
        let d = QueueLimits {
            max_bytes: 100,
            ..QueueLimits::default()
        };
        let child = resolve(&d, &m, "orders+audit");
        assert_eq!(
            (child.max_items, child.max_age_secs, child.max_bytes),
            (5, 20, 100)
        );
        let other = resolve(&d, &m, "orders+mail");
        assert_eq!((other.max_items, other.max_age_secs), (5, 10));
        assert_eq!(resolve(&d, &m, "x").max_bytes, 100);
        assert_eq!(fanout_parent("a+b+c"), Some("a"));
        let m = parse("p expire_to=p+dead\n").expect("ok");
        assert_eq!(resolve(&d, &m, "p").expire_to.as_deref(), Some("p+dead"));
        assert_eq!(resolve(&d, &m, "p+dead").expire_to, None, "not into itself");
        assert_eq!(fanout_parent("a"), None);
    }
}
