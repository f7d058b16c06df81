//! Requests to one server pool, whoever sends them: a client session of a plain pool, or a
//! route ([`crate::route`]) reaching one of its pools. It covers which servers a key goes
//! to, the fan-out of multi-gets and replicated writes, failover between replicas, and
//! putting the replies back together. Sessions and routes both sit on top of this module,
//! so a request is placed, split and retried the same way with or without a route.
//!
//! One job per module:
//! - `dispatch.rs` decides what a parsed request becomes;
//! - `fanout.rs` places it on servers and sends it;
//! - `multiget.rs` splits multi-gets and reassembles their replies;
//! - `pending.rs` is what a request waits for;
//! - `resolve.rs` turns that into the client's reply bytes;
//! - `reply_rank.rs` classes requests and replies;
//! - `latest.rs` is mcrouter's per-host replica order.

mod dispatch;
mod fanout;
pub mod latest;
mod multiget;
mod pending;
mod reply_rank;
mod resolve;

pub(crate) use dispatch::{
    dispatch, finish_pool, get_command, local_reply, meta_forward, pool_flush, pool_get,
    pool_keyed, PoolFlight,
};
pub(crate) use fanout::{read_order, servers_for, write};
pub(crate) use multiget::{entries, plan, reassemble, send_plan};
pub(crate) use pending::{MultiGet, Pending};
pub(crate) use reply_rank::{is_failure, severity};
pub(crate) use resolve::{finish, finish_fragments, push_reply, resolve};
