//! IO errors under the queue (issue 28), injected with libfiu (Debian `fiu-utils`):
//! shoal-queued runs under `fiu-run -x`, and `fiu-ctrl` makes every fsync fail with EIO
//! while traffic flows, then lets them succeed again. What must hold: a message whose
//! write was not made durable is never acknowledged; the failure is in the log and in
//! `stats` / metrics; reads go on being served; enqueues work again once fsync does; and
//! after a kill -9 every acknowledged message is recovered, once.

mod common;

use common::Server;
use std::process::Command;

fn fiu_ctrl(pid: u32, command: &str) {
    let st = Command::new("fiu-ctrl")
        .args(["-c", command])
        .arg(pid.to_string())
        .status()
        .expect("run fiu-ctrl");
    assert!(st.success(), "fiu-ctrl -c {command:?} failed");
}

/// shoal-queued (`--fsync always`, a fresh data directory) under `fiu-run -x`, so that
/// `fiu-ctrl` can make its IO calls fail; `None` after a visible skip without libfiu
/// (CI installs it).
fn under_fiu() -> Option<(tempfile::TempDir, Server)> {
    let fiu_run = shoal_test_support::peer("fiu-run", "fiu-utils")?;
    let d = tempfile::tempdir().expect("tempdir");
    let fiu_run = fiu_run.to_string_lossy().into_owned();
    let server = Server::start_under(&[&fiu_run, "-x"], d.path(), &["--fsync", "always"]);
    Some((d, server))
}

#[test]
fn fsync_failure_acknowledges_nothing_and_loses_nothing_acknowledged() {
    let Some((d, server)) = under_fiu() else {
        return;
    };
    let pid = server.pid();
    let mut acked: Vec<u32> = Vec::new();
    let mut c = server.client();
    for i in 0..20 {
        assert_eq!(c.try_set("q", i, 0, b"before").expect("set"), "STORED");
        acked.push(i);
    }

    // Every fsync now fails with EIO (errno 5).
    fiu_ctrl(pid, "enable name=posix/io/sync/*,failinfo=5");
    let mut replies = Vec::new();
    for i in 100..110 {
        let mut c = server.client();
        // The first write waits for an fsync that fails: its connection is closed, not
        // acknowledged. The queue is read-only from then on: a clear SERVER_ERROR.
        let r = c
            .try_set("q", i, 0, b"during")
            .unwrap_or_else(|e| format!("closed ({e:?})"));
        assert_ne!(r, "STORED", "message {i} acknowledged without fsync");
        replies.push(r);
    }
    assert_eq!(
        replies.last().map(String::as_str),
        Some("SERVER_ERROR fsync failed; queue is read-only until the server restarts"),
        "{replies:?}"
    );
    eprintln!("sets during the fault: {replies:?}");
    // Reads keep being served meanwhile (their removal cannot be made durable; the
    // message is delivered rather than withheld).
    let mut reader = server.client();
    let (flags, body) = reader.get("q").expect("a read during the fault");
    assert_eq!((flags, body.as_slice()), (0, &b"before"[..]));
    let sync_errors: u64 = reader
        .stat("sync_errors")
        .and_then(|v| v.parse().ok())
        .expect("sync_errors stat");
    assert!(sync_errors >= 1, "sync_errors {sync_errors}");

    // fsync works again, but what was written since the failure cannot be trusted: the
    // queue stays read-only until a restart recovers it from its files.
    fiu_ctrl(pid, "disable name=posix/io/sync/*");
    let mut c = server.client();
    assert_eq!(
        c.try_set("q", 150, 0, b"after").expect("set"),
        "SERVER_ERROR fsync failed; queue is read-only until the server restarts"
    );
    let logs = server.logs().join("\n");
    assert!(
        logs.contains("fsync failed"),
        "the failure is logged:\n{logs}"
    );

    server.kill9();
    let server = Server::start(d.path(), &[]);
    let mut c = server.client();
    for i in 200..210 {
        assert_eq!(c.try_set("q", i, 0, b"restarted").expect("set"), "STORED");
        acked.push(i);
    }
    let mut recovered = Vec::new();
    while let Some((flags, _)) = c.get("q") {
        recovered.push(flags);
        assert!(recovered.len() <= 1000, "runaway queue");
    }
    // Every acknowledged message, once and in order. Message 0 was delivered while its
    // removal could not be made durable, so it may be delivered again (at least once);
    // the unacknowledged ones (100..110) may or may not have reached the disk.
    let kept: Vec<u32> = recovered
        .iter()
        .copied()
        .filter(|f| !(100..110).contains(f) && *f != 0)
        .collect();
    assert_eq!(kept, acked[1..].to_vec(), "{recovered:?}");
    let mut dedup = recovered.clone();
    dedup.sort_unstable();
    dedup.dedup();
    assert_eq!(
        dedup.len(),
        recovered.len(),
        "a message came back twice: {recovered:?}"
    );
}

/// Journal writes failing with EIO (libfiu on `pwrite`): each set is refused with a clear
/// `SERVER_ERROR` and not stored; reads go on (a read whose removal record cannot be
/// written is delivered, and may be delivered again after a crash: at least once); once
/// writes work again so do sets, and kill -9 then restart recovers every acknowledged
/// message once, in order.
#[test]
fn journal_write_failure_refuses_sets_and_loses_nothing_acknowledged() {
    let Some((d, server)) = under_fiu() else {
        return;
    };
    let pid = server.pid();
    let mut c = server.client();
    let mut acked: Vec<u32> = Vec::new();
    for i in 0..20 {
        assert_eq!(c.try_set("q", i, 0, b"before").expect("set"), "STORED");
        acked.push(i);
    }
    fiu_ctrl(pid, "enable name=posix/io/rw/pwrite*,failinfo=5");
    for i in 100..110 {
        assert_eq!(
            c.try_set("q", i, 0, b"during").expect("set"),
            "SERVER_ERROR write error storing message"
        );
    }
    let (flags, _) = c.get("q").expect("a read during the fault");
    assert_eq!(flags, 0);
    fiu_ctrl(pid, "disable name=posix/io/rw/pwrite*");
    for i in 200..220 {
        assert_eq!(c.try_set("q", i, 0, b"after").expect("set"), "STORED");
        acked.push(i);
    }
    server.kill9();
    let server = Server::start(d.path(), &[]);
    let mut c = server.client();
    let mut recovered = Vec::new();
    while let Some((flags, _)) = c.get("q") {
        recovered.push(flags);
        assert!(recovered.len() <= 1000, "runaway queue");
    }
    assert!(
        recovered.iter().all(|f| !(100..110).contains(f)),
        "a refused message was stored: {recovered:?}"
    );
    // Message 0 was delivered while its removal could not be written: it may come again.
    let kept: Vec<u32> = recovered.iter().copied().filter(|&f| f != 0).collect();
    assert_eq!(kept, acked[1..].to_vec(), "{recovered:?}");
}

/// Short writes, for real: the process's file-size limit (`RLIMIT_FSIZE`, with SIGXFSZ
/// ignored) stops a segment file at 100 KB, so the record that crosses it is written in
/// part (a short `pwrite`) and the rest fails with EFBIG. Sets are refused from then on
/// with a clear `SERVER_ERROR`; after kill -9 a restart without the limit finds the torn
/// record, drops it, and recovers every acknowledged message once, in order; sets work.
#[test]
fn short_write_at_a_file_size_limit_tears_nothing_acknowledged() {
    let d = tempfile::tempdir().expect("tempdir");
    let wrapper = [
        "bash",
        "-c",
        "trap '' XFSZ; exec prlimit --fsize=102400 \"$@\"",
        "short-write",
    ];
    let server = Server::start_under(
        &wrapper,
        d.path(),
        &["--fsync", "always", "--segment-size", "1m"],
    );
    let mut c = server.client();
    let body = vec![b's'; 700];
    let mut acked: Vec<u32> = Vec::new();
    let mut refused = 0;
    for i in 0..400u32 {
        match c.try_set("q", i, 0, &body).expect("set").as_str() {
            "STORED" => acked.push(i),
            r => {
                assert_eq!(r, "SERVER_ERROR write error storing message", "message {i}");
                refused += 1;
            }
        }
    }
    assert!(refused > 0, "the file-size limit was never reached");
    assert!(acked.len() > 100, "{} acknowledged", acked.len());
    server.kill9();
    let server = Server::start(d.path(), &[]);
    let mut c = server.client();
    let mut recovered = Vec::new();
    while let Some((flags, data)) = c.get("q") {
        assert_eq!(data, body, "message {flags} intact");
        recovered.push(flags);
        assert!(recovered.len() <= 1000, "runaway queue");
    }
    assert_eq!(recovered, acked);
    assert_eq!(c.try_set("q", 9999, 0, b"after").expect("set"), "STORED");
}
