//! Arbitrary bytes as what the flash tier reads back from disk: a record, and the saved
//! page table.
#![cfg_attr(fuzzing, no_main)]

#[cfg(fuzzing)]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    shoal_protocol_fuzz::drive_flash_files(data);
});

/// Without cargo-fuzz: replays the files named on the command line.
#[cfg(not(fuzzing))]
fn main() {
    shoal_protocol_fuzz::replay(shoal_protocol_fuzz::drive_flash_files);
}
