//! shoal-queued's command line and per-queue limits file.

use clap::{CommandFactory, Parser};
use shoal_net::options_file::{self, FileRules, OptionsFileError};
use shoal_queue::{EngineConfig, FsyncPolicy, FullPolicy, QueueLimits, QueueOverrides};
use std::collections::HashMap;
use std::ffi::OsString;
use std::net::IpAddr;
use std::path::PathBuf;

/// The version `version` and `stats` report.
pub const VERSION: &str = concat!("shoal-queued-", env!("CARGO_PKG_VERSION"));

/// Command-line options. `-p`, `-H` (data directory) and `-N` (no fsync) follow MemcacheQ.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "shoal-queued",
    version = VERSION,
    about = "shoal-queued: a durable message queue over the memcached text protocol (MemcacheQ/Kestrel compatible)",
    args_override_self = true,
    after_help = "With --config FILE, options are read from FILE first (memcached.conf's \
syntax: one option per line, # comments); options given on the command line win over the \
file's."
)]
pub struct Args {
    /// Read options from FILE first, in memcached.conf's syntax (one option per line, `#`
    /// comments, shell quoting), as the packaged unit does with /etc/shoal/queued.conf.
    /// Options given on the command line win over the file's.
    #[arg(long = "config", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// TCP port to listen on (MemcacheQ's default).
    #[arg(short = 'p', long = "port", default_value_t = 22201)]
    pub port: u16,
    /// Interface to listen on.
    #[arg(short = 'l', long = "listen", default_value = "127.0.0.1")]
    pub listen: String,
    /// Listen on this unix socket instead of TCP (MemcacheQ's and memcached's `-s`).
    #[arg(short = 's', long = "unix-socket", value_name = "PATH")]
    pub unix_socket: Option<PathBuf>,
    /// Permission mask of the unix socket, in octal (memcached's `-a`).
    #[arg(short = 'a', long = "unix-mask", default_value = "700", value_parser = parse_octal)]
    pub unix_mask: u32,
    /// Data directory (MemcacheQ's -H also works).
    #[arg(
        short = 'd',
        long = "data-dir",
        short_alias = 'H',
        default_value = "shoal-queued-data"
    )]
    pub data_dir: PathBuf,
    /// When to fsync: `always` (before every acknowledgement, shared by concurrent
    /// writers), `never`, or an interval in milliseconds.
    #[arg(long = "fsync", default_value = "5")]
    pub fsync: FsyncPolicy,
    /// Never fsync (MemcacheQ's -N); same as --fsync never.
    #[arg(short = 'N')]
    pub no_sync: bool,
    /// Largest message, with k/m suffixes.
    #[arg(long = "max-item-size", default_value = "1m", value_parser = parse_size)]
    pub max_item_size: u64,
    /// Segment file size, with k/m suffixes.
    #[arg(long = "segment-size", default_value = "64m", value_parser = parse_size)]
    pub segment_size: u64,
    /// Payload bytes each queue keeps in memory; more is read back from disk.
    #[arg(long = "queue-memory", default_value = "64m", value_parser = parse_size)]
    pub queue_memory: u64,
    /// Most simultaneous connections; more are answered `ERROR Too many open connections`
    /// and closed, as memcached does.
    #[arg(short = 'c', long = "conn-limit", default_value_t = 1024)]
    pub conn_limit: usize,
    /// Megabytes all connections together may hold in read buffers beyond the 32 KB each
    /// may hold for free (values being received, long multi-get lines). Past it a value is
    /// answered `SERVER_ERROR out of memory storing object` and discarded as it arrives,
    /// so clients that stall mid-message cannot exhaust memory (memcached's
    /// `-o read_buf_mem_limit`). 0 = no limit; otherwise at least --max-item-size.
    #[arg(long = "read-buf-mem-limit", value_name = "MB", default_value_t = 64)]
    pub read_buf_mem_limit: u64,
    /// Worker threads (default: number of cores).
    #[arg(short = 't', long = "threads")]
    pub threads: Option<usize>,
    /// Verbose logging (-vv for debug).
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Allow the `shutdown` command (Kestrel's; memcached's `-A`).
    #[arg(short = 'A', long = "enable-shutdown")]
    pub enable_shutdown: bool,
    /// Default limit on messages per queue (0 = none).
    #[arg(long = "max-items", default_value_t = 0)]
    pub max_items: u64,
    /// Default limit on payload bytes per queue, with k/m/g suffixes (0 = none).
    #[arg(long = "max-bytes", default_value = "0", value_parser = parse_size)]
    pub max_bytes: u64,
    /// Default maximum message age in seconds (0 = none).
    #[arg(long = "max-age", default_value_t = 0)]
    pub max_age: u32,
    /// When a queue is full, discard its oldest messages instead of answering NOT_STORED.
    #[arg(long = "discard-old")]
    pub discard_old: bool,
    /// Per-queue config file: lines `<queue> key=value ...` with Kestrel's names
    /// (`max_items`, `max_size`, `max_item_size`, `max_age`, `discard_old_when_full`,
    /// `max_memory_size`, `expire_to`, `max_expire_sweep`, `fanout_only`, `sync_journal`,
    /// `keep_journal`, `max_queue_age`; see
    /// docs/queue.md), `#` comments. Re-read by the `reload` command and SIGHUP.
    #[arg(long = "queue-config")]
    pub queue_config: Option<PathBuf>,
    /// Close a connection that sends nothing for this many seconds (Kestrel's
    /// `client_timeout`, memcached's `-o idle_timeout`; 0 = never). A blocking read
    /// (`get <q>/t=<ms>`) waiting for a message is not idle; an open read held by a
    /// connection closed this way goes back to its queue.
    #[arg(long = "idle-timeout", value_name = "SECS", default_value_t = 0)]
    pub idle_timeout: u64,
    /// Answer every request as Kestrel 2.4 does, not only those carrying Kestrel read
    /// options: `VALUE <queue> 0 <n>` for plain gets too, `END` to `delete`, `Flushed all
    /// queues.` to `flush_all`, `CLIENT_ERROR` and a disconnect for an unknown command,
    /// `ERROR` and a disconnect for a plain get with a read open on the queue, and
    /// Kestrel's exptime rule (under 1,000,000 seconds relative, else a unix time).
    #[arg(long = "kestrel")]
    pub kestrel: bool,
    /// Reads a connection may hold open on one queue at a time (Kestrel's
    /// `max_open_transactions`, 1 by default as in Kestrel): a further `/open` is refused
    /// with `ERROR` and a disconnect; `monitor` opens no more than this leaves.
    #[arg(long = "max-open-transactions", value_name = "N", default_value_t = 1)]
    pub max_open_transactions: usize,
    /// Serve Prometheus metrics (`GET /metrics`, HTTP/1.1) on ADDR:PORT (off by default).
    #[arg(long = "metrics-listen", value_name = "ADDR:PORT")]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Log line format on stderr: text, json, journal (systemd's: `<N>` priority prefixes,
    /// no timestamps) or auto (journal when stderr is the journal, as under systemd, else
    /// text).
    #[arg(long = "log-format", value_name = "FORMAT", default_value = "auto")]
    pub log_format: shoal_net::logging::LogFormat,
}

/// Validated settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Address to listen on.
    pub listen: IpAddr,
    /// Port (0 = ephemeral).
    pub port: u16,
    /// `-s`: a unix socket to listen on instead of TCP.
    pub unix_socket: Option<PathBuf>,
    /// `-a`: the unix socket's permissions.
    pub unix_mask: u32,
    /// Most simultaneous connections.
    pub conn_limit: usize,
    /// Bytes all read buffers together may hold beyond what each holds for free
    /// (`usize::MAX`: no limit).
    pub read_buf_mem_limit: usize,
    /// Runtime worker threads.
    pub threads: usize,
    /// Log level: 0 warn, 1 info, 2+ debug.
    pub verbose: u8,
    /// Whether clients may stop the server with `shutdown`.
    pub enable_shutdown: bool,
    /// The engine's configuration.
    pub engine: EngineConfig,
    /// `--idle-timeout`: close connections that send nothing this long (`None`: never).
    pub idle_timeout: Option<std::time::Duration>,
    /// `--kestrel`: Kestrel's replies for every request, not only those with read options.
    pub kestrel: bool,
    /// `--max-open-transactions`: reads a connection may hold open per queue.
    pub max_open_transactions: usize,
    /// `--metrics-listen`: where to serve Prometheus metrics.
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// `--log-format`.
    pub log_format: shoal_net::logging::LogFormat,
    /// `--queue-config`: re-read by `reload` and SIGHUP.
    pub queue_config: Option<PathBuf>,
    /// The queue configuration the command line gives, under the file's lines.
    pub default_limits: QueueLimits,
}

fn parse_octal(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s, 8)
        .ok()
        .filter(|&m| m <= 0o777)
        .ok_or_else(|| format!("invalid octal mask {s:?}"))
}

/// A size with an optional k/m/g suffix (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    shoal_queue::queue_config::parse_size(s).ok_or_else(|| format!("invalid size {:?}", s.trim()))
}

/// Reads the queue config file (see [`Args::queue_config`]): each line's settings, by
/// queue name, applied over the defaults the command line gives.
pub fn read_queue_config(
    path: &std::path::Path,
) -> Result<HashMap<String, QueueOverrides>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--queue-config {}: {e}", path.display()))?;
    shoal_queue::queue_config::parse(&text)
        .map_err(|e| format!("--queue-config {}: {e}", path.display()))
}

/// Why the command line (with its options file) could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    /// clap's own: a bad flag on the command line, or `--help`/`--version`, which clap
    /// reports as errors to print.
    #[error(transparent)]
    CommandLine(#[from] clap::Error),
    /// The options file: unreadable, or a line shoal-queued refuses.
    #[error(transparent)]
    File(#[from] OptionsFileError),
}

impl Args {
    /// Reads `argv` (the program name first) and, when it names one with `--config`, the
    /// options file, whose options come first so that the command line's win.
    pub fn from_command_line(argv: Vec<OsString>) -> Result<Args, ArgsError> {
        let rules = FileRules {
            config: "config",
            ignored: &[],
            cumulative: &[],
        };
        let args = Args::try_parse_from(&argv)?;
        let Some(path) = args.config.clone() else {
            return Ok(args);
        };
        let lines = options_file::read(&path)?;
        let merged =
            options_file::command_line_with_file(&Args::command(), &argv, &lines, &path, rules)?;
        Ok(Args::try_parse_from(merged)?)
    }

    /// Validates the options into [`Settings`]; the error is a usage error (exit 2).
    pub fn settings(&self) -> Result<Settings, String> {
        let listen: IpAddr = self
            .listen
            .parse()
            .map_err(|_| format!("invalid listen address {:?}", self.listen))?;
        let max_item_size = usize::try_from(self.max_item_size)
            .ok()
            .filter(|&n| n > 0 && n <= 128 << 20)
            .ok_or("--max-item-size must be between 1 byte and 128m")?;
        if self.segment_size < 4096 || self.segment_size > 1 << 30 {
            return Err("--segment-size must be between 4k and 1g".into());
        }
        if self.max_open_transactions == 0 {
            return Err("--max-open-transactions must be at least 1".into());
        }
        if self.conn_limit == 0 {
            return Err("-c must be at least 1".into());
        }
        let read_buf_mem_limit = match self.read_buf_mem_limit {
            0 => usize::MAX,
            mb => usize::try_from(mb)
                .ok()
                .and_then(|mb| mb.checked_mul(1 << 20))
                // A smaller budget could never receive the largest allowed message.
                .filter(|&bytes| bytes >= max_item_size)
                .ok_or("--read-buf-mem-limit must be 0 or at least --max-item-size")?,
        };
        let threads = match self.threads {
            Some(0) => return Err("-t must be at least 1".into()),
            Some(t) => t,
            None => std::thread::available_parallelism().map_or(2, |n| n.get()),
        };
        let defaults = QueueLimits {
            max_items: self.max_items,
            max_bytes: self.max_bytes,
            max_age_secs: self.max_age,
            full: if self.discard_old {
                FullPolicy::DiscardOldest
            } else {
                FullPolicy::Reject
            },
            ..QueueLimits::default()
        };
        let queue_limits = match &self.queue_config {
            Some(p) => read_queue_config(p)?,
            None => HashMap::new(),
        };
        let mut engine = EngineConfig::new(&self.data_dir);
        engine.fsync = if self.no_sync {
            FsyncPolicy::Never
        } else {
            self.fsync
        };
        engine.segment_size = self.segment_size;
        engine.max_item_size = max_item_size;
        engine.memory_per_queue = self.queue_memory;
        engine.default_limits = defaults.clone();
        engine.queue_limits = queue_limits;
        Ok(Settings {
            listen,
            port: self.port,
            unix_socket: self.unix_socket.clone(),
            unix_mask: self.unix_mask,
            conn_limit: self.conn_limit,
            read_buf_mem_limit,
            threads,
            verbose: self.verbose,
            enable_shutdown: self.enable_shutdown,
            engine,
            idle_timeout: (self.idle_timeout > 0)
                .then(|| std::time::Duration::from_secs(self.idle_timeout)),
            kestrel: self.kestrel,
            max_open_transactions: self.max_open_transactions,
            metrics_listen: self.metrics_listen,
            log_format: self.log_format,
            queue_config: self.queue_config.clone(),
            default_limits: defaults,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_file_then_the_command_line() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("queued.conf");
        std::fs::write(
            &path,
            "# shoal-queued\n-p 22201\n-d /var/lib/shoal/queued\n--fsync always # safe\n-v\n",
        )
        .expect("write");
        let argv = |extra: &[&str]| -> Vec<OsString> {
            let mut v: Vec<OsString> = vec!["shoal-queued".into(), "--config".into()];
            v.push(path.clone().into());
            v.extend(extra.iter().map(OsString::from));
            v
        };
        let a = Args::from_command_line(argv(&[])).expect("reads");
        assert_eq!(a.port, 22201);
        assert_eq!(a.data_dir, PathBuf::from("/var/lib/shoal/queued"));
        assert_eq!((a.fsync, a.verbose), (FsyncPolicy::Always, 1));
        let a = Args::from_command_line(argv(&["-p", "1", "--fsync", "never"])).expect("reads");
        assert_eq!((a.port, a.fsync), (1, FsyncPolicy::Never));
        std::fs::write(&path, "-Z\n").expect("write");
        let e = Args::from_command_line(argv(&[])).expect_err("refused");
        assert!(
            e.to_string()
                .starts_with("shoal-queued: invalid option -- 'Z'\n"),
            "{e}"
        );
    }

    #[test]
    fn read_buffer_budget() {
        let settings = |args: &[&str]| {
            let argv = ["shoal-queued"].iter().chain(args);
            Args::try_parse_from(argv).expect("parses").settings()
        };
        let s = settings(&[]).expect("defaults are valid");
        assert_eq!(s.read_buf_mem_limit, 64 << 20);
        let s = settings(&["--read-buf-mem-limit", "0"]).expect("no limit");
        assert_eq!(s.read_buf_mem_limit, usize::MAX);
        assert!(
            settings(&["--max-item-size", "2m", "--read-buf-mem-limit", "1"]).is_err(),
            "a budget smaller than one message"
        );
    }

    #[test]
    fn idle_timeout() {
        let settings = |args: &[&str]| {
            let argv = ["shoal-queued"].iter().chain(args);
            Args::try_parse_from(argv).expect("parses").settings()
        };
        assert_eq!(settings(&[]).expect("defaults").idle_timeout, None);
        assert_eq!(
            settings(&["--idle-timeout", "0"]).expect("0").idle_timeout,
            None
        );
        assert_eq!(
            settings(&["--idle-timeout", "30"])
                .expect("30")
                .idle_timeout,
            Some(std::time::Duration::from_secs(30))
        );
        assert!(Args::try_parse_from(["shoal-queued", "--idle-timeout", "-1"]).is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64m"), Ok(64 << 20));
        assert_eq!(parse_size("1k"), Ok(1024));
        assert_eq!(parse_size("17"), Ok(17));
        assert!(parse_size("x").is_err());
        assert!(parse_size("99999999999g").is_err());
    }

    #[test]
    fn queue_config() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("queues.conf");
        std::fs::write(
            &path,
            "# limits\njobs max_items=10 policy=discard\nlogs max_bytes=1m max_age=60 # x\n\n",
        )
        .expect("write");
        let argv = ["shoal-queued", "--max-items", "7", "--queue-config"];
        let a = Args::try_parse_from(argv.iter().map(OsString::from).chain([path.clone().into()]))
            .expect("parses");
        let s = a.settings().expect("valid");
        let jobs = s.engine.limits_for("jobs");
        assert_eq!((jobs.max_items, jobs.full), (10, FullPolicy::DiscardOldest));
        let logs = s.engine.limits_for("logs");
        assert_eq!(
            (logs.max_items, logs.max_bytes, logs.max_age_secs),
            (7, 1 << 20, 60)
        );
        assert_eq!(s.engine.limits_for("other").max_items, 7);
        std::fs::write(&path, "q color=red\n").expect("write");
        let e = a.settings().expect_err("refused");
        assert!(e.contains("unknown key \"color\""), "{e}");
    }
}
