//! The registry of open connections (`stats conns`, `watch connevents`): what is known
//! about each, and why it ended.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

/// What `stats conns` shows about one connection.
#[derive(Debug)]
pub struct ConnInfo {
    /// Connection id (memcached shows the file descriptor).
    pub id: u64,
    /// Peer address.
    pub addr: String,
    /// Rel time of the last command.
    pub last_cmd: AtomicU32,
    /// Why the connection ended (a [`CloseReason`] as u8), for `watch connevents`.
    close_reason: AtomicU8,
    /// Whether a command line was read and its value is still arriving (`stats conns`'
    /// `conn_nread`).
    reading_value: AtomicBool,
}

/// Why a connection ended, in memcached's `conn_close` words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum CloseReason {
    /// The client closed it or quit.
    Normal = 0,
    /// A read or write failed, or the request could not be served.
    Error = 1,
    /// `-o idle_timeout` passed without a request.
    IdleTimeout = 2,
    /// The server is shutting down.
    Shutdown = 3,
}

/// A connection's own view of its [`ConnInfo`]: the id, and what it last published, so
/// that a request touches the shared entry only when something changed.
///
/// Why: the entry lives in an allocation of its own, read by other threads (`stats
/// conns`); reading or writing it for every request was a cache miss per request at
/// depth 1, where the connection's own state is already in cache. `last_cmd` changes
/// once a second at most, `reading_value` only around values that arrive in parts.
#[derive(Debug)]
pub struct PublishedInfo<'a> {
    shared: &'a ConnInfo,
    id: u64,
    last_cmd: u32,
    reading_value: bool,
}

impl<'a> PublishedInfo<'a> {
    /// The view of `shared`, as it stands.
    pub fn new(shared: &'a ConnInfo) -> PublishedInfo<'a> {
        PublishedInfo {
            shared,
            id: shared.id,
            last_cmd: shared.last_cmd.load(Ordering::Relaxed),
            reading_value: shared.reading_value.load(Ordering::Relaxed),
        }
    }

    /// The connection's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The shared entry.
    pub fn shared(&self) -> &'a ConnInfo {
        self.shared
    }

    /// A command arrived at `now` (rel time): published when the second changed.
    pub fn command_at(&mut self, now: u32) {
        if self.last_cmd != now {
            self.last_cmd = now;
            self.shared.last_cmd.store(now, Ordering::Relaxed);
        }
    }

    /// Whether the connection waits for the rest of a value: published when it changed.
    pub fn set_reading_value(&mut self, reading: bool) {
        if self.reading_value != reading {
            self.reading_value = reading;
            self.shared.reading_value.store(reading, Ordering::Relaxed);
        }
    }
}

impl ConnInfo {
    /// memcached's name for what the connection is doing, as `stats conns` shows it to
    /// another connection: reading a value (`conn_nread`) or waiting for a command
    /// (`conn_read`).
    pub fn state(&self) -> &'static str {
        if self.reading_value.load(Ordering::Relaxed) {
            "conn_nread"
        } else {
            "conn_read"
        }
    }

    /// Records why the connection is ending.
    pub fn closing(&self, reason: CloseReason) {
        self.close_reason.store(reason as u8, Ordering::Relaxed);
    }

    /// Why the connection ended, as `watch` shows it.
    pub fn close_reason(&self) -> &'static str {
        match self.close_reason.load(Ordering::Relaxed) {
            1 => "error",
            2 => "idle_timeout",
            3 => "shutdown",
            _ => "normal",
        }
    }
}

/// Open connections.
#[derive(Default)]
pub struct ConnRegistry {
    next: AtomicU64,
    open: Mutex<BTreeMap<u64, Arc<ConnInfo>>>,
}

impl ConnRegistry {
    /// A registry whose connection ids start after `listeners`: `stats conns` lists the
    /// listening sockets first under ids `1..=listeners`, as memcached lists its listening
    /// file descriptors below its connections'.
    pub fn after_listeners(listeners: usize) -> ConnRegistry {
        ConnRegistry {
            next: AtomicU64::new(listeners as u64),
            ..ConnRegistry::default()
        }
    }

    /// Records a new connection.
    pub fn open(&self, addr: String) -> Arc<ConnInfo> {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let info = Arc::new(ConnInfo {
            id,
            addr,
            last_cmd: AtomicU32::new(0),
            close_reason: AtomicU8::new(CloseReason::Normal as u8),
            reading_value: AtomicBool::new(false),
        });
        self.open.lock().insert(id, info.clone());
        info
    }

    /// A connection that is not listed (`stats conns` shows it apart) under `id`: the UDP
    /// socket's, which every datagram shares.
    pub fn detached(&self, id: u64, addr: String) -> Arc<ConnInfo> {
        Arc::new(ConnInfo {
            id,
            addr,
            last_cmd: AtomicU32::new(0),
            close_reason: AtomicU8::new(CloseReason::Normal as u8),
            reading_value: AtomicBool::new(false),
        })
    }

    /// Forgets a closed connection.
    pub fn close(&self, info: &ConnInfo) {
        self.open.lock().remove(&info.id);
    }

    /// A snapshot of open connections.
    pub fn snapshot(&self) -> Vec<Arc<ConnInfo>> {
        self.open.lock().values().cloned().collect()
    }
}
