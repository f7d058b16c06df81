//! shoald's command line, compatible with memcached 1.6's flags and `-o` keys.
//!
//! Every flag and `-o` key memcached 1.6 accepts is accepted here, with memcached's
//! validation, error wording and exit statuses, so a memcached command line (Debian's
//! `/etc/memcached.conf`, a systemd unit, a container entrypoint) starts shoald unchanged.
//! Options that tune parts of memcached shoald does not have (slab classes, LRU queues,
//! extstore, ...) are validated and shown in `stats settings` but change nothing; they are
//! collected in [`Settings::inert`] so the binary can say so once at startup.

use clap::Parser;
use std::net::{IpAddr, Ipv4Addr, ToSocketAddrs};
use std::path::PathBuf;

/// The version string shoald reports (`version`, `stats`): memcached's protocol level it
/// implements, so clients that gate features on the version (meta commands need 1.6)
/// enable them, followed by Shoal's own version.
pub const VERSION: &str = concat!("1.6.21-shoal-", env!("CARGO_PKG_VERSION"));

/// sysexits' EX_USAGE, memcached's status for contradictory options.
pub const EX_USAGE: u8 = 64;
/// sysexits' EX_NOUSER, memcached's status when the `-u` user does not exist.
pub const EX_NOUSER: u8 = 67;
/// sysexits' EX_OSERR, memcached's status when the OS refuses a setup step.
pub const EX_OSERR: u8 = 71;

/// memcached's slab page size, which its `slab_chunk_max` checks refer to.
const SLAB_PAGE_SIZE: u32 = 1024 * 1024;
/// memcached's default `slab_chunk_max`: half a slab page.
const SLAB_CHUNK_MAX_DEFAULT: u32 = SLAB_PAGE_SIZE / 2;
/// memcached's slab class alignment: consecutive `slab_sizes` differ by more than this.
const CHUNK_ALIGN_BYTES: u32 = 8;
/// memcached's MAX_NUMBER_OF_SLAB_CLASSES (64) less the class it keeps for itself.
const MAX_SLAB_SIZES: usize = 62;

/// Command-line options. Names, short flags and defaults follow memcached 1.6's `-h`,
/// except that shoald listens on 127.0.0.1 unless told otherwise.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "shoald",
    version = VERSION,
    about = "shoald: a drop-in memcached server (text, meta and binary protocols)",
    disable_version_flag = true,
    // getopt semantics, as memcached: a repeated option's last value wins.
    args_override_self = true
)]
pub struct Args {
    /// TCP port to listen on (0: any free port).
    #[arg(short = 'p', long = "port", default_value_t = 11211)]
    pub port: u16,
    /// UDP port; shoald serves TCP only, so anything but 0 is ignored with a warning.
    #[arg(short = 'U', long = "udp-port", default_value_t = 0)]
    pub udp_port: u16,
    /// Listen on a unix socket at PATH instead of TCP.
    #[arg(short = 's', long = "unix-socket")]
    pub unix_socket: Option<PathBuf>,
    /// Permission mask for the unix socket, in octal.
    #[arg(short = 'a', long = "unix-mask", default_value = "700", value_parser = parse_octal)]
    pub unix_mask: u32,
    /// Allow the shutdown command.
    #[arg(short = 'A', long = "enable-shutdown")]
    pub enable_shutdown: bool,
    /// Interface to listen on: ADDR, ADDR:PORT, [V6]:PORT or * (repeatable, comma
    /// separated, as memcached; shoald serves one address). Default 127.0.0.1: memcached
    /// listens on every interface, shoald only on loopback unless told otherwise.
    #[arg(short = 'l', long = "listen", action = clap::ArgAction::Append)]
    pub listen: Vec<String>,
    /// Run in the background.
    #[arg(short = 'd', long = "daemon")]
    pub daemon: bool,
    /// Raise the core file size limit to the maximum.
    #[arg(short = 'r', long = "enable-coredumps")]
    pub enable_coredumps: bool,
    /// Assume the identity of USER after binding (only when started as root).
    #[arg(short = 'u', long = "user")]
    pub user: Option<String>,
    /// Item memory in megabytes.
    #[arg(short = 'm', long = "memory-limit", default_value_t = 64)]
    pub memory_limit: u64,
    /// Return an error instead of evicting when memory is full.
    #[arg(short = 'M', long = "disable-evictions")]
    pub disable_evictions: bool,
    /// Most simultaneous connections.
    #[arg(short = 'c', long = "conn-limit", default_value_t = 1024)]
    pub conn_limit: usize,
    /// Lock all memory (mlockall), so the cache is never swapped out.
    #[arg(short = 'k', long = "lock-memory")]
    pub lock_memory: bool,
    /// Verbose logging (-vv: every command; -vvv: the same).
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Print the license and exit.
    #[arg(short = 'i', long = "license")]
    pub license: bool,
    /// Print the version and exit.
    #[arg(short = 'V', long = "version")]
    pub version: bool,
    /// Write the process id to this file.
    #[arg(short = 'P', long = "pidfile")]
    pub pidfile: Option<PathBuf>,
    /// memcached's slab chunk growth factor (accepted; shoald has no slab classes).
    #[arg(short = 'f', long = "slab-growth-factor")]
    pub growth_factor: Option<f64>,
    /// memcached's smallest slab chunk (accepted; shoald has no slab classes).
    #[arg(short = 'n', long = "slab-min-size")]
    pub slab_min_size: Option<u32>,
    /// Try to use large memory pages (shoald relies on transparent huge pages).
    #[arg(short = 'L', long = "enable-largepages")]
    pub large_pages: bool,
    /// Delimiter between key prefixes and ids for per-prefix stats.
    #[arg(short = 'D')]
    pub prefix_delimiter: Option<String>,
    /// Worker threads (default: number of cores).
    #[arg(short = 't', long = "threads")]
    pub threads: Option<usize>,
    /// Most requests served from one connection before others get a turn.
    #[arg(short = 'R', long = "max-reqs-per-event", default_value_t = 20)]
    pub reqs_per_event: usize,
    /// Disable CAS uniques (gets returns 0).
    #[arg(short = 'C', long = "disable-cas")]
    pub disable_cas: bool,
    /// Listen backlog.
    #[arg(short = 'b', long = "listen-backlog", default_value_t = 1024)]
    pub backlog: u32,
    /// Protocol connections may speak: ascii, binary or auto.
    #[arg(short = 'B', long = "protocol")]
    pub protocol: Option<String>,
    /// Largest item, with k/m suffixes.
    #[arg(short = 'I', long = "max-item-size", default_value = "1m", value_parser = parse_size)]
    pub max_item_size: usize,
    /// Require SASL authentication (binary protocol only; text connections are refused).
    #[arg(short = 'S', long = "enable-sasl")]
    pub sasl: bool,
    /// SASL password database (`user:password` lines); defaults to $MEMCACHED_SASL_PWDB.
    #[arg(long = "sasl-pwdb")]
    pub sasl_pwdb: Option<PathBuf>,
    /// Refuse flush_all.
    #[arg(short = 'F', long = "disable-flush-all")]
    pub disable_flush_all: bool,
    /// Disable `stats cachedump` and `lru_crawler metadump`.
    #[arg(short = 'X', long = "disable-dumping")]
    pub disable_dumping: bool,
    /// Disable `watch` (live logging).
    #[arg(short = 'W', long = "disable-watch")]
    pub disable_watch: bool,
    /// Require ASCII authentication against this `user:password` file.
    #[arg(short = 'Y', long = "auth-file")]
    pub auth_file: Option<PathBuf>,
    /// Keep item memory in this file (tmpfs/hugetlbfs) for warm restarts: SIGUSR1 saves
    /// and stops, the next start with the same settings finds the cache (memcached's -e).
    #[arg(short = 'e', long = "memory-file")]
    pub memory_file: Option<PathBuf>,
    /// Serve TLS on the TCP port (needs a certificate and key).
    #[arg(short = 'Z', long = "enable-ssl")]
    pub tls: bool,
    /// TLS certificate chain (PEM); same as -o ssl_chain_cert=FILE.
    #[arg(long = "tls-cert")]
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM); same as -o ssl_key=FILE.
    #[arg(long = "tls-key")]
    pub tls_key: Option<PathBuf>,
    /// Extended options, memcached's `-o key=value,...` form (see the README for the keys).
    #[arg(short = 'o', long = "extended", value_delimiter = ',')]
    pub extended: Vec<String>,
    /// Number of NAPI ids (accepted; shoald does not steer connections by NAPI id).
    #[arg(short = 'N', long = "napi-ids", visible_alias = "napi_ids")]
    pub napi_ids: Option<i64>,
    /// Serve Prometheus metrics (`GET /metrics`, HTTP/1.1) on ADDR:PORT (off by default).
    #[arg(long = "metrics-listen", value_name = "ADDR:PORT")]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Serve connections on the io_uring data path (reads and writes submitted in
    /// batches), where the kernel supports it; else the epoll path, with a warning. Also
    /// `-o io_uring`.
    #[arg(long = "io-uring")]
    pub io_uring: bool,
    /// Log line format on stderr: text or json.
    #[arg(long = "log-format", value_name = "FORMAT", default_value = "text")]
    pub log_format: shoal_net::logging::LogFormat,
}

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

/// Why an accepted option changes nothing in shoald.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inert {
    /// It tunes memcached's slab allocator, LRU queues or hash table maintenance, which
    /// shoald's segment store replaces.
    Segments,
    /// It configures extstore, which shoald does not have.
    Extstore,
    /// It sizes memcached's log buffers behind `watch`; shoald sizes its own.
    Watch,
    /// It turns on item-size statistics (`stats sizes`), which shoald does not collect.
    Stats,
    /// It enables NIC or socket features shoald does not use.
    Network,
    /// It is an OpenSSL knob with no rustls equivalent.
    Tls,
    /// It controls memcached's seccomp sandbox, which shoald does not have.
    Sandbox,
    /// memcached 1.6 ignores it as well.
    Deprecated,
    /// shoald always behaves as `maxconns_fast` (refuse over-limit connections at once).
    MaxconnsFast,
}

impl Inert {
    /// The explanation printed with the options.
    pub fn reason(self) -> &'static str {
        match self {
            Inert::Segments => {
                "they tune memcached's slab classes, LRU queues and hash table, which \
                 shoald's segment store replaces"
            }
            Inert::Extstore => "shoald has no extstore; items live in memory only",
            Inert::Watch => "shoald sizes the buffers behind watch itself",
            Inert::Stats => "shoald does not track item sizes for stats sizes",
            Inert::Network => "shoald does not use NAPI ids or socket marks",
            Inert::Tls => "TLS is rustls: its own cipher suites and buffers, no kernel TLS",
            Inert::Sandbox => "shoald has no seccomp sandbox",
            Inert::Deprecated => "memcached 1.6 ignores it too",
            Inert::MaxconnsFast => {
                "shoald always refuses connections over -c at once (maxconns_fast)"
            }
        }
    }
}

/// memcached's slab, LRU, crawler and logging tunables. shoald has none of these
/// mechanisms; the values are validated as memcached validates them and reported in
/// `stats settings` under memcached's names, so tools and configuration management see
/// what they set.
#[derive(Debug, Clone, PartialEq)]
pub struct Tunables {
    /// `-f`: slab chunk growth factor.
    pub growth_factor: f64,
    /// `-n`: smallest slab chunk for key, value and flags.
    pub chunk_size: u32,
    /// `slab_chunk_max`, when given (bytes).
    pub slab_chunk_max: Option<u32>,
    /// `no_chunked_items` (or `no_modern`): chunk max is a whole slab page.
    pub no_chunked_items: bool,
    /// `slab_sizes`: explicit slab class sizes.
    pub slab_sizes: Vec<u32>,
    /// `slab_reassign`.
    pub slab_reassign: bool,
    /// `slab_automove` (0..=2).
    pub slab_automove: u8,
    /// `slab_automove_ratio`.
    pub slab_automove_ratio: f64,
    /// `slab_automove_window`.
    pub slab_automove_window: u32,
    /// `lru_maintainer`: memcached's LRU maintainer thread.
    pub lru_maintainer: bool,
    /// Segmented (hot/warm/cold) LRU, on with the maintainer.
    pub lru_segmented: bool,
    /// `hot_lru_pct`.
    pub hot_lru_pct: u32,
    /// `warm_lru_pct`.
    pub warm_lru_pct: u32,
    /// `hot_max_factor`.
    pub hot_max_factor: f64,
    /// `warm_max_factor`.
    pub warm_max_factor: f64,
    /// Whether `temporary_ttl` was given (memcached's temp LRU).
    pub temp_lru: bool,
    /// `temporary_ttl` in seconds.
    pub temporary_ttl: u32,
    /// `tail_repair_time` in seconds (0: off).
    pub tail_repair_time: u32,
    /// `lru_crawler_sleep` in microseconds.
    pub lru_crawler_sleep: u32,
    /// `lru_crawler_tocrawl` (0: unlimited).
    pub lru_crawler_tocrawl: u32,
    /// Hash table expansion (`no_hashexpand` turns it off).
    pub hash_expand: bool,
    /// `watcher_logbuf_size` in bytes.
    pub watcher_logbuf_size: u32,
    /// `worker_logbuf_size` in bytes.
    pub worker_logbuf_size: u32,
    /// `track_sizes`.
    pub track_sizes: bool,
    /// `drop_privileges` (memcached's seccomp sandbox).
    pub drop_privileges: bool,
    /// `sock_cookie_id`.
    pub sock_cookie_id: Option<u32>,
}

impl Default for Tunables {
    /// memcached 1.6's defaults.
    fn default() -> Tunables {
        Tunables {
            growth_factor: 1.25,
            chunk_size: 48,
            slab_chunk_max: None,
            no_chunked_items: false,
            slab_sizes: Vec::new(),
            slab_reassign: true,
            slab_automove: 1,
            slab_automove_ratio: 0.8,
            slab_automove_window: 30,
            lru_maintainer: true,
            lru_segmented: true,
            hot_lru_pct: 20,
            warm_lru_pct: 40,
            hot_max_factor: 0.2,
            warm_max_factor: 2.0,
            temp_lru: false,
            temporary_ttl: 61,
            tail_repair_time: 0,
            lru_crawler_sleep: 100,
            lru_crawler_tocrawl: 0,
            hash_expand: true,
            watcher_logbuf_size: 256 * 1024,
            worker_logbuf_size: 64 * 1024,
            track_sizes: false,
            drop_privileges: false,
            sock_cookie_id: None,
        }
    }
}

impl Tunables {
    /// `slab_chunk_max` as memcached reports it: as given, else a whole page with
    /// `no_chunked_items`, else half a page.
    pub fn slab_chunk_max(&self) -> u32 {
        match (self.slab_chunk_max, self.no_chunked_items) {
            (Some(n), _) => n,
            (None, true) => SLAB_PAGE_SIZE,
            (None, false) => SLAB_CHUNK_MAX_DEFAULT,
        }
    }
}

/// memcached's extstore options (`ext_*`, `slab_automove_freeratio`). shoald has no
/// extstore; they are validated and, once any is given, shown in `stats settings` as an
/// extstore build of memcached shows them.
#[derive(Debug, Clone, PartialEq)]
pub struct Extstore {
    /// Whether any extstore option was given (a memcached built without extstore prints
    /// none of them, which is what shoald shows otherwise).
    pub configured: bool,
    /// `ext_path` values, `PATH:SIZE[:...]`.
    pub paths: Vec<String>,
    /// `ext_page_size` in bytes.
    pub page_size: u32,
    /// `ext_wbuf_size` in bytes.
    pub wbuf_size: u32,
    /// `ext_threads`.
    pub threads: u32,
    /// `ext_io_depth`.
    pub io_depth: u32,
    /// `ext_item_size`.
    pub item_size: u32,
    /// `ext_item_age`.
    pub item_age: u32,
    /// `ext_low_ttl`.
    pub low_ttl: u32,
    /// `ext_recache_rate`.
    pub recache_rate: u32,
    /// `ext_compact_under`.
    pub compact_under: u32,
    /// `ext_drop_under`.
    pub drop_under: u32,
    /// `ext_max_sleep` in microseconds.
    pub max_sleep: u32,
    /// `ext_max_frag`.
    pub max_frag: f64,
    /// `ext_drop_unread`.
    pub drop_unread: bool,
    /// `slab_automove_freeratio`.
    pub slab_automove_freeratio: f64,
}

impl Default for Extstore {
    /// memcached 1.6's defaults.
    fn default() -> Extstore {
        Extstore {
            configured: false,
            paths: Vec::new(),
            page_size: 64 * 1024 * 1024,
            wbuf_size: 4 * 1024 * 1024,
            threads: 1,
            io_depth: 1,
            item_size: 512,
            item_age: u32::MAX,
            low_ttl: 0,
            recache_rate: 2000,
            compact_under: 0,
            drop_under: 0,
            max_sleep: 1_000_000,
            max_frag: 0.8,
            drop_unread: false,
            slab_automove_freeratio: 0.01,
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
    /// TCP port.
    pub port: u16,
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
    /// The -U port given (only 0 is served).
    pub udp_port: u16,
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
    /// `-L`: large pages were asked for.
    pub large_pages: bool,
    /// `-e`: memcached's memory file for warm restarts (not used yet).
    pub memory_file: Option<PathBuf>,
    /// `-N`: number of NAPI ids.
    pub napi_ids: Option<u32>,
    /// `-o hash_algorithm` (recorded and reported; the index uses its own hash).
    pub hash_algorithm: HashAlgorithm,
    /// `maxconns_fast` (memcached's default; `no_maxconns_fast` clears it).
    pub maxconns_fast: bool,
    /// memcached's slab/LRU/logging tunables, reported but without effect.
    pub tunables: Tunables,
    /// memcached's extstore options, reported but without effect.
    pub extstore: Extstore,
    /// Options given that change nothing in shoald, in the order given, with why.
    pub inert: Vec<(String, Inert)>,
    /// `--metrics-listen`: where to serve Prometheus metrics.
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// `--io-uring` / `-o io_uring`: the io_uring data path was asked for (it is used
    /// where the kernel supports it; see `shoal_net::uring`).
    pub io_uring: bool,
    /// `-o zero_copy_min=BYTES`: hits at least this long are sent from segment memory
    /// rather than copied into the reply (`-o no_zero_copy`: `usize::MAX`, never).
    pub zero_copy_min: usize,
}

impl Settings {
    /// The read-buffer budget in bytes: `read_buf_mem_limit`, or `-m` when that is 0.
    pub fn read_buffer_budget(&self) -> usize {
        match self.read_buf_mem_limit {
            0 => self.memory_limit,
            n => n,
        }
    }

    /// Whether a non-zero UDP port was asked for (shoald serves TCP only).
    pub fn udp_port_warning(&self) -> bool {
        self.udp_port != 0
    }

    /// One line naming every option given that has no effect, grouped by reason, or
    /// `None` when there are none. The binary logs it once at startup.
    pub fn inert_summary(&self) -> Option<String> {
        let mut groups: Vec<(Inert, Vec<&str>)> = Vec::new();
        for (name, why) in &self.inert {
            match groups.iter_mut().find(|(w, _)| w == why) {
                Some((_, names)) if names.contains(&name.as_str()) => {}
                Some((_, names)) => names.push(name),
                None => groups.push((*why, vec![name])),
            }
        }
        if groups.is_empty() {
            return None;
        }
        let parts: Vec<String> = groups
            .iter()
            .map(|(why, names)| format!("{} ({})", names.join(", "), why.reason()))
            .collect();
        Some(format!(
            "accepted for memcached compatibility, without effect: {}",
            parts.join("; ")
        ))
    }

    fn note_inert(&mut self, name: impl Into<String>, why: Inert) {
        self.inert.push((name.into(), why));
    }
}

/// A bad command line. Each kind exits with memcached's status for it
/// ([`ConfigError::exit_code`]); the messages are memcached's where it has one.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A bad value memcached rejects while reading its options (exit status 1).
    #[error("{0}")]
    Invalid(String),
    /// An `-o` key neither memcached 1.6 nor shoald knows (exit status 1).
    #[error("Illegal suboption \"{0}\"")]
    IllegalSuboption(String),
    /// Options that contradict each other or sizes that do not fit together; memcached
    /// exits with EX_USAGE (64) for these.
    #[error("{0}")]
    Usage(String),
}

impl ConfigError {
    /// memcached's exit status for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            ConfigError::Invalid(_) | ConfigError::IllegalSuboption(_) => 1,
            ConfigError::Usage(_) => EX_USAGE,
        }
    }
}

/// Parses `1m`, `512k`, `2048` (bytes) as memcached's -I does.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let (num, mult) = match s.as_bytes().last() {
        Some(b'k' | b'K') => (&s[..s.len() - 1], 1024),
        Some(b'm' | b'M') => (&s[..s.len() - 1], 1024 * 1024),
        _ => (s, 1),
    };
    let n: usize = num.parse().map_err(|_| format!("invalid size {s:?}"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("size {s:?} too large"))
}

fn parse_octal(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s, 8).map_err(|_| format!("invalid octal mask {s:?}"))
}

fn invalid(msg: impl Into<String>) -> ConfigError {
    ConfigError::Invalid(msg.into())
}

fn usage(msg: impl Into<String>) -> ConfigError {
    ConfigError::Usage(msg.into())
}

impl Args {
    /// Validates the options into [`Settings`], checking what memcached checks in the
    /// order it checks it, so the first complaint is the one memcached would make.
    pub fn settings(&self) -> Result<Settings, ConfigError> {
        // What memcached checks while reading each flag (exit status 1).
        if self.conn_limit == 0 {
            return Err(invalid("Maximum connections must be greater than 0"));
        }
        if self.reqs_per_event == 0 {
            return Err(invalid(
                "Number of requests per event must be greater than 0",
            ));
        }
        let mut tunables = Tunables::default();
        let mut inert = Vec::new();
        if let Some(f) = self.growth_factor {
            // Also refuses NaN and infinity, which atof would let through.
            if !f.is_finite() || f <= 1.0 {
                return Err(invalid("Factor must be greater than 1"));
            }
            tunables.growth_factor = f;
            inert.push(("-f".to_string(), Inert::Segments));
        }
        if let Some(n) = self.slab_min_size {
            if n == 0 {
                return Err(invalid("Chunk size must be greater than 0"));
            }
            tunables.chunk_size = n;
            inert.push(("-n".to_string(), Inert::Segments));
        }
        let threads = self
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(4, |n| n.get()));
        if threads == 0 {
            return Err(invalid("Number of threads must be greater than 0"));
        }
        if threads > 256 {
            return Err(invalid("Number of threads must be at most 256"));
        }
        let (prefix_delimiter, detail_enabled) = match &self.prefix_delimiter {
            // memcached takes the first character of the argument.
            Some(d) => match d.chars().next() {
                Some(c) => (c, true),
                None => return Err(invalid("No delimiter specified")),
            },
            None => (':', false),
        };
        let napi_ids = match self.napi_ids {
            Some(n) if n <= 0 => {
                return Err(invalid("Maximum number of NAPI IDs must be greater than 0"))
            }
            Some(n) => {
                inert.push(("-N".to_string(), Inert::Network));
                Some(u32::try_from(n).unwrap_or(u32::MAX))
            }
            None => None,
        };
        let protocol = match self.protocol.as_deref() {
            None => None,
            Some("auto") => Some(Protocol::Auto),
            Some("ascii") => Some(Protocol::Ascii),
            Some("binary") => Some(Protocol::Binary),
            Some(other) => {
                return Err(usage(format!(
                    "Invalid value for binding protocol: {other}\n -- should be one of auto, binary, or ascii"
                )))
            }
        };
        if self.memory_limit == 0 {
            return Err(usage("memory limit must be at least 1 MB"));
        }
        let memory_limit = usize::try_from(self.memory_limit)
            .ok()
            .and_then(|m| m.checked_mul(1 << 20))
            .ok_or_else(|| usage("memory limit too large"))?;
        let mut s = Settings {
            listen: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: self.port,
            extra_listen: Vec::new(),
            unix_socket: self.unix_socket.clone(),
            unix_mask: self.unix_mask,
            memory_limit,
            conn_limit: self.conn_limit,
            threads,
            max_item_size: self.max_item_size,
            cas_enabled: !self.disable_cas,
            evictions: !self.disable_evictions,
            flush_enabled: !self.disable_flush_all,
            shutdown_enabled: self.enable_shutdown,
            verbose: self.verbose,
            backlog: self.backlog,
            reqs_per_event: self.reqs_per_event,
            idle_timeout: 0,
            read_buf_mem_limit: 0,
            lru_crawler: true,
            hashpower: None,
            udp_port: self.udp_port,
            sasl_pwdb: None,
            auth_file: self.auth_file.clone(),
            tls: None,
            ssl: SslOptions {
                chain_cert: self.tls_cert.clone(),
                key: self.tls_key.clone(),
                ..SslOptions::default()
            },
            protocol: protocol.unwrap_or_default(),
            user: self.user.clone(),
            prefix_delimiter,
            detail_enabled,
            dump_enabled: !self.disable_dumping,
            watch_enabled: !self.disable_watch,
            lock_memory: self.lock_memory,
            enable_coredumps: self.enable_coredumps,
            large_pages: self.large_pages,
            memory_file: self.memory_file.clone(),
            napi_ids,
            hash_algorithm: HashAlgorithm::default(),
            maxconns_fast: true,
            tunables,
            extstore: Extstore::default(),
            inert,
            metrics_listen: self.metrics_listen,
            io_uring: self.io_uring,
            zero_copy_min: shoal_net::MIN_REFERENCED_VALUE,
        };
        for opt in &self.extended {
            apply_extended(&mut s, opt)?;
        }
        check_combinations(&s, protocol.is_some(), self.sasl)?;
        if self.sasl && protocol.is_none() {
            // memcached: SASL authenticates over the binary protocol only.
            s.protocol = Protocol::Binary;
        }
        if s.auth_file.is_some() && protocol.is_none() {
            // memcached: ASCII auth tokens are a text-protocol feature.
            s.protocol = Protocol::Ascii;
        }
        let mut listen = parse_listen(&self.listen, self.tls, s.port)?.into_iter();
        (s.listen, s.port) = listen
            .next()
            .unwrap_or((IpAddr::V4(Ipv4Addr::LOCALHOST), s.port));
        s.extra_listen = listen
            .map(|(ip, port)| std::net::SocketAddr::new(ip, port))
            .collect();
        if self.sasl {
            let pwdb = self
                .sasl_pwdb
                .clone()
                .or_else(|| std::env::var_os("MEMCACHED_SASL_PWDB").map(PathBuf::from))
                .ok_or_else(|| {
                    usage("-S needs a password database: --sasl-pwdb FILE or MEMCACHED_SASL_PWDB")
                })?;
            s.sasl_pwdb = Some(pwdb);
        }
        if self.tls {
            let (Some(cert), Some(key)) = (s.ssl.chain_cert.clone(), s.ssl.key.clone()) else {
                return Err(usage(
                    "-Z needs ssl_chain_cert and ssl_key (or --tls-cert and --tls-key)",
                ));
            };
            s.tls = Some(TlsSettings {
                cert,
                key,
                ca: s.ssl.ca_cert.clone(),
                verify_mode: s.ssl.verify_mode,
                min_version: s.ssl.min_version,
            });
        }
        Ok(s)
    }
}

/// memcached's checks made once every option is read (EX_USAGE on failure).
fn check_combinations(s: &Settings, protocol_given: bool, sasl: bool) -> Result<(), ConfigError> {
    let item = s.max_item_size;
    if item < 1024 {
        return Err(usage("Item max size cannot be less than 1024 bytes."));
    }
    if item > s.memory_limit / 2 {
        return Err(usage(
            "Cannot set item size limit higher than 1/2 of memory max.",
        ));
    }
    if item > 1 << 30 {
        return Err(usage("Cannot set item size limit higher than a gigabyte."));
    }
    let t = &s.tunables;
    // memcached refuses e.g. `-I 100k` because its default chunk size no longer fits;
    // shoald has no chunks, so only a slab_chunk_max the user gave is checked against -I.
    if let Some(chunk) = t.slab_chunk_max {
        let chunk_usize = chunk as usize;
        if chunk_usize > item {
            return Err(usage(format!(
                "slab_chunk_max (bytes: {chunk}) cannot be larger than -I (item_size_max {item})"
            )));
        }
        if !item.is_multiple_of(chunk_usize) {
            return Err(usage(format!(
                "-I (item_size_max: {item}) must be evenly divisible by slab_chunk_max (bytes: {chunk})"
            )));
        }
        if !SLAB_PAGE_SIZE.is_multiple_of(chunk) {
            return Err(usage(format!(
                "slab_chunk_max (bytes: {chunk}) must divide evenly into {SLAB_PAGE_SIZE} (slab_page_size)"
            )));
        }
    }
    let mut last = 0u32;
    for (i, &size) in t.slab_sizes.iter().enumerate() {
        if size < t.chunk_size || size > t.slab_chunk_max() {
            return Err(usage(format!("slab size {size} is out of valid range")));
        }
        if i > 0 && size <= last {
            return Err(usage(format!(
                "slab size {size} cannot be lower than or equal to a previous class size"
            )));
        }
        if i > 0 && size <= last + CHUNK_ALIGN_BYTES {
            return Err(usage(format!(
                "slab size {size} must be at least {CHUNK_ALIGN_BYTES} bytes larger than previous class"
            )));
        }
        if i + 1 >= MAX_SLAB_SIZES {
            return Err(usage("too many slab classes specified"));
        }
        last = size;
    }
    if t.hot_lru_pct + t.warm_lru_pct > 80 {
        return Err(usage(
            "hot_lru_pct + warm_lru_pct cannot be more than 80% combined",
        ));
    }
    if t.temp_lru && !t.lru_maintainer {
        return Err(usage("temporary_ttl requires lru_maintainer to be enabled"));
    }
    if let Some(n) = s.napi_ids {
        if n as usize > s.threads {
            return Err(usage(format!(
                "Number of napi_ids({n}) cannot be greater than number of threads({})",
                s.threads
            )));
        }
    }
    if sasl {
        if protocol_given && s.protocol != Protocol::Binary {
            return Err(usage(
                "ERROR: You cannot allow the ASCII protocol while using SASL.",
            ));
        }
        if s.udp_port != 0 {
            return Err(usage(
                "ERROR: Cannot enable UDP while using binary SASL authentication.",
            ));
        }
    }
    if s.auth_file.is_some() {
        if protocol_given && s.protocol != Protocol::Ascii {
            return Err(usage(
                "ERROR: You cannot allow the BINARY protocol while using ascii authentication tokens.",
            ));
        }
        if s.udp_port != 0 {
            return Err(usage(
                "Cannot use UDP with ascii authentication enabled (-U 0 to disable)",
            ));
        }
    }
    Ok(())
}

/// One `-o key[=value]`, with memcached's messages for a missing or unreadable value.
struct SubOpt<'a> {
    key: &'a str,
    value: Option<&'a str>,
}

impl SubOpt<'_> {
    /// The value, or memcached's `missing` message.
    fn text(&self, missing: &str) -> Result<&str, ConfigError> {
        self.value.ok_or_else(|| invalid(missing))
    }

    /// The value as a number; memcached's `missing` message without one, and its
    /// "could not parse" message for one that is not a number.
    fn number<T: std::str::FromStr>(&self, missing: &str) -> Result<T, ConfigError> {
        self.text(missing)?
            .trim()
            .parse()
            .map_err(|_| self.unparsable())
    }

    /// A finite float (memcached's atof takes NaN and infinity; nothing sensible does).
    fn float(&self, missing: &str) -> Result<f64, ConfigError> {
        let f: f64 = self.number(missing)?;
        if f.is_finite() {
            Ok(f)
        } else {
            Err(self.unparsable())
        }
    }

    /// A size memcached takes in units of `unit` bytes, as bytes.
    fn scaled(&self, missing: &str, unit: u32) -> Result<u32, ConfigError> {
        let n: u32 = self.number(missing)?;
        n.checked_mul(unit).ok_or_else(|| self.unparsable())
    }

    fn unparsable(&self) -> ConfigError {
        invalid(format!("could not parse argument to {}", self.key))
    }

    fn missing(&self) -> String {
        format!("Missing {} argument", self.key)
    }
}

/// Applies one `-o key[=value]` as memcached's getsubopt loop does: flags ignore a value,
/// the last occurrence of a key wins, and an unknown key is refused with memcached's
/// `Illegal suboption` message. Range checks are memcached's; the checks that relate
/// several options run after all of them ([`check_combinations`]).
fn apply_extended(s: &mut Settings, opt: &str) -> Result<(), ConfigError> {
    let opt = opt.trim();
    if opt.is_empty() {
        return Ok(());
    }
    let (key, value) = match opt.split_once('=') {
        Some((k, v)) => (k, Some(v)),
        None => (opt, None),
    };
    let o = SubOpt { key, value };
    let missing = o.missing();
    let t = &mut s.tunables;
    let mut inert = None;
    match key {
        // Options with an effect in shoald.
        "idle_timeout" => {
            s.idle_timeout = o.number("Missing numeric argument for idle_timeout")?;
        }
        "read_buf_mem_limit" => {
            let mb: u64 = o.number(&missing)?;
            s.read_buf_mem_limit = usize::try_from(mb)
                .ok()
                .and_then(|mb| mb.checked_mul(1024 * 1024))
                .ok_or_else(|| o.unparsable())?;
        }
        "lru_crawler" => s.lru_crawler = true,
        "no_lru_crawler" => s.lru_crawler = false,
        // shoald's own: the io_uring data path (not a memcached option).
        "io_uring" => s.io_uring = true,
        "no_io_uring" => s.io_uring = false,
        // shoald's own: values of this many bytes or more are sent from segment memory.
        "zero_copy_min" => {
            let n: u64 = o.number("Missing numeric argument for zero_copy_min")?;
            s.zero_copy_min = usize::try_from(n).map_err(|_| o.unparsable())?;
        }
        "no_zero_copy" => s.zero_copy_min = usize::MAX,
        "hashpower" => {
            let hp: i64 = o.number("Missing numeric argument for hashpower")?;
            if hp < 12 {
                return Err(invalid(format!(
                    "Initial hashtable multiplier of {hp} is too low"
                )));
            }
            let hp = u8::try_from(hp)
                .ok()
                .filter(|&hp| hp <= 32)
                .ok_or_else(|| {
                    invalid(format!(
                        "Initial hashtable multiplier of {hp} is too high\n\
                     Choose a value based on \"STAT hash_power_level\" from a running instance"
                    ))
                })?;
            s.hashpower = Some(hp);
        }
        // shoald's own spelling of -I, kept for existing configurations.
        "item_size_max" => {
            s.max_item_size = parse_size(o.text(&missing)?).map_err(|_| o.unparsable())?;
        }
        "maxconns_fast" => s.maxconns_fast = true,
        "no_maxconns_fast" => {
            s.maxconns_fast = false;
            inert = Some(Inert::MaxconnsFast);
        }
        "hash_algorithm" => {
            s.hash_algorithm = match o.text("Missing hash_algorithm argument")? {
                "murmur3" => HashAlgorithm::Murmur3,
                "jenkins" => HashAlgorithm::Jenkins,
                "xxh3" => HashAlgorithm::Xxh3,
                _ => {
                    return Err(invalid(
                        "Unknown hash_algorithm option (jenkins, murmur3, xxh3)",
                    ))
                }
            };
        }
        // No-ops in memcached 1.6 itself.
        "modern" | "inline_ascii_resp" | "no_inline_ascii_resp" => {}
        "no_modern" => {
            // memcached 1.4's defaults. Of these only the background crawler exists in
            // shoald; the rest is reported only.
            if t.slab_chunk_max.is_none() {
                t.no_chunked_items = true;
            }
            t.slab_reassign = false;
            t.slab_automove = 0;
            t.lru_segmented = false;
            t.lru_maintainer = false;
            s.maxconns_fast = false;
            s.hash_algorithm = HashAlgorithm::Jenkins;
            s.lru_crawler = false;
        }
        "resp_obj_mem_limit" => inert = Some(Inert::Deprecated),

        // memcached's slab allocator, LRU and hash table.
        "slab_reassign" => t.slab_reassign = true,
        "no_slab_reassign" => t.slab_reassign = false,
        "slab_automove" => {
            t.slab_automove = match value {
                None => 1,
                Some(_) => {
                    let n: i64 = o.number(&missing)?;
                    u8::try_from(n)
                        .ok()
                        .filter(|&n| n <= 2)
                        .ok_or_else(|| invalid("slab_automove must be between 0 and 2"))?
                }
            };
        }
        "no_slab_automove" => t.slab_automove = 0,
        "slab_automove_ratio" => {
            let r = o.float(&missing)?;
            if r <= 0.0 || r > 1.0 {
                return Err(invalid("slab_automove_ratio must be > 0 and < 1"));
            }
            t.slab_automove_ratio = r;
        }
        "slab_automove_window" => {
            let w: i64 = o.number(&missing)?;
            t.slab_automove_window = u32::try_from(w)
                .ok()
                .filter(|&w| w >= 3)
                .ok_or_else(|| invalid("slab_automove_window must be > 2"))?;
        }
        "slab_chunk_max" => {
            let n: u32 = o.number(&missing)?;
            if n == 0 {
                return Err(invalid(missing));
            }
            t.slab_chunk_max = Some(n);
        }
        "slab_sizes" => {
            t.slab_sizes = o
                .text(&missing)?
                .split('-')
                .map(|p| {
                    p.trim()
                        .parse()
                        .map_err(|_| usage(format!("slab size {p} is out of valid range")))
                })
                .collect::<Result<_, _>>()?;
        }
        "no_chunked_items" => t.no_chunked_items = true,
        "lru_maintainer" => {
            t.lru_maintainer = true;
            t.lru_segmented = true;
        }
        "no_lru_maintainer" => {
            t.lru_maintainer = false;
            t.lru_segmented = false;
        }
        "hot_lru_pct" | "warm_lru_pct" => {
            let pct: i64 = o.number(&missing)?;
            let pct = u32::try_from(pct)
                .ok()
                .filter(|p| (1..80).contains(p))
                .ok_or_else(|| invalid(format!("{key} must be > 1 and < 80")))?;
            if key == "hot_lru_pct" {
                t.hot_lru_pct = pct;
            } else {
                t.warm_lru_pct = pct;
            }
        }
        "hot_max_factor" | "warm_max_factor" => {
            let f = o.float(&missing)?;
            if f <= 0.0 {
                return Err(invalid(format!("{key} must be > 0")));
            }
            if key == "hot_max_factor" {
                t.hot_max_factor = f;
            } else {
                t.warm_max_factor = f;
            }
        }
        "temporary_ttl" => {
            t.temporary_ttl = o.number(&missing)?;
            t.temp_lru = true;
        }
        "tail_repair_time" => {
            let secs: i64 = o.number("Missing numeric argument for tail_repair_time")?;
            t.tail_repair_time = u32::try_from(secs)
                .ok()
                .filter(|&s| s >= 10)
                .ok_or_else(|| invalid("Cannot set tail_repair_time to less than 10 seconds"))?;
        }
        "lru_crawler_sleep" => {
            let us: i64 = o.number("Missing lru_crawler_sleep value")?;
            t.lru_crawler_sleep = u32::try_from(us)
                .ok()
                .filter(|&us| us <= 1_000_000)
                .ok_or_else(|| invalid("LRU crawler sleep must be between 0 and 1 second"))?;
        }
        "lru_crawler_tocrawl" => {
            o.text("Missing lru_crawler_tocrawl value")?;
            t.lru_crawler_tocrawl = o
                .number("Missing lru_crawler_tocrawl value")
                .map_err(|_| invalid("lru_crawler_tocrawl takes a numeric 32bit value"))?;
        }
        "no_hashexpand" => t.hash_expand = false,

        // memcached's logging, stats, sandbox and socket extras.
        "watcher_logbuf_size" => {
            t.watcher_logbuf_size = o.scaled(&missing, 1024)?;
            inert = Some(Inert::Watch);
        }
        "worker_logbuf_size" => {
            t.worker_logbuf_size = o.scaled(&missing, 1024)?;
            inert = Some(Inert::Watch);
        }
        "track_sizes" => t.track_sizes = true,
        "drop_privileges" | "no_drop_privileges" => {
            t.drop_privileges = key == "drop_privileges";
            inert = Some(Inert::Sandbox);
        }
        "sock_cookie_id" => {
            t.sock_cookie_id = Some(o.number(&missing)?);
            inert = Some(Inert::Network);
        }

        // TLS.
        "ssl_chain_cert" => s.ssl.chain_cert = Some(o.text(&missing)?.into()),
        "ssl_key" => s.ssl.key = Some(o.text(&missing)?.into()),
        "ssl_ca_cert" => s.ssl.ca_cert = Some(o.text(&missing)?.into()),
        "ssl_verify_mode" => {
            s.ssl.verify_mode = o
                .number(&missing)
                .ok()
                .filter(|&m: &u8| m <= 3)
                .ok_or_else(|| {
                    o.value.map_or_else(
                        || invalid(o.missing()),
                        |_| invalid("Invalid ssl_verify_mode. Use help to see valid options."),
                    )
                })?;
        }
        "ssl_min_version" => {
            let v = o
                .number(&missing)
                .ok()
                .filter(|&v: &u8| v <= 3)
                .ok_or_else(|| {
                    o.value.map_or_else(
                        || invalid(o.missing()),
                        |_| invalid("Invalid ssl_min_version. Use help to see valid options."),
                    )
                })?;
            // Enforced by tls.rs: rustls never negotiates below TLS 1.2, so 0..=2 mean
            // "1.2 or 1.3" and 3 means TLS 1.3 only.
            s.ssl.min_version = v;
        }
        "ssl_keyformat" => {
            let f: u8 = o.number(&missing)?;
            if f != 1 {
                return Err(invalid(format!(
                    "ssl_keyformat={f} is not supported: shoald reads PEM keys only (ssl_keyformat=1)"
                )));
            }
            s.ssl.keyformat = f;
        }
        "ssl_ciphers" => {
            s.ssl.ciphers = Some(o.text(&missing)?.to_string());
            inert = Some(Inert::Tls);
        }
        "ssl_wbuf_size" => {
            s.ssl.wbuf_size = o.scaled(&missing, 1024)?;
            inert = Some(Inert::Tls);
        }
        // rustls keeps a server-side session cache anyway.
        "ssl_session_cache" => s.ssl.session_cache = true,
        "ssl_kernel_tls" => {
            s.ssl.kernel_tls = true;
            inert = Some(Inert::Tls);
        }

        // extstore.
        k if k.starts_with("ext_") || k == "slab_automove_freeratio" => {
            apply_extstore(&mut s.extstore, &o)?;
            inert = Some(Inert::Extstore);
        }
        _ => return Err(ConfigError::IllegalSuboption(opt.to_string())),
    }
    let segments = matches!(
        key,
        "slab_reassign"
            | "no_slab_reassign"
            | "slab_automove"
            | "no_slab_automove"
            | "slab_automove_ratio"
            | "slab_automove_window"
            | "slab_chunk_max"
            | "slab_sizes"
            | "no_chunked_items"
            | "lru_maintainer"
            | "no_lru_maintainer"
            | "hot_lru_pct"
            | "warm_lru_pct"
            | "hot_max_factor"
            | "warm_max_factor"
            | "temporary_ttl"
            | "tail_repair_time"
            | "lru_crawler_sleep"
            | "lru_crawler_tocrawl"
            | "no_hashexpand"
    );
    if segments {
        inert = Some(Inert::Segments);
    }
    if let Some(why) = inert {
        s.note_inert(key, why);
    }
    Ok(())
}

/// Applies one extstore option with memcached's (storage.c) validation.
fn apply_extstore(e: &mut Extstore, o: &SubOpt<'_>) -> Result<(), ConfigError> {
    let missing = o.missing();
    match o.key {
        "ext_path" => {
            let v = o
                .value
                .ok_or_else(|| invalid("missing argument to ext_path, ie: ext_path=/d/file:5G"))?;
            if !valid_ext_path(v) {
                return Err(invalid("failed to parse ext_path argument"));
            }
            e.paths.push(v.to_string());
        }
        "ext_page_size" => e.page_size = o.scaled(&missing, 1024 * 1024)?,
        "ext_wbuf_size" => e.wbuf_size = o.scaled(&missing, 1024 * 1024)?,
        "ext_threads" => e.threads = o.number(&missing)?,
        "ext_io_depth" => e.io_depth = o.number(&missing)?,
        "ext_item_size" => e.item_size = o.number(&missing)?,
        "ext_item_age" => e.item_age = o.number(&missing)?,
        "ext_low_ttl" => e.low_ttl = o.number(&missing)?,
        "ext_recache_rate" => e.recache_rate = o.number(&missing)?,
        "ext_compact_under" => e.compact_under = o.number(&missing)?,
        "ext_drop_under" => e.drop_under = o.number(&missing)?,
        "ext_max_sleep" => e.max_sleep = o.number(&missing)?,
        "ext_max_frag" => e.max_frag = o.float(&missing)?,
        "slab_automove_freeratio" => e.slab_automove_freeratio = o.float(&missing)?,
        "ext_drop_unread" => e.drop_unread = true,
        _ => {
            let whole = match o.value {
                Some(v) => format!("{}={v}", o.key),
                None => o.key.to_string(),
            };
            return Err(ConfigError::IllegalSuboption(whole));
        }
    }
    e.configured = true;
    Ok(())
}

/// `PATH:SIZE[:...]` with SIZE a number and an optional K/M/G/T suffix, as memcached's
/// `storage_conf_parse` wants it.
fn valid_ext_path(v: &str) -> bool {
    let mut parts = v.split(':');
    let path = parts.next().unwrap_or_default();
    let Some(size) = parts.next() else {
        return false;
    };
    let digits = size.trim_end_matches(['k', 'K', 'm', 'M', 'g', 'G', 't', 'T']);
    !path.is_empty()
        && !digits.is_empty()
        && digits.len() + 1 >= size.len()
        && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Parses memcached's `-l` values (repeatable; each a `,`/`;` separated list of `ADDR`,
/// `ADDR:PORT`, `[V6]`, `[V6]:PORT`, a bare IPv6 address, `*` or a host name) into the
/// addresses and ports shoald binds, in order (`port` is `-p`, for entries without one).
/// Repeats of one address and port are folded, as memcached folds repeated `-l`s.
fn parse_listen(
    values: &[String],
    tls: bool,
    port: u16,
) -> Result<Vec<(IpAddr, u16)>, ConfigError> {
    let mut found: Vec<(IpAddr, u16)> = Vec::new();
    for spec in values.iter().flat_map(|v| v.split([',', ';'])) {
        let spec = spec.trim();
        if spec.is_empty() {
            continue;
        }
        let spec = match spec.strip_prefix("notls:") {
            Some(_) if !tls => {
                return Err(usage("'notls' option is valid only when SSL is enabled"))
            }
            Some(_) => {
                return Err(usage(format!(
                    "-l {spec}: shoald serves TLS on every listener, so a notls: listener \
                     is not supported"
                )))
            }
            None => spec,
        };
        let (host, named_port) = split_host_port(spec)?;
        let entry = (resolve_host(host)?, named_port.unwrap_or(port));
        if !found.contains(&entry) {
            found.push(entry);
        }
    }
    if found.is_empty() {
        found.push((IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    Ok(found)
}

/// Splits `-l` syntax into host and port the way memcached's `server_sockets` does.
fn split_host_port(spec: &str) -> Result<(&str, Option<u16>), ConfigError> {
    let port = |p: &str| -> Result<u16, ConfigError> {
        p.parse()
            .map_err(|_| invalid(format!("Invalid port number: \"{p}\"")))
    };
    if let Some(rest) = spec.strip_prefix('[') {
        let bad = || invalid(format!("Invalid IPV6 address: \"{spec}\""));
        let (host, after) = rest.split_once(']').ok_or_else(bad)?;
        return match after {
            "" => Ok((host, None)),
            _ => Ok((host, Some(port(after.strip_prefix(':').ok_or_else(bad)?)?))),
        };
    }
    match spec.split_once(':') {
        // Exactly one colon: HOST:PORT. More than one: an IPv6 address without a port.
        Some((host, p)) if !p.contains(':') => Ok((host, Some(port(p)?))),
        _ => Ok((spec, None)),
    }
}

/// The address for a `-l` host: an IP address, `*` (every IPv4 interface), `localhost`, or
/// a host name resolved as memcached resolves it (the first address, IPv4 preferred).
fn resolve_host(host: &str) -> Result<IpAddr, ConfigError> {
    let bad = || invalid(format!("invalid listen address {host:?}"));
    match host {
        "*" => return Ok(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
        "localhost" => return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        _ => {}
    }
    if let Ok(ip) = host.parse() {
        return Ok(ip);
    }
    // Only look up what could be a host name, so a typo fails at once, not after DNS.
    let hostname = !host.is_empty()
        && host.len() <= 253
        && host
            .split('.')
            .all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    if !hostname {
        return Err(bad());
    }
    let addrs: Vec<IpAddr> = (host, 0)
        .to_socket_addrs()
        .map_err(|_| bad())?
        .map(|a| a.ip())
        .collect();
    addrs
        .iter()
        .find(|ip| ip.is_ipv4())
        .or_else(|| addrs.first())
        .copied()
        .ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(args: &[&str]) -> Result<Settings, String> {
        let mut full = vec!["shoald"];
        full.extend_from_slice(args);
        let a = Args::try_parse_from(full).map_err(|e| e.to_string())?;
        a.settings().map_err(|e| e.to_string())
    }

    /// The error and exit status for `args`, which must fail validation (not parsing).
    fn refused(args: &[&str]) -> (String, u8) {
        let mut full = vec!["shoald"];
        full.extend_from_slice(args);
        let a = Args::try_parse_from(full).expect("parses");
        match a.settings() {
            Ok(_) => panic!("{args:?} accepted"),
            Err(e) => (e.to_string(), e.exit_code()),
        }
    }

    #[test]
    fn defaults_are_memcacheds_except_listen() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.port, 11211);
        assert_eq!(s.listen, IpAddr::from([127, 0, 0, 1]));
        assert_eq!(s.memory_limit, 64 << 20);
        assert_eq!(s.conn_limit, 1024);
        assert_eq!(s.max_item_size, 1 << 20);
        assert!(s.cas_enabled && s.evictions && s.flush_enabled && !s.shutdown_enabled);
        assert_eq!(s.protocol, Protocol::Auto);
        assert_eq!(s.hash_algorithm, HashAlgorithm::Murmur3);
        assert_eq!(s.tunables, Tunables::default());
        assert_eq!((s.prefix_delimiter, s.detail_enabled), (':', false));
        assert!(s.dump_enabled && s.watch_enabled && s.maxconns_fast);
        assert!(s.user.is_none() && s.memory_file.is_none() && s.napi_ids.is_none());
        assert!(s.inert.is_empty() && s.inert_summary().is_none());
    }

    #[test]
    fn memcached_style_flags() {
        let s = settings(&[
            "-p", "1234", "-m", "128", "-c", "10", "-t", "2", "-I", "2m", "-C", "-M", "-F", "-A",
            "-vv", "-U", "0",
        ])
        .unwrap();
        assert_eq!(
            (s.port, s.memory_limit, s.conn_limit, s.threads),
            (1234, 128 << 20, 10, 2)
        );
        assert_eq!(s.max_item_size, 2 << 20);
        assert!(!s.cas_enabled && !s.evictions && !s.flush_enabled && s.shutdown_enabled);
        assert_eq!(s.verbose, 2);
    }

    #[test]
    fn every_memcached_flag_is_accepted() {
        let s = settings(&[
            "-d",
            "-r",
            "-u",
            "memcache",
            "-k",
            "-vvv",
            "-P",
            "/tmp/x.pid",
            "-f",
            "1.5",
            "-n",
            "64",
            "-L",
            "-D",
            "/",
            "-R",
            "5",
            "-b",
            "64",
            "-B",
            "ascii",
            "-X",
            "-W",
            "-e",
            "/dev/shm/shoal",
            "-N",
            "2",
            "-t",
            "4",
        ])
        .unwrap();
        assert_eq!(s.user.as_deref(), Some("memcache"));
        assert!(s.lock_memory && s.enable_coredumps && s.large_pages);
        assert!(!s.dump_enabled && !s.watch_enabled);
        assert_eq!((s.prefix_delimiter, s.detail_enabled), ('/', true));
        assert_eq!(s.protocol, Protocol::Ascii);
        assert_eq!(s.memory_file, Some(PathBuf::from("/dev/shm/shoal")));
        assert_eq!(s.napi_ids, Some(2));
        assert_eq!((s.tunables.growth_factor, s.tunables.chunk_size), (1.5, 64));
        assert_eq!((s.verbose, s.reqs_per_event, s.backlog), (3, 5, 64));
        let summary = s.inert_summary().unwrap();
        for name in ["-f", "-n", "-N"] {
            assert!(summary.contains(name), "{name} in {summary}");
        }
        // -D's per-prefix stats and -X's dump switch exist in shoald.
        assert!(
            !summary.contains("-D") && !summary.contains("-X"),
            "{summary}"
        );
    }

    #[test]
    fn long_names_are_memcacheds() {
        let s = settings(&[
            "--port=1",
            "--udp-port=0",
            "--listen=127.0.0.1",
            "--memory-limit=32",
            "--conn-limit=9",
            "--threads=2",
            "--user=nobody",
            "--protocol=binary",
            "--enable-largepages",
            "--lock-memory",
            "--enable-coredumps",
            "--disable-dumping",
            "--disable-watch",
            "--memory-file=/tmp/m",
            "--slab-growth-factor=2",
            "--slab-min-size=96",
            "--extended=modern",
            "--max-reqs-per-event=7",
            "--listen-backlog=8",
            "--pidfile=/tmp/p",
            "--daemon",
            "--disable-cas",
            "--disable-evictions",
            "--disable-flush-all",
            "--enable-shutdown",
            "--max-item-size=512k",
            "--unix-mask=755",
            "--napi_ids=1",
            "--napi-ids=2",
            "--verbose",
        ])
        .unwrap();
        assert_eq!((s.port, s.conn_limit, s.threads), (1, 9, 2));
        assert_eq!(s.protocol, Protocol::Binary);
        assert_eq!((s.reqs_per_event, s.backlog, s.napi_ids), (7, 8, Some(2)));
        assert_eq!((s.max_item_size, s.unix_mask), (512 << 10, 0o755));
    }

    #[test]
    fn extended_options() {
        let s = settings(&["-o", "idle_timeout=5,no_lru_crawler,hashpower=20"]).unwrap();
        assert_eq!(s.idle_timeout, 5);
        assert!(!s.lru_crawler);
        assert_eq!(s.hashpower, Some(20));
        assert!(s.inert.is_empty(), "these all have an effect");
        assert!(settings(&["-o", "bogus=1"]).is_err());
        assert!(settings(&["-o", "idle_timeout=x"]).is_err());
    }

    #[test]
    fn data_path_options() {
        let s = settings(&[]).unwrap();
        assert!(!s.io_uring);
        assert_eq!(s.zero_copy_min, shoal_net::MIN_REFERENCED_VALUE);
        let s = settings(&["-o", "io_uring,zero_copy_min=1000"]).unwrap();
        assert!(s.io_uring);
        assert_eq!(s.zero_copy_min, 1000);
        assert!(settings(&["--io-uring"]).unwrap().io_uring);
        let s = settings(&["--io-uring", "-o", "no_io_uring,no_zero_copy"]).unwrap();
        assert!(!s.io_uring);
        assert_eq!(s.zero_copy_min, usize::MAX);
        assert!(settings(&["-o", "zero_copy_min=lots"]).is_err());
        assert!(s.inert.is_empty(), "these all have an effect");
    }

    #[test]
    fn memcached_tunables_are_stored_and_reported_inert() {
        let s = settings(&[
            "-o",
            "slab_reassign,slab_automove=2,slab_automove_ratio=0.5,slab_automove_window=10,\
             slab_chunk_max=16384,slab_sizes=100-200-300,lru_maintainer,hot_lru_pct=10,\
             warm_lru_pct=50,hot_max_factor=0.5,warm_max_factor=3,temporary_ttl=30,\
             tail_repair_time=60,lru_crawler_sleep=50,lru_crawler_tocrawl=9,no_hashexpand,\
             watcher_logbuf_size=10,worker_logbuf_size=20,track_sizes,hash_algorithm=xxh3,\
             ext_path=/mnt/x:1G,ext_wbuf_size=8,ext_max_frag=0.5,ext_drop_unread,\
             ssl_ciphers=HIGH,ssl_min_version=3,ssl_wbuf_size=32,ssl_session_cache,\
             drop_privileges,sock_cookie_id=7,no_maxconns_fast,read_buf_mem_limit=5,modern,\
             inline_ascii_resp,no_inline_ascii_resp,resp_obj_mem_limit=5",
        ])
        .unwrap();
        let t = &s.tunables;
        assert_eq!((t.slab_automove, t.slab_automove_window), (2, 10));
        assert_eq!(t.slab_chunk_max(), 16384);
        assert_eq!(t.slab_sizes, [100, 200, 300]);
        assert_eq!((t.hot_lru_pct, t.warm_lru_pct), (10, 50));
        assert!(t.temp_lru && t.temporary_ttl == 30 && t.tail_repair_time == 60);
        assert_eq!((t.lru_crawler_sleep, t.lru_crawler_tocrawl), (50, 9));
        assert!(!t.hash_expand && t.track_sizes && t.drop_privileges);
        assert_eq!(
            (t.watcher_logbuf_size, t.worker_logbuf_size),
            (10240, 20480)
        );
        assert_eq!(s.hash_algorithm, HashAlgorithm::Xxh3);
        assert!(s.extstore.configured);
        assert_eq!(s.extstore.wbuf_size, 8 << 20);
        assert_eq!(s.ssl.min_version_name(), "tlsv1.3");
        assert_eq!(s.ssl.wbuf_size, 32 << 10);
        assert_eq!(s.read_buf_mem_limit, 5 << 20);
        assert!(!s.maxconns_fast);
        let summary = s.inert_summary().unwrap();
        for name in [
            "slab_automove",
            "hot_lru_pct",
            "temporary_ttl",
            "no_hashexpand",
            "ext_path",
            "ssl_ciphers",
            "drop_privileges",
            "no_maxconns_fast",
            "resp_obj_mem_limit",
            "watcher_logbuf_size",
        ] {
            assert!(summary.contains(name), "{name} missing from {summary}");
        }
        for name in [
            "track_sizes",
            "read_buf_mem_limit",
            "modern",
            "hash_algorithm",
            "ssl_session_cache",
            "ssl_min_version",
        ] {
            assert!(
                !summary.contains(&format!(" {name}")),
                "{name} in {summary}"
            );
        }
        assert_eq!(summary.matches("segment store").count(), 1, "{summary}");
    }

    #[test]
    fn no_modern_restores_memcached_14_defaults() {
        let s = settings(&["-o", "no_modern"]).unwrap();
        let t = &s.tunables;
        assert!(!t.slab_reassign && t.slab_automove == 0 && !t.lru_maintainer);
        assert!(!t.lru_segmented && !s.maxconns_fast && !s.lru_crawler);
        assert_eq!(t.slab_chunk_max(), 1 << 20);
        assert_eq!(s.hash_algorithm, HashAlgorithm::Jenkins);
        // Without the maintainer memcached has no temporary LRU.
        let (msg, code) = refused(&["-o", "no_modern,temporary_ttl=30"]);
        assert_eq!(msg, "temporary_ttl requires lru_maintainer to be enabled");
        assert_eq!(code, EX_USAGE);
    }

    #[test]
    fn flag_options_ignore_a_value_as_getsubopt_does() {
        let s = settings(&["-o", "no_lru_crawler=1,maxconns_fast=0,modern=yes"]).unwrap();
        assert!(!s.lru_crawler && s.maxconns_fast);
    }

    #[test]
    fn memcached_wording_and_exit_statuses() {
        for (args, msg, code) in [
            (&["-o", "foo"][..], "Illegal suboption \"foo\"", 1),
            (&["-o", "idle_timeout=5,foo=1"], "Illegal suboption \"foo=1\"", 1),
            (&["-o", "lru_segmented"], "Illegal suboption \"lru_segmented\"", 1),
            (&["-o", "proxy_config=x"], "Illegal suboption \"proxy_config=x\"", 1),
            (&["-o", "ext_bogus=1"], "Illegal suboption \"ext_bogus=1\"", 1),
            (&["-o", "hashpower=5"], "Initial hashtable multiplier of 5 is too low", 1),
            (&["-o", "hashpower"], "Missing numeric argument for hashpower", 1),
            (&["-o", "slab_automove=3"], "slab_automove must be between 0 and 2", 1),
            (&["-o", "slab_automove_ratio=0"], "slab_automove_ratio must be > 0 and < 1", 1),
            (&["-o", "slab_automove_window=2"], "slab_automove_window must be > 2", 1),
            (&["-o", "tail_repair_time=9"], "Cannot set tail_repair_time to less than 10 seconds", 1),
            (&["-o", "hash_algorithm=md5"], "Unknown hash_algorithm option (jenkins, murmur3, xxh3)", 1),
            (&["-o", "hash_algorithm"], "Missing hash_algorithm argument", 1),
            (&["-o", "lru_crawler_sleep=2000000"], "LRU crawler sleep must be between 0 and 1 second", 1),
            (&["-o", "lru_crawler_tocrawl=x"], "lru_crawler_tocrawl takes a numeric 32bit value", 1),
            (&["-o", "hot_lru_pct=0"], "hot_lru_pct must be > 1 and < 80", 1),
            (&["-o", "hot_max_factor=0"], "hot_max_factor must be > 0", 1),
            (&["-o", "watcher_logbuf_size=x"], "could not parse argument to watcher_logbuf_size", 1),
            (&["-o", "read_buf_mem_limit=x"], "could not parse argument to read_buf_mem_limit", 1),
            (&["-o", "ssl_verify_mode=4"], "Invalid ssl_verify_mode. Use help to see valid options.", 1),
            (&["-o", "ssl_min_version=4"], "Invalid ssl_min_version. Use help to see valid options.", 1),
            (&["-o", "hot_lru_pct=60,warm_lru_pct=30"], "hot_lru_pct + warm_lru_pct cannot be more than 80% combined", 64),
            (&["-o", "slab_chunk_max=100"], "-I (item_size_max: 1048576) must be evenly divisible by slab_chunk_max (bytes: 100)", 64),
            (&["-o", "slab_chunk_max=2097152", "-I", "2m"], "slab_chunk_max (bytes: 2097152) must divide evenly into 1048576 (slab_page_size)", 64),
            (&["-o", "slab_sizes=100-104"], "slab size 104 must be at least 8 bytes larger than previous class", 64),
            (&["-o", "slab_sizes=200-100"], "slab size 100 cannot be lower than or equal to a previous class size", 64),
            (&["-f", "1"], "Factor must be greater than 1", 1),
            (&["-n", "0"], "Chunk size must be greater than 0", 1),
            (&["-t", "0"], "Number of threads must be greater than 0", 1),
            (&["-c", "0"], "Maximum connections must be greater than 0", 1),
            (&["-R", "0"], "Number of requests per event must be greater than 0", 1),
            (&["-D", ""], "No delimiter specified", 1),
            (&["-N", "0"], "Maximum number of NAPI IDs must be greater than 0", 1),
            (&["-N", "9", "-t", "4"], "Number of napi_ids(9) cannot be greater than number of threads(4)", 64),
            (&["-B", "foo"], "Invalid value for binding protocol: foo\n -- should be one of auto, binary, or ascii", 64),
            (&["-S", "--sasl-pwdb", "/x", "-B", "ascii"], "ERROR: You cannot allow the ASCII protocol while using SASL.", 64),
            (&["-Y", "/x", "-B", "auto"], "ERROR: You cannot allow the BINARY protocol while using ascii authentication tokens.", 64),
            (&["-Y", "/x", "-U", "5"], "Cannot use UDP with ascii authentication enabled (-U 0 to disable)", 64),
            (&["-I", "1000"], "Item max size cannot be less than 1024 bytes.", 64),
            (&["-I", "64m", "-m", "64"], "Cannot set item size limit higher than 1/2 of memory max.", 64),
            (&["-l", "notls:127.0.0.1"], "'notls' option is valid only when SSL is enabled", 64),
            (&["-l", "127.0.0.1:x"], "Invalid port number: \"x\"", 1),
            (&["-l", "[::1"], "Invalid IPV6 address: \"[::1\"", 1),
        ] {
            let (m, c) = refused(args);
            assert_eq!((m.as_str(), c), (msg, code), "{args:?}");
        }
    }

    #[test]
    fn protocol_follows_authentication_as_in_memcached() {
        let s = settings(&["-S", "--sasl-pwdb", "/x"]).unwrap();
        assert_eq!(s.protocol, Protocol::Binary);
        let s = settings(&["-S", "--sasl-pwdb", "/x", "-B", "binary"]).unwrap();
        assert_eq!(s.protocol, Protocol::Binary);
        let s = settings(&["-Y", "/x"]).unwrap();
        assert_eq!(s.protocol, Protocol::Ascii);
        let s = settings(&["-B", "auto"]).unwrap();
        assert_eq!(s.protocol.stat_name(), "auto-negotiate");
    }

    #[test]
    fn listen_syntax() {
        let l = |args: &[&str]| settings(args).map(|s| (s.listen.to_string(), s.port));
        assert_eq!(l(&["-l", "127.0.0.1"]), Ok(("127.0.0.1".into(), 11211)));
        assert_eq!(l(&["-l", "localhost"]), Ok(("127.0.0.1".into(), 11211)));
        assert_eq!(l(&["-l", "*"]), Ok(("0.0.0.0".into(), 11211)));
        assert_eq!(l(&["-l", "127.0.0.1:5"]), Ok(("127.0.0.1".into(), 5)));
        assert_eq!(l(&["-l", "[::1]:6"]), Ok(("::1".into(), 6)));
        assert_eq!(l(&["-l", "[::1]"]), Ok(("::1".into(), 11211)));
        assert_eq!(l(&["-l", "::1"]), Ok(("::1".into(), 11211)));
        // Repeats fold, as memcached folds them.
        assert_eq!(
            l(&["-l", "127.0.0.1", "-l", "127.0.0.1,127.0.0.1"]),
            Ok(("127.0.0.1".into(), 11211))
        );
        // An address given with and without the -p port is one listener.
        assert_eq!(
            l(&["-p", "7", "-l", "127.0.0.1", "-l", "127.0.0.1:7"]),
            Ok(("127.0.0.1".into(), 7))
        );
        // Several addresses: the first is `listen`, the others are listened on as well.
        let extra = |args: &[&str]| settings(args).map(|s| s.extra_listen);
        assert_eq!(
            extra(&["-l", "127.0.0.1", "-l", "127.0.0.1:7"]),
            Ok(vec!["127.0.0.1:7".parse().unwrap()])
        );
        assert_eq!(
            extra(&["-l", "127.0.0.1,::1,127.0.0.2"]),
            Ok(vec![
                "[::1]:11211".parse().unwrap(),
                "127.0.0.2:11211".parse().unwrap()
            ])
        );
        assert_eq!(extra(&["-l", "127.0.0.1"]), Ok(vec![]));
        assert!(l(&["-l", "not an address!"]).is_err());
    }

    #[test]
    fn repeated_options_last_wins() {
        let s = settings(&["-t", "2", "-m", "32", "-t", "3", "-v", "-v"]).unwrap();
        assert_eq!((s.threads, s.memory_limit, s.verbose), (3, 32 << 20, 2));
        let s = settings(&["-o", "idle_timeout=5", "-o", "no_lru_crawler"]).unwrap();
        assert_eq!(s.idle_timeout, 5);
        assert!(!s.lru_crawler);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert_eq!(parse_size("512k"), Ok(512 << 10));
        assert_eq!(parse_size("2048"), Ok(2048));
        assert!(parse_size("1x").is_err());
        assert!(
            settings(&["-I", "64m", "-m", "64"]).is_err(),
            "item > half of memory"
        );
        // memcached refuses -I 100k (its default chunk size no longer fits); shoald has
        // no chunks and serves it.
        assert_eq!(settings(&["-I", "100k"]).unwrap().max_item_size, 100 << 10);
    }

    #[test]
    fn ext_path_syntax() {
        assert!(valid_ext_path("/mnt/d1/extstore:1G"));
        assert!(valid_ext_path("/x:64m:compact"));
        assert!(!valid_ext_path("/x"));
        assert!(!valid_ext_path("/x:"));
        assert!(!valid_ext_path(":1G"));
        assert!(!valid_ext_path("/x:1GB"));
    }
}
