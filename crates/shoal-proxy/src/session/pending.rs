//! What a dispatched request is waiting for: the shapes a reply can take before it is
//! written (made by the proxy, forwarded to one server, split over several).

use crate::backend::ReplyRx;
use crate::frame::ReplyKind;

/// One forwarded request and how to retry it elsewhere.
pub(super) struct Attempt {
    pub(super) rx: Option<ReplyRx>,
    pub(super) bytes: Vec<u8>,
    pub(super) kind: ReplyKind,
    /// Replicas to try, in order, if this attempt fails at the transport level.
    pub(super) rest: Vec<usize>,
}

pub(super) enum Pending {
    /// A reply the proxy makes itself.
    Ready(Vec<u8>),
    Static(&'static [u8]),
    /// Nothing to send (noreply).
    Nothing,
    /// Forwarded; the backend's reply goes to the client verbatim.
    One(Attempt),
    /// A multi-get split over several fragments.
    Multi(Box<MultiGet>),
    /// One batch of keys of a multi-get forwarded in batches.
    Batch(Box<Batch>),
    /// Sent to several servers (replicated write): every reply awaited, the worst one
    /// answered (mcrouter's AllSyncRoute; see [`crate::route::severity`]).
    Worst(Vec<ReplyRx>),
    /// Sent through a route (see [`crate::route`]).
    Routed(Box<crate::route::RouteFlight>),
    /// `flush_all` to every server: `OK` if all say so, else the first other reply.
    All(Vec<ReplyRx>),
}

pub(super) struct MultiGet {
    /// The original keys, concatenated.
    pub(super) keys: Vec<u8>,
    /// (start, end, fragment) for each key in request order.
    pub(super) spans: Vec<(usize, usize, usize)>,
    pub(super) frags: Vec<Attempt>,
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
    Routed(crate::route::GetFlight),
}
