//! Seed 001: optimistic locking with `gets` + `cas` on one counter.
//!
//! One connection's gets+cas loop rate; then 1 to 100 connections decrementing one
//! counter with gets+cas (attempts/s, successes/s, success rate), and the same work with
//! atomic `decr` and meta arithmetic (`ma ... MD`), which never fail. Each run checks the
//! counter: it must have dropped by exactly the successes counted.

use super::conn::SyncConn;
use super::{note, Env, ServerKind};
use crate::chart::{self, Series};
use crate::report::num;
use crate::report::Experiment;
use crate::BenchError;
use serde::Serialize;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// How a connection decrements the counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// `gets` then `cas` (fails when another connection got there first).
    Cas,
    /// `decr <key> 1`.
    Decr,
    /// Meta arithmetic `ma <key> MD`.
    Ma,
}

impl Method {
    fn name(self) -> &'static str {
        match self {
            Method::Cas => "gets+cas",
            Method::Decr => "decr",
            Method::Ma => "ma (meta)",
        }
    }
}

/// One concurrency level.
#[derive(Clone, Debug, Serialize)]
pub struct CasRow {
    /// Server.
    pub server: String,
    /// Method.
    pub method: Method,
    /// Concurrent connections.
    pub conns: usize,
    /// Attempts per second.
    pub attempts_per_sec: f64,
    /// Successful decrements per second.
    pub successes_per_sec: f64,
    /// Successes over attempts.
    pub success_rate: f64,
    /// Whether the counter dropped by exactly the successes counted.
    pub counter_consistent: bool,
}

/// Everything the `cas` experiment measured.
#[derive(Clone, Debug, Serialize)]
pub struct CasReport {
    /// One connection's gets+cas loops per second, per server.
    pub single_loop: Vec<(String, f64)>,
    /// The contention runs.
    pub rows: Vec<CasRow>,
    /// Seconds per level.
    pub secs_per_level: f64,
    /// What could not run, and why.
    pub skipped: Vec<String>,
}

/// Seed 001's published contention results: (threads, attempts/s, successes/s, rate).
const SEED_001: &[(usize, f64, f64, f64)] = &[
    (2, 944.0, 944.0, 1.0),
    (3, 1828.0, 1742.0, 0.953),
    (4, 2037.0, 1793.0, 0.880),
    (5, 2580.0, 2097.0, 0.813),
    (6, 2895.0, 2120.0, 0.732),
    (7, 3214.0, 2229.0, 0.694),
    (8, 3267.0, 2222.0, 0.680),
    (9, 3391.0, 2284.0, 0.674),
    (50, 3833.0, 1783.0, 0.465),
    (75, 4285.0, 1939.0, 0.452),
    (100, 4487.0, 1968.0, 0.439),
];

const START: u64 = 1_000_000_000;

/// The experiment's commands, on the seeds' shared blocking connection.
impl SyncConn {
    /// `gets key`: (value, cas unique).
    fn gets(&mut self, key: &str) -> Result<(u64, u64), BenchError> {
        self.send(format!("gets {key}\r\n").as_bytes())?;
        let l = self.lines(3)?;
        let bad = || BenchError::Protocol(format!("gets reply {l:?}"));
        let head: Vec<&str> = l[0].split(' ').collect();
        if head.len() != 5 || head[0] != "VALUE" || l[2] != "END" {
            return Err(bad());
        }
        let unique = head[4].parse().map_err(|_| bad())?;
        let v = l[1].trim().parse().map_err(|_| bad())?;
        Ok((v, unique))
    }

    /// `cas key 0 0 n unique`: whether it was stored.
    fn cas(&mut self, key: &str, v: u64, unique: u64) -> Result<bool, BenchError> {
        let v = v.to_string();
        self.send(format!("cas {key} 0 0 {} {unique}\r\n{v}\r\n", v.len()).as_bytes())?;
        match self.line()?.as_str() {
            "STORED" => Ok(true),
            "EXISTS" | "NOT_FOUND" => Ok(false),
            other => Err(BenchError::Protocol(format!("cas reply {other:?}"))),
        }
    }

    fn set(&mut self, key: &str, v: u64) -> Result<(), BenchError> {
        let v = v.to_string();
        self.send(format!("set {key} 0 0 {}\r\n{v}\r\n", v.len()).as_bytes())?;
        match self.line()?.as_str() {
            "STORED" => Ok(()),
            other => Err(BenchError::Protocol(format!("set reply {other:?}"))),
        }
    }

    fn get(&mut self, key: &str) -> Result<u64, BenchError> {
        self.gets(key).map(|(v, _)| v)
    }

    /// One decrement by `method`: whether it took effect.
    fn decrement(&mut self, key: &str, method: Method) -> Result<bool, BenchError> {
        match method {
            Method::Cas => {
                let (v, unique) = self.gets(key)?;
                self.cas(key, v.saturating_sub(1), unique)
            }
            Method::Decr => {
                self.send(format!("decr {key} 1\r\n").as_bytes())?;
                let l = self.line()?;
                l.parse::<u64>()
                    .map(|_| true)
                    .map_err(|_| BenchError::Protocol(format!("decr reply {l:?}")))
            }
            Method::Ma => {
                self.send(format!("ma {key} MD\r\n").as_bytes())?;
                match self.line()?.as_str() {
                    "HD" => Ok(true),
                    other => Err(BenchError::Protocol(format!("ma reply {other:?}"))),
                }
            }
        }
    }
}

/// `conns` connections decrementing `key` by `method` for `secs`.
fn level(
    addr: SocketAddr,
    server: &str,
    method: Method,
    conns: usize,
    secs: f64,
) -> Result<CasRow, BenchError> {
    let key = "shoal-bench:counter";
    let mut admin = SyncConn::open(addr)?;
    admin.set(key, START)?;
    let mut cs = (0..conns)
        .map(|_| SyncConn::open(addr))
        .collect::<Result<Vec<_>, _>>()?;
    let barrier = Barrier::new(conns);
    let results: Vec<Result<(u64, u64), BenchError>> = std::thread::scope(|s| {
        let hs: Vec<_> = cs
            .iter_mut()
            .map(|c| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    let end = Instant::now() + Duration::from_secs_f64(secs);
                    let (mut tries, mut ok) = (0u64, 0u64);
                    while Instant::now() < end {
                        tries += 1;
                        ok += u64::from(c.decrement(key, method)?);
                    }
                    Ok((tries, ok))
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(BenchError::Config("cas thread panicked".into())))
            })
            .collect()
    });
    let (mut tries, mut ok) = (0, 0);
    for r in results {
        let (t, o) = r?;
        tries += t;
        ok += o;
    }
    let after = admin.get(key)?;
    Ok(CasRow {
        server: server.into(),
        method,
        conns,
        attempts_per_sec: tries as f64 / secs,
        successes_per_sec: ok as f64 / secs,
        success_rate: if tries > 0 {
            ok as f64 / tries as f64
        } else {
            0.0
        },
        counter_consistent: START - after == ok,
    })
}

/// Runs the experiment against shoald and memcached.
pub fn run(env: &Env) -> Result<CasReport, BenchError> {
    let mut skipped = Vec::new();
    let levels: Vec<usize> = env.mode.pick(
        vec![1, 2, 4],
        vec![1, 2, 4, 8, 16, 50, 100],
        vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 50, 75, 100],
    );
    let secs = env.mode.pick(0.1, 1.0, 5.0);
    let single_secs = env.mode.pick(0.2, 2.0, 10.0);
    let mut report = CasReport {
        single_loop: Vec::new(),
        rows: Vec::new(),
        secs_per_level: secs,
        skipped: Vec::new(),
    };
    for kind in [ServerKind::Shoald, ServerKind::Memcached] {
        let Some(nodes) = env.nodes(kind, 1, &[], &mut skipped)? else {
            continue;
        };
        let addr = nodes.addrs[0];
        let name = kind.name();
        let one = level(addr, name, Method::Cas, 1, single_secs)?;
        note(
            "cas",
            &format!(
                "{name}: one connection, {:.0} gets+cas loops/s",
                one.attempts_per_sec
            ),
        );
        report.single_loop.push((name.into(), one.attempts_per_sec));
        for method in [Method::Cas, Method::Decr, Method::Ma] {
            for &n in &levels {
                let r = level(addr, name, method, n, secs)?;
                note(
                    "cas",
                    &format!(
                        "{name} {} x{n}: {:.0} attempts/s, {:.0} ok/s, {:.1}%",
                        method.name(),
                        r.attempts_per_sec,
                        r.successes_per_sec,
                        r.success_rate * 100.0
                    ),
                );
                if !r.counter_consistent {
                    return Err(BenchError::Protocol(format!(
                        "{name}: the counter did not drop by the {} decrements counted",
                        method.name()
                    )));
                }
                report.rows.push(r);
            }
        }
    }
    report.skipped = skipped;
    Ok(report)
}

impl Experiment for CasReport {
    fn title(&self) -> &'static str {
        "cas: optimistic locking under contention (seed 001)"
    }

    fn markdown(&self) -> String {
        let mut m = String::new();
        m.push_str("One connection looping `gets` + `cas` on one counter (seed 001: ~1,000-1,220 loops/s from python-memcached):\n\n| server | loops/s |\n|---|---:|\n");
        for (s, v) in &self.single_loop {
            let _ = writeln!(m, "| {s} | {} |", num(*v));
        }
        let _ = writeln!(
            m,
            "\nN connections decrementing one counter for {} s each; the counter is checked to have dropped by exactly the successes counted.\n",
            self.secs_per_level
        );
        m.push_str("| server | method | conns | attempts/s | successes/s | success rate | seed 001 (attempts/s, successes/s, rate) |\n|---|---|---:|---:|---:|---:|---|\n");
        for r in &self.rows {
            let seed = if r.method == Method::Cas {
                SEED_001
                    .iter()
                    .find(|s| s.0 == r.conns)
                    .map_or("-".into(), |s| {
                        format!("{}, {}, {:.1}%", num(s.1), num(s.2), s.3 * 100.0)
                    })
            } else {
                "-".into()
            };
            let _ = writeln!(
                m,
                "| {} | {} | {} | {} | {} | {:.1}% | {} |",
                r.server,
                r.method.name(),
                r.conns,
                num(r.attempts_per_sec),
                num(r.successes_per_sec),
                r.success_rate * 100.0,
                seed
            );
        }
        m
    }

    fn charts(&self, dir: &Path) -> Result<Vec<String>, BenchError> {
        if self.rows.is_empty() {
            return Ok(Vec::new());
        }
        let mut servers: Vec<&str> = self.rows.iter().map(|r| r.server.as_str()).collect();
        servers.dedup();
        let mut rate = Vec::new();
        let mut ok = Vec::new();
        for s in &servers {
            for method in [Method::Cas, Method::Decr, Method::Ma] {
                let rows: Vec<&CasRow> = self
                    .rows
                    .iter()
                    .filter(|r| r.server == *s && r.method == method)
                    .collect();
                if method == Method::Cas {
                    rate.push(Series::new(
                        format!("{s} gets+cas"),
                        rows.iter()
                            .map(|r| (r.conns as f64, r.success_rate * 100.0))
                            .collect(),
                    ));
                }
                ok.push(Series::new(
                    format!("{s} {}", method.name()),
                    rows.iter()
                        .map(|r| (r.conns as f64, r.successes_per_sec))
                        .collect(),
                ));
            }
        }
        rate.push(Series::new(
            "seed 001 (python-memcached)",
            SEED_001.iter().map(|s| (s.0 as f64, s.3 * 100.0)).collect(),
        ));
        Ok(vec![
            chart::line_chart(
                dir,
                "cas_success_rate.png",
                "cas: success rate vs connections",
                "connections",
                "success rate (%)",
                &rate,
            )?,
            chart::line_chart(
                dir,
                "cas_throughput.png",
                "cas: successful decrements/s vs connections",
                "connections",
                "successes/s",
                &ok,
            )?,
        ])
    }

    fn skipped(&self) -> &[String] {
        &self.skipped
    }
}
