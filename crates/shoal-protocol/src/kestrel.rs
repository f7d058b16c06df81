//! Kestrel's read options, carried in the key of a `get`: `name/t=500/close/open`.
//!
//! A key carrying options is a Kestrel client's: shoal-queued answers it in Kestrel's
//! reply mode, and shoal-proxy's queue pools act on the options themselves. As in
//! Kestrel 2.4, an option it does not know is ignored.

use std::time::Duration;

/// Longest a blocking read may wait, whatever the client asks.
pub const MAX_WAIT: Duration = Duration::from_secs(600);

/// A parsed `get` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReadOptions<'a> {
    /// The queue name (not yet validated).
    pub queue: &'a [u8],
    /// `/t=<ms>`: wait up to this long for a message.
    pub timeout: Option<Duration>,
    /// `/open`: a reliable read, consumed only by a later `/close`.
    pub open: bool,
    /// `/close`: consume this connection's open read first.
    pub close: bool,
    /// `/abort`: return this connection's open read to the queue.
    pub abort: bool,
    /// `/peek`: return the head without taking it.
    pub peek: bool,
}

/// Why a key's options were refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OptionError {
    /// `t=` with something other than milliseconds.
    #[error("bad timeout")]
    BadTimeout,
    /// Options that cannot be combined (`peek` with `open`, `abort` with anything else).
    #[error("conflicting options")]
    Conflict,
}

/// Whether a `get` key carries any option at all (a `/`, which no queue name holds): the
/// request of a Kestrel client.
pub fn carries_options(key: &[u8]) -> bool {
    key.contains(&b'/')
}

/// Splits a key into queue name and options, ignoring options Kestrel does not know (as
/// it does). Guarantees the returned options are a combination the server can act on.
pub fn parse_key(key: &[u8]) -> Result<ReadOptions<'_>, OptionError> {
    let mut parts = key.split(|&b| b == b'/');
    let mut o = ReadOptions {
        queue: parts.next().unwrap_or_default(),
        ..ReadOptions::default()
    };
    for p in parts {
        match p {
            b"open" => o.open = true,
            b"close" => o.close = true,
            b"abort" => o.abort = true,
            b"peek" => o.peek = true,
            _ => {
                let Some(ms) = p.strip_prefix(b"t=") else {
                    continue;
                };
                let ms: u64 = std::str::from_utf8(ms)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or(OptionError::BadTimeout)?;
                o.timeout = Some(Duration::from_millis(ms).min(MAX_WAIT));
            }
        }
    }
    if (o.peek && (o.open || o.close)) || (o.abort && (o.open || o.close || o.peek)) {
        return Err(OptionError::Conflict);
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kestrel_keys() {
        let o = parse_key(b"q/t=100/close/open").expect("valid");
        assert_eq!(o.queue, b"q");
        assert_eq!(o.timeout, Some(Duration::from_millis(100)));
        assert!(o.open && o.close && !o.abort && !o.peek);
        assert_eq!(parse_key(b"q").expect("plain").queue, b"q");
        assert!(parse_key(b"q/peek").expect("peek").peek);
        assert_eq!(
            parse_key(b"q/t=99999999").expect("capped").timeout,
            Some(MAX_WAIT)
        );
        // Unknown options are ignored, as Kestrel does.
        let o = parse_key(b"q/bogus/open").expect("ignored");
        assert!(o.queue == b"q" && o.open);
        assert_eq!(parse_key(b"q/t=x"), Err(OptionError::BadTimeout));
        assert_eq!(parse_key(b"q/peek/open"), Err(OptionError::Conflict));
        assert_eq!(parse_key(b"q/abort/close"), Err(OptionError::Conflict));
        // Empty or dotted names parse here; the caller refuses them.
        assert_eq!(parse_key(b"/open").expect("parses").queue, b"");
        assert_eq!(parse_key(b"../x").expect("parses").queue, b"..");
        assert!(carries_options(b"q/open"));
        assert!(!carries_options(b"q"));
    }
}
