//! A panic on the fsync thread is logged with its message, and connections waiting for an
//! fsync are refused instead of waiting forever. Its own test binary: it installs a
//! global log subscriber to read what was logged.

use shoal_queue::{unix_now, Engine, EngineConfig, FsyncPolicy, QueueError, WriteFault};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Log lines, written by whichever thread logs.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }
}

#[test]
fn a_panicking_sync_thread_is_logged_and_fails_waiters() {
    let logs = Logs::default();
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .init();

    let t = tempfile::tempdir().expect("tempdir");
    let fault = Arc::new(WriteFault::default());
    let mut c = EngineConfig::new(t.path());
    c.fsync = FsyncPolicy::Always;
    c.fault = Some(fault.clone());
    let e = Engine::open(c).expect("open");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let wait = |q: &Arc<shoal_queue::Queue>, lsn| {
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(10), e.durable(q, lsn)).await
        })
        .expect("the wait ends, it does not hang")
    };

    let q = e.queue_or_create("q").expect("q");
    let lsn = q.enqueue(0, 0, b"before", unix_now()).expect("enqueue");
    assert!(wait(&q, lsn).is_ok(), "a healthy sync thread confirms");

    fault.panic_sync_thread(true);
    let lsn = q.enqueue(0, 0, b"after", unix_now()).expect("enqueue");
    assert!(matches!(wait(&q, lsn), Err(QueueError::SyncFailed)));
    // A queue created after the thread died is refused too.
    let r = e.queue_or_create("r").expect("r");
    let lsn = r.enqueue(0, 0, b"later", unix_now()).expect("enqueue");
    assert!(matches!(wait(&r, lsn), Err(QueueError::SyncFailed)));

    let text = logs.text();
    assert!(
        text.contains("ERROR")
            && text.contains("the fsync thread panicked: injected fault: the sync thread panics"),
        "{text}"
    );
    // Dropping the engine joins the dead thread without hanging or logging it twice.
    drop(e);
    assert_eq!(logs.text().matches("fsync thread panicked").count(), 1);
}
