//! `set`, `add`, `replace`, `append`, `prepend`, `cas`: the storage path of every
//! protocol. Text commands, binary storage opcodes and every `ms` mode become a
//! [`StoreSpec`] and go through [`store`]; only the replies differ.

use super::{respond, visible_cas};
use crate::stats::ThreadStats;
use crate::worker::Worker;
use shoal_protocol::binary::{self, Attrs, Status};
use shoal_protocol::{reply, StoreKind};
use shoal_store::{StoreError, StoreOptions};

/// memcached's per-item overhead counted against `-I` (item header, CAS, `\r\n`), so the
/// same values are refused as "too large" as with memcached.
pub const ITEM_OVERHEAD: usize = 56;

/// A parsed text storage command.
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

/// The outcome of a storage command, whichever protocol asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// Stored, with the new CAS unique and the stored value's length (for an append or
    /// prepend, the whole value's).
    Stored(u64, usize),
    /// The add/replace/append/prepend condition failed.
    NotStored,
    /// A compare-and-swap whose unique did not match.
    Exists,
    /// A compare-and-swap of a missing item.
    NotFound,
}

/// Whose bookkeeping a command follows. memcached's meta commands differ from the
/// classic ones (text and binary) in a few counted or reported ways, all kept; each shared
/// command function documents what it changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accounting {
    /// text and binary. Storage: a refused `set` removes the key's old value; a
    /// conditional store with a CAS that is refused for its condition counts in no CAS
    /// counter.
    Classic,
    /// meta. `ms`: every refused store removes the old value. `md`: a failed update is
    /// not counted, and `watch deletions` names the command `md`.
    Meta,
}

/// One store as the storage path executes it: what text storage commands, binary
/// storage opcodes and every `ms` mode become.
///
/// What a CAS unique means depends on the kind, as in memcached's `do_store_item`: a
/// [`StoreKind::Cas`] stores only over an item with that unique (a missing item is
/// `NotFound`, and a unique of 0 matches nothing); an append or prepend with a non-zero
/// unique refuses a different item (`Exists`) but not a missing one (`NotStored`, or
/// created with `vivify`); set, add and replace do not look at it (memcached's binary
/// protocol and `ms` turn their CAS-carrying stores into [`StoreKind::Cas`] first).
#[derive(Debug, Clone, Copy)]
pub struct StoreSpec<'a> {
    /// Which store.
    pub kind: StoreKind,
    /// The key (decoded, for base64 meta keys).
    pub key: &'a [u8],
    /// The value.
    pub data: &'a [u8],
    /// Flags, expiry (already absolute) and an explicit new CAS unique.
    pub opts: StoreOptions,
    /// The CAS unique the store is conditional on (see above).
    pub compare_cas: Option<u64>,
    /// `ms I`: a compare-and-swap whose CAS is older than the item's still lands, as a
    /// stale value keeping the item's expiry and win state.
    pub invalidate: bool,
    /// `ms N` for append and prepend: a missing key is created with the value, expiring
    /// at this expiry.
    pub vivify: Option<u32>,
    /// Whose counting rules apply.
    pub accounting: Accounting,
}

impl<'a> StoreSpec<'a> {
    /// A classic store (text or binary): no invalidation, no creation by append.
    pub fn classic(
        kind: StoreKind,
        key: &'a [u8],
        data: &'a [u8],
        opts: StoreOptions,
        compare_cas: Option<u64>,
    ) -> StoreSpec<'a> {
        StoreSpec {
            kind,
            key,
            data,
            opts,
            compare_cas,
            invalidate: false,
            vivify: None,
            accounting: Accounting::Classic,
        }
    }

    /// Whether a refusal removes the key's old value ("avoid stale data persisting in
    /// cache", memcached).
    fn remove_old_on_refusal(&self) -> bool {
        self.accounting == Accounting::Meta || self.kind == StoreKind::Set
    }
}

/// Whether an item of this key and value length is within `-I`.
pub fn fits(w: &Worker, key_len: usize, value_len: usize) -> bool {
    key_len + value_len + ITEM_OVERHEAD <= w.shared.settings.max_item_size
}

/// The storage path every protocol's storage command takes: refuses a value over `-I`,
/// stores with memcached's semantics for the spec, and counts and reports the outcome.
///
/// `cmd_set` counts only stores that got as far as memcached's `do_store_item`: one
/// refused as too large or for memory is counted in `store_too_large` /
/// `store_no_memory` instead, as memcached does (its allocation fails before the command
/// is counted). `cas_hits`/`cas_badval`/`cas_misses` count stores with a CAS.
pub fn store(w: &Worker, spec: &StoreSpec<'_>) -> Result<Stored, StoreError> {
    if !fits(w, spec.key.len(), spec.data.len()) {
        too_large(w, spec.key, false, spec.remove_old_on_refusal());
        return Err(StoreError::TooLarge);
    }
    let result = apply(w, spec);
    // memcached counts a store in the class of the item the command's data makes.
    let class = w
        .shared
        .store
        .slab_class_for(spec.key.len(), spec.data.len(), spec.opts.flags);
    counted(w, spec.key, class, &result, spec.remove_old_on_refusal());
    result
}

/// A text storage command: [`store`], answered in text.
pub fn text(w: &Worker, req: StoreRequest<'_>, noreply: bool, out: &mut Vec<u8>) {
    let opts = StoreOptions {
        flags: req.flags,
        exptime: w.shared.store.clock().expiry(req.exptime),
        // Text storage replies never carry the CAS unique.
        private_cas: true,
        ..StoreOptions::default()
    };
    let compare_cas = (req.kind == StoreKind::Cas).then_some(req.cas_unique);
    let spec = StoreSpec::classic(req.kind, req.key, req.data, opts, compare_cas);
    let text = match store(w, &spec) {
        Ok(Stored::Stored(..)) => reply::STORED,
        Ok(Stored::NotStored) => reply::NOT_STORED,
        Ok(Stored::Exists) => reply::EXISTS,
        Ok(Stored::NotFound) => reply::NOT_FOUND,
        Err(StoreError::TooLarge) => reply::OBJECT_TOO_LARGE,
        Err(StoreError::OutOfMemory) => reply::OUT_OF_MEMORY_STORING,
    };
    respond(out, noreply, text);
}

/// A binary storage opcode: [`store`], answered in binary. A non-zero CAS attribute turns
/// a set, add or replace into a compare-and-swap, and makes an append or prepend
/// conditional on it (memcached).
#[allow(clippy::too_many_arguments)]
pub fn binary(
    w: &Worker,
    attrs: &Attrs,
    kind: StoreKind,
    key: &[u8],
    flags: u32,
    exptime: i64,
    data: &[u8],
    out: &mut Vec<u8>,
) {
    let opts = StoreOptions {
        flags,
        exptime: w.shared.store.clock().expiry(exptime),
        ..StoreOptions::default()
    };
    let compare = attrs.compare_cas();
    let effective = match kind {
        StoreKind::Set | StoreKind::Add | StoreKind::Replace if compare.is_some() => StoreKind::Cas,
        other => other,
    };
    let spec = StoreSpec::classic(effective, key, data, opts, compare);
    let status = match store(w, &spec) {
        Ok(Stored::Stored(cas, _)) => return binary::reply::ok(out, attrs, visible_cas(w, cas)),
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
    binary::reply::status(out, attrs, status);
}

/// Stores the spec's value with memcached's semantics for its kind, then tells `watch
/// mutations` and `stats detail` and counts the CAS outcome.
fn apply(w: &Worker, spec: &StoreSpec<'_>) -> Result<Stored, StoreError> {
    let s = &w.stats;
    let StoreSpec {
        kind,
        key,
        data,
        opts,
        ..
    } = *spec;
    let cas_enabled = w.shared.settings.cas_enabled;
    let mut writer = w.writer.borrow_mut();
    // memcached looks the key up before every store, and that lookup is logged to
    // `watch fetchers` as an `item_get` line ahead of the `item_store` one: the value size
    // of what was there, if anything (the last run of the closure is the one that counts).
    let before = std::cell::Cell::new(None);
    let result = w.shared.store.update(&mut writer, key, |e| {
        before.set(e.item().map(|i| i.value_len()));
        let current = e.item().map(|i| {
            (
                // Read only to compare: asking for it marks it as held by a client.
                if cas_enabled && spec.compare_cas.is_some() {
                    i.cas()
                } else {
                    0
                },
                i.exptime(),
                i.win_sent(),
            )
        });
        let stored = |cas| Stored::Stored(cas, data.len());
        let Some((cur_cas, cur_exp, win)) = current else {
            return Ok(match kind {
                StoreKind::Cas => Stored::NotFound,
                StoreKind::Replace => Stored::NotStored,
                StoreKind::Append | StoreKind::Prepend => match spec.vivify {
                    Some(exptime) => stored(e.store(&[data], StoreOptions { exptime, ..opts })?),
                    None => Stored::NotStored,
                },
                StoreKind::Set | StoreKind::Add => stored(e.store(&[data], opts)?),
            });
        };
        let check = cas_check(spec.compare_cas, cur_cas, spec.invalidate);
        Ok(match kind {
            StoreKind::Add => {
                // memcached bumps the item it found in its LRU ("add only adds a
                // nonexistent item, but promote to head of LRU"), without fetching it.
                if let Some(item) = e.item() {
                    item.bump();
                }
                Stored::NotStored
            }
            StoreKind::Set | StoreKind::Replace => stored(e.store(&[data], opts)?),
            StoreKind::Cas => match check {
                CasCheck::Match => stored(e.store(&[data], opts)?),
                // With I, an older CAS still lands, but as a stale value that keeps the
                // item's expiry and win state, so a slow writer cannot resurrect data.
                CasCheck::Stale => {
                    let stale = StoreOptions {
                        exptime: cur_exp,
                        stale: true,
                        win_sent: win,
                        ..opts
                    };
                    stored(e.store(&[data], stale)?)
                }
                CasCheck::None | CasCheck::Mismatch => Stored::Exists,
            },
            StoreKind::Append | StoreKind::Prepend => match check {
                CasCheck::None | CasCheck::Match => {
                    // memcached writes a new item holding both parts: it keeps the flags
                    // and expiry but none of the old item's fetched, stale or win state.
                    // (memcached refuses this for a value on flash; shoald reads it back.)
                    e.load_value()?;
                    let Some(old) = e.item() else {
                        return Ok(Stored::NotStored);
                    };
                    let keep = StoreOptions {
                        flags: old.flags(),
                        exptime: old.exptime(),
                        cas: opts.cas,
                        ..StoreOptions::default()
                    };
                    let old_value = old.value().to_vec();
                    let parts: [&[u8]; 2] = if kind == StoreKind::Prepend {
                        [data, &old_value]
                    } else {
                        [&old_value, data]
                    };
                    Stored::Stored(e.store(&parts, keep)?, old_value.len() + data.len())
                }
                CasCheck::Stale | CasCheck::Mismatch => Stored::Exists,
            },
        })
    });
    drop(writer);
    w.shared
        .watchers
        .fetched(key, before.get(), w.current_conn.get());
    if w.shared.watchers.watching(crate::watch::kind::MUTATIONS) {
        // memcached logs the stored item's size: both parts for append and prepend.
        let size = match result {
            Ok(Stored::Stored(_, n)) => n,
            _ => data.len(),
        };
        watch_store(w, kind, key, size, opts.exptime, &result);
    }
    w.shared.prefixes.record(key, crate::detail::PrefixOp::Set);
    if kind == StoreKind::Cas {
        let c = s.class(
            w.shared
                .store
                .slab_class_for(key.len(), data.len(), opts.flags),
        );
        match result {
            Ok(Stored::Stored(..)) => ThreadStats::incr(&c.cas_hits),
            Ok(Stored::Exists) => ThreadStats::incr(&c.cas_badval),
            Ok(Stored::NotFound) => ThreadStats::incr(&s.cas_misses),
            _ => {}
        }
    }
    result
}

/// How an item's CAS unique compares with the one a store names (memcached's
/// `cas_result`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CasCheck {
    /// No unique named (or 0, which memcached reads as none).
    None,
    /// The same unique.
    Match,
    /// An older unique, on a store allowed to land as a stale value (`ms I`).
    Stale,
    /// A different unique.
    Mismatch,
}

fn cas_check(expected: Option<u64>, current: u64, allow_stale: bool) -> CasCheck {
    match expected {
        None | Some(0) => CasCheck::None,
        Some(e) if e == current => CasCheck::Match,
        Some(e) if allow_stale && e < current => CasCheck::Stale,
        Some(_) => CasCheck::Mismatch,
    }
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
        Ok(Stored::Stored(..)) => "stored",
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
    class: usize,
    result: &Result<Stored, StoreError>,
    remove_old: bool,
) {
    match result {
        Ok(_) => ThreadStats::incr(&w.stats.class(class).cmd_set),
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
