//! The binary-protocol front end: a connection whose first byte is `0x80` (memcached's
//! request magic) is served here for its whole life, by the same [`Session`] as text
//! clients, so it keeps every bound the session enforces (output high-water mark,
//! in-flight window, read budget) and its replies are written in request order.
//!
//! Each request is framed and decoded by shoal-protocol ([`parse_binary`], [`decode`]).
//! Requests for data are rewritten as meta commands ([`super::translate`]) and routed like
//! any text request, over the worker's pipelined backend connections: within a server
//! pool by its ring, on a route pool by the same route dispatch as a text client's meta
//! command ([`crate::route`]). Their replies are rewritten as binary packets when they
//! are collected. Consecutive gets (a client's multi-get: `GETKQ ... NOOP`) are gathered
//! and sent as one `gets` per server ([`super::getrun`]), or on a route pool as one
//! multi-get through the route, as a text multi-get would be, and answered request by
//! request.
//! The rest is answered here:
//! - `NOOP`, `VERSION`: answered by the proxy (a `NOOP` after quiet gets is answered
//!   after their hits, since replies leave in request order); `VERBOSITY` is an unknown
//!   command, as in memcached 1.6.45;
//! - `QUIT`/`QUITQ`: close once earlier replies are written (`QUIT` answers first);
//! - `STAT`: the proxy's own statistics for the pool (the process's, then the pool's
//!   counters as the stats port shows them); any named group is `Not found`, as memcached
//!   answers a group it does not have;
//! - SASL: see [`crate::sasl`]; without a `sasl:` section the SASL opcodes are unknown,
//!   as in memcached without `-S`.
//!
//! Quiet opcodes are quiet about success only (and gets about misses), in any mix: a
//! batch `GETKQ GETKQ ... NOOP` answers with its hits then the `NOOP`, whatever servers
//! its keys are on, and an error on one key's server reaches the client as that key's
//! error packet.

use std::time::Duration;

use shoal_net::connection::{Output, Step};
use shoal_net::{NoValue, READ_CHUNK};
use shoal_protocol::binary::{self, decode, opcode, reply, Attrs, Command, Malformed, Status};
use shoal_protocol::{parse, parse_binary, BinaryParsed, Parsed};
use tokio::io::AsyncWrite;

use super::getrun::{GetRun, ROUTE_GROUP};
use super::translate::{self, text_safe, Op, Untranslatable};
use super::wait::{Pending, Wait};
use super::window::{Reframe, Slot};
use super::{Session, IN_FLIGHT_LIMIT, LIMITS, LINE_REPLY_COST, REFUSE_VALUES};
use crate::pool_request::{dispatch, read_order};
use crate::route::Target;
use crate::sasl::MECHANISMS;

/// Longest delay before answering a failed authentication.
const MAX_AUTH_PENALTY: Duration = Duration::from_secs(5);

impl Session<'_> {
    /// Handles the binary request at the head of `input` (see [`Handler::request`]).
    ///
    /// [`Handler::request`]: shoal_net::connection::Handler::request
    pub(super) async fn binary_request<W: AsyncWrite + Unpin>(
        &mut self,
        input: &[u8],
        refused: bool,
        out: &mut Output<'_, W, NoValue>,
    ) -> Step {
        let limits = if refused { &REFUSE_VALUES } else { &LIMITS };
        match parse_binary(input, limits) {
            BinaryParsed::Incomplete { needed } => Step::Incomplete { needed },
            BinaryParsed::Invalid { opcode, opaque } => {
                // Framing that cannot be trusted: memcached answers and closes.
                self.flush_run().await;
                self.emit(out, |b| {
                    binary::error(b, opcode, Status::InvalidArguments, opaque)
                });
                self.client_err = true;
                Step::Close
            }
            BinaryParsed::TooLarge {
                opcode,
                opaque,
                key,
                consumed,
                swallow,
            } => {
                // Answered even for quiet opcodes; a `SET` that fails removes the old value,
                // as memcached does, so it is never read back as if overwritten.
                self.flush_run().await;
                let is_set = matches!(opcode, opcode::SET | opcode::SETQ);
                if is_set && self.authorized() {
                    self.remove_old_binary(key).await;
                }
                let status = if refused {
                    Status::OutOfMemory
                } else {
                    Status::TooLarge
                };
                self.emit(out, |b| binary::error(b, opcode, status, opaque));
                Step::Done { consumed, swallow }
            }
            BinaryParsed::Request { request, consumed } => match decode(request) {
                Err(Malformed { attrs }) => {
                    self.flush_run().await;
                    self.emit(out, |b| reply::status(b, &attrs, Status::InvalidArguments));
                    self.client_err = true;
                    Step::Close
                }
                Ok((attrs, command)) => {
                    if self.binary_command(attrs, command, out).await {
                        Step::Close
                    } else {
                        Step::Done {
                            consumed,
                            swallow: 0,
                        }
                    }
                }
            },
        }
    }

    /// Whether this connection may be served: its pool needs no SASL, or it has
    /// authenticated.
    fn authorized(&self) -> bool {
        self.authenticated || self.target.config().sasl.is_none()
    }

    /// Appends a reply the proxy makes itself, after every reply still awaited: straight
    /// to the output when nothing is in flight, else queued behind them.
    fn emit<W: AsyncWrite + Unpin>(
        &mut self,
        out: &mut Output<'_, W, NoValue>,
        f: impl FnOnce(&mut Vec<u8>),
    ) {
        if self.pending.is_empty() {
            f(out.buf());
        } else {
            let mut b = Vec::new();
            f(&mut b);
            if !b.is_empty() {
                self.push(Pending::Ready(b), 0);
            }
        }
    }

    /// Serves one decoded command; true when the connection is to be closed.
    async fn binary_command<W: AsyncWrite + Unpin>(
        &mut self,
        a: Attrs,
        command: Command<'_>,
        out: &mut Output<'_, W, NoValue>,
    ) -> bool {
        if self.authorized() && self.gather(a, &command).await {
            return false;
        }
        // Whatever else comes is answered after the gets gathered before it.
        self.flush_run().await;
        if !self.authorized() && !command.allowed_unauthenticated() {
            self.emit(out, |b| reply::status(b, &a, Status::AuthError));
            return false;
        }
        match command {
            Command::Noop => self.emit(out, |b| reply::ok(b, &a, 0)),
            Command::Version => self.emit(out, |b| {
                let v = concat!(env!("CARGO_PKG_VERSION"), " shoal-proxy");
                reply::ok_with_value(b, &a, 0, v.as_bytes())
            }),
            Command::Quit => {
                self.emit(out, |b| reply::ok(b, &a, 0));
                return true;
            }
            Command::Stat { group, .. } => {
                let general = matches!(group, shoal_protocol::StatsGroup::General);
                let stats = general.then(|| self.stat_lines());
                self.emit(out, |b| match stats {
                    Some(lines) => {
                        for (name, value) in &lines {
                            reply::stat(b, &a, name.as_bytes(), value.as_bytes());
                        }
                        reply::stat(b, &a, b"", b"");
                    }
                    None => reply::status(b, &a, Status::KeyNotFound),
                });
            }
            Command::SaslListMechs => {
                let on = self.target.config().sasl.is_some();
                self.emit(out, |b| {
                    if on {
                        reply::ok_with_value(b, &a, 0, MECHANISMS)
                    } else {
                        reply::status(b, &a, Status::UnknownCommand)
                    }
                });
            }
            Command::SaslAuth {
                mechanism,
                data,
                step,
            } => self.sasl_auth(&a, mechanism, data, step, out).await,
            Command::Unknown => self.emit(out, |b| reply::status(b, &a, Status::UnknownCommand)),
            _ => self.forward_binary(a, command, out).await,
        }
        false
    }

    /// Adds a get to the run of gets being gathered (see [`super::getrun`]); false when it
    /// is not one that can join (a `TOUCH`, a key text cannot carry, no live server), and
    /// is to be served on its own.
    async fn gather(&mut self, a: Attrs, command: &Command<'_>) -> bool {
        let (key, exptime) = match *command {
            Command::Get { key } => (key, None),
            Command::GetAndTouch {
                key,
                exptime,
                value: true,
            } => (key, Some(exptime)),
            _ => return false,
        };
        if !text_safe(key) {
            return false;
        }
        let server = match &self.target {
            // Grouped by the server a read of the key tries first.
            Target::Pool(pool) => match read_order(pool, key).ok().and_then(|s| s.first().copied())
            {
                Some(s) => s,
                None => return false,
            },
            // One group: the route splits the run over its pools (and each pool over
            // its servers) as it does a text multi-get.
            Target::Route(_) => ROUTE_GROUP,
        };
        if self.run.as_ref().is_some_and(|r| !r.accepts(exptime)) {
            self.flush_run().await;
        }
        let cost = (key.len() + 1).saturating_add(self.target.value_size().get());
        let run = self.run.get_or_insert_with(|| GetRun::new(exptime));
        if !run.add(a, key, server, cost) {
            // The key is in the run already: send the run, start another.
            self.flush_run().await;
            let run = self.run.insert(GetRun::new(exptime));
            run.add(a, key, server, cost);
        }
        let full = self.run.as_ref().is_some_and(|r| {
            !r.accepts(exptime) || self.in_flight.saturating_add(r.cost) >= IN_FLIGHT_LIMIT
        });
        if full {
            self.flush_run().await;
        }
        true
    }

    /// Sends the gathered gets, one `gets` (or `gats`) per server, routed like any text
    /// multi-get (on a route pool: one multi-get through the route); their replies are
    /// collected as one slot.
    pub(super) async fn flush_run(&mut self) {
        let Some(mut run) = self.run.take() else {
            return;
        };
        // Timed from before the run is sent, as a single request is.
        let timing = self.timing(run.len());
        match &self.target {
            Target::Pool(pool) => {
                for g in &mut run.groups {
                    g.line.extend_from_slice(b"\r\n");
                    g.pending = match parse(&g.line, &LIMITS) {
                        Parsed::Request { request, .. } => dispatch(pool, &request, &g.line).await,
                        // The keys are text-safe and at most 250 bytes, so this always
                        // parses; answered rather than assumed.
                        _ => Pending::Static(b"SERVER_ERROR unparsable get\r\n"),
                    };
                }
            }
            Target::Route(router) => run.send_routed(router).await,
        }
        let cost = run.cost;
        self.push_slot(Slot {
            pending: Pending::Nothing,
            cost,
            reframe: Reframe::Run(Box::new(run)),
            timing,
        });
    }

    /// `SASL_AUTH` (PLAIN) against the pool's users; `SASL_STEP` always fails (PLAIN has
    /// one step). A failure de-authenticates the connection and is answered after a delay
    /// that doubles with each failure on the connection (200 ms up to 5 s), so passwords
    /// cannot be tried at wire speed.
    async fn sasl_auth<W: AsyncWrite + Unpin>(
        &mut self,
        a: &Attrs,
        mechanism: &[u8],
        data: &[u8],
        step: bool,
        out: &mut Output<'_, W, NoValue>,
    ) {
        let Some(sasl) = self.target.config().sasl.as_ref() else {
            self.emit(out, |b| reply::status(b, a, Status::UnknownCommand));
            return;
        };
        if !step && mechanism == MECHANISMS && sasl.check_plain(data) {
            self.authenticated = true;
            self.emit(out, |b| reply::ok_with_value(b, a, 0, b"Authenticated"));
            return;
        }
        self.authenticated = false;
        self.auth_failures = self.auth_failures.saturating_add(1);
        let delay =
            Duration::from_millis(100u64 << self.auth_failures.min(6)).min(MAX_AUTH_PENALTY);
        tracing::warn!(
            pool = %self.target.name(),
            failures = self.auth_failures,
            "SASL authentication failure; delaying this connection {} ms",
            delay.as_millis()
        );
        tokio::time::sleep(delay).await;
        self.emit(out, |b| reply::status(b, a, Status::AuthError));
    }

    /// Rewrites a data command as a meta command and routes it like a text request; its
    /// reply is rewritten when collected.
    async fn forward_binary<W: AsyncWrite + Unpin>(
        &mut self,
        a: Attrs,
        command: Command<'_>,
        out: &mut Output<'_, W, NoValue>,
    ) {
        let timing = self.timing(1);
        let mut scratch = std::mem::take(&mut self.scratch);
        match translate::request(&a, &command, &mut scratch) {
            Ok(r) => match parse(&scratch, &LIMITS) {
                Parsed::Request { request, .. } => {
                    let reply_cost = match r.op {
                        Op::Get => self.target.value_size().get(),
                        _ => LINE_REPLY_COST,
                    };
                    let pending = match &self.target {
                        Target::Pool(pool) => dispatch(pool, &request, &scratch).await,
                        // The same route dispatch as a text client's meta command.
                        Target::Route(router) => Pending::Session(Wait::Routed(Box::new(
                            crate::route::dispatch(router, &request, &scratch).await,
                        ))),
                    };
                    self.push_slot(Slot {
                        pending,
                        cost: scratch.len().saturating_add(reply_cost),
                        reframe: Reframe::Binary(r),
                        timing,
                    });
                }
                // The translation is ours, and always parses; answered rather than assumed.
                _ => self.emit(out, |b| reply::status(b, &a, Status::InternalError)),
            },
            Err(Untranslatable::KeyTooLong) => {
                self.emit(out, |b| reply::status(b, &a, Status::InvalidArguments))
            }
            Err(Untranslatable::NotForwarded) => {
                self.emit(out, |b| reply::status(b, &a, Status::UnknownCommand))
            }
        }
        // A large value's copy is not kept for the connection's lifetime.
        if scratch.capacity() > 4 * READ_CHUNK {
            scratch = Vec::new();
        }
        self.scratch = scratch;
    }

    /// Removes a key's value (see [`Session::remove_old`]) given as a binary key.
    async fn remove_old_binary(&mut self, key: &[u8]) {
        if key.iter().all(|&b| b > b' ' && b != 0x7f) {
            self.remove_old(key, false).await;
        } else {
            let mut enc = Vec::with_capacity(key.len().div_ceil(3) * 4);
            shoal_protocol::encode_key_base64(key, &mut enc);
            self.remove_old(&enc, true).await;
        }
    }

    /// The `STAT` reply: the process's statistics, then the pool's counters as the stats
    /// port shows them (a server's as `<server>:<counter>`).
    fn stat_lines(&self) -> Vec<(String, String)> {
        let now = crate::stats::unix_now();
        let mut lines = vec![
            ("pid".to_string(), std::process::id().to_string()),
            (
                "uptime".to_string(),
                now.saturating_sub(crate::stats::process_started())
                    .to_string(),
            ),
            ("time".to_string(), now.to_string()),
            ("version".to_string(), env!("CARGO_PKG_VERSION").to_string()),
            ("pool".to_string(), self.target.name().to_string()),
        ];
        if let serde_json::Value::Object(m) = self.target.stats_json() {
            for (k, v) in m {
                match v {
                    serde_json::Value::Object(server) => {
                        for (k2, v2) in server {
                            lines.push((format!("{k}:{k2}"), v2.to_string()));
                        }
                    }
                    other => lines.push((k, other.to_string())),
                }
            }
        }
        lines
    }
}
