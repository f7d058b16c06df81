//! `shoal-bench all --smoke` end to end (seconds), and the command line's refusals.

mod common;

use std::process::Command;

fn bench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_shoal-bench"))
}

#[test]
fn all_smoke_writes_a_report() {
    let shoald = common::workspace_bin("SHOALD_BIN", "shoald");
    let queued = common::workspace_bin("SHOAL_QUEUED_BIN", "shoal-queued");
    let out = std::env::temp_dir().join(format!("shoal-bench-smoke-{}", std::process::id()));
    let t = std::time::Instant::now();
    let o = bench()
        .args(["all", "--smoke", "--out"])
        .arg(&out)
        .arg("--shoald")
        .arg(&shoald)
        .arg("--shoal-queued")
        .arg(&queued)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(
        t.elapsed().as_secs() < 60,
        "smoke run took {:?}",
        t.elapsed()
    );
    let md = std::fs::read_to_string(out.join("results.md")).expect("results.md");
    for section in ["## hash", "## cas", "## compare", "## queue", "Machine:"] {
        assert!(md.contains(section), "{section} missing:\n{md}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).expect("json"))
            .expect("valid JSON");
    assert!(json["experiments"]["cas"]["rows"]
        .as_array()
        .is_some_and(|r| !r.is_empty()));
    assert!(json["machine"]["nproc"].as_u64().is_some_and(|n| n >= 1));
    for png in [
        "hash_speed.png",
        "cas_success_rate.png",
        "queue_throughput.png",
    ] {
        let bytes = std::fs::read(out.join(png)).unwrap_or_else(|e| panic!("{png}: {e}"));
        assert_eq!(&bytes[1..4], b"PNG");
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bad_input_is_refused_with_a_message() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["load", "-s", "127.0.0.1:1", "-t", "100ms", "--no-prefill"],
            "connect to",
        ),
        (&["load", "--value-size", "256-20"], "min above max"),
        (&["load", "--key-dist", "zipfian:2"], "theta"),
        (&["load", "-s", "127.0.0.1:1,127.0.0.1:2"], "--placement"),
        (&["load", "--rate=0"], "--rate"),
        (&["load", "-c", "1", "-T", "2"], "--conns"),
        (&["cas", "--target", "nosuch=127.0.0.1:1"], "must be shoald"),
        (
            &["cas", "--target", "memcached=127.0.0.1:1"],
            "not reachable",
        ),
        (&["hash", "--quick", "--smoke"], "cannot be used with"),
    ];
    for (args, want) in cases {
        let o = bench().args(*args).output().expect("runs");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn a_server_answering_errors_fails_the_run_and_targets_are_used() {
    let shoald = common::workspace_bin("SHOALD_BIN", "shoald");
    let srv = shoal_bench::server::ServerProcess::start_shoald(&shoald, &[]).expect("shoald");
    let addr = srv.addr.to_string();
    // RESP to a memcached-protocol server: it answers ERROR, which is no RESP reply.
    let o = bench()
        .args([
            "load", "-s", &addr, "-P", "resp", "-t", "200ms", "-w", "0s", "-c", "2",
        ])
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("unexpected reply"), "{err}");
    // An experiment against a running server: nothing is started, the target is used.
    let o = bench()
        .args(["cas", "--smoke", "--memcached", "/nonexistent/memcached"])
        .arg("--target")
        .arg(format!("shoald={addr}"))
        .output()
        .expect("runs");
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("| shoald | gets+cas |"), "{out}");
    assert!(err.contains("skipped: memcached: not found"), "{err}");
    assert!(out.contains("apt-get install memcached"), "{out}");
}
