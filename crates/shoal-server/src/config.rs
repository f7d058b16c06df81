//! shoald's command line, compatible with memcached's flags.

use clap::Parser;
use std::net::IpAddr;
use std::path::PathBuf;

/// The version string shoald reports (`version`, `stats`): memcached's protocol level it
/// implements, so clients that gate features on the version (meta commands need 1.6)
/// enable them, followed by Shoal's own version.
pub const VERSION: &str = concat!("1.6.21-shoal-", env!("CARGO_PKG_VERSION"));

/// Command-line options. Names and defaults follow memcached's, except that shoald listens
/// on 127.0.0.1 unless told otherwise.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "shoald",
    version = VERSION,
    about = "shoald: a drop-in memcached server (text and meta protocols)",
    disable_version_flag = true,
    // getopt semantics, as memcached: a repeated option's last value wins.
    args_override_self = true
)]
pub struct Args {
    /// TCP port to listen on.
    #[arg(short = 'p', long = "port", default_value_t = 11211)]
    pub port: u16,
    /// Interface to listen on (memcached listens on every interface by default; shoald only
    /// on loopback, so an unconfigured cache is never exposed to the network).
    #[arg(short = 'l', long = "listen", default_value = "127.0.0.1")]
    pub listen: String,
    /// Item memory in megabytes.
    #[arg(short = 'm', long = "memory-limit", default_value_t = 64)]
    pub memory_limit: u64,
    /// Most simultaneous connections.
    #[arg(short = 'c', long = "conn-limit", default_value_t = 1024)]
    pub conn_limit: usize,
    /// Worker threads (default: number of cores).
    #[arg(short = 't', long = "threads")]
    pub threads: Option<usize>,
    /// Largest item, with k/m suffixes (memcached's -I).
    #[arg(short = 'I', long = "max-item-size", default_value = "1m", value_parser = parse_size)]
    pub max_item_size: usize,
    /// UDP port; only 0 (off) is supported.
    #[arg(short = 'U', long = "udp-port", default_value_t = 0)]
    pub udp_port: u16,
    /// Disable CAS uniques (gets returns 0).
    #[arg(short = 'C', long = "disable-cas")]
    pub disable_cas: bool,
    /// Return an error instead of evicting when memory is full.
    #[arg(short = 'M', long = "disable-evictions")]
    pub disable_evictions: bool,
    /// Refuse flush_all.
    #[arg(short = 'F', long = "disable-flush-all")]
    pub disable_flush_all: bool,
    /// Allow the shutdown command.
    #[arg(short = 'A', long = "enable-shutdown")]
    pub enable_shutdown: bool,
    /// Listen on a unix socket at PATH instead of TCP.
    #[arg(short = 's', long = "unix-socket")]
    pub unix_socket: Option<PathBuf>,
    /// Permission mask for the unix socket, in octal.
    #[arg(short = 'a', long = "unix-mask", default_value = "700", value_parser = parse_octal)]
    pub unix_mask: u32,
    /// Verbose logging (-vv for every command).
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Listen backlog.
    #[arg(short = 'b', long = "listen-backlog", default_value_t = 1024)]
    pub backlog: u32,
    /// Most requests served from one connection before others get a turn.
    #[arg(short = 'R', long = "max-reqs-per-event", default_value_t = 20)]
    pub reqs_per_event: usize,
    /// Write the process id to this file.
    #[arg(short = 'P', long = "pidfile")]
    pub pidfile: Option<PathBuf>,
    /// Run in the background (memcached's -d).
    #[arg(short = 'd', long = "daemon")]
    pub daemon: bool,
    /// Extended options, memcached's `-o key=value,...` form (see the README for the keys).
    #[arg(short = 'o', long = "extended", value_delimiter = ',')]
    pub extended: Vec<String>,
    /// Print the version and exit.
    #[arg(short = 'V', long = "version")]
    pub version: bool,
    /// Require SASL authentication (binary protocol only; text connections are refused).
    #[arg(short = 'S', long = "enable-sasl")]
    pub sasl: bool,
    /// SASL password database (`user:password` lines); defaults to $MEMCACHED_SASL_PWDB.
    #[arg(long = "sasl-pwdb")]
    pub sasl_pwdb: Option<PathBuf>,
    /// Require ASCII authentication against this `user:password` file (memcached's -Y).
    #[arg(short = 'Y', long = "auth-file")]
    pub auth_file: Option<PathBuf>,
    /// Serve TLS on the TCP port (needs a certificate and key).
    #[arg(short = 'Z', long = "enable-ssl")]
    pub tls: bool,
    /// TLS certificate chain (PEM); same as -o ssl_chain_cert=FILE.
    #[arg(long = "tls-cert")]
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM); same as -o ssl_key=FILE.
    #[arg(long = "tls-key")]
    pub tls_key: Option<PathBuf>,
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
}

/// Validated settings the server runs with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Address to bind.
    pub listen: IpAddr,
    /// TCP port.
    pub port: u16,
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
    /// TLS options collected from -o before validation.
    tls_opts: TlsOpts,
}

#[derive(Debug, Clone, Default)]
struct TlsOpts {
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    ca: Option<PathBuf>,
    verify_mode: u8,
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
}

/// A bad option value, reported as a usage error.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `-l` is not an IP address.
    #[error("invalid listen address {0:?}")]
    Listen(String),
    /// An `-o` key shoald does not support, or a bad value for one.
    #[error("unsupported or invalid -o option {0:?}")]
    Extended(String),
    /// A value outside the allowed range.
    #[error("{0}")]
    Range(String),
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

impl Args {
    /// Validates the options into [`Settings`].
    pub fn settings(&self) -> Result<Settings, ConfigError> {
        let listen = match self.listen.as_str() {
            "localhost" => IpAddr::from([127, 0, 0, 1]),
            other => other
                .parse()
                .map_err(|_| ConfigError::Listen(other.to_string()))?,
        };
        let threads = self
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(4, |n| n.get()));
        if threads == 0 || threads > 256 {
            return Err(ConfigError::Range("threads must be 1..=256".into()));
        }
        if self.memory_limit == 0 {
            return Err(ConfigError::Range(
                "memory limit must be at least 1 MB".into(),
            ));
        }
        let memory_limit = usize::try_from(self.memory_limit)
            .ok()
            .and_then(|m| m.checked_mul(1 << 20))
            .ok_or_else(|| ConfigError::Range("memory limit too large".into()))?;
        if self.max_item_size < 1024 {
            return Err(ConfigError::Range(
                "item max size cannot be less than 1024 bytes".into(),
            ));
        }
        if self.max_item_size > 1 << 30 {
            return Err(ConfigError::Range(
                "cannot set item size limit higher than 1 gigabyte".into(),
            ));
        }
        if self.max_item_size > memory_limit / 2 {
            return Err(ConfigError::Range(
                "cannot set item size limit higher than 1/2 of memory max".into(),
            ));
        }
        if self.conn_limit == 0 {
            return Err(ConfigError::Range(
                "connection limit must be positive".into(),
            ));
        }
        let mut s = Settings {
            listen,
            port: self.port,
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
            reqs_per_event: self.reqs_per_event.max(1),
            idle_timeout: 0,
            read_buf_mem_limit: 0,
            lru_crawler: true,
            hashpower: None,
            udp_port: self.udp_port,
            sasl_pwdb: None,
            auth_file: self.auth_file.clone(),
            tls: None,
            tls_opts: TlsOpts {
                cert: self.tls_cert.clone(),
                key: self.tls_key.clone(),
                ..TlsOpts::default()
            },
        };
        for opt in &self.extended {
            apply_extended(&mut s, opt)?;
        }
        if self.sasl {
            let pwdb = self
                .sasl_pwdb
                .clone()
                .or_else(|| std::env::var_os("MEMCACHED_SASL_PWDB").map(PathBuf::from))
                .ok_or_else(|| {
                    ConfigError::Range(
                        "-S needs a password database: --sasl-pwdb FILE or MEMCACHED_SASL_PWDB"
                            .into(),
                    )
                })?;
            s.sasl_pwdb = Some(pwdb);
        }
        if self.tls {
            let t = s.tls_opts.clone();
            let (Some(cert), Some(key)) = (t.cert, t.key) else {
                return Err(ConfigError::Range(
                    "-Z needs ssl_chain_cert and ssl_key (or --tls-cert and --tls-key)".into(),
                ));
            };
            s.tls = Some(TlsSettings {
                cert,
                key,
                ca: t.ca,
                verify_mode: t.verify_mode,
            });
        }
        Ok(s)
    }
}

/// Applies one `-o key[=value]`.
fn apply_extended(s: &mut Settings, opt: &str) -> Result<(), ConfigError> {
    let opt = opt.trim();
    if opt.is_empty() {
        return Ok(());
    }
    let (key, value) = match opt.split_once('=') {
        Some((k, v)) => (k, Some(v)),
        None => (opt, None),
    };
    let bad = || ConfigError::Extended(opt.to_string());
    let number = |v: Option<&str>| -> Result<u64, ConfigError> {
        v.and_then(|v| v.parse().ok()).ok_or_else(bad)
    };
    match key {
        "idle_timeout" => s.idle_timeout = number(value)?,
        "read_buf_mem_limit" => {
            s.read_buf_mem_limit = usize::try_from(number(value)?)
                .ok()
                .and_then(|mb| mb.checked_mul(1024 * 1024))
                .ok_or_else(bad)?
        }
        "lru_crawler" if value.is_none() => s.lru_crawler = true,
        "no_lru_crawler" if value.is_none() => s.lru_crawler = false,
        "hashpower" => {
            let hp = number(value)?;
            if !(12..=32).contains(&hp) {
                return Err(bad());
            }
            s.hashpower = Some(hp as u8);
        }
        "item_size_max" => {
            s.max_item_size = value.and_then(|v| parse_size(v).ok()).ok_or_else(bad)?
        }
        "maxconns_fast" | "modern" if value.is_none() => {}
        "ssl_chain_cert" => s.tls_opts.cert = Some(value.ok_or_else(bad)?.into()),
        "ssl_key" => s.tls_opts.key = Some(value.ok_or_else(bad)?.into()),
        "ssl_ca_cert" => s.tls_opts.ca = Some(value.ok_or_else(bad)?.into()),
        "ssl_verify_mode" => {
            let m = number(value)?;
            if m > 3 {
                return Err(bad());
            }
            s.tls_opts.verify_mode = m as u8;
        }
        _ => return Err(bad()),
    }
    Ok(())
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

    #[test]
    fn defaults_are_memcacheds_except_listen() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.port, 11211);
        assert_eq!(s.listen, IpAddr::from([127, 0, 0, 1]));
        assert_eq!(s.memory_limit, 64 << 20);
        assert_eq!(s.conn_limit, 1024);
        assert_eq!(s.max_item_size, 1 << 20);
        assert!(s.cas_enabled && s.evictions && s.flush_enabled && !s.shutdown_enabled);
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
    fn extended_options() {
        let s = settings(&["-o", "idle_timeout=5,no_lru_crawler,hashpower=20"]).unwrap();
        assert_eq!(s.idle_timeout, 5);
        assert!(!s.lru_crawler);
        assert_eq!(s.hashpower, Some(20));
        assert!(settings(&["-o", "bogus=1"]).is_err());
        assert!(settings(&["-o", "idle_timeout=x"]).is_err());
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
    }
}
