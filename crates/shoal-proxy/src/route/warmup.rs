//! The warm-up route's gets: cold first, then warm for what cold lacks, and the warm hits
//! copied into cold (mcrouter's WarmUpRoute; the rules are in [`crate::route`]).

use std::sync::Arc;

use super::get::{finish_get, send_get, GetFlight, GetSpec};
use super::keyed::{add_op, finish_keyed, send_keyed};
use super::keys::{flags_and_data, KeyList, KeyOutcome};
use super::{Kind, Router};

/// A get through a warm-up route whose cold stage is in flight.
pub(crate) struct WarmupGet {
    cold_flight: GetFlight,
    router: Arc<Router>,
    keys: KeyList,
    spec: GetSpec,
}

impl WarmupGet {
    pub(crate) fn new(
        cold_flight: GetFlight,
        router: Arc<Router>,
        keys: KeyList,
        spec: GetSpec,
    ) -> WarmupGet {
        WarmupGet {
            cold_flight,
            router,
            keys,
            spec,
        }
    }

    /// Awaits cold, reads what it lacked from warm, copies warm's hits into cold, and
    /// gives each key's outcome.
    pub(crate) async fn finish(self) -> Vec<KeyOutcome> {
        let mut out = finish_get(self.cold_flight).await;
        let Kind::Warmup {
            cold,
            warm,
            exptime,
        } = &self.router.kind
        else {
            return out;
        };
        let lacking: Vec<usize> = (0..out.len()).filter(|&i| !out[i].is_hit()).collect();
        if lacking.is_empty() {
            return out;
        }
        let plain = GetSpec {
            cmd: "get",
            exptime: None,
        };
        let warm_out = finish_get(send_get(warm, self.keys.subset(&lacking), plain).await).await;
        // A `gat` sets the key's expiration time: the copy gets the one asked for.
        let ttl = self.spec.exptime.unwrap_or(i64::from(*exptime));
        let with_cas = self.spec.with_cas();
        let mut copies = Vec::new();
        let mut hits = Vec::new();
        for (&i, o) in lacking.iter().zip(&warm_out) {
            let KeyOutcome::Hit(entry) = o else { continue };
            let Some((flags, data)) = flags_and_data(entry) else {
                continue;
            };
            let op = Arc::new(add_op(self.keys.get(i), flags, ttl, data, with_cas));
            // Sent now, in key order; without CAS nobody waits for the answer.
            copies.push(send_keyed(cold, &op).await);
            hits.push(i);
        }
        if !with_cas {
            drop(copies);
            for (i, o) in lacking.into_iter().zip(warm_out) {
                out[i] = o;
            }
            return out;
        }
        // gets/gats: the client needs cold's CAS token, so the copies are made first and
        // the keys read again from cold. Keys warm lacked keep cold's outcome.
        for c in copies {
            finish_keyed(c).await;
        }
        if hits.is_empty() {
            return out;
        }
        let again = finish_get(send_get(cold, self.keys.subset(&hits), self.spec).await).await;
        for (i, o) in hits.into_iter().zip(again) {
            out[i] = o;
        }
        out
    }
}
