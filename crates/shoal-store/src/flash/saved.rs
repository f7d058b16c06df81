//! The flash tier across a graceful restart: the page table written beside the file at
//! a stop and read back (and deleted) at the next start.
//!
//! The same rules as the memory file's metadata (see `restart`): read once and deleted
//! before use, so a crash afterwards starts clean; written whole (temporary file, synced,
//! renamed) with a CRC, so a torn or foreign file is refused; and each page's version
//! comes back, so that the stubs the memory file kept find their values. Without the
//! metadata every page starts free under versions no stub of an earlier run can carry,
//! so old stubs read as misses, never as another run's bytes.

use super::stats::SavedPages;
use std::io::Write;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"SHOALEXT";
const VERSION: u32 = 2;

/// Where the page table of the flash file at `path` is saved.
pub fn meta_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".meta");
    PathBuf::from(name)
}

/// Why a saved page table was not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlashCleanStart {
    /// None was saved: a first start, or the last process did not stop gracefully.
    #[error("no flash metadata, starting with an empty flash tier")]
    NoMetadata,
    /// It was written for another page size or page count, or is damaged.
    #[error("flash metadata unusable ({0}), starting with an empty flash tier")]
    Unusable(&'static str),
    /// The memory the stubs were in did not survive, so nothing points at the file.
    #[error("memory restarted clean, starting with an empty flash tier")]
    MemoryClean,
}

/// `layout`: the files' paths and page counts (`Files::layout`), which a restart must
/// find the same.
pub(crate) fn encode(saved: &SavedPages, page_size: u64, layout: &str) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&page_size.to_le_bytes());
    body.extend_from_slice(&crc32fast::hash(layout.as_bytes()).to_le_bytes());
    body.extend_from_slice(&(saved.pages.len() as u64).to_le_bytes());
    for &(version, state, written, objects, bytes) in &saved.pages {
        body.extend_from_slice(&version.to_le_bytes());
        body.extend_from_slice(&state.to_le_bytes());
        body.extend_from_slice(&written.to_le_bytes());
        body.extend_from_slice(&objects.to_le_bytes());
        body.extend_from_slice(&bytes.to_le_bytes());
    }
    body.extend_from_slice(&(saved.sealed.len() as u64).to_le_bytes());
    for p in &saved.sealed {
        body.extend_from_slice(&p.to_le_bytes());
    }
    let mut out = Vec::with_capacity(body.len() + 16);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_at_checked(N)?;
        self.0 = rest;
        head.try_into().ok()
    }
    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }
}

/// Whether `bytes` are a saved page table a start with pages of `page_size` bytes,
/// `pages` pages and files laid out as `layout` would use, and if not why (what
/// [`Flash::open_restoring`] decides by).
///
/// [`Flash::open_restoring`]: super::Flash::open_restoring
pub fn check_meta(
    bytes: &[u8],
    page_size: u64,
    pages: u64,
    layout: &str,
) -> Result<(), FlashCleanStart> {
    decode(bytes, page_size, pages, layout).map(|_| ())
}

pub(crate) fn decode(
    bytes: &[u8],
    page_size: u64,
    pages: u64,
    layout: &str,
) -> Result<SavedPages, FlashCleanStart> {
    let bad = FlashCleanStart::Unusable;
    let mut r = Reader(bytes);
    if r.take::<8>().as_ref() != Some(MAGIC) {
        return Err(bad("not a shoal flash metadata file"));
    }
    if r.u32() != Some(VERSION) {
        return Err(bad("another format version"));
    }
    let crc = r.u32().ok_or(bad("truncated"))?;
    if crc32fast::hash(r.0) != crc {
        return Err(bad("checksum mismatch"));
    }
    if r.u64() != Some(page_size) {
        return Err(bad("another ext_page_size"));
    }
    if r.u32() != Some(crc32fast::hash(layout.as_bytes())) {
        return Err(bad("other ext_path files, or in another order"));
    }
    let n = r.u64().ok_or(bad("truncated"))?;
    if n != pages {
        return Err(bad("another file size"));
    }
    let mut saved = SavedPages::default();
    for _ in 0..n {
        let entry = (|| Some((r.u32()?, r.u32()?, r.u64()?, r.u64()?, r.u64()?)))()
            .ok_or(bad("truncated"))?;
        saved.pages.push(entry);
    }
    let sealed = r.u64().ok_or(bad("truncated"))?;
    if sealed > pages {
        return Err(bad("sealed list too long"));
    }
    for _ in 0..sealed {
        saved.sealed.push(r.u32().ok_or(bad("truncated"))?);
    }
    Ok(saved)
}

/// Writes `bytes` to `path` whole: a temporary file, synced, renamed over it.
pub(crate) fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrips_and_refuses_damage() {
        let saved = SavedPages {
            pages: vec![(7, 2, 100, 3, 90), (1, 0, 0, 0, 0)],
            sealed: vec![0],
        };
        let layout = "/a:1\n/b:1\n";
        let bytes = encode(&saved, 4096, layout);
        assert_eq!(decode(&bytes, 4096, 2, layout), Ok(saved));
        assert!(decode(&bytes, 8192, 2, layout).is_err());
        assert!(decode(&bytes, 4096, 3, layout).is_err());
        assert!(
            decode(&bytes, 4096, 2, "/b:1\n/a:1\n").is_err(),
            "files swapped"
        );
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 1;
            assert!(decode(&bad, 4096, 2, layout).is_err(), "byte {i}");
        }
        assert!(decode(&bytes[..bytes.len() - 1], 4096, 2, layout).is_err());
    }
}
