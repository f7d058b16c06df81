//! Hostile clients against the real binary: memory stays bounded and other clients keep
//! being served.
//!
//! - Senders that stall mid-value: 800 connections each send 900 KB of a 1 MB `set` and
//!   stop. Only what the read budget (`--read-buf-mem-limit`, 64 MB by default) covers is
//!   buffered; the rest are refused and their bytes discarded as they arrive.
//! - Consumers that never read: 40 connections each ask for more than 100 MB of replies
//!   and read none of them. Each holds at most 256 KB of replies plus one message.
//! - `-c`: connections past the limit are refused, and slots come back.
//! - `--idle-timeout`: silent and stalled connections are closed; active ones and blocking
//!   reads waiting for a message are not.
//!
//! Every test prints the server's resident memory (VmRSS sampled every 20 ms, and the
//! kernel's peak VmHWM) so the numbers can be quoted. The tests run one at a time: each
//! is about resident memory and CPU, which a concurrent one would distort.

mod common;

use common::{Client, Server};
use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The bound both floods must stay under.
const RSS_LIMIT_KB: u64 = 192 * 1024;
/// How long a fresh client may wait for service while the flood is on.
const SERVED_WITHIN: Duration = Duration::from_secs(2);

fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A `/proc/<pid>/status` field in kB of a process that must be running.
fn proc_status_kb(pid: u32, field: &str) -> u64 {
    shoal_test_support::proc_status_kib(pid, field)
        .unwrap_or_else(|| panic!("no {field} for pid {pid}"))
}

/// Samples the server's VmRSS every 20 ms in the background, keeping the largest.
struct RssSampler(shoal_test_support::RssSampler);

impl RssSampler {
    fn start(pid: u32) -> RssSampler {
        RssSampler(shoal_test_support::RssSampler::start(
            pid,
            Duration::from_millis(20),
        ))
    }

    /// The largest VmRSS seen, in kB.
    fn finish(self) -> u64 {
        self.0.finish()
    }
}

/// Raises this process's descriptor limit (inherited by the server it spawns) towards
/// `want`; returns the limit now in force.
fn raise_nofile(want: u64) -> u64 {
    shoal_test_support::raise_fd_limit(want)
}

/// How many hostile connections to open: `want`, or fewer if descriptors are short (both
/// this process and the server need one per connection, plus their own files).
fn connection_count(want: usize) -> usize {
    let limit = raise_nofile(want as u64 + 256);
    let n = want.min(usize::try_from(limit.saturating_sub(128)).unwrap_or(want));
    if n < want {
        eprintln!("RLIMIT_NOFILE is {limit}: using {n} connections instead of {want}");
    }
    n
}

/// Opens `n` connections from `threads` threads, running `send(i, client)` on each;
/// returns them in order of `i`.
fn open_all<F>(addr: SocketAddr, n: usize, threads: usize, send: F) -> Vec<Client>
where
    F: Fn(usize, &mut Client) + Sync,
{
    let mut all: Vec<(usize, Client)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let send = &send;
                s.spawn(move || {
                    (t..n)
                        .step_by(threads)
                        .map(|i| {
                            let mut c = Client::connect(addr);
                            send(i, &mut c);
                            (i, c)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("client thread"))
            .collect()
    });
    all.sort_by_key(|(i, _)| *i);
    all.into_iter().map(|(_, c)| c).collect()
}

/// A fresh client gets `version` answered, and a set and get on a queue of its own, within
/// [`SERVED_WITHIN`]; returns how long it took.
fn fresh_client_is_served(server: &Server) -> Duration {
    let started = Instant::now();
    let mut c = server.client();
    assert!(c.cmd("version").starts_with("VERSION "));
    assert_eq!(c.set("bystander", b"still served"), "STORED");
    assert_eq!(c.get_str("bystander").as_deref(), Some("still served"));
    let took = started.elapsed();
    assert!(took < SERVED_WITHIN, "a fresh client waited {took:?}");
    took
}

/// Prints and checks the server's memory: the sampled maximum and the kernel's peak.
fn check_rss(what: &str, pid: u32, sampled_max_kb: u64) {
    let now = proc_status_kb(pid, "VmRSS");
    let peak = proc_status_kb(pid, "VmHWM");
    eprintln!(
        "{what}: server VmRSS now {} MB, sampled max {} MB, peak (VmHWM) {} MB; limit {} MB",
        now / 1024,
        sampled_max_kb / 1024,
        peak / 1024,
        RSS_LIMIT_KB / 1024
    );
    assert!(
        sampled_max_kb < RSS_LIMIT_KB,
        "{what}: VmRSS reached {sampled_max_kb} kB"
    );
    assert!(peak < RSS_LIMIT_KB, "{what}: VmHWM reached {peak} kB");
}

fn stat_u64(c: &mut Client, name: &str) -> u64 {
    c.stat(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("stat {name}"))
}

#[test]
fn stalled_senders_are_held_to_the_read_budget() {
    const VALUE_LEN: usize = 1 << 20;
    const SENT: usize = 900 * 1024;
    let _serial = serial();
    let conns = connection_count(800);
    let d = tempfile::tempdir().expect("tempdir");
    let server = Server::start(d.path(), &[]);
    let pid = server.pid();
    eprintln!(
        "stalled senders: server VmRSS at start {} MB",
        proc_status_kb(pid, "VmRSS") / 1024
    );
    let value: Vec<u8> = (0..VALUE_LEN).map(|i| b'a' + (i % 26) as u8).collect();
    let sampler = RssSampler::start(pid);
    let started = Instant::now();
    let mut clients = open_all(server.addr, conns, 8, |_, c| {
        c.send(format!("set q 0 0 {VALUE_LEN}\r\n").as_bytes());
        c.send(&value[..SENT]);
    });
    eprintln!(
        "stalled senders: {conns} connections each sent {SENT} bytes of a {VALUE_LEN}-byte \
         value in {:?}, then stalled",
        started.elapsed()
    );
    // Give the server time to take in everything in flight.
    std::thread::sleep(Duration::from_secs(1));
    let took = fresh_client_is_served(&server);
    eprintln!("stalled senders: a fresh client was served in {took:?}");
    let mut admin = server.client();
    let held = stat_u64(&mut admin, "read_buf_bytes");
    let oom = stat_u64(&mut admin, "read_buf_oom");
    eprintln!(
        "stalled senders: read buffers hold {} MB beyond what they hold for free",
        held >> 20
    );
    assert!(held <= 64 << 20, "the budget is 64 MB: {held}");

    // The refused connections were told so at once; the others are waiting for the rest.
    let mut refused = Vec::new();
    let mut buffered = Vec::new();
    for (i, c) in clients.iter_mut().enumerate() {
        match c.line_within(Duration::from_millis(30)) {
            Some(l) => {
                assert_eq!(l, "SERVER_ERROR out of memory storing object");
                refused.push(i);
            }
            None => buffered.push(i),
        }
    }
    eprintln!(
        "stalled senders: {} buffered within the budget, {} refused",
        buffered.len(),
        refused.len()
    );
    assert_eq!(
        refused.len() as u64,
        oom,
        "one refusal counted per refused value"
    );
    assert!(!refused.is_empty() && !buffered.is_empty());
    // Both kinds go on serving. A refused value is discarded however much of it comes...
    let c = &mut clients[refused[0]];
    c.send(&value[SENT..]);
    c.send(b"\r\n");
    assert!(c.cmd("version").starts_with("VERSION "));
    // ...and a buffered one is stored once complete, intact.
    let c = &mut clients[buffered[0]];
    c.send(&value[SENT..]);
    c.send(b"\r\n");
    assert_eq!(c.line(), "STORED");
    let max = sampler.finish();
    let got = admin.get("q").expect("the completed value");
    assert!(got.1 == value, "the stored value differs");
    assert_eq!(admin.get("q"), None, "only the completed value was stored");
    check_rss("stalled senders", pid, max);
    drop(clients);
}

#[test]
fn non_reading_consumers_are_held_to_the_output_bound() {
    const ITEM: usize = 100 * 1024;
    // 1100 replies of 100 KB: 110 MB per connection.
    const GETS: usize = 1100;
    const CONNS: usize = 40;
    let _serial = serial();
    connection_count(CONNS);
    let d = tempfile::tempdir().expect("tempdir");
    let server = Server::start(d.path(), &[]);
    let pid = server.pid();
    let item: Vec<u8> = (0..ITEM).map(|i| b'A' + (i % 26) as u8).collect();
    let mut admin = server.client();
    assert_eq!(admin.set("big", &item), "STORED");
    eprintln!(
        "silent consumers: server VmRSS at start {} MB",
        proc_status_kb(pid, "VmRSS") / 1024
    );
    // `/peek` leaves the message in place, so one message yields unlimited replies and
    // nothing is consumed that a client never receives. Half the connections pipeline
    // separate gets, half send multi-gets of many keys.
    let pipelined = "get big/peek\r\n".repeat(GETS);
    let multi = format!("get{}\r\n", " big/peek".repeat(GETS));
    let sampler = RssSampler::start(pid);
    let mut clients = open_all(server.addr, CONNS, 4, |i, c| {
        let req = if i % 2 == 0 { &pipelined } else { &multi };
        c.send(req.as_bytes());
    });
    eprintln!(
        "silent consumers: {CONNS} connections asked for {} MB of replies each, reading none",
        (GETS * ITEM) >> 20
    );
    // Let the server do all it will for them.
    std::thread::sleep(Duration::from_secs(3));
    let took = fresh_client_is_served(&server);
    eprintln!("silent consumers: a fresh client was served in {took:?}");
    let max = sampler.finish();
    check_rss("silent consumers", pid, max);
    // They were paused, not dropped: each gets every reply once it reads.
    for (i, c) in clients.iter_mut().take(2).enumerate() {
        for n in 0..GETS {
            assert_eq!(c.line(), format!("VALUE big 0 {ITEM}"), "reply {n}");
            assert!(c.try_data(ITEM).expect("data") == item, "reply {n} differs");
            if i % 2 == 0 {
                assert_eq!(c.line(), "END");
            }
        }
        if i % 2 == 1 {
            assert_eq!(c.line(), "END");
        }
    }
    assert_eq!(
        admin.get("big").map(|(_, d)| d.len()),
        Some(ITEM),
        "peeks consume nothing"
    );
    drop(clients);
}

/// The budget's rules, deterministically on a budget of 1 MB: one stalled 1 MB value takes
/// nearly all of it; then small requests still work, large values are refused (silently
/// with `noreply`) and the connection goes on, an over-long multi-get line is refused and
/// its connection closed; once the value completes, the budget is whole again.
#[test]
fn a_spent_budget_refuses_large_requests_only() {
    const BIG: usize = 1_000_000;
    let _serial = serial();
    let d = tempfile::tempdir().expect("tempdir");
    let server = Server::start(d.path(), &["--read-buf-mem-limit", "1"]);
    let mut admin = server.client();
    let value = vec![b'v'; BIG];
    let mut staller = server.client();
    staller.send(format!("set big 0 0 {BIG}\r\n").as_bytes());
    staller.send(&value[..BIG / 2]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while stat_u64(&mut admin, "read_buf_bytes") == 0 {
        assert!(
            Instant::now() < deadline,
            "the stalled value was never buffered"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Small requests fit in what a buffer holds for free and need nothing from the budget.
    let mut c = server.client();
    assert_eq!(c.set("small", &[b's'; 8000]), "STORED");
    // A large value is refused and discarded; the connection carries on.
    let medium = vec![b'm'; 200_000];
    assert_eq!(
        c.try_set("q", 0, 0, &medium).expect("set"),
        "SERVER_ERROR out of memory storing object"
    );
    let mut quiet = b"set q 0 0 200000 noreply\r\n".to_vec();
    quiet.extend_from_slice(&medium);
    quiet.extend_from_slice(b"\r\n");
    c.send(&quiet);
    assert!(
        c.cmd("version").starts_with("VERSION "),
        "noreply: no answer"
    );
    assert_eq!(c.get("q"), None, "nothing refused was stored");
    // A multi-get line too long for what is left: refused, and the connection closed
    // (the server may close before taking the whole line, so the client may see a reset).
    let oom_before = stat_u64(&mut admin, "read_buf_oom");
    let long_get = format!("get{}\r\n", " k".repeat(100_000));
    let mut g = server.client();
    let _ = g.try_send(long_get.as_bytes());
    if let Ok(l) = g.try_line() {
        assert_eq!(l, "SERVER_ERROR out of memory reading request");
        assert!(g.try_line().is_err(), "closed after the refusal");
    }
    assert_eq!(stat_u64(&mut admin, "read_buf_oom"), oom_before + 1);
    // The stalled value completes; its buffer is given back.
    staller.send(&value[BIG / 2..]);
    staller.send(b"\r\n");
    assert_eq!(staller.line(), "STORED");
    assert_eq!(stat_u64(&mut admin, "read_buf_bytes"), 0);
    assert_eq!(c.try_set("q", 0, 0, &medium).expect("set"), "STORED");
    let mut g = server.client();
    g.send(long_get.as_bytes());
    assert_eq!(g.line(), "END");
    assert_eq!(admin.get("big").map(|(_, d)| d.len()), Some(BIG));
}

#[test]
fn connections_past_the_limit_are_refused_and_slots_return() {
    let _serial = serial();
    let d = tempfile::tempdir().expect("tempdir");
    let server = Server::start(d.path(), &["-c", "2"]);
    let mut a = server.client();
    assert!(a.cmd("version").starts_with("VERSION "));
    let mut b = server.client();
    assert!(b.cmd("version").starts_with("VERSION "));
    let mut over = server.client();
    assert_eq!(over.line(), "ERROR Too many open connections");
    assert!(over.try_line().is_err(), "closed after the refusal");
    drop(a);
    // The slot comes back once the server has seen the close.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut c = loop {
        let mut c = server.client();
        c.send(b"version\r\n");
        match c.try_line() {
            Ok(l) if l.starts_with("VERSION ") => break c,
            _ => {
                assert!(
                    Instant::now() < deadline,
                    "the closed connection's slot never came back"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    };
    assert_eq!(c.stat("curr_connections").as_deref(), Some("2"));
    assert!(b.cmd("version").starts_with("VERSION "));
}

/// Whether the server has closed `c`'s connection: the next read ends rather than
/// yielding a line (or timing out).
fn closed_by_server(c: &mut Client) -> bool {
    match c.try_line() {
        Ok(line) => panic!("expected a close, got {line:?}"),
        Err(e) => matches!(
            e.kind(),
            std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset
        ),
    }
}

/// `--idle-timeout`: a connection that sends nothing, or stalls half-way through a
/// message (slowloris), is closed once that long has passed, and an open read it held goes
/// back to its queue; one that keeps sending requests is not, and neither is a blocking
/// read waiting longer than the timeout for a message, whose idle time starts only once
/// its reply is sent.
#[test]
fn idle_connections_are_closed_but_active_and_blocked_readers_are_not() {
    let _serial = serial();
    let d = tempfile::tempdir().expect("tempdir");
    let server = Server::start(d.path(), &["--idle-timeout", "1"]);
    let mut active = server.client();
    assert_eq!(active.set("held", b"first"), "STORED");

    let mut silent = server.client();
    let mut stalled = server.client();
    stalled.send(b"set slow 0 0 10\r\nabc");
    let mut opener = server.client();
    opener.send(b"get held/open\r\n");
    assert_eq!(opener.line(), "VALUE held 0 5");
    assert_eq!(opener.line(), "first");
    assert_eq!(opener.line(), "END");
    let mut blocked = server.client();
    blocked.send(b"get jobs/t=20000\r\n");

    // 2.5 timeouts of steady requests; the pacing is the workload, not synchronisation.
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(2500) {
        assert!(active.cmd("version").starts_with("VERSION "), "active cut");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(closed_by_server(&mut silent), "a silent connection");
    assert!(
        closed_by_server(&mut stalled),
        "a sender stalled mid-message"
    );
    assert!(
        closed_by_server(&mut opener),
        "an idle holder of an open read"
    );
    assert_eq!(
        active.get_str("held").as_deref(),
        Some("first"),
        "the open read went back to the head of its queue"
    );

    // The blocked reader has waited 2.5 timeouts and is still there to take a message.
    assert_eq!(active.set("jobs", b"m"), "STORED");
    assert_eq!(blocked.line(), "VALUE jobs 0 1");
    assert_eq!(blocked.line(), "m");
    assert_eq!(blocked.line(), "END");
    let served = Instant::now();
    // Closed by the client, so it is not counted among the idle ones.
    drop(active);
    // Now it is idle like any other.
    assert!(closed_by_server(&mut blocked), "idle after its read");
    assert!(
        served.elapsed() >= Duration::from_millis(900),
        "closed {:?} after its reply, before the timeout",
        served.elapsed()
    );
    // Counted once each connection's close is done (after the client saw it).
    let mut admin = server.client();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let kicks = stat_u64(&mut admin, "idle_kicks");
        if kicks == 4 {
            break;
        }
        assert!(Instant::now() < deadline, "idle_kicks {kicks}, expected 4");
        std::thread::sleep(Duration::from_millis(20));
    }
}
