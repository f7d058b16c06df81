//! Shared helpers for the integration tests: finding or building workspace binaries.
// Each test binary uses a different subset.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// `target/<profile>` of this test run.
pub fn profile_dir() -> PathBuf {
    // target/<profile>/deps/this-test -> target/<profile>
    let exe = std::env::current_exe().expect("test executable path");
    exe.parent()
        .and_then(|d| d.parent())
        .expect("target/<profile> directory")
        .to_path_buf()
}

/// A workspace binary from `env` (if set), or beside this test's target directory,
/// built if missing.
pub fn workspace_bin(env: &str, package: &str, bin: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(env) {
        return PathBuf::from(p);
    }
    let dir = profile_dir();
    let path = dir.join(bin);
    if !path.is_file() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "-p", package, "--bin", bin]);
        if dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("cargo build runs");
        assert!(status.success(), "building {bin} failed");
    }
    path
}

/// `name` on PATH, if installed.
pub fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    })
}
