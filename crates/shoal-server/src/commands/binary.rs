//! The binary protocol's dispatch: a framed request is decoded by shoal-protocol into a
//! typed command and its reply attributes, and served by the same command functions as
//! text and meta; each answers in binary through `shoal_protocol::binary::reply`.

use super::{admin, arithmetic, delete, retrieval, sasl, stats, storage, Flow, Out};
use crate::auth::Session;
use crate::worker::Worker;
use shoal_protocol::binary::{self, Command, Malformed, Status};
use shoal_protocol::BinaryRequest;

/// Executes one binary request, appending its response packets to `out`. A body whose
/// shape the opcode does not take is answered `Invalid arguments` and closes the
/// connection; until a `-S` session has authenticated only SASL, `VERSION` and `QUIT`
/// are served.
pub fn execute<'w>(
    w: &'w Worker,
    session: &mut Session,
    r: BinaryRequest<'_>,
    reply: &mut Out<'w>,
) -> Flow {
    let (a, command) = match binary::decode(r) {
        Ok(decoded) => decoded,
        Err(Malformed { attrs }) => {
            binary::reply::status(reply.bytes(), &attrs, Status::InvalidArguments);
            return Flow::Close;
        }
    };
    if !matches!(command, Command::Get { .. } | Command::Noop) {
        // See `super::may_store`.
        reply.copy_values();
    }
    let out = reply.bytes();
    if !session.authenticated && !command.allowed_unauthenticated() {
        binary::reply::status(out, &a, Status::AuthError);
        return Flow::Continue;
    }
    match command {
        Command::Get { key } => return retrieval::binary(w, &a, key, None, true, reply),
        Command::GetAndTouch {
            key,
            exptime,
            value,
        } => return retrieval::binary(w, &a, key, Some(exptime), value, reply),
        Command::Store {
            kind,
            key,
            flags,
            exptime,
            data,
        } => storage::binary(w, &a, kind, key, flags, exptime, data, out),
        Command::Delete { key } => delete::binary(w, &a, key, out),
        Command::Arithmetic {
            key,
            incr,
            delta,
            initial,
            create_exptime,
        } => arithmetic::binary(w, &a, key, incr, delta, initial, create_exptime, out),
        Command::Quit => {
            binary::reply::ok(out, &a, 0);
            return Flow::Close;
        }
        Command::Flush { delay } => admin::flush_binary(w, &a, delay, out),
        Command::Noop => binary::reply::ok(out, &a, 0),
        Command::Version => admin::version_binary(&a, out),
        Command::Stat { group, raw } => stats::binary(w, &a, group, raw, out),
        Command::SaslListMechs => sasl::list_mechs(w, &a, out),
        Command::SaslAuth {
            mechanism,
            data,
            step,
        } => sasl::auth(w, session, &a, mechanism, data, step, out),
        Command::Unknown => binary::reply::status(out, &a, Status::UnknownCommand),
    }
    Flow::Continue
}
