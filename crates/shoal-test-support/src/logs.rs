//! The daemons' logs read back as events, in either `--log-format`, so a test can check
//! that both formats carry the same events: a process whose stderr is collected line by
//! line ([`LoggingProcess`]), a line parsed into an [`Event`] ([`parse`]), and the events
//! of a run reduced to a comparable multiset ([`event_counts`]).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The formats of `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// tracing-subscriber's text lines: `TIMESTAMP LEVEL TARGET: MESSAGE k=v ...`.
    Text,
    /// One JSON object per line: `timestamp`, `level`, `fields` (`message` and the
    /// others), `target`.
    Json,
}

impl Format {
    /// Both, text first.
    pub const BOTH: [Format; 2] = [Format::Text, Format::Json];

    /// The `--log-format` value.
    pub fn flag(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Json => "json",
        }
    }
}

/// One log event, whichever format it was written in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// `ERROR`, `WARN`, `INFO`, `DEBUG` or `TRACE`.
    pub level: String,
    /// The module that logged it.
    pub target: String,
    /// The message, then the other fields as ` key=value` sorted by key (the text
    /// format's rendering, with the fields in one order whatever order they were given).
    pub text: String,
}

/// Parses one line written in `format`. An error names what is wrong with the line (a
/// JSON line that is not a JSON object with the expected members, a text line without a
/// level and target).
pub fn parse(line: &str, format: Format) -> Result<Event, String> {
    match format {
        Format::Json => parse_json(line),
        Format::Text => parse_text(line),
    }
}

fn parse_json(line: &str) -> Result<Event, String> {
    let v: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("not JSON ({e}): {line:?}"))?;
    let member = |k: &str| {
        v.get(k)
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| format!("no string {k:?} in {line:?}"))
    };
    let (level, target) = (member("level")?, member("target")?);
    member("timestamp")?;
    let fields = v
        .get("fields")
        .and_then(serde_json::Value::as_object)
        .ok_or_else(|| format!("no \"fields\" object in {line:?}"))?;
    let message = fields
        .get("message")
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| format!("no fields.message in {line:?}"))?;
    let mut text = message.to_string();
    let mut others: Vec<String> = fields
        .iter()
        .filter(|(k, _)| k.as_str() != "message")
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect();
    others.sort();
    for f in others {
        text.push(' ');
        text.push_str(&f);
    }
    Ok(Event {
        level,
        target,
        text,
    })
}

/// A trailing ` key=value` token of a text line (tracing's field names are identifiers,
/// possibly dotted).
fn is_field(token: &str) -> bool {
    token.split_once('=').is_some_and(|(k, _)| {
        !k.is_empty()
            && k.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && k.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
    })
}

fn parse_text(line: &str) -> Result<Event, String> {
    let bad = || format!("not a log line (timestamp, level, target): {line:?}");
    let mut rest = line.trim_start();
    // The timestamp, then the level (padded to five characters).
    let (_, r) = rest.split_once(' ').ok_or_else(bad)?;
    rest = r.trim_start();
    let (level, r) = rest.split_once(' ').ok_or_else(bad)?;
    if !["ERROR", "WARN", "INFO", "DEBUG", "TRACE"].contains(&level) {
        return Err(bad());
    }
    let (target, body) = r.split_once(": ").ok_or_else(bad)?;
    // The fields follow the message; the JSON side lists them sorted by key.
    let mut words: Vec<&str> = body.split(' ').collect();
    let mut fields = Vec::new();
    while words.len() > 1 && words.last().is_some_and(|w| is_field(w)) {
        fields.extend(words.pop());
    }
    fields.sort_unstable();
    let mut text = words.join(" ");
    for f in fields {
        text.push(' ');
        text.push_str(f);
    }
    Ok(Event {
        level: level.to_string(),
        target: target.to_string(),
        text,
    })
}

/// The events of a run as a multiset of `LEVEL target: text`, with what differs between
/// two runs of the same scenario made equal: `subs` (a temporary directory, say) replaced
/// first, then every run of digits (ports, pids, sizes, durations) replaced by `#`.
pub fn event_counts(events: &[Event], subs: &[(&str, &str)]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for e in events {
        let mut text = e.text.clone();
        for (from, to) in subs {
            text = text.replace(from, to);
        }
        let mut norm = String::with_capacity(text.len());
        let mut in_digits = false;
        for c in text.chars() {
            if c.is_ascii_digit() {
                if !in_digits {
                    norm.push('#');
                }
                in_digits = true;
            } else {
                norm.push(c);
                in_digits = false;
            }
        }
        *out.entry(format!("{} {}: {norm}", e.level, e.target))
            .or_insert(0) += 1;
    }
    out
}

/// A daemon started with its stderr read line by line in the background; killed when
/// dropped.
pub struct LoggingProcess {
    child: Child,
    format: Format,
    lines: mpsc::Receiver<String>,
    seen: Vec<Event>,
}

impl LoggingProcess {
    /// Spawns `cmd` (stdin and stdout to /dev/null, stderr read here), whose logs are in
    /// `format`.
    pub fn spawn(mut cmd: Command, format: Format) -> LoggingProcess {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the daemon");
        let stderr = child.stderr.take().expect("stderr piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        LoggingProcess {
            child,
            format,
            lines,
            seen: Vec::new(),
        }
    }

    /// Takes one line, parsing it (a line that does not parse fails the test).
    fn take(&mut self, line: &str) -> Event {
        let e = parse(line, self.format).unwrap_or_else(|e| panic!("{e}"));
        self.seen.push(e.clone());
        e
    }

    /// Waits (at most `within`) for an event whose text contains `needle` and returns it.
    pub fn wait_for(&mut self, needle: &str, within: Duration) -> Event {
        if let Some(e) = self.seen.iter().find(|e| e.text.contains(needle)) {
            return e.clone();
        }
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let e = self.take(&line);
                    if e.text.contains(needle) {
                        return e;
                    }
                }
                Err(_) => panic!(
                    "no event with {needle:?} within {within:?}: {:#?}",
                    self.seen
                ),
            }
        }
    }

    /// Sends `signal` (0 for none) and waits (at most `within`) for the process to exit and
    /// its stderr to end; returns the exit status and every event it logged.
    pub fn finish(mut self, signal: i32, within: Duration) -> (ExitStatus, Vec<Event>) {
        if signal != 0 {
            // SAFETY: kill(2) on our own child, by its pid.
            unsafe { libc::kill(self.child.id() as i32, signal) };
        }
        let deadline = Instant::now() + within;
        // stderr ends when the process (the only writer) has exited.
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.take(&line);
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!(
                        "the daemon did not exit within {within:?}: {:#?}",
                        self.seen
                    )
                }
            }
        }
        let status = loop {
            if let Some(st) = self.child.try_wait().expect("wait") {
                break st;
            }
            assert!(Instant::now() < deadline, "the daemon did not exit");
            std::thread::sleep(Duration::from_millis(10));
        };
        (status, std::mem::take(&mut self.seen))
    }
}

impl Drop for LoggingProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The scenario each daemon's log test runs once per format, and the check that both
/// formats logged the same events. Per format, with `command(format, port)` (the daemon
/// listening on 127.0.0.1:`port`, 0 for any, logging at debug level):
/// 1. start it and wait for its `listening on ADDR` event;
/// 2. open a connection to ADDR and close it, and wait for its `connection closed`;
/// 3. SIGTERM: it must exit 0;
/// 4. start it again on a port this test holds: it must fail, with an error event saying
///    the address is in use.
///
/// Every line of both formats must parse (JSON lines as JSON objects), and the two runs'
/// [`event_counts`] (after `subs`) must be equal; they are returned for the caller to
/// check daemon-specific events.
pub fn same_events_in_both_formats(
    command: impl Fn(Format, u16) -> Command,
    subs: &[(&str, &str)],
) -> BTreeMap<String, usize> {
    const WAIT: Duration = Duration::from_secs(20);
    let mut runs = Vec::new();
    for format in Format::BOTH {
        let mut p = LoggingProcess::spawn(command(format, 0), format);
        let listening = p.wait_for("listening on ", WAIT);
        let addr: std::net::SocketAddr = listening
            .text
            .split("listening on ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in {listening:?}"));
        let conn = std::net::TcpStream::connect_timeout(&addr, WAIT).expect("connect");
        drop(conn);
        p.wait_for("connection closed", WAIT);
        let (status, mut events) = p.finish(libc::SIGTERM, WAIT);
        assert!(
            status.success(),
            "{format:?}: SIGTERM exit {status}: {events:#?}"
        );

        let held = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = held.local_addr().expect("addr").port();
        let p = LoggingProcess::spawn(command(format, port), format);
        let (status, failed) = p.finish(0, WAIT);
        drop(held);
        assert!(!status.success(), "{format:?}: started on a port in use");
        assert!(
            failed
                .iter()
                .any(|e| e.level == "ERROR" && e.text.contains("in use")),
            "{format:?}: no error event for the port in use: {failed:#?}"
        );
        events.extend(failed);
        runs.push(event_counts(&events, subs));
    }
    let json = runs.pop().expect("json run");
    let text = runs.pop().expect("text run");
    assert_eq!(text, json, "text (left) and JSON (right) logs differ");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_formats_parse_to_the_same_event() {
        let text = "2026-11-25T10:00:00.123456Z DEBUG shoal_net::accept: connection accepted \
                    peer=127.0.0.1:5000";
        let json = r#"{"timestamp":"2026-11-25T10:00:00.123456Z","level":"DEBUG","fields":{"message":"connection accepted","peer":"127.0.0.1:5000"},"target":"shoal_net::accept"}"#;
        let a = parse(text, Format::Text).expect("text");
        let b = parse(json, Format::Json).expect("json");
        assert_eq!(a, b);
        assert_eq!(a.text, "connection accepted peer=127.0.0.1:5000");
        let info = parse(
            "2026-11-25T10:00:00Z  INFO shoald: listening on 1:2",
            Format::Text,
        );
        assert_eq!(info.expect("text").level, "INFO");
        assert!(parse("shoald: failed", Format::Text).is_err());
        assert!(parse("{\"level\":\"INFO\"}", Format::Json).is_err());
        assert!(parse("plain text", Format::Json).is_err());
        let counts = event_counts(&[a.clone(), a], &[("127.0.0.1", "<ip>")]);
        assert_eq!(
            counts.into_iter().collect::<Vec<_>>(),
            [(
                "DEBUG shoal_net::accept: connection accepted peer=<ip>:#".to_string(),
                2
            )]
        );
    }
}
