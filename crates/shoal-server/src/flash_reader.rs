//! The threads that read flash-resident values for the workers (memcached's extstore IO
//! threads: `ext_threads` × `ext_io_depth` of them, its reads in flight at once).
//!
//! A worker that read the disk itself would hold every connection it serves for the
//! length of the read. Instead a request that meets a value on flash stops where it is
//! (the store records a [`FlashRead`], see `shoal_store::FlashReads`), the connection
//! hands its reads here and awaits them, and the worker serves its other connections
//! meanwhile. The queue is unbounded in count but not in bytes: each connection has at
//! most one batch in flight, within `shoal_store::READ_AHEAD_BYTES` plus the one value
//! it is waiting for.

use parking_lot::{Condvar, Mutex};
use shoal_store::{FlashRead, FlashReadDone, Store};
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::oneshot;

/// A read and where its result goes.
type Job = (FlashRead, oneshot::Sender<FlashReadDone>);

#[derive(Default)]
struct Queue {
    jobs: Mutex<(VecDeque<Job>, bool)>,
    ready: Condvar,
}

/// The reader threads; stopped and joined when dropped.
pub struct FlashReaders {
    queue: Arc<Queue>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl FlashReaders {
    /// Starts `threads` readers (at least one) for `store`.
    pub fn start(store: &Store, threads: usize) -> std::io::Result<FlashReaders> {
        let queue = Arc::new(Queue::default());
        let mut handles = Vec::new();
        for i in 0..threads.max(1) {
            let (queue, store) = (queue.clone(), store.clone());
            let handle = std::thread::Builder::new()
                .name(format!("shoal-flash-read-{i}"))
                .spawn(move || read_loop(&queue, &store))?;
            handles.push(handle);
        }
        Ok(FlashReaders {
            queue,
            threads: handles,
        })
    }

    /// Queues `reads` and returns where each result will arrive. A result whose sender
    /// is gone (the server stopping) never arrives: the receiver reports it closed.
    pub fn submit(
        &self,
        reads: impl Iterator<Item = FlashRead>,
        into: &mut Vec<oneshot::Receiver<FlashReadDone>>,
    ) {
        let mut jobs = self.queue.jobs.lock();
        for read in reads {
            let (tx, rx) = oneshot::channel();
            jobs.0.push_back((read, tx));
            into.push(rx);
        }
        drop(jobs);
        self.queue.ready.notify_all();
    }
}

impl Drop for FlashReaders {
    fn drop(&mut self) {
        self.queue.jobs.lock().1 = true;
        self.queue.ready.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn read_loop(queue: &Queue, store: &Store) {
    loop {
        let (read, tx) = {
            let mut jobs = queue.jobs.lock();
            loop {
                if jobs.1 {
                    return;
                }
                if let Some(job) = jobs.0.pop_front() {
                    break job;
                }
                queue.ready.wait(&mut jobs);
            }
        };
        // The connection may be gone; its read is simply dropped.
        let _ = tx.send(store.run_flash_read(read));
    }
}
