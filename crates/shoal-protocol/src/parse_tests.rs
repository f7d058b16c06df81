//! Parser tests: every command and error path, with exact reply bytes and byte counts.

use super::*;
use crate::meta::MetaMode;
use proptest::prelude::*;

use ProtocolError as E;

fn lim() -> Limits {
    Limits {
        max_value_len: 1024,
    }
}

fn p(buf: &[u8]) -> Parsed<'_> {
    parse(buf, &lim())
}

#[track_caller]
fn req(buf: &[u8]) -> Request<'_> {
    match p(buf) {
        Parsed::Request { request, consumed } => {
            assert_eq!(
                consumed,
                buf.len(),
                "consumed for {:?}",
                String::from_utf8_lossy(buf)
            );
            request
        }
        other => panic!("{:?} => {other:?}", String::from_utf8_lossy(buf)),
    }
}

/// (error, consumed, swallow, close, silent)
#[track_caller]
fn perr(buf: &[u8]) -> (ProtocolError, usize, usize, bool, bool) {
    match p(buf) {
        Parsed::Error {
            error,
            consumed,
            swallow,
            close,
            silent,
        } => (error, consumed, swallow, close, silent),
        other => panic!("{:?} => {other:?}", String::from_utf8_lossy(buf)),
    }
}

/// An ordinary error reply for the whole (single-line) buffer.
#[track_caller]
fn line_err(buf: &[u8], e: ProtocolError, silent: bool) {
    assert_eq!(
        perr(buf),
        (e, buf.len(), 0, false, silent),
        "{:?}",
        String::from_utf8_lossy(buf)
    );
}

fn keys<'a>(r: &Request<'a>) -> Vec<&'a [u8]> {
    match r {
        Request::Get { keys, .. } | Request::GetAndTouch { keys, .. } => keys.iter().collect(),
        other => panic!("not a get: {other:?}"),
    }
}

#[test]
fn error_reply_bytes() {
    assert_eq!(E::UnknownCommand.reply(), b"ERROR\r\n");
    assert_eq!(
        E::BadCommandLineFormat.to_string(),
        "CLIENT_ERROR bad command line format"
    );
    assert_eq!(E::BadDataChunk.reply(), b"CLIENT_ERROR bad data chunk\r\n");
    assert_eq!(
        E::GetKeyTooLong.reply(),
        b"CLIENT_ERROR bad command line format\r\n\r\n"
    );
    assert_eq!(
        E::InvalidDeltaArgument.reply(),
        b"CLIENT_ERROR invalid numeric delta argument\r\n"
    );
    assert_eq!(
        E::InvalidExptime.reply(),
        b"CLIENT_ERROR invalid exptime argument\r\n"
    );
    assert_eq!(
        E::ObjectTooLarge.reply(),
        b"SERVER_ERROR object too large for cache\r\n"
    );
    assert_eq!(E::DuplicateFlag.reply(), b"CLIENT_ERROR duplicate flag\r\n");
    assert_eq!(E::InvalidFlag.reply(), b"CLIENT_ERROR invalid flag\r\n");
    assert_eq!(
        E::FlagsTooLong.reply(),
        b"CLIENT_ERROR options flags are too long\r\n"
    );
    for e in [
        E::LineTooLong,
        E::HttpRequest,
        E::MemlimitTooSmall,
        E::KeyDecode,
    ] {
        assert_eq!(e.reply(), format!("{e}\r\n").as_bytes());
    }
}

// ---------------------------------------------------------------- retrieval

#[test]
fn get_and_gets() {
    let r = req(b"get foo\r\n");
    assert!(matches!(
        r,
        Request::Get {
            with_cas: false,
            ..
        }
    ));
    assert_eq!(keys(&r), vec![&b"foo"[..]]);
    let r = req(b"gets a bb  ccc   \r\n");
    assert!(matches!(r, Request::Get { with_cas: true, .. }));
    assert_eq!(keys(&r), vec![&b"a"[..], b"bb", b"ccc"]);
    // A bare \n line ending; leading spaces make memcached 1.6.45 miss the command.
    let r = req(b"get x\n");
    assert_eq!(keys(&r), vec![&b"x"[..]]);
    line_err(b"   get x\n", E::UnknownCommand, false);
    // More keys than memcached's tokenizer takes in one pass: all are kept.
    let mut line = b"get".to_vec();
    for i in 0..40 {
        line.extend_from_slice(format!(" k{i}").as_bytes());
    }
    line.extend_from_slice(b"\r\n");
    assert_eq!(keys(&req(&line)).len(), 40);
    // memcached 1.6.45 dropped bget, the old alias of get.
    line_err(b"bget q\r\n", E::UnknownCommand, false);
}

#[test]
fn get_errors() {
    // A known command with too few tokens is a format error, no longer ERROR.
    line_err(b"get\r\n", E::BadCommandLineFormat, false);
    line_err(b"get   \r\n", E::BadCommandLineFormat, false);
    line_err(b"gets\r\n", E::BadCommandLineFormat, false);
    line_err(b"getx foo\r\n", E::UnknownCommand, false);
    line_err(b"bget\r\n", E::UnknownCommand, false);
    let k250 = "k".repeat(250);
    assert_eq!(keys(&req(format!("get {k250}\r\n").as_bytes())).len(), 1);
    // A key too long fails the whole get, with memcached's doubled line end.
    let k251 = "k".repeat(251);
    line_err(
        format!("get a {k251} b\r\n").as_bytes(),
        E::GetKeyTooLong,
        false,
    );
    // The one-key shortcut gives what the tokenizer gives, at its edges too.
    line_err(
        format!("get {k251}\r\n").as_bytes(),
        E::GetKeyTooLong,
        false,
    );
    line_err(
        format!("gets {k251}\r\n").as_bytes(),
        E::GetKeyTooLong,
        false,
    );
    for (line, want) in [
        ("get k\r\n", vec!["k"]),
        ("gets k\r\n", vec!["k"]),
        ("get k \r\n", vec!["k"]),
        ("get  k\r\n", vec!["k"]),
        ("get a b\r\n", vec!["a", "b"]),
        ("gets a  b \r\n", vec!["a", "b"]),
    ] {
        let got: Vec<String> = keys(&req(line.as_bytes()))
            .iter()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect();
        assert_eq!(got, want, "{line:?}");
    }
}

#[test]
fn gat_and_gats() {
    let r = req(b"gat 100 a b\r\n");
    assert!(matches!(
        r,
        Request::GetAndTouch {
            exptime: 100,
            with_cas: false,
            ..
        }
    ));
    assert_eq!(keys(&r), vec![&b"a"[..], b"b"]);
    let r = req(b"gats -1 a\r\n");
    assert!(matches!(
        r,
        Request::GetAndTouch {
            exptime: -1,
            with_cas: true,
            ..
        }
    ));
    // A gat needs a key in memcached 1.6.45.
    line_err(b"gat 5\r\n", E::BadCommandLineFormat, false);
    line_err(b"gat\r\n", E::BadCommandLineFormat, false);
    line_err(b"gat x a\r\n", E::InvalidExptime, false);
    line_err(b"gats 99999999999 a\r\n", E::InvalidExptime, false);
    // The exptime is read strictly: no sign but `-`, no spaces.
    line_err(b"gat +5 a\r\n", E::InvalidExptime, false);
    let k251 = "k".repeat(251);
    line_err(
        format!("gat 1 {k251}\r\n").as_bytes(),
        E::GetKeyTooLong,
        false,
    );
}

// ---------------------------------------------------------------- storage

#[test]
fn set_basic() {
    let buf = b"set foo 5 100 3\r\nbar\r\n";
    assert_eq!(
        req(buf),
        Request::Store {
            kind: StoreKind::Set,
            key: b"foo",
            flags: 5,
            exptime: 100,
            data: b"bar",
            cas_unique: 0,
            noreply: false
        }
    );
    // Data may contain \r\n; only the length counts.
    match req(b"set k 0 0 4 noreply\r\na\r\nb\r\n") {
        Request::Store { data, noreply, .. } => {
            assert_eq!(data, b"a\r\nb");
            assert!(noreply);
        }
        other => panic!("{other:?}"),
    }
    // An extra token that is not "noreply" is ignored, as in memcached.
    assert!(matches!(
        req(b"set k 0 0 1 foo\r\nx\r\n"),
        Request::Store { noreply: false, .. }
    ));
    // Negative exptime and flags at u32::MAX.
    assert!(matches!(
        req(b"set k 4294967295 -1 0\r\n\r\n"),
        Request::Store {
            flags: u32::MAX,
            exptime: -1,
            ..
        }
    ));
    // Zero-length value.
    assert!(matches!(
        req(b"add k 0 0 0\n\r\n"),
        Request::Store {
            kind: StoreKind::Add,
            data: b"",
            ..
        }
    ));
}

#[test]
fn every_storage_kind() {
    for (cmd, kind) in [
        ("set", StoreKind::Set),
        ("add", StoreKind::Add),
        ("replace", StoreKind::Replace),
        ("append", StoreKind::Append),
        ("prepend", StoreKind::Prepend),
    ] {
        let buf = format!("{cmd} key 1 2 3\r\nabc\r\n");
        assert!(matches!(req(buf.as_bytes()), Request::Store { kind: k, .. } if k == kind));
    }
    assert_eq!(
        req(b"cas key 1 2 3 77 noreply\r\nabc\r\n"),
        Request::Store {
            kind: StoreKind::Cas,
            key: b"key",
            flags: 1,
            exptime: 2,
            data: b"abc",
            cas_unique: 77,
            noreply: true
        }
    );
}

#[test]
fn storage_incomplete() {
    assert_eq!(p(b"set foo 0 0 3"), Parsed::Incomplete { needed: 0 });
    assert_eq!(p(b"set foo 0 0 3\r"), Parsed::Incomplete { needed: 0 });
    let line = b"set foo 0 0 3\r\n".len();
    assert_eq!(
        p(b"set foo 0 0 3\r\n"),
        Parsed::Incomplete { needed: line + 5 }
    );
    assert_eq!(
        p(b"set foo 0 0 3\r\nba"),
        Parsed::Incomplete { needed: line + 5 }
    );
    assert_eq!(
        p(b"set foo 0 0 3\r\nbar\r"),
        Parsed::Incomplete { needed: line + 5 }
    );
}

#[test]
fn storage_token_count() {
    // Fewer than five tokens: a format error, and no data block is swallowed.
    line_err(b"set foo 0 0\r\n", E::BadCommandLineFormat, false);
    line_err(b"prepend\r\n", E::BadCommandLineFormat, false);
    // Tokens after the length (and cas's unique) are ignored, but a final noreply.
    let r = req(b"set foo 0 0 1 noreply extra\r\nx\r\n");
    assert!(matches!(r, Request::Store { noreply: false, .. }));
    let r = req(b"cas foo 0 0 1 1 noreply x\r\nx\r\n");
    assert!(matches!(
        r,
        Request::Store {
            cas_unique: 1,
            noreply: false,
            ..
        }
    ));
    // cas without its unique: the length was read, so the data is swallowed.
    assert_eq!(
        perr(b"cas foo 0 0 1\r\n"),
        (E::BadCommandLineFormat, 15, 3, false, false)
    );
}

#[test]
fn storage_bad_line() {
    // A length that is not one: memcached replies and then reads the data line as a
    // command (it has not looked for noreply yet, so the reply is never silenced).
    let buf = b"set foo 0 0 -1\r\nbar\r\n";
    assert_eq!(perr(buf), (E::BadCommandLineFormat, 16, 0, false, false));
    assert_eq!(perr(&buf[16..]), (E::UnknownCommand, 5, 0, false, false));
    for line in [
        &b"set foo 0 0 x\r\n"[..],
        b"set foo 0 0 2147483646\r\n",
        b"set foo 0 0 1x\r\n",
        b"set foo 0 0 +1\r\n",
        b"set foo 0 0 1\t\r\n",
        b"set foo 0 0 -1 noreply\r\n",
    ] {
        line_err(line, E::BadCommandLineFormat, false);
    }
    // Anything else wrong once the length is known: the data block is swallowed too
    // (memcached 1.6.45), and noreply silences the reply.
    for line in [
        &b"set foo x 0 1\r\n"[..],
        b"set foo 0 x 1\r\n",
        b"set foo -1 0 1\r\n",
        b"set foo 4294967296 0 1\r\n",
        b"cas foo 0 0 1 x\r\n",
        b"cas foo 0 0 1 -5\r\n",
    ] {
        assert_eq!(
            perr(line),
            (E::BadCommandLineFormat, line.len(), 3, false, false),
            "{:?}",
            String::from_utf8_lossy(line)
        );
    }
    let k251 = "k".repeat(251);
    let line = format!("set {k251} 0 0 1\r\n");
    assert_eq!(
        perr(line.as_bytes()),
        (E::BadCommandLineFormat, line.len(), 3, false, false)
    );
    let line = format!("set {k251} 0 0 1 noreply\r\n");
    assert_eq!(
        perr(line.as_bytes()),
        (E::BadCommandLineFormat, line.len(), 3, false, true)
    );
    // "noreply" in the cas slot is both the noreply marker and a bad cas value.
    assert_eq!(
        perr(b"cas foo 0 0 1 noreply\r\n"),
        (E::BadCommandLineFormat, 23, 3, false, true)
    );
}

#[test]
fn bad_data_chunk() {
    // The observable memcached behaviour: "CLIENT_ERROR bad data chunk", then a format
    // error for the leftover "\n" (a line too short to be a command).
    let buf = b"set k 0 0 4\r\nerror\r\n";
    let line = 13;
    assert_eq!(perr(buf), (E::BadDataChunk, line + 6, 0, false, false));
    assert_eq!(
        perr(&buf[line + 6..]),
        (E::BadCommandLineFormat, 1, 0, false, false)
    );
    // Too short data: the next command's bytes are eaten as data, as in memcached.
    assert_eq!(
        perr(b"set k 0 0 1\r\nab\r\n"),
        (E::BadDataChunk, 16, 0, false, false)
    );
    // noreply suppresses it.
    assert_eq!(
        perr(b"set k 0 0 1 noreply\r\nab\r\n"),
        (E::BadDataChunk, 24, 0, false, true)
    );
    // "\n" alone is not an accepted terminator.
    assert_eq!(
        perr(b"set k 0 0 1\r\na\n\n"),
        (E::BadDataChunk, 16, 0, false, false)
    );
}

#[test]
fn too_large() {
    let buf = b"set big 3 0 1025\r\n";
    assert_eq!(
        p(buf),
        Parsed::TooLarge {
            key: b"big",
            consumed: buf.len(),
            swallow: 1027,
            noreply: false,
            remove_old: true,
            key_base64: false
        }
    );
    // Only set removes the old value; the reply is suppressed by noreply.
    for cmd in ["add", "replace", "append", "prepend"] {
        let buf = format!("{cmd} big 0 0 2000 noreply\r\n");
        assert_eq!(
            p(buf.as_bytes()),
            Parsed::TooLarge {
                key: b"big",
                consumed: buf.len(),
                swallow: 2002,
                noreply: true,
                remove_old: false,
                key_base64: false
            }
        );
    }
    assert!(matches!(
        p(b"cas big 0 0 2000 1\r\n"),
        Parsed::TooLarge {
            remove_old: false,
            ..
        }
    ));
    // Exactly the limit is fine.
    let mut buf = b"set k 0 0 1024\r\n".to_vec();
    buf.extend_from_slice(&[b'x'; 1024]);
    buf.extend_from_slice(b"\r\n");
    assert!(matches!(req(&buf), Request::Store { data, .. } if data.len() == 1024));
}

// ---------------------------------------------------------------- delete / incr / touch

#[test]
fn delete_forms() {
    assert_eq!(
        req(b"delete k\r\n"),
        Request::Delete {
            key: b"k",
            noreply: false
        }
    );
    assert_eq!(
        req(b"delete k 0\r\n"),
        Request::Delete {
            key: b"k",
            noreply: false
        }
    );
    assert_eq!(
        req(b"delete k noreply\r\n"),
        Request::Delete {
            key: b"k",
            noreply: true
        }
    );
    assert_eq!(
        req(b"delete k 0 noreply\r\n"),
        Request::Delete {
            key: b"k",
            noreply: true
        }
    );
    // Anything else after the key is refused, as memcached 1.6.18 and memccapable expect
    // (1.6.45 ignores it: a documented deviation).
    for (line, noreply) in [
        (&b"delete k 5\r\n"[..], false),
        (b"delete k 0 0\r\n", false),
        (b"delete k 5 noreply\r\n", true),
        (b"delete k noreply 0\r\n", false),
        (b"delete k a b c d\r\n", false),
    ] {
        line_err(line, E::DeleteUsage, noreply);
    }
    line_err(b"delete\r\n", E::BadCommandLineFormat, false);
    let k251 = "k".repeat(251);
    line_err(
        format!("delete {k251}\r\n").as_bytes(),
        E::BadCommandLineFormat,
        false,
    );
    line_err(
        format!("delete {k251} noreply\r\n").as_bytes(),
        E::BadCommandLineFormat,
        true,
    );
}

#[test]
fn incr_decr() {
    assert_eq!(
        req(b"incr n 5\r\n"),
        Request::Arithmetic {
            key: b"n",
            delta: 5,
            incr: true,
            noreply: false
        }
    );
    assert_eq!(
        req(b"decr n 18446744073709551615 noreply\r\n"),
        Request::Arithmetic {
            key: b"n",
            delta: u64::MAX,
            incr: false,
            noreply: true
        }
    );
    line_err(b"incr n x\r\n", E::InvalidDeltaArgument, false);
    line_err(b"incr n -1\r\n", E::InvalidDeltaArgument, false);
    line_err(
        b"incr n 18446744073709551616\r\n",
        E::InvalidDeltaArgument,
        false,
    );
    line_err(b"decr n x noreply\r\n", E::InvalidDeltaArgument, true);
    line_err(b"incr n noreply\r\n", E::InvalidDeltaArgument, true);
    // The delta is read strictly (no sign, no spaces).
    line_err(b"incr n +5\r\n", E::InvalidDeltaArgument, false);
    line_err(b"incr n\r\n", E::BadCommandLineFormat, false);
    line_err(b"incr\r\n", E::BadCommandLineFormat, false);
    // Tokens after the delta are ignored but for a final noreply.
    assert!(matches!(
        req(b"incr n 1 noreply x\r\n"),
        Request::Arithmetic { noreply: false, .. }
    ));
    let k251 = "k".repeat(251);
    line_err(
        format!("incr {k251} 1\r\n").as_bytes(),
        E::BadCommandLineFormat,
        false,
    );
}

#[test]
fn touch() {
    assert_eq!(
        req(b"touch k 10\r\n"),
        Request::Touch {
            key: b"k",
            exptime: 10,
            noreply: false
        }
    );
    assert_eq!(
        req(b"touch k -1 noreply\r\n"),
        Request::Touch {
            key: b"k",
            exptime: -1,
            noreply: true
        }
    );
    line_err(b"touch k x\r\n", E::InvalidExptime, false);
    line_err(b"touch k x noreply\r\n", E::InvalidExptime, true);
    line_err(b"touch k\r\n", E::BadCommandLineFormat, false);
    line_err(b"touch k +1\r\n", E::InvalidExptime, false);
    let k251 = "k".repeat(251);
    line_err(
        format!("touch {k251} 1\r\n").as_bytes(),
        E::BadCommandLineFormat,
        false,
    );
}

// ---------------------------------------------------------------- misc commands

#[test]
fn flush_all() {
    assert_eq!(
        req(b"flush_all\r\n"),
        Request::FlushAll {
            delay: 0,
            noreply: false
        }
    );
    assert_eq!(
        req(b"flush_all 10\r\n"),
        Request::FlushAll {
            delay: 10,
            noreply: false
        }
    );
    assert_eq!(
        req(b"flush_all -1\r\n"),
        Request::FlushAll {
            delay: -1,
            noreply: false
        }
    );
    assert_eq!(
        req(b"flush_all noreply\r\n"),
        Request::FlushAll {
            delay: 0,
            noreply: true
        }
    );
    assert_eq!(
        req(b"flush_all 7 noreply\r\n"),
        Request::FlushAll {
            delay: 7,
            noreply: true
        }
    );
    // memcached reads the extra token's neighbour as the delay.
    assert_eq!(
        req(b"flush_all 7 8\r\n"),
        Request::FlushAll {
            delay: 7,
            noreply: false
        }
    );
    // A bad delay is the server's to answer: it counts the command and checks -F first.
    assert_eq!(
        req(b"flush_all abc\r\n"),
        Request::FlushAllInvalidDelay { noreply: false }
    );
    assert_eq!(
        req(b"flush_all abc noreply\r\n"),
        Request::FlushAllInvalidDelay { noreply: true }
    );
    assert_eq!(
        req(b"flush_all noreply 5\r\n"),
        Request::FlushAllInvalidDelay { noreply: false }
    );
    // Any number of tokens: the delay is the first after the command.
    assert_eq!(
        req(b"flush_all 1 2 3\r\n"),
        Request::FlushAll {
            delay: 1,
            noreply: false
        }
    );
    // Leading spaces do not hide it (it is looked up by its first token).
    assert!(matches!(req(b"  flush_all\r\n"), Request::FlushAll { .. }));
}

#[test]
fn version_quit_verbosity() {
    assert_eq!(req(b"version\r\n"), Request::Version);
    assert_eq!(req(b"version please\r\n"), Request::Version);
    assert_eq!(req(b"quit\r\n"), Request::Quit);
    assert_eq!(
        req(b"verbosity 1\r\n"),
        Request::Verbosity {
            level: 1,
            noreply: false
        }
    );
    assert_eq!(
        req(b"verbosity 2 noreply\r\n"),
        Request::Verbosity {
            level: 2,
            noreply: true
        }
    );
    assert_eq!(
        req(b"verbosity 2 3\r\n"),
        Request::Verbosity {
            level: 2,
            noreply: false
        }
    );
    line_err(b"verbosity\r\n", E::BadCommandLineFormat, false);
    assert_eq!(
        req(b"verbosity 1 2 3\r\n"),
        Request::Verbosity {
            level: 1,
            noreply: false
        }
    );
    line_err(b"verbosity x\r\n", E::BadCommandLineFormat, false);
    line_err(b"verbosity noreply\r\n", E::BadCommandLineFormat, true);
}

#[test]
fn cache_memlimit() {
    assert_eq!(
        req(b"cache_memlimit 64\r\n"),
        Request::CacheMemlimit {
            megabytes: 64,
            noreply: false
        }
    );
    assert_eq!(
        req(b"cache_memlimit 1000000000 noreply\r\n"),
        Request::CacheMemlimit {
            megabytes: 1_000_000_000,
            noreply: true
        }
    );
    line_err(b"cache_memlimit\r\n", E::UnknownCommand, false);
    line_err(b"cache_memlimit x\r\n", E::UnknownCommand, false);
    line_err(b"cache_memlimit x noreply\r\n", E::UnknownCommand, true);
    line_err(b"cache_memlimit 7\r\n", E::MemlimitTooSmall, false);
    line_err(
        b"cache_memlimit 1000000001\r\n",
        E::MemlimitNotMegabytes,
        false,
    );
    line_err(b"cache_memlimit 1 noreply\r\n", E::MemlimitTooSmall, true);
}

#[test]
fn operator_commands_pass_their_arguments_through() {
    assert_eq!(
        req(b"lru_crawler metadump all \r\n"),
        Request::LruCrawler(b"metadump all")
    );
    assert_eq!(req(b"lru_crawler\r\n"), Request::LruCrawler(b""));
    assert_eq!(req(b"slabs automove 1\r\n"), Request::Slabs(b"automove 1"));
    assert_eq!(req(b"lru  mode flat \r\n"), Request::Lru(b"mode flat"));
    assert_eq!(
        req(b"extstore max_frag 0.5\r\n"),
        Request::Extstore(b"max_frag 0.5")
    );
    assert_eq!(req(b"refresh_certs\r\n"), Request::RefreshCerts(b""));
    assert_eq!(req(b"debugtime 3\r\n"), Request::DebugTime(b"3"));
    assert_eq!(req(b"debugtime\r\n"), Request::DebugTime(b""));
    assert_eq!(
        req(b"watch fetchers mutations\r\n"),
        Request::Watch(b"fetchers mutations")
    );
    assert_eq!(req(b"watch\r\n"), Request::Watch(b""));
}

#[test]
fn stats() {
    assert_eq!(req(b"stats\r\n"), Request::Stats(StatsGroup::General));
    assert_eq!(
        req(b"stats settings\r\n"),
        Request::Stats(StatsGroup::Settings)
    );
    assert_eq!(req(b"stats items\r\n"), Request::Stats(StatsGroup::Items));
    assert_eq!(
        req(b"stats items extra\r\n"),
        Request::Stats(StatsGroup::Items)
    );
    assert_eq!(req(b"stats slabs\r\n"), Request::Stats(StatsGroup::Slabs));
    assert_eq!(req(b"stats sizes\r\n"), Request::Stats(StatsGroup::Sizes));
    assert_eq!(req(b"stats conns\r\n"), Request::Stats(StatsGroup::Conns));
    assert_eq!(req(b"stats reset\r\n"), Request::Stats(StatsGroup::Reset));
    assert_eq!(
        req(b"stats detail on  \r\n"),
        Request::Stats(StatsGroup::Other(b"detail on"))
    );
    assert_eq!(
        req(b"stats bogus\r\n"),
        Request::Stats(StatsGroup::Other(b"bogus"))
    );
}

#[test]
fn shutdown() {
    assert_eq!(req(b"shutdown\r\n"), Request::Shutdown);
    assert_eq!(req(b"shutdown graceful\r\n"), Request::ShutdownGraceful);
    // The server checks -A before the mode, as memcached does.
    assert_eq!(req(b"shutdown now\r\n"), Request::ShutdownInvalidMode);
    assert_eq!(
        req(b"shutdown graceful x\r\n"),
        Request::ShutdownInvalidMode
    );
}

#[test]
fn unknown_commands() {
    // Lines shorter than four bytes (with their \n) are format errors.
    line_err(b"\r\n", E::BadCommandLineFormat, false);
    line_err(b"\n", E::BadCommandLineFormat, false);
    line_err(b"\r\r\n", E::BadCommandLineFormat, false);
    line_err(b"x\r\n", E::BadCommandLineFormat, false);
    line_err(b"ab\n", E::BadCommandLineFormat, false);
    line_err(b"    \r\n", E::UnknownCommand, false);
    // A final noreply silences even ERROR.
    line_err(b"bogus noreply\r\n", E::UnknownCommand, true);
    line_err(b"bogus\r\n", E::UnknownCommand, false);
    line_err(b"SET k 0 0 1\r\n", E::UnknownCommand, false);
    line_err(b"mx k\r\n", E::UnknownCommand, false);
    // Commands memcached has only in debug builds.
    line_err(b"misbehave\r\n", E::UnknownCommand, false);
}

#[test]
fn http_closes_silently() {
    for line in [
        &b"GET / HTTP/1.1\r\n"[..],
        b"POST /x HTTP/1.0\r\n",
        b"HEAD / HTTP/2\n",
    ] {
        assert_eq!(perr(line), (E::HttpRequest, line.len(), 0, true, true));
    }
    // Any unknown command reaches memcached 1.6.45's HTTP check, one letter long too;
    // a known one never does.
    for line in [&b"sxx / HTTP/1.1\r\n"[..], b"G HTTP/1.1\r\n"] {
        assert_eq!(perr(line), (E::HttpRequest, line.len(), 0, true, true));
    }
    line_err(b"delete a HTTP/1.1\r\n", E::DeleteUsage, false);
    // memcached looks at its 23rd token, not the line's last one.
    let mut line = b"GET".to_vec();
    for _ in 0..21 {
        line.extend_from_slice(b" x");
    }
    line.extend_from_slice(b" HTTP/1.1 tail\r\n");
    assert_eq!(perr(&line), (E::HttpRequest, line.len(), 0, true, true));
    let mut line = b"GET".to_vec();
    for _ in 0..22 {
        line.extend_from_slice(b" x");
    }
    line.extend_from_slice(b" HTTP/1.1\r\n");
    line_err(&line, E::UnknownCommand, false);
}

#[test]
fn get_with_http_like_key_is_a_get() {
    let r = req(b"get / HTTP/1.1\r\n");
    assert_eq!(keys(&r), vec![&b"/"[..], b"HTTP/1.1"]);
}

#[test]
fn long_lines() {
    let mut buf = vec![b'a'; MAX_LINE_LEN];
    assert_eq!(p(&buf), Parsed::Incomplete { needed: 0 });
    buf.push(b'a');
    assert_eq!(perr(&buf), (E::LineTooLong, buf.len(), 0, true, true));
    // A multiget may be longer.
    let mut get = b"get ".to_vec();
    get.resize(5000, b'k');
    assert_eq!(p(&get), Parsed::Incomplete { needed: 0 });
    let mut gets = b"  gets ".to_vec();
    gets.resize(5000, b'k');
    assert_eq!(p(&gets), Parsed::Incomplete { needed: 0 });
    // ...but not gat, not after more than 100 spaces, and not past the hard cap.
    let mut gat = b"gat 1 ".to_vec();
    gat.resize(5000, b'k');
    assert!(matches!(
        p(&gat),
        Parsed::Error {
            close: true,
            silent: true,
            ..
        }
    ));
    let mut spaced = vec![b' '; 101];
    spaced.extend_from_slice(b"get ");
    spaced.resize(5000, b'k');
    assert!(matches!(
        p(&spaced),
        Parsed::Error {
            close: true,
            silent: true,
            ..
        }
    ));
    let mut huge = b"get ".to_vec();
    huge.resize(MAX_GET_LINE_LEN + 1, b'k');
    assert!(matches!(
        p(&huge),
        Parsed::Error {
            close: true,
            silent: true,
            ..
        }
    ));
    // A long line that already has its newline is processed normally.
    let mut ok_line = b"get ".to_vec();
    for _ in 0..20 {
        ok_line.extend_from_slice(&[b'k'; 200]);
        ok_line.push(b' ');
    }
    ok_line.extend_from_slice(b"\r\n");
    assert_eq!(keys(&req(&ok_line)).len(), 20);
}

#[test]
fn nul_is_an_ordinary_byte() {
    // memcached 1.6.45 splits lines on spaces only; a NUL is part of a key.
    let r = req(b"get a\0b c\r\n");
    assert_eq!(keys(&r), vec![&b"a\0b"[..], b"c"]);
}

#[test]
fn c_whitespace_in_numbers() {
    // A storage command's flags and exptime are still read with strtoul/strtol, which
    // take a tab before or after the digits...
    assert!(matches!(
        req(b"set k 0 \t0 1\r\nx\r\n"),
        Request::Store { data: b"x", .. }
    ));
    assert!(matches!(
        req(b"set k 0 5\t 1\r\nx\r\n"),
        Request::Store { exptime: 5, .. }
    ));
    // ...but every other number is read strictly.
    line_err(b"set k 0 0 1\t\r\n", E::BadCommandLineFormat, false);
    line_err(b"touch k \t5\r\n", E::InvalidExptime, false);
    // Only one \r is stripped; the second is part of the delta.
    line_err(b"incr k 3\r\r\n", E::InvalidDeltaArgument, false);
}

#[test]
fn pipelined() {
    let buf = b"get a\r\ndelete b\r\nset c 0 0 1\r\nx\r\nmn\r\n";
    let mut off = 0;
    let mut got = Vec::new();
    while let Parsed::Request { request, consumed } = p(&buf[off..]) {
        got.push(request);
        off += consumed;
    }
    assert_eq!(off, buf.len());
    assert_eq!(got.len(), 4);
    assert_eq!(got[3], Request::MetaNoop);
}

// ---------------------------------------------------------------- meta

fn flags_of<'a>(r: &Request<'a>) -> MetaFlags<'a> {
    match r {
        Request::MetaGet { flags, .. }
        | Request::MetaSet { flags, .. }
        | Request::MetaDelete { flags, .. }
        | Request::MetaArithmetic { flags, .. }
        | Request::MetaDebug { flags, .. } => *flags,
        other => panic!("not meta: {other:?}"),
    }
}

#[test]
fn mg() {
    let r = req(b"mg foo v t k Oabc q T30\r\n");
    assert!(matches!(r, Request::MetaGet { key: b"foo", .. }));
    let f = flags_of(&r);
    assert!(f.has(b'v') && f.has(b't') && f.has(b'k') && f.has(b'q'));
    assert_eq!(f.token(b'O'), Some(&b"abc"[..]));
    assert_eq!(f.number::<i64>(b'T'), Ok(Some(30)));
    assert_eq!(f.raw(), b"v t k Oabc q T30");
    // No flags at all is fine.
    let r = req(b"mg foo\r\n");
    assert_eq!(flags_of(&r), MetaFlags::EMPTY);
    let r = req(b"mg foo   \r\n");
    assert_eq!(flags_of(&r).raw(), b"");
    // Base64 key.
    let r = req(b"mg Zm9v b v\r\n");
    assert!(flags_of(&r).base64());
}

#[test]
fn mg_errors() {
    line_err(b"mg\r\n", E::BadCommandLineFormat, false);
    let k251 = "k".repeat(251);
    line_err(
        format!("mg {k251} v\r\n").as_bytes(),
        E::BadCommandLineFormat,
        false,
    );
    line_err(b"mg k v v\r\n", E::DuplicateFlag, false);
    line_err(b"mg k z\r\n", E::InvalidFlag, false);
    line_err(b"mg k 1\r\n", E::InvalidFlag, false);
    // Every flag memcached knows is taken by every meta command (and ignored where it
    // means nothing).
    assert!(matches!(
        req(b"mg k x I J5 D1 F1 M P L\r\n"),
        Request::MetaGet { .. }
    ));
    // A flag token starting with neither a letter nor a digit fails memcached's
    // tokenizer, which then sees no command at all.
    line_err(b"mg k \xc3\xa9\r\n", E::BadCommandLineFormat, false);
    line_err(b"mg k !\r\n", E::BadCommandLineFormat, false);
    line_err(b"mg k Tabc\r\n", E::BadTokenFormat, false);
    line_err(b"mg k N\r\n", E::BadTokenFormat, false);
    line_err(b"mg k R99999999999\r\n", E::BadTokenFormat, false);
    line_err(b"mg k Fx\r\n", E::BadCommandLineFormat, false);
    // mg takes (and ignores) any mode.
    assert!(matches!(req(b"mg k MSS\r\n"), Request::MetaGet { .. }));
    line_err(b"mg a b\r\n", E::KeyDecode, false);
    // q never silences an error.
    line_err(b"mg k q Tx\r\n", E::BadTokenFormat, false);
    // An over-long opaque is found by the server while it writes the reply, after the
    // flags before it acted (memcached), so the parser lets it through.
    let o = format!("mg k O{}\r\n", "1".repeat(32));
    assert!(matches!(req(o.as_bytes()), Request::MetaGet { .. }));
    // 17 flags is the most memcached takes (its token count limit is 20).
    let ok17 = b"mg k b v t k O1 q T1 N1 R1 s c f h l u P L\r\n";
    assert!(matches!(
        p(ok17),
        Parsed::Error {
            error: E::KeyDecode,
            ..
        }
    ));
    let ok17 = b"mg k I v t O1 q T1 N1 R1 s c f h l u P L k\r\n";
    assert!(matches!(req(ok17), Request::MetaGet { .. }));
    // 20 tokens (command and key included) is the most memcached 1.6.45 takes.
    let most = b"mg k I v t O1 q T1 N1 R1 s c f h l u P L k C1\r\n";
    assert!(matches!(req(most), Request::MetaGet { .. }));
    let too_many = b"mg k I v t O1 q T1 N1 R1 s c f h l u P L k C1 x\r\n";
    line_err(too_many, E::FlagsTooLong, false);
}

#[test]
fn md() {
    let r = req(b"md foo q C5 I T30\r\n");
    assert!(matches!(r, Request::MetaDelete { key: b"foo", .. }));
    assert_eq!(flags_of(&r).number::<u64>(b'C'), Ok(Some(5)));
    line_err(b"md\r\n", E::BadCommandLineFormat, false);
    // md reports each flag problem with its own message (ma does not).
    line_err(b"md k q q\r\n", E::DuplicateFlag, false);
    line_err(b"md k z\r\n", E::InvalidFlag, false);
    line_err(b"md k Cx\r\n", E::BadTokenFormat, false);
    let k251 = "k".repeat(251);
    line_err(
        format!("md {k251}\r\n").as_bytes(),
        E::BadCommandLineFormat,
        false,
    );
    let o = format!("md k O{}\r\n", "1".repeat(40));
    line_err(o.as_bytes(), E::OpaqueTooLong, false);
    let too_many = b"md k I v t O1 q T1 N1 R1 s c f h l u P L k C1 x\r\n";
    line_err(too_many, E::FlagsTooLong, false);
}

#[test]
fn ma() {
    let r = req(b"ma n D5 J10 N0 MD v\r\n");
    let f = flags_of(&r);
    assert_eq!(f.mode(), Ok(Some(MetaMode::Decr)));
    assert_eq!(f.number::<u64>(b'D'), Ok(Some(5)));
    assert_eq!(f.number::<u64>(b'J'), Ok(Some(10)));
    for m in ["MI", "M+", "MD", "M-"] {
        assert!(matches!(
            req(format!("ma n {m}\r\n").as_bytes()),
            Request::MetaArithmetic { .. }
        ));
    }
    line_err(b"ma n MS\r\n", E::InvalidMaMode, false);
    line_err(b"ma n Mi\r\n", E::InvalidMaMode, false);
    line_err(b"ma n M\r\n", E::InvalidMaMode, false);
    line_err(b"ma n Dx\r\n", E::InvalidOrDuplicateFlag, false);
    line_err(b"ma n Jx\r\n", E::InvalidOrDuplicateFlag, false);
    line_err(b"ma n z\r\n", E::InvalidOrDuplicateFlag, false);
    line_err(b"ma\r\n", E::BadCommandLineFormat, false);
    // Mode is checked before the opaque length.
    let o = format!("ma n MX O{}\r\n", "1".repeat(40));
    line_err(o.as_bytes(), E::InvalidMaMode, false);
}

#[test]
fn ms() {
    let buf = b"ms foo 3 T30 F5 MA c k\r\nbar\r\n";
    let r = req(buf);
    match r {
        Request::MetaSet { key, data, flags } => {
            assert_eq!((key, data), (&b"foo"[..], &b"bar"[..]));
            assert_eq!(flags.mode(), Ok(Some(MetaMode::Append)));
            assert_eq!(flags.number::<u32>(b'F'), Ok(Some(5)));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        req(b"ms foo 0\r\n\r\n"),
        Request::MetaSet { data: b"", .. }
    ));
    let line = b"ms foo 3 q\r\n".len();
    assert_eq!(
        p(b"ms foo 3 q\r\nba"),
        Parsed::Incomplete { needed: line + 5 }
    );
}

#[test]
fn ms_errors_without_swallow() {
    // Until the length is read nothing can be swallowed.
    line_err(b"ms\r\n", E::BadCommandLineFormat, false);
    line_err(b"ms foo\r\n", E::BadCommandLineFormat, false);
    line_err(b"ms foo x\r\n", E::BadCommandLineFormat, false);
    line_err(b"ms foo -1\r\n", E::BadCommandLineFormat, false);
    line_err(b"ms foo T5\r\n", E::BadCommandLineFormat, false);
    line_err(b"ms foo 1 !\r\n", E::BadCommandLineFormat, false);
}

#[test]
fn ms_errors_swallow_the_data() {
    let check = |buf: &[u8], e: ProtocolError, swallow: usize| {
        assert_eq!(
            perr(buf),
            (e, buf.len(), swallow, false, false),
            "{:?}",
            String::from_utf8_lossy(buf)
        );
    };
    check(b"ms foo 3 z\r\n", E::InvalidFlag, 5);
    check(b"ms foo 3 v v\r\n", E::DuplicateFlag, 5);
    check(b"ms foo 10 Tx\r\n", E::BadTokenFormat, 12);
    check(b"ms foo 3 MX\r\n", E::InvalidMsMode, 5);
    check(b"ms foo 3 Me\r\n", E::InvalidMsMode, 5);
    // The mode is the byte after the M, whatever follows it; a bare M has none.
    assert!(matches!(
        p(b"ms foo 3 MAA\r\nabc\r\n"),
        Parsed::Request { .. }
    ));
    check(b"ms foo 3 M\r\n", E::InvalidMsMode, 5);
    check(b"ms foo 3 q Fx\r\n", E::BadCommandLineFormat, 5);
    check(b"ms a 3 b\r\n", E::KeyDecode, 5);
    let o = format!("ms foo 3 O{}\r\n", "1".repeat(40));
    check(o.as_bytes(), E::OpaqueTooLong, 5);
    let o = format!("ms foo 3 O{} MX\r\n", "1".repeat(40));
    check(o.as_bytes(), E::InvalidMsMode, 5);
    // Once the length is known, a key too long or too many flags swallow it too.
    let k251 = format!("ms {} 1\r\n", "k".repeat(251));
    check(k251.as_bytes(), E::BadCommandLineFormat, 3);
    // 20 tokens (command and key included) is the most memcached takes.
    let most = b"ms k 1 I v t O1 q T1 N1 R1 s c f h l u P L k\r\nx\r\n";
    assert!(matches!(req(most), Request::MetaSet { .. }));
    check(
        b"ms k 1 I v t O1 q T1 N1 R1 s c f h l u P L k x\r\n",
        E::FlagsTooLong,
        3,
    );
}

#[test]
fn ms_data_errors() {
    // Never silent, even with q.
    let buf = b"ms foo 1 q\r\nab\r\n";
    assert_eq!(perr(buf), (E::BadDataChunk, 15, 0, false, false));
    let buf = b"ms Zm9v 2000 b q\r\n";
    assert_eq!(
        p(buf),
        Parsed::TooLarge {
            key: b"Zm9v",
            consumed: buf.len(),
            swallow: 2002,
            noreply: false,
            remove_old: true,
            key_base64: true
        }
    );
}

#[test]
fn mn_and_me() {
    assert_eq!(req(b"mn\r\n"), Request::MetaNoop);
    assert_eq!(req(b"mn whatever\r\n"), Request::MetaNoop);
    assert_eq!(
        req(b"me foo\r\n"),
        Request::MetaDebug {
            key: b"foo",
            flags: MetaFlags::EMPTY
        }
    );
    // me ignores flags other than a leading b.
    assert_eq!(
        req(b"me foo v v\r\n"),
        Request::MetaDebug {
            key: b"foo",
            flags: MetaFlags::EMPTY
        }
    );
    // memcached decodes a `b` key only when another token follows the `b`.
    let r = req(b"me Zm9v b\r\n");
    assert!(!flags_of(&r).base64());
    let r = req(b"me Zm9v b x\r\n");
    assert!(flags_of(&r).base64());
    line_err(b"me\r\n", E::BadCommandLineFormat, false);
    line_err(b"me a b x\r\n", E::BadCommandLineFormat, false);
    let k251 = "k".repeat(251);
    line_err(
        format!("me {k251}\r\n").as_bytes(),
        E::BadCommandLineFormat,
        false,
    );
}

// ---------------------------------------------------------------- properties

/// Checks the invariants every result must satisfy and returns how far to advance, or
/// `None` to stop (incomplete or connection closed).
fn step(buf: &[u8]) -> Option<usize> {
    match parse(buf, &lim()) {
        Parsed::Request { consumed, .. } => {
            assert!(consumed > 0 && consumed <= buf.len());
            Some(consumed)
        }
        Parsed::Incomplete { needed } => {
            assert!(needed == 0 || needed > buf.len());
            None
        }
        Parsed::Error {
            consumed, close, ..
        } => {
            assert!(consumed <= buf.len());
            if close {
                None
            } else {
                assert!(consumed > 0);
                Some(consumed)
            }
        }
        Parsed::TooLarge { consumed, .. } => {
            assert!(consumed > 0 && consumed <= buf.len());
            Some(consumed)
        }
    }
}

const FRAGMENTS: &[&[u8]] = &[
    b"get ",
    b"set ",
    b"ms ",
    b"mg ",
    b"ma ",
    b"md ",
    b"me ",
    b"cas ",
    b"delete ",
    b"gat ",
    b"flush_all ",
    b"noreply",
    b" ",
    b"\r\n",
    b"\n",
    b"0 ",
    b"1",
    b"-1 ",
    b"b ",
    b"T",
    b"O",
    b"q ",
    b"M",
    b"k",
    b"\0",
    b"HTTP/1.1",
    b"Zm9v ",
    b"v ",
    b"99999999999 ",
];

fn key_strategy() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(0x21u8..=0xff, 1..=250)
}

fn store_kind() -> impl Strategy<Value = StoreKind> {
    prop_oneof![
        Just(StoreKind::Set),
        Just(StoreKind::Add),
        Just(StoreKind::Replace),
        Just(StoreKind::Append),
        Just(StoreKind::Prepend),
        Just(StoreKind::Cas),
    ]
}

fn encode_store(
    kind: StoreKind,
    key: &[u8],
    flags: u32,
    exptime: i32,
    data: &[u8],
    cas: u64,
    noreply: bool,
) -> Vec<u8> {
    let name: &[u8] = match kind {
        StoreKind::Set => b"set",
        StoreKind::Add => b"add",
        StoreKind::Replace => b"replace",
        StoreKind::Append => b"append",
        StoreKind::Prepend => b"prepend",
        StoreKind::Cas => b"cas",
    };
    let mut out = name.to_vec();
    out.push(b' ');
    out.extend_from_slice(key);
    out.extend_from_slice(format!(" {flags} {exptime} {}", data.len()).as_bytes());
    if kind == StoreKind::Cas {
        out.extend_from_slice(format!(" {cas}").as_bytes());
    }
    if noreply {
        out.extend_from_slice(b" noreply");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out
}

fn any_request() -> impl Strategy<Value = Vec<u8>> {
    let store = (
        store_kind(),
        key_strategy(),
        any::<u32>(),
        any::<i32>(),
        proptest::collection::vec(any::<u8>(), 0..64),
        any::<u64>(),
        any::<bool>(),
    )
        .prop_map(|(kind, key, f, e, d, c, n)| encode_store(kind, &key, f, e, &d, c, n));
    let get = proptest::collection::vec(key_strategy(), 1..4).prop_map(|ks| {
        let mut out = b"gets".to_vec();
        for k in ks {
            out.push(b' ');
            out.extend_from_slice(&k);
        }
        out.extend_from_slice(b"\r\n");
        out
    });
    let simple = prop_oneof![
        Just(b"delete foo noreply\r\n".to_vec()),
        Just(b"incr n 5\r\n".to_vec()),
        Just(b"mn\r\n".to_vec()),
        Just(b"mg foo v k O123 T5\r\n".to_vec()),
        Just(b"ms foo 3 T0 MS\r\nbar\r\n".to_vec()),
        Just(b"bogus line\r\n".to_vec()),
        Just(b"set k 0 0 1\r\nxyz\r\n".to_vec()),
        Just(b"ms k 3 x\r\nabc\r\n".to_vec()),
        Just(b"set k 0 0 -1\r\n".to_vec()),
    ];
    prop_oneof![store, get, simple]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    #[test]
    fn never_panics(buf in proptest::collection::vec(any::<u8>(), 0..600)) {
        let mut off = 0;
        while let Some(n) = step(&buf[off..]) {
            off += n;
        }
    }

    #[test]
    fn never_panics_on_protocolish(
        parts in proptest::collection::vec(
            proptest::sample::select(FRAGMENTS),
            0..40,
        )
    ) {
        let buf: Vec<u8> = parts.concat();
        let mut off = 0;
        while let Some(n) = step(&buf[off..]) {
            off += n;
        }
    }

    #[test]
    fn store_round_trips(
        kind in store_kind(),
        key in key_strategy(),
        flags in any::<u32>(),
        exptime in any::<i32>(),
        data in proptest::collection::vec(any::<u8>(), 0..=1024),
        cas in any::<u64>(),
        noreply in any::<bool>(),
    ) {
        let buf = encode_store(kind, &key, flags, exptime, &data, cas, noreply);
        let expected = Request::Store {
            kind,
            key: &key,
            flags,
            exptime: i64::from(exptime),
            data: &data,
            cas_unique: if kind == StoreKind::Cas { cas } else { 0 },
            noreply,
        };
        prop_assert_eq!(
            parse(&buf, &lim()),
            Parsed::Request { request: expected, consumed: buf.len() }
        );
    }

    #[test]
    fn split_anywhere_gives_same_requests(
        reqs in proptest::collection::vec(any_request(), 1..6),
        split_frac in 0.0f64..1.0,
    ) {
        let buf: Vec<u8> = reqs.concat();
        let split = ((buf.len() as f64) * split_frac) as usize;
        let all = collect(&buf, 0);
        // Feed only the prefix: parse until it needs more, then continue with everything.
        let mut got = Vec::new();
        let mut off = 0;
        loop {
            match parse(&buf[off..split], &lim()) {
                Parsed::Incomplete { needed } => {
                    prop_assert!(needed == 0 || off + needed > split);
                    break;
                }
                other => {
                    let n = consumed_of(&other);
                    got.push(format!("{other:?}"));
                    off += n;
                    // Swallowed bytes are handled by the caller; skip them like it would.
                    off += swallow_of(&other).min(buf.len() - off);
                    if off > split {
                        break;
                    }
                }
            }
        }
        got.extend(collect(&buf, off));
        prop_assert_eq!(got, all);
    }
}

fn consumed_of(p: &Parsed<'_>) -> usize {
    match p {
        Parsed::Request { consumed, .. }
        | Parsed::Error { consumed, .. }
        | Parsed::TooLarge { consumed, .. } => *consumed,
        Parsed::Incomplete { .. } => 0,
    }
}

fn swallow_of(p: &Parsed<'_>) -> usize {
    match p {
        Parsed::Error { swallow, .. } | Parsed::TooLarge { swallow, .. } => *swallow,
        _ => 0,
    }
}

/// Debug renderings of everything parsed from `buf[off..]`, applying swallows.
fn collect(buf: &[u8], mut off: usize) -> Vec<String> {
    let mut out = Vec::new();
    while off < buf.len() {
        let r = parse(&buf[off..], &lim());
        if matches!(r, Parsed::Incomplete { .. }) {
            break;
        }
        out.push(format!("{r:?}"));
        let closed = matches!(r, Parsed::Error { close: true, .. });
        off += consumed_of(&r);
        off += swallow_of(&r).min(buf.len() - off);
        if closed {
            break;
        }
    }
    out
}
