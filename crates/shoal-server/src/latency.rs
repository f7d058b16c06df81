//! Request latency histograms, one set per worker: which command a request counts as,
//! and where each worker records.
//!
//! Every request is recorded twice, into two views of the same observations:
//! - a Prometheus histogram with fixed 1-2-5 bounds (`shoal_request_duration_seconds`),
//!   which dashboards aggregate across instances with `histogram_quantile`, at the price
//!   of interpolating inside buckets up to 2.5x wide;
//! - a log-linear [`LogHistogram`] per command, allocated when the command is first seen,
//!   from which exact-to-1% quantiles over the last minute or two are served as a summary
//!   (`shoal_request_latency_seconds{quantile=...}`): what an operator reading one
//!   server's p99 or p99.9 needs, and what bucket interpolation cannot give.
//!
//! Both are recorded once per connection turn per command, not per request, so the extra
//! view costs a few nanoseconds a turn.

use parking_lot::Mutex;
use shoal_net::metrics::{
    clock, Histogram, HistogramSnapshot, LogHistogram, LogSnapshot, LATENCY_BOUNDS_NS,
};
use shoal_protocol::{binary::opcode, Request, StoreKind};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// How far back the served quantiles reach: they cover between one and two of these
/// (the window moves on at the first scrape after each full period).
pub const QUANTILE_WINDOW: Duration = Duration::from_secs(60);

/// The quantiles served for each command.
pub const QUANTILES: [f64; 5] = [0.5, 0.9, 0.99, 0.999, 0.9999];

/// The `command` label values of `shoal_request_duration_seconds`, by index.
pub const COMMANDS: [&str; 23] = [
    "get",
    "gets",
    "gat",
    "gats",
    "set",
    "add",
    "replace",
    "append",
    "prepend",
    "cas",
    "delete",
    "incr",
    "decr",
    "touch",
    "flush_all",
    "stats",
    "mg",
    "ms",
    "md",
    "ma",
    "mn",
    "me",
    "other",
];

const OTHER: usize = COMMANDS.len() - 1;
// One bit per command in `WorkerLatency::turn_commands`.
const _: () = assert!(COMMANDS.len() <= 32);

/// The index in [`COMMANDS`] of a text or meta request.
pub fn text_command(req: &Request<'_>) -> usize {
    match req {
        Request::Get { with_cas, .. } => usize::from(*with_cas),
        Request::GetAndTouch { with_cas, .. } => 2 + usize::from(*with_cas),
        Request::Store { kind, .. } => match kind {
            StoreKind::Set => 4,
            StoreKind::Add => 5,
            StoreKind::Replace => 6,
            StoreKind::Append => 7,
            StoreKind::Prepend => 8,
            StoreKind::Cas => 9,
        },
        Request::Delete { .. } => 10,
        Request::Arithmetic { incr, .. } => {
            if *incr {
                11
            } else {
                12
            }
        }
        Request::Touch { .. } => 13,
        Request::FlushAll { .. } => 14,
        Request::Stats(_) => 15,
        Request::MetaGet { .. } => 16,
        Request::MetaSet { .. } => 17,
        Request::MetaDelete { .. } => 18,
        Request::MetaArithmetic { .. } => 19,
        Request::MetaNoop => 20,
        Request::MetaDebug { .. } => 21,
        _ => OTHER,
    }
}

/// The index in [`COMMANDS`] of a binary request (quiet and key-returning variants count
/// as their command; a set with a CAS unique is a `cas`).
pub fn binary_command(op: u8, cas: u64) -> usize {
    use opcode::*;
    match op {
        GET | GETQ | GETK | GETKQ => 0,
        GAT | GATQ | GATK | GATKQ => 2,
        SET | SETQ if cas != 0 => 9,
        SET | SETQ => 4,
        ADD | ADDQ => 5,
        REPLACE | REPLACEQ => 6,
        APPEND | APPENDQ => 7,
        PREPEND | PREPENDQ => 8,
        DELETE | DELETEQ => 10,
        INCREMENT | INCREMENTQ => 11,
        DECREMENT | DECREMENTQ => 12,
        TOUCH => 13,
        FLUSH | FLUSHQ => 14,
        STAT => 15,
        _ => OTHER,
    }
}

/// One worker's request latency histograms, one per [`COMMANDS`] entry, and the requests
/// of the connection turn being served. Only that worker writes; scrapes read the
/// histograms.
#[derive(Debug)]
pub struct WorkerLatency {
    by_command: [Histogram; COMMANDS.len()],
    /// The fine-grained view, allocated on a command's first request (16 KB each), so a
    /// worker pays only for the commands it serves.
    fine: [OnceLock<LogHistogram>; COMMANDS.len()],
    /// Requests of the current turn, by command. Written only by the worker, so a load and
    /// a store (no atomic read-modify-write) suffice.
    turn: [AtomicU32; COMMANDS.len()],
    /// Which of `turn` are non-zero, one bit per command.
    turn_commands: AtomicU32,
}

impl Default for WorkerLatency {
    fn default() -> WorkerLatency {
        WorkerLatency {
            by_command: std::array::from_fn(|_| Histogram::latency()),
            fine: std::array::from_fn(|_| OnceLock::new()),
            turn: std::array::from_fn(|_| AtomicU32::new(0)),
            turn_commands: AtomicU32::new(0),
        }
    }
}

impl WorkerLatency {
    /// Counts a request of command `index` in the current turn.
    #[inline]
    pub fn count(&self, index: usize) {
        if let Some(c) = self.turn.get(index) {
            c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
            let mask = self.turn_commands.load(Ordering::Relaxed);
            self.turn_commands
                .store(mask | 1 << index, Ordering::Relaxed);
        }
    }

    /// Ends a turn that started at `start` ([`clock::now`] ticks): records each of its
    /// requests with the turn's duration. Visits only the commands the turn served (most
    /// turns serve one), not all of [`COMMANDS`].
    pub fn end_turn(&self, start: u64) {
        let mut mask = self.turn_commands.load(Ordering::Relaxed);
        if mask == 0 {
            return;
        }
        self.turn_commands.store(0, Ordering::Relaxed);
        let ns = clock::ticks_to_ns(clock::now().saturating_sub(start));
        while mask != 0 {
            let i = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            let (Some(c), Some(h), Some(fine)) =
                (self.turn.get(i), self.by_command.get(i), self.fine.get(i))
            else {
                continue;
            };
            let n = u64::from(c.load(Ordering::Relaxed));
            c.store(0, Ordering::Relaxed);
            h.record_n(ns, n);
            fine.get_or_init(LogHistogram::new).record_n(ns, n);
        }
    }
}

/// One command's latency, summed over workers, as a scrape reports it.
#[derive(Debug)]
pub struct CommandLatency {
    /// Everything since start, in the fixed Prometheus buckets.
    pub histogram: HistogramSnapshot,
    /// The requests of the current quantile window (see [`QUANTILE_WINDOW`]).
    pub window: LogSnapshot,
}

/// The fine-grained snapshots the quantile window is measured from.
#[derive(Default)]
struct Window {
    /// Where the current window starts (empty: at process start).
    base: Vec<LogSnapshot>,
    /// The snapshot that becomes `base` once it is a full window old, and when it was
    /// taken.
    next: Option<(Instant, Vec<LogSnapshot>)>,
}

/// Every worker's latency histograms, registered as workers start.
#[derive(Default)]
pub struct LatencyRegistry {
    workers: Mutex<Vec<Arc<WorkerLatency>>>,
    window: Mutex<Window>,
}

impl LatencyRegistry {
    /// Registers a new worker's histograms.
    pub fn register(&self) -> Arc<WorkerLatency> {
        let w = Arc::new(WorkerLatency::default());
        self.workers.lock().push(w.clone());
        w
    }

    /// The sum over workers, per command (indexed as [`COMMANDS`]), with each command's
    /// quantile window. Called by scrapes only: it moves the window on.
    pub fn merged(&self) -> Vec<CommandLatency> {
        self.merged_at(Instant::now())
    }

    fn merged_at(&self, now: Instant) -> Vec<CommandLatency> {
        let mut sums: Vec<HistogramSnapshot> = COMMANDS
            .iter()
            .map(|_| HistogramSnapshot::empty(&LATENCY_BOUNDS_NS))
            .collect();
        let mut fine: Vec<LogSnapshot> = vec![LogSnapshot::default(); COMMANDS.len()];
        for w in self.workers.lock().iter() {
            for (sum, h) in sums.iter_mut().zip(&w.by_command) {
                sum.merge(&h.snapshot());
            }
            for (sum, h) in fine.iter_mut().zip(&w.fine) {
                if let Some(h) = h.get() {
                    sum.merge(&h.snapshot());
                }
            }
        }
        let mut window = self.window.lock();
        match &window.next {
            None => window.next = Some((now, fine.clone())),
            Some((at, _)) if now.duration_since(*at) >= QUANTILE_WINDOW => {
                if let Some((_, next)) = window.next.replace((now, fine.clone())) {
                    window.base = next;
                }
            }
            Some(_) => {}
        }
        let empty = LogSnapshot::default();
        sums.into_iter()
            .zip(fine)
            .enumerate()
            .map(|(i, (histogram, fine))| CommandLatency {
                histogram,
                window: fine.since(window.base.get(i).unwrap_or(&empty)),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_request_kind_has_a_label() {
        assert_eq!(COMMANDS[binary_command(opcode::GETKQ, 0)], "get");
        assert_eq!(COMMANDS[binary_command(opcode::SETQ, 5)], "cas");
        assert_eq!(COMMANDS[binary_command(opcode::NOOP, 0)], "other");
        assert_eq!(COMMANDS[text_command(&Request::MetaNoop)], "mn");
        assert_eq!(COMMANDS[text_command(&Request::Version)], "other");
    }

    #[test]
    fn quantiles_cover_the_last_window() {
        let registry = LatencyRegistry::default();
        let worker = registry.register();
        let get = 0;
        let t0 = Instant::now();
        // A slow minute, then a fast one: the window forgets the slow one.
        worker.fine[get]
            .get_or_init(LogHistogram::new)
            .record_n(5_000_000, 100);
        let first = registry.merged_at(t0);
        assert_eq!(first[get].window.count(), 100);
        let p99 = first[get].window.quantile(0.99).unwrap_or(0);
        assert!((4_960_000..=5_040_000).contains(&p99), "{p99}");
        worker.fine[get]
            .get_or_init(LogHistogram::new)
            .record_n(20_000, 1000);
        let later = registry.merged_at(t0 + QUANTILE_WINDOW);
        assert_eq!(later[get].window.count(), 1000);
        let p99 = later[get].window.quantile(0.99).unwrap_or(0);
        assert!((19_800..=20_200).contains(&p99), "{p99}");
        // Commands never served have nothing to report.
        assert_eq!(later[1].window.quantile(0.5), None);
    }
}
