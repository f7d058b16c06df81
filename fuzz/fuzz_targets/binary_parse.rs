//! Binary requests as the server frames and decodes them: a stream of packets parsed the
//! way a connection would, checking that every step stays in bounds, makes progress, and
//! never asks to buffer more than a value's limit; and every framed request decoded into
//! its typed command, checking that the command borrows only what the packet carried and
//! that its replies frame with the request's opcode and opaque.
#![cfg_attr(fuzzing, no_main)]

use shoal_protocol::binary::{self, Command, Status, HEADER_LEN, RESPONSE_MAGIC};
use shoal_protocol::{parse_binary, BinaryParsed, BinaryRequest, Limits};

const LIMITS: Limits = Limits { max_value_len: 512 };

fn run(data: &[u8]) {
    let mut off = 0;
    while off < data.len() {
        let buf = &data[off..];
        match parse_binary(buf, &LIMITS) {
            BinaryParsed::Request { request, consumed } => {
                assert!(consumed >= HEADER_LEN && consumed <= buf.len());
                assert!(request.key.len() <= 250);
                assert_eq!(
                    consumed,
                    HEADER_LEN + request.extras.len() + request.key.len() + request.value.len()
                );
                let _ = request.extra_u32(0);
                let _ = request.extra_u64(4);
                check_decode(request);
                off += consumed;
            }
            BinaryParsed::Incomplete { needed } => {
                assert!(needed > buf.len(), "needed {needed} with {} buffered", buf.len());
                // Never more than the largest acceptable packet: header, extras, key, value.
                assert!(needed <= HEADER_LEN + 255 + 65_535 + LIMITS.max_value_len + 1024);
                break;
            }
            BinaryParsed::TooLarge {
                consumed, swallow, ..
            } => {
                assert!(consumed >= HEADER_LEN && consumed <= buf.len());
                assert!(swallow > LIMITS.max_value_len);
                off += consumed;
                off = off.saturating_add(swallow).min(data.len());
            }
            BinaryParsed::Invalid { .. } => break,
        }
    }
}

/// Decodes one framed request and checks what the server relies on.
fn check_decode(request: BinaryRequest<'_>) {
    let (attrs, command) = match binary::decode(request) {
        Ok(decoded) => decoded,
        Err(e) => {
            assert_eq!((e.attrs.opcode, e.attrs.opaque), (request.opcode, request.opaque));
            return;
        }
    };
    assert_eq!(
        (attrs.opcode, attrs.opaque, attrs.cas),
        (request.opcode, request.opaque, request.cas)
    );
    let key = match command {
        Command::Get { key }
        | Command::GetAndTouch { key, .. }
        | Command::Store { key, .. }
        | Command::Delete { key }
        | Command::Arithmetic { key, .. } => Some(key),
        Command::SaslAuth { mechanism, data, .. } => {
            assert_eq!(data, request.value);
            Some(mechanism)
        }
        Command::Stat { raw, .. } => Some(raw),
        _ => None,
    };
    if let Some(key) = key {
        assert_eq!(key, request.key);
        // The keyed commands that identify an item never decode with an empty key.
        if !matches!(command, Command::Stat { .. }) {
            assert!(!key.is_empty());
        }
    }
    if let Command::Store { data, .. } = command {
        assert_eq!(data, request.value);
    }
    // Every reply shape frames with the request's opcode and opaque.
    let mut out = Vec::new();
    binary::reply::hit(&mut out, &attrs, 1, 2, request.key, request.value);
    binary::reply::miss(&mut out, &attrs, request.key);
    binary::reply::ok(&mut out, &attrs, 3);
    binary::reply::status(&mut out, &attrs, Status::KeyExists);
    let mut at = 0;
    while at < out.len() {
        assert!(out.len() - at >= HEADER_LEN);
        let h = &out[at..at + HEADER_LEN];
        assert_eq!((h[0], h[1]), (RESPONSE_MAGIC, request.opcode));
        assert_eq!(&h[12..16], &request.opaque.to_be_bytes());
        let body = u32::from_be_bytes([h[8], h[9], h[10], h[11]]) as usize;
        at += HEADER_LEN + body;
    }
    assert_eq!(at, out.len());
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
