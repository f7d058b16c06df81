//! Authentication against a real shoald: binary SASL PLAIN (`-S`) and memcached's ASCII
//! authentication (`-Y`). Wrong passwords and missing auth are refused for every command,
//! text connections to a SASL server are refused, and repeated failures are slowed down.

mod common;

use common::binproto::{self as bp, op, status};
use common::{show, Conn, Server};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A password file removed when dropped.
struct PwFile(PathBuf);

impl PwFile {
    fn new(tag: &str, contents: &str) -> PwFile {
        let path =
            std::env::temp_dir().join(format!("shoal-auth-{tag}-{}.pwdb", std::process::id()));
        std::fs::write(&path, contents).expect("write password file");
        PwFile(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("utf-8 temp path")
    }
}

impl Drop for PwFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

const USERS: &str = "# test users\nalice:wonderland\nbob:pa ss:word\n";

fn plain(user: &str, pass: &str) -> Vec<u8> {
    format!("\0{user}\0{pass}").into_bytes()
}

fn sasl_auth(c: &mut Conn, mech: &[u8], user: &str, pass: &str) -> bp::Resp {
    bp::rt(
        c,
        &bp::packet(op::SASL_AUTH, &[], mech, &plain(user, pass), 0x5a51, 0),
    )
}

fn sasl_server(tag: &str) -> (Server, PwFile) {
    let pw = PwFile::new(tag, USERS);
    let s = Server::with_args(&["-S", "--sasl-pwdb", pw.path()]);
    (s, pw)
}

#[test]
fn sasl_lists_plain() {
    let (s, _pw) = sasl_server("mechs");
    let mut c = s.conn();
    let r = bp::expect_status(
        &mut c,
        &bp::packet(op::SASL_LIST_MECHS, &[], &[], &[], 3, 0),
        status::OK,
    );
    assert_eq!((r.opaque, r.text().as_str()), (3, "PLAIN"));
}

#[test]
fn sasl_unauthenticated_commands_are_refused() {
    let (s, _pw) = sasl_server("unauth");
    let mut c = s.conn();
    let refused: Vec<Vec<u8>> = vec![
        bp::simple(op::GET, b"k"),
        bp::simple(op::GETQ, b"k"),
        bp::simple(op::GETK, b"k"),
        bp::store(op::SET, b"k", b"v", 0, 0, 0),
        bp::store(op::SETQ, b"k", b"v", 0, 0, 0),
        bp::store(op::ADD, b"k", b"v", 0, 0, 0),
        bp::store(op::REPLACE, b"k", b"v", 0, 0, 0),
        bp::packet(op::APPEND, &[], b"k", b"v", 0, 0),
        bp::packet(op::PREPEND, &[], b"k", b"v", 0, 0),
        bp::simple(op::DELETE, b"k"),
        bp::packet(op::INCR, &bp::arith_extras(1, 0, 0), b"k", &[], 0, 0),
        bp::packet(op::DECR, &bp::arith_extras(1, 0, 0), b"k", &[], 0, 0),
        bp::simple(op::FLUSH, b""),
        bp::simple(op::NOOP, b""),
        bp::simple(op::STAT, b""),
        bp::packet(op::VERBOSITY, &1u32.to_be_bytes(), &[], &[], 0, 0),
        bp::packet(op::TOUCH, &0u32.to_be_bytes(), b"k", &[], 0, 0),
        bp::packet(op::GAT, &0u32.to_be_bytes(), b"k", &[], 0, 0),
        bp::packet(op::GATK, &0u32.to_be_bytes(), b"k", &[], 0, 0),
    ];
    for (i, req) in refused.iter().enumerate() {
        let mut req = req.clone();
        req[12..16].copy_from_slice(&(i as u32).to_be_bytes());
        let r = bp::rt(&mut c, &req);
        assert_eq!(
            (r.opcode, r.status, r.opaque),
            (req[1], status::AUTH_ERROR, i as u32),
            "{r:?}"
        );
    }
    // version is allowed.
    let v = bp::expect_status(&mut c, &bp::simple(op::VERSION, b""), status::OK);
    assert!(!v.value.is_empty());
    // Nothing was stored behind the refusals.
    assert_eq!(
        sasl_auth(&mut c, b"PLAIN", "alice", "wonderland").status,
        status::OK
    );
    assert_eq!(bp::get(&mut c, b"k"), None);
    // quit is allowed before auth too.
    let mut c = s.conn();
    bp::expect_status(&mut c, &bp::simple(op::QUIT, b""), status::OK);
    c.expect_closed();
}

#[test]
fn sasl_wrong_password_user_or_mechanism_fails() {
    let (s, _pw) = sasl_server("wrong");
    for (mech, user, pass) in [
        (&b"PLAIN"[..], "alice", "wonderlan"),
        (b"PLAIN", "alice", "wonderland!"),
        (b"PLAIN", "alice", ""),
        (b"PLAIN", "carol", "wonderland"),
        (b"CRAM-MD5", "alice", "wonderland"),
    ] {
        let mut c = s.conn();
        let r = sasl_auth(&mut c, mech, user, pass);
        assert_eq!(
            (r.status, r.opaque),
            (status::AUTH_ERROR, 0x5a51),
            "{user}/{pass}: {r:?}"
        );
        // Still unauthenticated afterwards.
        bp::expect_status(&mut c, &bp::simple(op::GET, b"k"), status::AUTH_ERROR);
    }
    // A malformed PLAIN message (no NULs).
    let mut c = s.conn();
    let r = bp::rt(
        &mut c,
        &bp::packet(op::SASL_AUTH, &[], b"PLAIN", b"alicewonderland", 0, 0),
    );
    assert_eq!(r.status, status::AUTH_ERROR);
    assert!(
        s.wait_log("authentication failure", Duration::from_secs(5))
            .is_some(),
        "failures are logged"
    );
    // And counted, as memcached's auth_cmds / auth_errors.
    let mut c = s.conn();
    assert_eq!(
        sasl_auth(&mut c, b"PLAIN", "alice", "wonderland").status,
        status::OK
    );
    let stats = binary_stats(&mut c);
    assert_eq!(
        stats.get("auth_cmds").map(String::as_str),
        Some("7"),
        "{stats:?}"
    );
    assert_eq!(
        stats.get("auth_errors").map(String::as_str),
        Some("6"),
        "{stats:?}"
    );
}

/// General stats over the binary protocol.
fn binary_stats(c: &mut Conn) -> std::collections::HashMap<String, String> {
    c.send(&bp::simple(op::STAT, b""));
    let mut out = std::collections::HashMap::new();
    loop {
        let r = bp::read(c);
        assert_eq!(r.status, status::OK, "{r:?}");
        if r.key.is_empty() {
            return out;
        }
        out.insert(show(&r.key), r.text());
    }
}

#[test]
fn sasl_correct_plain_then_commands_work() {
    let (s, _pw) = sasl_server("ok");
    let mut c = s.conn();
    let r = sasl_auth(&mut c, b"PLAIN", "bob", "pa ss:word");
    assert_eq!((r.status, r.opaque), (status::OK, 0x5a51), "{r:?}");
    bp::set(&mut c, b"k", b"v", 7);
    assert_eq!(
        bp::get(&mut c, b"k").map(|v| (v.0, v.1)),
        Some((7, b"v".to_vec()))
    );
    let r = bp::expect_status(
        &mut c,
        &bp::packet(op::INCR, &bp::arith_extras(1, 5, 0), b"n", &[], 0, 0),
        status::OK,
    );
    assert_eq!(r.counter(), 5);
    bp::expect_only_noop(&mut c);
    // Authentication is per connection.
    let mut other = s.conn();
    bp::expect_status(&mut other, &bp::simple(op::GET, b"k"), status::AUTH_ERROR);
}

#[test]
fn sasl_pwdb_from_environment() {
    let pw = PwFile::new("env", USERS);
    let s = Server::with_env(&["-S"], &[("MEMCACHED_SASL_PWDB", pw.path())]);
    let mut c = s.conn();
    assert_eq!(
        sasl_auth(&mut c, b"PLAIN", "alice", "wonderland").status,
        status::OK
    );
    bp::set(&mut c, b"k", b"v", 0);
    // And -S without any password database refuses to start.
    let (code, err) = common::run_to_exit(&["-S", "-p", "-1", "-l", "127.0.0.1"]);
    assert_ne!(code, Some(0), "{err}");
    assert!(code.is_some(), "shoald -S without a pwdb kept running");
}

#[test]
fn text_connection_to_sasl_server_is_refused() {
    let (s, _pw) = sasl_server("text");
    for req in [
        &b"set a 0 0 1\r\nx\r\nget a\r\n"[..],
        b"get a\r\n",
        b"stats\r\n",
        b"mg a v\r\n",
        b"version\r\n",
    ] {
        let mut c = s.conn();
        c.send_lossy(req);
        let (got, closed) = c.drain_for(Duration::from_secs(3));
        let text = show(&got);
        assert!(closed, "text connection left open; got {text:?}");
        for served in ["STORED", "VALUE", "END", "STAT", "VA ", "VERSION"] {
            assert!(!text.contains(served), "text client was served: {text:?}");
        }
    }
    // Nothing was stored.
    let mut c = s.conn();
    assert_eq!(
        sasl_auth(&mut c, b"PLAIN", "alice", "wonderland").status,
        status::OK
    );
    assert_eq!(bp::get(&mut c, b"a"), None);
}

#[test]
fn repeated_sasl_failures_are_slowed_down() {
    let (s, _pw) = sasl_server("slow");
    let mut c = s.conn();
    let mut took = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        let r = sasl_auth(&mut c, b"PLAIN", "alice", "guess");
        took.push(started.elapsed());
        assert_eq!(r.status, status::AUTH_ERROR);
    }
    assert!(
        took[2] > took[0] + Duration::from_millis(150),
        "third failure answered as fast as the first: {took:?}"
    );
    // A fresh connection with the right password is served.
    let mut c = s.conn();
    assert_eq!(
        sasl_auth(&mut c, b"PLAIN", "alice", "wonderland").status,
        status::OK
    );
}

#[test]
fn failures_on_fresh_connections_are_slowed_down_too() {
    // One guess per connection, as a brute-forcer would do to dodge per-connection delays.
    let (s, _pw) = sasl_server("flood");
    let mut took = Vec::new();
    for _ in 0..4 {
        let mut c = s.conn();
        let started = Instant::now();
        let r = sasl_auth(&mut c, b"PLAIN", "alice", "guess");
        took.push(started.elapsed());
        assert_eq!(r.status, status::AUTH_ERROR);
    }
    assert!(
        took[3] > took[0] + Duration::from_millis(300),
        "a flood over fresh connections is not slowed: {took:?}"
    );
    assert!(took[0] >= Duration::from_millis(150), "{took:?}");
    // The right password still gets in.
    let mut c = s.conn();
    assert_eq!(
        sasl_auth(&mut c, b"PLAIN", "alice", "wonderland").status,
        status::OK
    );
}

fn ascii_server(tag: &str) -> (Server, PwFile) {
    let pw = PwFile::new(tag, USERS);
    let s = Server::with_args(&["-Y", pw.path()]);
    (s, pw)
}

#[test]
fn ascii_auth_refuses_everything_before_auth() {
    let (s, _pw) = ascii_server("ascii-pre");
    let mut c = s.conn();
    for req in [
        &b"get x\r\n"[..],
        b"gets x\r\n",
        b"add x 0 0 1\r\nv\r\n",
        b"replace x 0 0 1\r\nv\r\n",
        b"append x 0 0 1\r\nv\r\n",
        b"delete x\r\n",
        b"incr x 1\r\n",
        b"touch x 10\r\n",
        b"gat 10 x\r\n",
        b"flush_all\r\n",
        b"stats\r\n",
        b"mg x v\r\n",
        b"ms x 1\r\nv\r\n",
        b"md x\r\n",
        b"ma x\r\n",
        b"mn\r\n",
        b"verbosity 1\r\n",
    ] {
        c.rt(req, b"CLIENT_ERROR unauthenticated\r\n");
    }
    // -Y binds the text protocol (as memcached): a binary packet is only bytes of a text
    // line that has not ended, so it gets no answer, as from memcached 1.6.
    let mut b = s.conn();
    b.send(&bp::simple(op::GET, b"x"));
    let (got, closed) = b.drain_for(std::time::Duration::from_millis(300));
    assert!(got.is_empty() && !closed, "{}", show(&got));
    c.send(b"quit\r\n");
    c.expect_closed();
}

#[test]
fn ascii_auth_with_set_then_normal_service() {
    let (s, _pw) = ascii_server("ascii-ok");
    let mut c = s.conn();
    c.rt(
        b"set anything 0 0 16\r\nalice wonderland\r\n",
        b"STORED\r\n",
    );
    // The auth set stored nothing.
    assert_eq!(c.get("anything"), None);
    c.set("k", b"v");
    assert_eq!(c.get("k").as_deref(), Some(&b"v"[..]));
    c.rt(b"incr n 1\r\n", b"NOT_FOUND\r\n");
    c.rt(b"mn\r\n", b"MN\r\n");
    // Passwords may contain spaces (everything after the first space).
    let mut c = s.conn();
    c.rt(b"set a 0 0 14\r\nbob pa ss:word\r\n", b"STORED\r\n");
    assert_eq!(c.get("k").as_deref(), Some(&b"v"[..]));
    // A new connection starts unauthenticated.
    let mut c = s.conn();
    c.rt(b"get k\r\n", b"CLIENT_ERROR unauthenticated\r\n");
}

#[test]
fn ascii_auth_wrong_password() {
    let (s, _pw) = ascii_server("ascii-bad");
    let mut c = s.conn();
    c.rt(
        b"set a 0 0 15\r\nalice wonderlan\r\n",
        b"CLIENT_ERROR authentication failure\r\n",
    );
    c.rt(b"get k\r\n", b"CLIENT_ERROR unauthenticated\r\n");
    c.rt(
        b"set a 0 0 16\r\ncarol wonderland\r\n",
        b"CLIENT_ERROR authentication failure\r\n",
    );
    let started = Instant::now();
    c.rt(
        b"set a 0 0 5\r\nalice\r\n",
        b"CLIENT_ERROR bad authentication token format\r\n",
    );
    let third = started.elapsed();
    assert!(
        third >= Duration::from_millis(150),
        "failures not slowed down: {third:?}"
    );
    // The right one still works on the same connection.
    c.rt(b"set a 0 0 16\r\nalice wonderland\r\n", b"STORED\r\n");
    c.set("k", b"v");
    let stats = c.stats("");
    assert_eq!(
        (stats["auth_cmds"].as_str(), stats["auth_errors"].as_str()),
        ("4", "3")
    );
}

/// `/metrics` counts authentication attempts and failures.
#[test]
fn metrics_count_auth_failures() {
    let pw = PwFile::new("ascii-metrics", USERS);
    let (s, metrics) = common::with_metrics(&["-Y", pw.path()]);
    let mut c = s.conn();
    c.rt(
        b"set a 0 0 15\r\nalice wonderlan\r\n",
        b"CLIENT_ERROR authentication failure\r\n",
    );
    let (status, page) = common::http_get(metrics, "/metrics");
    assert_eq!(status, 200);
    let value = |name: &str| {
        common::parse_page(&page)
            .into_iter()
            .find_map(|(n, _, v)| (n == name).then_some(v))
    };
    assert_eq!(value("shoal_auth_attempts_total"), Some(1.0), "{page}");
    assert_eq!(value("shoal_auth_failures_total"), Some(1.0), "{page}");
}
