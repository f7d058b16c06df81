//! Arbitrary bytes fed to the request parser as one connection's input stream.
#![cfg_attr(fuzzing, no_main)]

#[cfg(fuzzing)]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    shoal_protocol_fuzz::drive(data);
});

/// Without cargo-fuzz this builds as a plain binary that replays the files named on the
/// command line (e.g. a crash artifact), so the target compiles and runs on stable.
#[cfg(not(fuzzing))]
fn main() {
    for path in std::env::args().skip(1) {
        let data = std::fs::read(&path).expect("readable input file");
        shoal_protocol_fuzz::drive(&data);
        println!("{path}: ok");
    }
}
