//! Arbitrary bytes as the key of a queue `get` with Kestrel's read options.
#![cfg_attr(fuzzing, no_main)]

#[cfg(fuzzing)]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    shoal_protocol_fuzz::drive_kestrel_key(data);
});

/// Without cargo-fuzz: replays the files named on the command line.
#[cfg(not(fuzzing))]
fn main() {
    shoal_protocol_fuzz::replay(shoal_protocol_fuzz::drive_kestrel_key);
}
