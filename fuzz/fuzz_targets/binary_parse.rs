//! Binary requests as the server frames them: a stream of packets parsed the way a
//! connection would, checking that every step stays in bounds, makes progress, and never
//! asks to buffer more than a value's limit.
#![cfg_attr(fuzzing, no_main)]

use shoal_protocol::binary::HEADER_LEN;
use shoal_protocol::{parse_binary, BinaryParsed, Limits};

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

#[cfg(fuzzing)]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    run(data);
});

/// Without cargo-fuzz: replays the files named on the command line.
#[cfg(not(fuzzing))]
fn main() {
    shoal_protocol_fuzz::replay(run);
}
