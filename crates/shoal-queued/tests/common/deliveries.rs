//! The consumer side of the kill -9 tests: consumers reading one queue with plain and
//! reliable (`/open`, `/close/open`) blocking reads, and the ledger of what they got.

use super::Client;
use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The queue these tests load.
pub const QUEUE: &str = "kq";

/// A message of these tests, `<producer>:<seq>:<padding>`, as (producer, seq).
pub type Msg = (u32, u64);

/// The (producer, seq) of a message's body.
pub fn parse_msg(d: &[u8]) -> Msg {
    let s = std::str::from_utf8(d).expect("utf8 message");
    let mut parts = s.split(':');
    let p = parts.next().and_then(|p| p.parse().ok()).expect("producer");
    let q = parts.next().and_then(|q| q.parse().ok()).expect("seq");
    (p, q)
}

/// What consumers received.
#[derive(Debug, Default)]
pub struct Deliveries {
    /// Every delivery, in order, per consumer stream.
    pub streams: Vec<Vec<Msg>>,
    /// Delivered and known consumed: by a plain get, or through an open read whose close
    /// the next reply confirmed.
    pub confirmed: HashSet<Msg>,
    /// Received through an open read not (yet) known closed.
    pub open: HashSet<Msg>,
}

impl Deliveries {
    /// A new consumer stream; its index.
    pub fn new_stream(&mut self) -> usize {
        self.streams.push(Vec::new());
        self.streams.len() - 1
    }
}

/// Reads [`QUEUE`] on `addr` until `stop` (or `max_reads` reads, or the connection
/// fails, as at a kill), recording into `stream` of the [`Deliveries`] that `part` finds
/// in the shared ledger. `reliable`: `/open` and `/close/open` reads, else plain ones;
/// both wait up to 20 ms for a message.
pub fn consume<L>(
    addr: SocketAddr,
    reliable: bool,
    stream: usize,
    ledger: &Arc<Mutex<L>>,
    part: fn(&mut L) -> &mut Deliveries,
    stop: &AtomicBool,
    max_reads: u64,
) {
    let mut c = Client::connect(addr);
    let mut open: Option<Msg> = None;
    let (plain, first, next) = (
        format!("{QUEUE}/t=20"),
        format!("{QUEUE}/t=20/open"),
        format!("{QUEUE}/t=20/close/open"),
    );
    for _ in 0..max_reads {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let key = match (reliable, open.is_some()) {
            (false, _) => &plain,
            (true, false) => &first,
            (true, true) => &next,
        };
        let Ok(got) = c.try_get(key) else { return };
        let mut guard = ledger.lock().expect("lock");
        let d = part(&mut guard);
        // The reply arrived, so the close it carried has been committed.
        if let Some(m) = open.take() {
            d.open.remove(&m);
            d.confirmed.insert(m);
        }
        if let Some((_, data)) = got {
            let m = parse_msg(&data);
            d.streams[stream].push(m);
            if reliable {
                d.open.insert(m);
                open = Some(m);
            } else {
                d.confirmed.insert(m);
            }
        }
    }
}
