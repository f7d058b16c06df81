//! The binary protocol: every opcode memcached serves, mapped onto the same store
//! operations as the text commands, with memcached's status codes.

use super::arithmetic::{apply_delta, Delta, DeltaOptions};
use super::storage::{apply, fits, too_large, Stored};
use super::{visible_cas, Flow};
use crate::auth::{parse_plain, Session};
use crate::config::VERSION;
use crate::stats::ThreadStats;
use crate::worker::Worker;
use shoal_protocol::binary::{self, opcode as op, Status};
use shoal_protocol::{BinaryRequest, StatsGroup, StoreKind};
use shoal_store::{StoreError, StoreOptions};

/// The only SASL mechanism offered.
const MECHANISMS: &[u8] = b"PLAIN";

/// Expiration extra of an incr/decr meaning "do not create a missing key".
const NO_CREATE: u32 = 0xffff_ffff;

fn quiet(opcode: u8) -> bool {
    matches!(
        opcode,
        op::GETQ
            | op::GETKQ
            | op::SETQ
            | op::ADDQ
            | op::REPLACEQ
            | op::DELETEQ
            | op::INCREMENTQ
            | op::DECREMENTQ
            | op::QUITQ
            | op::FLUSHQ
            | op::APPENDQ
            | op::PREPENDQ
            | op::GATQ
            | op::GATKQ
    )
}

/// Whether the request's extras/key/value shapes are what the opcode takes (memcached
/// closes the connection otherwise).
fn well_formed(r: &BinaryRequest<'_>) -> bool {
    let (e, k, v) = (r.extras.len(), r.key.len(), r.value.len());
    match r.opcode {
        op::GET | op::GETQ | op::GETK | op::GETKQ | op::DELETE | op::DELETEQ => {
            e == 0 && k > 0 && v == 0
        }
        op::SET | op::SETQ | op::ADD | op::ADDQ | op::REPLACE | op::REPLACEQ => e == 8 && k > 0,
        op::APPEND | op::APPENDQ | op::PREPEND | op::PREPENDQ => e == 0 && k > 0,
        op::INCREMENT | op::INCREMENTQ | op::DECREMENT | op::DECREMENTQ => {
            e == 20 && k > 0 && v == 0
        }
        op::QUIT | op::QUITQ | op::NOOP | op::VERSION | op::SASL_LIST_MECHS => {
            e == 0 && k == 0 && v == 0
        }
        op::FLUSH | op::FLUSHQ => (e == 0 || e == 4) && k == 0 && v == 0,
        op::STAT => e == 0 && v == 0,
        op::VERBOSITY => e == 4 && k == 0 && v == 0,
        op::TOUCH | op::GAT | op::GATQ | op::GATK | op::GATKQ => e == 4 && k > 0 && v == 0,
        op::SASL_AUTH | op::SASL_STEP => e == 0 && k > 0,
        _ => true,
    }
}

/// Executes one binary request, appending its response packets to `out`.
pub fn execute(w: &Worker, session: &mut Session, r: BinaryRequest<'_>, out: &mut Vec<u8>) -> Flow {
    if !well_formed(&r) {
        binary::error(out, r.opcode, Status::InvalidArguments, r.opaque);
        return Flow::Close;
    }
    if !session.authenticated
        && !matches!(
            r.opcode,
            op::SASL_LIST_MECHS
                | op::SASL_AUTH
                | op::SASL_STEP
                | op::VERSION
                | op::QUIT
                | op::QUITQ
        )
    {
        binary::error(out, r.opcode, Status::AuthError, r.opaque);
        return Flow::Continue;
    }
    let q = quiet(r.opcode);
    match r.opcode {
        op::GET | op::GETQ | op::GETK | op::GETKQ => get(w, &r, None, out),
        op::TOUCH | op::GAT | op::GATQ | op::GATK | op::GATKQ => {
            let exptime = i64::from(r.extra_u32(0).unwrap_or(0));
            get(w, &r, Some(exptime), out)
        }
        op::SET
        | op::SETQ
        | op::ADD
        | op::ADDQ
        | op::REPLACE
        | op::REPLACEQ
        | op::APPEND
        | op::APPENDQ
        | op::PREPEND
        | op::PREPENDQ => store(w, &r, q, out),
        op::DELETE | op::DELETEQ => delete(w, &r, q, out),
        op::INCREMENT | op::INCREMENTQ | op::DECREMENT | op::DECREMENTQ => arith(w, &r, q, out),
        op::QUIT => {
            binary::response(out, r.opcode, Status::Ok, r.opaque, 0, &[], &[], &[]);
            return Flow::Close;
        }
        op::QUITQ => return Flow::Close,
        op::FLUSH | op::FLUSHQ => flush(w, &r, q, out),
        op::NOOP => binary::response(out, r.opcode, Status::Ok, r.opaque, 0, &[], &[], &[]),
        op::VERSION => binary::response(
            out,
            r.opcode,
            Status::Ok,
            r.opaque,
            0,
            &[],
            &[],
            VERSION.as_bytes(),
        ),
        op::VERBOSITY => {
            let level = r.extra_u32(0).unwrap_or(0);
            w.shared
                .verbosity
                .store(level as usize, std::sync::atomic::Ordering::Relaxed);
            binary::response(out, r.opcode, Status::Ok, r.opaque, 0, &[], &[], &[]);
        }
        op::STAT => stat(w, &r, out),
        // Without -S the SASL opcodes are unknown (memcached), so clients configured with
        // credentials carry on unauthenticated instead of failing.
        op::SASL_LIST_MECHS if w.shared.sasl.is_none() => {
            binary::error(out, r.opcode, Status::UnknownCommand, r.opaque)
        }
        op::SASL_LIST_MECHS => {
            binary::response(out, r.opcode, Status::Ok, r.opaque, 0, &[], &[], MECHANISMS)
        }
        op::SASL_AUTH | op::SASL_STEP => sasl(w, session, &r, out),
        _ => binary::error(out, r.opcode, Status::UnknownCommand, r.opaque),
    }
    Flow::Continue
}

/// get/getq/getk/getkq, and with `touch` set, touch/gat/gatq/gatk/gatkq.
fn get(w: &Worker, r: &BinaryRequest<'_>, touch: Option<i64>, out: &mut Vec<u8>) {
    let s = &w.stats;
    let with_key = matches!(r.opcode, op::GETK | op::GETKQ | op::GATK | op::GATKQ);
    let is_touch = r.opcode == op::TOUCH;
    let emit = |item: &shoal_store::Item<'_>, out: &mut Vec<u8>| {
        let value: &[u8] = if is_touch { &[] } else { item.value() };
        let key: &[u8] = if with_key { r.key } else { &[] };
        binary::response_header(
            out,
            r.opcode,
            Status::Ok,
            r.opaque,
            visible_cas(w, item.cas()),
            4,
            key.len(),
            value.len(),
        );
        out.extend_from_slice(&item.flags().to_be_bytes());
        out.extend_from_slice(key);
        out.extend_from_slice(value);
        item.value().len()
    };
    let found = match touch {
        None => {
            ThreadStats::incr(&s.cmd_get);
            w.shared.store.get(r.key, |item| emit(item, out))
        }
        Some(exptime) => {
            ThreadStats::incr(&s.cmd_touch);
            let expiry = w.shared.store.clock().expiry(exptime);
            let mut writer = w.writer.borrow_mut();
            w.shared
                .store
                .update(&mut writer, r.key, |e| {
                    if !e.set_exptime(expiry)? {
                        return Ok(None);
                    }
                    let Some(item) = e.item() else {
                        return Ok(None);
                    };
                    let len = emit(&item, out);
                    item.mark_fetched();
                    Ok(Some(len))
                })
                .unwrap_or(None)
        }
    };
    w.shared
        .watchers
        .fetched(r.key, found, w.current_conn.get());
    let hit = found.is_some();
    let op = crate::detail::PrefixOp::Get { hit };
    w.shared.prefixes.record(r.key, op);
    let (hits, misses) = if touch.is_some() {
        (&s.touch_hits, &s.touch_misses)
    } else {
        (&s.get_hits, &s.get_misses)
    };
    ThreadStats::incr(if hit { hits } else { misses });
    if !hit && !quiet(r.opcode) {
        if with_key {
            // memcached answers a GETK miss with the key and no error text.
            binary::response(
                out,
                r.opcode,
                Status::KeyNotFound,
                r.opaque,
                0,
                &[],
                r.key,
                &[],
            );
        } else {
            binary::error(out, r.opcode, Status::KeyNotFound, r.opaque);
        }
    }
}

fn store(w: &Worker, r: &BinaryRequest<'_>, q: bool, out: &mut Vec<u8>) {
    let kind = match r.opcode {
        op::SET | op::SETQ => StoreKind::Set,
        op::ADD | op::ADDQ => StoreKind::Add,
        op::REPLACE | op::REPLACEQ => StoreKind::Replace,
        op::APPEND | op::APPENDQ => StoreKind::Append,
        _ => StoreKind::Prepend,
    };
    if !fits(w, r.key.len(), r.value.len()) {
        too_large(w, r.key, false, kind == StoreKind::Set);
        binary::error(out, r.opcode, Status::TooLarge, r.opaque);
        return;
    }
    let opts = StoreOptions {
        flags: r.extra_u32(0).unwrap_or(0),
        exptime: w
            .shared
            .store
            .clock()
            .expiry(i64::from(r.extra_u32(4).unwrap_or(0))),
        ..StoreOptions::default()
    };
    // A non-zero CAS turns any storage opcode into a compare-and-swap (memcached).
    let cas_check = (r.cas != 0).then_some(r.cas);
    let result = apply(w, kind, r.key, r.value, opts, cas_check);
    super::storage::counted(w, r.key, &result, kind == StoreKind::Set);
    let status = match result {
        Ok(Stored::Stored(cas)) => {
            if !q {
                binary::response(
                    out,
                    r.opcode,
                    Status::Ok,
                    r.opaque,
                    visible_cas(w, cas),
                    &[],
                    &[],
                    &[],
                );
            }
            return;
        }
        Ok(Stored::Exists) => Status::KeyExists,
        Ok(Stored::NotFound) => Status::KeyNotFound,
        Ok(Stored::NotStored) => match kind {
            StoreKind::Add => Status::KeyExists,
            StoreKind::Replace => Status::KeyNotFound,
            _ => Status::NotStored,
        },
        Err(StoreError::TooLarge) => Status::TooLarge,
        Err(StoreError::OutOfMemory) => Status::OutOfMemory,
    };
    binary::error(out, r.opcode, status, r.opaque);
}

fn delete(w: &Worker, r: &BinaryRequest<'_>, q: bool, out: &mut Vec<u8>) {
    let cas_enabled = w.shared.settings.cas_enabled;
    let mut writer = w.writer.borrow_mut();
    let status = w
        .shared
        .store
        .update(&mut writer, r.key, |e| {
            let Some(item) = e.item() else {
                return Ok(Status::KeyNotFound);
            };
            let cas = if cas_enabled { item.cas() } else { 0 };
            if r.cas != 0 && r.cas != cas {
                return Ok(Status::KeyExists);
            }
            e.remove();
            Ok(Status::Ok)
        })
        .unwrap_or(Status::OutOfMemory);
    if status == Status::Ok {
        w.shared.watchers.deleted(r.key, "delete");
    }
    w.shared
        .prefixes
        .record(r.key, crate::detail::PrefixOp::Delete);
    let s = &w.stats;
    ThreadStats::incr(if status == Status::Ok {
        &s.delete_hits
    } else {
        &s.delete_misses
    });
    if status == Status::Ok {
        if !q {
            binary::response(out, r.opcode, Status::Ok, r.opaque, 0, &[], &[], &[]);
        }
    } else {
        binary::error(out, r.opcode, status, r.opaque);
    }
}

fn arith(w: &Worker, r: &BinaryRequest<'_>, q: bool, out: &mut Vec<u8>) {
    let incr = matches!(r.opcode, op::INCREMENT | op::INCREMENTQ);
    let delta = r.extra_u64(0).unwrap_or(0);
    let initial = r.extra_u64(8).unwrap_or(0);
    let expiration = r.extra_u32(16).unwrap_or(NO_CREATE);
    let vivify = (expiration != NO_CREATE).then(|| {
        let exptime = w.shared.store.clock().expiry(i64::from(expiration));
        (
            initial,
            StoreOptions {
                exptime,
                ..StoreOptions::default()
            },
        )
    });
    let opts = DeltaOptions {
        vivify,
        compare_cas: (r.cas != 0).then_some(r.cas),
        ..DeltaOptions::default()
    };
    let s = &w.stats;
    let (hits, misses) = if incr {
        (&s.incr_hits, &s.incr_misses)
    } else {
        (&s.decr_hits, &s.decr_misses)
    };
    let status = match apply_delta(w, r.key, delta, incr, opts) {
        Ok(Delta::Value(v, cas, _)) | Ok(Delta::Created(v, cas, _)) => {
            ThreadStats::incr(hits);
            if !q {
                binary::response(
                    out,
                    r.opcode,
                    Status::Ok,
                    r.opaque,
                    visible_cas(w, cas),
                    &[],
                    &[],
                    &v.to_be_bytes(),
                );
            }
            return;
        }
        Ok(Delta::NotFound) => {
            ThreadStats::incr(misses);
            Status::KeyNotFound
        }
        Ok(Delta::Exists) => Status::KeyExists,
        Ok(Delta::NonNumeric) => Status::NonNumeric,
        Err(_) => Status::OutOfMemory,
    };
    binary::error(out, r.opcode, status, r.opaque);
}

fn flush(w: &Worker, r: &BinaryRequest<'_>, q: bool, out: &mut Vec<u8>) {
    if !w.shared.settings.flush_enabled {
        binary::error(out, r.opcode, Status::AuthError, r.opaque);
        return;
    }
    ThreadStats::incr(&w.stats.cmd_flush);
    let delay = i64::from(r.extra_u32(0).unwrap_or(0));
    let store = &w.shared.store;
    let secs = if delay > 0 {
        store
            .clock()
            .expiry(delay)
            .saturating_sub(store.clock().now())
    } else {
        0
    };
    store.flush_all(secs);
    if !q {
        binary::response(out, r.opcode, Status::Ok, r.opaque, 0, &[], &[], &[]);
    }
}

/// `stat [group]`: one packet per statistic, then an empty terminator packet. The text
/// protocol's `stats` output is produced once and re-framed, so both protocols always
/// report the same numbers.
fn stat(w: &Worker, r: &BinaryRequest<'_>, out: &mut Vec<u8>) {
    let group = match r.key {
        b"" => StatsGroup::General,
        b"settings" => StatsGroup::Settings,
        b"items" => StatsGroup::Items,
        b"slabs" => StatsGroup::Slabs,
        b"sizes" => StatsGroup::Sizes,
        b"conns" => StatsGroup::Conns,
        b"reset" => StatsGroup::Reset,
        other => StatsGroup::Other(other),
    };
    let mut text = Vec::new();
    super::stats::stats(w, group, &mut text);
    if r.key == b"detail dump" {
        // memcached sends the whole dump as one packet's value.
        binary::response(out, r.opcode, Status::Ok, r.opaque, 0, &[], &[], &text);
        return;
    }
    if text.starts_with(b"ERROR") || text.starts_with(b"CLIENT_ERROR") {
        binary::error(out, r.opcode, Status::KeyNotFound, r.opaque);
        return;
    }
    for line in text.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(rest) = line.strip_prefix(b"STAT ") else {
            continue;
        };
        let (name, value) = match rest.iter().position(|&b| b == b' ') {
            Some(p) => (&rest[..p], &rest[p + 1..]),
            None => (rest, &b""[..]),
        };
        binary::response(out, r.opcode, Status::Ok, r.opaque, 0, &[], name, value);
    }
    binary::response(out, r.opcode, Status::Ok, r.opaque, 0, &[], &[], &[]);
}

fn sasl(w: &Worker, session: &mut Session, r: &BinaryRequest<'_>, out: &mut Vec<u8>) {
    let Some(db) = w.shared.sasl.as_ref() else {
        binary::error(out, r.opcode, Status::UnknownCommand, r.opaque);
        return;
    };
    ThreadStats::incr(&w.stats.auth_cmds);
    let ok = r.opcode == op::SASL_AUTH
        && r.key == MECHANISMS
        && parse_plain(r.value).is_some_and(|(user, pass)| db.check(user, pass));
    if ok {
        session.authenticated = true;
        binary::response(
            out,
            r.opcode,
            Status::Ok,
            r.opaque,
            0,
            &[],
            &[],
            b"Authenticated",
        );
    } else {
        session.authenticated = false;
        ThreadStats::incr(&w.stats.auth_errors);
        let recent = db.record_failure(w.shared.store.clock().now());
        session.failed("a binary SASL client", recent);
        binary::error(out, r.opcode, Status::AuthError, r.opaque);
    }
}
