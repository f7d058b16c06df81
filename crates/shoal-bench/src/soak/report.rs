//! A soak's result: what ran, the RSS curve, what the clients did, the verdict; written
//! out as markdown, JSON and a chart.

use super::config::{SoakConfig, QUEUES};
use super::driver::{SoakCounts, ABANDON, MAX_REQUESTS_PER_CONN, SLOW_PAUSE, SLOW_RCVBUF};
use super::sampling::{count, RssSummary, Sample};
use crate::machine::MachineInfo;
use crate::report::num;
use crate::seeds::ServerKind;
use crate::BenchError;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The result of one soak run.
#[derive(Clone, Debug, Serialize)]
pub struct SoakReport {
    /// The command line (set by the caller).
    pub command: String,
    /// When the load started (UTC).
    pub started: String,
    /// Where it ran.
    pub machine: MachineInfo,
    /// What was run.
    pub config: SoakConfig,
    /// The server's arguments.
    pub server_args: Vec<String>,
    /// Distinct keys (queues for shoal-queued).
    pub keys: u64,
    /// Mean value size, bytes.
    pub mean_value_bytes: f64,
    /// Slow readers among the connections.
    pub slow_conns: usize,
    /// Limit on RSS after warm-up, MiB.
    pub budget_mb: f64,
    /// RSS every second.
    pub samples: Vec<Sample>,
    /// The curve summed up.
    pub rss: RssSummary,
    /// What the clients did.
    pub counts: SoakCounts,
    /// Requests answered per second.
    pub ops_per_sec: f64,
    /// Seconds the load ran (shorter than asked if the server died).
    pub elapsed_secs: f64,
    /// The 1-minute load average when the load ended (the machine's is at the start):
    /// with 2 cores, anything much above 2 means other work competed with the run.
    pub load_average_end: f64,
    /// Whether the server was still running at the end.
    pub server_survived: bool,
    /// The verdict.
    pub pass: bool,
    /// Why it failed (empty on a pass).
    pub reasons: Vec<String>,
}

/// `YYYY-MM-DD HH:MM:SS UTC` for seconds since 1970 (Howard Hinnant's days-to-civil).
pub fn utc_date(unix: u64) -> String {
    let days = (unix / 86_400) as i64;
    let secs = unix % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

impl SoakReport {
    /// The file name stem for this server's results: `soak-shoald`, or with extra flags
    /// `soak-shoald-io-uring` (the flags, dashes trimmed, joined by dashes).
    pub fn stem(&self) -> String {
        let mut stem = format!("soak-{}", self.config.server.name());
        for a in &self.config.extra_args {
            let a: String = a
                .trim_start_matches('-')
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                .collect();
            stem.push('-');
            stem.push_str(&a);
        }
        stem
    }

    /// A person's summary: what ran, the curve's numbers, the verdict.
    pub fn markdown(&self) -> String {
        let c = &self.config;
        let r = &self.rss;
        let n = &self.counts;
        let opt = |v: Option<f64>| v.map_or_else(|| "-".to_string(), num);
        let mut m = String::new();
        let _ = writeln!(
            m,
            "# Soak: {}, {} MiB, {} s\n",
            c.server.name(),
            c.memory_mb,
            c.duration.as_secs_f64()
        );
        let _ = writeln!(m, "Command: `{}`  ", self.command);
        let _ = writeln!(m, "Started: {}  ", self.started);
        let _ = writeln!(
            m,
            "Machine: {}; {:.1} when it ended  ",
            self.machine.line(),
            self.load_average_end
        );
        let _ = writeln!(
            m,
            "Server: `{} {}` (plus a port and -l 127.0.0.1)\n",
            c.bin.display(),
            self.server_args.join(" ")
        );
        let what = if c.server == ServerKind::ShoalQueued {
            format!(
                "{QUEUES} queues (sets enqueue, gets dequeue); -m split over them as \
                 --queue-memory, each capped at twice that with --max-bytes and --discard-old"
            )
        } else {
            format!(
                "{} keys (x mean value = {} x -m, so eviction never stops)",
                count(self.keys),
                c.key_space
            )
        };
        let _ = writeln!(
            m,
            "Load: {conns} connections on {threads} client threads. {churn} churners send one \
             request at a time ({set:.0}% sets) and reconnect after 1-{maxr} requests, {ab:.0}% \
             of them closing with a request unanswered. {slow} slow readers connect with a \
             {rcv} KiB receive buffer, send a {mg}-key multi-get, read {rd} bytes per 100 ms, \
             stop reading for 2-5 s at random ({pause:.0}% chance per read) and hang up after \
             5-30 s, done or not. Values: log-uniform {vmin}-{vmax} bytes (mean {mean}). {what}.\n",
            conns = c.conns,
            threads = c.threads,
            churn = c.conns - self.slow_conns,
            set = c.set_ratio * 100.0,
            maxr = MAX_REQUESTS_PER_CONN,
            ab = ABANDON * 100.0,
            slow = self.slow_conns,
            rcv = SLOW_RCVBUF / 1024,
            mg = c.multiget_keys,
            rd = c.slow_read_bytes,
            pause = SLOW_PAUSE * 100.0,
            vmin = c.value_size.min,
            vmax = c.value_size.max,
            mean = num(self.mean_value_bytes),
        );
        let _ = writeln!(
            m,
            "Budget: {}. Warm-up (not judged): the first {} s. MiB = 2^20 bytes; RSS is VmRSS \
             from /proc/PID/status, sampled every second ({} samples).\n",
            c.budget_line(),
            c.warmup.as_secs_f64(),
            self.samples.len()
        );
        let _ = writeln!(m, "| RSS | MiB |\n|---|---:|");
        let rows = [
            ("idle, before the load".to_string(), num(r.idle_mb)),
            ("min".into(), num(r.min_mb)),
            ("median".into(), num(r.median_mb)),
            ("max".into(), num(r.max_mb)),
            ("**max after warm-up**".into(), opt(r.max_after_warmup_mb)),
            (
                format!(
                    "median, first window after warm-up ({}-{} s)",
                    num(r.first_window_secs.0),
                    num(r.first_window_secs.1)
                ),
                opt(r.first_window_mb),
            ),
            (
                format!(
                    "median, last window ({}-{} s)",
                    num(r.last_window_secs.0),
                    num(r.last_window_secs.1)
                ),
                opt(r.last_window_mb),
            ),
            ("growth, last window - first".into(), opt(r.growth_mb)),
            ("budget".into(), num(self.budget_mb)),
        ];
        for (k, v) in rows {
            let _ = writeln!(m, "| {k} | {v} |");
        }
        let hit = if n.gets > 0 {
            n.hits as f64 * 100.0 / n.gets as f64
        } else {
            0.0
        };
        let _ = writeln!(
            m,
            "\nOps: {} in {} s ({}/s): {} gets ({hit:.1}% hits), {} sets, {} multi-gets read to \
             the end ({} values) and {} abandoned mid-reply, {} bytes read slowly; {} connections \
             opened.  ",
            count(n.ops()),
            num(self.elapsed_secs),
            num(self.ops_per_sec),
            count(n.gets),
            count(n.sets),
            count(n.multigets_done),
            count(n.multiget_values),
            count(n.multigets_abandoned),
            count(n.slow_bytes_read),
            count(n.connects),
        );
        let _ = writeln!(
            m,
            "Errors: {} ({} error replies, {} connection errors, {} protocol errors, \
             {} timeouts).\n",
            n.errors(),
            n.error_replies,
            n.conn_errors,
            n.protocol_errors,
            n.timeouts
        );
        if self.pass {
            let _ = writeln!(
                m,
                "**Verdict: PASS**: max RSS after warm-up {} MiB is within the budget of {} MiB.",
                opt(r.max_after_warmup_mb),
                num(self.budget_mb)
            );
        } else {
            let _ = writeln!(m, "**Verdict: FAIL**: {}.", self.reasons.join("; "));
        }
        let _ = writeln!(m, "\n![RSS over time]({}.png)", self.stem());
        m
    }

    /// Draws the RSS curve (with lines at -m and at the budget) into `dir/file`.
    pub fn chart(&self, dir: &Path, file: &str) -> Result<String, BenchError> {
        super::chart::rss_curve(
            dir,
            file,
            &self.config,
            &self.samples,
            self.slow_conns,
            self.budget_mb,
        )
    }

    /// Writes `soak-SERVER.json`, `.md` and `.png` into `dir`; returns their paths.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>, BenchError> {
        std::fs::create_dir_all(dir).map_err(|e| BenchError::io(dir.display().to_string(), e))?;
        let stem = self.stem();
        let png = self.chart(dir, &format!("{stem}.png"))?;
        let json = serde_json::to_string_pretty(self)
            .map_err(|e| BenchError::Config(format!("serialising the soak report: {e}")))?;
        let mut out = vec![dir.join(png)];
        for (ext, text) in [("json", json), ("md", self.markdown())] {
            let path = dir.join(format!("{stem}.{ext}"));
            std::fs::write(&path, text)
                .map_err(|e| BenchError::io(path.display().to_string(), e))?;
            out.push(path);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(utc_date(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc_date(1_700_000_000), "2023-11-14 22:13:20 UTC");
        assert_eq!(utc_date(951_782_400), "2000-02-29 00:00:00 UTC");
    }
}
