//! Starting and stopping the servers under test, and reading their `stats`.

use crate::BenchError;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A server process this program started; killed when dropped. Started with
/// `PR_SET_PDEATHSIG`, so it is also killed if this program dies (Ctrl-C, a crash).
pub struct ServerProcess {
    /// A label for reports (`shoald`, `memcached`, `redis`, `shoal-queued`).
    pub name: String,
    /// Where it listens.
    pub addr: SocketAddr,
    /// A scratch directory this program made for the server, removed when dropped.
    pub data_dir: Option<PathBuf>,
    child: Child,
}

/// A free loopback TCP port (bound and released; another process could take it, which
/// the caller notices when the server fails to start).
pub fn free_port() -> Result<u16, BenchError> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| BenchError::io("find a free port", e))?;
    let port = l
        .local_addr()
        .map_err(|e| BenchError::io("find a free port", e))?
        .port();
    Ok(port)
}

/// The address in a `listening on 127.0.0.1:PORT` log line, ANSI colours and all.
pub fn parse_listening(line: &str) -> Option<SocketAddr> {
    let rest = &line[line.find("listening on ")? + "listening on ".len()..];
    let end = rest
        .find(|c: char| c.is_whitespace() || c == '\u{1b}')
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

fn spawn_err(name: &str, reason: impl std::fmt::Display) -> BenchError {
    BenchError::Spawn {
        name: name.to_string(),
        reason: reason.to_string(),
    }
}

/// A command whose process dies with this one.
pub(crate) fn command(bin: &Path) -> Command {
    let mut cmd = Command::new(bin);
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::null());
    cmd
}

/// Scratch directories alive now, removed by [`remove_scratch_dirs`] on an interrupt.
static SCRATCH: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Removes every scratch directory still registered (for Ctrl-C: the servers using them
/// die with this process through `PR_SET_PDEATHSIG`).
pub fn remove_scratch_dirs() {
    let dirs = match SCRATCH.lock() {
        Ok(mut g) => std::mem::take(&mut *g),
        Err(p) => std::mem::take(&mut *p.into_inner()),
    };
    for d in dirs {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// Stops tracking `dir` (it has been removed).
fn forget_scratch_dir(dir: &Path) {
    if let Ok(mut g) = SCRATCH.lock() {
        g.retain(|d| d != dir);
    }
}

/// On SIGINT or SIGTERM: remove the scratch directories and exit with 130, which kills
/// every server started here (they die with this process).
pub fn exit_cleanly_on_interrupt() {
    static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    extern "C" fn on_signal(_: libc::c_int) {
        INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
    std::thread::spawn(|| loop {
        if INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
            eprintln!("interrupted: stopping the servers started for this run");
            remove_scratch_dirs();
            std::process::exit(130);
        }
        std::thread::sleep(Duration::from_millis(50));
    });
}

/// A fresh scratch directory under the system temp dir.
pub fn scratch_dir(label: &str) -> Result<PathBuf, BenchError> {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("shoal-bench-{label}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| BenchError::io(dir.display().to_string(), e))?;
    if let Ok(mut g) = SCRATCH.lock() {
        g.push(dir.clone());
    }
    Ok(dir)
}

impl ServerProcess {
    /// Starts a server that logs `listening on ADDR` on stderr, and learns its port.
    fn start_announcing(name: &str, mut cmd: Command) -> Result<Self, BenchError> {
        let mut child = cmd
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| spawn_err(name, format!("{:?}: {e}", cmd.get_program())))?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| spawn_err(name, "no stderr"))?;
        let (tx, rx) = mpsc::channel();
        // Keeps reading stderr for the process's life so logging never blocks it.
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(addr) = parse_listening(&line) {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(Ok(addr));
                    }
                } else if let Some(tx) = tx.as_ref() {
                    let _ = tx.send(Err(line));
                }
            }
        });
        let mut proc = ServerProcess {
            name: name.into(),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir: None,
            child,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut said = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(Ok(addr)) => {
                    proc.addr = addr;
                    break;
                }
                Ok(Err(line)) => said.push(line),
                Err(_) => {
                    return Err(spawn_err(
                        name,
                        format!("no `listening on` line within 10 s: {}", said.join(" | ")),
                    ))
                }
            }
        }
        proc.wait_ready()?;
        Ok(proc)
    }

    /// Starts shoald with `args` plus `-p -1 -l 127.0.0.1 -v` (`-p -1`: any free port),
    /// and learns its port from the `listening on` line on stderr.
    pub fn start_shoald(bin: &Path, args: &[String]) -> Result<Self, BenchError> {
        let mut cmd = command(bin);
        cmd.args(args).args(["-p", "-1", "-l", "127.0.0.1", "-v"]);
        Self::start_announcing("shoald", cmd)
    }

    /// Starts shoal-queued on a fresh data directory (removed when dropped) with
    /// `--fsync fsync` and `args`.
    pub fn start_queued(bin: &Path, fsync: &str, args: &[String]) -> Result<Self, BenchError> {
        let dir = scratch_dir("queued")?;
        let mut cmd = command(bin);
        cmd.args(["-p", "0", "-l", "127.0.0.1", "-v", "--fsync", fsync, "-d"])
            .arg(&dir)
            .args(args);
        let mut p = Self::start_announcing("shoal-queued", cmd).inspect_err(|_| {
            let _ = std::fs::remove_dir_all(&dir);
        })?;
        p.data_dir = Some(dir);
        Ok(p)
    }

    /// Starts memcached with `args` on a free loopback port (`-u root` added when running
    /// as root, which memcached otherwise refuses).
    pub fn start_memcached(bin: &Path, args: &[String]) -> Result<Self, BenchError> {
        let port = free_port()?;
        let mut cmd = command(bin);
        cmd.args(args)
            .args(["-p", &port.to_string(), "-U", "0", "-l", "127.0.0.1"]);
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            cmd.args(["-u", "root"]);
        }
        let child = cmd
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| spawn_err("memcached", format!("{}: {e}", bin.display())))?;
        let mut proc = ServerProcess {
            name: "memcached".into(),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            data_dir: None,
            child,
        };
        proc.wait_ready()?;
        Ok(proc)
    }

    /// Starts redis-server on a free loopback port with no persistence unless `args`
    /// ask for it, in a scratch directory (removed when dropped).
    pub fn start_redis(bin: &Path, args: &[String]) -> Result<Self, BenchError> {
        let port = free_port()?;
        let dir = scratch_dir("redis")?;
        let mut cmd = command(bin);
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(&dir)
            .args(args);
        let child = cmd
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| spawn_err("redis", format!("{}: {e}", bin.display())))?;
        let mut proc = ServerProcess {
            name: "redis".into(),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            data_dir: Some(dir),
            child,
        };
        proc.wait_ready()?;
        Ok(proc)
    }

    /// Waits until the server answers anything to `version` (redis answers an error).
    fn wait_ready(&mut self) -> Result<(), BenchError> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(spawn_err(&self.name, format!("exited with {status}")));
            }
            if let Ok(mut s) = TcpStream::connect(self.addr) {
                let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
                let mut b = [0u8; 64];
                if s.write_all(b"version\r\n").is_ok() && matches!(s.read(&mut b), Ok(n) if n > 0) {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(spawn_err(&self.name, "not answering within 10 s"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// CPU time used so far (user and system, every thread), from `/proc/PID/stat`.
    pub fn cpu_times(&self) -> Result<CpuTimes, BenchError> {
        cpu_times(self.pid())
    }

    /// Resident set size in KiB, from `/proc/PID/status` (VmRSS).
    pub fn rss_kib(&self) -> Result<u64, BenchError> {
        rss_kib(self.pid())
    }

    /// Bytes the process has written to storage so far (see [`disk_write_bytes`]).
    pub fn disk_write_bytes(&self) -> Result<u64, BenchError> {
        disk_write_bytes(self.pid())
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Kills the process now (the drop would too); for tests of a server dying.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(d) = &self.data_dir {
            let _ = std::fs::remove_dir_all(d);
            forget_scratch_dir(d);
        }
    }
}

/// Bytes under `dir`: (apparent size, allocated on disk), recursively.
pub fn dir_bytes(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let mut apparent = 0;
    let mut allocated = 0;
    let Ok(rd) = std::fs::read_dir(dir) else {
        return (0, 0);
    };
    for e in rd.flatten() {
        let Ok(m) = e.metadata() else { continue };
        if m.is_dir() {
            let (a, b) = dir_bytes(&e.path());
            apparent += a;
            allocated += b;
        } else {
            apparent += m.len();
            allocated += m.blocks() * 512;
        }
    }
    (apparent, allocated)
}

/// Redis `INFO` (one section) as text.
pub fn redis_info(addr: SocketAddr, section: &str) -> Result<String, BenchError> {
    let mut s =
        TcpStream::connect(addr).map_err(|e| BenchError::io(format!("connect to {addr}"), e))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| BenchError::io("set timeout", e))?;
    let mut req = Vec::new();
    crate::resp::encode_command(&mut req, &[b"INFO", section.as_bytes()]);
    s.write_all(&req)
        .map_err(|e| BenchError::io(format!("write to {addr}"), e))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if let Some((_, used)) = crate::resp::parse_reply(&buf)? {
            let nl = buf.iter().position(|&b| b == b'\n').unwrap_or(0) + 1;
            return Ok(String::from_utf8_lossy(
                &buf[nl.min(used)..used.saturating_sub(2).max(nl.min(used))],
            )
            .into_owned());
        }
        let n = s
            .read(&mut chunk)
            .map_err(|e| BenchError::io(format!("read from {addr}"), e))?;
        if n == 0 {
            return Err(BenchError::Closed(addr.to_string()));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// VmRSS of process `pid` in KiB.
pub fn rss_kib(pid: u32) -> Result<u64, BenchError> {
    let path = format!("/proc/{pid}/status");
    let s = std::fs::read_to_string(&path).map_err(|e| BenchError::io(path.clone(), e))?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| BenchError::Protocol(format!("no VmRSS in {path}")))
}

/// Bytes process `pid` has caused to be written to storage (`write_bytes` of
/// `/proc/PID/io`): what reached the block layer, not what sat in the page cache.
pub fn disk_write_bytes(pid: u32) -> Result<u64, BenchError> {
    let path = format!("/proc/{pid}/io");
    let s = std::fs::read_to_string(&path).map_err(|e| BenchError::io(path.clone(), e))?;
    s.lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| BenchError::Protocol(format!("no write_bytes in {path}")))
}

/// The server's `stats` as name → value.
pub fn stats(addr: SocketAddr) -> Result<HashMap<String, String>, BenchError> {
    stats_group(addr, "")
}

/// A `stats GROUP` reply as name → value (`""` is plain `stats`), e.g. shoald's
/// `stats eviction`.
pub fn stats_group(addr: SocketAddr, group: &str) -> Result<HashMap<String, String>, BenchError> {
    let mut s =
        TcpStream::connect(addr).map_err(|e| BenchError::io(format!("connect to {addr}"), e))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| BenchError::io("set timeout", e))?;
    let command = if group.is_empty() {
        "stats\r\n".to_string()
    } else {
        format!("stats {group}\r\n")
    };
    s.write_all(command.as_bytes())
        .map_err(|e| BenchError::io(format!("write to {addr}"), e))?;
    let mut out = HashMap::new();
    for line in BufReader::new(s).lines() {
        let line = line.map_err(|e| BenchError::io(format!("read from {addr}"), e))?;
        let line = line.trim_end();
        if line == "END" {
            return Ok(out);
        }
        let mut parts = line.splitn(3, ' ');
        match (parts.next(), parts.next(), parts.next()) {
            (Some("STAT"), Some(k), Some(v)) => {
                out.insert(k.to_string(), v.to_string());
            }
            _ => return Err(BenchError::Protocol(line.to_string())),
        }
    }
    Err(BenchError::Closed(addr.to_string()))
}

/// One numeric `stats` value.
pub fn stat_u64(stats: &HashMap<String, String>, name: &str) -> Result<u64, BenchError> {
    stats
        .get(name)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| BenchError::Protocol(format!("stats has no numeric {name}")))
}

/// A process's CPU time so far, every thread, from /proc/PID/stat.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct CpuTimes {
    /// User-space seconds (`utime`).
    pub user_secs: f64,
    /// Kernel seconds (`stime`).
    pub system_secs: f64,
}

impl CpuTimes {
    /// The CPU time spent between `earlier` and `self`.
    pub fn since(&self, earlier: &CpuTimes) -> CpuTimes {
        CpuTimes {
            user_secs: self.user_secs - earlier.user_secs,
            system_secs: self.system_secs - earlier.system_secs,
        }
    }

    /// User plus system seconds.
    pub fn total_secs(&self) -> f64 {
        self.user_secs + self.system_secs
    }
}

/// `utime` and `stime` (clock ticks) from the text of /proc/PID/stat.
pub fn parse_proc_stat(stat: &str) -> Option<(u64, u64)> {
    // The command name (field 2) may hold spaces and parentheses: the fields after it
    // start after the last ')'. utime and stime are fields 14 and 15 of the line, so the
    // 12th and 13th after the name.
    let rest = stat.rsplit_once(')')?.1;
    let mut f = rest.split_whitespace().skip(11);
    let utime = f.next()?.parse().ok()?;
    let stime = f.next()?.parse().ok()?;
    Some((utime, stime))
}

/// Process `pid`'s CPU time so far.
pub fn cpu_times(pid: u32) -> Result<CpuTimes, BenchError> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).map_err(|e| BenchError::io(path.clone(), e))?;
    let (utime, stime) = parse_proc_stat(&stat).ok_or_else(|| BenchError::Parse {
        what: path,
        reason: "no utime and stime".into(),
    })?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Ok(CpuTimes {
        user_secs: utime as f64 / hz,
        system_secs: stime as f64 / hz,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_listening_address() {
        let l = "2025-01-01T00:00:00Z  INFO shoald: listening on 127.0.0.1:40123";
        assert_eq!(parse_listening(l), Some("127.0.0.1:40123".parse().unwrap()));
        let l = "\u{1b}[32m INFO\u{1b}[0m listening on 127.0.0.1:5\u{1b}[0m";
        assert_eq!(parse_listening(l), Some("127.0.0.1:5".parse().unwrap()));
        assert_eq!(parse_listening("listening on unix:/tmp/x"), None);
    }

    #[test]
    fn reads_proc_stat() {
        let line = "4242 (shoald (x) y) S 1 4242 4242 0 -1 4194560 1016 0 0 0 1234 567 0 0 20 0 3 0 99 1000 200 18446744073709551615";
        assert_eq!(parse_proc_stat(line), Some((1234, 567)));
        assert_eq!(parse_proc_stat("4242 (x) S 1 2"), None);
        assert_eq!(parse_proc_stat("no parenthesis"), None);
        let me = cpu_times(std::process::id()).unwrap();
        assert!(me.user_secs >= 0.0 && me.system_secs >= 0.0);
    }
}
