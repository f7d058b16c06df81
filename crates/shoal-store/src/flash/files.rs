//! The files a flash tier's pages live in: one `ext_path`, or several pooled as one
//! (memcached's JBOD: a file per device, every file's pages in the default bucket).
//! Pages are numbered across the files in the order given, each file holding whole
//! pages; a page never spans two files, so every read and write goes to one file. A file
//! may be given to a page bucket (memcached's tiered `ext_path=PATH:SIZE:BUCKET`): its
//! pages then take only that bucket's writes, and a bucket without files of its own
//! takes pages of the default files.

use super::{FlashConfig, FlashError};
use std::fs::File;
use std::path::{Path, PathBuf};

/// One file of the pool.
struct PageFile {
    path: PathBuf,
    file: File,
    /// The tier-wide number of its first page.
    first: u32,
    /// Pages it holds.
    pages: u32,
    /// The page bucket its pages belong to (see `super::bucket`).
    bucket: u8,
}

/// The open, locked files of a flash tier.
pub(crate) struct Files {
    files: Vec<PageFile>,
    page_size: u64,
}

impl Files {
    /// Opens (creating) and locks every file of `cfg`, checking that each holds at least
    /// one page and that no file is named twice. Nothing is resized yet.
    pub(crate) fn lock(cfg: &FlashConfig) -> Result<Files, FlashError> {
        if cfg.files.is_empty() {
            return Err(FlashError::Config("no ext_path file".into()));
        }
        if cfg.page_size == 0 || cfg.page_size > u64::from(u32::MAX) {
            return Err(FlashError::Config("ext_page_size too large".into()));
        }
        let mut files: Vec<PageFile> = Vec::with_capacity(cfg.files.len());
        let mut first = 0u64;
        for f in &cfg.files {
            let pages = f.size / cfg.page_size;
            // One page works (it is reused once full, as memcached's single page is), if
            // poorly: every fill evicts all it held.
            if pages < 1 {
                return Err(FlashError::Config(format!(
                    "ext_path {} size {} is less than one page of {} bytes",
                    f.path.display(),
                    f.size,
                    cfg.page_size
                )));
            }
            if first + pages > u64::from(u32::MAX) {
                return Err(FlashError::Config("ext_page_size too large".into()));
            }
            let file = open_one(&f.path)?;
            // The same file twice (under two names too) would have two page ranges
            // overwrite each other. Checked before the lock, which would refuse it as
            // if another process held it.
            if let Some(twin) = files.iter().find(|o| same_file(&o.file, &file)) {
                return Err(FlashError::Config(format!(
                    "{} and {} are the same file",
                    twin.path.display(),
                    f.path.display()
                )));
            }
            lock_one(&f.path, &file)?;
            files.push(PageFile {
                path: f.path.clone(),
                file,
                first: first as u32,
                pages: pages as u32,
                bucket: f.bucket,
            });
            first += pages;
        }
        Ok(Files {
            files,
            page_size: cfg.page_size,
        })
    }

    /// Sizes every file to its whole pages.
    pub(crate) fn size_files(&self) -> Result<(), FlashError> {
        for f in &self.files {
            f.file
                .set_len(u64::from(f.pages) * self.page_size)
                .map_err(|source| FlashError::Io {
                    path: f.path.clone(),
                    source,
                })?;
        }
        Ok(())
    }

    /// The bucket page `page` belongs to (0, the default, for a page past the end).
    pub(crate) fn bucket_of(&self, page: u32) -> u8 {
        self.file_of(page)
            .map_or(super::bucket::DEFAULT, |f| f.bucket)
    }

    /// Whether some file holds pages of `bucket`.
    pub(crate) fn has_bucket(&self, bucket: u8) -> bool {
        self.files.iter().any(|f| f.bucket == bucket)
    }

    /// The buckets some file's pages belong to, each once, in id order.
    pub(crate) fn buckets(&self) -> Vec<u8> {
        let mut out: Vec<u8> = self.files.iter().map(|f| f.bucket).collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The file page `page` is in, and the page's byte offset in it.
    #[inline]
    pub(crate) fn page(&self, page: u32) -> Option<(&File, u64)> {
        let f = self.file_of(page)?;
        Some((&f.file, u64::from(page - f.first) * self.page_size))
    }

    /// The file page `page` is in.
    #[inline]
    fn file_of(&self, page: u32) -> Option<&PageFile> {
        // Few files (one per device): a scan beats a search.
        self.files
            .iter()
            .find(|f| page >= f.first && page - f.first < f.pages)
    }

    /// Makes every write so far durable.
    pub(crate) fn sync_all(&self) -> Result<(), FlashError> {
        for f in &self.files {
            f.file.sync_all().map_err(|source| FlashError::Io {
                path: f.path.clone(),
                source,
            })?;
        }
        Ok(())
    }

    /// The pool's shape, for the saved page table: each file's path, page count and
    /// bucket, in order. A restart with the files named in another order, or other files,
    /// must not take one file's pages for another's.
    pub(crate) fn layout(&self) -> String {
        let mut out = String::new();
        for f in &self.files {
            out.push_str(&format!("{}:{}:{}\n", f.path.display(), f.pages, f.bucket));
        }
        out
    }
}

/// Opens (creating) one file.
fn open_one(path: &Path) -> Result<File, FlashError> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|source| FlashError::Io {
            path: path.to_path_buf(),
            source,
        })
}

/// Takes `file`'s lock.
fn lock_one(path: &Path, file: &File) -> Result<(), FlashError> {
    // Two processes writing one flash file would overwrite each other's values (and
    // each read the other's as CRC misses): the second is refused, as memcached
    // refuses a second server on the same extstore file.
    // SAFETY: flock on a descriptor this function owns.
    if unsafe {
        libc::flock(
            std::os::fd::AsRawFd::as_raw_fd(file),
            libc::LOCK_EX | libc::LOCK_NB,
        )
    } != 0
    {
        return Err(FlashError::Config(format!(
            "{}: flash file is in use by another process",
            path.display()
        )));
    }
    Ok(())
}

fn same_file(a: &File, b: &File) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (a.metadata(), b.metadata()) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}
