//! shoal-bench: the project's load generator and benchmarks.
//!
//! - [`load`]: the generator (threads x connections, pipeline depth, protocol, key
//!   distribution, value sizes, set:get mix, duration or request count, warm-up, rate
//!   limit, HdrHistogram latencies).
//! - [`proto`]: the protocols it speaks: [`text`], [`meta`], [`binary`], [`resp`].
//! - [`workload`]: key distributions (uniform, zipfian) and value sizes.
//! - [`fill`]: bulk sets and multi-get counting (prefill, memory efficiency).
//! - [`compare`]: shoald against memcached, same flags, same load.
//! - [`memtier`]: memtier_benchmark, a load generator this project did not write.
//! - [`server`]: starting servers under test and reading their `stats`.
//! - [`soak`]: a long mixed load with churn and slow readers, judging the server's RSS
//!   against its memory limit.
//! - [`seeds`]: the field reports, one experiment each, and [`report`] / [`chart`] to
//!   write them up.

pub mod binary;
pub mod chart;
pub mod compare;
pub mod fill;
pub mod hitratio;
pub mod load;
pub mod machine;
pub mod memtier;
pub mod meta;
pub mod proto;
pub mod report;
pub mod resp;
pub mod restart;
pub mod rng;
pub mod seeds;
pub mod server;
pub mod soak;
pub mod text;
pub mod user_sampler;
pub mod workload;

/// Everything that can go wrong in a benchmark.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A socket or file operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The server closed a connection with requests outstanding.
    #[error("{0} closed the connection with requests outstanding")]
    Closed(String),
    /// The server sent something that is not a reply to what was asked.
    #[error("unexpected reply from server: {0:?}")]
    Protocol(String),
    /// An invalid option or combination of options.
    #[error("{0}")]
    Config(String),
    /// A server under test could not be started.
    #[error("cannot start {name}: {reason}")]
    Spawn {
        /// Which server.
        name: String,
        /// Why.
        reason: String,
    },
    /// Another program's output could not be read.
    #[error("cannot read {what}: {reason}")]
    Parse {
        /// What was being read.
        what: String,
        /// What was wrong with it.
        reason: String,
    },
    /// An outside tool (a load generator) ran but failed or measured nothing.
    #[error("{tool} failed: {reason}")]
    Tool {
        /// Which tool.
        tool: String,
        /// What went wrong.
        reason: String,
    },
}

impl BenchError {
    /// An I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        BenchError::Io {
            context: context.into(),
            source,
        }
    }
}

/// Parses a duration: `5`, `5s`, `1.5s`, `500ms` or `2m`.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, BenchError> {
    let s = s.trim();
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num
        .parse()
        .map_err(|_| BenchError::Config(format!("bad duration {s:?} (try 5s, 500ms, 2m)")))?;
    if !v.is_finite() || v < 0.0 || v * scale > 1e9 {
        return Err(BenchError::Config(format!("bad duration {s:?}")));
    }
    Ok(std::time::Duration::from_secs_f64(v * scale))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("x").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("inf").is_err());
    }
}
