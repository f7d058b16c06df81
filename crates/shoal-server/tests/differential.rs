//! shoald answers as memcached 1.6.45 does: a differential fuzzer against a live
//! memcached, and the differences it found kept as regression cases.
//!
//! `shoald_answers_as_memcached` sends random command streams (text, meta and binary;
//! well-formed, then with broken commands mixed in) to memcached 1.6.45 and shoald side
//! by side and compares every reply ([`shoal_test_support::differential`]). A difference
//! is shrunk to the fewest commands that still show it and saved under
//! `tests/data/differential/` with memcached's replies, where
//! `regression_cases_replay_on_shoald` replays it against shoald alone: commit the file
//! with the fix.
//!
//! The run is fixed (seed, time budget) so CI is repeatable; longer or other runs:
//!
//! ```sh
//! SHOAL_DIFF_SEED=7 SHOAL_DIFF_SECS=600 cargo test --release -p shoal-server \
//!     --test differential -- --nocapture shoald_answers
//! ```
//!
//! `SHOAL_DIFF_SUBJECT=HOST:PORT` compares a server already running there instead of a
//! fresh shoald. `SHOAL_DIFF_SECS` is each half's budget (well-formed, then mixed); `SHOAL_DIFF_COMMANDS`
//! caps the commands of each half; `SHOAL_DIFF_SAVE=N` shrinks and saves at most `N`
//! differences (default 8; 0 only reports them, to measure), into `SHOAL_DIFF_DIR`
//! (default `tests/data/differential`). memcached 1.6.45 comes from
//! `shoal_test_support::memcached::reference` (built by `scripts/memcached-reference.sh`);
//! without it the fuzz test and the check of the cases against memcached are skipped, and
//! the replay still runs.

mod common;

use common::Server;
use shoal_test_support::differential::{self, case::Case, Config, Pair};
use shoal_test_support::memcached::{self, Memcached};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The seed CI runs.
const SEED: u64 = 0x5_1045;
/// Each half's default budget: the whole test stays under a minute with shrinking.
const DEFAULT_SECS: u64 = 20;
/// Percent of broken commands in the second half.
const MALFORMED_PCT: u32 = 40;
/// How long shrinking may take per difference.
const SHRINK_BUDGET: Duration = Duration::from_secs(10);
/// memcached's options for the comparison: without its LRU maintainer and crawler
/// threads, which take brief references to items and so make some replies depend on
/// timing (an `incr` that fits is done in place, padded with spaces, only when nobody else
/// holds the item; with a reference held it makes an unpadded copy). shoald takes the
/// same options (they tune machinery it does not have).
const MEMCACHED_ARGS: &[&str] = &["-o", "no_lru_maintainer,no_lru_crawler"];

/// At most this many differences are shrunk and saved per run.
const MAX_SAVED: u64 = 8;

/// Where the regression cases live.
fn cases_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/differential")
}

/// Where a run saves what it finds.
fn save_dir() -> PathBuf {
    std::env::var_os("SHOAL_DIFF_DIR").map_or_else(cases_dir, PathBuf::from)
}

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|e| panic!("{name}={v:?} is not a number: {e}")),
        Err(_) => default,
    }
}

fn load_cases() -> Vec<(PathBuf, Case)> {
    differential::case_files(&cases_dir())
        .into_iter()
        .map(|p| {
            let text =
                std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let case = Case::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, case)
        })
        .collect()
}

/// Replays every case against one server, returning the failures.
fn replay_all(addr: std::net::SocketAddr, cases: &[(PathBuf, Case)]) -> Vec<String> {
    cases
        .iter()
        .filter_map(|(p, case)| {
            differential::replay(addr, case)
                .err()
                .map(|e| format!("{}: {e}", p.display()))
        })
        .collect()
}

#[test]
fn regression_cases_replay_on_shoald() {
    let cases = load_cases();
    assert!(!cases.is_empty(), "no cases in {}", cases_dir().display());
    let shoald = Server::start();
    let failures = replay_all(shoald.addr.expect("tcp"), &cases);
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from memcached 1.6.45's recorded replies:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// The recorded replies are memcached's: a hand-edited case that memcached itself does not
/// pass would test nothing.
#[test]
fn regression_cases_are_what_memcached_answers() {
    let Some(bin) = memcached::reference() else {
        return;
    };
    let cases = load_cases();
    let mc = Memcached::start_bin(&bin, MEMCACHED_ARGS);
    let failures = replay_all(mc.addr(), &cases);
    assert!(
        failures.is_empty(),
        "memcached {} no longer answers these cases as recorded:\n{}",
        memcached::REFERENCE_VERSION,
        failures.join("\n")
    );
}

#[test]
fn shoald_answers_as_memcached() {
    let Some(bin) = memcached::reference() else {
        return;
    };
    let seed = env_u64("SHOAL_DIFF_SEED", SEED);
    let secs = env_u64("SHOAL_DIFF_SECS", DEFAULT_SECS);
    let max_commands =
        usize::try_from(env_u64("SHOAL_DIFF_COMMANDS", u64::MAX)).unwrap_or(usize::MAX);
    let mc = Memcached::start_bin(&bin, MEMCACHED_ARGS);
    // SHOAL_DIFF_SUBJECT=HOST:PORT compares a server already running there instead (an
    // older shoald, shoal-proxy in front of one); it is flushed as the run goes.
    let subject = std::env::var("SHOAL_DIFF_SUBJECT").ok();
    let shoald = subject.is_none().then(|| Server::with_args(MEMCACHED_ARGS));
    let subject_addr = match (&subject, &shoald) {
        (Some(a), _) => a
            .parse()
            .unwrap_or_else(|e| panic!("SHOAL_DIFF_SUBJECT={a:?}: {e}")),
        (None, Some(s)) => s.addr.expect("tcp"),
        (None, None) => unreachable!("a subject either way"),
    };
    let mut pair = Pair::new(mc.addr(), subject_addr);
    let mut failures = Vec::new();
    let mut saved = 0;
    let max_saved = env_u64("SHOAL_DIFF_SAVE", MAX_SAVED);
    for (half, malformed_pct) in [("well-formed", 0), ("mixed", MALFORMED_PCT)] {
        let cfg = Config {
            seed,
            malformed_pct,
            budget: Duration::from_secs(secs),
            max_commands,
        };
        let report = differential::fuzz(&mut pair, &cfg);
        eprintln!("differential ({half}, seed {seed}): {}", report.summary());
        for d in &report.differences {
            let mut line = format!(
                "[{half}] {}\n  command:   {}\n  memcached: {}\n  shoald:    {}",
                d.label,
                d.history.last().map(|c| c.describe()).unwrap_or_default(),
                d.reference.render(),
                d.subject.render()
            );
            if saved < max_saved {
                let deadline = Instant::now() + SHRINK_BUDGET;
                match differential::shrink(&mut pair, &d.history, deadline) {
                    Some(commands) => {
                        let comments = vec![
                            format!(
                                "shoald must answer as memcached {} did.",
                                memcached::REFERENCE_VERSION
                            ),
                            format!(
                                "Found by tests/differential.rs ({half} run, seed {seed}): {}; \
                                 shrunk from {} commands to {}.",
                                d.label,
                                d.history.len(),
                                commands.len()
                            ),
                        ];
                        let (case, got) = differential::record(&mut pair, &commands, comments);
                        match differential::save(&save_dir(), &d.label, seed, &case) {
                            Ok(path) => {
                                saved += 1;
                                line.push_str(&format!(
                                    "\n  shrunk to {} commands, saved as {} (shoald's last reply: {})",
                                    commands.len(),
                                    path.display(),
                                    got.render()
                                ));
                            }
                            Err(e) => line.push_str(&format!("\n  could not save: {e}")),
                        }
                    }
                    None => line.push_str("\n  does not reproduce from a reset (timing?)"),
                }
            }
            failures.push(line);
        }
    }
    assert!(
        failures.is_empty(),
        "shoald's replies differ from memcached {}:\n{}",
        memcached::REFERENCE_VERSION,
        failures.join("\n")
    );
}
