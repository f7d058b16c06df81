//! Turning what a request waits for into the bytes written to the client: awaiting
//! backend replies, retrying replicas, and feeding the value-size estimate.

use super::fanout::send;
use super::multiget::{entries, reassemble};
use super::pending::{Attempt, Pending};
use super::reply_rank::{severity, SEVERITY_ERROR};
use crate::backend::{Reply, ReplyRx};
use crate::error::BackendError;
use crate::frame::ReplyKind;
use crate::pool::Pool;
use crate::stats::incr;
use bytes::Bytes;
use shoal_protocol::reply;

pub(crate) async fn await_rx(rx: Option<ReplyRx>) -> Reply {
    match rx {
        Some(rx) => rx.await.unwrap_or(Err(BackendError::Closed)),
        None => Err(BackendError::Closed),
    }
}

/// Waits for an attempt, failing over to the remaining replicas on transport errors.
pub(crate) async fn finish(pool: &Pool, a: Attempt) -> Reply {
    let mut r = await_rx(a.rx).await;
    for s in a.rest {
        if r.is_ok() {
            break;
        }
        r = await_rx(send(pool, s, a.bytes.clone(), a.kind).await).await;
    }
    if let Ok(b) = &r {
        observe(pool, a.kind, b);
    }
    r
}

/// Feeds the size of the values in a retrieval reply to the pool's estimate.
pub(crate) fn observe(pool: &Pool, kind: ReplyKind, b: &[u8]) {
    let (size, count) = match kind {
        ReplyKind::Retrieval => {
            entries(b).fold((0, 0), |(max, n), e| (max.max(e.all.1 - e.all.0), n + 1))
        }
        ReplyKind::Meta | ReplyKind::MetaQuiet if b.starts_with(b"VA ") => (b.len(), 1),
        _ => (0, 0),
    };
    pool.value_size.observe(size, count);
}

/// Waits for every fragment of a multi-get: their replies, or the first failure (a
/// transport error, or a reply that is not `VALUE`s and `END`, such as an error line).
pub(crate) async fn finish_fragments(
    pool: &Pool,
    frags: Vec<Attempt>,
) -> Result<Vec<Bytes>, Reply> {
    let mut replies: Vec<Bytes> = Vec::with_capacity(frags.len());
    let mut err: Option<Reply> = None;
    for a in frags {
        // Every fragment is awaited even after a failure, so none is left answering
        // into a dropped channel while its connection's later replies wait behind it.
        match finish(pool, a).await {
            Ok(b) if b.starts_with(b"VALUE ") || b.starts_with(b"END") => replies.push(b),
            other => {
                if err.is_none() {
                    err = Some(other);
                }
            }
        }
    }
    match err {
        Some(r) => Err(r),
        None => Ok(replies),
    }
}

pub(crate) fn push_reply(pool: &Pool, r: Reply, out: &mut Vec<u8>) {
    match r {
        Ok(b) => out.extend_from_slice(&b),
        Err(e) => {
            incr(&pool.stats.forward_error);
            out.extend_from_slice(&e.reply());
        }
    }
}

pub(crate) async fn resolve<S>(pool: &Pool, p: Pending<S>, out: &mut Vec<u8>) {
    match p {
        Pending::Ready(v) => out.extend_from_slice(&v),
        Pending::Static(s) => out.extend_from_slice(s),
        Pending::Nothing => {}
        Pending::One(a) => {
            let r = finish(pool, a).await;
            push_reply(pool, r, out);
        }
        Pending::Worst(rxs) => {
            // Every reply is awaited; the worst (the first of the worst, in replica order)
            // is the answer.
            let mut worst: Option<(u8, Reply)> = None;
            for rx in rxs {
                let r = rx.await.unwrap_or(Err(BackendError::Closed));
                let rank = match &r {
                    Ok(b) => severity(b),
                    Err(_) => SEVERITY_ERROR,
                };
                let worse = match &worst {
                    Some((w, _)) => rank > *w,
                    None => true,
                };
                if worse {
                    worst = Some((rank, r));
                }
            }
            let r = worst.map_or(Err(BackendError::NoLiveServers), |(_, r)| r);
            push_reply(pool, r, out);
        }
        Pending::All(rxs) => {
            let mut bad: Option<Reply> = None;
            for rx in rxs {
                let r = rx.await.unwrap_or(Err(BackendError::Closed));
                let ok = matches!(&r, Ok(b) if &b[..] == reply::OK);
                if !ok && bad.is_none() {
                    bad = Some(r);
                }
            }
            match bad {
                None => out.extend_from_slice(reply::OK),
                Some(r) => push_reply(pool, r, out),
            }
        }
        Pending::Multi(m) => match finish_fragments(pool, m.frags).await {
            Ok(replies) => {
                reassemble(&m.keys, &m.spans, &replies, out);
                out.extend_from_slice(reply::END);
            }
            Err(r) => push_reply(pool, r, out),
        },
        // What only the session waits for (batches of a streamed multi-get, route flights)
        // it resolves itself.
        Pending::Session(_) => {}
    }
}
