//! What a session's request can wait for beyond one pool's replies: a batch of a
//! multi-get forwarded in batches, or a flight through a route. The pool code's
//! [`Pending`](crate::pool_request::Pending) carries these without looking into them.

use crate::pool_request::{MultiGet, Pending as PoolPending};
use crate::route::{GetFlight, RouteFlight};

/// What a session's request waits for.
pub(super) type Pending = PoolPending<Wait>;

/// The session's own kinds of waiting.
pub(super) enum Wait {
    /// One batch of keys of a multi-get forwarded in batches.
    Batch(Box<Batch>),
    /// Sent through a route (see [`crate::route`]).
    Routed(Box<RouteFlight>),
}

/// One batch of a batched multi-get.
pub(super) struct Batch {
    /// Which multi-get of the connection it belongs to.
    pub(super) get: u64,
    /// The last batch: its reply ends with `END`.
    pub(super) last: bool,
    /// The forwarded fragments, or the error reply that ends the multi-get here.
    pub(super) parts: Result<BatchParts, Vec<u8>>,
}

/// What one batch of a batched multi-get was sent as.
pub(super) enum BatchParts {
    /// Within the connection's server pool, one fragment per server.
    Pool(MultiGet),
    /// Through the connection's route.
    Routed(GetFlight),
}

/// Resolves what a route session waits for: replies through its route, or replies the
/// proxy made itself (nothing else is dispatched on a route).
pub(super) async fn resolve_routed(p: Pending, out: &mut Vec<u8>) {
    match p {
        PoolPending::Ready(v) => out.extend_from_slice(&v),
        PoolPending::Static(s) => out.extend_from_slice(s),
        PoolPending::Session(Wait::Routed(f)) => crate::route::finish(*f, out).await,
        _ => {}
    }
}
