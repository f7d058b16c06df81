//! `shoal-bench soak` against shoald for five seconds: the chart and both summaries are
//! written and the RSS was sampled; and the command's refusals.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

fn bench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_shoal-bench"))
}

#[test]
fn a_short_soak_writes_the_chart_and_summaries() {
    let shoald = common::workspace_bin("SHOALD_BIN", "shoald");
    let out = std::env::temp_dir().join(format!("shoal-bench-soak-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let t = Instant::now();
    let o = bench()
        .args(["soak", "--server", "shoald", "--duration", "5s", "--out"])
        .arg(&out)
        .arg("--bin")
        .arg(&shoald)
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    // The verdict is shoald's memory behaviour, not this test's business: a pass exits 0,
    // a fail verdict exits nonzero saying so; anything else is a broken command.
    assert!(
        o.status.success() || stderr.contains("soak failed: max RSS after warm-up"),
        "{stderr}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "took {:?}",
        t.elapsed()
    );
    assert!(stdout.contains("# Soak: shoald"), "{stdout}");
    assert!(
        stderr.contains("budget 64 MiB (-m) + 64 MiB fixed"),
        "{stderr}"
    );

    let png = std::fs::read(out.join("soak-shoald.png")).expect("soak-shoald.png");
    assert_eq!(&png[1..4], b"PNG");
    assert!(png.len() > 2000);

    let md = std::fs::read_to_string(out.join("soak-shoald.md")).expect("soak-shoald.md");
    for want in [
        "max after warm-up",
        "Verdict: ",
        "![RSS over time](soak-shoald.png)",
    ] {
        assert!(md.contains(want), "{want} missing:\n{md}");
    }

    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("soak-shoald.json")).expect("soak-shoald.json"),
    )
    .expect("valid JSON");
    let samples = json["samples"].as_array().expect("samples");
    // One a second from 0 s to 5 s.
    assert!(samples.len() >= 5, "{samples:?}");
    assert!(samples
        .iter()
        .all(|s| s["rss_mb"].as_f64().is_some_and(|v| v > 0.0)));
    assert!(json["rss"]["max_after_warmup_mb"].as_f64().is_some());
    assert!(json["counts"]["gets"].as_u64().is_some_and(|n| n > 0));
    assert!(json["counts"]["sets"].as_u64().is_some_and(|n| n > 0));
    assert!(json["counts"]["connects"].as_u64().is_some_and(|n| n > 100));
    assert_eq!(json["server_survived"], true);
    assert_eq!(json["pass"].as_bool(), Some(o.status.success()));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn soak_refuses_bad_options() {
    let shoald = common::workspace_bin("SHOALD_BIN", "shoald");
    let shoald = shoald.to_string_lossy();
    let cases: &[(&[&str], &str)] = &[
        (&["soak", "--server", "redis"], "invalid value"),
        (
            &["soak", "--server", "shoald", "--bin", &shoald, "-t", "1s"],
            "at least 2s",
        ),
        (
            &[
                "soak",
                "--server",
                "shoald",
                "--bin",
                &shoald,
                "--slow-readers",
                "2",
            ],
            "--slow-readers",
        ),
        (
            &["soak", "--server", "shoald", "--bin", "/nonexistent/shoald"],
            "does not exist",
        ),
    ];
    for (args, want) in cases {
        let o = bench().args(*args).output().expect("runs");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}
