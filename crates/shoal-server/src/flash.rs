//! The flash tier behind memcached's `-o ext_*` options (see `shoal_store::flash`):
//! the settings turned into a [`FlashConfig`], the tier opened (kept across a graceful
//! `-e` restart), and its page table saved at a graceful stop.

use crate::config::{Extstore, Settings};
use shoal_store::flash::bucket;
use shoal_store::{Flash, FlashCleanStart, FlashConfig, FlashFile, Store};
use std::path::PathBuf;

/// The flash tier's configuration, if an `ext_path` was given. Several `ext_path` files
/// (memcached's JBOD, one per device) are pooled: their pages are used as one. A bucket
/// after the size gives the file to it (memcached's tiered pages): `compact` files take
/// the values compaction rescues, `coldcompact` files the unread ones among them, `old`
/// files the values of the oldest page moved when nothing is fragmented, and `lowttl`
/// files the values under `ext_low_ttl`. `chunked` (a kind of write shoald does not have)
/// leaves its files in the default pool; [`ignored_buckets`] names it for a warning.
pub fn config(e: &Extstore) -> Result<Option<FlashConfig>, String> {
    if e.paths.is_empty() {
        return Ok(None);
    }
    let mut files = Vec::with_capacity(e.paths.len());
    for spec in &e.paths {
        // Empty fields are skipped, as memcached's strtok skips them.
        let mut parts = spec.split(':').filter(|p| !p.is_empty());
        let path = parts.next().unwrap_or_default();
        let size = parts
            .next()
            .and_then(parse_size)
            .ok_or_else(|| "failed to parse ext_path argument".to_string())?;
        files.push(FlashFile {
            path: PathBuf::from(path),
            size,
            bucket: match parts.next() {
                Some("compact") => bucket::COMPACT,
                Some("lowttl") => bucket::LOW_TTL,
                Some("coldcompact") => bucket::COLD_COMPACT,
                Some("old") => bucket::OLD,
                _ => bucket::DEFAULT,
            },
        });
    }
    let mut cfg = FlashConfig::new(PathBuf::new(), 0);
    cfg.files = files;
    cfg.page_size = u64::from(e.page_size).max(1 << 20);
    // memcached writes a whole `ext_wbuf_size` buffer (4 MiB) at a time, with one
    // buffer per IO in flight (`ext_io_depth` per IO thread) besides the one filling.
    // shoald lets the same bytes wait for the disk, in pieces of at most 1 MiB: the
    // disk starts on a value a quarter as late, and the buffer filling, the only one
    // held beyond those bytes, is a quarter of the size (peak RSS under a write flood:
    // 5 MiB of buffers at the defaults against memcached's 8). Beyond them eviction
    // drops values rather than wait.
    let wbuf = (e.wbuf_size as usize).max(64 << 10);
    cfg.wbuf_size = wbuf.min(WRITE_PIECE);
    cfg.io_depth = (wbuf / cfg.wbuf_size) * (e.io_depth as usize * e.threads as usize).max(1);
    cfg.item_size = e.item_size as usize;
    cfg.item_age = e.item_age;
    let pages = cfg.pages();
    // memcached: compaction and dropping start under 1% of pages free, at least one.
    cfg.compact_under = if e.compact_under != 0 {
        e.compact_under
    } else {
        ((pages as f64 * 0.01) as u32).max(1)
    };
    cfg.drop_under = if e.drop_under != 0 {
        e.drop_under
    } else {
        ((pages as f64 * 0.01) as u32).max(1)
    };
    cfg.max_frag = e.max_frag;
    cfg.drop_unread = e.drop_unread;
    cfg.low_ttl = e.low_ttl;
    cfg.recache_rate = e.recache_rate;
    Ok(Some(cfg))
}

/// The buckets given after `ext_path` sizes that have no effect (memcached's `chunked`
/// pages hold pieces of large values, which shoald writes as one record): their files'
/// pages are default ones. The caller warns.
pub fn ignored_buckets(e: &Extstore) -> Vec<String> {
    e.paths
        .iter()
        .filter_map(|spec| spec.split(':').filter(|p| !p.is_empty()).nth(2))
        .filter(|b| !matches!(*b, "default" | "compact" | "lowttl" | "coldcompact" | "old"))
        .map(str::to_string)
        .collect()
}

/// Threads reading flash values for the workers: memcached's reads in flight at once
/// (`ext_io_depth` per IO thread, `ext_threads` of them), and at least
/// [`MIN_READERS`]: each reader has one read in flight, and a disk serves several
/// reads at once faster than one after another (memcached's default is one).
pub fn readers(e: &Extstore) -> usize {
    (e.threads as usize * e.io_depth as usize).max(MIN_READERS)
}

/// The most bytes shoald hands the disk in one write (see [`config`]).
pub const WRITE_PIECE: usize = 1 << 20;

/// The fewest flash readers shoald runs (see [`readers`]).
pub const MIN_READERS: usize = 4;

/// `SIZE` with its M/G/T/P suffix (either case), as memcached's `ext_path` reads it (the
/// option parser has refused anything else with memcached's message).
fn parse_size(s: &str) -> Option<u64> {
    let (i, unit) = s.char_indices().last()?;
    let n: u64 = s[..i].parse().ok()?;
    let shift = match unit.to_ascii_uppercase() {
        'M' => 20,
        'G' => 30,
        'T' => 40,
        'P' => 50,
        _ => return None,
    };
    n.checked_mul(1 << shift)
}

/// What opening the flash tier found, to be logged once the server listens (beside the
/// `-e` restart's line).
pub struct FlashOutcome {
    path: PathBuf,
    restored: Result<(), FlashCleanStart>,
    ignored_buckets: Vec<String>,
}

impl FlashOutcome {
    /// Logs whether the flash tier was kept, and if not why; and the `ext_path` buckets
    /// accepted without effect.
    pub fn log(&self) {
        for bucket in &self.ignored_buckets {
            tracing::warn!(
                "[extstore] ext_path bucket '{bucket}' accepted without effect: its file's \
                 pages are default pages"
            );
        }
        match &self.restored {
            Ok(()) => tracing::info!("[extstore] kept the flash tier in {}", self.path.display()),
            Err(why @ (FlashCleanStart::NoMetadata | FlashCleanStart::MemoryClean)) => {
                tracing::info!("[extstore] {why}")
            }
            Err(why) => tracing::warn!("[extstore] {why}"),
        }
    }
}

/// Opens the flash tier for `settings` and attaches it to `store`; with a warm `-e`
/// restart (`memory_warm`), the tier a graceful stop saved comes back with it.
pub fn open(
    settings: &Settings,
    store: &Store,
    memory_warm: bool,
) -> Result<Option<FlashOutcome>, crate::error::ServeError> {
    let cfg = config(&settings.extstore).map_err(crate::error::ServeError::Flash)?;
    let Some(cfg) = cfg else {
        return Ok(None);
    };
    let path = cfg.path().to_path_buf();
    let (flash, restored) = Flash::open_restoring(cfg, memory_warm)
        .map_err(|e| crate::error::ServeError::Flash(e.to_string()))?;
    store.attach_flash(flash);
    Ok(Some(FlashOutcome {
        path,
        restored,
        ignored_buckets: ignored_buckets(&settings.extstore),
    }))
}

/// At a graceful stop with `-e`: writes what the flash tier buffers and saves its page
/// table, so the next start keeps it.
pub fn save(store: &Store) -> Result<(), crate::error::ServeError> {
    match store.flash() {
        Some(flash) => flash
            .save()
            .map_err(|e| crate::error::ServeError::Flash(format!("[extstore] not saved: {e}"))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_memcached_reads_them() {
        assert_eq!(parse_size("64m"), Some(64 << 20));
        assert_eq!(parse_size("5G"), Some(5 << 30));
        assert_eq!(parse_size("1024"), None, "memcached wants a unit");
        assert_eq!(parse_size("64k"), None);
        assert_eq!(parse_size("1GB"), None);
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size("99999999999P"), None);
    }

    #[test]
    fn ext_path_becomes_a_config() {
        let mut e = Extstore::default();
        assert_eq!(config(&e), Ok(None));
        e.paths.push("/tmp/x:64m".into());
        e.page_size = 8 << 20;
        let cfg = config(&e).expect("valid").expect("configured");
        assert_eq!(cfg.size(), 64 << 20);
        assert_eq!(cfg.pages(), 8);
        assert_eq!(cfg.compact_under, 1);
        // memcached's JBOD: pooled, in order.
        e.paths.push("/tmp/y:96m".into());
        let cfg = config(&e).expect("valid").expect("configured");
        assert_eq!(cfg.pages(), 20);
        assert_eq!(cfg.files[1].path, PathBuf::from("/tmp/y"));
        assert!(ignored_buckets(&e).is_empty());
        e.paths.push("/tmp/z:64m:compact".into());
        e.paths.push("/tmp/v:64m:old".into());
        e.paths.push("/tmp/u:64m:coldcompact".into());
        e.paths.push("/tmp/t:64m:chunked".into());
        let cfg = config(&e).expect("valid").expect("configured");
        assert_eq!(cfg.files[2].bucket, bucket::COMPACT);
        assert_eq!(cfg.files[3].bucket, bucket::OLD);
        assert_eq!(cfg.files[4].bucket, bucket::COLD_COMPACT);
        assert_eq!(cfg.files[5].bucket, bucket::DEFAULT);
        assert_eq!(ignored_buckets(&e), ["chunked"]);
        e.paths.push("/tmp/w".into());
        assert!(config(&e).is_err(), "a file without a size");
    }
}
