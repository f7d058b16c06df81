//! `shoal-proxy`: the command line, in nutcracker's shape.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use shoal_proxy::{start, Options, ProxyConfig};

/// A twemproxy-compatible memcached proxy. Flags follow nutcracker's.
#[derive(Parser, Debug)]
#[command(name = "shoal-proxy", version, disable_version_flag = true)]
pub(crate) struct Args {
    /// Configuration file (twemproxy YAML).
    #[arg(short = 'c', long = "conf-file", default_value = "conf/nutcracker.yml")]
    conf: PathBuf,
    /// Test the configuration for syntax errors and exit.
    #[arg(short = 't', long = "test-conf")]
    test_conf: bool,
    /// Stats port (0 picks a free one; -1 disables).
    #[arg(
        short = 's',
        long = "stats-port",
        default_value_t = 22222,
        allow_negative_numbers = true
    )]
    stats_port: i32,
    /// Stats address (nutcracker's default is 0.0.0.0; shoal-proxy's is loopback).
    #[arg(short = 'a', long = "stats-addr", default_value = "127.0.0.1")]
    stats_addr: IpAddr,
    /// Stats aggregation interval in ms (accepted for compatibility; stats are live).
    #[arg(short = 'i', long = "stats-interval")]
    stats_interval: Option<u64>,
    /// Verbosity level (nutcracker's 0-11); 5 or more logs server failures and ejections,
    /// 7 or more debug events (connections accepted and closed).
    #[arg(short = 'v', long = "verbose", default_value_t = 5)]
    verbose: u8,
    /// Log file (accepted for compatibility; logs go to stderr).
    #[arg(short = 'o', long = "output")]
    output: Option<PathBuf>,
    /// Write the process id to this file.
    #[arg(short = 'p', long = "pid-file")]
    pid_file: Option<PathBuf>,
    /// Mbuf size (accepted for compatibility; buffers grow as needed).
    #[arg(short = 'm', long = "mbuf-size")]
    mbuf_size: Option<usize>,
    /// Worker threads serving client connections, each with its own event loop and its
    /// own connections to the servers (1, the default, is nutcracker's single loop;
    /// accepting and the stats port run on a thread of their own).
    #[arg(long = "threads", default_value_t = 1)]
    threads: usize,
    /// All worker threads share one set of server connections (run by the accepting
    /// thread) instead of each keeping its own: fewer server connections, at the cost of
    /// a thread hop per request.
    #[arg(long = "shared-backends")]
    shared_backends: bool,
    /// Memory (MB) all client read buffers together may hold beyond their first 16 KB,
    /// for large values being received. A value larger than what is left is refused with
    /// 'SERVER_ERROR out of memory storing object' and its bytes discarded, so clients
    /// that stall half-way through large values cannot grow the proxy without bound.
    /// 0: no limit.
    #[arg(long = "read-buf-mem-limit", value_name = "MB", default_value_t = 64)]
    read_buf_mem_limit: usize,
    /// Print the version and exit.
    #[arg(short = 'V', long = "version")]
    version: bool,
    /// Serve Prometheus metrics (`GET /metrics`, HTTP/1.1) on ADDR:PORT (off by default).
    #[arg(long = "metrics-listen", value_name = "ADDR:PORT")]
    metrics_listen: Option<SocketAddr>,
    /// Log line format on stderr: text, json, journal (systemd's: `<N>` priority prefixes,
    /// no timestamps) or auto (journal when stderr is the journal, as under systemd, else
    /// text).
    #[arg(long = "log-format", value_name = "FORMAT", default_value = "auto")]
    log_format: shoal_net::logging::LogFormat,
}

fn main() -> ExitCode {
    shoal_net::early_signals::catch_early(&shoal_net::early_signals::STOP_SIGNALS);
    shoal_net::tune_allocator();
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    if args.version {
        println!("This is shoal-proxy-{}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    if args.test_conf {
        // A check for a person at a terminal (nutcracker's `-t`): plain text, no logging.
        return match ProxyConfig::load(&args.conf) {
            Ok(_) => {
                eprintln!(
                    "shoal-proxy: configuration file '{}' syntax is ok",
                    args.conf.display()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!(
                    "shoal-proxy: configuration file '{}' syntax is invalid: {e}",
                    args.conf.display()
                );
                ExitCode::from(2)
            }
        };
    }
    // Info and up always: the listening lines are how scripts learn the ports (`-v`
    // below 5 only silences ejections, as nutcracker's levels do); `-v 7` (nutcracker's
    // LOG_DEBUG) and up adds debug events such as connections accepted and closed.
    let level = if args.verbose >= 7 {
        tracing::Level::DEBUG
    } else {
        tracing::Level::INFO
    };
    shoal_net::logging::init(args.log_format, level);
    // From here on, fatal errors go through the log like every other event, so they are
    // JSON lines under `--log-format json`.
    let config = match ProxyConfig::load(&args.conf) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(
                "configuration file '{}' syntax is invalid: {e}",
                args.conf.display()
            );
            return ExitCode::from(2);
        }
    };
    match run(args, config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{}", shoal_net::logging::error_text(e.as_ref()));
            ExitCode::from(1)
        }
    }
}

fn run(args: Args, config: ProxyConfig) -> anyhow::Result<()> {
    // The accepting thread's runtime: listeners, the stats port, metrics, SIGHUP. Client
    // connections run on the worker threads `start` starts, one event loop each.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the runtime")?;
    if let Some(p) = &args.pid_file {
        std::fs::write(p, format!("{}\n", std::process::id()))
            .with_context(|| format!("writing pid file {}", p.display()))?;
    }
    let stats_addr = u16::try_from(args.stats_port)
        .ok()
        .map(|port| SocketAddr::new(args.stats_addr, port));
    let read_buf_mem_limit = match args.read_buf_mem_limit {
        0 => usize::MAX,
        mb => mb.saturating_mul(1 << 20),
    };
    let opts = Options {
        stats_addr,
        verbose: args.verbose >= 5,
        read_buf_mem_limit,
        metrics_addr: args.metrics_listen,
        config_path: Some(args.conf.clone()),
        threads: args.threads.max(1),
        shared_backends: args.shared_backends,
    };
    let running = rt.block_on(async move {
        // SIGINT and SIGTERM are watched by the listeners' acceptors (shoal-net), as in
        // shoald and shoal-queued; SIGHUP reloads the configuration file (server.rs).
        let running = start(config, opts).await?;
        running.stopped().await;
        anyhow::Ok(running)
    })?;
    // The workers finish the replies they are writing, then end; joining them blocks, so
    // off the runtime's thread, which meanwhile keeps running any server connections
    // shared by the workers (`--shared-backends`).
    rt.block_on(async { tokio::task::spawn_blocking(move || running.shutdown()).await })
        .context("stopping the workers")?;
    if let Some(p) = &args.pid_file {
        let _ = std::fs::remove_file(p);
    }
    rt.shutdown_timeout(std::time::Duration::from_millis(100));
    tracing::info!("shut down");
    Ok(())
}
