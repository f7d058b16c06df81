//! Compaction's side of the flash file: which page to compact, and its records.
//!
//! Deletes, overwrites and expiry leave holes in pages that only a page's last live value
//! going frees. When free pages run short (`ext_compact_under`), the sealed page with the
//! smallest live share under `ext_max_frag` is compacted: its records are read in order,
//! and the store moves each one a stub still points at (see `tier`). With memcached's
//! tiered files, unread values move to `coldcompact` pages and, when nothing is
//! fragmented, the oldest page's values to `old` pages.

use super::pages::SEALED;
use super::record::{self, RECORD_HEADER};
use super::{Compaction, Flash, WriteState};
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;

/// Bytes read from a page at a time (a record longer than this is read whole).
const CHUNK: usize = 1 << 20;

impl Flash {
    /// What compaction does now, as memcached's `storage_compact_check` decides, bucket
    /// by bucket (a page's bucket is its file's; `lowttl` pages are never compacted):
    /// - a `coldcompact` or `old` bucket with no free page has its oldest page evicted
    ///   (it is where the other buckets' compactions write), and nothing is compacted
    ///   on this tick;
    /// - once fewer of a bucket's pages than `compact_under` are free, its sealed page
    ///   with the least live share below `max_frag` has everything in it moved;
    /// - else, with fewer than `drop_under` free (not in `coldcompact` or `old`), the
    ///   bucket's oldest sealed page is compacted when something takes its values:
    ///   unread ones are dropped with `drop_unread` on and no `coldcompact` file, and the
    ///   others go to the `old` file when there is one.
    pub(crate) fn compaction_candidate(&self) -> Option<Compaction> {
        use super::bucket::{COLD_COMPACT, LOW_TTL, OLD};
        let under = self.tune.compact_under.load(Ordering::Relaxed) as usize;
        let drop_under = self.tune.drop_under.load(Ordering::Relaxed) as usize;
        let drop_unread = self.tune.drop_unread.load(Ordering::Relaxed) != 0;
        let max_frag = f64::from(self.tune.max_frag_milli.load(Ordering::Relaxed)) / 1000.0;
        let (has_cold, has_old) = (self.has_bucket(COLD_COMPACT), self.has_bucket(OLD));
        let mut st = self.state.lock();
        // A page whose last buffers are still queued is not read: the file there may
        // still hold an earlier tenant's records, which would pass their checks.
        let sealed_of = |st: &WriteState, bucket: u8| -> Vec<u32> {
            st.sealed
                .iter()
                .copied()
                .filter(|&p| self.files.bucket_of(p) == bucket)
                .filter(|&p| !st.in_flight.iter().any(|b| b.page == p))
                .filter(|&p| self.pages[p as usize].state.load(Ordering::Acquire) == SEALED)
                .collect()
        };
        for (bucket, present) in [(COLD_COMPACT, has_cold), (OLD, has_old)] {
            if !present || self.free_pages_of(&st, bucket) > 0 {
                continue;
            }
            // `sealed` is oldest first.
            if let Some(&oldest) = sealed_of(&st, bucket).first() {
                st.sealed.retain(|&p| p != oldest);
                self.evicted(oldest);
                st.free.push(oldest);
                return None;
            }
        }
        let version = |p: u32| self.pages[p as usize].version.load(Ordering::Acquire);
        for bucket in self.files.buckets() {
            if bucket == LOW_TTL {
                continue;
            }
            let free = self.free_pages_of(&st, bucket);
            if free >= under.max(1) {
                continue;
            }
            let sealed = sealed_of(&st, bucket);
            let fill = |p: &u32| self.pages[*p as usize].fill();
            if let Some(&p) = sealed
                .iter()
                .filter(|p| fill(p) < max_frag)
                .min_by(|a, b| fill(a).total_cmp(&fill(b)))
            {
                return Some(Compaction {
                    page: p,
                    version: version(p),
                    drop_unread: false,
                    to_old: false,
                });
            }
            if free >= drop_under || bucket == COLD_COMPACT || bucket == OLD {
                continue;
            }
            if let Some(&oldest) = sealed.first() {
                if drop_unread || has_cold || has_old {
                    return Some(Compaction {
                        page: oldest,
                        version: version(oldest),
                        drop_unread: drop_unread && !has_cold,
                        to_old: has_old,
                    });
                }
            }
        }
        None
    }

    /// Calls `f(offset, key, value)` for each sound record of `page` (while it keeps
    /// `version`), in order, until `f` returns false or a record does not check (the
    /// rest of the page is left as it is). Reads without holding any lock. Returns
    /// whether every record written to the page was visited.
    pub(crate) fn for_each_record(
        &self,
        page: u32,
        version: u32,
        mut f: impl FnMut(u32, &[u8], &[u8]) -> bool,
    ) -> bool {
        let Some(pg) = self.pages.get(page as usize) else {
            return false;
        };
        let written = pg.written.load(Ordering::Acquire);
        let Some((file, base)) = self.files.page(page) else {
            return false;
        };
        let mut buf = Vec::new();
        let mut offset = 0u64;
        while offset + RECORD_HEADER as u64 <= written {
            if pg.version.load(Ordering::Acquire) != version {
                return false;
            }
            let want = CHUNK.min((written - offset) as usize);
            buf.resize(want, 0);
            if file.read_exact_at(&mut buf, base + offset).is_err() {
                return false;
            }
            let mut at = 0usize;
            while let Some(header) = buf.get(at..at + RECORD_HEADER) {
                let (Some(klen), Some(vlen)) =
                    (record::le_u32(header, 4), record::le_u32(header, 8))
                else {
                    return false;
                };
                let (klen, vlen) = (klen as usize, vlen as usize);
                // A damaged header must not size a read of up to a page.
                if klen == 0 || klen > 255 {
                    return false;
                }
                let len = record::record_len(klen, vlen);
                if at + len > buf.len() {
                    if at == 0 {
                        // A record longer than a chunk: read it whole.
                        if offset + len as u64 > written {
                            return false;
                        }
                        buf.resize(len, 0);
                        if file.read_exact_at(&mut buf, base + offset).is_err() {
                            return false;
                        }
                        continue;
                    }
                    break;
                }
                let Some((key, value)) = record::parse(&buf[at..at + len]) else {
                    return false;
                };
                if !f((offset + at as u64) as u32, key, value) {
                    return false;
                }
                at += len;
            }
            if at == 0 {
                return false;
            }
            offset += at as u64;
        }
        true
    }
}
