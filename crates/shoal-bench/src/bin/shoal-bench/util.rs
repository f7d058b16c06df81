//! What the subcommands share: parsing durations, counts, sizes and addresses, finding the
//! binaries to start, and the command line for reports.

use anyhow::{Context, Result};
use shoal_bench::parse_duration;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A duration option (`5`, `5s`, `500ms`, `2m`) for clap.
pub fn dur(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

/// The first address `server` (`HOST:PORT`) resolves to.
pub fn resolve(server: &str) -> Result<SocketAddr> {
    server
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {server}"))?
        .next()
        .with_context(|| format!("{server} has no address"))
}

/// `name` as given if it has a slash, else the first match on PATH.
pub fn which(name: &Path) -> Option<PathBuf> {
    if name.components().count() > 1 {
        return name.exists().then(|| name.to_path_buf());
    }
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    })
}

/// A workspace binary: the given path, else beside this program, else on PATH.
pub fn workspace_bin(given: Option<PathBuf>, name: &str) -> Result<Option<PathBuf>> {
    if let Some(p) = given {
        anyhow::ensure!(p.is_file(), "{} does not exist", p.display());
        return Ok(Some(p));
    }
    Ok(std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join(name)))
        .filter(|p| p.is_file())
        .or_else(|| which(Path::new(name))))
}

/// This command line for reports: the program's file name and its arguments.
pub fn command_line() -> String {
    std::env::args()
        .map(|a| a.rsplit('/').next().unwrap_or("").to_string())
        .take(1)
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ")
}

/// "100k" -> 100_000, "4m" -> 4_000_000.
pub fn parse_count(s: &str) -> Result<u64> {
    let s = s.trim().to_ascii_lowercase();
    let (num, mult) = match s.as_bytes().last() {
        Some(b'k') => (&s[..s.len() - 1], 1_000),
        Some(b'm') => (&s[..s.len() - 1], 1_000_000),
        _ => (s.as_str(), 1),
    };
    let n: u64 = num
        .parse()
        .with_context(|| format!("{s:?} is not a count"))?;
    n.checked_mul(mult).context("count too large")
}

/// A size in bytes: "100" -> 100, "10k" -> 10,240, "1m" -> 1,048,576.
pub fn parse_size(s: &str) -> Result<usize> {
    let s = s.trim().to_ascii_lowercase();
    let (num, mult) = match s.as_bytes().last() {
        Some(b'k') => (&s[..s.len() - 1], 1024),
        Some(b'm') => (&s[..s.len() - 1], 1024 * 1024),
        _ => (s.as_str(), 1),
    };
    let n: usize = num
        .parse()
        .with_context(|| format!("{s:?} is not a size"))?;
    n.checked_mul(mult).context("size too large")
}
