//! A queue pool (`queue: true`) in front of three real shoal-queued processes: sets
//! spread over the servers, reads drain every server, Kestrel's exact replies come back
//! through the proxy, a reliable read stays on its connection (and goes back to the queue
//! when the client disconnects), a server in `status readonly` is drained and gets no
//! sets, and one killed mid-run costs no acknowledged message.

mod common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use common::*;

struct Queued {
    child: std::process::Child,
    addr: SocketAddr,
}

impl Queued {
    fn start(dir: &Path) -> Queued {
        let (child, addr) = shoal_test_support::spawn_listening(
            Command::new(shoal_test_support::workspace_bin("shoal-queued"))
                .args(["-p", "0", "-l", "127.0.0.1", "-t", "1", "-v"])
                .args(["--fsync", "always", "-d"])
                .arg(dir),
        );
        Queued { child, addr }
    }

    fn conn(&self) -> Conn {
        Conn::connect(self.addr)
    }

    /// Messages waiting in queue `q` (0 if it does not exist).
    fn items(&self, q: &str) -> u64 {
        self.stat(&format!("queue_{q}_items"))
    }

    /// A numeric `stats` line (0 if absent).
    fn stat(&self, name: &str) -> u64 {
        let mut c = self.conn();
        c.send(b"stats\r\n");
        let want = format!("STAT {name} ");
        let mut n = 0;
        loop {
            let l = c.line();
            if l == "END" {
                return n;
            }
            if let Some(v) = l.strip_prefix(&want) {
                n = v.parse().expect("a count");
            }
        }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.kill();
    }
}

fn queue_conf(servers: &[&Queued], extra: &str) -> String {
    let mut c = format!(
        "queues:\n  listen: 127.0.0.1:0\n  queue: true\n  gets_per_server: 4\n  timeout: 1500\n  server_retry_timeout: 200\n{extra}  servers:\n"
    );
    for (i, s) in servers.iter().enumerate() {
        c.push_str(&format!("   - {}:1 q{i}\n", s.addr));
    }
    c
}

/// Reads `q` through the proxy with `/close/open` until every server came back empty
/// (as many empty reads in a row as there are servers), then closes the last read.
fn drain_reliably(c: &mut Conn, q: &str, servers: usize) -> Vec<String> {
    let mut got = Vec::new();
    let mut empty = 0;
    for _ in 0..10_000 {
        c.send(format!("get {q}/close/open\r\n").as_bytes());
        match c.values().expect("a read") {
            v if v.is_empty() => {
                empty += 1;
                if empty == servers {
                    assert_eq!(c.cmd(&format!("get {q}/close")), "END");
                    return got;
                }
            }
            v => {
                empty = 0;
                assert_eq!(v[0].0, q, "Kestrel's bare queue name");
                got.push(v[0].1.clone());
            }
        }
    }
    panic!("the queue never drained");
}

#[test]
fn sets_spread_reads_drain_every_server_with_kestrel_replies() {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let qs: Vec<Queued> = dirs.iter().map(|d| Queued::start(d.path())).collect();
    let proxy = Proxy::start(&queue_conf(&qs.iter().collect::<Vec<_>>(), ""), 1);
    let mut c = proxy.conn();

    // Grabby Hands' exchange, byte for byte, through the proxy.
    c.send(b"set one 0 0 5\r\nhello\r\n");
    assert_eq!(c.line(), "STORED");
    let mut found = false;
    for _ in 0..3 {
        c.send(b"get one/t=10/close/open\r\n");
        let l = c.line();
        if l == "END" {
            continue;
        }
        assert_eq!(l, "VALUE one 0 5");
        assert_eq!(c.data(5), b"hello");
        assert_eq!(c.line(), "END");
        found = true;
        break;
    }
    assert!(found, "the message was on none of the three servers");
    assert_eq!(c.cmd("get one/abort"), "END");
    // Given back by the abort: a plain read finds it again.
    let mut again = Vec::new();
    for _ in 0..3 {
        again.extend(c.get(&["one"]).expect("read"));
    }
    assert_eq!(again, [("one".to_string(), "hello".to_string())]);

    // 60 sets land on every server; reads drain them all, each message once.
    let sent: BTreeSet<String> = (0..60).map(|i| format!("m{i:03}")).collect();
    for m in &sent {
        assert_eq!(c.set("jobs", m), "STORED");
    }
    let per_server: Vec<u64> = qs.iter().map(|q| q.items("jobs")).collect();
    assert_eq!(per_server.iter().sum::<u64>(), 60);
    assert!(
        per_server.iter().all(|&n| n > 0),
        "random sets reach every server: {per_server:?}"
    );
    let got = drain_reliably(&mut c, "jobs", 3);
    assert_eq!(got.len(), 60, "each message exactly once");
    assert_eq!(got.iter().cloned().collect::<BTreeSet<_>>(), sent);

    // One open read per queue: a second /open, or a plain read, is refused as Kestrel
    // refuses it, with a disconnect.
    assert_eq!(c.set("jobs", "x"), "STORED");
    let mut opened = false;
    for _ in 0..3 {
        c.send(b"get jobs/open\r\n");
        if !c.values().expect("read").is_empty() {
            opened = true;
            break;
        }
    }
    assert!(opened);
    assert_eq!(c.cmd("get jobs/open"), "ERROR");
    let mut closed = [0u8; 1];
    use std::io::Read;
    let mut s = c.into_stream();
    assert_eq!(s.read(&mut closed).expect("EOF"), 0, "disconnected");

    // ...and the disconnect gave the open read back.
    let mut c = proxy.conn();
    assert_eq!(drain_reliably(&mut c, "jobs", 3), ["x"]);

    // delete and flush reach every server.
    for i in 0..9 {
        assert_eq!(c.set("gone", &format!("{i}")), "STORED");
    }
    assert_eq!(c.cmd("flush gone"), "END");
    assert_eq!(qs.iter().map(|q| q.items("gone")).sum::<u64>(), 0);
    assert_eq!(c.cmd("delete gone"), "END");
    assert_eq!(c.cmd("flush_all"), "Flushed all queues.");
    assert!(c.cmd("version").starts_with("VERSION shoal-proxy-"));
    assert_eq!(
        c.cmd("incr x 1"),
        "ERROR",
        "no cache commands on a queue pool"
    );
    assert_eq!(c.cmd("get bad\x01name"), "CLIENT_ERROR bad queue name");

    // A negative exptime has expired already: acknowledged, stored nowhere.
    c.send(b"set neg 0 -1 1\r\nx\r\n");
    assert_eq!(c.line(), "STORED");
    assert_eq!(qs.iter().map(|q| q.items("neg")).sum::<u64>(), 0);

    // Deleting a queue ends this client's open read on it: a plain read afterwards is
    // not refused as one with a read open.
    assert_eq!(c.set("held", "h"), "STORED");
    let mut opened = false;
    for _ in 0..3 {
        c.send(b"get held/open\r\n");
        if !c.values().expect("read").is_empty() {
            opened = true;
            break;
        }
    }
    assert!(opened);
    assert_eq!(c.cmd("delete held"), "END");
    assert_eq!(c.get(&["held"]), Ok(vec![]));

    // Bad read options: CLIENT_ERROR and a disconnect, as Kestrel does.
    assert_eq!(c.cmd("get held/t=soon"), "CLIENT_ERROR bad timeout");
    let mut s = c.into_stream();
    assert_eq!(s.read(&mut closed).expect("EOF"), 0, "disconnected");

    // A reload may not turn the queue pool into a cache pool under its clients.
    let text = std::fs::read_to_string(&proxy.conf).expect("conf");
    std::fs::write(
        &proxy.conf,
        text.replace("  queue: true\n  gets_per_server: 4\n", ""),
    )
    .expect("write");
    let r = reload(&proxy);
    assert!(r.contains("'queue' cannot change on reload"), "{r}");
}

#[test]
fn a_readonly_server_is_drained_and_a_killed_one_costs_no_acknowledged_set() {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut qs: Vec<Queued> = dirs.iter().map(|d| Queued::start(d.path())).collect();
    let proxy = Proxy::start(&queue_conf(&qs.iter().collect::<Vec<_>>(), ""), 1);

    // Server 0 holds messages, then goes read-only: no more sets reach it, but reads
    // still drain it.
    let mut direct = qs[0].conn();
    for i in 0..5 {
        assert_eq!(direct.set("work", &format!("old{i}")), "STORED");
    }
    assert_eq!(direct.cmd("status readonly"), "END");
    let mut c = proxy.conn();
    for i in 0..30 {
        assert_eq!(c.set("work", &format!("new{i}")), "STORED", "set {i}");
    }
    assert_eq!(
        qs[0].items("work"),
        5,
        "no set reached the read-only server"
    );
    let got = drain_reliably(&mut c, "work", 3);
    assert_eq!(got.len(), 35);
    assert_eq!(qs[0].items("work"), 0, "the read-only server was drained");

    // Server 2 killed: every set through the proxy is still acknowledged, and every
    // acknowledged one is read back from the survivors.
    qs[2].kill();
    let mut acked = BTreeSet::new();
    for i in 0..40 {
        let m = format!("k{i}");
        assert_eq!(c.set("work", &m), "STORED", "set {i} after the kill");
        acked.insert(m);
    }
    let got: BTreeSet<String> = drain_reliably(&mut c, "work", 3).into_iter().collect();
    assert_eq!(got, acked);
}

/// A client that leaves while its blocking read waits on a backend takes no message with
/// it: the proxy closes that backend connection, which ends the server's wait.
#[test]
fn a_blocking_read_whose_client_left_takes_no_message() {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let qs: Vec<Queued> = dirs.iter().map(|d| Queued::start(d.path())).collect();
    let proxy = Proxy::start(&queue_conf(&qs.iter().collect::<Vec<_>>(), ""), 1);
    let mut gone = proxy.conn();
    gone.send(b"get w/t=5000\r\n");
    std::thread::sleep(std::time::Duration::from_millis(150));
    drop(gone);
    // Bounded: every server stops waiting for it, or the test fails.
    let mut waiting = u64::MAX;
    for _ in 0..100 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        waiting = qs.iter().map(|q| q.stat("queue_w_waiters")).sum();
        if waiting == 0 {
            break;
        }
    }
    assert_eq!(waiting, 0, "a server still waits for the gone client");
    let mut c = proxy.conn();
    assert_eq!(c.set("w", "kept"), "STORED");
    assert_eq!(drain_reliably(&mut c, "w", 3), ["kept"]);
}

#[test]
fn queue_pool_config_is_checked() {
    let bad = [
        ("queues:\n  listen: 127.0.0.1:0\n  queue: true\n  hash: md5\n  servers:\n   - 127.0.0.1:1:1\n", "hash"),
        ("queues:\n  listen: 127.0.0.1:0\n  gets_per_server: 3\n  servers:\n   - 127.0.0.1:1:1\n", "not a queue pool"),
        ("queues:\n  listen: 127.0.0.1:0\n  queue: true\n  gets_per_server: 0\n  servers:\n   - 127.0.0.1:1:1\n", "at least 1"),
    ];
    for (conf, want) in bad {
        let e = shoal_proxy::config::ProxyConfig::parse(conf).expect_err(conf);
        assert!(e.to_string().contains(want), "{e} (wanted {want:?})");
    }
    let ok = shoal_proxy::config::ProxyConfig::parse(
        "queues:\n  listen: 127.0.0.1:0\n  queue: true\n  servers:\n   - 127.0.0.1:1:1\n",
    )
    .expect("valid");
    assert_eq!(
        ok.pools[0].queue.map(|q| q.gets_per_server),
        Some(100),
        "kestrel-client's default"
    );
}
