//! Stop signals at startup. The daemons log `listening on` (what scripts and supervisors
//! wait for) before their accept loop exists; a SIGTERM sent the moment that line appears
//! must still stop them, cleanly, even from a parent that left SIGTERM ignored.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long a daemon has to exit after the signal.
const STOP_LIMIT: Duration = Duration::from_secs(5);

/// Runs `bin args` `rounds` times, each with SIGTERM ignored by inheritance, and sends
/// SIGTERM as soon as a line of its stderr contains `listening on`. `Err` names the first
/// round in which the daemon logged no such line within its first 50 lines, was still
/// running [`STOP_LIMIT`] after the signal (it is then killed), or exited with a status
/// other than 0. Repeat enough rounds to hit a race window: each round takes about as
/// long as the daemon's start and stop.
pub fn stops_on_sigterm_right_after_listening(
    bin: &str,
    args: &[&str],
    rounds: usize,
) -> Result<(), String> {
    for round in 0..rounds {
        let mut cmd = Command::new(bin);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: between fork and exec only signal(2), which is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGTERM, libc::SIG_IGN);
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|e| format!("spawn {bin}: {e}"))?;
        let Some(stderr) = child.stderr.take() else {
            return Err("no stderr pipe".into());
        };
        let mut lines = BufReader::new(stderr).lines();
        let listening = lines
            .by_ref()
            .take(50)
            .map_while(Result::ok)
            .any(|l| l.contains("listening on"));
        if !listening {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("round {round}: no `listening on` line"));
        }
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        // The rest of stderr is drained, so the daemon never blocks writing its log.
        let drain = std::thread::spawn(move || lines.for_each(drop));
        let status = exit_within(&mut child, STOP_LIMIT);
        let _ = drain.join();
        match status {
            None => {
                return Err(format!(
                    "round {round}: still running {STOP_LIMIT:?} after SIGTERM"
                ))
            }
            Some(st) if st.code() != Some(0) => {
                return Err(format!("round {round}: exited with {st} after SIGTERM"))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// `child`'s exit status once it exits, or `None` (and the child killed) if it is still
/// running after `limit`.
pub fn exit_within(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(st)) => return Some(st),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}
