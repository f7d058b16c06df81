//! Backend failures: a killed backend with auto-eject on, a backend that answers
//! garbage, one that hangs. Every wait is bounded.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use shoal_ring::Server;

#[test]
fn killed_backend_is_ejected_and_its_keys_move() {
    let mut backends = three_backends();
    let addrs: Vec<String> = backends.iter().map(|b| b.addr.to_string()).collect();
    let proxy = Proxy::start_threads(
        &conf(
            &addrs,
            "  auto_eject_hosts: true\n  server_failure_limit: 2\n  server_retry_timeout: 60000\n  timeout: 500\n",
        ),
        1,
        2,
    );
    let keys: Vec<String> = (0..200).map(|i| format!("k:{i}")).collect();
    set_all(proxy.pools[0], &keys);
    let home: Vec<usize> = keys.iter().map(|k| expected(&addrs, &[], k)).collect();
    let dead = 1;
    assert!(home.contains(&dead));

    // Load on the other servers' keys while the backend dies: none of it may fail.
    let live_keys: Vec<String> = keys
        .iter()
        .zip(&home)
        .filter(|(_, &h)| h != dead)
        .map(|(k, _)| k.clone())
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let loader = {
        let (stop, done, addr, live_keys) = (
            stop.clone(),
            done.clone(),
            proxy.pools[0],
            live_keys.clone(),
        );
        std::thread::spawn(move || {
            let mut c = Conn::connect(addr);
            let mut errors = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                for k in &live_keys {
                    match c.get(&[k.as_str()]) {
                        Ok(v) if v.len() == 1 => {}
                        other => errors.push(format!("{k}: {other:?}")),
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
            errors
        })
    };
    // The reader is under way (it has answers) before the server dies.
    let started = Instant::now();
    while done.load(Ordering::Relaxed) == 0 {
        assert!(started.elapsed() < IO_TIMEOUT, "reader never got an answer");
        std::thread::sleep(Duration::from_millis(5));
    }
    backends[dead].proc.kill();

    // The dead server's keys fail until the failure limit ejects it, then are served
    // (as misses, then as stored values) by the server twemproxy's ring picks next.
    let moved: Vec<&String> = keys
        .iter()
        .zip(&home)
        .filter(|(_, &h)| h == dead)
        .map(|(k, _)| k)
        .collect();
    let mut c = proxy.conn();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = c.set(moved[0], "new");
        if r == "STORED" {
            break;
        }
        assert!(r.starts_with("SERVER_ERROR"), "unexpected reply {r}");
        assert!(Instant::now() < deadline, "server never ejected");
        std::thread::sleep(Duration::from_millis(20));
    }
    for k in &moved {
        assert_eq!(c.set(k, "new"), "STORED", "{k}");
        let got = c.get(&[k.as_str()]).expect("get");
        assert_eq!(got, vec![(k.to_string(), "new".to_string())]);
        let want = expected(&addrs, &[dead], k);
        let held = backends[want].conn().get(&[k.as_str()]).expect("direct");
        assert_eq!(held.len(), 1, "{k} should be on backend {want}");
    }
    stop.store(true, Ordering::Relaxed);
    let errors = loader.join().expect("loader");
    assert!(done.load(Ordering::Relaxed) > 0);
    assert!(errors.is_empty(), "live keys failed: {errors:?}");

    let stats = stats_json(&proxy);
    assert_eq!(stats["alpha"]["server_ejects"], 1, "{stats}");
}

fn bad_backend_is_ejected(reply: Option<&'static [u8]>) {
    let backends: Vec<Shoald> = (0..2).map(|_| Shoald::start()).collect();
    let bad = fake_backend(reply);
    let addrs = vec![
        backends[0].addr.to_string(),
        bad.to_string(),
        backends[1].addr.to_string(),
    ];
    let proxy = Proxy::start(
        &conf(
            &addrs,
            "  auto_eject_hosts: true\n  server_failure_limit: 1\n  server_retry_timeout: 60000\n  timeout: 300\n",
        ),
        1,
    );
    // The proxy's server order is twemproxy's (sorted by name); `expected` sorts the
    // same way only if given the same order, so find the bad server's index there.
    let sorted = shoal_ring::twemproxy::sorted_servers(
        &addrs
            .iter()
            .map(|a| {
                let (h, p) = a.rsplit_once(':').expect("addr");
                Server::new(h, p.parse().expect("port"))
            })
            .collect::<Vec<_>>(),
    );
    let sorted_addrs: Vec<String> = sorted.iter().map(|s| s.host_port()).collect();
    let bad_index = sorted_addrs
        .iter()
        .position(|a| *a == bad.to_string())
        .expect("bad server");
    let keys = keys_on(&sorted_addrs, bad_index, 5);
    let mut c = proxy.conn();
    let started = Instant::now();
    let first = c.set(&keys[0], "x");
    assert!(first.starts_with("SERVER_ERROR"), "{first}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "waited {:?} on a bad backend",
        started.elapsed()
    );
    // Ejected after one failure: its keys now go to the healthy servers.
    for k in &keys {
        assert_eq!(c.set(k, "x"), "STORED", "{k}");
        assert_eq!(c.get(&[k.as_str()]).expect("get").len(), 1);
    }
    // Other clients' keys were never affected.
    let mut other = proxy.conn();
    assert_eq!(other.set("unrelated", "1"), "STORED");
}

#[test]
fn garbage_backend_is_ejected() {
    bad_backend_is_ejected(Some(b"HELLO THIS IS NOT MEMCACHED\r\n"));
}

#[test]
fn hanging_backend_is_timed_out_and_ejected() {
    bad_backend_is_ejected(None);
}

#[test]
fn without_auto_eject_a_dead_server_answers_server_error() {
    let mut backends = three_backends();
    let addrs: Vec<String> = backends.iter().map(|b| b.addr.to_string()).collect();
    let proxy = Proxy::start(&conf(&addrs, "  timeout: 500\n"), 1);
    let sorted_addrs: Vec<String> = shoal_ring::twemproxy::sorted_servers(
        &backends
            .iter()
            .map(|b| Server::new("127.0.0.1", b.port()))
            .collect::<Vec<_>>(),
    )
    .iter()
    .map(|s| s.host_port())
    .collect();
    let dead_addr = addrs[2].clone();
    let dead = sorted_addrs
        .iter()
        .position(|a| *a == dead_addr)
        .expect("dead");
    backends[2].proc.kill();
    let k = keys_on(&sorted_addrs, dead, 1).remove(0);
    let mut c = proxy.conn();
    for _ in 0..5 {
        let r = c.set(&k, "x");
        assert!(r.starts_with("SERVER_ERROR"), "{r}");
    }
    let live = keys_on(&sorted_addrs, (dead + 1) % 3, 1).remove(0);
    assert_eq!(c.set(&live, "y"), "STORED");
}

#[test]
fn ejection_moves_keys_exactly_like_nutcracker() {
    let mut backends = three_backends();
    let dists = ["ketama", "modula"];
    let ports = free_ports(dists.len());
    let pool = |name: &str, port: u16, dist: &str| {
        let mut s = format!(
            "{name}:\n  listen: 127.0.0.1:{port}\n  hash: md5\n  distribution: {dist}\n  auto_eject_hosts: true\n  server_failure_limit: 1\n  server_retry_timeout: 60000\n  timeout: 500\n  servers:\n"
        );
        for (i, b) in backends.iter().enumerate() {
            s.push_str(&format!("   - {}:{}\n", b.addr, i + 1));
        }
        s
    };
    let theirs_conf: String = dists
        .iter()
        .enumerate()
        .map(|(i, d)| pool(&format!("p{i}"), ports[i], d))
        .collect();
    let ours_conf: String = dists
        .iter()
        .enumerate()
        .map(|(i, d)| pool(&format!("p{i}"), 0, d))
        .collect();
    let Some(_nut) = Nutcracker::start(&theirs_conf, &ports) else {
        return;
    };
    let proxy = Proxy::start(&ours_conf, dists.len());
    let dead = 1;
    backends[dead].proc.kill();
    for (i, dist) in dists.iter().enumerate() {
        // Own keys per distribution: flush_all spares items stored in the same second
        // (memcached's rule), so another phase's keys could still be there.
        let keys: Vec<String> = (0..300).map(|k| format!("ej:{dist}:{k}")).collect();
        let addrs = [
            proxy.pools[i],
            format!("127.0.0.1:{}", ports[i]).parse().expect("addr"),
        ];
        let mut placements = Vec::new();
        for addr in addrs {
            // Fail against the dead server (limit 1 ejects it) using warm-up keys, so
            // no measured key is ever stored before the ejection; then place every key.
            let mut c = Conn::connect(addr);
            let warm: Vec<String> = (0..60).map(|k| format!("warm:{dist}:{addr}:{k}")).collect();
            let deadline = Instant::now() + Duration::from_secs(10);
            while !warm.iter().all(|k| c.set(k, "v") == "STORED") {
                assert!(Instant::now() < deadline, "{dist}: {addr} never ejected");
            }
            for k in &keys {
                assert_eq!(c.set(k, "v"), "STORED", "{dist}: {addr} {k}");
            }
            let live_backends: Vec<&Shoald> = backends
                .iter()
                .enumerate()
                .filter(|(b, _)| *b != dead)
                .map(|(_, b)| b)
                .collect();
            let mut held = vec![Vec::new(); keys.len()];
            for (bi, b) in live_backends.iter().enumerate() {
                let mut d = b.conn();
                let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
                for chunk in refs.chunks(100) {
                    for (k, _) in d.get(chunk).expect("direct get") {
                        if let Some(i) = keys.iter().position(|x| *x == k) {
                            held[i].push(bi);
                        }
                    }
                }
                assert_eq!(d.cmd("flush_all"), "OK");
            }
            assert!(held.iter().all(|h| h.len() == 1), "{dist}: {held:?}");
            placements.push(held);
        }
        assert_eq!(
            placements[0], placements[1],
            "{dist}: shoal-proxy vs nutcracker"
        );
    }
}
