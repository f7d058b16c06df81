//! The command line as clap reads it: memcached 1.6's flags, long names and defaults,
//! plus shoald's own options. Validation into [`Settings`](super::Settings) is `validate`'s.

use super::VERSION;
use clap::Parser;
use std::path::PathBuf;

/// Command-line options. Names, short flags and defaults follow memcached 1.6's `-h`,
/// except that shoald listens on 127.0.0.1 unless told otherwise.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "shoald",
    version = VERSION,
    about = "shoald: a drop-in memcached server (text, meta and binary protocols)",
    disable_version_flag = true,
    after_help = "With --config FILE, options are read from FILE first (memcached.conf's \
syntax, as Debian's /etc/memcached.conf: one option per line, # comments); options given \
on the command line win over the file's.",
    // getopt semantics, as memcached: a repeated option's last value wins.
    args_override_self = true
)]
pub struct Args {
    /// Read options from FILE first, in memcached.conf's syntax (Debian's
    /// /etc/memcached.conf: one option per line, `#` comments, shell quoting; `-d` and
    /// `logfile` lines ignored). Options given on the command line win over the file's;
    /// `-o` keys add up.
    #[arg(long = "config", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// TCP port to listen on (0: no TCP listener; -1: any free port), as in memcached
    /// [default: 11211, or the -U port when only -U is given].
    #[arg(short = 'p', long = "port", allow_negative_numbers = true)]
    pub port: Option<i32>,
    /// UDP port for memcached's UDP protocol, on the -l address (0: none; -1: any free
    /// port). Given without -p, TCP listens on the same port, as in memcached.
    #[arg(
        short = 'U',
        long = "udp-port",
        default_value_t = 0,
        allow_negative_numbers = true
    )]
    pub udp_port: i32,
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
    /// Preallocate all of -m at startup, advised for transparent huge pages.
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
    /// Extended options, memcached's `-o key=value,...` form, e.g. `ext_path=PATH:SIZE` for
    /// the flash tier (docs/compatibility.md lists every key).
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
    /// Log line format on stderr: text, json, journal (systemd's: `<N>` priority prefixes,
    /// no timestamps) or auto (journal when stderr is the journal, as under systemd, else
    /// text).
    #[arg(long = "log-format", value_name = "FORMAT", default_value = "auto")]
    pub log_format: shoal_net::logging::LogFormat,
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

#[cfg(test)]
mod tests {
    use super::parse_size;
    use crate::config::testing::settings;
    use crate::config::{HashAlgorithm, Protocol, Tunables};
    use std::net::IpAddr;
    use std::path::PathBuf;

    #[test]
    fn defaults_are_memcacheds_except_listen() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.port, Some(11211));
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
    fn ports_follow_memcacheds_rules() {
        let ports = |args: &[&str]| settings(args).map(|s| (s.port, s.udp_port));
        // 0 turns a transport off, -1 asks for any free port.
        assert_eq!(ports(&["-p", "0"]), Ok((None, None)));
        assert_eq!(ports(&["-p", "-1"]), Ok((Some(0), None)));
        assert_eq!(ports(&["-U", "-1"]), Ok((Some(0), Some(0))));
        // -U alone moves TCP to the UDP port; with -p each keeps its own.
        assert_eq!(ports(&["-U", "11222"]), Ok((Some(11222), Some(11222))));
        assert_eq!(ports(&["-p", "-1", "-U", "9"]), Ok((Some(0), Some(9))));
        assert_eq!(ports(&["-p", "5", "-U", "0"]), Ok((Some(5), None)));
        assert_eq!(ports(&["-U", "0"]), Ok((Some(11211), None)));
        // -p 0 turns off the ports -l names too.
        let s = settings(&["-p", "0", "-l", "127.0.0.1:7,127.0.0.2:8"]).unwrap();
        assert_eq!((s.port, s.extra_listen.len()), (None, 0));
        assert!(settings(&["-p", "70000"]).is_err());
        assert!(settings(&["-p", "-2"]).is_err());
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
            (Some(1234), 128 << 20, 10, 2)
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
        assert_eq!((s.port, s.conn_limit, s.threads), (Some(1), 9, 2));
        assert_eq!(s.protocol, Protocol::Binary);
        assert_eq!((s.reqs_per_event, s.backlog, s.napi_ids), (7, 8, Some(2)));
        assert_eq!((s.max_item_size, s.unix_mask), (512 << 10, 0o755));
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
}
