//! A full disk, for real: the data directory on a tiny tmpfs. Enqueues fail with a clear
//! SERVER_ERROR, nothing stored is lost, and service resumes once space returns. Skipped
//! (with a note) where mounting a tmpfs is not permitted.

mod common;

use common::Server;
use std::path::Path;
use std::process::Command;

struct Mount(std::path::PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

fn mount_tmpfs(dir: &Path, size: &str) -> Option<Mount> {
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(dir)
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    ok.then(|| Mount(dir.to_path_buf()))
}

/// shoal-queued (64 KiB segments, `--fsync always`) with its data directory on a 256 KiB
/// tmpfs; `None` after a note where mounting is not permitted.
fn on_a_full_disk() -> Option<(tempfile::TempDir, Mount, std::path::PathBuf, Server)> {
    let d = tempfile::tempdir().expect("tempdir");
    let Some(mount) = mount_tmpfs(d.path(), "256k") else {
        eprintln!("skipping: cannot mount a tmpfs here");
        return None;
    };
    let data = d.path().join("data");
    let server = Server::start(&data, &["--segment-size", "64k", "--fsync", "always"]);
    Some((d, mount, data, server))
}

#[test]
fn full_disk_refuses_then_recovers() {
    let Some((_d, _mount, data, server)) = on_a_full_disk() else {
        return;
    };
    let mut c = server.client();
    let body = vec![b'm'; 1000];
    let mut stored = 0u32;
    let mut refused = None;
    for i in 0..1000u32 {
        let r = c.try_set("full", i, 0, &body).expect("set");
        if r == "STORED" {
            stored += 1;
        } else {
            refused = Some(r);
            break;
        }
    }
    assert_eq!(
        refused.as_deref(),
        Some("SERVER_ERROR out of disk space storing message"),
        "after {stored} messages"
    );
    assert!(stored > 50, "{stored}");
    assert!(c.stat("write_errors").is_some_and(|v| v != "0"));
    // Consuming frees whole segments, after which enqueues work again.
    let mut got = 0u32;
    for i in 0..stored / 2 {
        let (flags, data) = c.get("full").expect("stored message");
        assert_eq!((flags, data.len()), (i, body.len()));
        got += 1;
    }
    // Segments are unlinked in the background; space comes back within moments.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while c.try_set("full", 7777, 0, &body).expect("set") != "STORED" {
        assert!(
            std::time::Instant::now() < deadline,
            "space never came back"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // Restart: every stored, unconsumed message is still there, in order.
    let st = server.signal_and_wait(libc::SIGTERM);
    assert_eq!(st.code(), Some(0));
    let server = Server::start(&data, &[]);
    let mut c = server.client();
    for i in got..stored {
        let (flags, _) = c.get("full").expect("message kept across the full disk");
        assert_eq!(flags, i);
    }
    assert_eq!(c.get("full").map(|(f, _)| f), Some(7777));
    assert_eq!(c.get("full"), None);
}

/// A message body that says which message it is, of a size that varies (so the write the
/// full disk refuses is most often cut part-way through, not at a record boundary).
fn numbered(i: u32) -> Vec<u8> {
    let len = 600 + (i as usize * 397) % 2400;
    let mut b = format!("msg-{i:08}-").into_bytes();
    b.resize(len, b'a' + (i % 26) as u8);
    b
}

/// A full disk, then kill -9: every message acknowledged before, between and after the
/// refusals is recovered exactly once, intact and in order; none refused comes back; no
/// torn record left by a write cut short by ENOSPC hides the messages written after it.
#[test]
fn full_disk_then_kill9_loses_nothing_acknowledged() {
    let Some((_d, _mount, data, server)) = on_a_full_disk() else {
        return;
    };
    let mut c = server.client();
    let mut acked: Vec<u32> = Vec::new();
    let mut refusals = 0;
    let mut next = 0u32;
    let mut consumed = 0usize;
    // Three rounds: fill until refused (a few refusals in a row), then consume half.
    for _ in 0..3 {
        let mut in_a_row = 0;
        while in_a_row < 3 {
            let r = c.try_set("q", next, 0, &numbered(next)).expect("set");
            if r == "STORED" {
                acked.push(next);
                in_a_row = 0;
            } else {
                assert_eq!(r, "SERVER_ERROR out of disk space storing message");
                refusals += 1;
                in_a_row += 1;
            }
            next += 1;
            assert!(next < 10_000, "the disk never filled");
        }
        let target = consumed + (acked.len() - consumed) / 2;
        while consumed < target {
            let (flags, body) = c.get("q").expect("a stored message");
            assert_eq!(flags, acked[consumed]);
            assert_eq!(body, numbered(flags), "message {flags} intact");
            consumed += 1;
        }
        // Let the consumed segments go before the next round.
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert!(refusals >= 9, "{refusals}");
    server.kill9();
    let server = Server::start(&data, &[]);
    let mut c = server.client();
    for &want in &acked[consumed..] {
        let (flags, body) = c
            .get("q")
            .expect("acknowledged message kept across kill -9");
        assert_eq!(flags, want);
        assert_eq!(body, numbered(want), "message {want} intact");
    }
    assert_eq!(c.get("q"), None, "nothing refused or consumed came back");
}
