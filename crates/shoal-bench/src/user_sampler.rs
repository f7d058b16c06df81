//! A server's user-space CPU time over a run, sampled by `perf`.
//!
//! Why beside /proc: this kernel accounts user and system time by which side of the line
//! each scheduler tick lands on (`CONFIG_TICK_CPU_ACCOUNTING`, 250 ticks a second). At
//! depth 1 a server spends a tenth of its time in user space, so a 5 s run sees about
//! forty user ticks and its user time per request moves by a sixth from run to run.
//! `perf record -e cpu-clock:u` samples the same thing 2,000 times a second, and its
//! figure moves by a few percent. Both count the instructions just after a system call
//! as user time when an interrupt held back by the kernel's exit path lands there, so
//! both servers carry that share alike.
//!
//! The sampling is not free, and not only per sample. Likely why: the event is per
//! thread, so the kernel switches it out and in (re-arming its timer) at each of the
//! server's context switches, and at depth 1 a worker sleeps and wakes about once every
//! three requests. Under memtier at depth 1 (7 rounds, each a plain run and a sampled
//! one), a sampled run took more CPU per request than the plain run before it: 0.7-1.2 us
//! at 100 B values (a tenth), 2.1-2.4 us at 10 KB and 3.9-4.3 us at 100 KB (a third),
//! and more for shoald than for memcached, which pulled the CPU ratio at 100 B from
//! 0.94x to 0.98-1.00x. So a sampled run measures user time only; throughput and CPU
//! per request come from runs without it (`scripts/memtier-log-pairs.py` reads these
//! figures from a run's log).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::BenchError;

/// Samples per second: enough for a few percent over a few seconds.
const FREQUENCY: u32 = 2000;

/// A `perf record` attached to one process, user-space samples only.
pub struct UserSampler {
    child: Child,
    data: PathBuf,
    perf: PathBuf,
}

impl UserSampler {
    /// Starts sampling process `pid` with `perf` into `data` (overwritten).
    pub fn start(perf: &Path, pid: u32, data: &Path) -> Result<UserSampler, BenchError> {
        let child = Command::new(perf)
            .args(["record", "-q", "-e", "cpu-clock:u", "-F"])
            .arg(FREQUENCY.to_string())
            .arg("-p")
            .arg(pid.to_string())
            .arg("-o")
            .arg(data)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| BenchError::io(format!("starting {}", perf.display()), e))?;
        // perf needs a moment to attach; samples before that are simply not taken.
        std::thread::sleep(std::time::Duration::from_millis(200));
        Ok(UserSampler {
            child,
            data: data.to_path_buf(),
            perf: perf.to_path_buf(),
        })
    }

    /// Stops sampling and returns the user-space seconds sampled.
    pub fn finish(mut self) -> Result<f64, BenchError> {
        // SIGINT is how perf record is told to write its file and stop.
        // SAFETY: kill has no memory preconditions; the pid is our own child's.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        self.child
            .wait()
            .map_err(|e| BenchError::io("waiting for perf record".to_string(), e))?;
        let out = Command::new(&self.perf)
            .args(["script", "-F", "period", "-i"])
            .arg(&self.data)
            .stderr(Stdio::null())
            .output()
            .map_err(|e| BenchError::io("perf script".to_string(), e))?;
        let text = String::from_utf8_lossy(&out.stdout);
        sampled_seconds(&text).ok_or_else(|| BenchError::Parse {
            what: format!("perf script -i {}", self.data.display()),
            reason: "no samples".into(),
        })
    }
}

impl Drop for UserSampler {
    fn drop(&mut self) {
        // Only reached on an error path before `finish`: do not leave perf running.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The seconds `perf script -F period` output adds up to (cpu-clock periods are
/// nanoseconds); `None` when it holds no sample.
pub fn sampled_seconds(script: &str) -> Option<f64> {
    let periods: Vec<u64> = script
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    if periods.is_empty() {
        return None;
    }
    Some(periods.iter().sum::<u64>() as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_add_up_in_seconds() {
        assert_eq!(sampled_seconds("  500000\n500000\n"), Some(0.001));
        assert_eq!(sampled_seconds(""), None);
        assert_eq!(sampled_seconds("garbage\n"), None);
    }
}
