//! Warm restart against the real binary (memcached's `-e` and SIGUSR1): a 200k-item cache
//! comes back whole, expiry counts the time spent down, and every way the metadata can be
//! unusable (missing, corrupt, another format version, incompatible settings, a crash
//! instead of a graceful stop) gives a clean start with memcached's log line, never a
//! crash or a torn item; a metadata file shoald did not write stops the start, as
//! memcached's does.

mod common;

use common::{Conn, Server};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(20);

/// A memory file in a fresh directory (tmpfs when the machine has /dev/shm, as operators
/// run it).
fn memory_file() -> (tempfile::TempDir, PathBuf) {
    let base = Path::new("/dev/shm");
    let dir = if base.is_dir() {
        tempfile::tempdir_in(base)
    } else {
        tempfile::tempdir()
    }
    .expect("tempdir");
    let path = dir.path().join("shoal.mem");
    (dir, path)
}

fn start(path: &Path, extra: &[&str]) -> Server {
    let mut args = vec!["-e", path.to_str().expect("utf-8 path")];
    args.extend_from_slice(extra);
    Server::with_args(&args)
}

/// SIGUSR1, then the exit status must be success and the metadata must exist.
fn graceful_stop(mut s: Server, path: &Path) {
    s.signal(libc::SIGUSR1);
    let st = s.wait_exit(WAIT).expect("shoald exits after SIGUSR1");
    assert!(st.success(), "exit status {st:?}");
    assert!(
        shoal_store::metadata_path(path).exists(),
        "metadata written"
    );
}

/// `gets` of every key, in batches: key -> (flags, cas, value).
fn snapshot(c: &mut Conn, keys: &[String]) -> HashMap<String, (u32, u64, Vec<u8>)> {
    let mut out = HashMap::new();
    for batch in keys.chunks(100) {
        let req = format!("gets {}\r\n", batch.join(" "));
        c.send(req.as_bytes());
        loop {
            let line = c.read_line();
            if line == b"END\r\n" {
                break;
            }
            let text = String::from_utf8(line).expect("header");
            let parts: Vec<&str> = text.trim_end().split(' ').collect();
            assert_eq!(parts[0], "VALUE", "{text}");
            let len: usize = parts[3].parse().expect("len");
            let data = c.read_n(len + 2);
            out.insert(
                parts[1].to_string(),
                (
                    parts[2].parse().expect("flags"),
                    parts[4].parse().expect("cas"),
                    data[..len].to_vec(),
                ),
            );
        }
    }
    out
}

/// Stores `n` items with varied sizes and flags, pipelined; some have a long TTL.
fn load(c: &mut Conn, n: usize) -> Vec<String> {
    let mut keys = Vec::with_capacity(n);
    let mut batch = Vec::new();
    for i in 0..n {
        let key = format!("item:{i}");
        let value = format!("{i}:{}", "v".repeat(i % 200));
        let ttl = if i % 7 == 0 { 3600 } else { 0 };
        batch.extend_from_slice(
            format!(
                "set {key} {} {ttl} {}\r\n{value}\r\n",
                i % 65_536,
                value.len()
            )
            .as_bytes(),
        );
        keys.push(key);
        if batch.len() > 64 << 10 || i + 1 == n {
            batch.extend_from_slice(b"mn\r\n");
            c.send(&batch);
            c.read_until(b"MN\r\n");
            batch.clear();
        }
    }
    keys
}

#[test]
fn a_200k_item_cache_comes_back_whole() {
    let (_dir, path) = memory_file();
    let s = start(&path, &["-m", "256"]);
    let mut c = s.conn();
    let keys = load(&mut c, 200_000);
    // Overwritten and deleted keys come back in their latest state only.
    c.rt(b"set item:5 3 0 7\r\nchanged\r\n", b"STORED\r\n");
    c.rt(b"delete item:6\r\n", b"DELETED\r\n");
    let before = snapshot(&mut c, &keys);
    assert_eq!(before.len(), 199_999);
    assert_eq!(before["item:5"].2, b"changed");
    drop(c);
    graceful_stop(s, &path);

    let s = start(&path, &["-m", "256"]);
    let line = s.wait_log("[restart]", WAIT).expect("restart log");
    assert!(line.contains("restored 199999 items"), "{line}");
    assert!(
        !shoal_store::metadata_path(&path).exists(),
        "metadata is consumed at start"
    );
    let mut c = s.conn();
    let after = snapshot(&mut c, &keys);
    assert_eq!(after.len(), before.len());
    for (k, v) in &before {
        assert_eq!(after.get(k), Some(v), "{k}");
    }
    assert_eq!(c.stat("curr_items"), 199_999);
    // A CAS taken before the restart still works after it, and new items get new uniques.
    let (_, cas, _) = before["item:10"];
    c.rt(
        format!("cas item:10 0 0 1 {cas}\r\nx\r\n").as_bytes(),
        b"STORED\r\n",
    );
    let fresh = common::gets_cas(&mut c, "item:10");
    assert!(before.values().all(|v| v.1 != fresh));
}

#[test]
fn expiry_counts_the_time_spent_down() {
    let (_dir, path) = memory_file();
    let s = start(&path, &[]);
    let mut c = s.conn();
    c.rt(b"set short 0 2 1\r\na\r\n", b"STORED\r\n");
    c.rt(b"set long 0 100 1\r\nb\r\n", b"STORED\r\n");
    drop(c);
    graceful_stop(s, &path);
    // Deliberately lets time pass while the server is down: `short`'s 2 s expire.
    std::thread::sleep(Duration::from_millis(2500));
    let s = start(&path, &[]);
    let line = s.wait_log("[restart]", WAIT).expect("restart log");
    assert!(line.contains("restored 1 items"), "{line}");
    assert!(line.contains("1 expired while down"), "{line}");
    let mut c = s.conn();
    c.rt(b"get short\r\n", b"END\r\n");
    let reply = String::from_utf8(c.request_until(b"mg long t v\r\n", b"b\r\n")).expect("utf-8");
    let ttl: u32 = reply
        .split_whitespace()
        .find_map(|t| t.strip_prefix('t').and_then(|n| n.parse().ok()))
        .expect("ttl flag");
    assert!((95..=98).contains(&ttl), "{reply}");
}

#[test]
fn incompatible_settings_start_clean_with_memcacheds_message() {
    let (_dir, path) = memory_file();
    for (saved_with, restarted_with, expect) in [
        (
            vec!["-m", "64"],
            vec!["-m", "32"],
            "restart incompatible due to setting for [memory_limit] [old value: 67108864]",
        ),
        (
            vec![],
            vec!["-C"],
            "restart incompatible due to setting for [use_cas] [old value: true]",
        ),
        (
            vec![],
            vec!["-I", "2m"],
            "restart incompatible due to setting for [max_item_size] [old value: 1048576]",
        ),
    ] {
        let s = start(&path, &saved_with);
        s.conn().rt(b"set k 0 0 1\r\nv\r\n", b"STORED\r\n");
        graceful_stop(s, &path);
        let s = start(&path, &restarted_with);
        let line = s.wait_log("[restart]", WAIT).expect("restart log");
        assert!(line.contains(expect), "{line}");
        let mut c = s.conn();
        c.rt(b"get k\r\n", b"END\r\n");
        c.rt(b"set k 0 0 1\r\nw\r\n", b"STORED\r\n");
    }
}

/// A metadata file shoald did not write (empty, as memcached's t/restart.t makes one, or
/// without shoald's magic) stops the start, as memcached's does, and leaves both files as
/// they were: `-e` may name another program's file. Removing it lets the next start go on.
#[test]
fn a_foreign_metadata_file_refuses_the_start() {
    let (_dir, path) = memory_file();
    let meta = shoal_store::metadata_path(&path);
    let s = start(&path, &[]);
    s.conn().rt(b"set k 0 0 1\r\nv\r\n", b"STORED\r\n");
    graceful_stop(s, &path);
    let memory = std::fs::read(&path).expect("memory file");
    let saved = std::fs::read(&meta).expect("metadata");
    let mut garbage = saved.clone();
    garbage[..8].copy_from_slice(b"garbage!");
    let p = path.to_str().expect("utf-8 path");
    for contents in [Vec::new(), garbage] {
        std::fs::write(&meta, &contents).expect("write metadata");
        let (code, err) = common::run_to_exit(&["-e", p, "-p", "-1", "-l", "127.0.0.1"]);
        assert!(code.is_some() && code != Some(0), "started: {err}");
        assert!(err.contains("not a shoal restart metadata file"), "{err}");
        assert_eq!(std::fs::read(&meta).expect("metadata"), contents);
        assert!(std::fs::read(&path).expect("memory file") == memory);
    }
    std::fs::write(&meta, &saved).expect("write metadata");
    let s = start(&path, &[]);
    assert_eq!(s.conn().get("k").as_deref(), Some(&b"v"[..]));
}

/// Damages a metadata file's bytes.
type Spoil = fn(&mut Vec<u8>);

#[test]
fn missing_corrupt_or_future_metadata_starts_clean() {
    let (_dir, path) = memory_file();
    let meta = shoal_store::metadata_path(&path);
    let damage: [(&str, Spoil); 3] = [
        ("failed to validate metadata (checksum mismatch)", |b| {
            let i = b.len() - 5;
            b[i] ^= 0xff;
        }),
        ("failed to validate metadata (truncated)", |b| {
            b.truncate(b.len() / 2)
        }),
        // An upgrade across a format version bump: refused cleanly, with a log line.
        ("metadata format version 99, this build reads 3", |b| {
            b[8..12].copy_from_slice(&99u32.to_le_bytes())
        }),
    ];
    for (expect, spoil) in damage {
        let s = start(&path, &[]);
        s.conn().rt(b"set k 0 0 1\r\nv\r\n", b"STORED\r\n");
        graceful_stop(s, &path);
        let mut bytes = std::fs::read(&meta).expect("metadata");
        spoil(&mut bytes);
        std::fs::write(&meta, &bytes).expect("write metadata");
        let s = start(&path, &[]);
        let line = s.wait_log("[restart]", WAIT).expect("restart log");
        assert!(line.contains(expect), "{expect}: {line}");
        let mut c = s.conn();
        c.rt(b"get k\r\n", b"END\r\n");
        c.assert_alive();
    }
    // No metadata at all (e.g. removed by hand).
    let s = start(&path, &[]);
    // Serving first: "listening on" is logged before the SIGUSR1 handler is installed, so
    // a signal sent at once could still find the default action (terminate).
    s.conn().rt(b"mn\r\n", b"MN\r\n");
    graceful_stop(s, &path);
    std::fs::remove_file(&meta).expect("remove");
    let s = start(&path, &[]);
    let line = s.wait_log("[restart]", WAIT).expect("restart log");
    assert!(line.contains("no metadata save file"), "{line}");
}

#[test]
fn kill_9_mid_load_never_serves_a_torn_or_stale_item() {
    let (_dir, path) = memory_file();
    // First a graceful cycle, so the file holds a valid cache and metadata was consumed.
    let s = start(&path, &[]);
    let mut c = s.conn();
    load(&mut c, 5_000);
    drop(c);
    graceful_stop(s, &path);
    let mut s = start(&path, &[]);
    let line = s.wait_log("[restart]", WAIT).expect("restart log");
    assert!(line.contains("restored 5000 items"), "{line}");
    // Then writes in flight and kill -9.
    let addr = s.addr.expect("tcp");
    let writer = std::thread::spawn(move || {
        let mut c = Conn::tcp(addr);
        let mut batch = Vec::new();
        for i in 0..1_000_000u32 {
            batch.extend_from_slice(
                format!("set item:{} 0 0 5\r\nnewer\r\nmn\r\n", i % 5_000).as_bytes(),
            );
            if batch.len() > 32 << 10 {
                c.send_lossy(&batch);
                batch.clear();
                // Keeps writing until the server is gone (drain_for says whether the
                // connection closed).
                let (_, closed) = c.drain_for(Duration::from_millis(1));
                if closed {
                    return;
                }
            }
        }
    });
    // Kill it once writes are landing: 10,000 sets served since the restart.
    let mut probe = Conn::tcp(addr);
    let deadline = Instant::now() + WAIT;
    while probe.stat("cmd_set") < 10_000 {
        assert!(Instant::now() < deadline, "the writer's sets never arrived");
        std::thread::sleep(Duration::from_millis(10));
    }
    s.signal(libc::SIGKILL);
    s.wait_exit(WAIT).expect("killed");
    let _ = writer.join();
    assert!(!shoal_store::metadata_path(&path).exists());
    let s = start(&path, &[]);
    let line = s.wait_log("[restart]", WAIT).expect("restart log");
    assert!(line.contains("no metadata save file"), "{line}");
    let mut c = s.conn();
    assert_eq!(c.stat("curr_items"), 0);
    c.rt(b"get item:1\r\n", b"END\r\n");
}

#[test]
fn shutdown_graceful_saves_like_sigusr1() {
    let (_dir, path) = memory_file();
    let mut s = start(&path, &["-A"]);
    let mut c = s.conn();
    c.rt(b"set k 7 0 5\r\nhello\r\n", b"STORED\r\n");
    c.send(b"shutdown graceful\r\n");
    let st = s.wait_exit(WAIT).expect("exits");
    assert!(st.success(), "{st:?}");
    assert!(shoal_store::metadata_path(&path).exists());
    let s = start(&path, &[]);
    s.wait_log("[restart] restored 1 items", WAIT)
        .expect("restored");
    s.conn()
        .rt(b"get k\r\n", b"VALUE k 7 5\r\nhello\r\nEND\r\n");
}

#[test]
fn sigusr1_during_startup_is_a_graceful_stop_not_a_kill() {
    for _ in 0..5 {
        let (_dir, path) = memory_file();
        // Signalled the moment it logs `listening on`, before it serves anything.
        let s = start(&path, &[]);
        graceful_stop(s, &path);
    }
}

/// A tmpfs of `size` mounted on a fresh directory, unmounted on drop; `None` (the test
/// then says it skipped) where mounting is not permitted.
struct SmallTmpfs(tempfile::TempDir);

impl SmallTmpfs {
    fn mount(size: &str) -> Option<SmallTmpfs> {
        let dir = tempfile::tempdir().expect("tempdir");
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(SmallTmpfs(dir))
    }
}

impl Drop for SmallTmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.0.path())
            .status();
    }
}

/// The memory file's filesystem fills (issue 28): an 8 MiB tmpfs under `-m 64`. Writing
/// to a sparse mapped file past a full filesystem is a SIGBUS; shoald reserves each
/// segment's blocks first, so it keeps serving, evicting within what the file could
/// hold. SIGUSR1 on the full filesystem cannot write the metadata: shoald says so and
/// exits non-zero, leaves no partial metadata, and the next start is clean.
#[test]
fn memory_file_on_a_full_filesystem_evicts_and_restarts_clean() {
    let Some(fs) = SmallTmpfs::mount("8m") else {
        eprintln!("SKIPPED: cannot mount a tmpfs here");
        return;
    };
    let path = fs.0.path().join("shoal.mem");
    let mut s = start(&path, &["-m", "64"]);
    let mut c = s.conn();
    let value = vec![b'v'; 1000];
    for i in 0..30_000 {
        c.set(&format!("k{i}"), &value);
    }
    assert_eq!(c.get("k29999").as_deref(), Some(&value[..]));
    assert!(
        c.stat("memory_file_full") > 0,
        "the filesystem never filled"
    );
    assert!(c.stat("evictions") > 0);
    let kept = c.stat("curr_items");
    assert!(kept > 1_000 && kept < 8_000, "{kept} items in 8 MiB");

    s.signal(libc::SIGUSR1);
    let st = s.wait_exit(WAIT).expect("shoald exits after SIGUSR1");
    assert!(!st.success(), "metadata cannot have been written: {st:?}");
    assert!(
        s.wait_log("not saved, the next start will be cold", WAIT)
            .is_some(),
        "the reason is logged"
    );
    let meta = shoal_store::metadata_path(&path);
    assert!(!meta.exists(), "no metadata");
    let mut tmp = meta.into_os_string();
    tmp.push(".tmp");
    assert!(!Path::new(&tmp).exists(), "no partial metadata");

    let s = start(&path, &["-m", "64"]);
    let mut c = s.conn();
    assert_eq!(c.get("k29999"), None, "a clean start");
    c.set("after", b"ok");
    assert_eq!(c.get("after").as_deref(), Some(&b"ok"[..]));
}

/// Twenty kill -9s at random points under load (issue 28), with a memory file: every
/// restart comes up, starts clean (a crash leaves no metadata to trust) and serves; every
/// fifth round stops gracefully instead, and the next start restores what was stored
/// then, before being killed in turn.
#[test]
fn twenty_kills_at_random_points_each_restart_serves() {
    let (_dir, path) = memory_file();
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64 | 1);
    eprintln!("kill9 x20 (shoald): seed {seed}");
    let mut expect_warm = false;
    for round in 0..20 {
        let mut s = start(&path, &[]);
        let line = s.wait_log("[restart]", WAIT).expect("restart log");
        if expect_warm {
            assert!(line.contains("restored"), "round {round}: {line}");
        } else {
            assert!(
                line.contains("no metadata save file"),
                "round {round}: {line}"
            );
        }
        let mut c = s.conn();
        let before = c.stat("curr_items");
        assert_eq!(before == 0, !expect_warm, "round {round}: {before} items");
        c.set("probe", b"alive");
        assert_eq!(c.get("probe").as_deref(), Some(&b"alive"[..]));
        let addr = s.addr.expect("tcp");
        let writer = std::thread::spawn(move || {
            let mut c = Conn::tcp(addr);
            let mut batch = Vec::new();
            for i in 0..2_000_000u32 {
                batch
                    .extend_from_slice(format!("set r:{} 0 0 3\r\nval\r\n", i % 20_000).as_bytes());
                if batch.len() > 16 << 10 {
                    c.send_lossy(&batch);
                    batch.clear();
                    let (_, closed) = c.drain_for(Duration::from_millis(1));
                    if closed {
                        return;
                    }
                }
            }
        });
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(20 + seed % 200));
        if round % 5 == 4 {
            graceful_stop(s, &path);
            expect_warm = true;
        } else {
            s.signal(libc::SIGKILL);
            s.wait_exit(WAIT).expect("killed");
            assert!(!shoal_store::metadata_path(&path).exists());
            expect_warm = false;
        }
        let _ = writer.join();
    }
}
