//! memtier_benchmark (Redis Ltd.'s load generator, the usual one for memcached) as a
//! second load generator beside [`crate::load`], so a data-path claim is checked with a
//! tool this project did not write: the command line, a run, its JSON report read into a
//! [`MemtierSummary`].
//!
//! memtier's own `Ops/sec` is not used for throughput: with several connections it
//! averages the clients' start and end `timeval`s field by field in floating point and
//! truncates, so its run duration is often a whole second off (a 2 s run reported as
//! 1,002 ms, doubling its ops/s). Every client stops once it has run `--test-time` whole
//! seconds, so requests completed over `--test-time` is the throughput; memtier's figure
//! is kept beside it ([`MemtierSummary::reported_ops_per_sec`]).

use crate::BenchError;
use serde::Serialize;
use serde_json::Value;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// How memtier loads a server (issue 29's setup by default: 1 thread, 16 connections,
/// 1:10 set:get over 100,000 keys, uniformly random, 5 s runs).
#[derive(Clone, Debug, Serialize)]
pub struct MemtierConfig {
    /// The memtier_benchmark binary.
    pub bin: PathBuf,
    /// memtier threads (`-t`).
    pub threads: usize,
    /// Connections per thread (`-c`).
    pub conns: usize,
    /// Sets per `gets` gets (`--ratio SETS:GETS`).
    pub sets: u32,
    /// Gets per `sets` sets.
    pub gets: u32,
    /// Keys `memtier-0` to `memtier-KEY_MAXIMUM` (`--key-maximum`).
    pub key_maximum: u64,
    /// Run length, whole seconds (`--test-time`).
    pub secs: u64,
}

impl MemtierConfig {
    /// Issue 29's setup with `bin`.
    pub fn new(bin: PathBuf) -> Self {
        MemtierConfig {
            bin,
            threads: 1,
            conns: 16,
            sets: 1,
            gets: 10,
            key_maximum: 100_000,
            secs: 5,
        }
    }

    /// The arguments of a measured run against `addr` (`ADDR` in a report's command line
    /// is written by passing `None`): memcached's text protocol, uniformly random keys,
    /// `value_size`-byte values, `depth` requests in flight per connection.
    pub fn run_args(
        &self,
        addr: Option<SocketAddr>,
        value_size: usize,
        depth: usize,
    ) -> Vec<String> {
        let mut a = self.common_args(addr, value_size);
        a.extend([
            "--ratio".to_string(),
            format!("{}:{}", self.sets, self.gets),
            "--key-pattern".into(),
            "R:R".into(),
            "--test-time".into(),
            self.secs.max(1).to_string(),
            "--pipeline".into(),
            depth.max(1).to_string(),
        ]);
        a
    }

    /// The arguments that set every key once, in order (`--ratio 1:0 --key-pattern P:P
    /// -n allkeys`, 16 in flight per connection), so measured gets hit.
    pub fn fill_args(&self, addr: Option<SocketAddr>, value_size: usize) -> Vec<String> {
        let mut a = self.common_args(addr, value_size);
        a.extend(
            [
                "--ratio",
                "1:0",
                "--key-pattern",
                "P:P",
                "-n",
                "allkeys",
                "--pipeline",
                "16",
            ]
            .map(String::from),
        );
        a
    }

    fn common_args(&self, addr: Option<SocketAddr>, value_size: usize) -> Vec<String> {
        let (host, port) = match addr {
            Some(a) => (a.ip().to_string(), a.port().to_string()),
            None => ("ADDR".to_string(), "PORT".to_string()),
        };
        vec![
            "-s".into(),
            host,
            "-p".into(),
            port,
            "-P".into(),
            "memcache_text".into(),
            "-t".into(),
            self.threads.max(1).to_string(),
            "-c".into(),
            self.conns.max(1).to_string(),
            "-d".into(),
            value_size.max(1).to_string(),
            "--key-maximum".into(),
            self.key_maximum.to_string(),
            "--hide-histogram".into(),
        ]
    }

    /// The command line of a measured run, for a report (`ADDR`/`PORT` for the server;
    /// the binary's file name, not its path).
    pub fn command(&self, value_size: usize, depth: usize) -> String {
        let name = self.bin.file_name().unwrap_or(self.bin.as_os_str());
        format!(
            "{} {}",
            Path::new(name).display(),
            self.run_args(None, value_size, depth).join(" ")
        )
    }

    /// One measured run against `addr`.
    pub fn run(
        &self,
        addr: SocketAddr,
        value_size: usize,
        depth: usize,
    ) -> Result<MemtierSummary, BenchError> {
        run_with(&self.bin, self.run_args(Some(addr), value_size, depth))
    }

    /// Sets every key once (outside any measured run).
    pub fn fill(&self, addr: SocketAddr, value_size: usize) -> Result<MemtierSummary, BenchError> {
        run_with(&self.bin, self.fill_args(Some(addr), value_size))
    }

    /// The first line of `memtier_benchmark --version`.
    pub fn version(&self) -> String {
        std::process::Command::new(&self.bin)
            .arg("--version")
            .output()
            .ok()
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .next()
                    .map(|l| l.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into())
    }
}

/// What one memtier run did, from its `--json-out-file`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemtierSummary {
    /// Requests completed (`Totals` / `Count`).
    pub requests: u64,
    /// Sets completed.
    pub sets: u64,
    /// Gets completed.
    pub gets: u64,
    /// The run length asked for (`test_time`), seconds; 0 for a run of a fixed number of
    /// requests.
    pub test_secs: u64,
    /// Requests per second over `test_secs` (see the module's note); memtier's own
    /// figure when `test_secs` is 0.
    pub ops_per_sec: f64,
    /// memtier's `Ops/sec`, over its (unreliable) merged duration.
    pub reported_ops_per_sec: f64,
    /// memtier's merged duration, milliseconds.
    pub reported_duration_ms: u64,
    /// Fraction of gets that hit (None without gets).
    pub get_hit_ratio: Option<f64>,
    /// Median latency, microseconds.
    pub p50_us: f64,
    /// 99th percentile latency, microseconds.
    pub p99_us: f64,
    /// 99.9th percentile latency, microseconds.
    pub p999_us: f64,
}

fn parse_err(reason: impl Into<String>) -> BenchError {
    BenchError::Parse {
        what: "memtier_benchmark's JSON report".into(),
        reason: reason.into(),
    }
}

/// The value at `path` (object keys) in `v`.
fn at<'a>(v: &'a Value, path: &[&str]) -> Result<&'a Value, BenchError> {
    path.iter().try_fold(v, |v, k| {
        v.get(k)
            .ok_or_else(|| parse_err(format!("no {:?}", path.join(" / "))))
    })
}

fn num(v: &Value, path: &[&str]) -> Result<f64, BenchError> {
    at(v, path)?
        .as_f64()
        .filter(|x| x.is_finite())
        .ok_or_else(|| parse_err(format!("{:?} is not a number", path.join(" / "))))
}

fn count(v: &Value, path: &[&str]) -> Result<u64, BenchError> {
    at(v, path)?
        .as_u64()
        .ok_or_else(|| parse_err(format!("{:?} is not a count", path.join(" / "))))
}

/// Reads memtier's `--json-out-file` report. A run that completed no request (memtier
/// exits 0 even when it cannot connect) or was interrupted is an error.
pub fn parse_json(text: &str) -> Result<MemtierSummary, BenchError> {
    let v: Value = serde_json::from_str(text).map_err(|e| parse_err(e.to_string()))?;
    let all = at(&v, &["ALL STATS"])?;
    let requests = count(all, &["Totals", "Count"])?;
    if requests == 0 {
        return Err(BenchError::Tool {
            tool: "memtier_benchmark".into(),
            reason: "completed no request (is the server up?)".into(),
        });
    }
    if at(all, &["Runtime", "Interrupted"])?.as_str() == Some("true") {
        return Err(BenchError::Tool {
            tool: "memtier_benchmark".into(),
            reason: "the run was interrupted".into(),
        });
    }
    let errors = count(all, &["Totals", "Connection Errors"]).unwrap_or(0);
    if errors > 0 {
        return Err(BenchError::Tool {
            tool: "memtier_benchmark".into(),
            reason: format!("{errors} connection errors"),
        });
    }
    let test_secs = count(&v, &["configuration", "test_time"])?;
    let reported_ops_per_sec = num(all, &["Totals", "Ops/sec"])?;
    let hits = num(all, &["Gets", "Hits/sec"])?;
    let misses = num(all, &["Gets", "Misses/sec"])?;
    let pct = |p: &str| -> Result<f64, BenchError> {
        Ok(num(all, &["Totals", "Percentile Latencies", p])? * 1000.0)
    };
    Ok(MemtierSummary {
        requests,
        sets: count(all, &["Sets", "Count"])?,
        gets: count(all, &["Gets", "Count"])?,
        test_secs,
        ops_per_sec: if test_secs > 0 {
            requests as f64 / test_secs as f64
        } else {
            reported_ops_per_sec
        },
        reported_ops_per_sec,
        // Read as a number: memtier derives it from two wall-clock stamps, and a run
        // against 1.6.18 at depth 16 once reported it in a form that was not a count.
        reported_duration_ms: num(all, &["Runtime", "Total duration"])?.max(0.0).round() as u64,
        get_hit_ratio: (hits + misses > 0.0).then(|| hits / (hits + misses)),
        p50_us: pct("p50.00")?,
        p99_us: pct("p99.00")?,
        p999_us: pct("p99.90")?,
    })
}

static RUNS: AtomicU64 = AtomicU64::new(0);

/// Runs `bin args --json-out-file TMP` and reads the report.
fn run_with(bin: &Path, args: Vec<String>) -> Result<MemtierSummary, BenchError> {
    let json = std::env::temp_dir().join(format!(
        "shoal-bench-memtier-{}-{}.json",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed)
    ));
    let out = crate::server::command(bin)
        .args(&args)
        .arg("--json-out-file")
        .arg(&json)
        .stderr(std::process::Stdio::piped())
        .output()
        .map_err(|e| BenchError::Spawn {
            name: bin.display().to_string(),
            reason: e.to_string(),
        });
    let text = std::fs::read_to_string(&json);
    let _ = std::fs::remove_file(&json);
    let out = out?;
    // memtier rewrites its progress line (`[RUN #1 ...]`, which counts "conn errors")
    // with '\r'; its last other line about an error says what failed.
    let last_words = || {
        String::from_utf8_lossy(&out.stderr)
            .split(['\r', '\n'])
            .filter(|l| !l.trim_start().starts_with("[RUN"))
            .rfind(|l| l.contains("rror") || l.contains("refused"))
            .unwrap_or("")
            .trim()
            .to_string()
    };
    if !out.status.success() {
        return Err(BenchError::Tool {
            tool: "memtier_benchmark".into(),
            reason: format!("{}: {}", out.status, last_words()),
        });
    }
    let text = text.map_err(|e| BenchError::io(json.display().to_string(), e))?;
    parse_json(&text).map_err(|e| match e {
        BenchError::Tool { tool, reason } => BenchError::Tool {
            tool,
            reason: format!("{reason} {}", last_words()).trim().to_string(),
        },
        e => e,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2 s run against memcached 1.6.18 (`-t 1 -c 16 --ratio 1:10 -d 100
    /// --key-maximum 100000 --test-time 2`, no fill first), whose merged duration came out
    /// as 1,002 ms: memtier said 81,290 ops/s for 81,506 requests in 2 s.
    const DEPTH1: &str = include_str!("../testdata/memtier-depth1-memcached.json");
    /// memtier pointed at a port nothing listens on: it exits 0 with zero requests.
    const REFUSED: &str = include_str!("../testdata/memtier-connection-refused.json");

    #[test]
    fn reads_a_run() {
        let s = parse_json(DEPTH1).unwrap();
        assert_eq!(s.requests, 81_506);
        assert_eq!(s.sets, 7_415);
        assert_eq!(s.gets, 74_091);
        assert_eq!(s.test_secs, 2);
        assert_eq!(s.ops_per_sec, 40_753.0);
        assert_eq!(s.reported_ops_per_sec, 81_290.26);
        assert_eq!(s.reported_duration_ms, 1_002);
        let hit = s.get_hit_ratio.unwrap();
        assert!((hit - 694.16 / (694.16 + 73_200.73)).abs() < 1e-12, "{hit}");
        assert!((s.p50_us - 191.0).abs() < 1e-9);
        assert!((s.p99_us - 8_383.0).abs() < 1e-9);
        assert!((s.p999_us - 12_479.0).abs() < 1e-9);
    }

    #[test]
    fn a_run_with_no_requests_is_an_error() {
        assert!(matches!(parse_json(REFUSED), Err(BenchError::Tool { .. })));
    }

    #[test]
    fn malformed_reports_are_errors_not_panics() {
        for bad in [
            "",
            "{",
            "[]",
            "{\"ALL STATS\": {}}",
            "{\"ALL STATS\": {\"Totals\": {\"Count\": -1}}}",
            "{\"ALL STATS\": {\"Totals\": {\"Count\": \"7\"}}}",
        ] {
            assert!(
                matches!(parse_json(bad), Err(BenchError::Parse { .. })),
                "{bad:?}"
            );
        }
        // Every field present but one: still an error.
        let no_p99 = DEPTH1.replacen("\"p99.00\"", "\"p98.00\"", 100);
        assert!(parse_json(&no_p99).is_err());
        let interrupted = DEPTH1.replace("\"Interrupted\": \"false\"", "\"Interrupted\": \"true\"");
        assert!(matches!(
            parse_json(&interrupted),
            Err(BenchError::Tool { .. })
        ));
    }

    #[test]
    fn command_lines() {
        let c = MemtierConfig::new("/opt/memtier/memtier_benchmark".into());
        assert_eq!(
            c.command(100, 16),
            "memtier_benchmark -s ADDR -p PORT -P memcache_text -t 1 -c 16 -d 100 \
             --key-maximum 100000 --hide-histogram --ratio 1:10 --key-pattern R:R \
             --test-time 5 --pipeline 16"
        );
        let addr: SocketAddr = "127.0.0.1:11211".parse().unwrap();
        let fill = c.fill_args(Some(addr), 10_240).join(" ");
        assert!(fill.starts_with("-s 127.0.0.1 -p 11211 "), "{fill}");
        assert!(fill.ends_with("--ratio 1:0 --key-pattern P:P -n allkeys --pipeline 16"));
    }
}
