//! The client against three real shoald processes on loopback: placement, multi-get
//! order, every command in each of the text, meta and binary protocols, CAS update under
//! contention, and ejection of a dead server; and the same commands against real memcached
//! (when installed) as the protocol peer. Every wait is bounded (client timeouts plus tokio
//! test timeouts).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::Duration;

use shoal_client::{CasOutcome, Client, ClientError, EjectPolicy, Protocol};
use shoal_ring::{Distribution, HashAlgorithm, Ring, RingConfig, Server};
use shoal_test_support::memcached::Memcached;

/// shoald from this test's target directory, rebuilt if stale (see shoal-test-support).
fn shoald_bin() -> PathBuf {
    shoal_test_support::workspace_bin("shoald")
}

struct Shoald {
    child: Child,
    addr: SocketAddr,
}

impl Shoald {
    fn start() -> Shoald {
        let (child, addr) = shoal_test_support::spawn_listening(Command::new(shoald_bin()).args([
            "-p",
            "-1",
            "-l",
            "127.0.0.1",
            "-v",
            "-t",
            "1",
        ]));
        Shoald { child, addr }
    }

    fn server(&self) -> Server {
        Server::new("127.0.0.1", self.addr.port())
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Shoald {
    fn drop(&mut self) {
        self.kill();
    }
}

fn cluster() -> (Vec<Shoald>, Vec<Server>) {
    let nodes: Vec<Shoald> = (0..3).map(|_| Shoald::start()).collect();
    let servers = nodes.iter().map(Shoald::server).collect();
    (nodes, servers)
}

const PROTOCOLS: [Protocol; 3] = [Protocol::Text, Protocol::Meta, Protocol::Binary];

fn client(servers: &[Server], ring: RingConfig) -> Client {
    client_with(servers, ring, Protocol::Text)
}

fn client_with(servers: &[Server], ring: RingConfig, protocol: Protocol) -> Client {
    Client::builder(servers.to_vec())
        .ring(ring)
        .protocol(protocol)
        .timeout(Some(Duration::from_millis(500)))
        .eject_policy(EjectPolicy {
            auto_eject: true,
            failure_limit: 2,
            retry_timeout: Duration::from_secs(60),
        })
        .build()
        .expect("client")
}

/// A client for one server only, to look at what it holds.
fn direct(server: &Server) -> Client {
    client(
        std::slice::from_ref(server),
        RingConfig::new(Distribution::Modula),
    )
}

async fn within<T>(f: impl std::future::Future<Output = T>) -> T {
    // A stale shoald is rebuilt here, outside the step's time limit.
    shoald_bin();
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .expect("test step timed out")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_land_where_the_ring_says_for_every_distribution() {
    within(async {
        let (_nodes, servers) = cluster();
        let configs = [
            RingConfig::new(Distribution::TwemproxyKetama).with_hash(HashAlgorithm::Md5),
            RingConfig::new(Distribution::LibmemcachedKetama { weighted: false }),
            RingConfig::new(Distribution::WeightedModula).with_hash(HashAlgorithm::Fnv1a_64),
            RingConfig::new(Distribution::PymemcacheRendezvous),
            RingConfig::new(Distribution::XmemcachedKetama),
            RingConfig::new(Distribution::Maglev),
            RingConfig::new(Distribution::Jump),
        ];
        let directs: Vec<Client> = servers.iter().map(direct).collect();
        for config in configs {
            let c = client(&servers, config);
            c.flush_all().await.expect("flush");
            let ring = Ring::new(config, servers.clone()).expect("ring");
            for i in 0..90 {
                let key = format!("place:{i}");
                c.set(key.as_bytes(), b"v", 0, 0).await.expect("set");
                let want = ring.locate(key.as_bytes()).expect("locate");
                for (s, d) in directs.iter().enumerate() {
                    let held = d.get(key.as_bytes()).await.expect("direct get").is_some();
                    assert_eq!(held, s == want, "{config:?} {key} on {s}, want {want}");
                }
            }
        }
    })
    .await;
}

/// Sets 80 of 100 keys over the servers, then multi-gets them in reverse order with a
/// duplicate: hits come back in request order, with their data and flags.
async fn check_multi_get(servers: &[Server], protocol: Protocol) {
    let c = client_with(
        servers,
        RingConfig::new(Distribution::TwemproxyKetama),
        protocol,
    );
    c.flush_all().await.expect("flush");
    let keys: Vec<String> = (0..100).map(|i| format!("m:{i}")).collect();
    for (i, k) in keys.iter().enumerate() {
        if i % 5 != 0 {
            c.set(k.as_bytes(), format!("v{i}").as_bytes(), i as u32, 0)
                .await
                .expect("set");
        }
    }
    let used: std::collections::HashSet<usize> = keys
        .iter()
        .map(|k| c.server_for(k.as_bytes()).expect("server"))
        .collect();
    assert_eq!(used.len(), 3);
    let mut ask: Vec<&str> = keys.iter().rev().map(String::as_str).collect();
    ask.push(&keys[1]);
    let got = c.get_multi(&ask).await.expect("get_multi");
    let want: Vec<String> = ask
        .iter()
        .filter(|k| {
            let i: usize = k[2..].parse().expect("n");
            i % 5 != 0
        })
        .map(|k| k.to_string())
        .collect();
    let got_keys: Vec<String> = got
        .iter()
        .map(|v| String::from_utf8_lossy(&v.key).into_owned())
        .collect();
    assert_eq!(got_keys, want);
    for v in &got {
        let i: usize = std::str::from_utf8(&v.key[2..])
            .expect("utf8")
            .parse()
            .expect("n");
        assert_eq!(&v.data[..], format!("v{i}").as_bytes());
        assert_eq!(v.flags, i as u32);
    }
    let with_cas = c.gets_multi(&["m:1", "m:2"]).await.expect("gets_multi");
    assert_eq!(with_cas.len(), 2, "{protocol:?}");
    assert!(with_cas.iter().all(|v| v.cas.is_some()));
    assert!(got.iter().all(|v| v.cas.is_none()));
    assert!(c
        .get_multi(&["m:0", "m:5"])
        .await
        .expect("all miss")
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_get_is_split_and_merged_in_key_order() {
    within(async {
        let (_nodes, servers) = cluster();
        for protocol in PROTOCOLS {
            check_multi_get(&servers, protocol).await;
        }
    })
    .await;
}

/// Every typed command's outcomes (hit, miss, conflict), noreply, the raw meta commands
/// where the protocol has them, and concurrent tasks sharing pipelined connections.
async fn check_commands(servers: &[Server], protocol: Protocol) {
    let c = client_with(
        servers,
        RingConfig::new(Distribution::TwemproxyKetama),
        protocol,
    );
    c.flush_all().await.expect("flush");
    assert!(c.add(b"a", b"1", 0, 0).await.expect("add"));
    assert!(!c.add(b"a", b"1", 0, 0).await.expect("add again"));
    assert!(c.replace(b"a", b"10", 0, 0).await.expect("replace"));
    assert!(!c
        .replace(b"nope", b"1", 0, 0)
        .await
        .expect("replace missing"));
    assert!(c.append(b"a", b"0").await.expect("append"));
    assert!(!c.append(b"nope", b"0").await.expect("append missing"));
    assert!(!c.prepend(b"nope", b"0").await.expect("prepend missing"));
    assert!(c.prepend(b"a", b"1").await.expect("prepend"));
    assert_eq!(
        &c.get(b"a").await.expect("get").expect("hit").data[..],
        b"1100"
    );
    assert_eq!(c.incr(b"a", 5).await.expect("incr"), Some(1105));
    assert_eq!(c.decr(b"a", 2000).await.expect("decr"), Some(0));
    assert_eq!(c.incr(b"missing", 1).await.expect("incr missing"), None);
    assert!(c.touch(b"a", 100).await.expect("touch"));
    assert!(!c.touch(b"nope", 100).await.expect("touch missing"));
    c.set(b"word", b"abc", 0, 0).await.expect("set word");
    assert!(matches!(
        c.incr(b"word", 1).await,
        Err(ClientError::Server(_))
    ));
    c.set(b"flagged", b"f", 42, 0).await.expect("set flags");
    assert_eq!(
        c.get(b"flagged").await.expect("get").expect("hit").flags,
        42
    );
    assert_eq!(c.get(b"nope").await.expect("get miss"), None);
    let v = c.gets(b"a").await.expect("gets").expect("hit");
    let cas = v.cas.expect("cas");
    assert_eq!(
        c.cas(b"a", b"x", 0, 0, cas + 1).await.expect("cas"),
        CasOutcome::Exists
    );
    assert_eq!(
        c.cas(b"a", b"x", 0, 0, cas).await.expect("cas"),
        CasOutcome::Stored
    );
    assert_eq!(
        c.cas(b"zz", b"x", 0, 0, 1).await.expect("cas"),
        CasOutcome::NotFound
    );
    assert!(c.delete(b"a").await.expect("delete"));
    assert!(!c.delete(b"a").await.expect("delete again"));
    assert_eq!(c.get(b"bad key").await, Err(ClientError::BadKey));
    c.set_noreply(b"nr", b"quiet", 0, 0).await.expect("noreply");
    assert_eq!(
        &c.get(b"nr").await.expect("get").expect("hit").data[..],
        b"quiet"
    );
    // A failing noreply write (value over the item limit) must not shift later replies.
    let huge = vec![b'x'; 2 << 20];
    c.set_noreply(b"nr-big", &huge, 0, 0)
        .await
        .expect("noreply big");
    assert_eq!(
        c.get(b"nr-big").await.expect("get after failed noreply"),
        None
    );
    assert_eq!(
        &c.get(b"nr").await.expect("get").expect("hit").data[..],
        b"quiet"
    );

    if protocol == Protocol::Binary {
        // memcached fixes a connection's protocol; meta commands are text.
        assert!(matches!(
            c.meta_get(b"mt", "v").await,
            Err(ClientError::Config(_))
        ));
    } else {
        check_meta_commands(&c).await;
    }
    check_concurrency(&c).await;
}

async fn check_meta_commands(c: &Client) {
    let r = c.meta_set(b"mt", b"hey", "T0 F7").await.expect("ms");
    assert_eq!(&r.code, b"HD");
    let r = c.meta_get(b"mt", "v f c").await.expect("mg");
    assert_eq!(r.data.as_deref(), Some(&b"hey"[..]));
    assert_eq!(r.flag('f'), Some("7"));
    assert!(r.flag('c').is_some());
    assert_eq!(
        &c.meta_get(b"mt-missing", "v").await.expect("mg").code,
        b"EN"
    );
    let r = c.meta_arithmetic(b"mctr", "N0 J10 D5 v").await.expect("ma");
    assert_eq!(r.data.as_deref(), Some(&b"10"[..]));
    let r = c.meta_arithmetic(b"mctr", "D5 v").await.expect("ma");
    assert_eq!(r.data.as_deref(), Some(&b"15"[..]));
    assert_eq!(&c.meta_delete(b"mt", "").await.expect("md").code, b"HD");
    assert!(c.meta_get(b"mt", "v q").await.is_err());
}

/// Many concurrent tasks share the pipelined connections.
async fn check_concurrency(c: &Client) {
    let mut tasks = Vec::new();
    for t in 0..8 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..200 {
                let k = format!("c:{t}:{i}");
                c.set(k.as_bytes(), k.as_bytes(), 0, 0).await.expect("set");
                let v = c.get(k.as_bytes()).await.expect("get").expect("hit");
                assert_eq!(&v.data[..], k.as_bytes());
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_and_pipelined_concurrency() {
    within(async {
        let (_nodes, servers) = cluster();
        for protocol in PROTOCOLS {
            check_commands(&servers, protocol).await;
        }
    })
    .await;
}

/// memcached as a ring member (the launcher's default `-t 2`, 64 MB).
fn start_memcached(bin: &std::path::Path) -> (Memcached, Server) {
    let mc = Memcached::start_bin(bin, &[]);
    let port = mc.addr().port();
    (mc, Server::new("127.0.0.1", port))
}

/// memcached itself is the reference peer for all three protocols: the same checks pass
/// against a cluster of real memcached processes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_protocol_works_against_real_memcached() {
    // CI requires memcached, a plain `cargo test` prints a visible skip.
    let Some(bin) = shoal_test_support::peer("memcached", "memcached") else {
        return;
    };
    within(async {
        let (_procs, servers): (Vec<Memcached>, Vec<Server>) =
            (0..3).map(|_| start_memcached(&bin)).unzip();
        for protocol in PROTOCOLS {
            check_commands(&servers, protocol).await;
            check_multi_get(&servers, protocol).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_retries_cas_conflicts() {
    within(async {
        let (_nodes, servers) = cluster();
        let c = client(&servers, RingConfig::new(Distribution::TwemproxyKetama));
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let c = c.clone();
            tasks.push(tokio::spawn(async move {
                for _ in 0..10 {
                    c.update(b"counter", |old| {
                        let n: u64 = old
                            .and_then(|b| std::str::from_utf8(b).ok())
                            .and_then(|s| s.parse().ok())
                            .unwrap_or(0);
                        Some((n + 1).to_string().into_bytes())
                    })
                    .await
                    .expect("update");
                }
            }));
        }
        for t in tasks {
            t.await.expect("task");
        }
        let v = c.get(b"counter").await.expect("get").expect("hit");
        assert_eq!(&v.data[..], b"80");
        assert_eq!(c.update(b"counter", |_| None).await.expect("no-op"), None);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_server_is_ejected_and_its_keys_move() {
    within(async {
        let (mut nodes, servers) = cluster();
        let config = RingConfig::new(Distribution::TwemproxyKetama);
        let c = client(&servers, config);
        let keys: Vec<String> = (0..100).map(|i| format!("e:{i}")).collect();
        for k in &keys {
            c.set(k.as_bytes(), b"v", 0, 0).await.expect("set");
        }
        let dead = c.server_for(keys[0].as_bytes()).expect("server");
        nodes[dead].kill();
        // Keys on live servers keep working throughout.
        for k in &keys {
            if c.server_for(k.as_bytes()).expect("server") != dead {
                assert!(c.get(k.as_bytes()).await.expect("live get").is_some());
            }
        }
        // The dead server's keys fail until the failure limit (2) ejects it.
        let mut failures = 0;
        while !c.is_ejected(dead) {
            assert!(c.set(keys[0].as_bytes(), b"w", 0, 0).await.is_err());
            failures += 1;
            assert!(failures <= 2, "not ejected after {failures} failures");
        }
        c.set(keys[0].as_bytes(), b"w", 0, 0)
            .await
            .expect("set after eject");
        let ring = Ring::new(config, servers.clone())
            .expect("ring")
            .with_ejected(dead)
            .expect("eject");
        assert_eq!(
            c.server_for(keys[0].as_bytes()).expect("server"),
            ring.locate(keys[0].as_bytes()).expect("locate")
        );
        assert_eq!(
            &c.get(keys[0].as_bytes())
                .await
                .expect("get")
                .expect("hit")
                .data[..],
            b"w"
        );
    })
    .await;
}

/// Gets of `keys` in a loop until `stop`, each timed; returns the latencies and errors.
async fn timed_gets(
    c: std::sync::Arc<Client>,
    keys: Vec<String>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> (Vec<Duration>, Vec<String>) {
    let (mut lat, mut errors) = (Vec::new(), Vec::new());
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        for k in &keys {
            let t = std::time::Instant::now();
            match c.get(k.as_bytes()).await {
                Ok(Some(_)) => lat.push(t.elapsed()),
                other => errors.push(format!("{k}: {other:?}")),
            }
            tokio::time::sleep(Duration::from_micros(500)).await;
        }
    }
    (lat, errors)
}

fn p99(mut lat: Vec<Duration>) -> Duration {
    assert!(!lat.is_empty(), "no samples");
    lat.sort_unstable();
    lat[(lat.len() * 99 / 100).min(lat.len() - 1)]
}

/// Network faults on one of three servers (issue 28; see shoal-proxy's tests/faults.rs
/// for the proxy's side): a blackholed, half-open or resetting server fails its
/// requests within the client's timeout and is ejected after the failure limit, while
/// the other servers' keys keep their latency; once the fault clears it is re-admitted
/// after the retry timeout. A slow server (200 ms, under the timeout) keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_faults_on_one_server() {
    use shoal_test_support::faults::{Fault, FaultProxy};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    const TIMEOUT: Duration = Duration::from_millis(400);
    const RETRY: Duration = Duration::from_millis(1500);
    shoald_bin();
    let (nodes, _) = cluster();
    let fault = FaultProxy::start(nodes[1].addr);
    let servers = vec![
        nodes[0].server(),
        Server::new("127.0.0.1", fault.addr().port()),
        nodes[2].server(),
    ];
    let c = Arc::new(
        Client::builder(servers.clone())
            .ring(RingConfig::new(Distribution::TwemproxyKetama))
            .timeout(Some(TIMEOUT))
            .eject_policy(EjectPolicy {
                auto_eject: true,
                failure_limit: 2,
                retry_timeout: RETRY,
            })
            .build()
            .expect("client"),
    );
    let keys: Vec<String> = (0..300).map(|i| format!("f:{i}")).collect();
    for k in &keys {
        c.set(k.as_bytes(), b"v", 0, 0).await.expect("set");
    }
    // Server indexes are in configured order: the fault proxy is server 1.
    let faulty = 1;
    let home = |k: &String| c.server_for(k.as_bytes()).expect("server");
    let healthy: Vec<String> = keys.iter().filter(|k| home(k) != faulty).cloned().collect();
    let on_faulty: Vec<String> = keys.iter().filter(|k| home(k) == faulty).cloned().collect();
    let direct_home = direct(&nodes[1].server());
    assert!(
        direct_home
            .get(on_faulty[0].as_bytes())
            .await
            .expect("direct")
            .is_some(),
        "server 1's keys are stored behind the fault proxy"
    );

    let measure =
        |stop: Arc<AtomicBool>| tokio::spawn(timed_gets(Arc::clone(&c), healthy.clone(), stop));
    let stop = Arc::new(AtomicBool::new(false));
    let base_task = measure(Arc::clone(&stop));
    tokio::time::sleep(Duration::from_millis(1000)).await;
    stop.store(true, Ordering::Relaxed);
    let (lat, errors) = base_task.await.expect("baseline");
    assert!(errors.is_empty(), "{errors:?}");
    let base = p99(lat);

    for (f, name) in [
        (Fault::Blackhole, "blackhole"),
        (Fault::HalfOpen, "half-open"),
        (Fault::ResetMidReply, "reset mid-reply"),
    ] {
        let stop = Arc::new(AtomicBool::new(false));
        let task = measure(Arc::clone(&stop));
        fault.set(f);
        let mut failures = 0;
        for k in on_faulty.iter().cycle() {
            if c.is_ejected(faulty) {
                break;
            }
            let t = std::time::Instant::now();
            let r = tokio::time::timeout(Duration::from_secs(5), c.set(k.as_bytes(), b"x", 0, 0))
                .await
                .unwrap_or_else(|_| panic!("{name}: a request hung"));
            assert!(r.is_err(), "{name}: {r:?}");
            assert!(
                t.elapsed() <= TIMEOUT + Duration::from_secs(1),
                "{name}: {:?}",
                t.elapsed()
            );
            failures += 1;
            // The connection's task counts the failure as it closes, which can come just
            // after the caller has its error: give it a moment before the next request.
            let counted = std::time::Instant::now();
            while !c.is_ejected(faulty) && counted.elapsed() < Duration::from_millis(200) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            assert!(
                failures <= 2,
                "{name}: not ejected after {failures} failures"
            );
        }
        // Its keys are served by the next server meanwhile.
        c.set(on_faulty[0].as_bytes(), b"elsewhere", 0, 0)
            .await
            .expect("set after ejection");
        tokio::time::sleep(Duration::from_millis(500)).await;
        stop.store(true, Ordering::Relaxed);
        let (lat, errors) = task.await.expect("load");
        assert!(errors.is_empty(), "{name}: healthy keys failed: {errors:?}");
        let under = p99(lat);
        eprintln!("client, {name}: healthy p99 {under:?} (no fault {base:?})");
        assert!(
            under <= base * 2 + Duration::from_millis(10),
            "{name}: {base:?} -> {under:?}"
        );

        // Cleared: re-admitted after the retry timeout, its keys home again.
        fault.set(Fault::None);
        let cleared = std::time::Instant::now();
        loop {
            let stored = c.set(on_faulty[0].as_bytes(), b"home", 0, 0).await.is_ok();
            let there = direct_home
                .get(on_faulty[0].as_bytes())
                .await
                .ok()
                .flatten();
            if stored && there.is_some_and(|v| &v.data[..] == b"home") {
                break;
            }
            assert!(
                cleared.elapsed() < RETRY + Duration::from_secs(10),
                "{name}: not re-admitted"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        eprintln!(
            "client, {name}: re-admitted {:?} after the fault cleared",
            cleared.elapsed()
        );
    }

    // Slow, under the timeout: served, not ejected.
    fault.set(Fault::Latency {
        delay: Duration::from_millis(200),
        jitter: Duration::ZERO,
    });
    for k in on_faulty.iter().take(5) {
        let t = std::time::Instant::now();
        c.get(k.as_bytes()).await.expect("slow get");
        assert!(t.elapsed() >= Duration::from_millis(200));
    }
    assert!(!c.is_ejected(faulty));
    fault.set(Fault::None);
}
