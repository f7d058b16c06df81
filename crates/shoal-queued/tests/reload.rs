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

/// Kestrel's `dump_config` shows each queue's configuration in force, reloads included.
#[test]
fn dump_config_shows_the_config_in_force() {
    let d = tempfile::tempdir().expect("tempdir");
    let conf = d.path().join("queues.conf");
    std::fs::write(
        &conf,
        "jobs max_items=5 expire_to=dead max_age=1m sync_journal=always\nfast keep_journal=false\n",
    )
    .expect("write");
    let s = Server::start(
        &d.path().join("data"),
        &[
            "--queue-config",
            conf.to_str().expect("utf8"),
            "--max-bytes",
            "1k",
        ],
    );
    let mut c = s.client();
    c.set("jobs", b"x");
    c.set("fast", b"y");
    let dump = |c: &mut common::Client| c.lines_until_end("dump_config");
    let got = dump(&mut c);
    assert_eq!(got[0], "queue 'fast' {", "by name");
    for want in [
        "  max_items=5",
        "  max_size=1024",
        "  max_age=60",
        "  expire_to=dead",
        "  discard_old_when_full=false",
        "  sync_journal=always",
        "  keep_journal=true",
        "  keep_journal=false",
        "  sync_journal=never",
    ] {
        assert!(got.iter().any(|l| l == want), "{want} in {got:?}");
    }
    assert_eq!(got.last().map(String::as_str), Some("}"));
    std::fs::write(&conf, "jobs max_items=7\n").expect("write");
    assert_eq!(c.cmd("reload"), "Reloaded config.");
    let got = dump(&mut c);
    assert!(got.iter().any(|l| l == "  max_items=7"), "{got:?}");
    assert!(got.iter().any(|l| l == "  expire_to="), "{got:?}");
}
