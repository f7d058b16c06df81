//! The validated settings shoald runs with (and `stats settings` reports), and the small
//! types they are made of.

use super::{Extstore, Inert, Tunables};
use std::net::IpAddr;
use std::path::PathBuf;

/// Which protocols connections may speak (memcached's `-B`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// Each connection's first byte decides: 0x80 starts the binary protocol, anything
    /// else text and meta (memcached's default, `auto`).
    #[default]
    Auto,
    /// Text and meta commands only (`-B ascii`; the default with `-Y`).
    Ascii,
    /// Binary protocol only (`-B binary`; the default with `-S`).
    Binary,
}

impl Protocol {
    /// The name `stats settings` reports as `binding_protocol`, as memcached does.
    pub fn stat_name(self) -> &'static str {
        match self {
            Protocol::Auto => "auto-negotiate",
            Protocol::Ascii => "ascii",
            Protocol::Binary => "binary",
        }
    }
}

/// memcached's `-o hash_algorithm`. shoald's index uses its own hash whatever is chosen
/// (the choice never reaches clients: key distribution is the client's hash), so this is
/// recorded and reported only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HashAlgorithm {
    /// memcached 1.6's default.
    #[default]
    Murmur3,
    /// memcached 1.4's default (and `-o no_modern`'s).
    Jenkins,
    /// xxHash3.
    Xxh3,
}

impl HashAlgorithm {
    /// memcached's name for it.
    pub fn name(self) -> &'static str {
        match self {
            HashAlgorithm::Murmur3 => "murmur3",
            HashAlgorithm::Jenkins => "jenkins",
            HashAlgorithm::Xxh3 => "xxh3",
        }
    }
}

/// memcached's `ssl_*` options, whether or not `-Z` turned TLS on (memcached accepts and
/// reports them either way).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SslOptions {
    /// `ssl_chain_cert` / `--tls-cert`.
    pub chain_cert: Option<PathBuf>,
    /// `ssl_key` / `--tls-key`.
    pub key: Option<PathBuf>,
    /// `ssl_ca_cert`.
    pub ca_cert: Option<PathBuf>,
    /// `ssl_verify_mode`: 0 none, 1 request, 2 require, 3 once.
    pub verify_mode: u8,
    /// `ssl_keyformat` (1: PEM, the only format shoald reads).
    pub keyformat: u8,
    /// `ssl_ciphers`, an OpenSSL cipher list.
    pub ciphers: Option<String>,
    /// `ssl_wbuf_size` in bytes.
    pub wbuf_size: u32,
    /// `ssl_session_cache`.
    pub session_cache: bool,
    /// `ssl_kernel_tls`.
    pub kernel_tls: bool,
    /// `ssl_min_version`: 0 TLS 1.0, 1 TLS 1.1, 2 TLS 1.2, 3 TLS 1.3.
    pub min_version: u8,
}

impl Default for SslOptions {
    /// memcached 1.6's defaults.
    fn default() -> SslOptions {
        SslOptions {
            chain_cert: None,
            key: None,
            ca_cert: None,
            verify_mode: 0,
            keyformat: 1,
            ciphers: None,
            wbuf_size: 16 * 1024,
            session_cache: false,
            kernel_tls: false,
            min_version: 2,
        }
    }
}

impl SslOptions {
    /// `ssl_min_version` as memcached names it in `stats settings`.
    pub fn min_version_name(&self) -> &'static str {
        match self.min_version {
            0 => "tlsv1.0",
            1 => "tlsv1.1",
            2 => "tlsv1.2",
            _ => "tlsv1.3",
        }
    }
}

/// TLS settings (memcached's -Z with the ssl_* options).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// Certificate chain, PEM.
    pub cert: PathBuf,
    /// Private key, PEM.
    pub key: PathBuf,
    /// CA certificates for verifying client certificates, PEM.
    pub ca: Option<PathBuf>,
    /// memcached's ssl_verify_mode: 0 none, 1 request, 2 require, 3 once (as 2).
    pub verify_mode: u8,
    /// memcached's ssl_min_version: 0..=2 allow TLS 1.2 (rustls has nothing older),
    /// 3 asks for TLS 1.3 only.
    pub min_version: u8,
}

/// Validated settings the server runs with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Address to bind.
    pub listen: IpAddr,
    /// TCP port (`Some(0)`: any free port, memcached's `-p -1`; `None`: no TCP listener,
    /// memcached's `-p 0`).
    pub port: Option<u16>,
    /// `-o debug_time`: the `debugtime` command moves the server clock, as in memcached's
    /// debug build (`memcached-debug`). Off by default: it lets any client expire items.
    pub debug_time: bool,
    /// Further `-l` addresses after the first (`-l a,b` or repeated `-l`), each listened on
    /// as well, as memcached listens on every one.
    pub extra_listen: Vec<std::net::SocketAddr>,
    /// Unix socket path (replaces TCP when set).
    pub unix_socket: Option<PathBuf>,
    /// Unix socket permission mask.
    pub unix_mask: u32,
    /// Item memory in bytes.
    pub memory_limit: usize,
    /// Connection limit.
    pub conn_limit: usize,
    /// Worker threads.
    pub threads: usize,
    /// Largest item in bytes.
    pub max_item_size: usize,
    /// CAS uniques enabled.
    pub cas_enabled: bool,
    /// Evict when full.
    pub evictions: bool,
    /// flush_all allowed.
    pub flush_enabled: bool,
    /// shutdown allowed.
    pub shutdown_enabled: bool,
    /// Verbosity level.
    pub verbose: u8,
    /// Listen backlog.
    pub backlog: u32,
    /// Requests per connection turn.
    pub reqs_per_event: usize,
    /// Close connections idle this many seconds (0 = never).
    pub idle_timeout: u64,
    /// Bytes all connections together may hold in read buffers beyond their fixed 16 KB
    /// (memcached's `-o read_buf_mem_limit`, given there in megabytes). 0: as much as
    /// `-m`, so stalled senders can at most double the configured memory.
    pub read_buf_mem_limit: usize,
    /// Scan for expired items in the background.
    pub lru_crawler: bool,
    /// Initial index size hint, log2 of items (memcached's hashpower).
    pub hashpower: Option<u8>,
    /// UDP port (`Some(0)`: any free port, `-U -1`; `None`: no UDP, `-U 0`).
    pub udp_port: Option<u16>,
    /// SASL password database, when SASL is required.
    pub sasl_pwdb: Option<PathBuf>,
    /// ASCII authentication file, when required.
    pub auth_file: Option<PathBuf>,
    /// TLS, when enabled.
    pub tls: Option<TlsSettings>,
    /// Every `ssl_*` option as given (what `stats settings` reports, with or without -Z).
    pub ssl: SslOptions,
    /// Which protocols a connection may speak (`-B`). The connection loop consults this
    /// when it sees a connection's first byte: `Ascii` refuses binary requests, `Binary`
    /// refuses text and meta ones, `Auto` serves both.
    pub protocol: Protocol,
    /// The user `-u` names: shoald assumes its identity after binding, when started as
    /// root (as memcached, it is ignored otherwise).
    pub user: Option<String>,
    /// `-D`: the delimiter between key prefixes and ids in per-prefix stats.
    pub prefix_delimiter: char,
    /// Per-prefix stats collection (`-D` turns it on, as `stats detail on` does).
    pub detail_enabled: bool,
    /// `stats cachedump` and `lru_crawler metadump` allowed (`-X` turns them off).
    pub dump_enabled: bool,
    /// `watch` allowed (`-W` turns it off).
    pub watch_enabled: bool,
    /// `-k`: lock all memory with mlockall at startup.
    pub lock_memory: bool,
    /// `-r`: raise the core file limit (and stay dumpable after `-u`).
    pub enable_coredumps: bool,
    /// `-L`: all of `-m` preallocated at startup (with huge pages advised).
    pub large_pages: bool,
    /// `-e`: memcached's memory file for warm restarts.
    pub memory_file: Option<PathBuf>,
    /// `-N`: number of NAPI ids.
    pub napi_ids: Option<u32>,
    /// `-o hash_algorithm` (recorded and reported; the index uses its own hash).
    pub hash_algorithm: HashAlgorithm,
    /// `maxconns_fast` (memcached's default; `no_maxconns_fast` clears it).
    pub maxconns_fast: bool,
    /// memcached's slab/LRU/logging tunables, reported but without effect.
    pub tunables: Tunables,
    /// memcached's extstore options (the flash tier, `flash`).
    pub extstore: Extstore,
    /// Options given that change nothing in shoald, in the order given, with why.
    pub inert: Vec<(String, Inert)>,
    /// `--metrics-listen`: where to serve Prometheus metrics.
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// `--io-uring` / `-o io_uring`: the io_uring data path was asked for (it is used
    /// where the kernel supports it; see `shoal_net::uring`).
    pub io_uring: bool,
    /// `-o event_loop=epoll|tokio`: what runs the worker threads when io_uring is not in
    /// use (the io_uring data path needs tokio's runtime).
    pub event_loop: shoal_net::Executor,
    /// `-o zero_copy_min=BYTES`: hits at least this long are sent from segment memory
    /// rather than copied into the reply (`-o no_zero_copy`: `usize::MAX`, never).
    pub zero_copy_min: usize,
    /// `-o hugepages` (implied by `-L`) / `-o no_hugepages` (the default otherwise): segment
    /// memory is one reservation advised for transparent huge pages, or heap allocations
    /// segment by segment.
    pub huge_pages: bool,
}

impl Settings {
    /// The read-buffer budget in bytes: `read_buf_mem_limit`, or `-m` when that is 0.
    pub fn read_buffer_budget(&self) -> usize {
        match self.read_buf_mem_limit {
            0 => self.memory_limit,
            n => n,
        }
    }

    /// One line naming every option given that has no effect, grouped by reason, or
    /// `None` when there are none. The binary logs it once at startup.
    pub fn inert_summary(&self) -> Option<String> {
        super::inert::summary(&self.inert)
    }

    /// Records that option `name` was accepted without effect, and why.
    pub(super) fn note_inert(&mut self, name: impl Into<String>, why: Inert) {
        self.inert.push((name.into(), why));
    }
}
