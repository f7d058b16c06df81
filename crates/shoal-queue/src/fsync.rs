//! The fsyncs a live queue makes, in one place: of a segment file (data only) and of a
//! directory (so a file created or removed in it is still there after a power loss).
//!
//! Only the sync thread calls these (see `Queue::sync_now`): an fsync takes from tens of
//! microseconds to many milliseconds, and on an event loop it would stall every connection
//! of that thread. In test builds each fsync is also logged with the thread that made it,
//! so tests can check exactly that.

use std::fs::File;
use std::io;
use std::path::Path;

/// fdatasync of segment `id` of the queue in `dir`.
pub(crate) fn segment(file: &File, dir: &Path, id: u64) -> io::Result<()> {
    let res = file.sync_data();
    #[cfg(test)]
    if res.is_ok() {
        testlog::record(dir, testlog::Target::Segment(id));
    }
    #[cfg(not(test))]
    let _ = (dir, id);
    res
}

/// fsync of directory `dir`, making the entries created in it durable.
pub(crate) fn directory(dir: &Path) -> io::Result<()> {
    let res = File::open(dir)?.sync_all();
    #[cfg(test)]
    if res.is_ok() {
        testlog::record(dir, testlog::Target::Directory);
    }
    res
}

/// The fsyncs made by this process, for tests: which thread made each, in order of
/// completion. Tests filter by their own temporary directory, as tests run in parallel.
#[cfg(test)]
pub(crate) mod testlog {
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;
    use std::thread::ThreadId;

    /// What was fsynced.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Target {
        /// A segment file, by id.
        Segment(u64),
        /// The directory itself.
        Directory,
    }

    /// One completed fsync.
    #[derive(Debug, Clone)]
    pub(crate) struct Event {
        /// The directory of the segment, or the directory synced.
        pub dir: PathBuf,
        pub target: Target,
        pub thread: ThreadId,
        pub thread_name: Option<String>,
    }

    static EVENTS: Mutex<Vec<Event>> = Mutex::new(Vec::new());

    pub(super) fn record(dir: &Path, target: Target) {
        EVENTS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Event {
                dir: dir.to_path_buf(),
                target,
                thread: std::thread::current().id(),
                thread_name: std::thread::current().name().map(str::to_string),
            });
    }

    /// Every fsync so far of `dir` or of a file in it, or of a directory under `root`.
    pub(crate) fn under(root: &Path) -> Vec<Event> {
        EVENTS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|e| e.dir.starts_with(root))
            .cloned()
            .collect()
    }
}
