//! `shoal-bench soak`: does a server's memory stay bounded under hours-like abuse?
//!
//! The server is started here with a memory limit (`-m`; for shoal-queued, the same
//! total split across its queues as `--queue-memory`), then driven for the whole
//! duration by two kinds of connection:
//!
//! - **churners** send one request at a time (sets and gets of random keys, values
//!   log-uniform in 10 B-500 KB by default) and close after 1-200 requests, 5% of the
//!   time with a request still unanswered, then reconnect; the key space holds several
//!   times the memory limit, so eviction never stops;
//! - **slow readers** connect with a 16 KB receive buffer, send one multi-get of many
//!   keys, read the reply a few KB per 100 ms, sometimes stop reading for 2-5 s, and
//!   hang up after 5-30 s whether the reply is complete or not; the server, not this
//!   client's kernel, must hold what they have not read.
//!
//! For a queue the keys are a handful of queue names: sets enqueue, gets dequeue, at
//! equal rates so consumers keep up, and each queue is also capped (`--max-bytes` twice
//! its memory share, `--discard-old`) so a random walk cannot grow it without bound.
//!
//! The server's VmRSS is sampled every second. After a warm-up (memory filling), the
//! run passes when the largest sample stays within `-m` plus a stated overhead.
//!
//! The parts: `config` (what to run, the budget), `driver` (the client connections),
//! `sampling` (RSS once a second, and the curve summed up), `report` (the result, as
//! markdown and JSON) and `chart` (the RSS curve as a PNG). [`run`] puts them together.

mod chart;
mod config;
mod driver;
mod report;
mod sampling;

pub use config::{SoakConfig, QUEUES};
pub use driver::SoakCounts;
pub use report::{utc_date, SoakReport};
pub use sampling::{RssSummary, Sample};

use crate::load::raise_fd_limit;
use crate::machine::MachineInfo;
use crate::report::num;
use crate::seeds::ServerKind;
use crate::server::ServerProcess;
use crate::BenchError;
use driver::{client_thread, Counters, Shared};
use sampling::{summarize, Sampled};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Runs the soak: starts the server, loads it for the duration while sampling its RSS,
/// and judges the curve. Blocks the calling thread.
pub fn run(cfg: &SoakConfig) -> Result<SoakReport, BenchError> {
    cfg.validate()?;
    let fds = raise_fd_limit();
    let need = cfg.conns as u64 + 64;
    if fds > 0 && fds < need {
        return Err(BenchError::Config(format!(
            "{need} file descriptors needed but the limit is {fds} (ulimit -n)"
        )));
    }
    let machine = MachineInfo::detect();
    let args = cfg.server_args();
    let mut srv = match cfg.server {
        ServerKind::Shoald => ServerProcess::start_shoald(&cfg.bin, &args)?,
        ServerKind::Memcached => ServerProcess::start_memcached(&cfg.bin, &args)?,
        ServerKind::ShoalQueued => ServerProcess::start_queued(&cfg.bin, &cfg.queue_fsync, &args)?,
        ServerKind::Redis => return Err(BenchError::Config("soak cannot drive redis".into())),
    };
    let idle_mb = srv.rss_kib()? as f64 / 1024.0;
    let queue = cfg.server == ServerKind::ShoalQueued;
    let sh = Arc::new(Shared {
        addr: srv.addr,
        prefix: if queue { b"soakq" } else { b"soak:" },
        width: if queue { 0 } else { 8 },
        keys: cfg.keys(),
        sizes: cfg.value_size,
        set_ratio: cfg.set_ratio,
        multiget_keys: cfg.multiget_keys,
        slow_read_bytes: cfg.slow_read_bytes,
        value: vec![b'v'; cfg.value_size.max],
        stop: AtomicBool::new(false),
        c: Counters::default(),
    });
    // Slow readers first, then churners, dealt round-robin so every thread has both.
    let slow = cfg.slow_conns();
    let mut per_thread: Vec<Vec<(bool, u64)>> = vec![Vec::new(); cfg.threads];
    for i in 0..cfg.conns {
        let seed = cfg.seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        per_thread[i % cfg.threads].push((i < slow, seed));
    }
    let started = utc_date(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    );
    let t0 = Instant::now();
    let end = t0 + cfg.duration;
    let (sampled, joined) = std::thread::scope(|s| {
        let handles: Vec<_> = per_thread
            .into_iter()
            .map(|tasks| {
                let sh = sh.clone();
                s.spawn(move || client_thread(sh, tasks, end))
            })
            .collect();
        let sampled = sampling::sample(
            &mut srv,
            cfg.server.name(),
            (t0, end),
            || sh.c.ops(),
            || sh.c.snapshot().errors(),
        );
        sh.stop.store(true, Ordering::Relaxed);
        let joined: Vec<Result<(), BenchError>> = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(BenchError::Config("client thread panicked".into())))
            })
            .collect();
        (sampled, joined)
    });
    let Sampled {
        samples,
        survived,
        stopped_at,
    } = sampled;
    let elapsed_secs = stopped_at.saturating_duration_since(t0).as_secs_f64();
    let load_average_end = crate::machine::load_average();
    for r in joined {
        r?;
    }
    let survived = survived && srv.alive();
    drop(srv);
    let counts = sh.c.snapshot();
    let rss = summarize(cfg, idle_mb, &samples);
    let mut reasons = Vec::new();
    if !survived {
        reasons.push(format!("{} exited during the run", cfg.server.name()));
    }
    if counts.ops() == 0 {
        reasons.push("no request was answered: the load did not run".into());
    }
    match rss.max_after_warmup_mb {
        None => reasons.push("no RSS sample after the warm-up".into()),
        Some(m) if m > cfg.budget_mb() => reasons.push(format!(
            "max RSS after warm-up {} MiB is above the budget of {} MiB",
            num(m),
            num(cfg.budget_mb())
        )),
        Some(_) => {}
    }
    Ok(SoakReport {
        command: String::new(),
        started,
        machine,
        config: cfg.clone(),
        server_args: args,
        keys: cfg.keys(),
        mean_value_bytes: cfg.value_size.log_uniform_mean(),
        slow_conns: slow,
        budget_mb: cfg.budget_mb(),
        samples,
        rss,
        counts,
        ops_per_sec: if elapsed_secs > 0.0 {
            counts.ops() as f64 / elapsed_secs
        } else {
            0.0
        },
        elapsed_secs,
        load_average_end,
        server_survived: survived,
        pass: reasons.is_empty(),
        reasons,
    })
}
