//! Replies from a backend, as shoal-client and shoal-proxy frame them: the first byte
//! picks what was asked (text line, retrieval, meta, quiet meta, binary, quiet binary),
//! the rest is what the server sent. A complete frame must lie inside the buffer, every
//! shorter prefix of it must be incomplete (never a different reply), and decoding a
//! complete frame must not panic.
#![cfg_attr(fuzzing, no_main)]

use bytes::Bytes;
use shoal_client::frame::{frame, Framed, ReplyKind};
use shoal_protocol::{parse_response, ResponseParsed};

const KINDS: [ReplyKind; 6] = [
    ReplyKind::Line,
    ReplyKind::Retrieval,
    ReplyKind::Meta,
    ReplyKind::MetaQuiet,
    ReplyKind::Binary,
    ReplyKind::BinaryQuiet,
];

fn run(data: &[u8]) {
    let Some((&sel, buf)) = data.split_first() else {
        return;
    };
    let kind = KINDS[usize::from(sel) % KINDS.len()];
    let Framed::Complete { len } = frame(buf, kind) else {
        return;
    };
    assert!(len > 0 && len <= buf.len(), "len {len} of {}", buf.len());
    assert_eq!(frame(&buf[..len], kind), Framed::Complete { len });
    // Prefixes: a sample, so long replies stay fast.
    let step = (len / 64).max(1);
    for cut in (0..len).step_by(step) {
        assert_eq!(frame(&buf[..cut], kind), Framed::Incomplete, "prefix {cut} of {len}");
    }
    let reply = Bytes::copy_from_slice(&buf[..len]);
    match kind {
        ReplyKind::Retrieval => {
            let _ = shoal_client::value::parse_values(&reply);
        }
        ReplyKind::Meta => {
            let _ = shoal_client::meta::parse(&reply);
        }
        ReplyKind::Binary => {
            assert!(matches!(parse_response(&reply), ResponseParsed::Response { consumed, .. } if consumed == len));
        }
        _ => {}
    }
}

#[cfg(fuzzing)]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    run(data);
});

/// Without cargo-fuzz: replays the files named on the command line.
#[cfg(not(fuzzing))]
fn main() {
    shoal_protocol_fuzz::replay(run);
}
