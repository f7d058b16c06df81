//! `watch`: live streams of what the server does, in memcached 1.6's log-line format.
//!
//! A watcher connection asks for event types (`fetchers`, `mutations`, `evictions`,
//! `connevents`, `deletions`) and then receives one line per event:
//! `ts=<unix>.<usec> gid=<n> type=item_get key=<uri-encoded> status=found ...`.
//!
//! Workers must never wait for a watcher. An event costs one relaxed atomic load when
//! nobody watches its type; when someone does, the line goes into each watcher's bounded
//! queue with a `try_lock`, and a watcher whose queue is full (it reads slower than
//! events arrive) loses the line. Lost lines are counted and the watcher is told before
//! its next line (`skipped=<n>`), as memcached does. At most [`MAX_WATCHERS`] watch at
//! once, as in memcached.

use parking_lot::Mutex;
use std::io::Write as _;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

/// memcached's watcher limit.
pub const MAX_WATCHERS: usize = 20;
/// Bytes of unsent lines a watcher may have before new lines are dropped.
const QUEUE_BYTES: usize = 256 * 1024;

/// Event types, as bits.
pub mod kind {
    /// `fetchers`: every key a read looked up.
    pub const FETCHERS: u32 = 1;
    /// `mutations`: every store attempt and its outcome.
    pub const MUTATIONS: u32 = 2;
    /// `evictions`: items evicted to make room.
    pub const EVICTIONS: u32 = 4;
    /// `connevents`: connections opened and closed.
    pub const CONNEVENTS: u32 = 8;
    /// `deletions`: items deleted by a client.
    pub const DELETIONS: u32 = 16;
    /// `sysevents`: background work (here, the flash tier's compaction).
    pub const SYSEVENTS: u32 = 32;
}

/// Why a `watch` command was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WatchError {
    /// A type memcached does not know (memcached answers a bare `ERROR`).
    #[error("unknown watch type")]
    UnknownType,
    /// [`MAX_WATCHERS`] are already watching.
    #[error("log watcher limit reached")]
    TooMany,
}

/// Parses the types of a `watch` command; a bare `watch` means `fetchers`.
pub fn parse_kinds(args: &[u8]) -> Result<u32, WatchError> {
    let mut kinds = 0;
    for t in args.split(|&b| b == b' ').filter(|t| !t.is_empty()) {
        kinds |= match t {
            b"fetchers" => kind::FETCHERS,
            b"mutations" => kind::MUTATIONS,
            b"evictions" => kind::EVICTIONS,
            b"connevents" => kind::CONNEVENTS,
            b"deletions" => kind::DELETIONS,
            b"sysevents" => kind::SYSEVENTS,
            _ => return Err(WatchError::UnknownType),
        };
    }
    Ok(if kinds == 0 { kind::FETCHERS } else { kinds })
}

/// A connection that watches.
pub struct Watcher {
    kinds: u32,
    /// Lines not yet sent.
    queue: Mutex<Vec<u8>>,
    /// Lines lost since the last one delivered.
    skipped: AtomicU64,
    ready: Notify,
}

impl Watcher {
    /// Waits until lines are queued, then moves them into `out` (which it clears first).
    pub async fn next_lines(&self, out: &mut Vec<u8>) {
        loop {
            {
                let mut q = self.queue.lock();
                if !q.is_empty() {
                    out.clear();
                    std::mem::swap(out, &mut *q);
                    return;
                }
            }
            self.ready.notified().await;
        }
    }

    fn push(&self, line: &[u8]) {
        // A worker never waits for a watcher: a busy queue loses the line like a full one.
        let Some(mut q) = self.queue.try_lock() else {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if q.len() + line.len() + 32 > QUEUE_BYTES {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let skipped = self.skipped.swap(0, Ordering::Relaxed);
        if skipped > 0 {
            let _ = writeln!(q, "skipped={skipped}");
        }
        q.extend_from_slice(line);
        drop(q);
        self.ready.notify_one();
    }
}

/// Every watcher, and the union of the types they watch.
#[derive(Default)]
pub struct Watchers {
    active: AtomicU32,
    gid: AtomicU64,
    list: Mutex<Vec<Arc<Watcher>>>,
}

/// A registered watcher; unregistered on drop.
pub struct WatchHandle<'a> {
    watchers: &'a Watchers,
    /// The watcher.
    pub watcher: Arc<Watcher>,
}

impl Drop for WatchHandle<'_> {
    fn drop(&mut self) {
        let mut list = self.watchers.list.lock();
        list.retain(|w| !Arc::ptr_eq(w, &self.watcher));
        self.watchers.recompute(&list);
    }
}

impl Watchers {
    /// Registers a watcher of `kinds`.
    pub fn add(&self, kinds: u32) -> Result<WatchHandle<'_>, WatchError> {
        let mut list = self.list.lock();
        if list.len() >= MAX_WATCHERS {
            return Err(WatchError::TooMany);
        }
        let watcher = Arc::new(Watcher {
            kinds,
            queue: Mutex::new(Vec::new()),
            skipped: AtomicU64::new(0),
            ready: Notify::new(),
        });
        list.push(watcher.clone());
        self.recompute(&list);
        Ok(WatchHandle {
            watchers: self,
            watcher,
        })
    }

    fn recompute(&self, list: &[Arc<Watcher>]) {
        let kinds = list.iter().fold(0, |k, w| k | w.kinds);
        self.active.store(kinds, Ordering::Relaxed);
    }

    /// Connections watching now (`stats`' `log_watchers`).
    pub fn count(&self) -> usize {
        self.list.lock().len()
    }

    /// Whether anyone watches `kind`: the whole cost of an event nobody watches.
    #[inline]
    pub fn watching(&self, kind: u32) -> bool {
        self.active.load(Ordering::Relaxed) & kind != 0
    }

    /// Sends one event of `kind` to its watchers. `body` writes what follows
    /// `ts=... gid=... ` (e.g. `type=item_get key=...`), without the newline.
    ///
    /// Inlined to its check: every get and set calls it, and nearly always nobody
    /// watches, so the call itself was most of what an unwatched event cost.
    #[inline]
    pub fn emit(&self, kind: u32, body: impl FnOnce(&mut Vec<u8>)) {
        if self.watching(kind) {
            self.emit_watched(kind, body);
        }
    }

    #[inline(never)]
    fn emit_watched(&self, kind: u32, body: impl FnOnce(&mut Vec<u8>)) {
        let gid = self.gid.fetch_add(1, Ordering::Relaxed) + 1;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let mut line = Vec::with_capacity(160);
        let _ = write!(
            line,
            "ts={}.{:06} gid={gid} ",
            now.as_secs(),
            now.subsec_micros()
        );
        body(&mut line);
        line.push(b'\n');
        for w in self.list.lock().iter().filter(|w| w.kinds & kind != 0) {
            w.push(&line);
        }
    }
}

impl Watchers {
    /// A read looked up `key` (memcached's `item_get` line).
    #[inline]
    pub fn fetched(&self, key: &[u8], found: Option<usize>, cfd: u64) {
        self.emit(kind::FETCHERS, |l| {
            l.extend_from_slice(b"type=item_get key=");
            uri_encode(key, l);
            let (status, cls, size) = match found {
                Some(size) => ("found", 1, size),
                None => ("not_found", 0, 0),
            };
            let _ = write!(l, " status={status} clsid={cls} cfd={cfd} size={size}");
        });
    }

    /// A store of `key` ended with `status` (memcached's `item_store` line; `ttl` 0 for
    /// none).
    #[inline]
    pub fn stored(&self, key: &[u8], status: &str, cmd: &str, ttl: u32, size: usize, cfd: u64) {
        self.emit(kind::MUTATIONS, |l| {
            l.extend_from_slice(b"type=item_store key=");
            uri_encode(key, l);
            let _ = write!(
                l,
                " status={status} cmd={cmd} ttl={ttl} clsid=1 cfd={cfd} size={size}"
            );
        });
    }

    /// An item was evicted to make room (memcached's `eviction` line: whether it was ever
    /// fetched, seconds it had left (-1: none), seconds since last access).
    #[inline]
    pub fn evicted(&self, item: &shoal_store::Item<'_>) {
        self.emit(kind::EVICTIONS, |l| {
            l.extend_from_slice(b"type=eviction key=");
            uri_encode(item.key(), l);
            let fetch = if item.fetched() { "yes" } else { "no" };
            let ttl = item.ttl().map_or(-1, i64::from);
            let _ = write!(
                l,
                " fetch={fetch} ttl={ttl} la={} clsid=1 size={}",
                item.idle_seconds(),
                item.value_len()
            );
        });
    }

    /// What the flash tier did: memcached's `extwrite` line (an eviction-type event) or
    /// its compaction lines (system events).
    pub fn flash(&self, event: &shoal_store::FlashEvent<'_>) {
        use shoal_store::FlashEvent;
        match *event {
            FlashEvent::Write {
                key,
                fetched,
                ttl,
                idle,
            } => self.emit(kind::EVICTIONS, |l| {
                l.extend_from_slice(b"type=extwrite key=");
                uri_encode(key, l);
                let fetch = if fetched { "yes" } else { "no" };
                let ttl = ttl.map_or(-1, i64::from);
                let _ = write!(l, " fetch={fetch} ttl={ttl} la={idle} clsid=1 bucket=0");
            }),
            FlashEvent::FragInfo { ratio, bytes } => self.emit(kind::SYSEVENTS, |l| {
                let _ = write!(l, "type=compact_fraginfo ratio={ratio:.2} bytes={bytes}");
            }),
            FlashEvent::CompactStart { page, version } => {
                self.emit(kind::SYSEVENTS, |l| {
                    let _ = write!(l, "type=compact_start id={page} version={version}");
                });
                self.emit(kind::SYSEVENTS, |l| {
                    let _ = write!(l, "type=compact_read_start id={page} offset=0");
                });
            }
            FlashEvent::CompactEnd {
                page,
                offset,
                rescues,
                skipped,
            } => {
                // Nothing is lost: a value compaction cannot move now stays where it is,
                // for the next pass (memcached loses those it finds no buffer for).
                self.emit(kind::SYSEVENTS, |l| {
                    let _ = write!(
                        l,
                        "type=compact_read_end id={page} offset={offset} rescues={rescues} \
                         rescues_realloc=0 lost=0 lost_oom=0 skipped={skipped}"
                    );
                });
                self.emit(kind::SYSEVENTS, |l| {
                    let _ = write!(l, "type=compact_end id={page}");
                });
            }
        }
    }

    /// A client deleted `key`, whose value was `size` bytes (memcached's `deleted` line;
    /// `cmd` is `delete` or `md`).
    #[inline]
    pub fn deleted(&self, key: &[u8], cmd: &str, size: usize) {
        self.emit(kind::DELETIONS, |l| {
            l.extend_from_slice(b"type=deleted key=");
            uri_encode(key, l);
            let _ = write!(l, " cmd={cmd} clsid=1 size={size}");
        });
    }

    /// A connection opened (`reason` None) or closed; `addr` as `stats conns` shows it
    /// (`tcp:<ip>:<port>` or `unix`).
    pub fn conn_event(&self, addr: &str, closed: Option<&str>, cfd: u64) {
        self.emit(kind::CONNEVENTS, |l| {
            let (rip, rport, transport) = match addr.strip_prefix("tcp:") {
                Some(a) => match a.rsplit_once(':') {
                    Some((ip, port)) => (ip.trim_matches(['[', ']']), port, "tcp"),
                    None => (a, "0", "tcp"),
                },
                None => ("unix", "0", "local"),
            };
            let _ = match closed {
                None => write!(
                    l,
                    "type=conn_new rip={rip} rport={rport} transport={transport} cfd={cfd}"
                ),
                Some(reason) => write!(
                    l,
                    "type=conn_close rip={rip} rport={rport} transport={transport} \
                     reason={reason} cfd={cfd}"
                ),
            };
        });
    }
}

/// memcached's `uriencode`, which its log lines and `metadump` show keys in: every byte
/// but ASCII letters, digits and `-._~` as `%XX`.
pub fn uri_encode(key: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in key {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b);
        } else {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_as_memcached() {
        assert_eq!(parse_kinds(b""), Ok(kind::FETCHERS));
        assert_eq!(
            parse_kinds(b"fetchers mutations"),
            Ok(kind::FETCHERS | kind::MUTATIONS)
        );
        assert_eq!(parse_kinds(b"bogus"), Err(WatchError::UnknownType));
    }

    #[test]
    fn events_reach_only_their_watchers_and_a_full_queue_skips() {
        let ws = Watchers::default();
        assert!(!ws.watching(kind::FETCHERS));
        let h = ws.add(kind::MUTATIONS).expect("add");
        assert!(ws.watching(kind::MUTATIONS) && !ws.watching(kind::FETCHERS));
        ws.emit(kind::FETCHERS, |l| l.extend_from_slice(b"type=item_get"));
        ws.emit(kind::MUTATIONS, |l| l.extend_from_slice(b"type=item_store"));
        let text = String::from_utf8(h.watcher.queue.lock().clone()).expect("utf8");
        assert!(text.starts_with("ts="), "{text}");
        assert!(text.ends_with(" type=item_store\n"), "{text}");
        assert_eq!(text.lines().count(), 1);
        // Fill the queue: later lines are lost and counted, then reported.
        let big = vec![b'x'; 1000];
        for _ in 0..400 {
            ws.emit(kind::MUTATIONS, |l| l.extend_from_slice(&big));
        }
        let skipped = h.watcher.skipped.load(Ordering::Relaxed);
        assert!(skipped > 100, "{skipped}");
        h.watcher.queue.lock().clear();
        ws.emit(kind::MUTATIONS, |l| l.extend_from_slice(b"after"));
        let text = String::from_utf8(h.watcher.queue.lock().clone()).expect("utf8");
        assert!(text.starts_with(&format!("skipped={skipped}\n")), "{text}");
        drop(h);
        assert!(!ws.watching(kind::MUTATIONS));
    }

    #[test]
    fn at_most_twenty_watchers() {
        let ws = Watchers::default();
        let hs: Vec<_> = (0..MAX_WATCHERS)
            .map(|_| ws.add(kind::FETCHERS).expect("add"))
            .collect();
        assert_eq!(ws.add(kind::FETCHERS).err(), Some(WatchError::TooMany));
        drop(hs);
        assert!(ws.add(kind::FETCHERS).is_ok());
    }

    #[test]
    fn keys_are_uri_encoded_as_memcached_does() {
        let mut out = Vec::new();
        uri_encode(b"a%20b c/d-e.f_g~h", &mut out);
        assert_eq!(out, b"a%2520b%20c%2Fd-e.f_g~h");
    }
}
