//! `--log-format text|json`: the three daemons' logging set-up, one place so that both
//! formats carry the same events (every `tracing` event, with its fields) on stderr.

use std::fmt;
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

/// Installs the global subscriber: events at `level` and above, to stderr, in `format`.
pub fn init(format: LogFormat, level: tracing::Level) {
    let builder = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_formats_and_refuses_others() {
        assert_eq!("text".parse::<LogFormat>().ok(), Some(LogFormat::Text));
        assert_eq!("json".parse::<LogFormat>().ok(), Some(LogFormat::Json));
        assert!("xml".parse::<LogFormat>().is_err());
        assert_eq!(LogFormat::Json.to_string(), "json");
    }
}
