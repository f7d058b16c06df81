//! What a request dispatched to a server pool is waiting for: the shapes a reply can take
//! before it is written (made by the proxy, forwarded to one server, split over several).
//! A session can wait for more than a pool gives (batches of a streamed multi-get, route
//! flights); it names those with the type parameter, which pool code never looks into.

use crate::backend::ReplyRx;
use crate::frame::ReplyKind;

/// One forwarded request and how to retry it elsewhere.
pub(crate) struct Attempt {
    pub(crate) rx: Option<ReplyRx>,
    pub(crate) bytes: Vec<u8>,
    pub(crate) kind: ReplyKind,
    /// Replicas to try, in order, if this attempt fails at the transport level.
    pub(crate) rest: Vec<usize>,
}

/// What one request waits for. `S` is what the session adds (see the module doc); pool
/// code only passes it through.
pub(crate) enum Pending<S> {
    /// A reply the proxy makes itself.
    Ready(Vec<u8>),
    Static(&'static [u8]),
    /// Nothing to send (noreply).
    Nothing,
    /// Forwarded; the backend's reply goes to the client verbatim.
    One(Attempt),
    /// A multi-get split over several fragments.
    Multi(Box<MultiGet>),
    /// Sent to several servers (replicated write): every reply awaited, the worst one
    /// answered (mcrouter's AllSyncRoute; see [`super::reply_rank::severity`]).
    Worst(Vec<ReplyRx>),
    /// `flush_all` to every server: `OK` if all say so, else the first other reply.
    All(Vec<ReplyRx>),
    /// Something only the session resolves.
    Session(S),
}

pub(crate) struct MultiGet {
    /// The original keys, concatenated.
    pub(crate) keys: Vec<u8>,
    /// (start, end, fragment) for each key in request order.
    pub(crate) spans: Vec<(usize, usize, usize)>,
    pub(crate) frags: Vec<Attempt>,
}
