//! Warm restart (memcached's `-e`): segment memory in a memory file, and the metadata
//! that lets the next process find every item in it.
//!
//! Items already live in segments, so a restart only has to keep the segments and say
//! where the live items are. [`Store::open_memory_file`] maps the file shared (meant for
//! tmpfs or hugetlbfs, as memcached's is) and, when it finds metadata that a graceful stop
//! wrote with [`Store::save_restart`], relinks every saved item into a fresh index.
//!
//! Soundness rests on three rules:
//! - The metadata is read once and deleted before the store is used, so a process that
//!   crashes (or is killed) after starting leaves no metadata: the next start is clean,
//!   never a mix of old metadata and newer memory. This is memcached's behaviour.
//! - Metadata is written whole (to a temporary file, synced, then renamed) and carries a
//!   format version and a CRC-32 over its body: a torn, truncated or foreign file is
//!   refused, never half-read.
//! - Every saved reference is checked against the restored segment table (inside a
//!   sealed segment, item within the written bytes) before it is linked, so even metadata
//!   that passes the checksum cannot make the store read outside its memory.
//!
//! Saved are: the settings that must match (memory layout, item size, and whatever the
//! server adds, such as CAS on/off), the clock (so remaining TTLs count the time spent
//! down), the segment table with each segment's generation (so derived CAS uniques come
//! back unchanged) and the list of live item references. The index itself is rebuilt:
//! 4 bytes per item to save, and relinking a million items takes well under a second.

use crate::clock::{is_expired, Clock};
use crate::config::{Geometry, StoreConfig};
use crate::index::{Ref, Shard};
use crate::inner::{Inner, SHARDS};
use crate::memory_file::{MemoryFile, MemoryMap};
use crate::segments::{SavedPool, SavedSegment, SegId, SEALED};
use crate::store::Store;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

/// Version of the metadata format; a file with another version is refused.
pub const RESTART_FORMAT_VERSION: u32 = 3;

const MAGIC: &[u8; 8] = b"SHOALWRM";
/// Magic, version, body length, CRC-32.
const HEADER_LEN: usize = 8 + 4 + 8 + 4;

/// Errors that stop a memory-file store from being opened or saved.
#[derive(Debug, thiserror::Error)]
pub enum RestartError {
    /// The memory or metadata file could not be read, written or mapped.
    #[error("{path}: {source}")]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// What failed.
        source: io::Error,
    },
    /// Another process holds the memory file.
    #[error("{0}: memory file is in use by another process")]
    Locked(PathBuf),
    /// The metadata path holds a file shoald did not write (empty, or without its magic).
    /// shoald publishes metadata whole (temporary file, then rename), so this is not a
    /// torn save: `-e` most likely names a file of another program (or of memcached),
    /// and starting would truncate the memory file beside it. Nothing is touched; the
    /// operator removes the metadata file to start clean. memcached refuses such a file
    /// too (it aborts).
    #[error(
        "{0}: not a shoal restart metadata file; refusing to start on the memory file beside \
         it (remove the metadata file to start with a clean cache)"
    )]
    ForeignMetadata(PathBuf),
    /// The store keeps its memory on the heap, so there is nothing to restart from.
    #[error("the store has no memory file")]
    NoMemoryFile,
    /// The store's configuration is unusable.
    #[error(transparent)]
    Config(#[from] crate::error::ConfigError),
}

/// Why a store opened on a memory file started empty.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CleanStart {
    /// No metadata: a first start, or the last process did not stop gracefully.
    #[error("no metadata save file, starting with a clean cache")]
    NoMetadata,
    /// The metadata was written by another format version.
    #[error(
        "metadata format version {found}, this build reads {expected}: starting with a clean cache"
    )]
    Version {
        /// Version in the file.
        found: u32,
        /// Version this build writes.
        expected: u32,
    },
    /// A setting that shapes memory differs from the saved one (memcached's wording).
    #[error("restart incompatible due to setting for [{setting}] [old value: {old}]")]
    Incompatible {
        /// The setting's name.
        setting: String,
        /// Its saved value.
        old: String,
    },
    /// The metadata is damaged: bad magic, checksum, length or contents.
    #[error("failed to validate metadata ({0}), starting with a clean cache")]
    Corrupt(String),
}

/// What [`Store::open_memory_file`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restored {
    /// The cache came back.
    Warm {
        /// Items relinked.
        items: u64,
        /// Saved items that expired while the server was down (dropped).
        expired: u64,
    },
    /// The store is empty, for this reason.
    Clean(CleanStart),
}

/// What [`Store::save_restart`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Saved {
    /// Item references saved.
    pub items: u64,
    /// Bytes of metadata written.
    pub metadata_bytes: u64,
}

/// The metadata path memcached uses beside a memory file: `<file>.meta`.
pub fn metadata_path(memory_file: &Path) -> PathBuf {
    let mut p = memory_file.as_os_str().to_owned();
    p.push(".meta");
    PathBuf::from(p)
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> RestartError + '_ {
    move |source| RestartError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl Store {
    /// Opens a store whose segment memory lives in the file at `path` (created if
    /// missing), restoring the items a graceful stop saved there if its metadata is
    /// present, intact and compatible: with `cfg` and with `settings`, the caller's own
    /// settings that must match (name, value). The metadata is deleted before this
    /// returns, whatever it held, so a crash later cannot reuse it.
    pub fn open_memory_file(
        cfg: StoreConfig,
        path: &Path,
        settings: &[(&str, String)],
    ) -> Result<(Store, Restored), RestartError> {
        let g = Geometry::of(&cfg)?;
        let len = g.capacity * g.seg;
        let mut all_settings = vec![
            ("memory_limit".to_string(), cfg.memory_limit.to_string()),
            ("max_item_size".to_string(), cfg.max_item_size.to_string()),
            ("segment_size".to_string(), g.seg.to_string()),
            ("segments".to_string(), g.capacity.to_string()),
        ];
        all_settings.extend(settings.iter().map(|(k, v)| (k.to_string(), v.clone())));

        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(io_err(path))?;
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(RestartError::Locked(path.to_path_buf()));
        }
        let meta_path = metadata_path(path);
        let found = match std::fs::read(&meta_path) {
            Ok(bytes) if !bytes.starts_with(MAGIC) => {
                return Err(RestartError::ForeignMetadata(meta_path));
            }
            Ok(bytes) => {
                std::fs::remove_file(&meta_path).map_err(io_err(&meta_path))?;
                decode(&bytes).and_then(|m| m.check(&all_settings).map(|()| m))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(CleanStart::NoMetadata),
            Err(e) => return Err(io_err(&meta_path)(e)),
        };
        let size = file.metadata().map_err(io_err(path))?.len();
        if found.is_err() || size != len as u64 {
            // Stale contents are dropped (on tmpfs this gives their memory back).
            file.set_len(0).map_err(io_err(path))?;
        }
        file.set_len(len as u64).map_err(io_err(path))?;

        let build = |clock: Clock| -> Result<Store, RestartError> {
            let map = MemoryMap::map(&file, len).map_err(io_err(path))?;
            let mut inner = Inner::new(&cfg, &g, clock);
            inner.segs.use_mapping(map);
            Ok(Store::from_inner(inner))
        };
        let outcome = match found {
            Ok(meta) => {
                let store = build(Clock::resume(meta.epoch_unix, meta.now))?;
                match store.relink(&meta) {
                    Ok((items, expired)) => Ok((store, Restored::Warm { items, expired })),
                    Err(why) => Err(why),
                }
            }
            Err(why) => Err(why),
        };
        let (store, restored) = match outcome {
            Ok(warm) => warm,
            Err(why) => {
                // Nothing of the old contents is trusted: start from a zeroed file.
                file.set_len(0).map_err(io_err(path))?;
                file.set_len(len as u64).map_err(io_err(path))?;
                (build(Clock::new())?, Restored::Clean(why))
            }
        };
        store.attach_memory_file(MemoryFile {
            path: path.to_path_buf(),
            _file: file,
            settings: all_settings,
        });
        Ok((store, restored))
    }

    /// Writes the restart metadata beside the memory file, for the next
    /// [`open_memory_file`](Self::open_memory_file). Call once every writer has stopped
    /// (dropped, or at least no longer writing) and nothing else changes the store: the
    /// metadata describes the store as it is now.
    pub fn save_restart(&self) -> Result<Saved, RestartError> {
        let inner = &*self.inner;
        let mf = inner.memory_file.get().ok_or(RestartError::NoMemoryFile)?;
        let mut refs = Vec::new();
        let mut shard_buckets = Vec::with_capacity(SHARDS);
        for s in inner.shards.iter() {
            let shard = s.0.lock();
            shard_buckets.push(u32::try_from(shard.buckets()).unwrap_or(u32::MAX));
            refs.reserve(shard.len());
            shard.for_each(inner, |r| refs.push(r));
        }
        // In memory order (a reference packs segment then offset): the next start then
        // reads item memory sequentially rather than at random.
        refs.sort_unstable();
        let meta = Metadata {
            settings: mf.settings.clone(),
            epoch_unix: inner.clock.epoch_unix(),
            now: inner.clock.now(),
            pending_flush: inner.pending_flush(),
            shard_buckets,
            pool: inner.segs.save(),
            refs,
        };
        if let Some(map) = inner.segs.mapping() {
            map.sync().map_err(io_err(&mf.path))?;
        }
        let bytes = encode(&meta);
        let meta_path = metadata_path(&mf.path);
        let mut tmp = meta_path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let write = || -> io::Result<()> {
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &meta_path)?;
            if let Some(dir) = meta_path.parent().filter(|d| !d.as_os_str().is_empty()) {
                File::open(dir)?.sync_all()?;
            }
            Ok(())
        };
        if let Err(e) = write() {
            // Nothing half-written stays behind: the next start finds no metadata and
            // starts clean (the rename is what publishes a complete file).
            let _ = std::fs::remove_file(&tmp);
            return Err(io_err(&meta_path)(e));
        }
        Ok(Saved {
            items: meta.refs.len() as u64,
            metadata_bytes: bytes.len() as u64,
        })
    }

    /// Relinks the saved items of `meta` into this (empty, just mapped) store. Returns
    /// (items linked, items dropped as expired), or why the metadata does not fit.
    fn relink(&self, meta: &Metadata) -> Result<(u64, u64), CleanStart> {
        let inner = &*self.inner;
        if !inner.segs.restore(&meta.pool) {
            return Err(CleanStart::Corrupt("segment table does not fit".into()));
        }
        inner.set_pending_flush(meta.pending_flush);
        let now = inner.clock.now();
        let seg_size = inner.segs.seg_size();
        // Sized up front: no shard grows (and rehashes) while a million items go in. Never
        // below the size the store was opened with (`-o hashpower`), as without a restart,
        // nor below the size it had grown to before the stop.
        let per_shard = meta.refs.len().div_ceil(SHARDS);
        for (i, s) in inner.shards.iter().enumerate() {
            let mut shard = s.0.lock();
            // Capped at a bucket per 16 bytes of item memory: a saved size is trusted only
            // as far as this store's memory could ever fill it.
            let most = inner.segs.capacity().saturating_mul(seg_size) / 16 / SHARDS;
            let saved = meta
                .shard_buckets
                .get(i)
                .map_or(0, |&b| b as usize)
                .min(most);
            let want = (per_shard + per_shard / 8).max(shard.buckets()).max(saved);
            *shard = Shard::with_capacity(want);
        }
        // Relinked by several threads over contiguous runs of references: the work is
        // reading item memory (page faults on a fresh mapping, cache misses), which
        // scales with cores; shard locks keep the index consistent.
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 8);
        let chunk = meta.refs.len().div_ceil(threads).max(1);
        let results: Vec<Result<(u64, u64), CleanStart>> = std::thread::scope(|scope| {
            let handles: Vec<_> = meta
                .refs
                .chunks(chunk)
                .map(|part| scope.spawn(move || self.relink_part(part, now, seg_size)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(CleanStart::Corrupt("relink panicked".into())))
                })
                .collect()
        });
        let (mut linked, mut expired) = (0u64, 0u64);
        for r in results {
            let (l, e) = r?;
            linked += l;
            expired += e;
        }
        Ok((linked, expired))
    }

    /// Relinks one run of saved references; see [`relink`](Self::relink).
    fn relink_part(
        &self,
        refs: &[Ref],
        now: u32,
        seg_size: usize,
    ) -> Result<(u64, u64), CleanStart> {
        let inner = &*self.inner;
        let segments = inner.segs.capacity();
        let (mut linked, mut expired) = (0u64, 0u64);
        for &r in refs {
            let seg = inner.refs.seg(r);
            let off = inner.refs.off(r) as usize;
            let valid_seg = (seg as usize) < segments
                && inner.segs.meta(seg).state.load(Ordering::Acquire) == SEALED;
            let used = if valid_seg {
                (inner.segs.meta(seg).used.load(Ordering::Relaxed) as usize).min(seg_size)
            } else {
                0
            };
            if !off.is_multiple_of(inner.refs.align()) || off + 12 > used {
                return Err(CleanStart::Corrupt(format!("item reference {r:#x}")));
            }
            let raw = inner.item_at(r);
            let size = inner.footprint(&raw);
            if raw.key_len() == 0 || off + size > used {
                return Err(CleanStart::Corrupt(format!("item at {r:#x}")));
            }
            if is_expired(raw.exptime(), now) {
                expired += 1;
                continue;
            }
            let hash = inner.hash(raw.key());
            let mut shard = inner.shard(hash);
            shard.insert(inner, hash, r);
            inner.link_accounting(&mut shard, r, size);
            linked += 1;
        }
        Ok((linked, expired))
    }

    fn attach_memory_file(&self, mf: MemoryFile) {
        // A store is attached to at most one file, right after it is built.
        let _ = self.inner.memory_file.set(mf);
    }

    /// The memory file this store's segments live in, if any.
    pub fn memory_file(&self) -> Option<&Path> {
        self.inner.memory_file.get().map(|m| m.path.as_path())
    }
}

/// Everything the metadata file holds.
#[derive(Debug, PartialEq, Eq)]
struct Metadata {
    settings: Vec<(String, String)>,
    epoch_unix: i64,
    now: u32,
    pending_flush: u32,
    /// Buckets of each index shard: the index comes back at the size it had grown to,
    /// as memcached's hash table does (its `hashpower` is saved), even when most of the
    /// items that grew it are gone.
    shard_buckets: Vec<u32>,
    pool: SavedPool,
    refs: Vec<Ref>,
}

impl Metadata {
    /// The first setting that differs from the saved one, if any. A setting missing on
    /// either side differs too.
    fn check(&self, now: &[(String, String)]) -> Result<(), CleanStart> {
        for (k, v) in now {
            match self.settings.iter().find(|(sk, _)| sk == k) {
                Some((_, old)) if old == v => {}
                Some((_, old)) => {
                    return Err(CleanStart::Incompatible {
                        setting: k.clone(),
                        old: old.clone(),
                    })
                }
                None => {
                    return Err(CleanStart::Incompatible {
                        setting: k.clone(),
                        old: "(not set)".into(),
                    })
                }
            }
        }
        if let Some((k, old)) = self
            .settings
            .iter()
            .find(|(k, _)| !now.iter().any(|(nk, _)| nk == k))
        {
            return Err(CleanStart::Incompatible {
                setting: k.clone(),
                old: old.clone(),
            });
        }
        Ok(())
    }
}

fn encode(m: &Metadata) -> Vec<u8> {
    let mut body = Vec::with_capacity(64 + m.pool.segments.len() * 10 + m.refs.len() * 4);
    put_u32(&mut body, m.settings.len() as u32);
    for (k, v) in &m.settings {
        for s in [k, v] {
            put_u32(&mut body, s.len() as u32);
            body.extend_from_slice(s.as_bytes());
        }
    }
    body.extend_from_slice(&m.epoch_unix.to_le_bytes());
    put_u32(&mut body, m.now);
    put_u32(&mut body, m.pending_flush);
    put_u32(&mut body, m.shard_buckets.len() as u32);
    for &b in &m.shard_buckets {
        put_u32(&mut body, b);
    }
    put_u32(&mut body, m.pool.next_gen);
    put_u32(&mut body, m.pool.segments.len() as u32);
    for s in &m.pool.segments {
        body.push(s.state as u8);
        body.push(u8::from(s.has_memory));
        body.push(s.queue as u8);
        put_u32(&mut body, s.gen);
        put_u32(&mut body, s.used);
    }
    put_u32(&mut body, m.pool.queues.len() as u32);
    for list in m.pool.queues.iter().chain(std::iter::once(&m.pool.free)) {
        put_u32(&mut body, list.len() as u32);
        for &id in list {
            body.extend_from_slice(&id.to_le_bytes());
        }
    }
    body.extend_from_slice(&(m.refs.len() as u64).to_le_bytes());
    for &r in &m.refs {
        put_u32(&mut body, r);
    }
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(MAGIC);
    put_u32(&mut out, RESTART_FORMAT_VERSION);
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    put_u32(&mut out, crc32fast::hash(&body));
    out.extend_from_slice(&body);
    out
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Reads a metadata file, refusing anything not written whole by this format version.
fn decode(bytes: &[u8]) -> Result<Metadata, CleanStart> {
    let corrupt = |what: &str| CleanStart::Corrupt(what.to_string());
    if bytes.len() < HEADER_LEN || &bytes[..8] != MAGIC {
        return Err(corrupt("not a shoal restart file"));
    }
    let mut head = Cursor { bytes, pos: 8 };
    let version = head.u32()?;
    if version != RESTART_FORMAT_VERSION {
        return Err(CleanStart::Version {
            found: version,
            expected: RESTART_FORMAT_VERSION,
        });
    }
    let body_len = head.u64()?;
    let crc = head.u32()?;
    let body = &bytes[HEADER_LEN..];
    if body.len() as u64 != body_len {
        return Err(corrupt("truncated"));
    }
    if crc32fast::hash(body) != crc {
        return Err(corrupt("checksum mismatch"));
    }
    let mut c = Cursor {
        bytes: body,
        pos: 0,
    };
    let n = c.u32()? as usize;
    let mut settings = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        let k = c.string()?;
        let v = c.string()?;
        settings.push((k, v));
    }
    let epoch_unix = i64::from_le_bytes(c.array()?);
    let now = c.u32()?;
    let pending_flush = c.u32()?;
    let nshards = c.u32()? as usize;
    if nshards > SHARDS {
        return Err(corrupt("shard count"));
    }
    let mut shard_buckets = Vec::with_capacity(nshards);
    for _ in 0..nshards {
        shard_buckets.push(c.u32()?);
    }
    let next_gen = c.u32()?;
    let nseg = c.u32()? as usize;
    let mut segments = Vec::with_capacity(nseg.min(crate::segments::MAX_SEGMENTS));
    for _ in 0..nseg {
        let [state, has_memory, queue] = c.array()?;
        segments.push(SavedSegment {
            state: u32::from(state),
            has_memory: has_memory != 0,
            queue: u32::from(queue),
            gen: c.u32()?,
            used: c.u32()?,
        });
    }
    let nqueues = c.u32()? as usize;
    if nqueues > 256 {
        return Err(corrupt("queue count"));
    }
    let mut lists = Vec::with_capacity(nqueues + 1);
    for _ in 0..=nqueues {
        let n = c.u32()? as usize;
        let mut list = Vec::with_capacity(n.min(crate::segments::MAX_SEGMENTS));
        for _ in 0..n {
            list.push(SegId::from_le_bytes(c.array()?));
        }
        lists.push(list);
    }
    let free = lists.pop().unwrap_or_default();
    let queues = lists;
    let nrefs = c.u64()?;
    if nrefs.saturating_mul(4) != (body.len() - c.pos) as u64 {
        return Err(corrupt("item list length"));
    }
    let refs = c.bytes[c.pos..]
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    Ok(Metadata {
        settings,
        epoch_unix,
        now,
        pending_flush,
        shard_buckets,
        pool: SavedPool {
            segments,
            queues,
            free,
            next_gen,
        },
        refs,
    })
}

/// Bounds-checked reads over the metadata bytes.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], CleanStart> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| CleanStart::Corrupt("truncated".into()))?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], CleanStart> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn u32(&mut self) -> Result<u32, CleanStart> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, CleanStart> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn string(&mut self) -> Result<String, CleanStart> {
        let n = self.u32()? as usize;
        let s = self.take(n)?;
        String::from_utf8(s.to_vec()).map_err(|_| CleanStart::Corrupt("setting text".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StoreOptions;

    fn cfg() -> StoreConfig {
        StoreConfig {
            memory_limit: 16 << 20,
            writers: 2,
            ..StoreConfig::default()
        }
    }

    fn fill(store: &Store, n: u32) -> Vec<(Vec<u8>, Vec<u8>, u32, u64)> {
        let mut w = store.writer();
        let mut out = Vec::new();
        for i in 0..n {
            let key = format!("key:{i}").into_bytes();
            let value = format!("value {i} {}", "x".repeat((i % 300) as usize)).into_bytes();
            let opts = StoreOptions {
                flags: i,
                ..StoreOptions::default()
            };
            let cas = store
                .update(&mut w, &key, |e| e.store(&[&value], opts))
                .expect("store");
            out.push((key, value, i, cas));
        }
        out
    }

    #[test]
    fn items_come_back_with_value_flags_and_cas() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("mem");
        let settings = [("use_cas", "true".to_string())];
        let (store, restored) = Store::open_memory_file(cfg(), &path, &settings).expect("open");
        assert_eq!(restored, Restored::Clean(CleanStart::NoMetadata));
        let items = fill(&store, 20_000);
        // Overwritten and deleted keys must not come back as older versions.
        let mut w = store.writer();
        store
            .update(&mut w, b"key:7", |e| {
                e.remove();
                Ok(())
            })
            .expect("delete");
        drop(w);
        let saved = store.save_restart().expect("save");
        assert_eq!(saved.items, 19_999);
        drop(store);

        let (store, restored) = Store::open_memory_file(cfg(), &path, &settings).expect("reopen");
        assert_eq!(
            restored,
            Restored::Warm {
                items: 19_999,
                expired: 0
            }
        );
        assert!(!metadata_path(&path).exists(), "metadata is consumed");
        for (key, value, flags, cas) in &items {
            let got = store.get(key, |i| (i.value().to_vec(), i.flags(), i.cas()));
            if key == b"key:7" {
                assert_eq!(got, None);
            } else {
                assert_eq!(got, Some((value.clone(), *flags, *cas)));
            }
        }
        // New writes get uniques no restored item has.
        let mut w = store.writer();
        let cas = store
            .update(&mut w, b"new", |e| {
                e.store(&[b"v"], StoreOptions::default())
            })
            .expect("store");
        assert!(items.iter().all(|it| it.3 != cas));
        assert_eq!(store.stats().curr_items, 20_000);
    }

    #[test]
    fn without_a_graceful_save_the_next_start_is_clean() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("mem");
        let (store, _) = Store::open_memory_file(cfg(), &path, &[]).expect("open");
        fill(&store, 100);
        store.save_restart().expect("save");
        drop(store);
        let (store, r) = Store::open_memory_file(cfg(), &path, &[]).expect("reopen");
        assert!(matches!(r, Restored::Warm { items: 100, .. }));
        drop(store); // a crash: no save
        let (store, r) = Store::open_memory_file(cfg(), &path, &[]).expect("reopen");
        assert_eq!(r, Restored::Clean(CleanStart::NoMetadata));
        assert_eq!(store.stats().curr_items, 0);
        assert_eq!(store.get(b"key:1", |_| ()), None);
    }

    #[test]
    fn incompatible_corrupt_and_future_metadata_start_clean() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("mem");
        let save = |settings: &[(&str, String)]| {
            let (store, _) = Store::open_memory_file(cfg(), &path, settings).expect("open");
            fill(&store, 50);
            store.save_restart().expect("save");
        };
        let cas_on = [("use_cas", "true".to_string())];
        let cas_off = [("use_cas", "false".to_string())];

        save(&cas_on);
        let (_, r) = Store::open_memory_file(cfg(), &path, &cas_off).expect("open");
        assert_eq!(
            r.clone(),
            Restored::Clean(CleanStart::Incompatible {
                setting: "use_cas".into(),
                old: "true".into()
            })
        );
        assert_eq!(
            match r {
                Restored::Clean(why) => why.to_string(),
                _ => String::new(),
            },
            "restart incompatible due to setting for [use_cas] [old value: true]"
        );

        save(&cas_on);
        let bigger = StoreConfig {
            memory_limit: 32 << 20,
            ..cfg()
        };
        let (_, r) = Store::open_memory_file(bigger, &path, &cas_on).expect("open");
        assert!(
            matches!(r, Restored::Clean(CleanStart::Incompatible { ref setting, .. }) if setting == "memory_limit")
        );

        let meta = metadata_path(&path);
        for damage in [9usize, 30, 200] {
            save(&cas_on);
            let mut bytes = std::fs::read(&meta).expect("meta");
            if damage == 200 {
                bytes.truncate(bytes.len() - 3);
            } else {
                bytes[damage] ^= 0x40;
            }
            std::fs::write(&meta, &bytes).expect("write");
            let (store, r) = Store::open_memory_file(cfg(), &path, &cas_on).expect("open");
            match (damage, r) {
                (
                    9,
                    Restored::Clean(CleanStart::Version {
                        expected: RESTART_FORMAT_VERSION,
                        ..
                    }),
                ) => {}
                (30 | 200, Restored::Clean(CleanStart::Corrupt(_))) => {}
                (_, other) => panic!("damage at {damage}: {other:?}"),
            }
            assert_eq!(store.stats().curr_items, 0);
        }
    }

    #[test]
    fn a_metadata_file_shoal_did_not_write_stops_the_start_and_touches_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("mem");
        let meta = metadata_path(&path);
        let (store, _) = Store::open_memory_file(cfg(), &path, &[]).expect("open");
        fill(&store, 50);
        store.save_restart().expect("save");
        drop(store);
        let memory = std::fs::read(&path).expect("memory file");
        let saved = std::fs::read(&meta).expect("meta");
        let mut foreign = saved.clone();
        foreign[0] ^= 0x40;
        // Empty (memcached's own test), memcached-style text, and a flipped magic byte.
        for contents in [Vec::new(), b"Tmemcached\n".to_vec(), foreign] {
            std::fs::write(&meta, &contents).expect("write");
            match Store::open_memory_file(cfg(), &path, &[]) {
                Err(RestartError::ForeignMetadata(p)) => assert_eq!(p, meta),
                Err(e) => panic!("{e}"),
                Ok((_, r)) => panic!("started: {r:?}"),
            }
            assert_eq!(
                std::fs::read(&meta).expect("meta"),
                contents,
                "left in place"
            );
            assert!(
                std::fs::read(&path).expect("memory") == memory,
                "memory untouched"
            );
        }
        // Once the operator puts the real file back (or removes it), the start goes on.
        std::fs::write(&meta, &saved).expect("write");
        let (store, r) = Store::open_memory_file(cfg(), &path, &[]).expect("open");
        assert!(matches!(r, Restored::Warm { items: 50, .. }), "{r:?}");
        assert_eq!(store.stats().curr_items, 50);
    }

    #[test]
    fn the_index_comes_back_at_the_size_it_had_grown_to() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("mem");
        let small = StoreConfig {
            index_capacity: 1 << 10,
            ..cfg()
        };
        let (store, _) = Store::open_memory_file(small, &path, &[]).expect("open");
        let started = store.stats().index_buckets;
        let items = fill(&store, 60_000);
        let mut w = store.writer();
        for (key, ..) in &items[10..] {
            store
                .update(&mut w, key, |e| {
                    e.remove();
                    Ok(())
                })
                .expect("delete");
        }
        drop(w);
        let grown = store.stats().index_buckets;
        assert!(grown >= 4 * started, "{started} -> {grown}");
        store.save_restart().expect("save");
        drop(store);
        let (store, r) = Store::open_memory_file(small, &path, &[]).expect("reopen");
        assert!(matches!(r, Restored::Warm { items: 10, .. }), "{r:?}");
        assert_eq!(store.stats().index_buckets, grown);
    }

    #[test]
    fn expiry_counts_time_spent_down_and_second_process_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("mem");
        let (store, _) = Store::open_memory_file(cfg(), &path, &[]).expect("open");
        assert!(matches!(
            Store::open_memory_file(cfg(), &path, &[]),
            Err(RestartError::Locked(_))
        ));
        let mut w = store.writer();
        let short = StoreOptions {
            exptime: store.clock().expiry(1),
            ..StoreOptions::default()
        };
        let long = StoreOptions {
            exptime: store.clock().expiry(1000),
            ..StoreOptions::default()
        };
        store
            .update(&mut w, b"short", |e| e.store(&[b"a"], short))
            .expect("store");
        store
            .update(&mut w, b"long", |e| e.store(&[b"b"], long))
            .expect("store");
        drop(w);
        store.save_restart().expect("save");
        drop(store);
        // Deliberately lets `short`'s expiry pass while the store is closed.
        std::thread::sleep(std::time::Duration::from_millis(2100));
        let (store, r) = Store::open_memory_file(cfg(), &path, &[]).expect("open");
        assert_eq!(
            r,
            Restored::Warm {
                items: 1,
                expired: 1
            }
        );
        assert_eq!(store.get(b"short", |_| ()), None);
        let left = store.get(b"long", |i| i.exptime()).expect("long");
        let remaining = left - store.clock().now();
        assert!((995..=999).contains(&remaining), "{remaining}");
    }
}
