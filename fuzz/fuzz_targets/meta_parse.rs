//! Meta commands: the first byte picks the command, the rest is its arguments, so nearly
//! every input exercises the meta flag parser instead of being an unknown command.
#![cfg_attr(fuzzing, no_main)]

fn run(data: &[u8]) {
    const CMDS: [&[u8]; 6] = [b"mg ", b"ms ", b"md ", b"ma ", b"me ", b"mn "];
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let mut input = Vec::with_capacity(rest.len() + 3);
    input.extend_from_slice(CMDS[usize::from(sel) % CMDS.len()]);
    input.extend_from_slice(rest);
    shoal_protocol_fuzz::drive(&input);
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
