//! The closed-loop load generator behind `shoal-bench load`.
//!
//! `threads` OS threads each run a single-threaded tokio runtime driving their share of
//! `conns` connections. Each connection keeps `depth` requests in flight: it writes as
//! many new requests as replies it has just read, in one write, so depth 1 is a classic
//! request/reply client and depth 16 a pipelining one. Latency is measured per request
//! from the write that carried it to the read that completed its reply.
//!
//! The run has three phases: an optional prefill (every key set once, pipelined), a
//! warm-up (load applied, nothing recorded) and the measured window. Every request ever
//! answered is counted in [`LoadReport::total_ops`], so the report can be checked against
//! the server's own `stats`.

mod config;
mod driver;
mod prefill;
mod report;

pub(crate) use config::secs;
pub use config::{LoadConfig, Refill};
pub(crate) use driver::{connect, fill_buf};
pub use driver::{raise_fd_limit, run};
pub use prefill::prefill;
pub use report::{Counts, Latency, LoadReport};
