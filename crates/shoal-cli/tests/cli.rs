//! Runs the real `shoal` binary.

use std::process::{Command, Output};

fn shoal(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shoal"))
        .args(args)
        .output()
        .expect("shoal runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn locates_keys_like_the_library() {
    // twemproxy's ketama over the vectors' servers; "a" goes to index 1 there with
    // one_at_a_time (twemproxy.jsonl line 1).
    let o = shoal(&[
        "ring",
        "--distribution",
        "twemproxy-ketama",
        "--hash",
        "one_at_a_time",
        "--servers",
        "127.0.0.1:31212:1,127.0.0.1:31213:1,127.0.0.1:31214:2",
        "a",
        "foo",
    ]);
    assert!(o.status.success(), "{o:?}");
    let text = stdout(&o);
    assert!(text.contains("a\t127.0.0.1:31213\n"), "{text}");
    assert!(text.contains("foo\t127.0.0.1:31212\n"), "{text}");
}

#[test]
fn ketama_with_weights_prints_one_line_per_key() {
    let o = shoal(&[
        "ring",
        "--distribution",
        "ketama",
        "--hash",
        "md5",
        "--servers",
        "10.0.0.1:11211:1,10.0.0.2:11211:2",
        "k1",
        "k2",
        "k3",
    ]);
    assert!(o.status.success(), "{o:?}");
    let text = stdout(&o);
    assert!(
        text.starts_with("# distribution=ketama_weighted hash=md5\n"),
        "{text}"
    );
    assert_eq!(text.lines().filter(|l| l.starts_with('k')).count(), 3);
}

#[test]
fn compare_counts_moved_keys() {
    let o = shoal(&[
        "ring",
        "-d",
        "ketama-weighted",
        "--servers",
        "10.0.0.1:11211,10.0.0.2:11211,10.0.0.3:11211",
        "--compare",
        "10.0.0.1:11211,10.0.0.2:11211,10.0.0.3:11211,10.0.0.4:11211",
        "--keys",
        "20000",
    ]);
    assert!(o.status.success(), "{o:?}");
    let text = stdout(&o);
    let line = text
        .lines()
        .find(|l| l.starts_with("moved "))
        .expect("summary");
    let moved: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    // Ideal is 1/4 of 20000 = 5000.
    assert!((3500..6500).contains(&moved), "{line}");

    // Modulo moves most keys for the same change.
    let o = shoal(&[
        "ring",
        "-d",
        "modula",
        "--servers",
        "10.0.0.1:11211,10.0.0.2:11211,10.0.0.3:11211",
        "--compare",
        "10.0.0.1:11211,10.0.0.2:11211,10.0.0.3:11211,10.0.0.4:11211",
        "--keys",
        "20000",
    ]);
    let text = stdout(&o);
    let line = text
        .lines()
        .find(|l| l.starts_with("moved "))
        .expect("summary");
    let moved: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(moved > 12_000, "{line}");
}

#[test]
fn bad_input_fails_cleanly() {
    for args in [
        &["ring", "--servers", "", "k"][..],
        &["ring", "--servers", "10.0.0.1:11211:0", "k"],
        &["ring", "--servers", "10.0.0.1:11211,10.0.0.1:11211", "k"],
        &["ring", "--servers", "10.0.0.1:11211", ""],
        &["ring", "--servers", "10.0.0.1", "k"],
        &["ring", "--servers", "10.0.0.1:11211", "-d", "nope", "k"],
        &["ring", "--servers", "10.0.0.1:11211", "--hash", "nope", "k"],
        &["ring", "--servers", "10.0.0.1:11211"],
        &[
            "ring",
            "-d",
            "xmemcached-ketama",
            "--servers",
            "cache-a:11211",
            "k",
        ],
    ] {
        let o = shoal(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.starts_with("shoal ring: "), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
