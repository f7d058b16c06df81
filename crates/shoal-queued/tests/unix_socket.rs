//! MemcacheQ's `-s`: shoal-queued on a unix socket instead of TCP, with `-a`'s
//! permissions, the socket removed at a clean stop.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn serves_on_a_unix_socket() {
    let d = tempfile::tempdir().expect("tempdir");
    let sock = d.path().join("queued.sock");
    let mut child = Command::new(common::bin())
        .args(["-v", "-t", "1", "-a", "750", "-d"])
        .arg(d.path().join("data"))
        .arg("-s")
        .arg(&sock)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    loop {
        let l = lines.next().expect("a log line").expect("utf8");
        if l.contains("listening on unix:") {
            break;
        }
    }
    let mode = std::fs::metadata(&sock)
        .expect("socket")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o750);
    let mut s = UnixStream::connect(&sock).expect("connect");
    s.set_read_timeout(Some(common::IO_TIMEOUT))
        .expect("timeout");
    s.write_all(b"set q 0 0 5\r\nhello\r\nget q\r\n")
        .expect("write");
    let want = b"STORED\r\nVALUE q 0 5\r\nhello\r\nEND\r\n";
    let mut got = vec![0u8; want.len()];
    s.read_exact(&mut got).expect("read");
    assert_eq!(got, want);
    drop(s);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(st) = child.try_wait().expect("wait") {
            assert!(st.success());
            break;
        }
        assert!(Instant::now() < deadline, "did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!sock.exists(), "the socket is removed at a clean stop");
}
