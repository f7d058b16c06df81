//! The flash tier (memcached's extstore): values of items eviction would drop, kept in a
//! file (or several pooled, see `files`), with a small stub in memory saying where.
//!
//! - **Writes never wait on the disk.** Eviction copies a value into the open write
//!   buffer (a memory copy) and leaves a stub item (header, key, a 16-byte
//!   [`Locator`]) in memory; full buffers go to one IO thread, which writes them in
//!   order. When the buffers in flight are all taken the value is not flushed: the item
//!   is evicted as it would be without flash.
//! - **Every read is checked.** A record carries its key and a CRC-32 (see `record`);
//!   a stub whose page was reused since (its version changed), a bad CRC, a record of
//!   another key or an IO error is a miss, counted, never wrong data.
//! - **Forgetting costs no IO.** Deleting, overwriting or expiring a flash-resident item
//!   lowers its page's counts ([`Flash::release`]); a sealed page with nothing live is
//!   free again at once. When no page is free, the oldest page is reused (its stubs read
//!   as misses from then on); compaction first moves what is still read out of pages
//!   that are mostly holes (see `compact`).
//! - **One writer thread, writes in order,** so a reused page's new records can never be
//!   overwritten by an older buffer still queued for it.

mod compact;
mod event;
mod files;
mod locator;
mod pages;
pub mod record;
mod saved;
mod stats;

pub use event::{FlashEvent, FlashObserver};
pub use locator::{Locator, LOCATOR_LEN};
pub use record::{record_len, RecordError};
pub use saved::{check_meta, meta_path, FlashCleanStart};
pub use stats::FlashStats;

use pages::{Page, OPEN, SEALED};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;

/// memcached's page buckets (its `PAGE_BUCKET_*` ids, as `stats extstore` prints them):
/// which writes a page takes. shoald writes five kinds: evicted values (`DEFAULT`),
/// values with less than `ext_low_ttl` to live (`LOW_TTL`), and values compaction
/// rescues (`COMPACT`; cold ones to `COLD_COMPACT` and an old page's others to `OLD`
/// when files are given to those). memcached's `chunked` bucket has no writes in shoald:
/// a large value's record is one record.
pub mod bucket {
    /// Evicted values; every bucket without files of its own takes these pages.
    pub const DEFAULT: u8 = 0;
    /// Values compaction moved out of fragmented pages.
    pub const COMPACT: u8 = 1;
    /// Values with less than `ext_low_ttl` seconds to live.
    pub const LOW_TTL: u8 = 3;
    /// Values compaction moved that nobody had read (memcached's `coldcompact`: items in
    /// its COLD LRU), kept apart so that pages of values still read stay dense.
    pub const COLD_COMPACT: u8 = 4;
    /// The other values of the oldest page, moved when nothing is fragmented enough to
    /// compact and free pages run out (memcached's `old`).
    pub const OLD: u8 = 5;
}

/// Where compaction sends a value it moves ([`Flash::rescue`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rescue {
    /// Out of a fragmented page: the compact bucket's pages if a file is given to it,
    /// else where an evicted value goes.
    Compact,
    /// A value nobody read: the `coldcompact` file's pages (only asked for when one is
    /// given).
    Cold,
    /// From the oldest page: the `old` file's pages (likewise).
    Old,
}

/// What compaction does on a maintenance tick ([`Flash::compaction_candidate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Compaction {
    /// The page whose live values move.
    pub(crate) page: u32,
    /// Its version when chosen: a reuse meanwhile stops the pass.
    pub(crate) version: u32,
    /// Unread values are dropped instead of moved (`ext_drop_unread`, no `coldcompact`
    /// file to take them).
    pub(crate) drop_unread: bool,
    /// Values go to the `old` file's pages (the oldest page, nothing fragmented).
    pub(crate) to_old: bool,
}

/// One file of the flash tier: memcached's `ext_path=PATH:SIZE[:BUCKET]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlashFile {
    /// The file values are written to (created if missing).
    pub path: PathBuf,
    /// Its size in bytes; it holds `size / page_size` whole pages.
    pub size: u64,
    /// The page bucket its pages take writes for ([`bucket`]); [`bucket::DEFAULT`] unless
    /// the file is given to one.
    pub bucket: u8,
}

/// How the flash tier is sized and behaves; memcached's `ext_*` settings.
#[derive(Debug, Clone, PartialEq)]
pub struct FlashConfig {
    /// The files values are written to, in order: one, or several whose pages are
    /// pooled (memcached's JBOD, an `ext_path` per device).
    pub files: Vec<FlashFile>,
    /// Bytes per page, the unit of reuse (`ext_page_size`, 64 MiB).
    pub page_size: u64,
    /// Bytes per write buffer, each handed to the disk whole once full.
    pub wbuf_size: usize,
    /// Write buffers that may wait for the disk at once; beyond them eviction drops
    /// values instead of waiting. So at most `(io_depth + streams in use) * wbuf_size`
    /// bytes of buffers are held, and `io_depth` of them are kept for reuse.
    pub io_depth: usize,
    /// Smallest value sent to flash (`ext_item_size`, 512 bytes): below it a stub would
    /// save too little memory to be worth a disk read.
    pub item_size: usize,
    /// Seconds an item stays unread in memory before it is moved to flash even without
    /// memory pressure (`ext_item_age`; `u32::MAX`, the default: only under pressure).
    pub item_age: u32,
    /// Compaction starts when fewer pages than this are free (`ext_compact_under`).
    pub compact_under: u32,
    /// Below this many free pages, with `drop_unread` on and no page fragmented under
    /// `max_frag`, compaction takes the oldest page and drops its values never read
    /// (`ext_drop_under`).
    pub drop_under: u32,
    /// A page is compacted only when its live bytes are under this share of it
    /// (`ext_max_frag`).
    pub max_frag: f64,
    /// Lets compaction drop values never read, under `drop_under` (`ext_drop_unread`).
    pub drop_unread: bool,
    /// Values of items with less than this many seconds to live go to pages of their
    /// own (`ext_low_ttl`; 0, the default: no such pages).
    pub low_ttl: u32,
    /// One in this many reads from flash brings the item back to memory
    /// (`ext_recache_rate`; 0 never).
    pub recache_rate: u32,
}

impl FlashConfig {
    /// memcached's defaults for a file at `path` of `size` bytes.
    pub fn new(path: PathBuf, size: u64) -> FlashConfig {
        FlashConfig {
            files: vec![FlashFile {
                path,
                size,
                bucket: bucket::DEFAULT,
            }],
            page_size: 64 << 20,
            wbuf_size: 4 << 20,
            io_depth: 4,
            item_size: 512,
            item_age: u32::MAX,
            compact_under: 0,
            drop_under: 0,
            max_frag: 0.8,
            drop_unread: false,
            low_ttl: 0,
            recache_rate: 2000,
        }
    }

    /// Pages the files hold in all.
    pub fn pages(&self) -> u64 {
        self.files
            .iter()
            .map(|f| f.size / self.page_size.max(1))
            .sum()
    }

    /// Bytes of the files in all.
    pub fn size(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }

    /// The first file's path: where the page table is saved at a graceful stop.
    pub fn path(&self) -> &Path {
        self.files.first().map_or(Path::new(""), |f| &f.path)
    }
}

/// The flash tier's run-time settings (memcached's `ext_*` names), as
/// [`Flash::settings`] reads them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlashSettings {
    /// `ext_item_size`.
    pub item_size: u64,
    /// `ext_item_age`.
    pub item_age: u32,
    /// `ext_low_ttl`.
    pub low_ttl: u32,
    /// `ext_recache_rate`.
    pub recache_rate: u32,
    /// `ext_compact_under` (the default worked out from the file's pages).
    pub compact_under: u32,
    /// `ext_drop_under` (likewise).
    pub drop_under: u32,
    /// `ext_max_frag`.
    pub max_frag: f64,
    /// `ext_drop_unread`.
    pub drop_unread: bool,
}

/// Why a flash tier could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum FlashError {
    /// The file could not be created, sized or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// Sizes that cannot work (a file smaller than one page, a page over 4 GiB).
    #[error("{0}")]
    Config(String),
}

/// Why a value could not be read back from flash: each is a miss for the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FlashMiss {
    /// The page was reused since the value was written.
    #[error("page reused")]
    Gone,
    /// The record failed its checks.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// The read failed.
    #[error("read error")]
    Io,
    /// The value is not in the page cache, and the read was asked not to wait for the
    /// disk ([`Disk::CacheOnly`]). Nothing is counted.
    #[error("not in the page cache")]
    WouldBlock,
}

/// Whether a read of a flash value may wait for the disk ([`Flash::read`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disk {
    /// Read from the file, waiting for the disk if need be.
    Wait,
    /// Only from a write buffer or the page cache (`preadv2` with `RWF_NOWAIT`): a copy,
    /// not a trip to another thread; anything else is [`FlashMiss::WouldBlock`].
    CacheOnly,
}

/// Tunables changed at run time by memcached's `extstore` command.
#[derive(Debug)]
pub(crate) struct Tunables {
    pub(crate) item_size: AtomicU64,
    pub(crate) item_age: AtomicU32,
    pub(crate) compact_under: AtomicU32,
    pub(crate) drop_under: AtomicU32,
    /// `max_frag` in thousandths.
    pub(crate) max_frag_milli: AtomicU32,
    pub(crate) drop_unread: AtomicU32,
    pub(crate) low_ttl: AtomicU32,
    pub(crate) recache_rate: AtomicU32,
}

/// A buffer of records handed to the IO thread, readable until it is written.
struct Pending {
    page: u32,
    version: u32,
    start: u32,
    bytes: Vec<u8>,
}

/// Where one stream of records is being appended: its open page and write buffer.
#[derive(Default)]
struct Stream {
    /// The page records go to, if one is open.
    open: Option<u32>,
    /// Bytes of the open page allotted so far (the buffer included).
    fill: u64,
    /// Records not yet handed to the IO thread, and where in the open page they start.
    buf: Vec<u8>,
    buf_start: u64,
}

/// The default stream; the one for values that expire soon (`ext_low_ttl`), kept on
/// pages of their own so that those pages empty, and free themselves, as they expire;
/// the one for values compaction rescues, used when a file is given to the compact
/// bucket (otherwise rescues go where an evicted value would); and those of the
/// `coldcompact` and `old` files, used only when such files are given.
pub(crate) const STREAMS: usize = 5;
/// The stream of values with a TTL under `ext_low_ttl`.
pub(crate) const LOW_TTL: usize = 1;
/// The stream of values compaction rescues into compact-bucket files.
pub(crate) const COMPACT: usize = 2;
/// The stream of unread values compaction moves into `coldcompact` files.
pub(crate) const COLD_COMPACT: usize = 3;
/// The stream of an old page's values moved into `old` files.
pub(crate) const OLD: usize = 4;

/// What the write side holds under its lock.
struct WriteState {
    /// The streams records are appended to.
    streams: [Stream; STREAMS],
    /// Buffers handed to the IO thread and not yet written, oldest first.
    in_flight: VecDeque<Arc<Pending>>,
    /// A written buffer kept for the next one to fill: a fresh buffer is a fresh
    /// mapping, faulted in page by page as it fills, which at a disk's write rate is
    /// tens of thousands of page faults a second. One, not one per buffer in flight:
    /// a burst's other buffers are given back instead of staying resident (3 MiB of
    /// RSS at the defaults, measured in the flash replays).
    spare: Option<Vec<u8>>,
    /// Pages with nothing in them.
    free: Vec<u32>,
    /// Sealed pages, oldest first: the one reused when none is free.
    sealed: VecDeque<u32>,
}

/// The flash tier of one store. See the module docs.
pub struct Flash {
    cfg: FlashConfig,
    files: files::Files,
    pages: Box<[Page]>,
    state: Mutex<WriteState>,
    /// Signalled by the IO thread when a buffer is written.
    written: parking_lot::Condvar,
    io: Mutex<Option<mpsc::Sender<Arc<Pending>>>>,
    io_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    pub(crate) tune: Tunables,
    pub(crate) counters: stats::Counters,
}

impl std::fmt::Debug for Flash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flash").field("cfg", &self.cfg).finish()
    }
}

impl Flash {
    /// Opens (creating or resizing) the files and starts the IO thread. Their old
    /// contents are not read: a fresh tier starts with every page free.
    pub fn open(cfg: FlashConfig) -> Result<Arc<Flash>, FlashError> {
        let files = files::Files::lock(&cfg)?;
        Self::open_with(cfg, None, files)
    }

    /// Opens the files as a graceful stop left them, if `memory_warm` (the memory holding
    /// the stubs survived too) and the page table saved beside the first is intact and
    /// matches (page size, and the same files with the same pages, in the same order);
    /// otherwise as [`open`](Self::open), saying why. The saved table is deleted either
    /// way, so a crash after this start starts the next one clean.
    pub fn open_restoring(
        cfg: FlashConfig,
        memory_warm: bool,
    ) -> Result<(Arc<Flash>, Result<(), FlashCleanStart>), FlashError> {
        // Locked first: a second process must not delete the page table of the one
        // that holds the file.
        let files = files::Files::lock(&cfg)?;
        let meta = saved::meta_path(cfg.path());
        let found = match std::fs::read(&meta) {
            Ok(bytes) => {
                std::fs::remove_file(&meta).map_err(|source| FlashError::Io {
                    path: meta.clone(),
                    source,
                })?;
                saved::decode(&bytes, cfg.page_size, cfg.pages(), &files.layout())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(FlashCleanStart::NoMetadata),
            Err(source) => return Err(FlashError::Io { path: meta, source }),
        };
        let found = if memory_warm {
            found
        } else {
            Err(FlashCleanStart::MemoryClean)
        };
        match found {
            Ok(pages) => Ok((Self::open_with(cfg, Some(&pages), files)?, Ok(()))),
            Err(why) => Ok((Self::open_with(cfg, None, files)?, Err(why))),
        }
    }

    /// For a graceful stop: writes every buffered value, waits for the disk, and saves
    /// the page table beside the file for [`open_restoring`](Self::open_restoring). Call
    /// once nothing writes to the store any more.
    pub fn save(&self) -> Result<(), FlashError> {
        let io = |source| FlashError::Io {
            path: self.cfg.path().to_path_buf(),
            source,
        };
        let mut st = self.state.lock();
        for stream in 0..STREAMS {
            self.submit(&mut st, stream);
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !st.in_flight.is_empty() {
            if std::time::Instant::now() > deadline {
                return Err(io(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "flash writes did not finish",
                )));
            }
            self.written
                .wait_for(&mut st, std::time::Duration::from_millis(50));
        }
        self.files.sync_all()?;
        let pages = self
            .pages
            .iter()
            .map(|p| {
                (
                    p.version.load(Ordering::Relaxed),
                    p.state.load(Ordering::Relaxed),
                    p.written.load(Ordering::Relaxed),
                    p.live_objects.load(Ordering::Relaxed),
                    p.live_bytes.load(Ordering::Relaxed),
                )
            })
            .collect();
        let mut sealed: Vec<u32> = st.sealed.iter().copied().collect();
        sealed.extend(st.streams.iter().filter_map(|s| s.open));
        let bytes = saved::encode(
            &stats::SavedPages { pages, sealed },
            self.cfg.page_size,
            &self.files.layout(),
        );
        drop(st);
        let meta = saved::meta_path(self.cfg.path());
        saved::write_whole(&meta, &bytes).map_err(|source| FlashError::Io { path: meta, source })
    }

    fn open_with(
        cfg: FlashConfig,
        saved: Option<&stats::SavedPages>,
        files: files::Files,
    ) -> Result<Arc<Flash>, FlashError> {
        let pages = cfg.pages();
        files.size_files()?;
        let table: Box<[Page]> = (0..pages).map(|_| Page::default()).collect();
        let mut state = WriteState {
            streams: Default::default(),
            in_flight: VecDeque::new(),
            spare: None,
            free: Vec::new(),
            sealed: VecDeque::new(),
        };
        match saved {
            Some(s) => {
                s.restore(&table, &mut state.free, &mut state.sealed);
                // What a page held is not saved; its file's bucket is the best guess.
                for (n, p) in table.iter().enumerate() {
                    if p.state.load(Ordering::Relaxed) != pages::FREE {
                        let b = files.bucket_of(n as u32);
                        p.bucket.store(u32::from(b), Ordering::Relaxed);
                    }
                }
            }
            None => {
                state.free = (0..pages as u32).rev().collect();
                // Versions no stub of an earlier run carries (a memory file may keep
                // stubs whose page table was not saved): they read as misses.
                let epoch = fresh_epoch();
                for p in table.iter() {
                    p.version.store(epoch, Ordering::Relaxed);
                }
            }
        }
        let tune = Tunables {
            item_size: AtomicU64::new(cfg.item_size as u64),
            item_age: AtomicU32::new(cfg.item_age),
            compact_under: AtomicU32::new(cfg.compact_under),
            drop_under: AtomicU32::new(cfg.drop_under),
            max_frag_milli: AtomicU32::new((cfg.max_frag * 1000.0) as u32),
            drop_unread: AtomicU32::new(u32::from(cfg.drop_unread)),
            low_ttl: AtomicU32::new(cfg.low_ttl),
            recache_rate: AtomicU32::new(cfg.recache_rate),
        };
        let flash = Arc::new(Flash {
            cfg,
            files,
            pages: table,
            state: Mutex::new(state),
            written: parking_lot::Condvar::new(),
            io: Mutex::new(None),
            io_thread: Mutex::new(None),
            tune,
            counters: stats::Counters::default(),
        });
        let (tx, rx) = mpsc::channel::<Arc<Pending>>();
        let weak = Arc::downgrade(&flash);
        let handle = std::thread::Builder::new()
            .name("shoal-flash-io".into())
            .spawn(move || io_thread(weak, rx))
            .map_err(io_err_of(flash.cfg.path()))?;
        *flash.io.lock() = Some(tx);
        *flash.io_thread.lock() = Some(handle);
        Ok(flash)
    }

    /// The configuration it was opened with.
    pub fn config(&self) -> &FlashConfig {
        &self.cfg
    }

    /// The first file's path.
    pub fn path(&self) -> &Path {
        self.cfg.path()
    }

    /// Smallest value moved to flash now (`extstore item_size` may change it).
    pub fn item_size(&self) -> usize {
        self.tune.item_size.load(Ordering::Relaxed) as usize
    }

    /// Changes a whole-number setting by memcached's name for it (`extstore` command):
    /// `item_size`, `item_age`, `recache_rate`, `compact_under`, `drop_under`,
    /// `drop_unread` (non-zero: on), `low_ttl`. `max_sleep` has no effect here. Returns whether the name is known.
    pub fn set_tunable(&self, name: &str, value: u32) -> bool {
        let t = &self.tune;
        match name {
            "item_size" => t.item_size.store(u64::from(value), Ordering::Relaxed),
            "item_age" => t.item_age.store(value, Ordering::Relaxed),
            "recache_rate" => t.recache_rate.store(value, Ordering::Relaxed),
            "compact_under" => t.compact_under.store(value, Ordering::Relaxed),
            "drop_under" => t.drop_under.store(value, Ordering::Relaxed),
            "drop_unread" => t
                .drop_unread
                .store(u32::from(value != 0), Ordering::Relaxed),
            "low_ttl" => t.low_ttl.store(value, Ordering::Relaxed),
            "max_sleep" => {}
            _ => return false,
        }
        true
    }

    /// The settings the `extstore` command may change, as they are now (for `stats
    /// settings`).
    pub fn settings(&self) -> FlashSettings {
        let t = &self.tune;
        FlashSettings {
            item_size: t.item_size.load(Ordering::Relaxed),
            item_age: t.item_age.load(Ordering::Relaxed),
            low_ttl: t.low_ttl.load(Ordering::Relaxed),
            recache_rate: t.recache_rate.load(Ordering::Relaxed),
            compact_under: t.compact_under.load(Ordering::Relaxed),
            drop_under: t.drop_under.load(Ordering::Relaxed),
            max_frag: self.max_frag(),
            drop_unread: t.drop_unread.load(Ordering::Relaxed) != 0,
        }
    }

    /// `max_frag` now.
    pub fn max_frag(&self) -> f64 {
        f64::from(self.tune.max_frag_milli.load(Ordering::Relaxed)) / 1000.0
    }

    /// Pages open or sealed (not free).
    pub fn pages_used(&self) -> usize {
        let st = self.state.lock();
        self.pages.len() - st.free.len()
    }

    /// Changes `max_frag`: pages whose live share is under it may be compacted.
    pub fn set_max_frag(&self, value: f64) {
        let milli = (value.clamp(0.0, 1.0) * 1000.0) as u32;
        self.tune.max_frag_milli.store(milli, Ordering::Relaxed);
    }

    /// Seconds unread before an item moves to flash without memory pressure.
    pub fn item_age(&self) -> u32 {
        self.tune.item_age.load(Ordering::Relaxed)
    }

    /// Whether this read of a flash-resident value should bring it back to memory: one in
    /// `recache_rate` reads (memcached's `ext_recache_rate`), counted as recached.
    pub(crate) fn recache_due(&self) -> bool {
        let rate = u64::from(self.tune.recache_rate.load(Ordering::Relaxed));
        self.counters.gets.load(Ordering::Relaxed).checked_rem(rate) == Some(0)
    }

    fn page(&self, n: u32) -> Option<&Page> {
        self.pages.get(n as usize)
    }

    /// Whether the record at `loc` may still be on its page: false once the page was
    /// reused (its version moved on), when a read of it can only miss. A hint, read
    /// without the state lock: a page reused just after says nothing about the record.
    pub(crate) fn may_hold(&self, loc: Locator) -> bool {
        self.page(loc.page)
            .is_some_and(|p| p.version.load(Ordering::Relaxed) == loc.version)
    }

    /// Appends the record of `key` and `value` to the open write buffer and returns where
    /// it will be, or `None` when it cannot be taken without waiting for the disk (every
    /// buffer in flight) or at all (larger than a page).
    /// `ttl` is the seconds the item has left (`None`: no expiry): under `ext_low_ttl`,
    /// the value goes to the short-lived stream's pages.
    pub fn write(&self, key: &[u8], value: &[u8], ttl: Option<u32>) -> Option<Locator> {
        let low_ttl = self.tune.low_ttl.load(Ordering::Relaxed);
        let stream = match ttl {
            Some(t) if t < low_ttl => LOW_TTL,
            _ => 0,
        };
        self.write_to(stream, key, value)
    }

    /// [`write`](Self::write) for a value compaction moves out of a fragmented page: to
    /// the compact bucket's pages when a file is given to it (memcached's tiered
    /// `:compact`), else as `write` places it.
    /// `to` names a `coldcompact` or `old` stream only when
    /// [`has_bucket`](Self::has_bucket) says a file is given to it; otherwise it is
    /// placed as [`Rescue::Compact`].
    pub fn rescue(
        &self,
        key: &[u8],
        value: &[u8],
        ttl: Option<u32>,
        to: Rescue,
    ) -> Option<Locator> {
        let stream = match to {
            Rescue::Cold if self.files.has_bucket(bucket::COLD_COMPACT) => COLD_COMPACT,
            Rescue::Old if self.files.has_bucket(bucket::OLD) => OLD,
            _ if self.files.has_bucket(bucket::COMPACT) => COMPACT,
            _ => return self.write(key, value, ttl),
        };
        self.write_to(stream, key, value)
    }

    /// Whether a file is given to `bucket` ([`bucket`]'s ids).
    pub fn has_bucket(&self, bucket: u8) -> bool {
        self.files.has_bucket(bucket)
    }

    fn write_to(&self, stream: usize, key: &[u8], value: &[u8]) -> Option<Locator> {
        let len = record::record_len(key.len(), value.len()) as u64;
        if len > self.cfg.page_size || value.len() > u32::MAX as usize {
            return None;
        }
        let mut st = self.state.lock();
        let s = &st.streams[stream];
        let page_full = s.open.is_none() || s.fill + len > self.cfg.page_size;
        let buf_full = !s.buf.is_empty() && s.buf.len() + len as usize > self.cfg.wbuf_size;
        let must_submit = (page_full || buf_full) && !s.buf.is_empty();
        if must_submit && st.in_flight.len() >= self.max_in_flight() {
            self.counters.write_refused.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        if page_full {
            self.seal_open(&mut st, stream);
            if !self.open_page(&mut st, stream) {
                return None;
            }
        } else if buf_full {
            self.submit(&mut st, stream);
        }
        if st.streams[stream].buf.capacity() == 0 {
            if let Some(spare) = st.spare.take() {
                st.streams[stream].buf = spare;
            }
        }
        let s = &mut st.streams[stream];
        let page_no = s.open?;
        let page = self.page(page_no)?;
        let offset = s.fill;
        if s.buf.is_empty() {
            s.buf.reserve(self.cfg.wbuf_size.max(len as usize));
        }
        record::encode(&mut s.buf, key, value);
        s.fill += len;
        page.written.fetch_add(len, Ordering::Relaxed);
        page.live_objects.fetch_add(1, Ordering::Relaxed);
        page.live_bytes.fetch_add(len, Ordering::Relaxed);
        let c = &self.counters;
        c.objects_written.fetch_add(1, Ordering::Relaxed);
        c.bytes_written.fetch_add(len, Ordering::Relaxed);
        Some(Locator {
            page: page_no,
            version: page.version.load(Ordering::Relaxed),
            offset: offset as u32,
            len: value.len() as u32,
        })
    }

    fn max_in_flight(&self) -> usize {
        self.cfg.io_depth.max(1)
    }

    /// Hands a stream's open buffer to the IO thread.
    fn submit(&self, st: &mut WriteState, stream: usize) {
        let s = &mut st.streams[stream];
        let Some(page) = s.open else { return };
        if s.buf.is_empty() {
            return;
        }
        let bytes = std::mem::take(&mut s.buf);
        let pending = Arc::new(Pending {
            page,
            version: self.pages[page as usize].version.load(Ordering::Relaxed),
            start: s.buf_start as u32,
            bytes,
        });
        s.buf_start = s.fill;
        st.in_flight.push_back(pending.clone());
        self.counters.io_queue.fetch_add(1, Ordering::Relaxed);
        let sent = self.io.lock().as_ref().map(|tx| tx.send(pending));
        if !matches!(sent, Some(Ok(()))) {
            // The IO thread is gone (shutting down): the buffer is never written, so
            // the page's records must not be read from the file.
            st.in_flight.pop_back();
            self.counters.io_queue.fetch_sub(1, Ordering::Relaxed);
            self.pages[page as usize]
                .version
                .fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Seals a stream's open page, handing its last buffer to the IO thread.
    fn seal_open(&self, st: &mut WriteState, stream: usize) {
        self.submit(st, stream);
        if let Some(p) = st.streams[stream].open.take() {
            self.pages[p as usize]
                .state
                .store(SEALED, Ordering::Release);
            if self.pages[p as usize].live_objects.load(Ordering::Relaxed) == 0 {
                self.free_page(st, p);
            } else {
                st.sealed.push_back(p);
            }
        }
    }

    /// The bucket whose pages `stream` writes: its own when a file is given to it, else
    /// the default one.
    fn stream_bucket(&self, stream: usize) -> u8 {
        let own = match stream {
            LOW_TTL => bucket::LOW_TTL,
            COMPACT => bucket::COMPACT,
            COLD_COMPACT => bucket::COLD_COMPACT,
            OLD => bucket::OLD,
            _ => bucket::DEFAULT,
        };
        if self.files.has_bucket(own) {
            own
        } else {
            bucket::DEFAULT
        }
    }

    /// Free pages of `bucket` (the default bucket's: the pages evicted values fill).
    fn free_pages_of(&self, st: &WriteState, bucket: u8) -> usize {
        st.free
            .iter()
            .filter(|&&p| self.files.bucket_of(p) == bucket)
            .count()
    }

    /// Opens a free page for a stream, reusing the oldest sealed one when none is free:
    /// as memcached does, a page of the stream's bucket, else a default one.
    fn open_page(&self, st: &mut WriteState, stream: usize) -> bool {
        let c = &self.counters;
        let want = self.stream_bucket(stream);
        let fits = |p: u32| {
            let b = self.files.bucket_of(p);
            b == want || b == bucket::DEFAULT
        };
        // The newest free page of the bucket (the free list is used as a stack), else
        // of the default bucket.
        let free = st
            .free
            .iter()
            .rposition(|&p| self.files.bucket_of(p) == want)
            .or_else(|| st.free.iter().rposition(|&p| fits(p)));
        let next = match free {
            Some(i) => Some(st.free.remove(i)),
            None => {
                let oldest = st.sealed.iter().position(|&p| fits(p));
                oldest
                    .and_then(|i| st.sealed.remove(i))
                    .inspect(|&p| self.evicted(p))
            }
        };
        let Some(p) = next else { return false };
        self.pages[p as usize]
            .bucket
            .store(u32::from(want), Ordering::Relaxed);
        self.pages[p as usize].state.store(OPEN, Ordering::Release);
        c.page_allocs.fetch_add(1, Ordering::Relaxed);
        let s = &mut st.streams[stream];
        s.open = Some(p);
        s.fill = 0;
        s.buf_start = 0;
        true
    }

    /// Empties sealed page `p`, whatever it still holds, counting it evicted. The
    /// caller has taken it off the sealed list.
    fn evicted(&self, p: u32) {
        let c = &self.counters;
        let (objects, bytes) = self.pages[p as usize].reset();
        // An evicted page is freed on the way to reuse: memcached counts it in both
        // (`extstore_evict_page` frees it, and `_free_page` counts reclaims).
        c.page_evictions.fetch_add(1, Ordering::Relaxed);
        c.page_reclaims.fetch_add(1, Ordering::Relaxed);
        c.objects_evicted.fetch_add(objects, Ordering::Relaxed);
        c.bytes_evicted.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Returns an empty sealed page to the free list under a new version.
    fn free_page(&self, st: &mut WriteState, p: u32) {
        self.pages[p as usize].reset();
        st.sealed.retain(|&s| s != p);
        if !st.free.contains(&p) {
            st.free.push(p);
        }
        self.counters.page_reclaims.fetch_add(1, Ordering::Relaxed);
    }

    /// Reads the value at `loc` of `key` into `out` (replacing what it held) and returns
    /// where in `out` the value is. From a write buffer if it is not on disk yet, else
    /// from the file; every way the bytes could be wrong is a [`FlashMiss`]. With
    /// [`Disk::CacheOnly`], a record that would need the disk is
    /// [`FlashMiss::WouldBlock`], counted nowhere.
    pub fn read(
        &self,
        loc: Locator,
        key: &[u8],
        out: &mut Vec<u8>,
        disk: Disk,
    ) -> Result<std::ops::Range<usize>, FlashMiss> {
        let result = self.read_record(loc, key, out, disk);
        if matches!(result, Err(FlashMiss::WouldBlock)) {
            return result;
        }
        self.counters.gets.fetch_add(1, Ordering::Relaxed);
        let c = &self.counters;
        match result {
            Ok(_) => {
                c.objects_read.fetch_add(1, Ordering::Relaxed);
                c.bytes_read.fetch_add(out.len() as u64, Ordering::Relaxed);
            }
            Err(FlashMiss::Record(RecordError::BadCrc)) | Err(FlashMiss::Io) => {
                c.badcrc.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {}
        }
        if result.is_err() {
            c.miss.fetch_add(1, Ordering::Relaxed);
        }
        result
    }

    fn read_record(
        &self,
        loc: Locator,
        key: &[u8],
        out: &mut Vec<u8>,
        disk: Disk,
    ) -> Result<std::ops::Range<usize>, FlashMiss> {
        let page = self.page(loc.page).ok_or(FlashMiss::Gone)?;
        let len = record::record_len(key.len(), loc.len as usize);
        let off = u64::from(loc.offset);
        out.clear();
        {
            let st = self.state.lock();
            if page.version.load(Ordering::Acquire) != loc.version {
                return Err(FlashMiss::Gone);
            }
            let open = st.streams.iter().find(|s| {
                s.open == Some(loc.page)
                    && off >= s.buf_start
                    && off < s.buf_start + s.buf.len() as u64
            });
            let buffered = if let Some(s) = open {
                Some(&s.buf[(off - s.buf_start) as usize..])
            } else {
                st.in_flight
                    .iter()
                    .find(|p| {
                        p.page == loc.page
                            && p.version == loc.version
                            && off >= u64::from(p.start)
                            && off < u64::from(p.start) + p.bytes.len() as u64
                    })
                    .map(|p| &p.bytes[(off - u64::from(p.start)) as usize..])
            };
            if let Some(bytes) = buffered {
                let bytes = bytes.get(..len).ok_or(RecordError::BadCrc)?;
                out.extend_from_slice(bytes);
            }
        }
        if out.is_empty() {
            out.resize(len, 0);
            let (file, base) = self.files.page(loc.page).ok_or(FlashMiss::Gone)?;
            let at = base + off;
            if disk == Disk::Wait {
                file.read_exact_at(out, at).map_err(|_| FlashMiss::Io)?;
            } else {
                read_cached(file, out, at)?;
            }
            // Reused while being read: the bytes may be the new tenant's.
            if page.version.load(Ordering::Acquire) != loc.version {
                return Err(FlashMiss::Gone);
            }
        }
        record::decode(out, key, loc.len as usize)?;
        let start = record::RECORD_HEADER + key.len();
        Ok(start..start + loc.len as usize)
    }

    /// Counts the value at `loc` live once more (a stub pointing at it was linked).
    pub fn retain(&self, loc: Locator, key_len: usize) {
        let Some(page) = self.page(loc.page) else {
            return;
        };
        let len = record::record_len(key_len, loc.len as usize) as u64;
        let _st = self.state.lock();
        if page.version.load(Ordering::Relaxed) == loc.version {
            page.live_bytes.fetch_add(len, Ordering::Relaxed);
            page.live_objects.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Frees sealed page `page` if it still has `version`, whatever it counts live (the
    /// caller found no stub pointing at it: see `compact_flash`).
    pub(crate) fn forget_page(&self, page: u32, version: u32) {
        let Some(pg) = self.page(page) else {
            return;
        };
        let mut st = self.state.lock();
        if pg.version.load(Ordering::Relaxed) == version
            && pg.state.load(Ordering::Acquire) == SEALED
            && !st.in_flight.iter().any(|b| b.page == page)
        {
            self.free_page(&mut st, page);
        }
    }

    /// Forgets the value at `loc` of a key of `key_len` bytes (its stub was deleted,
    /// overwritten, expired or evicted): lowers its page's counts, freeing a sealed page
    /// left with nothing. No IO.
    pub fn release(&self, loc: Locator, key_len: usize) {
        let Some(page) = self.page(loc.page) else {
            return;
        };
        let len = record::record_len(key_len, loc.len as usize) as u64;
        let mut st = self.state.lock();
        if page.version.load(Ordering::Relaxed) != loc.version {
            return;
        }
        let bytes = page.live_bytes.load(Ordering::Relaxed);
        page.live_bytes
            .store(bytes.saturating_sub(len), Ordering::Relaxed);
        let left = page.live_objects.load(Ordering::Relaxed).saturating_sub(1);
        page.live_objects.store(left, Ordering::Relaxed);
        if left == 0 && page.state.load(Ordering::Acquire) == SEALED {
            self.free_page(&mut st, loc.page);
        }
    }
}

/// A page version to start a fresh file at, unlikely to equal any an earlier run used.
fn fresh_epoch() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mixed = (nanos ^ (u64::from(std::process::id()) << 32)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (mixed >> 32) as u32
}

fn io_err_of(path: &Path) -> impl Fn(std::io::Error) -> FlashError + '_ {
    move |source| FlashError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes buffers in the order they were handed over, until the tier is dropped.
fn io_thread(flash: std::sync::Weak<Flash>, rx: mpsc::Receiver<Arc<Pending>>) {
    while let Ok(p) = rx.recv() {
        let Some(flash) = flash.upgrade() else { return };
        let result = match flash.files.page(p.page) {
            Some((file, base)) => file.write_all_at(&p.bytes, base + u64::from(p.start)),
            None => Err(std::io::Error::from(std::io::ErrorKind::InvalidInput)),
        };
        let mut st = flash.state.lock();
        if let Some(i) = st.in_flight.iter().position(|q| Arc::ptr_eq(q, &p)) {
            st.in_flight.remove(i);
        }
        flash.counters.io_queue.fetch_sub(1, Ordering::Relaxed);
        if result.is_err() {
            // A value that was never written must not be read back as whatever the file
            // holds there: the page's stubs all become misses now, rather than CRC misses
            // later (memcached finds a failed write only when it reads).
            flash.counters.write_errors.fetch_add(1, Ordering::Relaxed);
            let page = &flash.pages[p.page as usize];
            if page.version.load(Ordering::Relaxed) == p.version {
                page.version.fetch_add(1, Ordering::AcqRel);
                let objects = page.live_objects.swap(0, Ordering::Relaxed);
                let bytes = page.live_bytes.swap(0, Ordering::Relaxed);
                flash
                    .counters
                    .objects_evicted
                    .fetch_add(objects, Ordering::Relaxed);
                flash
                    .counters
                    .bytes_evicted
                    .fetch_add(bytes, Ordering::Relaxed);
                // Nothing can be read from it any more: a sealed one is free again.
                if page.state.load(Ordering::Acquire) == SEALED {
                    flash.free_page(&mut st, p.page);
                }
            }
        }
        if let Ok(done) = Arc::try_unwrap(p) {
            let mut bytes = done.bytes;
            // See `WriteState::spare`. A buffer grown for one record larger than the
            // rest is let go.
            if st.spare.is_none() && bytes.capacity() <= 2 * flash.cfg.wbuf_size {
                bytes.clear();
                st.spare = Some(bytes);
            }
        }
        drop(st);
        flash.written.notify_all();
    }
}

impl Drop for Flash {
    fn drop(&mut self) {
        self.io.lock().take();
        // The IO thread holds only a weak handle, so it ends once its channel closes.
    }
}

/// Reads `buf.len()` bytes at `offset` only if the page cache holds them all
/// (`preadv2(RWF_NOWAIT)`, Linux 4.14+): [`FlashMiss::WouldBlock`] when any would need the
/// disk, or when the kernel or filesystem cannot say (the caller then reads waiting).
fn read_cached(file: &File, buf: &mut [u8], offset: u64) -> Result<(), FlashMiss> {
    use std::os::fd::AsRawFd;
    let Ok(offset) = libc::off_t::try_from(offset) else {
        return Err(FlashMiss::Io);
    };
    let iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: one iovec over `buf`, which lives and is writable for the call.
    let n = unsafe { libc::preadv2(file.as_raw_fd(), &iov, 1, offset, libc::RWF_NOWAIT) };
    if n >= 0 && n as usize == buf.len() {
        return Ok(());
    }
    if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EIO) {
        return Err(FlashMiss::Io);
    }
    // EAGAIN (not cached), a short read (partly cached), or RWF_NOWAIT unsupported.
    Err(FlashMiss::WouldBlock)
}
