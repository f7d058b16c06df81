//! `--log-format auto|text|json|journal`: the three daemons' logging set-up, one place so
//! that every format carries the same events (every `tracing` event, with its fields) on
//! stderr.
//!
//! Under systemd, stderr goes to the journal, which stamps each line with the time and
//! takes its priority from a `<N>` prefix (sd-daemon(3)); the `journal` format writes
//! exactly that: no timestamp of its own, no level word, the syslog priority in front.
//! `auto`, the default, picks it when stderr is the journal's stream (systemd sets
//! `JOURNAL_STREAM` to that stream's device and inode) and `text` otherwise.

use std::fmt;
use std::io::IsTerminal;
use std::str::FromStr;
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::FmtContext;
use tracing_subscriber::registry::LookupSpan;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// `journal` when stderr is systemd's journal, else `text` (the default).
    #[default]
    Auto,
    /// tracing-subscriber's human-readable lines: time, level, target, message, fields.
    Text,
    /// One JSON object per line (`timestamp`, `level`, `fields.message` and the event's
    /// other fields, `target`), for log shippers.
    Json,
    /// systemd's journal conventions: `<N>` (the syslog priority: 3 error, 4 warning,
    /// 6 info, 7 debug) then target, message and fields; no timestamp, no colours.
    Journal,
}

impl FromStr for LogFormat {
    type Err = UnknownLogFormat;

    fn from_str(s: &str) -> Result<LogFormat, UnknownLogFormat> {
        match s {
            "auto" => Ok(LogFormat::Auto),
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            "journal" => Ok(LogFormat::Journal),
            other => Err(UnknownLogFormat(other.to_string())),
        }
    }
}

impl fmt::Display for LogFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LogFormat::Auto => "auto",
            LogFormat::Text => "text",
            LogFormat::Json => "json",
            LogFormat::Journal => "journal",
        })
    }
}

impl LogFormat {
    /// What `Auto` means in this process: `Journal` when stderr is the journal's stream,
    /// else `Text`. Other formats are themselves.
    pub fn resolve(self) -> LogFormat {
        match self {
            LogFormat::Auto if stderr_is_journal() => LogFormat::Journal,
            LogFormat::Auto => LogFormat::Text,
            other => other,
        }
    }
}

/// A `--log-format` value that is none of `auto`, `text`, `json` and `journal`.
#[derive(Debug, thiserror::Error)]
#[error("unknown log format {0:?} (expected auto, text, json or journal)")]
pub struct UnknownLogFormat(pub String);

/// Whether stderr is the stream systemd connected to the journal: `JOURNAL_STREAM` is
/// `DEVICE:INODE` of it, and a child whose stderr was redirected still inherits the
/// variable, so the descriptor itself is compared.
fn stderr_is_journal() -> bool {
    let Some(value) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Some((dev, ino)) = value.to_str().and_then(parse_journal_stream) else {
        return false;
    };
    // SAFETY: fstat fills the struct we own; descriptor 2 may be closed, which it reports.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::fstat(2, &mut st) } != 0 {
        return false;
    }
    st.st_dev == dev && st.st_ino == ino
}

/// `JOURNAL_STREAM`'s `DEVICE:INODE`, both decimal.
fn parse_journal_stream(value: &str) -> Option<(libc::dev_t, libc::ino_t)> {
    let (dev, ino) = value.split_once(':')?;
    Some((dev.parse().ok()?, ino.parse().ok()?))
}

/// The journal's line format: the event's syslog priority as `<N>`, then the wrapped
/// format's line (which is set up without time and level).
struct Journald<F>(F);

impl<S, N, F> FormatEvent<S, N> for Journald<F>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> fmt::Result {
        write!(writer, "<{}>", priority(*event.metadata().level()))?;
        self.0.format_event(ctx, writer, event)
    }
}

/// The syslog priority (sd-daemon(3)'s `SD_ERR` ... `SD_DEBUG`) for a level.
fn priority(level: tracing::Level) -> u8 {
    match level {
        tracing::Level::ERROR => 3,
        tracing::Level::WARN => 4,
        tracing::Level::INFO => 6,
        _ => 7,
    }
}

/// Installs the global subscriber: events at `level` and above, to stderr, in `format`
/// (text with colours only when stderr is a terminal, so a log file or journal gets
/// plain lines; `Auto` resolved by [`LogFormat::resolve`]). Also makes a panic an error
/// event like any other (the default hook would print plain text, breaking JSON lines):
/// the panicking thread, the location and the message, and the backtrace when
/// `RUST_BACKTRACE` asks for one.
///
/// Errors a daemon meets before this is called (a bad command line) go to stderr as
/// plain text, as memcached prints them.
pub fn init(format: LogFormat, level: tracing::Level) {
    let builder = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match format.resolve() {
        LogFormat::Json => builder.json().init(),
        LogFormat::Journal => {
            let line = tracing_subscriber::fmt::format()
                .without_time()
                .with_level(false)
                .with_ansi(false);
            builder.with_ansi(false).event_format(Journald(line)).init()
        }
        LogFormat::Auto | LogFormat::Text => builder.init(),
    }
    set_panic_hook();
}

/// An error and its causes on one line, `error: cause: cause`, for a fatal error's log
/// event. A cause whose text the line already holds is left out: errors that print their
/// source in their own message (thiserror's `{source}`) would otherwise say it twice.
pub fn error_text(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        let c_text = c.to_string();
        if !text.contains(&c_text) {
            text.push_str(": ");
            text.push_str(&c_text);
        }
        cause = c.source();
    }
    text
}

/// Installs [`log_panic`] as the panic hook. (The hook's argument type is not named: it
/// was renamed after the minimum supported Rust version.)
fn set_panic_hook() {
    std::panic::set_hook(Box::new(|info| log_panic(info.payload(), info.location())));
}

/// What the panic hook [`init`] installs logs.
fn log_panic(payload: &(dyn std::any::Any + Send), location: Option<&std::panic::Location<'_>>) {
    let thread = std::thread::current();
    let thread = thread.name().unwrap_or("<unnamed>");
    let message = crate::panic_message(payload);
    let location = location.map(ToString::to_string).unwrap_or_default();
    let backtrace = std::backtrace::Backtrace::capture();
    if backtrace.status() == std::backtrace::BacktraceStatus::Captured {
        tracing::error!(thread, location, %backtrace, "panicked: {message}");
    } else {
        tracing::error!(thread, location, "panicked: {message}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_text_says_each_cause_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("cannot listen on 1.2.3.4:5: {source}")]
        struct Listen {
            source: std::io::Error,
        }
        #[derive(Debug, thiserror::Error)]
        #[error("starting")]
        struct Starting(#[source] Listen);
        let e = Starting(Listen {
            source: std::io::Error::other("in use"),
        });
        assert_eq!(
            error_text(&e),
            "starting: cannot listen on 1.2.3.4:5: in use"
        );
        assert_eq!(error_text(&std::io::Error::other("alone")), "alone");
    }

    /// Log lines written by the subscriber under test.
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend_from_slice(b);
            Ok(b.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_panic_is_an_error_event() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_writer(move || writer.clone())
            .finish();
        // The hook runs on the panicking thread, so this thread's subscriber sees it.
        tracing::subscriber::with_default(subscriber, || {
            set_panic_hook();
            let r = std::panic::catch_unwind(|| panic!("boom {}", 42));
            // Back to the default hook for the other tests.
            drop(std::panic::take_hook());
            assert!(r.is_err());
        });
        let text = String::from_utf8_lossy(&captured.0.lock().unwrap_or_else(|e| e.into_inner()))
            .into_owned();
        let line = text.lines().next().expect("one event");
        assert!(line.starts_with('{') && line.ends_with('}'), "{line}");
        assert!(line.contains("\"level\":\"ERROR\""), "{line}");
        assert!(line.contains("\"message\":\"panicked: boom 42\""), "{line}");
        assert!(
            line.contains("\"location\":\"crates/shoal-net/src/logging.rs:"),
            "{line}"
        );
        assert!(
            line.contains("\"thread\":\"logging::tests::a_panic_is_an_error_event\""),
            "{line}"
        );
    }

    #[test]
    fn parses_every_format_and_refuses_others() {
        for f in [
            LogFormat::Auto,
            LogFormat::Text,
            LogFormat::Json,
            LogFormat::Journal,
        ] {
            assert_eq!(f.to_string().parse::<LogFormat>().ok(), Some(f));
        }
        assert!("xml".parse::<LogFormat>().is_err());
        assert_eq!(LogFormat::Json.to_string(), "json");
        assert_eq!(LogFormat::Journal.resolve(), LogFormat::Journal);
    }

    #[test]
    fn journal_stream_is_device_and_inode() {
        assert_eq!(parse_journal_stream("8:12345"), Some((8, 12345)));
        assert_eq!(parse_journal_stream("8"), None);
        assert_eq!(parse_journal_stream("x:1"), None);
    }

    #[test]
    fn journal_lines_have_a_priority_and_no_time() {
        let captured = Captured::default();
        let writer = captured.clone();
        let line = tracing_subscriber::fmt::format()
            .without_time()
            .with_level(false)
            .with_ansi(false);
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .event_format(Journald(line))
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::error!("failed to listen");
            tracing::warn!(conns = 3, "careful");
            tracing::info!("listening on 127.0.0.1:11211");
            tracing::debug!("detail");
        });
        let text = String::from_utf8_lossy(&captured.0.lock().unwrap_or_else(|e| e.into_inner()))
            .into_owned();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "<3>shoal_net::logging::tests: failed to listen",
                "<4>shoal_net::logging::tests: careful conns=3",
                "<6>shoal_net::logging::tests: listening on 127.0.0.1:11211",
                "<7>shoal_net::logging::tests: detail",
            ]
        );
    }
}
