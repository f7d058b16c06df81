//! Parsed requests. Every slice borrows from the read buffer the request was parsed from.

use crate::meta::MetaFlags;

/// Which storage command a [`Request::Store`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// `set`: store unconditionally.
    Set,
    /// `add`: store only if the key is absent.
    Add,
    /// `replace`: store only if the key is present.
    Replace,
    /// `append`: add the data after the existing value (flags and exptime ignored).
    Append,
    /// `prepend`: add the data before the existing value (flags and exptime ignored).
    Prepend,
    /// `cas`: store only if the item's CAS unique equals the given one.
    Cas,
}

/// The argument of `stats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatsGroup<'a> {
    /// Plain `stats`.
    General,
    /// `stats settings`.
    Settings,
    /// `stats items`.
    Items,
    /// `stats slabs`.
    Slabs,
    /// `stats sizes`.
    Sizes,
    /// `stats conns`.
    Conns,
    /// `stats reset`.
    Reset,
    /// Any other argument, passed through: everything after `stats ` up to the end of the
    /// line, trailing spaces removed (e.g. `detail on`, `cachedump 1 10`), so groups that
    /// take arguments can read them. memcached answers unknown groups with `ERROR`.
    Other(&'a [u8]),
}

/// The space-separated keys of a retrieval command, validated by the parser: each is
/// 1..=250 bytes containing no space. Like memcached, other bytes (control bytes and NUL
/// too) are allowed in keys. Never empty. Iterating allocates nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keys<'a> {
    /// The keys, separated by one or more spaces; no leading or trailing space.
    pub(crate) raw: &'a [u8],
}

impl<'a> Keys<'a> {
    /// Wraps a space-separated list already validated by the parser.
    pub fn from_validated(raw: &'a [u8]) -> Self {
        Keys { raw }
    }

    /// The keys in request order.
    pub fn iter(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.raw.split(|&b| b == b' ').filter(|k| !k.is_empty())
    }

    /// The keys from byte offset `from` of the list on (an offset a previous
    /// [`Keys::iter_from`] returned, or 0), each with the offset where the key starts, so a
    /// multi-get that stops half-way can continue where it stopped without rescanning.
    /// An offset past the end yields nothing.
    pub fn iter_from(&self, from: usize) -> impl Iterator<Item = (usize, &'a [u8])> + 'a {
        let raw = self.raw;
        let mut pos = from.min(raw.len());
        std::iter::from_fn(move || {
            while pos < raw.len() && raw[pos] == b' ' {
                pos += 1;
            }
            if pos >= raw.len() {
                return None;
            }
            let start = pos;
            let len = memchr::memchr(b' ', &raw[start..]).unwrap_or(raw.len() - start);
            pos = start + len;
            Some((start, &raw[start..pos]))
        })
    }
}

/// One complete request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    /// `get`/`gets <key>+`: `with_cas` is true for `gets`.
    Get {
        /// The keys, in request order.
        keys: Keys<'a>,
        /// `gets`/`gats`: reply with each CAS unique.
        with_cas: bool,
    },
    /// `gat`/`gats <exptime> <key>+`: fetch and set a new expiration time.
    GetAndTouch {
        /// The expiration time as sent (relative seconds, or a Unix time past 30 days).
        exptime: i64,
        /// The keys, in request order.
        keys: Keys<'a>,
        /// `gets`/`gats`: reply with each CAS unique.
        with_cas: bool,
    },
    /// `set|add|replace|append|prepend <key> <flags> <exptime> <bytes> [noreply]` and
    /// `cas <key> <flags> <exptime> <bytes> <cas unique> [noreply]`, with its data block
    /// (without the trailing `\r\n`, which the parser has checked). `cas_unique` is 0 for
    /// every kind but [`StoreKind::Cas`].
    Store {
        /// Which storage command.
        kind: StoreKind,
        /// The key as sent.
        key: &'a [u8],
        /// Client flags.
        flags: u32,
        /// The expiration time as sent (relative seconds, or a Unix time past 30 days).
        exptime: i64,
        /// The data block, without its `\r\n`.
        data: &'a [u8],
        /// The CAS unique to compare (0 unless `cas`).
        cas_unique: u64,
        /// Send no reply on success (`noreply`).
        noreply: bool,
    },
    /// `delete <key> [noreply]` (memcached 1.6.45 ignores any other token after the key).
    Delete {
        /// The key as sent.
        key: &'a [u8],
        /// Send no reply on success (`noreply`).
        noreply: bool,
    },
    /// `incr|decr <key> <delta> [noreply]`: `incr` is true for incr.
    Arithmetic {
        /// The key as sent.
        key: &'a [u8],
        /// The amount to add or subtract.
        delta: u64,
        /// `incr` (true) or `decr`.
        incr: bool,
        /// Send no reply on success (`noreply`).
        noreply: bool,
    },
    /// `touch <key> <exptime> [noreply]`.
    Touch {
        /// The key as sent.
        key: &'a [u8],
        /// The expiration time as sent (relative seconds, or a Unix time past 30 days).
        exptime: i64,
        /// Send no reply on success (`noreply`).
        noreply: bool,
    },
    /// `flush_all [delay] [noreply]`: `delay` is 0 when absent.
    FlushAll {
        /// Seconds until the flush takes effect.
        delay: i64,
        /// Send no reply on success (`noreply`).
        noreply: bool,
    },
    /// `flush_all <delay> [noreply]` whose delay is not a number. memcached counts the
    /// command and checks `-F` before it reads the delay, so the server answers it:
    /// `CLIENT_ERROR flush_all not allowed` with `-F`, else
    /// `CLIENT_ERROR invalid exptime argument` (both suppressed by `noreply`).
    FlushAllInvalidDelay {
        /// Send no reply on success (`noreply`).
        noreply: bool,
    },
    /// `version`.
    Version,
    /// `verbosity <level> [noreply]`.
    Verbosity {
        /// The verbosity level.
        level: u32,
        /// Send no reply on success (`noreply`).
        noreply: bool,
    },
    /// `quit`.
    Quit,
    /// `shutdown`. (memcached answers `SERVER_ERROR: shutdown not enabled` unless started
    /// with `-A`; that check is the server's, see [`crate::reply::SHUTDOWN_NOT_ENABLED`].)
    Shutdown,
    /// `shutdown graceful` (or any prefix of `graceful`, as memcached compares it).
    ShutdownGraceful,
    /// `shutdown <anything else>`: memcached checks `-A` before the mode, so the server
    /// answers `SERVER_ERROR: shutdown not enabled` without `-A`, else
    /// `CLIENT_ERROR invalid shutdown mode`.
    ShutdownInvalidMode,
    /// `cache_memlimit <megabytes> [noreply]`. `megabytes` is within 8..=1_000_000_000:
    /// the parser answers other values with memcached's `MEMLIMIT_TOO_SMALL ...` /
    /// `MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes` replies itself.
    CacheMemlimit {
        /// The new memory limit in megabytes.
        megabytes: u64,
        /// Send no reply on success (`noreply`).
        noreply: bool,
    },
    /// `stats [group]`.
    Stats(StatsGroup<'a>),
    /// `lru_crawler <subcommand> [<args>]`: everything after `lru_crawler `, trailing
    /// spaces removed (`metadump all`, `crawl 1,2`, `sleep 100`...).
    LruCrawler(&'a [u8]),
    /// `slabs <subcommand> [<args>]` (`automove`, `reassign`): everything after `slabs`,
    /// for the server to judge as memcached does.
    Slabs(&'a [u8]),
    /// `lru <subcommand> [<args>]` (`tune`, `mode`, `temp_ttl`): everything after `lru`.
    Lru(&'a [u8]),
    /// `extstore <setting> <value>`: changes a flash-tier setting at run time
    /// (`item_size`, `max_frag`, `drop_unread`...); everything after `extstore`.
    Extstore(&'a [u8]),
    /// `refresh_certs [noreply]`: reload the TLS certificate and key. Everything after
    /// the command (memcached ignores it but for a final `noreply`).
    RefreshCerts(&'a [u8]),
    /// `debugtime <seconds|p|r>`: memcached-debug's command that moves the server clock
    /// forward, pauses it (`p`) or lets it run again (`r`): everything after `debugtime`.
    /// A server answers it only when its operator turned it on (shoald's
    /// `-o debug_time`); otherwise it is an unknown command, as in release memcached.
    DebugTime(&'a [u8]),
    /// `watch [<type> ...]`: everything after `watch` (`fetchers mutations`...), empty
    /// for a bare `watch`.
    Watch(&'a [u8]),
    /// `mg <key> <flags>*`.
    ///
    /// For every meta request, `key` is as sent (1..=250 bytes): base64 when
    /// `flags.base64()`, in which case the parser has checked it decodes; get the real key
    /// with [`crate::meta::decode_key`]. Flags are validated (see [`MetaFlags`]).
    MetaGet {
        /// The key as sent.
        key: &'a [u8],
        /// The validated meta flags.
        flags: MetaFlags<'a>,
    },
    /// `ms <key> <datalen> <flags>*` with its data block (without `\r\n`). A mode
    /// (`flags.mode()`) is one of `E A P R S`.
    MetaSet {
        /// The key as sent.
        key: &'a [u8],
        /// The validated meta flags.
        flags: MetaFlags<'a>,
        /// The data block, without its `\r\n`.
        data: &'a [u8],
    },
    /// `md <key> <flags>*`.
    MetaDelete {
        /// The key as sent.
        key: &'a [u8],
        /// The validated meta flags.
        flags: MetaFlags<'a>,
    },
    /// `ma <key> <flags>*`. A mode (`flags.mode()`) is one of `I + D -`.
    MetaArithmetic {
        /// The key as sent.
        key: &'a [u8],
        /// The validated meta flags.
        flags: MetaFlags<'a>,
    },
    /// `mn`: replies `MN`.
    MetaNoop,
    /// `me <key> [b]`: debug dump of one item. Like memcached, every flag except a `b`
    /// right after the key is ignored, so `flags` is either empty or just `b`.
    MetaDebug {
        /// The key as sent.
        key: &'a [u8],
        /// The validated meta flags.
        flags: MetaFlags<'a>,
    },
}

#[cfg(test)]
mod tests {
    use super::Keys;

    #[test]
    fn iter_from_resumes_at_a_key_boundary() {
        let keys = Keys::from_validated(b"a  bb ccc");
        let all: Vec<_> = keys.iter_from(0).collect();
        assert_eq!(all, vec![(0, &b"a"[..]), (3, &b"bb"[..]), (6, &b"ccc"[..])]);
        let rest: Vec<_> = keys.iter_from(3).map(|(_, k)| k).collect();
        assert_eq!(rest, vec![&b"bb"[..], &b"ccc"[..]]);
        assert_eq!(keys.iter_from(1).count(), 2, "separator runs are skipped");
        assert_eq!(keys.iter_from(100).count(), 0);
        assert!(keys.iter().eq(keys.iter_from(0).map(|(_, k)| k)));
    }
}
