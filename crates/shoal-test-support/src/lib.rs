//! What every integration test in the workspace needs and used to write for itself:
//!
//! - **Workspace binaries that are never stale.** A test of one package that runs another
//!   package's binary (shoal-proxy's tests start shoald) cannot use `CARGO_BIN_EXE_*`,
//!   which only covers the package's own binaries. [`workspace_bin`] finds the binary in
//!   the test's own `target/<profile>` and, if any workspace source or manifest is newer
//!   than it (or it is missing), rebuilds the workspace's binaries first, with the same
//!   command CI uses, so a test never runs an old build without saying so.
//! - **One rule for external peers** (memcached, memcached-tool, nutcracker, redis,
//!   prometheus): [`peer`] finds one; when it is missing, CI (`SHOAL_REQUIRE_PEERS=1`,
//!   set by `scripts/test.sh`) fails loudly with the package to install, and a plain
//!   `cargo test` prints a visible `SKIPPED` line and lets the test return.
//! - **`promtool check metrics`** on a scraped page: [`promtool_check`], under the same
//!   peer rule.
//! - **Process measurements** for the hostile-client tests: [`rss_kib`] and
//!   [`raise_fd_limit`].
//! - **TLS material** for the TLS tests: certificates made at test time and a client
//!   ([`tls`]).
//! - **Logs** read back as events in either `--log-format` ([`logs`]).
//! - **memcached as a peer**, started on an ephemeral port and killed on drop
//!   ([`memcached::Memcached`]); memcached 1.6.45, the reference for shoald's replies,
//!   built from the peers tarball ([`memcached::reference`]).
//! - **Network faults** between a client and one backend (latency, bandwidth, 1-byte
//!   writes, blackhole, half-open, reset mid-reply), switchable while traffic flows
//!   ([`faults::FaultProxy`]).
//! - **A differential fuzzer** that sends the same random commands to memcached and
//!   shoald and shrinks a difference to a regression case ([`differential`]).

pub mod differential;
pub mod faults;
pub mod logs;
pub mod memcached;
pub mod signals;
pub mod tls;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

/// `target/<profile>` of the running test executable (`target/<profile>/deps/test-hash`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    exe.parent()
        .and_then(|deps| deps.parent())
        .expect("test executable lives in target/<profile>/deps")
        .to_path_buf()
}

/// The workspace root: the nearest ancestor of this crate with a `[workspace]` manifest.
pub fn workspace_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .find(|d| {
            std::fs::read_to_string(d.join("Cargo.toml")).is_ok_and(|t| t.contains("[workspace]"))
        })
        .unwrap_or(here)
        .to_path_buf()
}

/// The newest modification time of any workspace source or manifest (`crates/*/src/**`,
/// `crates/*/Cargo.toml`, `Cargo.toml`, `Cargo.lock`).
fn newest_source(root: &Path) -> Option<SystemTime> {
    fn walk(dir: &Path, newest: &mut Option<SystemTime>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let path = e.path();
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() {
                walk(&path, newest);
            } else if let Ok(m) = meta.modified() {
                *newest = (*newest).max(Some(m));
            }
        }
    }
    let mut newest = None;
    for f in ["Cargo.toml", "Cargo.lock"] {
        if let Ok(m) = std::fs::metadata(root.join(f)).and_then(|m| m.modified()) {
            newest = newest.max(Some(m));
        }
    }
    let crates = std::fs::read_dir(root.join("crates")).ok()?;
    for c in crates.flatten() {
        let dir = c.path();
        if let Ok(m) = std::fs::metadata(dir.join("Cargo.toml")).and_then(|m| m.modified()) {
            newest = newest.max(Some(m));
        }
        walk(&dir.join("src"), &mut newest);
    }
    newest
}

/// A workspace binary (`shoald`, `shoal-proxy`, `shoal-queued`, ...) from this test's
/// `target/<profile>`, rebuilt first if it is missing or older than any workspace
/// source. Within one test process the check runs once per binary.
///
/// The rebuild is `cargo build --workspace --bins` in the test's profile: the command CI
/// runs before its tests, so it resolves features exactly as CI does and is a no-op
/// there.
pub fn workspace_bin(bin: &str) -> PathBuf {
    static CHECKED: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    let dir = profile_dir();
    let path = dir.join(bin);
    let checked = CHECKED.get_or_init(|| Mutex::new(Vec::new()));
    let mut checked = checked.lock().unwrap_or_else(|p| p.into_inner());
    if checked.iter().any(|b| b == bin) {
        return path;
    }
    let built = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
    let root = workspace_root();
    let stale = match (built, newest_source(&root)) {
        (None, _) => true,
        (Some(b), Some(src)) => src > b,
        (Some(_), None) => false,
    };
    if stale {
        eprintln!(
            "{} is missing or older than the workspace sources: rebuilding",
            path.display()
        );
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.current_dir(&root)
            .args(["build", "-q", "--workspace", "--bins"]);
        if dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("run cargo build");
        assert!(status.success(), "building the workspace binaries failed");
        assert!(path.is_file(), "{} was not built", path.display());
        // Cargo leaves a binary it found up to date untouched (the newer source was a
        // test, or changed nothing the binary depends on); mark it checked, or every
        // test process would run cargo again until the next real rebuild. Read-only: a
        // running binary cannot be opened for writing, and the owner may set times anyway.
        if let Ok(f) = std::fs::File::open(&path) {
            let _ = f.set_modified(SystemTime::now());
        }
    }
    checked.push(bin.to_string());
    path
}

/// Where Debian puts an external peer tool that is not on `PATH` for every user.
const EXTRA_DIRS: [&str; 3] = ["/usr/sbin", "/usr/share/memcached/scripts", "/usr/bin"];

/// An external peer program by name (searched on `PATH`, then in `/usr/sbin`,
/// `/usr/share/memcached/scripts` and `/usr/bin`) or by absolute path.
///
/// When it is missing: with `SHOAL_REQUIRE_PEERS` set (CI) this panics, naming the Debian
/// package that provides it; otherwise it prints a visible `SKIPPED` line and returns
/// `None`, and the caller returns from the test.
pub fn peer(name: &str, package: &str) -> Option<PathBuf> {
    let found = if Path::new(name).is_absolute() {
        Some(PathBuf::from(name)).filter(|p| p.is_file())
    } else {
        let path_dirs = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .unwrap_or_default();
        path_dirs
            .into_iter()
            .chain(EXTRA_DIRS.iter().map(PathBuf::from))
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    };
    if found.is_none() {
        let why = format!("{name} is not installed (apt-get install -y {package})");
        assert!(
            std::env::var_os("SHOAL_REQUIRE_PEERS").is_none(),
            "{why}; SHOAL_REQUIRE_PEERS is set, so this test may not skip"
        );
        eprintln!("SKIPPED: {why}");
    }
    found
}

/// A `/proc/PID/status` field in KiB (`VmRSS`, `VmHWM`, ...); `None` once the process is
/// gone or if it has no such field.
pub fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// Resident set size of a process in KiB (`VmRSS`); 0 once it is gone.
pub fn rss_kib(pid: u32) -> u64 {
    proc_status_kib(pid, "VmRSS").unwrap_or(0)
}

/// Samples a process's resident set size in the background, keeping the largest value:
/// RSS read only at the end of a test misses a peak in the middle of it.
pub struct RssSampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl RssSampler {
    /// Starts sampling `pid` every `every`.
    pub fn start(pid: u32, every: std::time::Duration) -> RssSampler {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let thread = std::thread::spawn({
            let stop = stop.clone();
            move || {
                let mut max = 0;
                while !stop.load(Ordering::Relaxed) {
                    let Some(rss) = proc_status_kib(pid, "VmRSS") else {
                        break;
                    };
                    max = max.max(rss);
                    std::thread::sleep(every);
                }
                max
            }
        });
        RssSampler { stop, thread }
    }

    /// Stops sampling; the largest RSS seen, in KiB. A panic of the sampling thread is
    /// passed on to the test: reporting 0 instead would let any RSS bound pass.
    pub fn finish(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }
}

/// Raises this process's open-file limit to at least `want` (as far as the hard limit
/// allows; as root, past it) so a test can open thousands of client sockets. Returns the
/// soft limit now in force.
pub fn raise_fd_limit(want: u64) -> u64 {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) != 0 {
            return 0;
        }
        if rl.rlim_cur >= want {
            return rl.rlim_cur;
        }
        let raised = libc::rlimit {
            rlim_cur: want.max(rl.rlim_cur),
            rlim_max: want.max(rl.rlim_max),
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
            return raised.rlim_cur;
        }
        let capped = libc::rlimit {
            rlim_cur: want.min(rl.rlim_max),
            rlim_max: rl.rlim_max,
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &capped) == 0 {
            return capped.rlim_cur;
        }
        rl.rlim_cur
    }
}

/// Sends `request` (any bytes) to an HTTP endpoint and reads until the server closes:
/// the status of an `HTTP/1.1` reply (0 if the reply is not one) and the whole reply.
/// Ten-second timeouts, so a server that neither answers nor closes fails the test.
pub fn http_raw(addr: std::net::SocketAddr, request: &[u8]) -> (u16, String) {
    use std::io::{Read, Write};
    let timeout = std::time::Duration::from_secs(10);
    let mut s = std::net::TcpStream::connect_timeout(&addr, timeout).expect("connect");
    s.set_read_timeout(Some(timeout)).expect("timeout");
    s.set_write_timeout(Some(timeout)).expect("timeout");
    // The server may answer and close before taking all of a long request.
    let _ = s.write_all(request);
    let mut out = Vec::new();
    if let Err(e) = s.read_to_end(&mut out) {
        assert!(
            e.kind() == std::io::ErrorKind::ConnectionReset,
            "no close within {timeout:?}: {e}"
        );
    }
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|r| r.get(..3))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, text)
}

/// What every daemon's `--metrics-listen` endpoint must do with bad HTTP input: non-HTTP
/// bytes and binary junk get 400, another path 404, another method 405, another version
/// 505, a request head past 8 KiB 431, each answered and the connection closed at once;
/// and a head that never ends (slowloris) gets 408 and a close at the 5 s request timeout
/// while scrapes meanwhile are served. `family` is a metric the page always has.
pub fn check_bad_http_is_refused(addr: std::net::SocketAddr, family: &str) {
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};
    let t = Instant::now();
    for (request, status) in [
        (&b"get foo\r\n"[..], 400),
        (b"\x80\x00\x00\x05hello", 400),
        (b"GET / HTTP/1.1\r\n\r\n", 404),
        (b"GET /metricsx HTTP/1.1\r\n\r\n", 404),
        (b"POST /metrics HTTP/1.1\r\n\r\n", 405),
        (b"GET /metrics HTTP/3\r\n\r\n", 505),
    ] {
        let (got, reply) = http_raw(addr, request);
        assert_eq!(got, status, "for {request:?}: {reply:?}");
    }
    let mut huge = b"GET /metrics HTTP/1.1\r\n".to_vec();
    for i in 0..400 {
        huge.extend_from_slice(format!("X-Filler-{i}: aaaaaaaaaaaaaaaa\r\n").as_bytes());
    }
    huge.extend_from_slice(b"\r\n");
    assert_eq!(http_raw(addr, &huge).0, 431);
    // Every answer above came at once (http_raw reads until the close).
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());

    let t = Instant::now();
    let mut slow = std::net::TcpStream::connect(addr).expect("connect");
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    slow.write_all(b"GET /metrics HTTP/1.1\r\nX-Slow: ")
        .expect("write");
    assert!(
        scrape_metrics(addr).contains(family),
        "a scrape beside the slow client"
    );
    let mut reply = String::new();
    let _ = slow.read_to_string(&mut reply);
    let waited = t.elapsed();
    assert!(reply.starts_with("HTTP/1.1 408 "), "{reply:?}");
    assert!(
        waited >= Duration::from_secs(4) && waited < Duration::from_secs(8),
        "closed after {waited:?}"
    );
}

/// `GET /metrics` from a daemon's `--metrics-listen` address: the body of its reply,
/// which must be `200 OK` (the test fails otherwise). Five-second timeouts.
pub fn scrape_metrics(addr: std::net::SocketAddr) -> String {
    use std::io::{Read, Write};
    let timeout = std::time::Duration::from_secs(5);
    let mut s = std::net::TcpStream::connect_timeout(&addr, timeout).expect("connect");
    s.set_read_timeout(Some(timeout)).expect("timeout");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
    out.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

/// The value of the sample line of a metrics page that starts with `series ` (the name
/// with its labels exactly as the page prints them).
pub fn metric_value(page: &str, series: &str) -> Option<f64> {
    page.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// What `promtool check metrics` says about a metrics page: one entry per non-empty line
/// it printed (stdout, then stderr), plus a line naming its exit status when it failed
/// without saying why. An empty list means promtool accepted the page without remarks.
///
/// `None` when promtool is missing, under the [`peer`] rule: CI
/// (`SHOAL_REQUIRE_PEERS=1`) fails instead, a plain `cargo test` prints `SKIPPED` and the
/// caller returns from the test.
pub fn promtool_check(page: &str) -> Option<Vec<String>> {
    use std::io::Write;
    use std::process::Stdio;
    let promtool = peer("promtool", "prometheus")?;
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start promtool");
    // Dropping stdin after the write closes the pipe, which is how promtool sees the end
    // of the page.
    child
        .stdin
        .take()
        .expect("promtool stdin")
        .write_all(page.as_bytes())
        .expect("write the page to promtool");
    let out = child.wait_with_output().expect("promtool");
    let mut lines: Vec<String> = [&out.stdout, &out.stderr]
        .iter()
        .flat_map(|b| {
            String::from_utf8_lossy(b)
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    if !out.status.success() && lines.is_empty() {
        lines.push(format!("promtool exited with {}", out.status));
    }
    Some(lines)
}

/// Spawns `cmd` (stdin and stdout to /dev/null, stderr read here) and waits, at most 10 s,
/// for a stderr line naming the address it listens on (`... listening on ADDR ...`, as
/// every Shoal daemon logs at start). Returns the child and that address; stderr goes on
/// being read (and dropped) so the daemon never blocks on it. Panics, after killing the
/// child, if no such line comes: a test setup failure.
pub fn spawn_listening(cmd: &mut Command) -> (std::process::Child, std::net::SocketAddr) {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let err = child.stderr.take().expect("stderr is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines() {
            let Ok(l) = l else { break };
            let _ = tx.send(l);
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let Ok(l) = rx.recv_timeout(left) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} did not say where it listens");
        };
        let addr = l
            .split("listening on ")
            .nth(1)
            .and_then(|a| a.split_whitespace().next())
            .and_then(|a| a.parse().ok());
        if let Some(addr) = addr {
            return (child, addr);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_rss_is_measured() {
        assert!(rss_kib(std::process::id()) > 0);
        assert_eq!(rss_kib(u32::MAX), 0);
        assert!(proc_status_kib(std::process::id(), "VmHWM").is_some());
        let sampler = RssSampler::start(std::process::id(), std::time::Duration::from_millis(5));
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(sampler.finish() > 0);
    }

    #[test]
    fn a_present_peer_is_found_and_a_missing_one_is_reported() {
        assert!(peer("sh", "dash").is_some());
        if std::env::var_os("SHOAL_REQUIRE_PEERS").is_none() {
            assert_eq!(peer("no-such-peer-tool", "nothing"), None);
        }
    }

    #[test]
    fn the_workspace_root_has_the_workspace_manifest() {
        let root = workspace_root();
        assert!(root.join("crates").is_dir(), "{}", root.display());
        assert!(newest_source(&root).is_some());
    }

    #[test]
    fn a_sample_is_read_by_its_series() {
        let page = "# TYPE x counter\nx{a=\"1\"} 3\nx{a=\"2\"} 4.5\n";
        assert_eq!(metric_value(page, "x{a=\"2\"}"), Some(4.5));
        assert_eq!(metric_value(page, "x"), None);
    }

    #[test]
    fn promtool_accepts_a_clean_page_and_reports_a_bad_one() {
        let Some(clean) =
            promtool_check("# HELP x_total A count.\n# TYPE x_total counter\nx_total 1\n")
        else {
            return;
        };
        assert_eq!(clean, Vec::<String>::new());
        let bad = promtool_check("# TYPE x counter\nx{ 1\n").expect("promtool");
        assert!(!bad.is_empty());
    }

    #[test]
    fn fd_limit_is_raised() {
        assert!(raise_fd_limit(256) >= 256);
    }
}
