//! Ruby Dalli (Debian's `ruby-dalli`, a binary-protocol client) through shoal-proxy over
//! three shoald backends: `tests/ruby/dalli_proxy.rb` runs every command Dalli has,
//! multi-gets over all three servers and SASL PLAIN at the proxy, once through server
//! pools and once through route pools over the same servers (a failover route, one with
//! SASL), with `--threads 2`. Ruby and Dalli are peers: CI requires them, a plain
//! `cargo test` prints SKIPPED without them.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

/// `ruby`, with Dalli loadable; `None` (after the peer rule's SKIPPED line, or a panic
/// under `SHOAL_REQUIRE_PEERS`) when either is missing.
fn ruby_with_dalli() -> Option<std::path::PathBuf> {
    let ruby = shoal_test_support::peer("ruby", "ruby")?;
    let loads = Command::new(&ruby)
        .args(["-e", "require 'dalli'"])
        .output()
        .is_ok_and(|o| o.status.success());
    if loads {
        return Some(ruby);
    }
    let why = "Dalli is not installed (apt-get install -y ruby-dalli)";
    assert!(
        std::env::var_os("SHOAL_REQUIRE_PEERS").is_none(),
        "{why}; SHOAL_REQUIRE_PEERS is set, so this test may not skip"
    );
    eprintln!("SKIPPED: {why}");
    None
}

fn pool(name: &str, backends: &[Shoald], extra: &str) -> String {
    let mut s = format!(
        "{name}:\n  listen: 127.0.0.1:0\n  hash: md5\n  timeout: 2000\n{extra}  servers:\n"
    );
    for b in backends {
        s.push_str(&format!("   - {}:1\n", b.addr));
    }
    s
}

/// Runs the Dalli script against `plain` and `sasl` (ports), expecting STAT to name
/// `pool_name`; panics with its output unless every check passed.
fn run_dalli(ruby: &std::path::Path, plain: u16, sasl: u16, pool_name: &str) {
    let script = shoal_test_support::workspace_root().join("tests/ruby/dalli_proxy.rb");
    let mut child = Command::new(ruby)
        .arg(&script)
        .arg(plain.to_string())
        .arg(sasl.to_string())
        .arg(pool_name)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run ruby");
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the Dalli script did not finish in 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    eprintln!("{text}");
    assert!(
        out.status.success(),
        "Dalli through shoal-proxy ({pool_name}) failed:\n{text}"
    );
    assert!(text.contains("checks passed"), "{text}");
}

#[test]
fn dalli_through_the_proxy() {
    let Some(ruby) = ruby_with_dalli() else {
        return;
    };
    let backends = three_backends();
    let backup = Shoald::start();
    let sasl = "  sasl:\n    users:\n      - alice:wonderland\n";
    let failover = "  route:\n    type: failover\n    pools: [main, backup]\n";
    let mut conf = pool("plain", &backends, "") + &pool("secure", &backends, sasl);
    conf += &format!("fo:\n  listen: 127.0.0.1:0\n{failover}");
    conf += &format!("secure_fo:\n  listen: 127.0.0.1:0\n{sasl}{failover}");
    conf += &pool("main", &backends, "").replace("  listen: 127.0.0.1:0\n", "");
    conf +=
        &pool("backup", std::slice::from_ref(&backup), "").replace("  listen: 127.0.0.1:0\n", "");
    let proxy = Proxy::start_threads(&conf, 4, 2);
    let port = |i: usize| proxy.pools[i].port();
    run_dalli(&ruby, port(0), port(1), "plain");
    run_dalli(&ruby, port(2), port(3), "fo");
    // The multi-gets really spanned every server (through the route too: the route's
    // writes all went to main, whose servers are the same three).
    let keys: Vec<String> = (0..300).map(|i| format!("key{i}")).collect();
    let held = holders(&backends, &keys);
    for b in 0..3 {
        assert!(
            held.iter().any(|h| h.contains(&b)),
            "server {b} holds none of the keys"
        );
    }
    assert!(
        holders(std::slice::from_ref(&backup), &keys)
            .iter()
            .all(Vec::is_empty),
        "nothing failed over to backup"
    );
}
