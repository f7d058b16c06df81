//! shoald as a drop-in memcached: Debian's `/etc/memcached.conf` command line, `-u`
//! privilege dropping, every memcached 1.6 flag and `-o` key, and memcached's wording and
//! exit statuses for what it refuses.

mod common;

use common::binproto as bp;
use common::{run_to_exit, shoald_bin, Server};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Debian bookworm's stock `/etc/memcached.conf` (memcached 1.6.18), verbatim.
const DEBIAN_CONF: &str = include_str!("data/debian-memcached.conf");

/// The command line Debian's `systemd-memcached-wrapper` builds from a memcached.conf:
/// comments stripped, `-d`/`-h` lines and non-option directives (`logfile`) skipped,
/// `-u root` added when no `-u` is given, and the whole split on whitespace by the shell.
fn wrapper_args(conf: &str) -> Vec<String> {
    let mut lines = Vec::new();
    for line in conf.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() || line.starts_with("-d") || line.starts_with("-h") {
            continue;
        }
        if !line.starts_with('-') {
            continue;
        }
        lines.push(line.to_string());
    }
    if !lines.iter().any(|l| l.starts_with("-u")) {
        lines.push("-u root".into());
    }
    lines
        .iter()
        .flat_map(|l| l.split_whitespace())
        .map(str::to_string)
        .collect()
}

/// Replaces the value after `flag` in `args`.
fn replace_value(args: &mut [String], flag: &str, value: &str) {
    let i = args
        .iter()
        .position(|a| a == flag)
        .unwrap_or_else(|| panic!("{flag} in {args:?}"));
    args[i + 1] = value.to_string();
}

fn is_root() -> bool {
    // SAFETY: geteuid takes no arguments.
    unsafe { libc::geteuid() == 0 }
}

/// uid and gid of `name`, if the user exists.
fn user_ids(name: &str) -> Option<(u32, u32)> {
    let cname = std::ffi::CString::new(name).ok()?;
    // SAFETY: getpwnam returns a pointer into static storage or null; the fields are read
    // at once, and tests in this file do not call it concurrently with anything that
    // would overwrite it in between.
    let pw = unsafe { libc::getpwnam(cname.as_ptr()) };
    if pw.is_null() {
        return None;
    }
    // SAFETY: non-null result of getpwnam.
    let pw = unsafe { &*pw };
    Some((pw.pw_uid, pw.pw_gid))
}

/// The unprivileged user for `-u`: Debian's `memcache` when installed, else `nobody`.
fn service_user() -> (&'static str, u32, u32) {
    for name in ["memcache", "nobody"] {
        if let Some((uid, gid)) = user_ids(name) {
            return (name, uid, gid);
        }
    }
    panic!("neither memcache nor nobody exists");
}

/// The numbers on a `/proc/<pid>/status` line such as `Uid:` (real, effective, saved, fs).
fn proc_ids(pid: i32, field: &str) -> Vec<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .unwrap_or_else(|| panic!("{field} in status"));
    line.split_whitespace()
        .map(|n| n.parse().expect("id"))
        .collect()
}

/// A fresh directory for one test's files, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("shoal-dropin-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn debian_memcached_conf_serves_and_drops_privileges() {
    let dir = TempDir::new("debian");
    let pidfile = dir.path("memcached.pid");
    let (user, uid, gid) = service_user();
    let mut args = wrapper_args(DEBIAN_CONF);
    assert_eq!(
        args.join(" "),
        "-m 64 -p 11211 -u memcache -l 127.0.0.1 -P /var/run/memcached/memcached.pid",
        "the wrapper's command line"
    );
    // Only the port (ephemeral), pid file (a temp path) and, without a memcache user,
    // the user differ from what Debian runs.
    replace_value(&mut args, "-p", "-1");
    replace_value(&mut args, "-P", pidfile.to_str().expect("utf-8 path"));
    replace_value(&mut args, "-u", user);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let s = Server::with_args(&args);
    let mut c = s.conn();
    c.set("debian", b"conf");
    assert_eq!(c.get("debian").as_deref(), Some(&b"conf"[..]));
    let st = c.stats("settings");
    assert_eq!(st["maxbytes"], (64u64 << 20).to_string());
    assert_eq!(st["inter"], "127.0.0.1");

    let written = std::fs::read_to_string(&pidfile).expect("pid file written");
    assert_eq!(written.trim(), s.pid().to_string());
    let (want_uid, want_gid) = if is_root() {
        (uid, gid)
    } else {
        // Not root: -u is ignored, as memcached ignores it.
        // SAFETY: getters without arguments.
        unsafe { (libc::getuid(), libc::getgid()) }
    };
    assert_eq!(
        proc_ids(s.pid(), "Uid:"),
        [want_uid; 4],
        "real/eff/saved/fs uid"
    );
    assert_eq!(
        proc_ids(s.pid(), "Gid:"),
        [want_gid; 4],
        "real/eff/saved/fs gid"
    );
    if is_root() {
        assert!(
            proc_ids(s.pid(), "Groups:").is_empty(),
            "no supplementary groups"
        );
    }
    // Still serving after the switch, on new connections too.
    let mut c2 = s.conn();
    assert_eq!(c2.get("debian").as_deref(), Some(&b"conf"[..]));
}

/// What one command line must do once started.
#[derive(Clone, Copy)]
enum Check {
    /// Text set and get.
    Text,
    /// Binary set and get (`-B binary`).
    Binary,
}

/// A command line, what to check once it serves, and `stats settings` lines it must show.
type Case<'a> = (Vec<&'a str>, Check, Vec<(&'a str, &'a str)>);

#[test]
fn every_memcached_command_line_starts_and_serves() {
    let dir = TempDir::new("table");
    let pid = dir.path("p.pid");
    let pid = pid.to_str().expect("utf-8");
    let mem_file = dir.path("memory_file");
    let mem_file_s = mem_file.to_str().expect("utf-8");
    // The case run as the service user maps its own memory file (-e opens it after the
    // identity switch), in a directory that user may write.
    let user_mem_file = dir.path("memory_file_user");
    let user_mem_file_s = user_mem_file.to_str().expect("utf-8");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(""), std::fs::Permissions::from_mode(0o777))
            .expect("chmod");
    }
    let ext = format!("ext_path={}:64m,ext_wbuf_size=8,ext_threads=2,ext_item_size=512,ext_item_age=10,ext_low_ttl=5,ext_recache_rate=100,ext_compact_under=2,ext_drop_under=1,ext_max_sleep=100,ext_max_frag=0.5,ext_drop_unread,ext_page_size=8,ext_io_depth=2,slab_automove_freeratio=0.02", dir.path("extstore").display());
    let (user, ..) = service_user();
    // A UDP port free now (the socket is closed again before shoald binds it).
    let udp_port = std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("a free UDP port")
        .port()
        .to_string();
    use Check::*;
    let cases: Vec<Case> = vec![
        (vec!["-m", "64", "-c", "1024", "-t", "4"], Text, vec![("num_threads", "4")]),
        (vec!["-U", "0"], Text, vec![("udpport", "0")]),
        (vec!["-U", &udp_port], Text, vec![("udpport", &udp_port)]),
        (vec!["-A"], Text, vec![("shutdown_command", "yes")]),
        (vec!["-r"], Text, vec![]),
        (vec!["-u", user], Text, vec![]),
        (vec!["-u", "root"], Text, vec![]),
        (vec!["-M", "-m", "16"], Text, vec![("evictions", "off")]),
        (vec!["-c", "4096"], Text, vec![("maxconns", "4096")]),
        (vec!["-k", "-m", "8"], Text, vec![]),
        (vec!["-vv"], Text, vec![]),
        (vec!["-vvv"], Text, vec![]),
        (vec!["-P", pid], Text, vec![]),
        (vec!["-f", "1.05", "-n", "32"], Text, vec![("growth_factor", "1.05"), ("chunk_size", "32")]),
        (vec!["-L"], Text, vec![]),
        (vec!["-D", ":"], Text, vec![("detail_enabled", "yes"), ("stat_key_prefix", ":")]),
        (vec!["-R", "100"], Text, vec![("reqs_per_event", "100")]),
        (vec!["-C"], Text, vec![("cas_enabled", "no")]),
        (vec!["-b", "4096"], Text, vec![("tcp_backlog", "4096")]),
        (vec!["-B", "ascii"], Text, vec![("binding_protocol", "ascii")]),
        (vec!["-B", "auto"], Text, vec![("binding_protocol", "auto-negotiate")]),
        (vec!["-B", "binary"], Binary, vec![]),
        (vec!["-I", "2m"], Text, vec![("item_size_max", "2097152")]),
        (vec!["-I", "512k"], Text, vec![("item_size_max", "524288")]),
        (vec!["-F"], Text, vec![("flush_enabled", "no")]),
        (vec!["-X"], Text, vec![("dump_enabled", "no")]),
        (vec!["-W"], Text, vec![]),
        (vec!["-e", mem_file_s], Text, vec![("memory_file", mem_file_s)]),
        (vec!["-N", "1"], Text, vec![("num_napi_ids", "1")]),
        (vec!["-l", "127.0.0.1:0"], Text, vec![]),
        (vec!["-l", "localhost", "-l", "127.0.0.1"], Text, vec![]),
        (vec!["-o", "modern"], Text, vec![]),
        (vec!["-o", "no_modern"], Text, vec![("hash_algorithm", "jenkins"), ("lru_crawler", "no"), ("slab_chunk_max", "1048576")]),
        (vec!["-o", "maxconns_fast,hashpower=16"], Text, vec![("hashpower_init", "16"), ("maxconns_fast", "yes")]),
        (vec!["-o", "slab_reassign,slab_automove=1,lru_crawler,lru_maintainer"], Text, vec![("slab_automove", "1"), ("lru_maintainer_thread", "yes")]),
        (vec!["-o", "hot_lru_pct=10,warm_lru_pct=30,hot_max_factor=0.5,warm_max_factor=3,temporary_ttl=30"], Text, vec![("hot_lru_pct", "10"), ("warm_max_factor", "3.00"), ("temp_lru", "yes"), ("temporary_ttl", "30")]),
        (vec!["-o", "idle_timeout=600,tail_repair_time=30"], Text, vec![("idle_timeout", "600"), ("tail_repair_time", "30")]),
        (vec!["-o", "hash_algorithm=xxh3"], Text, vec![("hash_algorithm", "xxh3")]),
        (vec!["-o", "lru_crawler_sleep=50,lru_crawler_tocrawl=10"], Text, vec![("lru_crawler_sleep", "50"), ("lru_crawler_tocrawl", "10")]),
        (vec!["-o", "watcher_logbuf_size=128,worker_logbuf_size=32,track_sizes"], Text, vec![("watcher_logbuf_size", "131072"), ("track_sizes", "yes")]),
        (vec!["-o", "read_buf_mem_limit=64"], Text, vec![("read_buf_mem_limit", "67108864")]),
        (vec!["-o", "slab_chunk_max=256,slab_sizes=96-192-384"], Text, vec![("slab_chunk_max", "262144")]),
        (vec!["-o", &ext], Text, vec![("ext_wbuf_size", "8388608"), ("ext_max_frag", "0.50"), ("slab_automove_freeratio", "0.020")]),
        (vec!["-o", "ssl_ciphers=HIGH,ssl_min_version=3,ssl_session_cache,ssl_kernel_tls,ssl_wbuf_size=32,ssl_keyformat=1,ssl_verify_mode=1"], Text, vec![("ssl_enabled", "no"), ("ssl_ciphers", "HIGH"), ("ssl_min_version", "tlsv1.3"), ("ssl_wbuf_size", "32768")]),
        (vec!["-o", "no_hashexpand,no_lru_crawler,no_lru_maintainer,no_slab_reassign,no_slab_automove,no_maxconns_fast,no_chunked_items"], Text, vec![("maxconns_fast", "no"), ("slab_reassign", "no")]),
        (vec!["-o", "drop_privileges,no_drop_privileges,sock_cookie_id=5,resp_obj_mem_limit=5,inline_ascii_resp,no_inline_ascii_resp"], Text, vec![]),
        (
            vec![
                "--port=-1", "--listen=127.0.0.1", "--memory-limit=32", "--conn-limit=100",
                "--threads=2", "--protocol=auto", "--enable-largepages", "--enable-coredumps",
                "--disable-dumping", "--disable-watch", "--slab-growth-factor=1.25",
                "--slab-min-size=48", "--extended=modern", "--max-reqs-per-event=20",
                "--listen-backlog=1024", "--napi_ids=1", "--disable-cas", "--enable-shutdown",
                "--max-item-size=1m", "--disable-evictions", "--lock-memory",
                "--memory-file", user_mem_file_s, "--user", user, "--pidfile", pid, "--verbose",
            ],
            Text,
            vec![("maxconns", "100"), ("cas_enabled", "no")],
        ),
    ];
    assert!(cases.len() >= 40, "{} cases", cases.len());
    for (args, check, expect) in cases {
        let s = Server::with_args(&args);
        let mut c = s.conn();
        match check {
            Text => {
                c.set("k", b"served");
                assert_eq!(c.get("k").as_deref(), Some(&b"served"[..]), "{args:?}");
                let st = c.stats("settings");
                for (name, value) in expect {
                    assert_eq!(
                        st.get(name).map(String::as_str),
                        Some(value),
                        "{name} with {args:?}"
                    );
                }
            }
            Binary => {
                bp::set(&mut c, b"k", b"served", 7);
                let got = bp::get(&mut c, b"k").map(|(flags, v, _)| (flags, v));
                assert_eq!(got, Some((7, b"served".to_vec())), "{args:?}");
            }
        }
    }
    // -e is warm restart: the memory file is created and mapped.
    assert!(mem_file.exists(), "-e maps its memory file");
    assert!(
        user_mem_file.exists(),
        "-e as the service user maps its memory file"
    );
}

#[test]
fn stats_settings_has_every_memcached_key_in_order() {
    // memcached 1.6.18's `stats settings` (without extstore), in its order.
    const KEYS: &[&str] = &[
        "maxbytes",
        "maxconns",
        "tcpport",
        "udpport",
        "inter",
        "verbosity",
        "oldest",
        "evictions",
        "domain_socket",
        "umask",
        "shutdown_command",
        "growth_factor",
        "chunk_size",
        "num_threads",
        "num_threads_per_udp",
        "stat_key_prefix",
        "detail_enabled",
        "reqs_per_event",
        "cas_enabled",
        "tcp_backlog",
        "binding_protocol",
        "auth_enabled_sasl",
        "auth_enabled_ascii",
        "item_size_max",
        "maxconns_fast",
        "hashpower_init",
        "slab_reassign",
        "slab_automove",
        "slab_automove_ratio",
        "slab_automove_window",
        "slab_chunk_max",
        "lru_crawler",
        "lru_crawler_sleep",
        "lru_crawler_tocrawl",
        "tail_repair_time",
        "flush_enabled",
        "dump_enabled",
        "hash_algorithm",
        "lru_maintainer_thread",
        "lru_segmented",
        "hot_lru_pct",
        "warm_lru_pct",
        "hot_max_factor",
        "warm_max_factor",
        "temp_lru",
        "temporary_ttl",
        "idle_timeout",
        "watcher_logbuf_size",
        "worker_logbuf_size",
        "read_buf_mem_limit",
        "track_sizes",
        "inline_ascii_response",
        "ssl_enabled",
        "ssl_chain_cert",
        "ssl_key",
        "ssl_verify_mode",
        "ssl_keyformat",
        "ssl_ciphers",
        "ssl_ca_cert",
        "ssl_wbuf_size",
        "ssl_session_cache",
        "ssl_kernel_tls",
        "ssl_min_version",
        "num_napi_ids",
        "memory_file",
    ];
    let s = Server::start();
    let mut c = s.conn();
    let raw = common::show(&c.request_until(b"stats settings\r\n", b"END\r\n"));
    let names: Vec<&str> = raw
        .lines()
        .filter_map(|l| l.strip_prefix("STAT "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    assert_eq!(
        &names[..KEYS.len()],
        KEYS,
        "memcached's keys first, in order"
    );
    let st = c.stats("settings");
    // memcached's defaults where shoald has no mechanism of its own.
    for (name, value) in [
        ("growth_factor", "1.25"),
        ("chunk_size", "48"),
        ("binding_protocol", "auto-negotiate"),
        ("auth_enabled_ascii", "no"),
        ("slab_automove_ratio", "0.80"),
        ("slab_chunk_max", "524288"),
        ("hash_algorithm", "murmur3"),
        ("hot_max_factor", "0.20"),
        ("temporary_ttl", "61"),
        ("watcher_logbuf_size", "262144"),
        ("ssl_chain_cert", "(null)"),
        ("ssl_ciphers", "NULL"),
        ("ssl_min_version", "tlsv1.2"),
        ("num_napi_ids", "(null)"),
        ("memory_file", "(null)"),
        ("stat_key_prefix", ":"),
        // shoald's own data-path settings, listed after memcached's.
        ("io_uring", "no"),
        ("zero_copy_min", "4096"),
        ("hugepages", "no"),
    ] {
        assert_eq!(st[name], value, "{name}");
    }
    assert!(
        !st.contains_key("ext_item_size"),
        "no extstore lines by default"
    );
}

/// Starts shoald with exactly `args`, returning its stderr lines up to and including the
/// "listening on" line (or all of them if it exits first), and the process.
fn startup_log(args: &[&str]) -> (Vec<String>, Child) {
    let mut child = Command::new(shoald_bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn shoald");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut lines = Vec::new();
    while let Ok(line) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        let done = line.contains("listening on ");
        lines.push(line);
        if done {
            break;
        }
    }
    (lines, child)
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn inert_options_are_logged_once_with_why() {
    let (lines, child) = startup_log(&[
        "-p",
        "-1",
        "-l",
        "127.0.0.1",
        "-v",
        "-t",
        "2",
        "-f",
        "1.5",
        "-n",
        "64",
        "-o",
        "slab_automove=2,hot_lru_pct=10,ext_max_sleep=2,idle_timeout=5",
        "-o",
        "lru_crawler_sleep=50",
    ]);
    stop(child);
    let inert: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("without effect"))
        .collect();
    assert_eq!(inert.len(), 1, "one line: {lines:#?}");
    let line = inert[0];
    for name in [
        "-f",
        "-n",
        "slab_automove",
        "hot_lru_pct",
        "lru_crawler_sleep",
        "ext_max_sleep",
    ] {
        assert!(line.contains(name), "{name} in {line}");
    }
    assert!(
        line.contains("segment store") && line.contains("extstore"),
        "{line}"
    );
    assert!(
        !line.contains("idle_timeout"),
        "idle_timeout has an effect: {line}"
    );

    // Nothing inert, no line.
    let (lines, child) = startup_log(&["-p", "-1", "-l", "127.0.0.1", "-v", "-t", "2"]);
    stop(child);
    assert!(
        lines.iter().any(|l| l.contains("listening on")),
        "{lines:#?}"
    );
    assert!(
        !lines.iter().any(|l| l.contains("without effect")),
        "{lines:#?}"
    );
}

#[test]
fn root_without_u_is_a_warning_not_a_refusal() {
    if !is_root() {
        return;
    }
    let (lines, child) = startup_log(&["-p", "-1", "-l", "127.0.0.1", "-t", "2", "-v"]);
    stop(child);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("running as root without -u")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("listening on")),
        "{lines:#?}"
    );
}

#[test]
fn unix_socket_is_handed_to_the_u_user() {
    use std::os::unix::fs::MetadataExt;
    if !is_root() {
        return;
    }
    let dir = TempDir::new("unix");
    let path = dir.path("shoald.sock");
    let (user, uid, gid) = service_user();
    let s = Server::with_args(&["-s", path.to_str().expect("utf-8"), "-a", "660", "-u", user]);
    let meta = std::fs::metadata(&path).expect("socket");
    assert_eq!(
        (meta.uid(), meta.gid()),
        (uid, gid),
        "owned as memcached leaves it"
    );
    assert_eq!(meta.mode() & 0o777, 0o660);
    let mut c = s.conn();
    c.set("k", b"unix");
    assert_eq!(c.get("k").as_deref(), Some(&b"unix"[..]));
    assert_eq!(proc_ids(s.pid(), "Uid:"), [uid; 4]);
}

/// Polls until `path` holds a pid, for up to 5 s.
fn read_pid(path: &Path) -> Option<i32> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(pid) = std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return Some(pid);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn daemon_mode_with_pidfile_and_user() {
    let dir = TempDir::new("daemon");
    let pidfile = dir.path("shoald.pid");
    // -d detaches before a log line could report the port, so pick a free one.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let (user, uid, _) = service_user();
    let port_s = port.to_string();
    let args = [
        "-d",
        "-p",
        &port_s,
        "-l",
        "127.0.0.1",
        "-t",
        "2",
        "-m",
        "16",
        "-u",
        user,
        "-P",
        pidfile.to_str().expect("utf-8"),
    ];
    let (code, err) = run_to_exit(&args);
    assert_eq!(code, Some(0), "the foreground process exits 0: {err}");
    let pid = read_pid(&pidfile).expect("the daemon writes its pid");
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let result = std::panic::catch_unwind(|| {
        let mut c = common::Conn::tcp(addr);
        c.set("d", b"daemon");
        assert_eq!(c.get("d").as_deref(), Some(&b"daemon"[..]));
        if is_root() {
            assert_eq!(proc_ids(pid, "Uid:"), [uid; 4]);
        }
    });
    // SAFETY: kill(2) on the daemon this test started (its pid from its own pid file).
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(5);
    while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

#[test]
fn refusals_use_memcacheds_wording_and_status() {
    let base = ["-p", "-1", "-l", "127.0.0.1"];
    let mut cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (vec!["-o", "foo"], 1, "Illegal suboption \"foo\""),
        (
            vec!["-o", "idle_timeout=5,bogus=1"],
            1,
            "Illegal suboption \"bogus=1\"",
        ),
        (
            vec!["-o", "lru_segmented"],
            1,
            "Illegal suboption \"lru_segmented\"",
        ),
        (
            vec!["-o", "hashpower=5"],
            1,
            "Initial hashtable multiplier of 5 is too low",
        ),
        (
            vec!["-o", "slab_automove=5"],
            1,
            "slab_automove must be between 0 and 2",
        ),
        (
            vec!["-o", "hash_algorithm=md5"],
            1,
            "Unknown hash_algorithm option (jenkins, murmur3, xxh3)",
        ),
        (
            vec!["-o", "hot_lru_pct=70"],
            64,
            "hot_lru_pct + warm_lru_pct cannot be more than 80% combined",
        ),
        (vec!["-f", "0.5"], 1, "Factor must be greater than 1"),
        (vec!["-n", "0"], 1, "Chunk size must be greater than 0"),
        (
            vec!["-t", "0"],
            1,
            "Number of threads must be greater than 0",
        ),
        (vec!["-D", ""], 1, "No delimiter specified"),
        (
            vec!["-B", "foo"],
            64,
            "Invalid value for binding protocol: foo",
        ),
        (vec!["--bogus"], 1, "--bogus"),
        (vec!["-Q"], 1, "-Q"),
    ];
    if is_root() {
        cases.push((
            vec!["-u", "no-such-user-shoald"],
            67,
            "can't find the user no-such-user-shoald to switch to",
        ));
    }
    for (extra, code, msg) in cases {
        let args: Vec<&str> = base.iter().copied().chain(extra.iter().copied()).collect();
        let (got, err) = run_to_exit(&args);
        assert_eq!(got, Some(code), "{args:?}: {err}");
        assert!(err.contains(msg), "{args:?}: {err:?} lacks {msg:?}");
    }
}

#[test]
fn help_and_license() {
    let out = Command::new(shoald_bin())
        .arg("-h")
        .output()
        .expect("run shoald -h");
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("text, meta and binary protocols"), "{help}");
    for flag in [
        "--user",
        "--protocol",
        "--lock-memory",
        "--memory-file",
        "--napi-ids",
    ] {
        assert!(help.contains(flag), "{flag} in {help}");
    }
    let out = Command::new(shoald_bin())
        .arg("-i")
        .output()
        .expect("run shoald -i");
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Apache-2.0"));
}

#[test]
fn files_loaded_after_the_switch_must_be_readable_by_the_user() {
    use std::os::unix::fs::PermissionsExt;
    if !is_root() {
        return;
    }
    let dir = TempDir::new("perm");
    let auth = dir.path("auth");
    std::fs::write(&auth, "alice:secret\n").expect("auth file");
    let (user, ..) = service_user();
    let auth_s = auth.to_str().expect("utf-8");
    // Root-only: refused before serving, naming the file, the user and the fix.
    std::fs::set_permissions(&auth, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let (code, err) = run_to_exit(&["-p", "-1", "-l", "127.0.0.1", "-Y", auth_s, "-u", user]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!("cannot read {auth_s} as user {user}")),
        "{err}"
    );
    // Readable by the user: serves, as that user.
    std::fs::set_permissions(&auth, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let s = Server::with_args(&["-Y", auth_s, "-u", user]);
    let mut c = s.conn();
    c.rt(b"set a 0 0 12\r\nalice secret\r\n", b"STORED\r\n");
    c.set("k", b"v");
}
