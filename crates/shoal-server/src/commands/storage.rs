//! `set`, `add`, `replace`, `append`, `prepend`, `cas`.

use super::respond;
use crate::stats::ThreadStats;
use crate::worker::Worker;
use shoal_protocol::{reply, StoreKind};
use shoal_store::{StoreError, StoreOptions};

/// memcached's per-item overhead counted against `-I` (item header, CAS, `\r\n`), so the
/// same values are refused as "too large" as with memcached.
pub const ITEM_OVERHEAD: usize = 56;

/// A parsed storage command.
pub struct StoreRequest<'a> {
    /// Which command.
    pub kind: StoreKind,
    /// The key.
    pub key: &'a [u8],
    /// Client flags.
    pub flags: u32,
    /// Protocol exptime.
    pub exptime: i64,
    /// The data block.
    pub data: &'a [u8],
    /// The `cas` command's unique (0 otherwise).
    pub cas_unique: u64,
}

/// The outcome of a storage command, shared with the meta `ms` command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// Stored, with the new CAS unique.
    Stored(u64),
    /// The add/replace/append/prepend condition failed.
    NotStored,
    /// cas: the unique did not match.
    Exists,
    /// cas: no such item.
    NotFound,
}

/// Whether an item of this key and value length is within `-I`.
pub fn fits(w: &Worker, key_len: usize, value_len: usize) -> bool {
    key_len + value_len + ITEM_OVERHEAD <= w.shared.settings.max_item_size
}

/// Executes a text storage command.
///
/// `cmd_set` counts only stores that got as far as memcached's `do_store_item`: one
/// refused as too large or for memory is counted in `store_too_large` / `store_no_memory`
/// instead, as memcached does (its allocation fails before the command is counted).
pub fn store(w: &Worker, req: StoreRequest<'_>, noreply: bool, out: &mut Vec<u8>) {
    if !fits(w, req.key.len(), req.data.len()) {
        too_large(w, req.key, false, req.kind == StoreKind::Set);
        respond(out, noreply, reply::OBJECT_TOO_LARGE);
        return;
    }
    let expiry = w.shared.store.clock().expiry(req.exptime);
    let opts = StoreOptions {
        flags: req.flags,
        exptime: expiry,
        ..StoreOptions::default()
    };
    let cas_check = (req.kind == StoreKind::Cas).then_some(req.cas_unique);
    let result = apply(w, req.kind, req.key, req.data, opts, cas_check);
    counted(w, req.key, &result, req.kind == StoreKind::Set);
    let text = match result {
        Ok(Stored::Stored(_)) => reply::STORED,
        Ok(Stored::NotStored) => reply::NOT_STORED,
        Ok(Stored::Exists) => reply::EXISTS,
        Ok(Stored::NotFound) => reply::NOT_FOUND,
        Err(StoreError::TooLarge) => reply::OBJECT_TOO_LARGE,
        Err(StoreError::OutOfMemory) => reply::OUT_OF_MEMORY_STORING,
    };
    respond(out, noreply, text);
}

/// Stores `data` under `key` with memcached's semantics for `kind`. `cas_check` compares
/// the item's unique first (the `cas` command, or meta's `C` flag).
pub fn apply(
    w: &Worker,
    kind: StoreKind,
    key: &[u8],
    data: &[u8],
    opts: StoreOptions,
    cas_check: Option<u64>,
) -> Result<Stored, StoreError> {
    let s = &w.stats;
    let cas_enabled = w.shared.settings.cas_enabled;
    let mut writer = w.writer.borrow_mut();
    let result = w.shared.store.update(&mut writer, key, |e| {
        let current = e.item().map(|i| if cas_enabled { i.cas() } else { 0 });
        if let Some(expected) = cas_check {
            match current {
                None => return Ok(Stored::NotFound),
                Some(c) if c != expected => return Ok(Stored::Exists),
                Some(_) => {}
            }
        }
        let outcome = match kind {
            StoreKind::Set | StoreKind::Cas => Some(e.store(&[data], opts)?),
            StoreKind::Add if current.is_some() => None,
            StoreKind::Replace if current.is_none() => None,
            StoreKind::Add | StoreKind::Replace => Some(e.store(&[data], opts)?),
            StoreKind::Append => e.append(data, false)?,
            StoreKind::Prepend => e.append(data, true)?,
        };
        Ok(outcome.map_or(Stored::NotStored, Stored::Stored))
    });
    if w.shared.watchers.watching(crate::watch::kind::MUTATIONS) {
        watch_store(w, kind, key, data.len(), opts.exptime, &result);
    }
    w.shared.prefixes.record(key, crate::detail::PrefixOp::Set);
    if cas_check.is_some() {
        match result {
            Ok(Stored::Stored(_)) => ThreadStats::incr(&s.cas_hits),
            Ok(Stored::Exists) => ThreadStats::incr(&s.cas_badval),
            Ok(Stored::NotFound) => ThreadStats::incr(&s.cas_misses),
            _ => {}
        }
    }
    result
}

/// Tells `watch mutations` how a store ended, in memcached's words.
pub(crate) fn watch_store(
    w: &Worker,
    kind: StoreKind,
    key: &[u8],
    size: usize,
    exptime: u32,
    result: &Result<Stored, StoreError>,
) {
    let status = match result {
        Ok(Stored::Stored(_)) => "stored",
        Ok(Stored::NotStored) => "not_stored",
        Ok(Stored::Exists) => "exists",
        Ok(Stored::NotFound) => "not_found",
        Err(StoreError::TooLarge) => "too_large",
        Err(StoreError::OutOfMemory) => "no_memory",
    };
    let cmd = match kind {
        StoreKind::Set => "set",
        StoreKind::Add => "add",
        StoreKind::Replace => "replace",
        StoreKind::Append => "append",
        StoreKind::Prepend => "prepend",
        StoreKind::Cas => "cas",
    };
    let ttl = match exptime {
        0 => 0,
        e => e.saturating_sub(w.shared.store.clock().now()),
    };
    w.shared
        .watchers
        .stored(key, status, cmd, ttl, size, w.current_conn.get());
}

/// Counts a store's outcome as memcached does: `cmd_set` for one that was tried,
/// `store_too_large` / `store_no_memory` for one refused (and then, for `set`, `ms` and
/// binary set, `remove_old`, the key's old value is removed as well).
pub(crate) fn counted(
    w: &Worker,
    key: &[u8],
    result: &Result<Stored, StoreError>,
    remove_old: bool,
) {
    match result {
        Ok(_) => ThreadStats::incr(&w.stats.cmd_set),
        Err(StoreError::TooLarge) => too_large(w, key, false, remove_old),
        Err(StoreError::OutOfMemory) => no_memory(w, key, false, remove_old),
    }
}

/// A value over the size limit, counted in `store_too_large`: memcached removes the old
/// value for `set` (and every `ms`) so that a failed overwrite never leaves stale data
/// behind.
pub fn too_large(w: &Worker, key: &[u8], key_base64: bool, remove_old: bool) {
    ThreadStats::incr(&w.stats.store_too_large);
    if remove_old {
        remove(w, key, key_base64);
    }
}

/// A store refused for want of memory (`-M` with a full store), counted in
/// `store_no_memory` (and so in `stats items`' `outofmemory`). As for [`too_large`],
/// memcached removes the old value for `set` and every `ms`: after a failed overwrite the
/// key misses rather than serving what the client meant to replace.
pub fn no_memory(w: &Worker, key: &[u8], key_base64: bool, remove_old: bool) {
    ThreadStats::incr(&w.stats.store_no_memory);
    if remove_old {
        remove(w, key, key_base64);
    }
}

/// Removes `key` (sent in base64 if `key_base64`). The caller must not hold the writer.
fn remove(w: &Worker, key: &[u8], key_base64: bool) {
    let mut buf = [0u8; 256];
    let Ok(key) = shoal_protocol::decode_key(key, key_base64, &mut buf) else {
        return;
    };
    let mut writer = w.writer.borrow_mut();
    let _ = w.shared.store.update(&mut writer, key, |e| Ok(e.remove()));
}
