//! Shared helpers for the integration tests: workspace binaries and external peers.
// Each test binary uses a different subset.
#![allow(dead_code)]

use std::path::PathBuf;

/// A workspace binary from `env` (if set), or from this test's target directory, rebuilt
/// first if it is missing or older than the workspace sources (see shoal-test-support).
pub fn workspace_bin(env: &str, bin: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(env) {
        return PathBuf::from(p);
    }
    shoal_test_support::workspace_bin(bin)
}
