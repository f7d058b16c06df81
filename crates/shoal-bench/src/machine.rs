//! The machine the numbers come from: CPUs, CPU model, memory, kernel.

use serde::Serialize;

/// A description of this machine for reports.
#[derive(Clone, Debug, Serialize)]
pub struct MachineInfo {
    /// Online CPUs (`nproc`).
    pub nproc: usize,
    /// `model name` from /proc/cpuinfo.
    pub cpu_model: String,
    /// `MemTotal` from /proc/meminfo, in MiB.
    pub memory_mib: u64,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// The 1-minute load average when the run started: other work on the machine.
    pub load_average: f64,
}

impl MachineInfo {
    /// Describes this machine (unknown fields say `unknown`).
    pub fn detect() -> Self {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("model name"))
                    .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let memory_mib = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
            .map_or(0, |kib| kib / 1024);
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        MachineInfo {
            load_average: load_average(),
            nproc: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu_model,
            memory_mib,
            kernel,
        }
    }

    /// One line for a report.
    pub fn line(&self) -> String {
        format!(
            "{} CPUs ({}), {:.1} GiB memory, Linux {}; load average {:.1} when the run started",
            self.nproc,
            self.cpu_model,
            self.memory_mib as f64 / 1024.0,
            self.kernel,
            self.load_average
        )
    }
}

/// The 1-minute load average now (0 if unknown): how busy the machine is with other work.
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0.0)
}
