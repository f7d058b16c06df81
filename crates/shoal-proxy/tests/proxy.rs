//! Front-end behaviour: ordering, multi-gets, meta commands, malformed input, the stats
//! endpoint, replicated pools and configuration errors.

mod common;

use std::process::Command;
use std::time::Duration;

use common::*;

fn pool_conf(backends: &[Shoald], extra: &str) -> String {
    let mut s = format!(
        "alpha:\n  listen: 127.0.0.1:0\n  hash: md5\n  distribution: ketama\n  timeout: 1000\n{extra}  servers:\n"
    );
    for b in backends {
        s.push_str(&format!("   - {}:1\n", b.addr));
    }
    s
}

#[test]
fn multi_get_returns_values_in_request_order() {
    let backends = three_backends();
    let proxy = Proxy::start_threads(&pool_conf(&backends, ""), 1, 2);
    let keys: Vec<String> = (0..60).map(|i| format!("mk:{i}")).collect();
    let mut c = proxy.conn();
    for (i, k) in keys.iter().enumerate() {
        if i % 7 != 3 {
            assert_eq!(c.set(k, &format!("v{i}")), "STORED");
        }
    }
    let spread = holders(&backends, &keys);
    let used: std::collections::HashSet<usize> =
        spread.iter().filter_map(|h| h.first().copied()).collect();
    assert_eq!(used.len(), 3, "keys should span all three backends");
    // Reverse order, with duplicates and misses.
    let mut ask: Vec<&str> = keys.iter().rev().map(String::as_str).collect();
    ask.push(keys[0].as_str());
    ask.push("never-set");
    ask.push(keys[10].as_str());
    let got = c.get(&ask).expect("multi-get");
    let want: Vec<(String, String)> = ask
        .iter()
        .filter_map(|k| {
            let i = keys.iter().position(|x| x == k)?;
            (i % 7 != 3).then(|| (k.to_string(), format!("v{i}")))
        })
        .collect();
    assert_eq!(got, want);
    // gets carries CAS values through.
    c.send(format!("gets {} {}\r\n", keys[1], keys[2]).as_bytes());
    let l1 = c.line();
    assert!(l1.starts_with(&format!("VALUE {} 0 2 ", keys[1])), "{l1}");
    c.data(2);
    let l2 = c.line();
    assert!(l2.starts_with(&format!("VALUE {} 0 2 ", keys[2])), "{l2}");
    c.data(2);
    assert_eq!(c.line(), "END");
}

#[test]
fn pipelined_requests_keep_their_order() {
    let backends = three_backends();
    // Also exercises the multi-threaded runtime.
    let proxy = Proxy::start_threads(&pool_conf(&backends, ""), 1, 2);
    let mut c = proxy.conn();
    let mut req = Vec::new();
    for i in 0..300 {
        req.extend_from_slice(
            format!("set p:{i} 0 0 {}\r\n{i}\r\n", i.to_string().len()).as_bytes(),
        );
        req.extend_from_slice(format!("get p:{i} p:{}\r\n", i / 2).as_bytes());
        req.extend_from_slice(format!("incr p:{i} 1\r\n").as_bytes());
    }
    c.send(&req);
    for i in 0..300 {
        assert_eq!(c.line(), "STORED");
        let vals = c.values().expect("get");
        assert_eq!(vals[0], (format!("p:{i}"), i.to_string()));
        assert_eq!(vals[1].0, format!("p:{}", i / 2));
        assert_eq!(c.line(), (i + 1).to_string());
    }
}

#[test]
fn meta_commands_and_quiet_mode() {
    let backends = three_backends();
    let proxy = Proxy::start(&pool_conf(&backends, ""), 1);
    let mut c = proxy.conn();
    c.send(
        b"ms m1 2 T0\r\nhi\r\nmg m1 v\r\nmg missing v q\r\nmg m1 v q k\r\nms m2 1 q\r\n7\r\nmn\r\n",
    );
    assert_eq!(c.line(), "HD");
    assert_eq!(c.line(), "VA 2");
    assert_eq!(c.data(2), b"hi");
    assert_eq!(c.line(), "VA 2 km1");
    assert_eq!(c.data(2), b"hi");
    assert_eq!(c.line(), "MN");
    // base64 keys are hashed decoded: bTE= is m1.
    assert_eq!(c.cmd("mg bTE= b v"), "VA 2");
    assert_eq!(c.data(2), b"hi");
    assert_eq!(c.cmd("ma m2"), "HD");
    assert_eq!(c.cmd("md m2"), "HD");
    assert_eq!(c.cmd("mg m2 v"), "EN");
}

#[test]
fn malformed_requests_get_memcached_errors_without_disturbing_others() {
    let backends = three_backends();
    let proxy = Proxy::start(&pool_conf(&backends, ""), 1);
    let mut good = proxy.conn();
    let mut bad = proxy.conn();
    good.send(b"set g 0 0 1\r\n1\r\n");
    bad.send(
        b"bogus command\r\nset k 0 0 notanumber\r\nincr k abc\r\nset x 0 0 2\r\nabcd\r\nget g\r\n",
    );
    assert_eq!(good.line(), "STORED");
    assert_eq!(bad.line(), "ERROR");
    assert_eq!(bad.line(), "CLIENT_ERROR bad command line format");
    assert_eq!(bad.line(), "CLIENT_ERROR invalid numeric delta argument");
    assert_eq!(bad.line(), "CLIENT_ERROR bad data chunk");
    // What follows the two bytes read as the value ("cd") is a line of its own, too
    // short to be a command: memcached 1.6.45 answers it with a format error. Then the
    // get still works.
    assert_eq!(bad.line(), "CLIENT_ERROR bad command line format");
    assert_eq!(bad.values().expect("get"), vec![("g".into(), "1".into())]);
    good.send(b"get g\r\n");
    assert_eq!(good.values().expect("get"), vec![("g".into(), "1".into())]);
    let long_key = "k".repeat(251);
    assert_eq!(
        good.cmd(&format!("get {long_key}")),
        "CLIENT_ERROR bad command line format"
    );
    // memcached 1.6.45 ends this one error with an empty line too.
    assert_eq!(good.line(), "");
    assert_eq!(good.cmd("version").split(' ').next(), Some("VERSION"));
}

#[test]
fn stats_endpoint_serves_twemproxy_shaped_json() {
    use std::io::Read;
    let backends = three_backends();
    let proxy = Proxy::start(&pool_conf(&backends, ""), 1);
    let mut c = proxy.conn();
    assert_eq!(c.set("s1", "v"), "STORED");
    let mut s = std::net::TcpStream::connect(proxy.stats).expect("stats");
    s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    let mut body = String::new();
    s.read_to_string(&mut body).expect("read");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["service"], "shoal-proxy");
    assert!(v["uptime"].is_u64());
    let pool = &v["alpha"];
    assert_eq!(pool["client_connections"], 1);
    let requests: u64 = backends
        .iter()
        .map(|b| {
            pool[b.addr.to_string()]["requests"]
                .as_u64()
                .expect("server")
        })
        .sum();
    assert_eq!(requests, 1);
}

#[test]
fn replicated_pool_writes_everywhere_and_reads_fail_over() {
    let mut backends = three_backends();
    let proxy = Proxy::start(&pool_conf(&backends, "  replicas: 3\n"), 1);
    let mut c = proxy.conn();
    let keys: Vec<String> = (0..30).map(|i| format!("r:{i}")).collect();
    for k in &keys {
        assert_eq!(c.set(k, "v"), "STORED");
    }
    for h in holders(&backends, &keys) {
        assert_eq!(h, vec![0, 1, 2]);
    }
    backends[0].proc.kill();
    backends[1].proc.kill();
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let got = c.get(&refs).expect("multi-get after failures");
    assert_eq!(got.len(), keys.len());
    for k in &keys[..5] {
        assert_eq!(c.get(&[k.as_str()]).expect("get").len(), 1);
    }
}

fn run_proxy(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(proxy_bin())
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(_st) = child.try_wait().expect("wait") {
            let out = child.wait_with_output().expect("output");
            let text = String::from_utf8_lossy(&out.stderr).into_owned()
                + &String::from_utf8_lossy(&out.stdout);
            return (out.status.code(), text);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            return (None, String::new());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn bad_config_names_line_and_field_and_exits_2() {
    let cases = [
        (
            "alpha:\n  listen: 127.0.0.1:0\n  hash: sha1\n  servers:\n   - 127.0.0.1:1:1\n",
            "line 3: field 'hash'",
        ),
        (
            "alpha:\n  listen: 127.0.0.1:0\n  servers:\n   - 127.0.0.1:1\n",
            "line 4: field 'servers'",
        ),
        (
            "alpha:\n  listen: 127.0.0.1:0\n  timeout: x\n  servers:\n   - a:1:1\n",
            "line 3: field 'timeout'",
        ),
        (
            "alpha:\n  listen: 127.0.0.1:0\n  colour: blue\n  servers:\n   - a:1:1\n",
            "line 3: field 'colour'",
        ),
        ("alpha:\n  listen 127.0.0.1\n", "line 2"),
        (
            "alpha:\n  hash: md5\n  servers:\n   - a:1:1\n",
            "field 'listen'",
        ),
    ];
    for (text, want) in cases {
        let path = write_conf(text);
        let p = path.to_str().expect("path");
        for extra in [&["-t"][..], &[][..]] {
            let mut args = vec!["-c", p];
            args.extend_from_slice(extra);
            let (code, out) = run_proxy(&args);
            assert_eq!(code, Some(2), "{text:?}: {out}");
            assert!(out.contains(want), "{text:?}: wanted {want:?} in {out:?}");
        }
    }
    let (code, _) = run_proxy(&["-c", "/nonexistent/shoal-proxy.yml", "-t"]);
    assert_eq!(code, Some(2));
    let (code, _) = run_proxy(&["--no-such-flag"]);
    assert_eq!(code, Some(2));
    let good = write_conf("alpha:\n  listen: 127.0.0.1:0\n  servers:\n   - 127.0.0.1:11211:1\n");
    let (code, out) = run_proxy(&["-t", "-c", good.to_str().expect("path")]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("syntax is ok"), "{out}");
}

/// A multi-get far larger than one in-flight window is forwarded in batches over all
/// three backends and still returns every hit once, in request order (duplicates and
/// misses included), with the requests pipelined behind it answered after its `END`.
#[test]
fn batched_multi_get_keeps_request_order() {
    let backends = three_backends();
    let proxy = Proxy::start(&pool_conf(&backends, ""), 1);
    let keys: Vec<String> = (0..600).map(|i| format!("bk:{i}")).collect();
    let value = |i: usize| format!("{i:04}{}", "x".repeat(2000));
    let mut c = proxy.conn();
    for chunk in (0..keys.len())
        .filter(|i| i % 5 != 2)
        .collect::<Vec<_>>()
        .chunks(50)
    {
        let mut req = Vec::new();
        for &i in chunk {
            let v = value(i);
            req.extend_from_slice(format!("set {} 0 0 {}\r\n{v}\r\n", keys[i], v.len()).as_bytes());
        }
        c.send(&req);
        for _ in chunk {
            assert_eq!(c.line(), "STORED");
        }
    }
    // 3,000 keys: every key five times in a scrambled order.
    let ask: Vec<usize> = (0..3000).map(|j| (j * 7919) % keys.len()).collect();
    let mut req = b"get".to_vec();
    for &i in &ask {
        req.push(b' ');
        req.extend_from_slice(keys[i].as_bytes());
    }
    req.extend_from_slice(b"\r\nversion\r\n");
    c.send(&req);
    let got = c.values().expect("multi-get");
    let want: Vec<(String, String)> = ask
        .iter()
        .filter(|&&i| i % 5 != 2)
        .map(|&i| (keys[i].clone(), value(i)))
        .collect();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "hits out of order or wrong");
    assert!(c.line().starts_with("VERSION "));
}

/// SIGTERM (watched by shoal-net's acceptor, as in shoald) stops the proxy: it exits 0
/// and removes its pid file.
#[test]
fn sigterm_stops_the_proxy() {
    let backend = Shoald::start();
    let path = write_conf(&pool_conf(std::slice::from_ref(&backend), ""));
    let pid_file =
        std::env::temp_dir().join(format!("shoal-proxy-sigterm-{}.pid", std::process::id()));
    let mut cmd = Command::new(proxy_bin());
    cmd.arg("-c")
        .arg(&path)
        .args(["-s", "-1", "-p"])
        .arg(&pid_file);
    let mut proc = Proc::spawn(cmd);
    let addr = proc.wait_for(" listening on ").parse().expect("pool addr");
    let mut c = Conn::connect(addr);
    assert_eq!(c.set("k", "v"), "STORED");
    let pid = i32::try_from(proc.child.id()).expect("pid");
    // SAFETY: kill(2) with a pid this test started and a valid signal number.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(status) = proc.child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still running 5 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    assert!(!pid_file.exists(), "pid file left behind");
}
