//! `reload` and SIGHUP re-read the queue config and apply it to existing queues, with no
//! connection dropped (Kestrel answers `Reloaded config.`).

mod common;

use common::Server;

#[test]
fn reload_command_and_sighup_apply_limits_to_existing_queues() {
    let d = tempfile::tempdir().expect("tempdir");
    let conf = d.path().join("queues.conf");
    std::fs::write(&conf, "jobs max_items=5\n").expect("write");
    let s = Server::start(
        &d.path().join("data"),
        &["--queue-config", conf.to_str().expect("utf8")],
    );
    let mut c = s.client();
    for i in 0..3 {
        assert_eq!(c.set("jobs", format!("{i}").as_bytes()), "STORED");
    }
    std::fs::write(&conf, "jobs max_items=3\n").expect("write");
    assert_eq!(c.cmd("reload"), "Reloaded config.");
    assert_eq!(
        c.set("jobs", b"x"),
        "NOT_STORED",
        "the new limit, on the same connection"
    );
    assert_eq!(c.get_str("jobs").as_deref(), Some("0"));
    assert_eq!(c.set("jobs", b"3"), "STORED");
    // A bad file changes nothing and says why.
    std::fs::write(&conf, "jobs max_items=lots\n").expect("write");
    let r = c.cmd("reload");
    assert!(
        r.starts_with("SERVER_ERROR ") && r.contains("max_items"),
        "{r}"
    );
    assert_eq!(c.set("jobs", b"y"), "NOT_STORED");
    // SIGHUP does the same as `reload`.
    std::fs::write(&conf, "jobs max_items=10 discard_old_when_full=true\n").expect("write");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(s.pid() as i32, libc::SIGHUP) };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while c.set("jobs", b"z") != "STORED" {
        assert!(
            std::time::Instant::now() < deadline,
            "SIGHUP did not reload"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(
        c.cmd("version").split(' ').next(),
        Some("VERSION"),
        "still connected"
    );
}
