//! The protocol end to end against the real binary: MemcacheQ commands, Kestrel read
//! options, bad input, limits, restart and signals.

mod common;

use common::{bin, Client, Server};
use std::process::Command;
use std::time::{Duration, Instant};

fn dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

#[test]
fn memcacheq_basics() {
    let d = dir();
    let s = Server::start(d.path(), &[]);
    let mut c = s.client();
    assert_eq!(c.get("jobs"), None);
    assert_eq!(c.try_set("jobs", 42, 0, b"one").expect("set"), "STORED");
    assert_eq!(c.set("jobs", b"two"), "STORED");
    assert_eq!(c.get("jobs"), Some((42, b"one".to_vec())));
    // gets reads as get does, with the message's sequence number as the CAS field
    // memcached clients parse on every gets value line.
    c.send(b"gets jobs\r\n");
    let line = c.line();
    let cas = line
        .strip_prefix("VALUE jobs 0 3 ")
        .unwrap_or_else(|| panic!("{line}"));
    assert!(cas.parse::<u64>().is_ok(), "{line}");
    assert_eq!(c.line(), "two");
    assert_eq!(c.line(), "END");
    assert_eq!(c.get("jobs"), None);
    assert!(c.cmd("version").starts_with("VERSION shoal-queued"));
    assert_eq!(c.cmd("verbosity 1"), "OK");
    assert_eq!(c.set("jobs", b"three"), "STORED");
    let q: Vec<_> = c.stats(" queue");
    assert_eq!(q, vec![("jobs".to_string(), "3/2".to_string())]);
    assert_eq!(c.stat("queue_jobs_items").as_deref(), Some("1"));
    assert_eq!(c.stat("queue_jobs_enqueued").as_deref(), Some("3"));
    assert_eq!(c.stat("queue_jobs_dequeued").as_deref(), Some("2"));
    assert!(c.stat("queue_jobs_disk_bytes").is_some());
    assert_eq!(c.cmd("delete jobs"), "DELETED");
    assert_eq!(c.cmd("delete jobs"), "NOT_FOUND");
    assert_eq!(c.get("jobs"), None);
    assert!(!d.path().join("queues/jobs").exists());
    // Pipelined: several commands in one write, replies in order.
    c.send(b"set p 0 0 1\r\na\r\nset p 0 0 1\r\nb\r\nget p\r\nget p\r\nget p\r\n");
    for want in [
        "STORED",
        "STORED",
        "VALUE p 0 1",
        "a",
        "END",
        "VALUE p 0 1",
        "b",
        "END",
        "END",
    ] {
        assert_eq!(c.line(), want);
    }
    assert_eq!(c.cmd("incr p 1"), "ERROR");
    assert_eq!(c.cmd("add p 0 0 1\r\nx"), "ERROR");
    c.send(b"quit\r\n");
    assert!(c.try_line().is_err());
}

#[test]
fn bad_input() {
    let d = dir();
    let s = Server::start(d.path(), &["--max-item-size", "1k"]);
    let mut c = s.client();
    for bad in ["a/b", "..", ".hidden", "x\x01y"] {
        assert_eq!(
            c.try_set(bad, 0, 0, b"x").expect("set"),
            "CLIENT_ERROR bad queue name",
            "{bad:?}"
        );
    }
    assert_eq!(c.cmd("get .."), "CLIENT_ERROR bad queue name");
    // A key with options is a Kestrel client's: unknown options are ignored, as Kestrel
    // does, and options it cannot act on get Kestrel's bare `CLIENT_ERROR` and a
    // disconnect.
    assert_eq!(c.cmd("get q/bogus"), "END");
    for bad in [
        "get q/t=abc",
        "get q/peek/open",
        "get q/abort/close",
        "get /open",
    ] {
        assert_eq!(c.cmd(bad), "CLIENT_ERROR", "{bad}");
        assert!(c.try_line().is_err(), "{bad}: closed");
        c = s.client();
    }
    let long = "q".repeat(129);
    assert_eq!(
        c.try_set(&long, 0, 0, b"x").expect("set"),
        "CLIENT_ERROR bad queue name"
    );
    // Too large: refused, and its data is swallowed, not read as commands.
    let big = vec![b'g'; 2000];
    assert_eq!(
        c.try_set("q", 0, 0, &big).expect("set"),
        "SERVER_ERROR object too large for cache"
    );
    assert_eq!(c.set("q", b"ok"), "STORED");
    assert_eq!(c.get_str("q").as_deref(), Some("ok"));
    assert_eq!(c.cmd("bogus command"), "ERROR");
    // Nothing was created outside the data directory.
    let entries: Vec<_> = std::fs::read_dir(d.path().join("queues"))
        .expect("queues dir")
        .map(|e| e.expect("entry").file_name().into_string().expect("utf8"))
        .collect();
    assert_eq!(entries, vec!["q".to_string()]);
}

#[test]
fn kestrel_reliable_reads() {
    let d = dir();
    let s = Server::start(d.path(), &[]);
    let mut c = s.client();
    for m in ["a", "b", "c"] {
        assert_eq!(c.set("k", m.as_bytes()), "STORED");
    }
    assert_eq!(c.get_str("k/peek").as_deref(), Some("a"));
    assert_eq!(c.get_str("k/open").as_deref(), Some("a"));
    assert_eq!(c.stat("queue_k_open_transactions").as_deref(), Some("1"));
    assert_eq!(c.get("k/abort"), None);
    assert_eq!(c.get_str("k/open").as_deref(), Some("a"));
    assert_eq!(c.get_str("k/close/open").as_deref(), Some("b"));
    // Another client sees only what is not open.
    let mut other = s.client();
    assert_eq!(other.get_str("k/peek").as_deref(), Some("c"));
    // Disconnecting with an open read returns it to the head of the queue.
    drop(c);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if other.get_str("k/peek").as_deref() == Some("b") {
            break;
        }
        assert!(Instant::now() < deadline, "open read was not returned");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(other.get_str("k/open").as_deref(), Some("b"));
    assert_eq!(other.get("k/close"), None);
    assert_eq!(other.get_str("k").as_deref(), Some("c"));
    assert_eq!(other.get("k"), None);
}

#[test]
fn blocking_get_waits_and_wakes() {
    let d = dir();
    let s = Server::start(d.path(), &[]);
    let mut c = s.client();
    let t = Instant::now();
    assert_eq!(c.get("w/t=200"), None);
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_millis(190) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
    let addr = s.addr;
    let producer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(150));
        let mut p = Client::connect(addr);
        assert_eq!(p.set("w", b"late"), "STORED");
    });
    let t = Instant::now();
    assert_eq!(c.get_str("w/t=5000").as_deref(), Some("late"));
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    producer.join().expect("producer");
}

/// A multi-key get with a bad key takes nothing: the error is the whole reply, not
/// something sent after values already dequeued (a client raising on it would lose them).
#[test]
fn a_multi_get_with_a_bad_key_takes_nothing() {
    let d = dir();
    let s = Server::start(d.path(), &[]);
    let mut c = s.client();
    assert_eq!(c.set("a", b"x"), "STORED");
    assert_eq!(c.cmd("get a .bad"), "CLIENT_ERROR bad queue name");
    assert_eq!(c.get_str("a").as_deref(), Some("x"), "still there");
    assert_eq!(c.set("a", b"y"), "STORED");
    assert_eq!(c.cmd("get a b/t=soon"), "CLIENT_ERROR");
    assert!(c.closed(), "bad options: Kestrel's disconnect");
    let mut c = s.client();
    assert_eq!(c.get_str("a").as_deref(), Some("y"), "still there");
    // dump_stats and dump_config name the queues to report, or report all.
    assert_eq!(c.set("b", b"z"), "STORED");
    let lines = c.lines_until_end("dump_stats b");
    assert_eq!(lines.first().map(String::as_str), Some("queue 'b' {"));
    assert!(!lines.iter().any(|l| l == "queue 'a' {"), "{lines:?}");
}

/// A client that closes while its blocking read waits takes nothing with it: the next
/// message goes to the next reader, not to the closed socket. Plain, reliable and
/// monitor reads alike.
#[test]
fn a_waiting_read_whose_client_left_takes_no_message() {
    let d = dir();
    let s = Server::start(d.path(), &[]);
    for (i, wait) in ["w/t=5000", "w/t=5000/open", "monitor w 5 1"]
        .iter()
        .enumerate()
    {
        let mut gone = s.client();
        gone.send(
            format!("get {wait}\r\n")
                .replace("get monitor", "monitor")
                .as_bytes(),
        );
        // The read is waiting; then its client goes.
        std::thread::sleep(Duration::from_millis(100));
        drop(gone);
        // Bounded: the server notices the close within this wait or the test fails below.
        let mut waiters = None;
        for _ in 0..100 {
            std::thread::sleep(Duration::from_millis(20));
            waiters = s.client().stat("queue_w_waiters");
            if waiters.as_deref() == Some("0") {
                break;
            }
        }
        assert_eq!(waiters.as_deref(), Some("0"), "{wait}: still waiting");
        let mut p = s.client();
        let msg = format!("m{i}");
        assert_eq!(p.set("w", msg.as_bytes()), "STORED");
        assert_eq!(p.get_str("w").as_deref(), Some(msg.as_str()), "{wait}");
    }
}

#[test]
fn flush_flush_all_and_expiry() {
    let d = dir();
    let s = Server::start(d.path(), &[]);
    let mut c = s.client();
    for i in 0..5 {
        assert_eq!(c.set("f", format!("{i}").as_bytes()), "STORED");
        assert_eq!(c.set("g", format!("{i}").as_bytes()), "STORED");
    }
    assert_eq!(c.cmd("flush f"), "END");
    assert_eq!(c.get("f"), None);
    assert_eq!(c.get_str("g").as_deref(), Some("0"));
    assert_eq!(c.cmd("flush_all"), "OK");
    assert_eq!(c.get("g"), None);
    // Expired on arrival: stored, never delivered.
    assert_eq!(c.try_set("e", 0, -1, b"old").expect("set"), "STORED");
    assert_eq!(c.try_set("e", 0, 1, b"soon").expect("set"), "STORED");
    assert_eq!(c.try_set("e", 0, 0, b"keep").expect("set"), "STORED");
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(c.get_str("e").as_deref(), Some("keep"));
    assert_eq!(c.stat("queue_e_expired_items").as_deref(), Some("2"));
}

#[test]
fn limits_from_flags_and_file() {
    let d = dir();
    let cfgfile = d.path().join("queues.conf");
    std::fs::write(&cfgfile, "# per-queue\nring max_items=2 policy=discard\n").expect("write");
    let data = d.path().join("data");
    let s = Server::start(
        &data,
        &[
            "--max-items",
            "3",
            "--queue-config",
            cfgfile.to_str().expect("utf8"),
        ],
    );
    let mut c = s.client();
    for i in 0..3 {
        assert_eq!(c.set("q", format!("{i}").as_bytes()), "STORED");
    }
    assert_eq!(c.set("q", b"x"), "NOT_STORED");
    for i in 0..4 {
        assert_eq!(c.set("ring", format!("{i}").as_bytes()), "STORED");
    }
    assert_eq!(c.get_str("ring").as_deref(), Some("2"));
    assert_eq!(c.stat("queue_ring_discarded").as_deref(), Some("2"));
}

#[test]
fn restart_keeps_messages_and_consumption() {
    let d = dir();
    {
        let s = Server::start(d.path(), &["--fsync", "always"]);
        let mut c = s.client();
        for i in 0..20 {
            assert_eq!(c.set("r", format!("m{i}").as_bytes()), "STORED");
        }
        for i in 0..5 {
            assert_eq!(c.get_str("r"), Some(format!("m{i}")));
        }
        let st = s.signal_and_wait(libc::SIGTERM);
        assert_eq!(st.code(), Some(0), "graceful exit");
    }
    let s = Server::start(d.path(), &[]);
    let mut c = s.client();
    for i in 5..20 {
        assert_eq!(c.get_str("r"), Some(format!("m{i}")));
    }
    assert_eq!(c.get("r"), None);
    let st = s.signal_and_wait(libc::SIGINT);
    assert_eq!(st.code(), Some(0), "SIGINT exits 0");
}

#[test]
fn usage_errors_exit_2() {
    let d = dir();
    for args in [
        &["--bogus"][..],
        &["--fsync", "sometimes"],
        &["--segment-size", "12"],
        &["-p", "notaport"],
    ] {
        let out = Command::new(bin())
            .args(args)
            .arg("-d")
            .arg(d.path())
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
    let out = Command::new(bin()).arg("--help").output().expect("run");
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn second_server_on_same_dir_refuses() {
    let d = dir();
    let _s = Server::start(d.path(), &[]);
    let out = Command::new(bin())
        .args(["-p", "0", "-d"])
        .arg(d.path())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("in use"));
}

#[test]
fn corrupt_data_directory_is_survived() {
    let d = dir();
    {
        let s = Server::start(d.path(), &[]);
        let mut c = s.client();
        for i in 0..10 {
            assert_eq!(c.set("good", format!("g{i}").as_bytes()), "STORED");
            assert_eq!(c.set("bad", format!("b{i:03}").as_bytes()), "STORED");
        }
        assert_eq!(s.signal_and_wait(libc::SIGTERM).code(), Some(0));
    }
    let queues = d.path().join("queues");
    // Flip a byte inside bad's third record: valid records follow, so it is corruption.
    let seg = std::fs::read_dir(queues.join("bad"))
        .expect("bad dir")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|x| x == "seg"))
        .expect("segment");
    let mut bytes = std::fs::read(&seg).expect("read");
    bytes[32 + 2 * (32 + 4) + 40] ^= 0xFF;
    std::fs::write(&seg, &bytes).expect("write");
    // A queue whose segment cannot be read at all, and junk that is not a queue.
    std::fs::create_dir_all(queues.join("locked/0000000000000000.seg")).expect("mkdir");
    std::fs::write(queues.join("README"), "not a queue").expect("write");
    std::fs::create_dir_all(queues.join(".trash")).expect("mkdir");

    let s = Server::start(d.path(), &[]);
    let mut c = s.client();
    for i in 0..10 {
        assert_eq!(c.get_str("good"), Some(format!("g{i}")));
    }
    assert_eq!(c.stat("quarantined_segments").as_deref(), Some("1"));
    assert_eq!(c.stat("unavailable_queues").as_deref(), Some("1"));
    let quarantined = std::fs::read_dir(queues.join("bad"))
        .expect("bad dir")
        .filter(|e| {
            e.as_ref()
                .map(|e| e.file_name().to_string_lossy().ends_with(".corrupt"))
                .unwrap_or(false)
        })
        .count();
    assert_eq!(
        quarantined, 1,
        "the damaged segment is kept aside, not deleted"
    );
    assert_eq!(c.set("bad", b"fresh"), "STORED");
    assert_eq!(c.get_str("bad").as_deref(), Some("fresh"));
    assert_eq!(
        c.set("locked", b"x"),
        "SERVER_ERROR queue unavailable (its data could not be recovered)"
    );
    assert_eq!(c.get("locked"), None);
    let logs = s.logs().join("\n");
    assert!(logs.contains("quarantined"), "{logs}");
}

#[test]
fn kestrel_admin_commands() {
    let d = dir();
    let s = Server::start(d.path(), &[]);
    let mut c = s.client();
    assert_eq!(c.cmd("flush_expired nosuch"), "0");
    assert_eq!(c.cmd("flush_expired ../etc"), "CLIENT_ERROR bad queue name");
    for _ in 0..2 {
        assert_eq!(c.try_set("x", 0, 1, b"soon").expect("set"), "STORED");
    }
    assert_eq!(c.try_set("y", 0, 1, b"soon").expect("set"), "STORED");
    assert_eq!(c.set("z", b"keep"), "STORED");
    std::thread::sleep(Duration::from_millis(2100));
    // The once-a-second expiry tick may have dropped some first; between the two, all go.
    let n: u64 = c.cmd("flush_expired x").parse().expect("a count");
    assert!(n <= 2, "{n}");
    let m: u64 = c.cmd("flush_all_expired").parse().expect("a count");
    assert!(m <= 1, "{m}");
    assert_eq!(c.stat("queue_x_expired_items").as_deref(), Some("2"));
    assert_eq!(c.stat("queue_y_expired_items").as_deref(), Some("1"));
    assert_eq!(c.get("x"), None);

    // Kestrel's dump_stats: a block per queue, then END.
    let lines = c.lines_until_end("dump_stats");
    let z = lines
        .iter()
        .position(|l| l == "queue 'z' {")
        .expect("z block");
    assert_eq!(lines[z + 1], "  items=1");
    assert!(lines[z + 1..].iter().any(|l| l == "}"));
    assert!(lines.iter().any(|l| l == "queue 'x' {"));
    assert!(lines.iter().any(|l| l == "  expired_items=2"));

    // shutdown needs -A, as in memcached.
    assert_eq!(c.cmd("shutdown"), "ERROR: shutdown not enabled");
    assert_eq!(c.get_str("z").as_deref(), Some("keep"));
}

#[test]
fn shutdown_command_with_enable_shutdown_stops_the_server() {
    let d = dir();
    let s = Server::start(d.path(), &["-A"]);
    let mut c = s.client();
    assert_eq!(c.set("q", b"kept"), "STORED");
    c.send(b"shutdown\r\n");
    assert!(c.try_line().is_err(), "connection closed without a reply");
    // Signal 0 only waits: the server is already on its way out.
    let status = s.signal_and_wait(0);
    assert_eq!(status.code(), Some(0));
    // The message survived the shutdown.
    let s = Server::start(d.path(), &[]);
    assert_eq!(s.client().get_str("q").as_deref(), Some("kept"));
}

/// A SIGTERM sent the moment `listening on` is logged stops the queue cleanly, even from a
/// parent that left SIGTERM ignored: the line comes before the accept loop's handlers, and
/// a signal in between must not be lost (see `shoal_net::early_signals`).
#[test]
fn a_stop_signal_right_after_listening_is_logged_stops_the_queue() {
    let d = dir();
    let data = d.path().to_str().expect("utf-8 path");
    let args = ["-p", "0", "-l", "127.0.0.1", "-v", "-t", "2", "-d", data];
    shoal_test_support::signals::stops_on_sigterm_right_after_listening(bin(), &args, 8)
        .unwrap_or_else(|e| panic!("{e}"));
}
