//! Warm-restart time: how long a server with a memory file (`-e`) takes from exec to
//! answering requests with its whole cache back, after a SIGUSR1 graceful stop. Run for
//! shoald and memcached on the same data, side by side.
//!
//! Both servers get the same command line shape (`-e FILE -m MB -t 2 -p PORT`), the same
//! items (pipelined sets of fixed-size values), and the same measurement: the clock
//! starts just before the exec and stops when a `version` request is answered; the item
//! count after the restart must equal the count before it, or the run fails.

use crate::fill::{self, FillConfig};
use crate::server::{command, free_port, stat_u64, stats};
use crate::BenchError;
use serde::Serialize;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// What to measure.
#[derive(Clone, Debug, Serialize)]
pub struct RestartConfig {
    /// Item counts to measure at.
    pub items: Vec<u64>,
    /// Value size in bytes.
    pub value_size: usize,
    /// `-m` in megabytes.
    pub memory_mb: usize,
    /// Restarts per server and size (the median is reported).
    pub repeats: usize,
    /// Directory for the memory files (tmpfs, as in production).
    pub dir: PathBuf,
}

/// One server at one size.
#[derive(Clone, Debug, Serialize)]
pub struct RestartResult {
    /// `shoald` or `memcached`.
    pub server: String,
    /// Items stored before the stop (the server's `curr_items`).
    pub items: u64,
    /// Items found after each restart.
    pub restored: u64,
    /// Exec to first answered request, each run, in seconds.
    pub restart_secs: Vec<f64>,
    /// SIGUSR1 to exit, each run, in seconds.
    pub stop_secs: Vec<f64>,
}

impl RestartResult {
    /// Median restart time.
    pub fn restart_median(&self) -> f64 {
        median(&self.restart_secs)
    }

    /// Median graceful-stop time.
    pub fn stop_median(&self) -> f64 {
        median(&self.stop_secs)
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// A server to measure: its name and binary.
pub struct Contender<'a> {
    /// `shoald` or `memcached`.
    pub name: &'a str,
    /// The executable.
    pub bin: &'a Path,
}

/// Measures each contender at each size, alternating contenders per size.
pub fn run(
    cfg: &RestartConfig,
    contenders: &[Contender<'_>],
) -> Result<Vec<RestartResult>, BenchError> {
    let mut out = Vec::new();
    for &n in &cfg.items {
        for c in contenders {
            eprintln!("restart: {} with {n} items", c.name);
            out.push(measure(cfg, c, n)?);
        }
    }
    Ok(out)
}

fn measure(cfg: &RestartConfig, c: &Contender<'_>, n: u64) -> Result<RestartResult, BenchError> {
    let file = cfg.dir.join(format!("{}-{n}.mem", c.name));
    let cleanup = |f: &Path| {
        let _ = std::fs::remove_file(f);
        let mut meta = f.as_os_str().to_owned();
        meta.push(".meta");
        let _ = std::fs::remove_file(PathBuf::from(meta));
    };
    cleanup(&file);
    let port = free_port()?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let (mut child, _) = spawn_ready(cfg, c, &file, port)?;
    let filled = fill::fill(&FillConfig {
        server: addr,
        keys: n,
        key_prefix: "key:".into(),
        key_width: 0,
        value_size: cfg.value_size,
        conns: 2,
        depth: 64,
    });
    let result = filled.and_then(|_| {
        let items = stat_u64(&stats(addr)?, "curr_items")?;
        let mut r = RestartResult {
            server: c.name.to_string(),
            items,
            restored: 0,
            restart_secs: Vec::new(),
            stop_secs: Vec::new(),
        };
        for _ in 0..cfg.repeats.max(1) {
            r.stop_secs.push(graceful_stop(&mut child, c.name)?);
            // memcached 1.6.18 refuses its own metadata when restarted within the second
            // it stopped in ("restart incompatible due to setting for [stop_time]"); the
            // pause is outside the measured time, and both servers get it.
            std::thread::sleep(Duration::from_millis(1100));
            let (next, secs) = spawn_ready(cfg, c, &file, port)?;
            child = next;
            r.restart_secs.push(secs);
            r.restored = stat_u64(&stats(addr)?, "curr_items")?;
            if r.restored != items {
                return Err(BenchError::Protocol(format!(
                    "{} restored {} of {items} items",
                    c.name, r.restored
                )));
            }
        }
        Ok(r)
    });
    let _ = child.kill();
    let _ = child.wait();
    cleanup(&file);
    result
}

/// Starts the server and returns it with the seconds from exec to its first answer.
fn spawn_ready(
    cfg: &RestartConfig,
    c: &Contender<'_>,
    file: &Path,
    port: u16,
) -> Result<(Child, f64), BenchError> {
    let mut cmd = command(c.bin);
    cmd.arg("-e")
        .arg(file)
        .args(["-m", &cfg.memory_mb.to_string(), "-t", "2"])
        .args(["-p", &port.to_string(), "-l", "127.0.0.1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if c.name == "memcached" {
        cmd.args(["-U", "0"]);
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            cmd.args(["-u", "root"]);
        }
    }
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let start = Instant::now();
    let mut child = cmd.spawn().map_err(|e| BenchError::Spawn {
        name: c.name.to_string(),
        reason: e.to_string(),
    })?;
    let deadline = start + Duration::from_secs(60);
    loop {
        if answers(addr) {
            return Ok((child, start.elapsed().as_secs_f64()));
        }
        if let Ok(Some(st)) = child.try_wait() {
            return Err(BenchError::Spawn {
                name: c.name.to_string(),
                reason: format!("exited with {st}"),
            });
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            return Err(BenchError::Spawn {
                name: c.name.to_string(),
                reason: "not answering within 60 s".into(),
            });
        }
        std::thread::sleep(Duration::from_micros(500));
    }
}

fn answers(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(50)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
    let mut b = [0u8; 64];
    s.write_all(b"version\r\n").is_ok() && matches!(s.read(&mut b), Ok(n) if n > 0)
}

/// SIGUSR1, then waits for the exit; returns the seconds it took.
fn graceful_stop(child: &mut Child, name: &str) -> Result<f64, BenchError> {
    let start = Instant::now();
    let pid = i32::try_from(child.id()).map_err(|_| BenchError::Config("pid".into()))?;
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(pid, libc::SIGUSR1) };
    let deadline = start + Duration::from_secs(60);
    loop {
        match child.try_wait() {
            Ok(Some(st)) if st.success() => return Ok(start.elapsed().as_secs_f64()),
            Ok(Some(st)) => {
                return Err(BenchError::Spawn {
                    name: name.to_string(),
                    reason: format!("graceful stop exited with {st}"),
                })
            }
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
            _ => {
                return Err(BenchError::Spawn {
                    name: name.to_string(),
                    reason: "did not stop within 60 s of SIGUSR1".into(),
                })
            }
        }
    }
}

/// The results as a Markdown table: one row per size, shoald beside memcached.
pub fn markdown(results: &[RestartResult]) -> String {
    let mut out = String::from(
        "| items | shoald restart (s) | memcached restart (s) | shoald/memcached | shoald stop (s) | memcached stop (s) | restored (shoald / memcached) |\n\
         |---:|---:|---:|---:|---:|---:|---|\n",
    );
    let mut sizes: Vec<u64> = Vec::new();
    for r in results {
        if !sizes.contains(&r.items) {
            sizes.push(r.items);
        }
    }
    let by = |name: &str, items: u64| {
        results
            .iter()
            .find(|r| r.server == name && r.items == items)
    };
    for n in sizes {
        let (s, m) = (by("shoald", n), by("memcached", n));
        let f = |r: Option<&RestartResult>, g: fn(&RestartResult) -> f64| {
            r.map_or("-".to_string(), |r| format!("{:.3}", g(r)))
        };
        let ratio = match (s, m) {
            (Some(s), Some(m)) => format!("{:.2}x", s.restart_median() / m.restart_median()),
            _ => "-".into(),
        };
        let restored =
            |r: Option<&RestartResult>| r.map_or("-".to_string(), |r| r.restored.to_string());
        out.push_str(&format!(
            "| {n} | {} | {} | {ratio} | {} | {} | {} / {} |\n",
            f(s, RestartResult::restart_median),
            f(m, RestartResult::restart_median),
            f(s, RestartResult::stop_median),
            f(m, RestartResult::stop_median),
            restored(s),
            restored(m),
        ));
    }
    out
}
