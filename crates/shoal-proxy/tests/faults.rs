//! Network faults between shoal-proxy and one of its three backends (issue 28), made by
//! a fault-injecting TCP proxy ([`FaultProxy`]) in front of that backend: slow, sliced
//! into 1-byte writes, blackholed, half-open, resetting mid-reply. For each, what a user
//! needs: keys on the healthy backends keep their latency; requests for the faulty one
//! are answered (served, or failed with `SERVER_ERROR` within the pool's `timeout` plus a
//! margin), never left hanging; a failing backend is ejected after
//! `server_failure_limit` failures and re-admitted once the fault clears and
//! `server_retry_timeout` has passed; the proxy's memory stays bounded.
//!
//! Each scenario prints its latency figures (`cargo test -- --nocapture`), which
//! docs/operations.md's fault table quotes.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::*;
use shoal_test_support::faults::{Fault, FaultProxy};

/// The pool's `timeout`: a request its backend has not answered by then fails.
const TIMEOUT: Duration = Duration::from_millis(400);
/// The pool's `timeout` where the backend is only degraded: well above its 200 ms delay,
/// so that a test machine busy with the other scenarios does not turn slow into failed.
const DEGRADED_TIMEOUT: Duration = Duration::from_millis(1500);
/// The pool's `server_retry_timeout`.
const RETRY: Duration = Duration::from_millis(1500);
/// Allowance over `TIMEOUT` for a failed request's reply (scheduling on a loaded machine).
const MARGIN: Duration = Duration::from_millis(1000);
/// How long each measured phase lasts.
const PHASE: Duration = Duration::from_millis(1500);

/// The scenarios measure latency: one at a time, so that they do not measure each other
/// (each runs three backends, a proxy, a fault proxy and two clients on two cores).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

struct Cluster {
    backends: Vec<Shoald>,
    fault: FaultProxy,
    proxy: Proxy,
    /// Keys whose home is the backend behind the fault proxy, and keys of the others.
    faulty_keys: Vec<String>,
    healthy_keys: Vec<String>,
}

fn cluster(timeout: Duration) -> Cluster {
    let backends = three_backends();
    let fault = FaultProxy::start(backends[1].addr);
    let addrs = vec![
        backends[0].addr.to_string(),
        fault.addr().to_string(),
        backends[2].addr.to_string(),
    ];
    let proxy = Proxy::start(
        &conf(
            &addrs,
            &format!(
                "  auto_eject_hosts: true\n  server_failure_limit: 2\n  server_retry_timeout: {}\n  timeout: {}\n",
                RETRY.as_millis(),
                timeout.as_millis()
            ),
        ),
        1,
    );
    let sorted = sorted_addrs(&addrs);
    let faulty = sorted
        .iter()
        .position(|a| *a == fault.addr().to_string())
        .expect("the fault proxy is a server");
    let faulty_keys = keys_on(&sorted, faulty, 20);
    let healthy_keys: Vec<String> = (0..3)
        .filter(|&i| i != faulty)
        .flat_map(|i| keys_on(&sorted, i, 50))
        .collect();
    set_all(proxy.pools[0], &healthy_keys);
    set_all(proxy.pools[0], &faulty_keys);
    Cluster {
        backends,
        fault,
        proxy,
        faulty_keys,
        healthy_keys,
    }
}

/// Gets of healthy keys on their own connection, timed, until stopped.
struct HealthyLoad {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<(Vec<Duration>, Vec<String>)>,
}

impl HealthyLoad {
    fn start(c: &Cluster) -> HealthyLoad {
        let stop = Arc::new(AtomicBool::new(false));
        let (st, addr, keys) = (Arc::clone(&stop), c.proxy.pools[0], c.healthy_keys.clone());
        let thread = std::thread::spawn(move || {
            let mut conn = Conn::connect(addr);
            let (mut lat, mut errors) = (Vec::new(), Vec::new());
            'run: loop {
                for k in &keys {
                    if st.load(Ordering::Relaxed) {
                        break 'run;
                    }
                    let t = Instant::now();
                    match conn.get(&[k.as_str()]) {
                        Ok(v) if v.len() == 1 => lat.push(t.elapsed()),
                        other => errors.push(format!("{k}: {other:?}")),
                    }
                    // A steady rate, not a saturating one: latency, not throughput.
                    std::thread::sleep(Duration::from_micros(500));
                }
            }
            (lat, errors)
        });
        HealthyLoad { stop, thread }
    }

    fn finish(self) -> (Vec<Duration>, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("healthy load")
    }
}

fn p99(mut lat: Vec<Duration>) -> Duration {
    assert!(!lat.is_empty(), "no latency samples");
    lat.sort_unstable();
    lat[(lat.len() * 99 / 100).min(lat.len() - 1)]
}

/// The healthy keys' p99 without a fault, over one phase.
fn baseline(c: &Cluster) -> Duration {
    let load = HealthyLoad::start(c);
    std::thread::sleep(PHASE);
    let (lat, errors) = load.finish();
    assert!(errors.is_empty(), "{errors:?}");
    p99(lat)
}

/// Healthy keys under a fault keep their latency: p99 within 2x of the no-fault p99.
/// Loopback p99s are a fraction of a millisecond, where a 2-core machine's scheduling
/// alone moves them by more than that, so 10 ms of slack is allowed on top; what this
/// guards against, healthy requests waiting on the faulty backend, costs the fault's
/// delay or the pool's timeout (hundreds of ms).
fn assert_healthy_latency(fault: &str, base: Duration, under: Duration) {
    eprintln!("{fault}: healthy keys p99 {under:?} (no fault: {base:?})");
    assert!(
        under <= base * 2 + Duration::from_millis(10),
        "{fault}: healthy keys' p99 went from {base:?} to {under:?}"
    );
}

/// Sets faulty keys until one is stored on another server (the faulty one ejected),
/// checking every failure is `SERVER_ERROR` within the timeout and margin. Returns how
/// many requests failed.
fn until_ejected(c: &Cluster, fault: &str) -> usize {
    let mut conn = c.proxy.conn();
    let deadline = Instant::now() + Duration::from_secs(15);
    for (failed, k) in c.faulty_keys.iter().cycle().enumerate() {
        assert!(Instant::now() < deadline, "{fault}: never ejected");
        let t = Instant::now();
        let r = conn.set(k, "moved");
        let took = t.elapsed();
        assert!(
            took <= TIMEOUT + MARGIN,
            "{fault}: a request for the faulty backend took {took:?}"
        );
        if r == "STORED" {
            return failed;
        }
        assert!(r.starts_with("SERVER_ERROR"), "{fault}: {r}");
    }
    unreachable!("cycle never ends")
}

/// After the fault clears, the backend is re-admitted: within the retry timeout and a
/// margin, a faulty key set through the proxy lands on it again.
fn assert_readmitted(c: &Cluster, fault: &str) {
    c.fault.set(Fault::None);
    let cleared = Instant::now();
    let mut conn = c.proxy.conn();
    let home = &c.backends[1];
    let k = &c.faulty_keys[0];
    let deadline = cleared + RETRY + Duration::from_secs(10);
    loop {
        let r = conn.set(k, "home");
        let there = home.conn().get(&[k.as_str()]).expect("direct get");
        if r == "STORED" && there == vec![(k.clone(), "home".to_string())] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{fault}: not re-admitted ({r}, {there:?})"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "{fault}: re-admitted {:?} after the fault cleared",
        cleared.elapsed()
    );
}

fn assert_proxy_memory_bounded(c: &Cluster, fault: &str) {
    let rss = shoal_test_support::rss_kib(c.proxy.proc.child.id());
    eprintln!("{fault}: proxy RSS {rss} KiB");
    assert!(rss > 0 && rss < 64 * 1024, "{fault}: proxy RSS {rss} KiB");
}

/// A backend that fails requests (blackhole, half-open, reset): failures within the
/// timeout, ejection after the failure limit, healthy keys untouched, re-admission.
fn failing_backend(fault: Fault, name: &str) {
    let _serial = one_at_a_time();
    let c = cluster(TIMEOUT);
    let base = baseline(&c);
    let load = HealthyLoad::start(&c);
    c.fault.set(fault);
    let failed = until_ejected(&c, name);
    assert!(
        (1..=2).contains(&failed),
        "{name}: {failed} failures before ejection (limit 2)"
    );
    // Ejected: the faulty backend's keys are served elsewhere, promptly.
    let mut conn = c.proxy.conn();
    for k in &c.faulty_keys {
        assert_eq!(conn.set(k, "elsewhere"), "STORED", "{name}: {k}");
    }
    std::thread::sleep(PHASE / 2);
    let (lat, errors) = load.finish();
    assert!(errors.is_empty(), "{name}: healthy keys failed: {errors:?}");
    assert_healthy_latency(name, base, p99(lat));
    assert_readmitted(&c, name);
    assert_proxy_memory_bounded(&c, name);
    let stats = stats_json(&c.proxy);
    assert!(
        stats["alpha"]["server_ejects"].as_u64() >= Some(1),
        "{name}: {stats}"
    );
}

#[test]
fn blackholed_backend_fails_within_the_timeout_and_is_ejected() {
    failing_backend(Fault::Blackhole, "blackhole");
}

#[test]
fn half_open_backend_fails_within_the_timeout_and_is_ejected() {
    failing_backend(Fault::HalfOpen, "half-open");
}

#[test]
fn backend_resetting_mid_reply_fails_fast_and_is_ejected() {
    failing_backend(Fault::ResetMidReply, "reset mid-reply");
}

/// A backend that is slow (200 ms, under the timeout) or answers in 1-byte writes still
/// serves its keys, correctly, and is not ejected; the other keys keep their latency.
fn degraded_backend(fault: Fault, name: &str, at_least: Duration) {
    let _serial = one_at_a_time();
    let c = cluster(DEGRADED_TIMEOUT);
    let base = baseline(&c);
    let load = HealthyLoad::start(&c);
    c.fault.set(fault);
    let mut conn = c.proxy.conn();
    let started = Instant::now();
    let mut slowest = Duration::ZERO;
    while started.elapsed() < PHASE {
        for k in c.faulty_keys.iter().take(5) {
            let t = Instant::now();
            let got = conn
                .get(&[k.as_str()])
                .expect("get through a degraded backend");
            slowest = slowest.max(t.elapsed());
            assert_eq!(got, vec![(k.clone(), "v".to_string())], "{name}: {k}");
            assert!(t.elapsed() >= at_least, "{name}: {:?}", t.elapsed());
        }
    }
    let (lat, errors) = load.finish();
    assert!(errors.is_empty(), "{name}: healthy keys failed: {errors:?}");
    assert_healthy_latency(name, base, p99(lat));
    eprintln!("{name}: slowest request for the degraded backend {slowest:?}");
    assert!(slowest < DEGRADED_TIMEOUT, "{name}: {slowest:?}");
    let stats = stats_json(&c.proxy);
    assert_eq!(stats["alpha"]["server_ejects"], 0, "{name}: {stats}");
    c.fault.set(Fault::None);
    assert_proxy_memory_bounded(&c, name);
}

#[test]
fn slow_backend_serves_its_keys_and_others_keep_their_latency() {
    degraded_backend(
        Fault::Latency {
            delay: Duration::from_millis(200),
            jitter: Duration::from_millis(20),
        },
        "latency 200 ms",
        Duration::from_millis(200),
    );
}

#[test]
fn backend_answering_in_one_byte_writes_is_read_whole() {
    degraded_backend(Fault::Slice, "1-byte writes", Duration::ZERO);
}

/// Twenty kill -9s of shoal-proxy at random points under load (issue 28): each new
/// proxy on the same config comes up and serves every key the backends hold (a proxy
/// keeps no data, so nothing it acknowledged can be lost), with no backend affected.
#[test]
fn proxy_killed_twenty_times_under_load_restarts_and_serves() {
    let backends = three_backends();
    let addrs: Vec<String> = backends.iter().map(|b| b.addr.to_string()).collect();
    let config = conf(&addrs, "  timeout: 1000\n");
    let keys: Vec<String> = (0..300).map(|i| format!("kk:{i}")).collect();
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64 | 1);
    eprintln!("proxy kill9 x20: seed {seed}");
    for round in 0..20 {
        let mut proxy = Proxy::start(&config, 1);
        if round == 0 {
            set_all(proxy.pools[0], &keys);
        }
        let mut c = proxy.conn();
        for k in keys.iter().step_by(7) {
            assert_eq!(
                c.get(&[k.as_str()]).expect("get").len(),
                1,
                "round {round}: {k}"
            );
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (st, addr, ks) = (Arc::clone(&stop), proxy.pools[0], keys.clone());
        let load = std::thread::spawn(move || {
            use std::io::Write;
            let Ok(mut s) = std::net::TcpStream::connect(addr) else {
                return;
            };
            let _ = s.set_write_timeout(Some(Duration::from_millis(500)));
            let mut req = Vec::new();
            for k in &ks {
                req.extend_from_slice(format!("get {k}\r\n").as_bytes());
            }
            while !st.load(Ordering::Relaxed) && s.write_all(&req).is_ok() {}
        });
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(20 + seed % 200));
        proxy.proc.kill();
        stop.store(true, Ordering::Relaxed);
        load.join().expect("load thread");
        for b in &backends {
            assert_eq!(b.conn().set("backend-alive", "1"), "STORED");
        }
    }
}
