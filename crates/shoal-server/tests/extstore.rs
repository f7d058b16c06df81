//! The flash tier against the real binary, with memcached's `-o ext_path=...` options
//! (ported from the behaviours memcached 1.6.45's `t/extstore.t`, `t/binary-extstore.t`
//! and `t/chunked-extstore.t` check): values pushed out of memory are served from the
//! file byte for byte, counted in memcached's stats; deletes cost no reads; `incr`,
//! `append` and `prepend` work on flash-resident items (memcached refuses them); chunked
//! values over 512 KB go to flash and back; a graceful `-e` restart keeps the flash
//! tier (memcached empties it), a crash starts it clean; the `extstore` command.

mod common;

use common::{Conn, Server};
use std::path::Path;
use std::time::{Duration, Instant};

const VALUE_LEN: usize = 20_000;

fn value(i: usize) -> Vec<u8> {
    (0..VALUE_LEN)
        .map(|j| b'C' + ((i * 7 + j * 13) % 24) as u8)
        .collect()
}

/// Write buffers deep enough (`ext_io_depth`) that a loaded test machine's disk never
/// makes eviction drop a value instead of writing it.
fn ext_args(dir: &Path) -> String {
    format!(
        "ext_path={}:256m,ext_page_size=8,ext_wbuf_size=2,ext_item_size=512,ext_io_depth=16",
        dir.join("extstore").display()
    )
}

fn start(dir: &Path, extra: &[&str]) -> Server {
    let ext = ext_args(dir);
    let mut args = vec!["-m", "16", "-t", "2", "-o", &ext];
    args.extend_from_slice(extra);
    Server::with_args(&args)
}

/// Sets `n` keys of 20 KB values, `noreply`, then waits for the flash writes to land.
fn fill(c: &mut Conn, prefix: &str, n: usize) {
    for i in 0..n {
        let mut req = format!("set {prefix}{i} {i} 0 {VALUE_LEN} noreply\r\n").into_bytes();
        req.extend_from_slice(&value(i));
        req.extend_from_slice(b"\r\n");
        c.send(&req);
    }
    c.rt(b"mn\r\n", b"MN\r\n");
    settle(c);
}

fn settle(c: &mut Conn) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while c.stat("extstore_io_queue") > 0 {
        assert!(Instant::now() < deadline, "flash writes never finished");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn check_all(c: &mut Conn, prefix: &str, n: usize) {
    for i in 0..n {
        let got = c.get(&format!("{prefix}{i}"));
        assert!(got == Some(value(i)), "{prefix}{i} not served intact");
    }
}

#[test]
fn values_beyond_memory_are_served_from_flash() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = start(dir.path(), &[]);
    let mut c = s.conn();
    // A small value never goes to flash.
    c.rt(b"set foo 0 0 2\r\nhi\r\n", b"STORED\r\n");
    assert_eq!(c.stat("extstore_objects_written"), 0);
    // Read, so that eviction keeps it in memory (an unread one would go: too small to
    // be worth a disk read).
    c.rt(b"get foo\r\n", b"VALUE foo 0 2\r\nhi\r\nEND\r\n");
    // 40 MB of values into 16 MB of memory.
    fill(&mut c, "nfoo", 2000);
    let st = c.stats("");
    let num = |k: &str| -> u64 { st[k].parse().expect(k) };
    assert!(num("extstore_page_allocs") > 0);
    assert!(num("extstore_objects_written") > 1000, "{st:?}");
    assert!(num("extstore_bytes_written") > 1000 * VALUE_LEN as u64);
    assert_eq!(num("evictions"), 0, "nothing lost: flash took it");
    check_all(&mut c, "nfoo", 2000);
    c.rt(b"get foo\r\n", b"VALUE foo 0 2\r\nhi\r\nEND\r\n");
    let st = c.stats("");
    let num = |k: &str| -> u64 { st[k].parse().expect(k) };
    assert!(num("get_extstore") > 1000);
    assert!(num("extstore_objects_read") > 1000);
    assert!(num("extstore_bytes_read") > 1000 * VALUE_LEN as u64);
    assert_eq!(num("miss_from_extstore"), 0);
    assert_eq!(num("badcrc_from_extstore"), 0);
    // Client flags survive the trip (each key was set with its index as flags).
    c.rt(
        b"mg nfoo7 f s\r\n",
        format!("HD f7 s{VALUE_LEN}\r\n").as_bytes(),
    );

    // Deleting half lowers the counts, and reads nothing.
    let read_before = num("extstore_objects_read");
    let used_before = num("extstore_objects_used");
    let bytes_before = num("extstore_bytes_used");
    for i in (0..2000).step_by(2) {
        c.send(format!("delete nfoo{i} noreply\r\n").as_bytes());
    }
    c.rt(b"mn\r\n", b"MN\r\n");
    let st = c.stats("");
    let num = |k: &str| -> u64 { st[k].parse().expect(k) };
    assert!(num("extstore_objects_used") < used_before);
    assert!(num("extstore_bytes_used") < bytes_before);
    assert_eq!(
        num("extstore_objects_read"),
        read_before,
        "deletes read nothing"
    );
    c.rt(b"get nfoo0\r\n", b"END\r\n");
    assert!(c.get("nfoo1") == Some(value(1)));

    // `stats extstore`: every page with its version and live bytes.
    let pages = c.stats("extstore");
    assert_eq!(pages.len(), 4 * 32, "32 pages of 8 MB, four lines each");
    assert!(pages.contains_key("0:version") && pages.contains_key("31:free_bucket"));
}

#[test]
fn incr_append_and_prepend_work_on_flash_resident_items() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = start(dir.path(), &[]);
    let mut c = s.conn();
    // A counter padded to 1000 bytes, large enough to go to flash.
    let digits = format!("{:0>1000}", 41);
    c.rt(
        format!("set counter 0 0 1000\r\n{digits}\r\n").as_bytes(),
        b"STORED\r\n",
    );
    fill(&mut c, "bfoo", 2000);
    let read_before = c.stat("extstore_objects_read");
    // memcached: CLIENT_ERROR cannot increment or decrement non-numeric value.
    c.rt(b"incr counter 1\r\n", b"42\r\n");
    assert!(
        c.stat("extstore_objects_read") > read_before,
        "read back from flash"
    );
    // memcached: NOT_STORED for both.
    c.rt(b"append bfoo1 0 0 2\r\nhi\r\n", b"STORED\r\n");
    c.rt(b"prepend bfoo2 0 0 2\r\nhi\r\n", b"STORED\r\n");
    let mut want = value(1);
    want.extend_from_slice(b"hi");
    assert!(c.get("bfoo1") == Some(want), "append kept the flash value");
    let mut want = b"hi".to_vec();
    want.extend_from_slice(&value(2));
    assert!(c.get("bfoo2") == Some(want), "prepend kept the flash value");
    // Touch and gat keep the value where it is, intact.
    c.rt(b"touch bfoo3 1000\r\n", b"TOUCHED\r\n");
    assert!(c.get("bfoo3") == Some(value(3)));
    c.send(b"gat 1000 bfoo4\r\n");
    let header = c.read_line();
    assert_eq!(
        header,
        format!("VALUE bfoo4 4 {VALUE_LEN}\r\n").into_bytes()
    );
    let body = c.read_n(VALUE_LEN + 2);
    assert!(body[..VALUE_LEN] == value(4)[..]);
    c.expect(b"END\r\n");
    // The meta protocol: a value, its flags and CAS, and mg's flags after a trip to disk.
    c.rt(
        b"mg bfoo5 s v\r\n",
        format!("VA {VALUE_LEN} s{VALUE_LEN}\r\n").as_bytes(),
    );
    let body = c.read_n(VALUE_LEN + 2);
    assert!(body[..VALUE_LEN] == value(5)[..]);
}

#[test]
fn item_flags_survive_a_trip_to_flash() {
    // memcached's t/extstore.t "check item flag survival after write to disk".
    let dir = tempfile::tempdir().expect("tempdir");
    let s = start(dir.path(), &[]);
    let mut c = s.conn();
    let v = value(0);
    let mut req = format!("ms itflagtest {VALUE_LEN}\r\n").into_bytes();
    req.extend_from_slice(&v);
    req.extend_from_slice(b"\r\n");
    c.rt(&req, b"HD\r\n");
    c.rt(b"mg itflagtest\r\n", b"HD\r\n");
    c.rt(b"md itflagtest I\r\n", b"HD\r\n");
    fill(&mut c, "pushout", 2000);
    assert!(c.stat("extstore_objects_written") > 1000);
    c.rt(b"mg itflagtest h\r\n", b"HD h1 X W\r\n");
}

#[test]
fn chunked_values_go_to_flash_and_back() {
    // memcached's t/chunked-extstore.t: values over half a megabyte, and over one.
    let dir = tempfile::tempdir().expect("tempdir");
    // Write buffers deep enough that a loaded test machine's disk never makes eviction
    // drop a value instead of waiting.
    let s = start(dir.path(), &["-I", "2m", "-o", "ext_io_depth=16"]);
    let mut c = s.conn();
    let big = |k: usize| -> Vec<u8> {
        let len = [900_000, 1_500_000][k % 2];
        (0..len).map(|i| ((i + k) % 251) as u8).collect()
    };
    for k in 0..40 {
        let v = big(k);
        let mut req = format!("set big{k} 0 0 {}\r\n", v.len()).into_bytes();
        req.extend_from_slice(&v);
        req.extend_from_slice(b"\r\n");
        c.rt(&req, b"STORED\r\n");
    }
    settle(&mut c);
    let st = c.stats("");
    assert!(c.stat("extstore_objects_written") > 10, "{st:?}");
    for k in 0..40 {
        assert!(c.get(&format!("big{k}")) == Some(big(k)), "big{k}");
    }
    assert_eq!(c.stat("evictions"), 0);
}

#[test]
fn the_extstore_command_changes_settings() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = start(dir.path(), &[]);
    let mut c = s.conn();
    assert_eq!(c.stats("settings")["ext_max_frag"], "0.80");
    c.rt(b"extstore max_frag 0.5\r\n", b"OK\r\n");
    // `stats settings` shows the settings as they are now, as memcached's does.
    assert_eq!(c.stats("settings")["ext_max_frag"], "0.50");
    // The default compaction threshold worked out from the file: 1% of 32 pages, at least 1.
    assert_eq!(c.stats("settings")["ext_compact_under"], "1");
    c.rt(b"extstore drop_unread 1\r\n", b"OK\r\n");
    c.rt(b"extstore compact_under 4\r\n", b"OK\r\n");
    c.rt(b"extstore free_memchunks 0 0\r\n", b"OK\r\n");
    c.rt(b"extstore recache_rate x\r\n", b"ERROR\r\n");
    c.rt(b"extstore bogus 1\r\n", b"ERROR\r\n");
    c.rt(b"extstore item_size\r\n", b"ERROR\r\n");
    // Raised above every value: nothing more goes to flash.
    c.rt(b"extstore item_size 1000000\r\n", b"OK\r\n");
    fill(&mut c, "k", 1500);
    assert_eq!(c.stat("extstore_objects_written"), 0);
    assert!(c.stat("evictions") > 0);
}

/// A memory file on tmpfs where there is one, as memcached's `-e` is meant to be used.
fn memory_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .expect("tempdir")
}

#[test]
fn a_graceful_restart_keeps_the_flash_tier_and_a_crash_does_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mem = memory_dir();
    let mem_file = mem.path().join("shoal.mem");
    let mem_arg = mem_file.to_str().expect("utf-8").to_string();
    let mut s = start(dir.path(), &["-e", &mem_arg]);
    let mut c = s.conn();
    fill(&mut c, "r", 2000);
    let on_flash = c.stat("extstore_objects_used");
    assert!(on_flash > 1000);
    drop(c);
    s.signal(libc::SIGUSR1);
    let st = s.wait_exit(Duration::from_secs(30)).expect("exits");
    assert!(st.success());

    // memcached empties extstore on a restart; shoald serves every value again.
    let mut s = start(dir.path(), &["-e", &mem_arg]);
    s.wait_log("kept the flash tier", Duration::from_secs(10))
        .expect("flash tier kept");
    let mut c = s.conn();
    assert_eq!(c.stat("extstore_objects_used"), on_flash);
    check_all(&mut c, "r", 2000);
    assert_eq!(c.stat("miss_from_extstore"), 0);

    // A crash: the next start is clean, memory and flash alike, and says so.
    s.signal(libc::SIGKILL);
    let _ = s.wait_exit(Duration::from_secs(10));
    let s = start(dir.path(), &["-e", &mem_arg]);
    s.wait_log("starting with an empty flash tier", Duration::from_secs(10))
        .expect("clean flash start logged");
    let mut c = s.conn();
    c.rt(b"get r1\r\n", b"END\r\n");
    assert_eq!(c.stat("extstore_objects_used"), 0);
}

/// memcached's JBOD: two `ext_path` files pooled. Values land in both, are served byte
/// for byte, `stats extstore` lists both files' pages (free ones at version 0), and a
/// graceful `-e` restart keeps them all; a bucket shoald makes no writes for (`chunked`)
/// is accepted with a warning, its file's pages default ones.
#[test]
fn several_ext_path_files_are_pooled_and_kept_across_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mem = memory_dir();
    let mem_arg = mem
        .path()
        .join("shoal.mem")
        .to_str()
        .expect("utf-8")
        .to_string();
    let (one, two) = (dir.path().join("ssd1"), dir.path().join("ssd2"));
    let ext = format!(
        "ext_path={}:24m,ext_path={}:40m:chunked,ext_page_size=8,ext_wbuf_size=2,\
         ext_item_size=512,ext_io_depth=16",
        one.display(),
        two.display()
    );
    let args = ["-m", "16", "-t", "2", "-e", &mem_arg, "-o", &ext];
    let mut s = Server::with_args(&args);
    s.wait_log(
        "bucket 'chunked' accepted without effect",
        Duration::from_secs(10),
    )
    .expect("bucket warning");
    let mut c = s.conn();
    let pages = c.stats("extstore");
    assert_eq!(pages.len(), 8 * 4, "3 + 5 pages of 8 MiB, four lines each");
    assert_eq!(pages["7:version"], "0", "a free page");
    // 50 MB of values into 16 MiB of memory: more than the first file's 24 MiB.
    fill(&mut c, "j", 2500);
    for f in [&one, &two] {
        let bytes = std::fs::read(f).expect("flash file");
        assert_eq!(bytes.len() % (8 << 20), 0);
        assert!(
            bytes.iter().any(|&b| b != 0),
            "{} holds values",
            f.display()
        );
    }
    let on_flash = c.stat("extstore_objects_used");
    assert!(on_flash > 1500, "{on_flash}");
    check_all(&mut c, "j", 2500);
    drop(c);
    s.signal(libc::SIGUSR1);
    assert!(s
        .wait_exit(Duration::from_secs(30))
        .expect("exits")
        .success());

    let s = Server::with_args(&args);
    s.wait_log("kept the flash tier", Duration::from_secs(10))
        .expect("flash tier kept");
    let mut c = s.conn();
    assert_eq!(c.stat("extstore_objects_used"), on_flash);
    check_all(&mut c, "j", 2500);
    assert_eq!(c.stat("miss_from_extstore"), 0);
}

#[test]
fn compaction_moves_live_values_out_of_fragmented_pages() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Eight pages of 8 MB: filled, then three values in four deleted.
    let ext = format!(
        "ext_path={}:64m,ext_page_size=8,ext_wbuf_size=2,ext_io_depth=16",
        dir.path().join("extstore").display()
    );
    let s = Server::with_args(&["-m", "16", "-o", &ext]);
    let mut c = s.conn();
    let mut writes = s.conn();
    writes.rt(b"watch evictions\r\n", b"OK\r\n");
    fill(&mut c, "cfoo", 3000);
    // Each value written to flash is an `extwrite` line among the evictions.
    let line = writes.read_until(b"\n");
    let text = String::from_utf8_lossy(&line).to_string();
    assert!(
        text.contains("type=extwrite key=cfoo") && text.contains(" bucket=0"),
        "{text}"
    );
    let free_before = c.stat("extstore_pages_free");
    let mut watcher = s.conn();
    watcher.rt(b"watch sysevents\r\n", b"OK\r\n");
    // Compact while fewer than all eight pages are free (memcached's t/extstore.t
    // raises it the same way).
    c.rt(b"extstore compact_under 8\r\n", b"OK\r\n");
    for i in 0..3000 {
        if i % 4 != 0 {
            c.send(format!("delete cfoo{i} noreply\r\n").as_bytes());
        }
    }
    c.rt(b"mn\r\n", b"MN\r\n");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut saw_end = false;
    while Instant::now() < deadline && !saw_end {
        let line = watcher.read_until(b"\n");
        let text = String::from_utf8_lossy(&line).to_string();
        if text.contains("type=compact_read_end") {
            assert!(text.contains(" rescues="), "{text}");
            saw_end = !text.contains(" rescues=0 ");
        }
    }
    assert!(saw_end, "a compaction rescued values");
    let st = c.stats("");
    let num = |k: &str| -> u64 { st[k].parse().expect(k) };
    assert!(num("extstore_compact_rescues") > 0);
    assert!(
        num("extstore_pages_free") > free_before,
        "compaction freed pages"
    );
    assert_eq!(num("badcrc_from_extstore"), 0);
    let mut served = 0;
    for i in (0..3000).step_by(4) {
        if let Some(v) = c.get(&format!("cfoo{i}")) {
            assert!(v == value(i), "cfoo{i} intact after compaction");
            served += 1;
        }
    }
    assert!(served > 300, "served {served} of 750");
}

/// `fiu-ctrl -c COMMAND PID`.
fn fiu_ctrl(pid: i32, command: &str) {
    let st = std::process::Command::new("fiu-ctrl")
        .args(["-c", command])
        .arg(pid.to_string())
        .status()
        .expect("run fiu-ctrl");
    assert!(st.success(), "fiu-ctrl -c {command:?} failed");
}

#[test]
fn failing_flash_writes_give_misses_never_wrong_data() {
    // libfiu (Debian fiu-utils, which CI installs) fails every pwrite with EIO while
    // enabled: the flash tier's writes, and nothing else shoald does.
    let Some(fiu_run) = shoal_test_support::peer("fiu-run", "fiu-utils") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let fiu_run = fiu_run.to_string_lossy().into_owned();
    let ext = ext_args(dir.path());
    let s = Server::under(&[&fiu_run, "-x"], &["-m", "16", "-o", &ext]);
    let mut c = s.conn();
    fill(&mut c, "before", 1500);
    assert_eq!(c.stat("extstore_write_errors"), 0);

    fiu_ctrl(s.pid(), "enable name=posix/io/rw/pwrite*,failinfo=5");
    fill(&mut c, "during", 1500);
    fiu_ctrl(s.pid(), "disable name=posix/io/rw/pwrite*");
    let errors = c.stat("extstore_write_errors");
    assert!(errors > 0, "the injected failures were seen");
    // Every value is served intact or missed, never another value or garbage; the
    // failures cost misses (counted), not the server.
    let mut missed = 0;
    for prefix in ["before", "during"] {
        for i in 0..1500 {
            match c.get(&format!("{prefix}{i}")) {
                Some(v) => assert!(v == value(i), "{prefix}{i} served wrong bytes"),
                None => missed += 1,
            }
        }
    }
    assert!(missed > 0, "values whose write failed are misses");
    assert_eq!(
        c.stat("badcrc_from_extstore"),
        0,
        "invalidated at once, never read"
    );

    // Writes work again once the disk does.
    let objects_before = c.stat("extstore_objects_used");
    fill(&mut c, "after", 1500);
    assert_eq!(c.stat("extstore_write_errors"), errors);
    assert!(c.stat("extstore_objects_used") > objects_before);
    check_all(&mut c, "after", 1000);
}

/// The reply `get` gives for key `k` with value `v` (flags `f`).
fn value_block(k: &str, f: usize, v: &[u8]) -> Vec<u8> {
    let mut b = format!("VALUE {k} {f} {}\r\n", v.len()).into_bytes();
    b.extend_from_slice(v);
    b.extend_from_slice(b"\r\n");
    b
}

/// Flash values are read off the worker thread (`flash_reader`): a request that meets
/// one stops, its reads (and those of the gets pipelined behind it) run elsewhere, and
/// it runs again. What a client sees must not change: replies in request order, each
/// value byte for byte, a write pipelined behind a get not seen by that get, and every
/// protocol's get served.
#[test]
fn pipelined_reads_of_flash_values_keep_their_order() {
    pipeline_in_order(&[]);
}

/// The same with the buffer budget (`read_buf_mem_limit`) at its least, a megabyte, which
/// reads ahead are charged to: fewer of them, the same replies.
#[test]
fn pipelined_reads_of_flash_values_keep_their_order_in_a_small_budget() {
    pipeline_in_order(&["-o", "read_buf_mem_limit=1"]);
}

fn pipeline_in_order(extra: &[&str]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = start(dir.path(), extra);
    let mut c = s.conn();
    fill(&mut c, "p", 2000);
    assert!(c.stat("extstore_objects_written") > 1000);
    let read_before = c.stat("extstore_objects_read");

    // One write: single gets, a multi-get mixing flash values with misses, a get then a
    // set of the same key then a get, meta gets with and without the value.
    let mut req = Vec::new();
    let mut expected = Vec::new();
    for i in (0..2000).step_by(37) {
        let k = format!("p{i}");
        req.extend_from_slice(format!("get {k}\r\n").as_bytes());
        expected.extend_from_slice(&value_block(&k, i, &value(i)));
        expected.extend_from_slice(b"END\r\n");
    }
    req.extend_from_slice(b"get");
    for i in (1..2000).step_by(41) {
        req.extend_from_slice(format!(" p{i} missing{i}").as_bytes());
        expected.extend_from_slice(&value_block(&format!("p{i}"), i, &value(i)));
    }
    req.extend_from_slice(b"\r\n");
    expected.extend_from_slice(b"END\r\n");
    for i in (3..2000).step_by(101) {
        let k = format!("p{i}");
        req.extend_from_slice(format!("get {k}\r\nset {k} 1 0 3\r\nnew\r\nget {k}\r\n").as_bytes());
        expected.extend_from_slice(&value_block(&k, i, &value(i)));
        expected.extend_from_slice(b"END\r\nSTORED\r\n");
        expected.extend_from_slice(&value_block(&k, 1, b"new"));
        expected.extend_from_slice(b"END\r\n");
    }
    for i in (5..2000).step_by(97) {
        let k = format!("p{i}");
        req.extend_from_slice(format!("mg {k} s v\r\nmg {k} f\r\n").as_bytes());
        expected.extend_from_slice(format!("VA {VALUE_LEN} s{VALUE_LEN}\r\n").as_bytes());
        expected.extend_from_slice(&value(i));
        expected.extend_from_slice(format!("\r\nHD f{i}\r\n").as_bytes());
    }
    req.extend_from_slice(b"mn\r\n");
    expected.extend_from_slice(b"MN\r\n");
    c.send(&req);
    let got = c.read_n(expected.len());
    if let Some(at) = got.iter().zip(&expected).position(|(a, b)| a != b) {
        panic!(
            "replies differ at byte {at}: got {:?}, expected {:?}",
            common::show(&got[at.saturating_sub(40)..(at + 40).min(got.len())]),
            common::show(&expected[at.saturating_sub(40)..(at + 40).min(expected.len())])
        );
    }
    assert!(
        c.stat("extstore_objects_read") > read_before + 50,
        "the values came from flash"
    );

    // Binary GETK of a flash value (memcached's binary-extstore case).
    let i = 1999usize;
    let key = format!("p{i}");
    let mut packet = vec![0x80, 0x0c, 0, key.len() as u8, 0, 0, 0, 0];
    packet.extend_from_slice(&(key.len() as u32).to_be_bytes());
    packet.extend_from_slice(&[0xAB, 0xCD, 0xEF, 0x01, 0, 0, 0, 0, 0, 0, 0, 0]);
    packet.extend_from_slice(key.as_bytes());
    c.send(&packet);
    let header = c.read_n(24);
    assert_eq!(&header[..2], &[0x81, 0x0c]);
    assert_eq!(&header[6..8], &[0, 0], "status: found");
    assert_eq!(&header[12..16], &[0xAB, 0xCD, 0xEF, 0x01], "opaque");
    let body_len = u32::from_be_bytes([header[8], header[9], header[10], header[11]]) as usize;
    let body = c.read_n(body_len);
    assert_eq!(&body[..4], &(i as u32).to_be_bytes(), "flags");
    assert_eq!(&body[4..4 + key.len()], key.as_bytes());
    assert!(body[4 + key.len()..] == value(i)[..], "value intact");
    c.assert_alive();
}
