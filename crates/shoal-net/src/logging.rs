//! `--log-format text|json`: the three daemons' logging set-up, one place so that both
//! formats carry the same events (every `tracing` event, with its fields) on stderr.

use std::fmt;
use std::io::IsTerminal;
use std::str::FromStr;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// tracing-subscriber's human-readable lines (the default).
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `fields.message` and the event's
    /// other fields, `target`), for log shippers.
    Json,
}

impl FromStr for LogFormat {
    type Err = UnknownLogFormat;

    fn from_str(s: &str) -> Result<LogFormat, UnknownLogFormat> {
        match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(UnknownLogFormat(other.to_string())),
        }
    }
}

impl fmt::Display for LogFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        })
    }
}

/// A `--log-format` value that is neither `text` nor `json`.
#[derive(Debug, thiserror::Error)]
#[error("unknown log format {0:?} (expected text or json)")]
pub struct UnknownLogFormat(pub String);

/// Installs the global subscriber: events at `level` and above, to stderr, in `format`
/// (text with colours only when stderr is a terminal, so a log file or journal gets
/// plain lines). Also makes a panic an error event like any other (the default hook
/// would print plain text, breaking JSON lines): the panicking thread, the location and
/// the message, and the backtrace when `RUST_BACKTRACE` asks for one.
///
/// Errors a daemon meets before this is called (a bad command line) go to stderr as
/// plain text, as memcached prints them.
pub fn init(format: LogFormat, level: tracing::Level) {
    let builder = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
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
    fn parses_both_formats_and_refuses_others() {
        assert_eq!("text".parse::<LogFormat>().ok(), Some(LogFormat::Text));
        assert_eq!("json".parse::<LogFormat>().ok(), Some(LogFormat::Json));
        assert!("xml".parse::<LogFormat>().is_err());
        assert_eq!(LogFormat::Json.to_string(), "json");
    }
}
