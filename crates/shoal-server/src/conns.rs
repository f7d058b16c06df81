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

impl ConnInfo {
    /// Records whether the connection waits for the rest of a value. Stored only when it
    /// changes, so the request path does not write a shared line for every command.
    pub fn set_reading_value(&self, reading: bool) {
        if self.reading_value.load(Ordering::Relaxed) != reading {
            self.reading_value.store(reading, Ordering::Relaxed);
        }
    }

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
