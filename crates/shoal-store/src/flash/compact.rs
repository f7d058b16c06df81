//! Compaction's side of the flash file: which page to compact, and its records.
//!
//! Deletes, overwrites and expiry leave holes in pages that only a page's last live value
//! going frees. When free pages run short (`ext_compact_under`), the sealed page with the
//! smallest live share under `ext_max_frag` is compacted: its records are read in order,
//! and the store moves each one a stub still points at (see `tier`).

use super::pages::SEALED;
use super::record::{self, RECORD_HEADER};
use super::Flash;
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;

/// Bytes read from a page at a time (a record longer than this is read whole).
const CHUNK: usize = 1 << 20;

impl Flash {
    /// The page to compact now, with its version, and whether its unread values are
    /// dropped rather than moved; as memcached's `storage_compact_check` decides, once
    /// fewer default pages than `compact_under` are free:
    /// - the sealed page with the least live share below `max_frag`, everything in it
    ///   moved;
    /// - else, with `drop_unread` on and fewer than `drop_under` free, the oldest sealed
    ///   page, its values never read dropped (nothing is fragmented enough to gain from
    ///   moving, and values nobody read are the cheapest to lose).
    pub(crate) fn compaction_candidate(&self) -> Option<(u32, u32, bool)> {
        let under = self.tune.compact_under.load(Ordering::Relaxed) as usize;
        let drop_under = self.tune.drop_under.load(Ordering::Relaxed) as usize;
        let drop_unread = self.tune.drop_unread.load(Ordering::Relaxed) != 0;
        let max_frag = f64::from(self.tune.max_frag_milli.load(Ordering::Relaxed)) / 1000.0;
        let st = self.state.lock();
        let free = self.free_pages_of(&st, super::bucket::DEFAULT);
        if free >= under.max(1) {
            return None;
        }
        // A page whose last buffers are still queued is not read: the file there may
        // still hold an earlier tenant's records, which would pass their checks.
        let mut sealed = st
            .sealed
            .iter()
            .filter(|&&p| !st.in_flight.iter().any(|b| b.page == p))
            .map(|&p| (p, &self.pages[p as usize]))
            .filter(|(_, pg)| pg.state.load(Ordering::Acquire) == SEALED);
        let version = |pg: &super::pages::Page| pg.version.load(Ordering::Acquire);
        if let Some((p, pg)) = sealed
            .clone()
            .filter(|(_, pg)| pg.fill() < max_frag)
            .min_by(|a, b| a.1.fill().total_cmp(&b.1.fill()))
        {
            return Some((p, version(pg), false));
        }
        if drop_unread && free < drop_under {
            // `sealed` is oldest first.
            return sealed.next().map(|(p, pg)| (p, version(pg), true));
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
