//! Request latency histograms, one set per worker (`shoal_request_duration_seconds`):
//! which command a request counts as, and where each worker records.

use parking_lot::Mutex;
use shoal_net::metrics::{clock, Histogram, HistogramSnapshot, LATENCY_BOUNDS_NS};
use shoal_protocol::{binary::opcode, Request, StoreKind};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

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
    /// Requests of the current turn, by command. Written only by the worker, so a load and
    /// a store (no atomic read-modify-write) suffice.
    turn: [AtomicU32; COMMANDS.len()],
}

impl Default for WorkerLatency {
    fn default() -> WorkerLatency {
        WorkerLatency {
            by_command: std::array::from_fn(|_| Histogram::latency()),
            turn: std::array::from_fn(|_| AtomicU32::new(0)),
        }
    }
}

impl WorkerLatency {
    /// Counts a request of command `index` in the current turn.
    #[inline]
    pub fn count(&self, index: usize) {
        if let Some(c) = self.turn.get(index) {
            c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        }
    }

    /// Ends a turn that started at `start` ([`clock::now`] ticks): records each of its
    /// requests with the turn's duration.
    pub fn end_turn(&self, start: u64) {
        let ns = clock::ticks_to_ns(clock::now().saturating_sub(start));
        for (c, h) in self.turn.iter().zip(&self.by_command) {
            let n = c.load(Ordering::Relaxed);
            if n > 0 {
                h.record_n(ns, u64::from(n));
                c.store(0, Ordering::Relaxed);
            }
        }
    }
}

/// Every worker's latency histograms, registered as workers start.
#[derive(Default)]
pub struct LatencyRegistry {
    workers: Mutex<Vec<Arc<WorkerLatency>>>,
}

impl LatencyRegistry {
    /// Registers a new worker's histograms.
    pub fn register(&self) -> Arc<WorkerLatency> {
        let w = Arc::new(WorkerLatency::default());
        self.workers.lock().push(w.clone());
        w
    }

    /// The sum over workers, per command.
    pub fn merged(&self) -> Vec<HistogramSnapshot> {
        let mut sums: Vec<HistogramSnapshot> = COMMANDS
            .iter()
            .map(|_| HistogramSnapshot::empty(&LATENCY_BOUNDS_NS))
            .collect();
        for w in self.workers.lock().iter() {
            for (sum, h) in sums.iter_mut().zip(&w.by_command) {
                sum.merge(&h.snapshot());
            }
        }
        sums
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
}
