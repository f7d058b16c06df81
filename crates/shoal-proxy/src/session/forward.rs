//! Forwarding one parsed text (or meta) request: to the servers of the connection's pool
//! by its ring, or through its route; and removing a key whose new value was refused.

use shoal_protocol::{decode_key, Request};

use super::wait::{Pending, Wait};
use super::window::{Reframe, Slot};
use super::{Session, IN_FLIGHT_LIMIT, LINE_REPLY_COST};
use crate::frame::ReplyKind;
use crate::pool_request::{dispatch, local_reply, servers_for, write};
use crate::route::Target;

impl Session<'_> {
    /// Forwards one request (or starts forwarding a large multi-get in batches).
    pub(super) async fn forward(&mut self, req: &Request<'_>, raw: &[u8]) {
        let timing = self.timing(1);
        let est = self.target.value_size().get();
        let reply_cost = match req {
            Request::Get { keys, .. } | Request::GetAndTouch { keys, .. } => {
                let n = keys.iter().count();
                if n > 1 && n > self.target.value_size().keys_for(IN_FLIGHT_LIMIT) {
                    self.start_stream(req, keys, timing.map(|t| t.since));
                    return;
                }
                n.saturating_mul(est)
            }
            Request::MetaGet { .. } | Request::MetaDebug { .. } => est,
            _ => LINE_REPLY_COST,
        };
        let p = match &self.target {
            Target::Pool(pool) => dispatch(pool, req, raw).await,
            Target::Route(router) => match local_reply(req) {
                Some(p) => p,
                None => Pending::Session(Wait::Routed(Box::new(
                    crate::route::dispatch(router, req, raw).await,
                ))),
            },
        };
        self.push_slot(Slot {
            pending: p,
            cost: raw.len().saturating_add(reply_cost),
            reframe: Reframe::Verbatim,
            timing,
        });
    }

    /// Removes the value of a key whose new value was refused, as memcached removes it
    /// when a `set` fails, so the client never reads the stale value believing it was
    /// overwritten. Nothing waits for the backends' answer.
    pub(super) async fn remove_old(&mut self, key: &[u8], base64: bool) {
        let mut tmp = [0u8; 256];
        let Ok(real) = decode_key(key, base64, &mut tmp) else {
            return;
        };
        let (bytes, kind) = if base64 {
            let mut b = b"md ".to_vec();
            b.extend_from_slice(key);
            b.extend_from_slice(b" b q\r\nmn\r\n");
            (b, ReplyKind::MetaQuiet)
        } else {
            let mut b = b"delete ".to_vec();
            b.extend_from_slice(key);
            b.extend_from_slice(b" noreply\r\n");
            (b, ReplyKind::None)
        };
        match &self.target {
            Target::Pool(pool) => {
                if let Ok(servers) = servers_for(pool, real) {
                    drop(write::<Wait>(pool, servers, bytes, kind).await);
                }
            }
            Target::Route(router) => crate::route::send_and_forget(router, real, bytes, kind).await,
        }
    }
}
