//! The `shoald` binary: parse the command line, set up logging, run the server.

use clap::Parser;
use shoal_server::{bind, run, Args, VERSION};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            // clap exits 2 on usage errors and 0 for --help, as memcached does.
            e.exit();
        }
    };
    if args.version {
        println!("shoald {VERSION}");
        return ExitCode::SUCCESS;
    }
    let settings = match args.settings() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("shoald: {e}");
            return ExitCode::from(2);
        }
    };
    let level = match settings.verbose {
        0 => tracing::Level::WARN,
        1 => tracing::Level::INFO,
        _ => tracing::Level::DEBUG,
    };
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .init();
    if settings.udp_port_warning() {
        tracing::warn!("UDP is not supported; -U is ignored");
    }
    if args.daemon {
        // SAFETY: called before any thread is started.
        if unsafe { libc::daemon(1, 0) } != 0 {
            eprintln!("shoald: failed to daemonize");
            return ExitCode::FAILURE;
        }
    }
    if let Some(pidfile) = &args.pidfile {
        if let Err(e) = std::fs::write(pidfile, format!("{}\n", std::process::id())) {
            eprintln!("shoald: cannot write pid file {}: {e}", pidfile.display());
            return ExitCode::FAILURE;
        }
    }
    let listener = match bind(&settings) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("shoald: failed to listen: {e}");
            return ExitCode::FAILURE;
        }
    };
    match (listener.local_addr(), &settings.unix_socket) {
        (Some(addr), _) => tracing::info!("listening on {addr}"),
        (None, Some(path)) => tracing::info!("listening on unix:{}", path.display()),
        _ => {}
    }
    match run(settings, listener) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shoald: {e:#}");
            ExitCode::FAILURE
        }
    }
}
