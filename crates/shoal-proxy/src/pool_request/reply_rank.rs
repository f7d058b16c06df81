//! How the proxy classes requests and replies when it routes them: whether a meta
//! command is a read, and how bad a reply is (for mcrouter's "worst reply" and for
//! failover). Pools and routes both use these, so they sit below both.

/// Whether a meta command is a read (`mg`, `me`): one replica with failover, and through
/// a route a miss counts like a get's. An `mg` that sets a TTL (`T`) without asking for
/// the value is a touch (how a binary `TOUCH` arrives) and is routed as text `touch` is,
/// as a write: to every replica, failing over on errors only, to a warm-up's cold pool.
pub(crate) fn meta_reads(req: &shoal_protocol::Request<'_>) -> bool {
    match req {
        // A value asked for, or no TTL set: a read.
        shoal_protocol::Request::MetaGet { flags, .. } => flags.has(b'v') || !flags.has(b'T'),
        shoal_protocol::Request::MetaDebug { .. } => true,
        _ => false,
    }
}

/// [`severity`] of a reply that reports an error.
pub(crate) const SEVERITY_ERROR: u8 = 2;

/// How bad a reply is, for mcrouter's "worst reply" (AllSyncRoute): 2 for errors
/// (`SERVER_ERROR`, `CLIENT_ERROR`, `ERROR`), 1 for a request that did not take effect
/// (`NOT_STORED`, `NOT_FOUND`, `EXISTS`, and meta `NS`, `NF`, `EX`, `EN`), 0 for success
/// (including the empty reply of a quiet meta command that succeeded).
pub(crate) fn severity(reply: &[u8]) -> u8 {
    const ERRORS: [&[u8]; 3] = [b"SERVER_ERROR", b"CLIENT_ERROR", b"ERROR"];
    const NEGATIVE: [&[u8]; 7] = [
        b"NOT_STORED",
        b"NOT_FOUND",
        b"EXISTS",
        b"NS",
        b"NF",
        b"EX",
        b"EN",
    ];
    if ERRORS.iter().any(|p| reply.starts_with(p)) {
        SEVERITY_ERROR
    } else if NEGATIVE.iter().any(|p| reply.starts_with(p)) {
        1
    } else {
        0
    }
}

/// Whether a reply is an error that makes a failover route try the next pool: a
/// transport failure (which the proxy reports as `SERVER_ERROR <reason>`) or the
/// server's own `SERVER_ERROR`.
pub(crate) fn is_failure(reply: &[u8]) -> bool {
    reply.starts_with(b"SERVER_ERROR")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn severity_orders_errors_over_misses_over_success() {
        assert_eq!(severity(b"STORED\r\n"), 0);
        assert_eq!(severity(b""), 0);
        assert_eq!(severity(b"HD\r\n"), 0);
        assert_eq!(severity(b"NOT_STORED\r\n"), 1);
        assert_eq!(severity(b"NOT_FOUND\r\n"), 1);
        assert_eq!(severity(b"EX\r\n"), 1);
        assert_eq!(severity(b"SERVER_ERROR Connection refused\r\n"), 2);
        assert_eq!(severity(b"CLIENT_ERROR bad data chunk\r\n"), 2);
        assert_eq!(severity(b"ERROR\r\n"), 2);
        assert!(is_failure(b"SERVER_ERROR out of memory\r\n"));
        assert!(!is_failure(b"CLIENT_ERROR bad\r\n"));
    }

    #[test]
    fn a_touch_only_mg_is_a_write() {
        let req = |line: &[u8]| match shoal_protocol::parse(
            line,
            &shoal_protocol::Limits {
                max_value_len: 1024,
            },
        ) {
            shoal_protocol::Parsed::Request { request, .. } => meta_reads(&request),
            _ => panic!("{line:?} parses"),
        };
        assert!(req(b"mg k v\r\n"));
        assert!(req(b"mg k f c\r\n"), "no value, no TTL: still a read");
        assert!(req(b"mg k v f c T30\r\n"), "get-and-touch reads");
        assert!(!req(b"mg k f c T30\r\n"), "a binary TOUCH");
        assert!(req(b"me k\r\n"));
        assert!(!req(b"md k\r\n"));
    }
}
