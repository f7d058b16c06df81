//! Binary SASL (`-S`): `SASL_LIST_MECHS` and `SASL_AUTH`/`SASL_STEP` with PLAIN, the only
//! mechanism offered. Without `-S` the SASL opcodes are unknown, as in memcached, so
//! clients configured with credentials carry on unauthenticated instead of failing.

use crate::auth::{parse_plain, Session};
use crate::stats::ThreadStats;
use crate::worker::Worker;
use shoal_protocol::binary::{self, Attrs, Status};

/// The only SASL mechanism offered.
const MECHANISMS: &[u8] = b"PLAIN";

/// `SASL_LIST_MECHS`: `PLAIN`, or an unknown command without `-S`.
pub fn list_mechs(w: &Worker, attrs: &Attrs, out: &mut Vec<u8>) {
    if w.shared.sasl.is_none() {
        binary::reply::status(out, attrs, Status::UnknownCommand);
    } else {
        binary::reply::ok_with_value(out, attrs, 0, MECHANISMS);
    }
}

/// `SASL_AUTH` with PLAIN authenticates the session or, on any failure (a `SASL_STEP`
/// included: PLAIN has no second step), de-authenticates it and counts `auth_errors`.
pub fn auth(
    w: &Worker,
    session: &mut Session,
    attrs: &Attrs,
    mechanism: &[u8],
    data: &[u8],
    step: bool,
    out: &mut Vec<u8>,
) {
    let Some(db) = w.shared.sasl.as_ref() else {
        binary::reply::status(out, attrs, Status::UnknownCommand);
        return;
    };
    ThreadStats::incr(&w.stats.auth_cmds);
    let ok = !step
        && mechanism == MECHANISMS
        && parse_plain(data).is_some_and(|(user, pass)| db.check(user, pass));
    if ok {
        session.authenticated = true;
        binary::reply::ok_with_value(out, attrs, 0, b"Authenticated");
    } else {
        session.authenticated = false;
        ThreadStats::incr(&w.stats.auth_errors);
        let recent = db.record_failure(w.shared.store.clock().now());
        session.failed("a binary SASL client", recent);
        binary::reply::status(out, attrs, Status::AuthError);
    }
}
