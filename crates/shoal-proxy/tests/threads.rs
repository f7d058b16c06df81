//! `--threads N` (issue 16): client connections spread over N worker threads, each with
//! its own server connections (or one shared set with `--shared-backends`), and the
//! stats adding up over the workers.

mod common;

use std::io::Read;
use std::net::{SocketAddr, TcpStream};

use common::*;

fn stats_json(addr: SocketAddr) -> serde_json::Value {
    let mut s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("stats");
    s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read stats");
    serde_json::from_str(&out).expect("stats json")
}

fn conf(b: &Shoald) -> String {
    format!(
        "alpha:\n  listen: 127.0.0.1:0\n  hash: md5\n  timeout: 1000\n  servers:\n   - {}:1\n",
        b.addr
    )
}

/// Four clients, 25 sets and 25 gets each, through `proxy`: every reply checked.
fn four_clients(proxy: &Proxy) -> Vec<Conn> {
    let mut conns: Vec<Conn> = (0..4).map(|_| proxy.conn()).collect();
    for (c, conn) in conns.iter_mut().enumerate() {
        for i in 0..25 {
            let k = format!("t{c}:{i}");
            assert_eq!(conn.set(&k, "v"), "STORED");
            assert_eq!(conn.get(&[k.as_str()]), Ok(vec![(k.clone(), "v".into())]));
        }
    }
    conns
}

#[test]
fn each_worker_keeps_its_own_server_connections_and_the_stats_add_up() {
    let b = Shoald::start();
    let proxy = Proxy::start_threads(&conf(&b), 1, 2);
    let conns = four_clients(&proxy);
    let st = stats_json(proxy.stats);
    let server = &st["alpha"][b.addr.to_string()];
    // Four connections dealt to two workers in turn: both workers served some, and
    // each opened its own connection to the server.
    assert_eq!(server["server_connections"], 2, "{st}");
    assert_eq!(server["requests"], 200, "every worker's requests counted");
    assert_eq!(server["responses"], 200);
    assert_eq!(st["alpha"]["client_connections"], 4);
    assert_eq!(st["curr_connections"], 4);
    drop(conns);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while stats_json(proxy.stats)["alpha"]["client_connections"] != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "connections not given back"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(stats_json(proxy.stats)["alpha"]["client_eof"], 4);
}

#[test]
fn shared_backends_give_every_worker_the_same_server_connection() {
    let b = Shoald::start();
    let proxy = Proxy::start_args(&conf(&b), 1, &["--threads", "2", "--shared-backends"]);
    let _conns = four_clients(&proxy);
    let st = stats_json(proxy.stats);
    let server = &st["alpha"][b.addr.to_string()];
    assert_eq!(server["server_connections"], 1, "{st}");
    assert_eq!(server["requests"], 200);
}

#[test]
fn a_killed_server_is_ejected_once_for_all_workers() {
    let mut backends = three_backends();
    let mut text = "alpha:\n  listen: 127.0.0.1:0\n  hash: md5\n  timeout: 500\n  \
                    auto_eject_hosts: true\n  server_failure_limit: 1\n  \
                    server_retry_timeout: 60000\n  servers:\n"
        .to_string();
    for b in &backends {
        text.push_str(&format!("   - {}:1\n", b.addr));
    }
    let proxy = Proxy::start_threads(&text, 1, 2);
    let keys: Vec<String> = (0..60).map(|i| format!("e:{i}")).collect();
    let mut conns: Vec<Conn> = (0..2).map(|_| proxy.conn()).collect();
    backends[0].proc.kill();
    // Until the ring drops the dead server, its keys fail; afterwards every key works
    // through either worker, since both read the same (shared) ring.
    for c in conns.iter_mut() {
        for k in &keys {
            let _ = c.set(k, "v");
        }
    }
    for c in conns.iter_mut() {
        for k in &keys {
            assert_eq!(c.set(k, "w"), "STORED", "{k}");
        }
    }
    assert_eq!(stats_json(proxy.stats)["alpha"]["server_ejects"], 1);
}
