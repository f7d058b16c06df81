//! The flash tier's counters (memcached's `extstore_*` stats and the per-thread
//! `*_extstore` ones), and its page table as a warm restart saves it.

use super::pages::{Page, FREE, OPEN, SEALED};
use super::Flash;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

/// Event counters, raised as things happen.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) objects_written: AtomicU64,
    pub(crate) bytes_written: AtomicU64,
    pub(crate) objects_read: AtomicU64,
    pub(crate) bytes_read: AtomicU64,
    pub(crate) page_allocs: AtomicU64,
    pub(crate) page_evictions: AtomicU64,
    pub(crate) page_reclaims: AtomicU64,
    pub(crate) objects_evicted: AtomicU64,
    pub(crate) bytes_evicted: AtomicU64,
    pub(crate) io_queue: AtomicU64,
    pub(crate) write_errors: AtomicU64,
    pub(crate) write_refused: AtomicU64,
    pub(crate) compact_rescues: AtomicU64,
    pub(crate) compact_skipped: AtomicU64,
    pub(crate) compact_resc_cold: AtomicU64,
    pub(crate) compact_resc_old: AtomicU64,
    /// Reads of flash-resident items asked for (`get_extstore`).
    pub(crate) gets: AtomicU64,
    /// Of those, misses: page gone, bad record, IO error (`miss_from_extstore`).
    pub(crate) miss: AtomicU64,
    /// Of the misses, bad CRCs and read errors (`badcrc_from_extstore`).
    pub(crate) badcrc: AtomicU64,
    /// Items brought back to memory (`recache_from_extstore`).
    pub(crate) recache: AtomicU64,
    /// Items moved to flash by age rather than memory pressure.
    pub(crate) flushed_by_age: AtomicU64,
}

/// A snapshot of the flash tier, in memcached's terms (`stats`, `stats extstore`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlashStats {
    /// Bytes of the file (`extstore_limit_maxbytes`).
    pub limit_maxbytes: u64,
    /// Bytes per page (`extstore_page_size`).
    pub page_size: u64,
    /// Pages in the file.
    pub pages: u64,
    /// Pages allocated for writing since start (`extstore_page_allocs`).
    pub page_allocs: u64,
    /// Pages reused while still holding live values (`extstore_page_evictions`).
    pub page_evictions: u64,
    /// Pages freed, because nothing in them was live or by eviction, as memcached counts
    /// `extstore_page_reclaims`.
    pub page_reclaims: u64,
    /// Pages free now (`extstore_pages_free`).
    pub pages_free: u64,
    /// Pages open or sealed now (`extstore_pages_used`).
    pub pages_used: u64,
    /// Live values lost to page reuse and failed writes (`extstore_objects_evicted`).
    pub objects_evicted: u64,
    /// Their bytes (`extstore_bytes_evicted`).
    pub bytes_evicted: u64,
    /// Values written (`extstore_objects_written`).
    pub objects_written: u64,
    /// Their bytes (`extstore_bytes_written`).
    pub bytes_written: u64,
    /// Values read back (`extstore_objects_read`).
    pub objects_read: u64,
    /// Their bytes (`extstore_bytes_read`).
    pub bytes_read: u64,
    /// Values live on flash now (`extstore_objects_used`).
    pub objects_used: u64,
    /// Their bytes (`extstore_bytes_used`).
    pub bytes_used: u64,
    /// Bytes written to used pages and no longer live (`extstore_bytes_fragmented`).
    pub bytes_fragmented: u64,
    /// Write buffers waiting for the disk (`extstore_io_queue`).
    pub io_queue: u64,
    /// Writes that failed; their pages' values became misses at once.
    pub write_errors: u64,
    /// Values not flushed because every write buffer was waiting for the disk (the item
    /// was evicted instead).
    pub write_refused: u64,
    /// Live values compaction moved to another page (`extstore_compact_rescues`).
    pub compact_rescues: u64,
    /// Unread values compaction dropped instead of moving (`extstore_compact_skipped`).
    pub compact_skipped: u64,
    /// Rescues into `coldcompact` pages (`extstore_compact_resc_cold`).
    pub compact_resc_cold: u64,
    /// Rescues into `old` pages (`extstore_compact_resc_old`).
    pub compact_resc_old: u64,
    /// Reads of flash-resident items (`get_extstore`).
    pub get: u64,
    /// Of those, misses (`miss_from_extstore`).
    pub miss: u64,
    /// Of the misses, bad CRCs and read errors (`badcrc_from_extstore`).
    pub badcrc: u64,
    /// Items brought back to memory by reads (`recache_from_extstore`).
    pub recache: u64,
    /// Items moved to flash by `ext_item_age` rather than by memory pressure.
    pub flushed_by_age: u64,
    /// Per page: version, live objects, live bytes, written bytes, state name
    /// (`stats extstore`).
    pub page_table: Vec<PageStat>,
}

/// One page as `stats extstore` shows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PageStat {
    /// Page number.
    pub page: u32,
    /// Its version.
    pub version: u32,
    /// Live values.
    pub objects: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Bytes written to it.
    pub written: u64,
    /// "free", "open" or "sealed".
    pub state: &'static str,
    /// The bucket of what it holds (memcached's `bucket`; 0 while free).
    pub bucket: u8,
    /// The bucket it belongs to, by its file (memcached's `free_bucket`).
    pub free_bucket: u8,
}

impl Flash {
    /// A snapshot of the counters and the page table.
    pub fn stats(&self) -> FlashStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut s = FlashStats {
            limit_maxbytes: self.cfg.pages() * self.cfg.page_size,
            page_size: self.cfg.page_size,
            pages: self.pages.len() as u64,
            page_allocs: get(&c.page_allocs),
            page_evictions: get(&c.page_evictions),
            page_reclaims: get(&c.page_reclaims),
            objects_evicted: get(&c.objects_evicted),
            bytes_evicted: get(&c.bytes_evicted),
            objects_written: get(&c.objects_written),
            bytes_written: get(&c.bytes_written),
            objects_read: get(&c.objects_read),
            bytes_read: get(&c.bytes_read),
            io_queue: get(&c.io_queue),
            write_errors: get(&c.write_errors),
            write_refused: get(&c.write_refused),
            compact_rescues: get(&c.compact_rescues),
            compact_skipped: get(&c.compact_skipped),
            compact_resc_cold: get(&c.compact_resc_cold),
            compact_resc_old: get(&c.compact_resc_old),
            get: get(&c.gets),
            miss: get(&c.miss),
            badcrc: get(&c.badcrc),
            recache: get(&c.recache),
            flushed_by_age: get(&c.flushed_by_age),
            ..FlashStats::default()
        };
        for (n, p) in self.pages.iter().enumerate() {
            let state = p.state.load(Ordering::Acquire);
            let objects = get(&p.live_objects);
            let bytes = get(&p.live_bytes);
            let written = get(&p.written);
            if state == FREE {
                s.pages_free += 1;
            } else {
                s.pages_used += 1;
                s.objects_used += objects;
                s.bytes_used += bytes;
                s.bytes_fragmented += written.saturating_sub(bytes);
            }
            s.page_table.push(PageStat {
                page: n as u32,
                version: p.version.load(Ordering::Relaxed),
                objects,
                bytes,
                written,
                state: match state {
                    FREE => "free",
                    OPEN => "open",
                    _ => "sealed",
                },
                bucket: p.bucket.load(Ordering::Relaxed) as u8,
                free_bucket: self.files.bucket_of(n as u32),
            });
        }
        s
    }
}

/// The page table as a graceful stop leaves it, for the next start to read the same file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SavedPages {
    /// Per page: version, state, written, live objects, live bytes.
    pub(crate) pages: Vec<(u32, u32, u64, u64, u64)>,
    /// Sealed pages, oldest first.
    pub(crate) sealed: Vec<u32>,
}

impl SavedPages {
    /// Puts the saved table into a fresh one; the page that was open comes back sealed.
    pub(crate) fn restore(&self, table: &[Page], free: &mut Vec<u32>, sealed: &mut VecDeque<u32>) {
        for (page, &(version, state, written, objects, bytes)) in table.iter().zip(&self.pages) {
            page.version.store(version, Ordering::Relaxed);
            page.state
                .store(if state == FREE { FREE } else { SEALED }, Ordering::Relaxed);
            page.written.store(written, Ordering::Relaxed);
            page.live_objects.store(objects, Ordering::Relaxed);
            page.live_bytes.store(bytes, Ordering::Relaxed);
        }
        for (n, page) in table.iter().enumerate().rev() {
            // A page nothing in which is live (the one open at the stop, say) is free.
            if page.state.load(Ordering::Relaxed) != FREE
                && page.live_objects.load(Ordering::Relaxed) == 0
            {
                page.reset();
            }
            if page.state.load(Ordering::Relaxed) == FREE {
                free.push(n as u32);
            }
        }
        sealed.extend(self.sealed.iter().copied().filter(|&p| {
            table
                .get(p as usize)
                .is_some_and(|pg| pg.state.load(Ordering::Relaxed) == SEALED)
        }));
        // A page open at the stop is sealed now; it goes last (newest).
        for (n, page) in table.iter().enumerate() {
            if page.state.load(Ordering::Relaxed) == SEALED && !sealed.contains(&(n as u32)) {
                sealed.push_back(n as u32);
            }
        }
    }
}
