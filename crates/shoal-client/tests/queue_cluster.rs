//! The queue client (`shoal_client::queue_client`) against three real shoal-queued
//! processes (`--fsync always`) on loopback: one killed with SIGKILL mid-run and restarted
//! on its data directory and port loses and duplicates no acknowledged message; a server
//! in `status readonly` gets no sets but is drained. Every wait is bounded.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use shoal_client::queue_client::{QueueClient, QueueError};

fn queued_bin() -> PathBuf {
    shoal_test_support::workspace_bin("shoal-queued")
}

struct Queued {
    child: Child,
    addr: SocketAddr,
}

impl Queued {
    /// Start on `dir`, on `port` (0: an ephemeral one).
    fn start(dir: &Path, port: u16) -> Queued {
        let port = port.to_string();
        let dir = dir.to_str().expect("utf-8 dir");
        let (child, addr) = shoal_test_support::spawn_listening(
            Command::new(queued_bin())
                .args([
                    "-p",
                    &port,
                    "-l",
                    "127.0.0.1",
                    "-d",
                    dir,
                    "--fsync",
                    "always",
                ])
                .args(["-v", "-t", "1"]),
        );
        Queued { child, addr }
    }

    fn addr(&self) -> String {
        self.addr.to_string()
    }

    /// SIGKILL (std's `Child::kill`).
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

/// One request on a fresh connection; reads until `until` ends the reply.
fn raw(addr: &str, req: &str, until: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&out).ends_with(until) {
        let n = s.read(&mut buf).expect("read");
        assert!(
            n > 0,
            "closed before {until:?}: {:?}",
            String::from_utf8_lossy(&out)
        );
        out.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn within<T>(secs: u64, f: impl std::future::Future<Output = T>) -> T {
    queued_bin(); // a stale binary is rebuilt here, outside the time limit
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(secs), f)
            .await
            .expect("test timed out")
    })
}

fn client(addrs: &[String]) -> QueueClient {
    QueueClient::builder(addrs.iter().cloned())
        .gets_per_server(7)
        .timeout(Duration::from_millis(1500))
        .retry_delay(Duration::from_millis(200))
        .build()
        .expect("client")
}

#[derive(Default)]
struct Produced {
    acked: BTreeSet<u32>,
    /// Acknowledged, but an earlier attempt was cut after sending: may be stored twice.
    maybe_dup: BTreeSet<u32>,
    /// Not acknowledged: may or may not be delivered, never counted as lost.
    unacked: BTreeSet<u32>,
    per_server: BTreeMap<usize, usize>,
}

#[test]
fn three_servers_one_killed_mid_run_delivers_every_acknowledged_message_once() {
    const N: u32 = 900;
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut servers: Vec<Queued> = dirs.iter().map(|d| Queued::start(d.path(), 0)).collect();
    let addrs: Vec<String> = servers.iter().map(Queued::addr).collect();
    let victim_port = servers[1].addr.port();

    let acked_count = Arc::new(AtomicUsize::new(0));
    let producing = Arc::new(AtomicBool::new(true));
    let restarted = Arc::new(AtomicBool::new(false));

    // The killer: SIGKILL server 1 once a third of the messages are acknowledged and the
    // consumer holds an open read there, restart it 300 ms later.
    let killed = Arc::new(AtomicBool::new(false));
    let (kill_tx, kill_rx) = mpsc::channel::<()>();
    let (back_tx, back_rx) = mpsc::channel::<Queued>();
    let victim = servers.remove(1);
    let victim_dir = dirs[1].path().to_path_buf();
    let killer = {
        let killed = killed.clone();
        std::thread::spawn(move || {
            let mut victim = victim;
            kill_rx
                .recv_timeout(Duration::from_secs(60))
                .expect("kill signal");
            victim.kill();
            drop(victim);
            killed.store(true, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(300));
            back_tx
                .send(Queued::start(&victim_dir, victim_port))
                .unwrap();
        })
    };

    let (produced, delivered, cut, held_at_kill) = within(120, async {
        let producer = {
            let addrs = addrs.clone();
            let acked_count = acked_count.clone();
            let producing = producing.clone();
            tokio::spawn(async move {
                let mut q = client(&addrs);
                let mut p = Produced::default();
                for i in 0..N {
                    match q.set("orders", format!("m{i}").as_bytes(), 0).await {
                        Ok(r) => {
                            p.acked.insert(i);
                            if r.maybe_duplicated {
                                p.maybe_dup.insert(i);
                            }
                            *p.per_server.entry(r.server).or_default() += 1;
                            acked_count.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(e) => {
                            eprintln!("set m{i}: {e}");
                            p.unacked.insert(i);
                        }
                    }
                    if i % 50 == 0 {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
                producing.store(false, Ordering::SeqCst);
                p
            })
        };
        let consumer = {
            let addrs = addrs.clone();
            let producing = producing.clone();
            let restarted = restarted.clone();
            let acked_count = acked_count.clone();
            let killed = killed.clone();
            tokio::spawn(async move {
                let mut kill_tx = Some(kill_tx);
                let mut held_at_kill = None;
                let mut q = client(&addrs);
                let mut delivered: BTreeMap<u32, u32> = BTreeMap::new();
                // Messages whose open read was cut by a connection failure.
                let mut cut: BTreeSet<u32> = BTreeSet::new();
                let mut pending: Option<u32> = None;
                let mut empties = 0;
                loop {
                    match q.get_open("orders").await {
                        Ok(Some(v)) => {
                            empties = 0;
                            let s = String::from_utf8(v).unwrap();
                            let i: u32 = s.strip_prefix('m').unwrap().parse().unwrap();
                            *delivered.entry(i).or_default() += 1;
                            pending = Some(i);
                            if acked_count.load(Ordering::SeqCst) >= N as usize / 3
                                && q.open_on("orders") == Some(1)
                            {
                                if let Some(tx) = kill_tx.take() {
                                    tx.send(()).unwrap();
                                    held_at_kill = Some(i);
                                    while !killed.load(Ordering::SeqCst) {
                                        tokio::time::sleep(Duration::from_millis(5)).await;
                                    }
                                }
                            }
                        }
                        Ok(None) => {
                            pending = None;
                            empties += 1;
                            let done = !producing.load(Ordering::SeqCst)
                                && restarted.load(Ordering::SeqCst);
                            // Three empty rounds over all servers once everything is up.
                            if done && empties >= 9 {
                                break;
                            }
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                        Err(QueueError::Connection { open_read_lost, .. }) => {
                            if open_read_lost {
                                cut.extend(pending.take());
                            }
                            empties = 0;
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                        Err(e) => panic!("get_open: {e}"),
                    }
                }
                q.close("orders").await.expect("final close");
                (delivered, cut, held_at_kill)
            })
        };
        // Wait for the restart, outside the runtime's worker threads.
        let back = tokio::task::spawn_blocking(move || {
            back_rx
                .recv_timeout(Duration::from_secs(60))
                .expect("restart")
        })
        .await
        .unwrap();
        restarted.store(true, Ordering::SeqCst);
        let produced = producer.await.unwrap();
        let (delivered, cut, held_at_kill) = consumer.await.unwrap();
        servers.insert(1, back);
        (produced, delivered, cut, held_at_kill)
    });
    killer.join().unwrap();

    // The open read held on the victim when it was killed was cut, and delivered again
    // after the restart.
    let held = held_at_kill.expect("killed while holding an open read");
    assert!(cut.contains(&held), "{held} not reported cut: {cut:?}");
    assert_eq!(delivered.get(&held), Some(&2), "m{held}");
    // Every server took sets (random spread), including the victim before the kill.
    assert_eq!(produced.per_server.len(), 3, "{:?}", produced.per_server);
    assert!(
        produced.acked.len() as u32 > N * 9 / 10,
        "{} acked",
        produced.acked.len()
    );
    let lost: Vec<_> = produced
        .acked
        .iter()
        .filter(|i| !delivered.contains_key(i))
        .collect();
    assert!(
        lost.is_empty(),
        "acknowledged but never delivered: {lost:?}"
    );
    let twice: Vec<_> = delivered
        .iter()
        .filter(|&(i, &n)| n > 1 && !cut.contains(i) && !produced.maybe_dup.contains(i))
        .collect();
    assert!(twice.is_empty(), "delivered more than once: {twice:?}");
    let invented: Vec<_> = delivered
        .keys()
        .filter(|i| !produced.acked.contains(i) && !produced.unacked.contains(i))
        .collect();
    assert!(invented.is_empty(), "never set: {invented:?}");
    eprintln!(
        "acked {} (maybe duplicated {}), unacked {}, delivered {}, cut open reads {}, per server {:?}",
        produced.acked.len(),
        produced.maybe_dup.len(),
        produced.unacked.len(),
        delivered.len(),
        cut.len(),
        produced.per_server
    );
    // Everything is consumed: nothing left on any server.
    for s in &servers {
        assert_eq!(raw(&s.addr(), "get orders\r\n", "END\r\n"), "END\r\n");
    }
}

#[test]
fn a_readonly_server_gets_no_sets_but_is_drained() {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let servers: Vec<Queued> = dirs.iter().map(|d| Queued::start(d.path(), 0)).collect();
    let addrs: Vec<String> = servers.iter().map(Queued::addr).collect();
    // Server 0 holds five messages, then goes read-only.
    for i in 0..5 {
        let set = format!("set jobs 0 0 2\r\nr{i}\r\n");
        assert_eq!(raw(&addrs[0], &set, "\r\n"), "STORED\r\n");
    }
    assert_eq!(raw(&addrs[0], "status readonly\r\n", "\r\n"), "END\r\n");

    within(60, async {
        let mut q = client(&addrs);
        for i in 0..60 {
            let r = q.set("jobs", format!("w{i}").as_bytes(), 0).await.unwrap();
            assert_ne!(r.server, 0, "a set went to the read-only server");
            assert!(!r.maybe_duplicated);
        }
        let mut got = BTreeSet::new();
        let mut empties = 0;
        while empties < 6 {
            match q.get_open("jobs").await.unwrap() {
                Some(v) => {
                    empties = 0;
                    assert!(got.insert(String::from_utf8(v).unwrap()), "delivered twice");
                }
                None => empties += 1,
            }
        }
        q.close("jobs").await.unwrap();
        let want: BTreeSet<String> = (0..5)
            .map(|i| format!("r{i}"))
            .chain((0..60).map(|i| format!("w{i}")))
            .collect();
        assert_eq!(got, want);
    });
    // Server 0 is drained and still read-only.
    assert_eq!(raw(&addrs[0], "get jobs\r\n", "END\r\n"), "END\r\n");
    assert_eq!(raw(&addrs[0], "status\r\n", "\r\n"), "READONLY\r\n");
}

#[test]
fn reliable_reads_stay_on_their_connection_and_abort_gives_back() {
    let dirs: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let servers: Vec<Queued> = dirs.iter().map(|d| Queued::start(d.path(), 0)).collect();
    let addrs: Vec<String> = servers.iter().map(Queued::addr).collect();
    for s in &addrs {
        for i in 0..3 {
            let set = format!("set t 0 0 2\r\n{}{i}\r\n", &s[s.len() - 1..]);
            assert_eq!(raw(s, &set, "\r\n"), "STORED\r\n");
        }
    }
    within(30, async {
        let mut q = QueueClient::builder(addrs.iter().cloned())
            .gets_per_server(3)
            .build()
            .unwrap();
        let a = q.get_open("t").await.unwrap().unwrap();
        let held = q.open_on("t").unwrap();
        q.abort("t").await.unwrap();
        assert_eq!(q.open_on("t"), None);
        // Given back to the head: read again.
        assert_eq!(q.get_open("t").await.unwrap().unwrap(), a);
        assert_eq!(q.open_on("t"), Some(held));
        // The next read on that server closes the first with /close/open.
        q.get_open("t").await.unwrap().unwrap();
        assert_eq!(q.open_on("t"), Some(held));
        // gets_per_server reached: the next read closes there and opens elsewhere.
        q.get_open("t").await.unwrap().unwrap();
        assert_ne!(q.open_on("t"), Some(held));
        q.close("t").await.unwrap();
        let mut left = 0;
        while let Some(_v) = q.get("t").await.unwrap() {
            left += 1;
        }
        // 6 set, 3 consumed by reliable reads; the empty read ended on one server.
        let mut rest = 0;
        while let Some(_v) = q.get("t").await.unwrap() {
            rest += 1;
        }
        assert_eq!(left + rest, 3);
    });
}
