//! Protocol errors with memcached's exact reply texts, shared by the text, meta and
//! binary parsers (kept apart from `parse` so that `meta` and `parse` do not depend on
//! each other).

macro_rules! protocol_errors {
    ($($(#[$doc:meta])* $name:ident => $text:literal,)*) => {
        /// A protocol error. `Display` is memcached's exact reply line without `\r\n`;
        /// [`ProtocolError::reply`] is the same line with `\r\n`.
        #[derive(thiserror::Error, Debug, Clone, Copy, PartialEq, Eq)]
        pub enum ProtocolError {
            $($(#[$doc])* #[error($text)] $name,)*
        }

        impl ProtocolError {
            /// The exact reply bytes memcached sends for this error, including `\r\n`.
            pub fn reply(&self) -> &'static [u8] {
                match self {
                    $(ProtocolError::$name => concat!($text, "\r\n").as_bytes(),)*
                }
            }
        }
    };
}

protocol_errors! {
    /// Unknown command, or a known one with the wrong number of tokens.
    UnknownCommand => "ERROR",
    /// Malformed command line (bad key length, bad number...).
    BadCommandLineFormat => "CLIENT_ERROR bad command line format",
    /// A data block not followed by `\r\n`.
    BadDataChunk => "CLIENT_ERROR bad data chunk",
    /// A request line with no newline within the limit; memcached closes the connection
    /// without replying, so this is only ever returned with `silent` and `close` set.
    LineTooLong => "CLIENT_ERROR line too long",
    /// An HTTP request line (memcached closes the connection without replying); only ever
    /// returned with `silent` and `close` set.
    HttpRequest => "ERROR",
    /// A retrieval key over 250 bytes. memcached's error path for it copies the reply
    /// line with its `\r\n` and adds another, so the reply ends in two line ends.
    GetKeyTooLong => "CLIENT_ERROR bad command line format\r\n",
    /// `delete <key> <something>` other than a hold time of `0` and/or `noreply`
    /// (memcached 1.6.18's reply; 1.6.45 ignores the extra tokens, see `parse_delete`).
    DeleteUsage => "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]",
    /// `incr`/`decr` delta that is not a u64.
    InvalidDeltaArgument => "CLIENT_ERROR invalid numeric delta argument",
    /// Bad exptime for `touch`, `gat`/`gats`, or bad `flush_all` delay.
    InvalidExptime => "CLIENT_ERROR invalid exptime argument",
    /// `shutdown` with an argument other than `graceful`.
    InvalidShutdownMode => "CLIENT_ERROR invalid shutdown mode",
    /// `cache_memlimit` below 8 megabytes.
    MemlimitTooSmall => "MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m",
    /// `cache_memlimit` above 1,000,000,000 (the client sent bytes, not megabytes).
    MemlimitNotMegabytes => "MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes",
    /// A value over the size limit (the reply for [`Parsed::TooLarge`](crate::Parsed::TooLarge)).
    ObjectTooLarge => "SERVER_ERROR object too large for cache",
    /// Meta: a flag letter repeated.
    DuplicateFlag => "CLIENT_ERROR duplicate flag",
    /// Meta: a flag memcached does not know.
    InvalidFlag => "CLIENT_ERROR invalid flag",
    /// `md`/`ma`: any flag error (memcached reports them all this way for these commands).
    InvalidOrDuplicateFlag => "CLIENT_ERROR invalid or duplicate flag",
    /// Meta: bad numeric token for `N`, `T`, `R`, `C` or `E`.
    BadTokenFormat => "CLIENT_ERROR bad token in command line format",
    /// Meta: the `b` flag with a key that is not valid base64.
    KeyDecode => "CLIENT_ERROR error decoding key",
    /// Meta: bad `J` token.
    InvalidInitialValue => "CLIENT_ERROR invalid numeric initial value",
    /// Meta: bad `D` token.
    InvalidDeltaValue => "CLIENT_ERROR invalid numeric delta value",
    /// Meta: an `O` token longer than 32 bytes (counting the `O`).
    OpaqueTooLong => "CLIENT_ERROR opaque token too long",
    /// A meta command with too many tokens.
    FlagsTooLong => "CLIENT_ERROR options flags are too long",
    /// `ms` with an `M` mode other than `E A P R S`.
    InvalidMsMode => "CLIENT_ERROR invalid mode for ms M token",
    /// `ma` with an `M` mode other than `I + D -`.
    InvalidMaMode => "CLIENT_ERROR invalid mode for ma M token",
}
