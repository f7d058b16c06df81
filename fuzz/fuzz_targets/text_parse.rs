//! Arbitrary bytes fed to the request parser as one connection's input stream.
#![cfg_attr(fuzzing, no_main)]

#[cfg(fuzzing)]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    shoal_protocol_fuzz::drive(data);
});

/// Without cargo-fuzz: replays the files named on the command line.
#[cfg(not(fuzzing))]
fn main() {
    shoal_protocol_fuzz::replay(shoal_protocol_fuzz::drive);
}
