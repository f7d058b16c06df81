//! The stats port (nutcracker's `-s`): twemproxy's stats JSON, and the `reload` command.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use shoal_net::{Acceptor, Event, Incoming};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::shared::Shared;
use crate::stats::document;

/// Listen backlog of the stats port.
pub(crate) const STATS_BACKLOG: u32 = 128;
/// How long the stats port waits for a command before dumping the stats JSON, as it
/// always has for clients that send nothing.
const STATS_COMMAND_WAIT: Duration = Duration::from_millis(100);
/// Longest command line the stats port reads.
const STATS_COMMAND_MAX: usize = 256;
/// Stats connections served at once: as many as the metrics listener serves. More are
/// closed as soon as they are accepted, so clients that never read cannot pile up.
pub const STATS_MAX_CONNECTIONS: usize = shoal_net::metrics::MAX_CONNECTIONS;
/// How long writing one stats answer may take before the connection is dropped: a client
/// that never reads holds its slot this long at most.
pub const STATS_WRITE_TIMEOUT: Duration = Duration::from_secs(2);
/// The kernel send buffer of a stats connection. Fixed rather than autotuned: with
/// autotuning some kernels (6.18 here) take a whole document of hundreds of KB into the
/// buffer of a client that never reads, which then holds that kernel memory for as long
/// as it stays connected; this caps what each of those clients can pin.
const STATS_SEND_BUFFER: usize = 64 * 1024;

/// Serves the stats port: a client that sends nothing within [`STATS_COMMAND_WAIT`] (or
/// closes its side) gets the stats JSON, as from twemproxy; one that sends `reload`
/// gets `OK` or `ERROR <reason>` (see [`crate::reload`]). At most
/// [`STATS_MAX_CONNECTIONS`] are served at once (more are closed at once), each for at
/// most [`STATS_COMMAND_WAIT`] plus [`STATS_WRITE_TIMEOUT`]: a client that never sends
/// is answered after the wait, and one that never reads is dropped after the write
/// timeout, so neither holds up the others for longer.
pub(crate) async fn serve_stats(mut acceptor: Acceptor, shared: Arc<Shared>) {
    let open = Arc::new(AtomicUsize::new(0));
    loop {
        let s = match acceptor.next().await {
            Event::Conn(Incoming::Tcp(s, _)) => s,
            Event::Conn(Incoming::Unix(_)) => continue,
            Event::Signal => {
                let _ = shared.shutdown.send(true);
                break;
            }
            Event::Shutdown => break,
        };
        let Some(slot) = StatsSlot::take(&open) else {
            tracing::debug!(
                "stats port: {STATS_MAX_CONNECTIONS} connections open, closing one more"
            );
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let _ = socket2::SockRef::from(&s).set_send_buffer_size(STATS_SEND_BUFFER);
            let Ok(mut s) = TcpStream::from_std(s) else {
                return;
            };
            let body = match read_command(&mut s).await {
                None => stats_json(&shared),
                Some(cmd) if cmd == "reload" => match shared.reload() {
                    Ok(_) => "OK\r\n".to_string(),
                    Err(e) => format!("ERROR {}\r\n", one_line(&e.to_string())),
                },
                Some(cmd) if cmd.is_empty() || cmd == "stats" => stats_json(&shared),
                Some(_) => "ERROR unknown command\r\n".to_string(),
            };
            let write = async {
                s.write_all(body.as_bytes()).await?;
                s.shutdown().await
            };
            if tokio::time::timeout(STATS_WRITE_TIMEOUT, write)
                .await
                .is_err()
            {
                tracing::debug!("stats port: a client did not read its answer in time");
            }
        });
    }
}

/// One of the stats port's [`STATS_MAX_CONNECTIONS`] places, given back on drop however
/// the connection's task ends.
struct StatsSlot(Arc<AtomicUsize>);

impl StatsSlot {
    /// A place, if one is free.
    fn take(open: &Arc<AtomicUsize>) -> Option<StatsSlot> {
        open.fetch_update(Relaxed, Relaxed, |n| {
            (n < STATS_MAX_CONNECTIONS).then_some(n + 1)
        })
        .ok()
        .map(|_| StatsSlot(open.clone()))
    }
}

impl Drop for StatsSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

/// The command line a stats client sent, trimmed; `None` if it sent nothing in time.
async fn read_command(s: &mut TcpStream) -> Option<String> {
    let mut line = Vec::new();
    let mut buf = [0u8; 64];
    let read = async {
        while line.len() < STATS_COMMAND_MAX && !line.contains(&b'\n') {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => line.extend_from_slice(buf.get(..n).unwrap_or_default()),
            }
        }
    };
    let _ = tokio::time::timeout(STATS_COMMAND_WAIT, read).await;
    if line.is_empty() {
        return None;
    }
    let end = line.iter().position(|&b| b == b'\n').unwrap_or(line.len());
    let cmd = String::from_utf8_lossy(line.get(..end).unwrap_or_default());
    Some(cmd.trim().to_ascii_lowercase())
}

/// `text` on one line, for a one-line reply.
fn one_line(text: &str) -> String {
    text.replace(['\r', '\n'], " ")
}

fn stats_json(shared: &Shared) -> String {
    let c = &shared.counters;
    document(
        c.started,
        c.total.load(Relaxed),
        c.current.load(Relaxed),
        c.reloads.load(Relaxed),
        c.reload_failures.load(Relaxed),
        shared
            .views()
            .iter()
            .map(|v| (v.name.clone(), v.stats_json()))
            .collect(),
    )
    .to_string()
}
