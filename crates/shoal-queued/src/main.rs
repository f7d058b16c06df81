//! The `shoal-queued` binary: parse the command line, set up logging, open the data
//! directory, serve.

use shoal_queued::config::ArgsError;
use shoal_queued::{bind, run, Args};
use std::process::ExitCode;

fn main() -> ExitCode {
    shoal_net::early_signals::catch_early(&shoal_net::early_signals::STOP_SIGNALS);
    // clap exits 2 on a usage error (unknown option) and 0 for --help/--version; a bad
    // options file is a usage error too.
    let args = match Args::from_command_line(std::env::args_os().collect()) {
        Ok(a) => a,
        Err(ArgsError::CommandLine(e)) => e.exit(),
        Err(ArgsError::File(e)) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let settings = match args.settings() {
        Ok(s) => s,
        Err(e) => {
            // A usage error, before logging is set up: plain text, as clap's own.
            eprintln!("shoal-queued: {e}");
            return ExitCode::from(2);
        }
    };
    let level = match settings.verbose {
        0 => tracing::Level::WARN,
        1 => tracing::Level::INFO,
        _ => tracing::Level::DEBUG,
    };
    shoal_net::logging::init(settings.log_format, level);
    // From here on, fatal errors go through the log like every other event, so they are
    // JSON lines under `--log-format json`.
    let engine = match shoal_queue::Engine::open(settings.engine.clone()) {
        Ok(e) => e,
        Err(e) => {
            tracing::error!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let listener = match bind(&settings) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("failed to listen: {e}");
            return ExitCode::FAILURE;
        }
    };
    match (listener.local_addr(), &settings.unix_socket) {
        (_, Some(path)) => tracing::info!(
            "listening on unix:{} (data {}, fsync {})",
            path.display(),
            settings.engine.data_dir.display(),
            settings.engine.fsync
        ),
        (Some(addr), None) => tracing::info!(
            "listening on {addr} (data {}, fsync {})",
            settings.engine.data_dir.display(),
            settings.engine.fsync
        ),
        (None, None) => tracing::warn!("local address unknown"),
    }
    match run(settings, engine, listener) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{}", shoal_net::logging::error_text(&e));
            ExitCode::FAILURE
        }
    }
}
