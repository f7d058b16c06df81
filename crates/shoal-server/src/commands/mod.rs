//! Command execution: one module per command family, each serving its command for every
//! protocol that has it. A command's store operation, counting and reporting happen in
//! one protocol-neutral function (`storage::store`, `retrieval::serve_key`,
//! `delete::delete`, `arithmetic::incr_decr`, `admin::flush`, ...) returning an outcome;
//! small per-protocol functions beside it turn the outcome into text, meta or binary
//! replies. [`execute`] dispatches text and meta requests, [`binary::execute`] binary
//! ones.

pub mod admin;
pub mod arithmetic;
pub mod binary;
pub mod crawler;
pub mod delete;
pub mod meta;
pub mod retrieval;
pub mod sasl;
pub mod stats;
pub mod storage;
pub mod touch;
pub mod tuning;

use crate::auth::Session;
use crate::reply_window::ReplyWindow;
use crate::worker::Worker;
use shoal_protocol::Request;

/// What the connection does after a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep serving.
    Continue,
    /// Send what is pending, then close.
    Close,
    /// The request is only partly served (its reply reached the connection's high-water
    /// mark): send what is pending, then run the same request again; the
    /// [`ReplyWindow`] says where it continues.
    Suspend,
    /// Send what is pending, then stream `watch` events of these kinds
    /// ([`crate::watch::kind`]) instead of serving requests.
    Watch(u32),
}

/// A connection's pending replies. Retrievals append values of
/// [`shoal_net::MIN_REFERENCED_VALUE`] bytes or more by reference, pinned in their
/// segment until the reply is written (as memcached sends values from item memory);
/// every other command appends bytes to [`Out::bytes`].
pub type Out<'w> = shoal_net::Reply<shoal_store::ValueRef<'w>>;

/// Executes one request, appending its reply (if any) to `reply`. Until an ASCII-auth
/// (`-Y`) client has authenticated, the only command served is the `set` that carries
/// `user password`. Multi-key retrievals generate only what `window` has room for.
pub fn execute<'w>(
    w: &'w Worker,
    session: &mut Session,
    req: Request<'_>,
    window: &mut ReplyWindow,
    reply: &mut Out<'w>,
) -> Flow {
    // Replies of earlier commands of this turn still unsent: memcached refuses to start
    // a dump or a watch behind them (its "cannot pipeline" errors).
    let stacked = !reply.is_empty();
    let out = reply.bytes();
    if !session.authenticated {
        return ascii_auth(w, session, req, out);
    }
    if w.shared
        .verbosity
        .load(std::sync::atomic::Ordering::Relaxed)
        > 1
    {
        tracing::debug!("request: {req:?}");
    }
    match req {
        Request::Get { keys, with_cas } => return retrieval::get(w, keys, with_cas, window, reply),
        Request::GetAndTouch {
            exptime,
            keys,
            with_cas,
        } => return retrieval::get_and_touch(w, exptime, keys, with_cas, window, reply),
        Request::Store {
            kind,
            key,
            flags,
            exptime,
            data,
            cas_unique,
            noreply,
        } => storage::text(
            w,
            storage::StoreRequest {
                kind,
                key,
                flags,
                exptime,
                data,
                cas_unique,
            },
            noreply,
            out,
        ),
        Request::Delete { key, noreply } => delete::text(w, key, noreply, out),
        Request::Arithmetic {
            key,
            delta,
            incr,
            noreply,
        } => arithmetic::text(w, key, delta, incr, noreply, out),
        Request::Touch {
            key,
            exptime,
            noreply,
        } => touch::touch(w, key, exptime, noreply, out),
        Request::FlushAll { delay, noreply } => admin::flush_all(w, delay, noreply, out),
        Request::FlushAllInvalidDelay { noreply } => {
            admin::flush_all_invalid_delay(w, noreply, out)
        }
        Request::Version => admin::version(out),
        Request::Verbosity { level, noreply } => admin::verbosity(w, level, noreply, out),
        Request::Quit => return Flow::Close,
        Request::Shutdown => return admin::shutdown(w, false, out),
        Request::ShutdownGraceful => return admin::shutdown(w, true, out),
        Request::ShutdownInvalidMode => admin::shutdown_invalid_mode(w, out),
        Request::CacheMemlimit { megabytes, noreply } => {
            admin::cache_memlimit(w, megabytes, noreply, out)
        }
        Request::Stats(group) => stats::stats(w, group, out),
        Request::LruCrawler(args) => {
            let start = out.len();
            let flow = crawler::lru_crawler(w, args, stacked, window, out);
            if flow == Flow::Continue {
                silence_noreply(args, out, start);
            }
            return flow;
        }
        Request::Slabs(args) => {
            let start = out.len();
            tuning::slabs(w, args, out);
            silence_noreply(args, out, start);
        }
        Request::Lru(args) => {
            let start = out.len();
            tuning::lru(w, args, out);
            silence_noreply(args, out, start);
        }
        Request::Extstore(args) => tuning::extstore(w, args, out),
        Request::RefreshCerts(args) => tuning::refresh_certs(w, args, out),
        Request::DebugTime(args) => {
            let start = out.len();
            admin::debug_time(w, args, out);
            silence_noreply(args, out, start);
        }
        Request::Watch(_) if !w.shared.settings.watch_enabled => {
            out.extend_from_slice(b"CLIENT_ERROR watch commands not allowed\r\n")
        }
        Request::Watch(_) if stacked => {
            out.extend_from_slice(b"ERROR cannot pipeline other commands before watch\r\n")
        }
        Request::Watch(args) => match crate::watch::parse_kinds(args) {
            Ok(kinds) => return Flow::Watch(kinds),
            Err(_) => out.extend_from_slice(shoal_protocol::reply::ERROR),
        },
        Request::MetaGet { key, flags } => return meta::get::meta_get(w, key, flags, reply),
        Request::MetaSet { key, flags, data } => meta::set::meta_set(w, key, flags, data, out),
        Request::MetaDelete { key, flags } => meta::delete::meta_delete(w, key, flags, out),
        Request::MetaArithmetic { key, flags } => {
            meta::arithmetic::meta_arithmetic(w, key, flags, out)
        }
        Request::MetaNoop => out.extend_from_slice(shoal_protocol::reply::MN),
        Request::MetaDebug { key, flags } => meta::debug::meta_debug(w, key, flags, out),
    }
    Flow::Continue
}

/// Whether serving `req` may write an item (and so may need a fresh segment). Before such
/// a request, a connection copies the values its pending reply refers to: a writer that
/// needs room waits for pinned segments to be let go, which its own connection would only
/// do after the write. Retrievals, the commands pipelines are made of, keep theirs.
pub fn may_store(req: &Request<'_>) -> bool {
    match req {
        Request::Get { .. }
        | Request::MetaNoop
        | Request::MetaDebug { .. }
        | Request::Version
        | Request::Delete { .. }
        | Request::Quit => false,
        Request::MetaGet { flags, .. } => flags.has(b'T') || flags.has(b'N'),
        _ => true,
    }
}

/// memcached silences whatever a command it dispatches from its table answers when the
/// line's last token is `noreply` (`slabs`, `lru`, `lru_crawler`...): drops what the
/// command appended from `start` on.
fn silence_noreply(args: &[u8], out: &mut Vec<u8>, start: usize) {
    if args.rsplit(|&b| b == b' ').next() == Some(&b"noreply"[..]) {
        out.truncate(start);
    }
}

/// Appends `reply` unless the request was `noreply`.
#[inline]
pub(crate) fn respond(out: &mut Vec<u8>, noreply: bool, reply: &[u8]) {
    if !noreply {
        out.extend_from_slice(reply);
    }
}

/// The CAS unique to show a client: 0 when CAS is disabled (`-C`), as memcached does.
#[inline]
pub(crate) fn visible_cas(w: &Worker, cas: u64) -> u64 {
    if w.shared.settings.cas_enabled {
        cas
    } else {
        0
    }
}

/// memcached's ASCII authentication: `set <any> <flags> <exptime> <len>` with data
/// `user password`.
fn ascii_auth(w: &Worker, session: &mut Session, req: Request<'_>, out: &mut Vec<u8>) -> Flow {
    let Some(db) = w.shared.ascii_auth.as_ref() else {
        out.extend_from_slice(b"CLIENT_ERROR unauthenticated\r\n");
        return Flow::Continue;
    };
    match req {
        Request::Store {
            kind: shoal_protocol::StoreKind::Set,
            data,
            ..
        } => {
            crate::stats::ThreadStats::incr(&w.stats.auth_cmds);
            let mut parts = data.splitn(2, |&b| b == b' ');
            match (parts.next(), parts.next()) {
                (Some(user), Some(pass)) if !user.is_empty() => {
                    if db.check(user, pass) {
                        session.authenticated = true;
                        out.extend_from_slice(shoal_protocol::reply::STORED);
                    } else {
                        crate::stats::ThreadStats::incr(&w.stats.auth_errors);
                        session.failed(
                            "an ASCII client",
                            db.record_failure(w.shared.store.clock().now()),
                        );
                        out.extend_from_slice(b"CLIENT_ERROR authentication failure\r\n");
                    }
                }
                _ => {
                    crate::stats::ThreadStats::incr(&w.stats.auth_errors);
                    session.failed(
                        "an ASCII client",
                        db.record_failure(w.shared.store.clock().now()),
                    );
                    out.extend_from_slice(b"CLIENT_ERROR bad authentication token format\r\n")
                }
            }
        }
        Request::Quit => return Flow::Close,
        _ => out.extend_from_slice(b"CLIENT_ERROR unauthenticated\r\n"),
    }
    Flow::Continue
}
