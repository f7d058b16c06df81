//! Multi-gets too large for one in-flight window (a client asking for 5,000 copies of a
//! 100 KB value): forwarded in batches of keys sized by the pool's value-size estimate,
//! the next batch only once the window has room, so a client that never reads costs a
//! few hundred KB instead of the whole reply. A batch that fails ends the multi-get: the
//! values already written stay written, the error line ends the reply, and the rest of
//! the keys are not asked for. Nothing after a batched multi-get is forwarded before its
//! last batch is, so pipelined requests reach the servers in the client's order.

use shoal_net::{Reservation, READ_CHUNK};
use shoal_protocol::{reply, Keys, Request};

use super::wait::{Batch, BatchParts, Pending, Wait};
use super::window::{Reframe, Slot, Timing};
use super::{Session, IN_FLIGHT_LIMIT};
use crate::pool_request::{finish_fragments, get_command, plan, push_reply, reassemble, send_plan};
use crate::route::Target;
use crate::stats::incr;

/// The keys of a batched multi-get not yet forwarded.
pub(super) struct GetStream {
    id: u64,
    cmd: &'static str,
    exptime: Option<i64>,
    /// Every key, in request order, separated by single spaces (no per-key index: a
    /// 1 MB line of one-byte keys must not cost more than its own size).
    keys: Vec<u8>,
    /// Offset in `keys` of the first key not yet forwarded.
    next: usize,
    /// Budget held for a key list longer than a read chunk.
    _held: Reservation,
    /// When the multi-get was received, if the pool times requests: its one latency
    /// observation is made when its last batch is answered.
    since: Option<u64>,
}

impl Session<'_> {
    /// Sets up a multi-get too large for one window to be forwarded in batches.
    pub(super) fn start_stream(&mut self, req: &Request<'_>, list: &Keys<'_>, since: Option<u64>) {
        let mut keys = Vec::new();
        for k in list.iter() {
            if !keys.is_empty() {
                keys.push(b' ');
            }
            keys.extend_from_slice(k);
        }
        // The key list outlives the read buffer it came from: a long one is charged.
        let mut held = self.budget.empty();
        if !held.grow_to(keys.len().saturating_sub(READ_CHUNK)) {
            self.push(Pending::Static(reply::OUT_OF_MEMORY_WRITING_GET), 0);
            return;
        }
        let (cmd, exptime) = get_command(req);
        self.gets += 1;
        self.stream = Some(GetStream {
            id: self.gets,
            cmd,
            exptime,
            keys,
            next: 0,
            _held: held,
            since,
        });
    }

    /// Forwards the next batch of the batched multi-get, as many keys as the window has
    /// room for.
    pub(super) async fn next_batch(&mut self) {
        let target = self.target.clone();
        let Some(st) = self.stream.as_mut() else {
            return;
        };
        let est = target.value_size().get();
        let n = target
            .value_size()
            .keys_for(IN_FLIGHT_LIMIT.saturating_sub(self.in_flight));
        let mut list: Vec<&[u8]> = Vec::with_capacity(n);
        let mut end = st.next;
        for k in st
            .keys
            .get(st.next..)
            .unwrap_or_default()
            .split(|&b| b == b' ')
        {
            if list.len() == n {
                break;
            }
            end += k.len() + 1;
            if !k.is_empty() {
                list.push(k);
            }
        }
        let last = end >= st.keys.len();
        let (get, cmd, exptime) = (st.id, st.cmd, st.exptime);
        let cost = list.iter().map(|k| k.len() + 1).sum::<usize>() + list.len() * est;
        let parts = match &target {
            Target::Pool(pool) => match plan(pool, &list) {
                Ok(plan) => send_plan(pool, plan, cmd, exptime)
                    .await
                    .map(BatchParts::Pool),
                Err(e) => {
                    incr(&pool.stats.forward_error);
                    Err(e.reply())
                }
            },
            Target::Route(router) => Ok(BatchParts::Routed(
                crate::route::send_get(router, &list, cmd, exptime).await,
            )),
        };
        st.next = end;
        let ends = last || parts.is_err();
        // The multi-get's one observation rides on its last batch.
        let timing = st
            .since
            .filter(|_| ends)
            .map(|since| Timing { since, requests: 1 });
        if ends {
            // Done, or failed here: no more batches.
            self.stream = None;
        }
        self.push_slot(Slot {
            pending: Pending::Session(Wait::Batch(Box::new(Batch { get, last, parts }))),
            cost,
            reframe: Reframe::Verbatim,
            timing,
        });
    }

    pub(super) async fn resolve_batch(&mut self, b: Batch, wbuf: &mut Vec<u8>) {
        if self.failed_get == Some(b.get) {
            return;
        }
        let parts = match b.parts {
            Ok(p) => p,
            Err(reply) => {
                wbuf.extend_from_slice(&reply);
                self.failed_get = Some(b.get);
                return;
            }
        };
        let ok = match (parts, &self.target) {
            (BatchParts::Pool(m), Target::Pool(pool)) => {
                match finish_fragments(pool, m.frags).await {
                    Ok(replies) => {
                        reassemble(&m.keys, &m.spans, &replies, wbuf);
                        true
                    }
                    Err(r) => {
                        push_reply(pool, r, wbuf);
                        false
                    }
                }
            }
            (BatchParts::Routed(f), Target::Route(router)) => {
                crate::route::finish_get_into(router, f, wbuf).await
            }
            // A session changes target only with nothing in flight.
            (BatchParts::Pool(_), Target::Route(_)) | (BatchParts::Routed(_), Target::Pool(_)) => {
                false
            }
        };
        if ok {
            if b.last {
                wbuf.extend_from_slice(reply::END);
            }
        } else {
            // Values already written stay written (as when memcached fails half-way
            // through a multi-get); the error line ends the reply and the rest of the
            // keys are not asked for.
            self.failed_get = Some(b.get);
            if self.stream.as_ref().is_some_and(|st| st.id == b.get) {
                self.stream = None;
            }
        }
    }
}
