//! Eviction: when memory is full, which segment to empty next, and what of it to keep.
//!
//! Segment FIFO (Segcache's simplest form) evicts items in write order whatever they are
//! worth: an item read a thousand times goes as soon as one written once, and a 300 KB
//! value costs as much room as three thousand 100-byte ones, yet counts for one hit.
//! memcached, with per-size-class LRUs, keeps more of what is read and small, and beat
//! FIFO by up to 2.5x in miss ratio on mixed sizes. This module does three things on top
//! of segments, each learnt from published work, with the read path still a single
//! atomic update of the item's own header word:
//!
//! - **Probation and main queues, S3-FIFO style** (Yang et al., SOSP 2023). Writers fill
//!   the probation queue. When a probation segment is evicted, its items that were read
//!   while in it are *promoted*: copied into the main queue of their size class. Those
//!   never read go, and their keys go into the [ghost](crate::ghost): a key written again
//!   soon after is stored as already read once, so that its next trip through probation
//!   promotes it. One-time keys (scans, one-hit wonders) thus pass through probation
//!   without pushing the working set out.
//! - **Merge-based retention, Segcache style** (Yang et al., NSDI 2021). When a main
//!   segment is evicted, its items read since they arrived are copied forward to the
//!   head of the same queue, with their read count lowered by one (a 2-bit count, as
//!   S3-FIFO's), so an item stays while it keeps being read. At most 90% of a segment is
//!   copied, so every eviction frees at least a tenth of one: copying stays within
//!   nine bytes per byte freed, and is a third of the bytes written on the workloads
//!   measured.
//! - **Size classes whose memory follows the hits** (memcached's slab classes and slab
//!   automover; LHD's hit density, Beckmann et al., NSDI 2018). Main queues are per size
//!   class (footprints growing by 2.5x), and the class evicted from is the one whose
//!   oldest segment has the fewest items read per byte per unit of age. A 100-byte item
//!   read once holds its place against a 100 KB item read a few times, which is what
//!   object hit ratio rewards. Probation unread items of a class that is worth several
//!   times the least valuable one are promoted too (small items cost little to keep on
//!   the chance they are read).
//!
//! With a flash tier, stubs (items whose value is on flash, see `tier`) have a queue of
//! their own beside the size classes, evicted from only while it holds more than
//! [`STUB_SHARE`] of memory: an unread stub would otherwise be the least valuable small
//! item there is, and go first.
//!
//! Eviction runs in the writer that needs a segment, under the eviction lock (which also
//! serialises every walk of sealed segments), and moves items under their shard locks:
//! an item is copied only while the index still points at it, the index is repointed
//! before the lock is dropped, and the old copy stays readable until its segment is
//! claimed, after any reply pinning it is written. A moved item keeps its key, value,
//! flags, expiry, access time and memcached's state flags; it keeps its CAS unique if a
//! client has seen it (or it was set explicitly), stored in the copy, and otherwise gets
//! the one derived from its new place, which no client can tell apart.

use crate::class_stats::bump;
use crate::clock::is_expired;
use crate::flash::LOCATOR_LEN;
use crate::index::{Ref, Shard};
use crate::inner::Inner;
use crate::layout::{self, with_freq, ItemSpec, RawItem, CAS_SEEN, FETCHED, STALE, WIN_SENT};
use crate::queue_heads::Evictor;
use crate::segments::{SegId, CLASSES, PROBATION, QUEUES, STUBS};
use std::sync::atomic::Ordering;

/// Upper bounds of the size classes' item footprints (bytes, header included): class
/// `k` (1-based) holds footprints below `CLASS_BOUNDS[k - 1]`, the last class the rest.
/// They grow by 2.5x, so that class memory can follow sizes closely (memcached's slab
/// classes grow by 1.25x, but each class here costs an open segment).
const CLASS_BOUNDS: [usize; CLASSES - 1] = [
    96, 240, 608, 1_520, 3_808, 9_536, 23_840, 59_600, 149_008, 372_528, 931_320,
];

/// Share of the memory limit the probation queue may hold (sealed segments) before it is
/// the one evicted from. S3-FIFO uses 10%; writers' open segments come on top.
const PROBATION_SHARE: f64 = 0.03;

/// Share of the memory limit flash stubs may hold (sealed segments) before their queue
/// is evicted from, oldest first, keeping the stubs read since their last trip. Below it
/// no stub is dropped for being unread: a stub is a few dozen bytes standing for a value
/// of at least `ext_item_size` on flash, and dropping one both loses the value and
/// leaves a hole on its page that compaction must later rewrite around (memcached keeps
/// the header of every flash value in memory, in the LRU of its own slab class).
const STUB_SHARE: f64 = 0.125;

/// Most of a segment's written bytes an eviction may copy forward (see the module docs).
const RETAIN_CAP: f64 = 0.9;

/// Unread probation items of a class are promoted anyway when the class's oldest
/// segment is worth this many times the least valuable class's.
const ADMIT_FACTOR: f64 = 4.0;

/// A segment whose live items fill less than this share of it is compacted (its live
/// items moved to the head of its own queue, its memory freed) rather than evicted, and
/// before anything else is: expiry, deletes and overwrites leave such holes, which
/// item-by-item allocators like memcached's reuse at once and segments only when they
/// are emptied. So live items are not evicted while expired ones hold the memory.
/// Compacting costs at most 7 bytes copied per 3 freed; at half (1 per 1), memory held
/// by expired items on a TTL-heavy mix lowered the hit ratio by 0.6 points.
const COMPACT_BELOW: f64 = 0.7;

/// The same for a segment the expiry sweep found holes in: compacted below 85% live.
/// Expired memory is what a TTL-heavy mix loses most to, and its holes only grow (an
/// item expires with its neighbours): on the hit-ratio benchmark's TTL shape 85% instead
/// of 70% removed an eighth of the misses eviction caused at `-m 64` (0.15-0.3 points of hit
/// ratio), for 40% more items copied; 92% gained nothing more. Holes left by overwrites
/// keep [`COMPACT_BELOW`]: at 85% an overwrite-heavy load ran 12-17% more instructions
/// per request, copying unread items that eviction would rightly drop.
const COMPACT_EXPIRED_BELOW: f64 = 0.85;

/// A key found in the ghost is stored as read once only if its class is worth at least
/// this many times the least valuable other class: a second chance costs memory, which a
/// class at the margin should not spend on what it just let go (with a single class in
/// use, every ghost hit counts, as in S3-FIFO).
const GHOST_FACTOR: f64 = 1.5;

/// Evictions one acquisition may run with retention before it evicts without it, so that
/// a store full of items that are all being read still frees a segment in bounded time.
/// Evicted segments one acquisition may find pinned (and leave draining) before it gives
/// up: pins last one write, so more than one in a row is already rare; the bound only
/// keeps a pathological run finite.
const MAX_DRAINED_PER_ACQUIRE: usize = 64;
/// How long an acquisition waits, at most, for pinned segments to be let go when every
/// other way to find room failed (memory of a few segments, each pinned by a reply being
/// written on another thread). A pin lasts one write, but on a machine with every core
/// busy that thread may not run for several milliseconds: 5 ms failed a store now and
/// then in the churn test (`tests/zero_copy.rs`) under load, where waiting longer is
/// what memcached's callers would expect rather than an out-of-memory error.
const DRAIN_WAIT: std::time::Duration = std::time::Duration::from_millis(50);
const RETAINING_EVICTIONS: usize = 16;

/// What eviction decides by: each queue's oldest segment, length, and (for the size
/// classes) what that segment is worth.
struct Weights {
    fronts: [Option<SegId>; QUEUES],
    lens: [usize; QUEUES],
    worth: [Option<f64>; QUEUES],
}

impl Weights {
    /// The least worth of any size class but `except`, if any other has a segment.
    fn least_but(&self, except: usize) -> Option<f64> {
        (PROBATION + 1..=CLASSES)
            .filter(|&q| q != except)
            .filter_map(|q| self.worth[q])
            .min_by(f64::total_cmp)
    }
}

/// The size class of an item of `footprint` bytes: 1 to [`CLASSES`].
pub(crate) fn class_of(footprint: usize) -> usize {
    1 + CLASS_BOUNDS
        .iter()
        .position(|&b| footprint < b)
        .unwrap_or(CLASS_BOUNDS.len())
}

/// How a segment is emptied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Emptying {
    /// Evicted, keeping the items worth keeping.
    Retaining,
    /// Evicted, keeping nothing (shrinking, or when keeping stalls).
    Dropping,
    /// Compacted: every live item kept, read counts untouched.
    Compacting,
}

/// What a moved item carries in its value's place.
pub(crate) enum Payload<'a> {
    /// What it stores now (a value, or a stub's locator).
    Same,
    /// A stub's locator, from writing the value to flash (see `tier`): called once the
    /// stub has its place, so that a value is never written for a stub that has none;
    /// `None` (flash refused the value) leaves the item where it was.
    Stub(&'a mut dyn FnMut() -> Option<crate::flash::Locator>),
    /// Its value, read back from flash (a recache).
    Value(&'a [u8]),
}

/// What one eviction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Evicted {
    /// A segment went to the free list.
    Freed,
    /// A segment was emptied but a reply still reads from it: it is freed later.
    Draining,
    /// Nothing could be evicted.
    Nothing,
}

impl Inner {
    /// Finds a fresh segment for a writer, evicting if memory is full.
    ///
    /// Memory already in use goes first: a free segment, else a sealed one whose items
    /// are all gone (overwritten, deleted, expired), and only then one never used. A
    /// log-structured store that took untouched memory first would, under overwrites,
    /// fault in (and keep resident) all of `-m` while most of it held dead items, where
    /// memcached reuses the chunk an overwrite frees.
    pub(crate) fn acquire_segment(&self) -> Result<SegId, crate::error::StoreError> {
        if let Some(id) = self.segs.take_reused(PROBATION) {
            return Ok(id);
        }
        if self.reclaim_dead() {
            if let Some(id) = self.segs.take_reused(PROBATION) {
                return Ok(id);
            }
        }
        if let Some(id) = self.segs.take_free(PROBATION) {
            return Ok(id);
        }
        if !self.evict {
            return self.acquire_without_eviction();
        }
        let mut evictions = 0;
        let mut drained = 0;
        let mut waited = std::time::Duration::ZERO;
        loop {
            let outcome = {
                let mut ev = self.evictor.lock();
                // Another writer may have made room while this one waited for the lock.
                if let Some(id) = self.segs.take_free(PROBATION) {
                    return Ok(id);
                }
                evictions += 1;
                self.evict_one(&mut ev, evictions <= RETAINING_EVICTIONS)
            };
            match outcome {
                Evicted::Freed => {}
                Evicted::Draining => {
                    // A segment pinned by a reply after its items were evicted is left
                    // draining, and another is tried; bounded, since each try empties one.
                    drained += 1;
                    if drained > MAX_DRAINED_PER_ACQUIRE {
                        break;
                    }
                }
                Evicted::Nothing => {
                    // Everything evictable is pinned by replies being written on other
                    // threads (pins last one write): wait for one to be let go rather than
                    // fail the store.
                    if self.segs.draining() > 0 && waited < DRAIN_WAIT {
                        let started = std::time::Instant::now();
                        std::thread::yield_now();
                        waited += started.elapsed();
                        continue;
                    }
                    break;
                }
            }
        }
        Err(crate::error::StoreError::OutOfMemory)
    }

    /// Puts a sealed segment with no live item back on the free list (nothing to copy
    /// or drop: its items are already unlinked). False if there is none, or if a reply
    /// still reads from it (it is freed when the reply is written).
    fn reclaim_dead(&self) -> bool {
        // Under the evictor's lock, as every other taking of sealed segments.
        let _ev = self.evictor.lock();
        match self.segs.take_dead() {
            Some(id) => self.segs.release_evicted(id),
            None => false,
        }
    }

    /// `-M`: memory full means out of memory, once expired items and emptied segments
    /// have been reclaimed (memcached reclaims expired items under `-M` too).
    fn acquire_without_eviction(&self) -> Result<SegId, crate::error::StoreError> {
        let mut waited = std::time::Duration::ZERO;
        let mut swept = false;
        loop {
            if let Some(id) = self.segs.take_free(PROBATION) {
                return Ok(id);
            }
            if self.segs.draining() > 0 && waited < DRAIN_WAIT {
                let started = std::time::Instant::now();
                std::thread::yield_now();
                waited += started.elapsed();
                continue;
            }
            if swept {
                return Err(crate::error::StoreError::OutOfMemory);
            }
            swept = true;
            let now = self.clock.now();
            for id in self.segs.sealed_snapshot() {
                self.reclaim_expired_in(id, now, false);
            }
            let _ev = self.evictor.lock();
            self.segs.reclaim_dead();
        }
    }

    /// Empties one segment, the one the policy picks, keeping what it is worth keeping
    /// when `retain` is set. The caller holds the eviction lock (`ev`).
    pub(crate) fn evict_one(&self, ev: &mut Evictor, retain: bool) -> Evicted {
        if let Some((victim, from)) = self.take_sparse(ev) {
            ev.counters.compactions += 1;
            let w = self.weigh();
            self.empty_segment(ev, victim, from, Emptying::Compacting, &w);
            return if self.segs.release_evicted(victim) {
                Evicted::Freed
            } else {
                Evicted::Draining
            };
        }
        let w = self.weigh();
        let victim = self.take_victim(&w).or_else(|| {
            ev.seal_heads(&self.segs)
                .then(|| self.take_victim(&w))
                .flatten()
        });
        let Some((victim, from)) = victim else {
            return Evicted::Nothing;
        };
        let how = if !retain {
            Emptying::Dropping
        } else if self.is_sparse(victim, false) {
            ev.counters.compactions += 1;
            Emptying::Compacting
        } else {
            Emptying::Retaining
        };
        self.empty_segment(ev, victim, from, how, &w);
        if self.segs.release_evicted(victim) {
            Evicted::Freed
        } else {
            Evicted::Draining
        }
    }

    /// The queue eviction takes its next segment from: probation while it holds more
    /// than its share, else the size class whose oldest segment is worth least.
    pub(crate) fn victim_queue(&self) -> Option<usize> {
        self.choose(&self.weigh())
    }

    /// Weighs every queue's oldest segment, and tells writers which classes' ghost hits
    /// count (see [`GHOST_FACTOR`]).
    fn weigh(&self) -> Weights {
        let (fronts, lens, opened) = self.segs.fronts();
        let mut worth = [None; QUEUES];
        for q in PROBATION + 1..=CLASSES {
            worth[q] = fronts[q].map(|id| self.worth(id, opened));
        }
        let w = Weights {
            fronts,
            lens,
            worth,
        };
        let mut mask = 0u32;
        for q in PROBATION + 1..=CLASSES {
            let counts = match (w.worth[q], w.least_but(q)) {
                (Some(mine), Some(least)) => mine >= GHOST_FACTOR * least,
                _ => true,
            };
            mask |= u32::from(counts) << q;
        }
        self.ghost_classes.store(mask, Ordering::Relaxed);
        w
    }

    /// The queue to evict from, given the weights.
    fn choose(&self, w: &Weights) -> Option<usize> {
        let share = (PROBATION_SHARE * self.segs.limit() as f64).max(1.0);
        // The writers' open segments count too (one, as if they were one writer).
        // Stubs first: they grow as probation and the classes are evicted (their values
        // leaving for flash), so checked after those they would never get a turn.
        let stubs = STUB_SHARE * self.segs.limit() as f64;
        if w.fronts[STUBS].is_some() && w.lens[STUBS] as f64 > stubs {
            return Some(STUBS);
        }
        if w.fronts[PROBATION].is_some() && (w.lens[PROBATION] + 1) as f64 > share {
            return Some(PROBATION);
        }
        let worst = (PROBATION + 1..=CLASSES)
            .filter_map(|q| w.worth[q].map(|v| (q, v)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(q, _)| q);
        worst
            .or(w.fronts[PROBATION].map(|_| PROBATION))
            .or(w.fronts[STUBS].map(|_| STUBS))
    }

    /// Whether a key of `footprint` bytes found in the ghost is stored as read once.
    pub(crate) fn ghost_counts(&self, footprint: usize) -> bool {
        self.ghost_classes.load(Ordering::Relaxed) & (1 << class_of(footprint)) != 0
    }

    /// What a segment's contents are worth per byte: items read since they arrived, per
    /// byte, per segment written since it was opened (its age). A segment of small items
    /// many of which are read is worth more than one of large items, and one whose items
    /// went unread for long worth less than one just filled.
    fn worth(&self, id: SegId, opened: u64) -> f64 {
        let m = self.segs.meta(id);
        let active = f64::from(m.active_items.load(Ordering::Relaxed));
        let used = f64::from(m.used.load(Ordering::Relaxed).max(1));
        let age = opened.saturating_sub(m.born.load(Ordering::Relaxed)) + 1;
        active / (used * age as f64)
    }

    /// Whether segment `id` has holes enough to compact (see [`COMPACT_BELOW`]), and still
    /// sealed if `sealed` (a victim already taken out of its queue is not).
    pub(crate) fn is_sparse(&self, id: SegId, sealed: bool) -> bool {
        self.live_below(id, sealed, COMPACT_BELOW)
    }

    /// [`is_sparse`](Self::is_sparse) for a sealed segment the expiry sweep just walked
    /// (see [`COMPACT_EXPIRED_BELOW`]).
    pub(crate) fn is_sparse_after_expiry(&self, id: SegId) -> bool {
        self.live_below(id, true, COMPACT_EXPIRED_BELOW)
    }

    fn live_below(&self, id: SegId, sealed: bool, share: f64) -> bool {
        let m = self.segs.meta(id);
        let used = f64::from(m.used.load(Ordering::Relaxed));
        let live = f64::from(m.live_bytes.load(Ordering::Relaxed));
        (!sealed || m.state.load(Ordering::Acquire) == crate::segments::SEALED)
            && live < used * share
    }

    /// Takes a remembered sparse segment that is still sealed, unpinned and sparse out
    /// of its queue, with that queue: one the expiry sweep noted, else one deletes and
    /// overwrites holed ([`Inner::note_if_holed`]).
    fn take_sparse(&self, ev: &mut Evictor) -> Option<(SegId, usize)> {
        while let Some(id) = ev.pop_sparse() {
            // A sealed segment's live bytes only fall, so one noted sparse still is; the
            // check is for its state (the lenient share covers both ways of noting).
            if let Some(taken) = self.take_if_sparse(id, COMPACT_EXPIRED_BELOW) {
                return Some(taken);
            }
        }
        loop {
            let id = self.holed.lock().pop_front()?;
            if let Some(taken) = self.take_if_sparse(id, COMPACT_BELOW) {
                return Some(taken);
            }
            // Not now (a reply pins it, or it left its queue meanwhile): its next hole
            // notes it again.
            self.segs
                .meta(id)
                .holed_noted
                .store(false, Ordering::Relaxed);
        }
    }

    /// Takes segment `id` out of its queue, with that queue, if it is still sealed, below
    /// `share` live and unpinned.
    fn take_if_sparse(&self, id: SegId, share: f64) -> Option<(SegId, usize)> {
        let m = self.segs.meta(id);
        let queue = (m.queue.load(Ordering::Relaxed) as usize).min(QUEUES - 1);
        (self.live_below(id, true, share)
            && m.pins.load(Ordering::Relaxed) == 0
            && self.segs.take_sealed(id, queue))
        .then_some((id, queue))
    }

    /// Seals a writer's full segment into its queue, and hands it to compaction if keys
    /// written twice while it was open already left it holed (see
    /// [`Inner::note_if_holed`]).
    pub(crate) fn seal_written(&self, id: SegId, used: u32) {
        self.segs.seal(id, used);
        self.note_if_holed(id);
    }

    /// Hands sealed segment `id` to eviction for compaction once its live bytes are below
    /// [`COMPACT_BELOW`] of what it holds, once per use of the segment. Called as an item
    /// in it is unlinked, and as a writer seals it ([`Inner::seal_written`]).
    ///
    /// Why: an overwrite or delete leaves a hole that memcached's allocator reuses at
    /// once, while a segment's memory comes back only when it is emptied. Left to wait
    /// until eviction reaches them, holed segments piled up behind the oldest data, and
    /// every write evicted live items instead: after random sets of 100 KB values (16
    /// clients repeating one key sequence, so most sets overwrite) shoald at `-m 1024`
    /// held 2,382 items in 244 MB where memcached held 10,236 in 1,048 MB.
    #[inline]
    pub(crate) fn note_if_holed(&self, id: SegId) {
        if self.is_sparse(id, true) && !self.segs.meta(id).holed_noted.swap(true, Ordering::Relaxed)
        {
            let mut holed = self.holed.lock();
            // Each segment is listed at most once per use; a segment reused while still
            // listed can leave a stale entry, so the list is capped at the segment count.
            if holed.len() >= self.segs.limit() {
                holed.pop_front();
            }
            holed.push_back(id);
        }
    }

    /// Takes the segment to evict out of its queue: one already empty if there is one,
    /// else the oldest unpinned segment of the policy's queue (or of any queue, if that
    /// one has none).
    fn take_victim(&self, w: &Weights) -> Option<(SegId, usize)> {
        if let Some(id) = self.segs.take_dead() {
            let q = self.segs.meta(id).queue.load(Ordering::Relaxed) as usize;
            return Some((id, q.min(QUEUES - 1)));
        }
        let first = self.choose(w)?;
        std::iter::once(first)
            .chain(0..QUEUES)
            .find_map(|q| self.segs.take_oldest(q).map(|id| (id, q)))
    }

    /// Whether unread probation items of each class are promoted anyway: those of a
    /// class worth [`ADMIT_FACTOR`] times the least valuable one, or of a class whose
    /// first main segment is still open (items of it were read, but nothing of it is
    /// sealed to weigh yet). A class nothing of which was ever read gets nothing unread.
    fn admitted_classes(&self, ev: &Evictor, w: &Weights) -> [bool; QUEUES] {
        let least = w.least_but(usize::MAX).unwrap_or(f64::INFINITY);
        std::array::from_fn(|q| {
            q != PROBATION
                && match w.worth[q] {
                    Some(worth) => worth > ADMIT_FACTOR * least,
                    None => ev.has_head(q),
                }
        })
    }

    /// Unlinks or moves every item of a segment taken out of its queue (`from`). The
    /// caller holds the eviction lock.
    fn empty_segment(&self, ev: &mut Evictor, id: SegId, from: usize, how: Emptying, w: &Weights) {
        if self.segs.meta(id).live_items.load(Ordering::Acquire) == 0 {
            return;
        }
        // Out of its queue and being emptied: the unlinks below must not list it as holed.
        self.segs
            .meta(id)
            .holed_noted
            .store(true, Ordering::Relaxed);
        let now = self.clock.now();
        let used = self.segs.meta(id).used.load(Ordering::Acquire) as usize;
        let cap = (used as f64 * RETAIN_CAP) as usize;
        let retain = how != Emptying::Dropping;
        let compact = how == Emptying::Compacting;
        let admit = if how == Emptying::Retaining && from == PROBATION {
            self.admitted_classes(ev, w)
        } else {
            [false; QUEUES]
        };
        let mut kept = 0usize;
        self.walk(id, |loc, raw| {
            let hash = self.hash(raw.key());
            let mut shard = self.shard(hash);
            if !shard.links(self, hash, loc) {
                return;
            }
            if is_expired(raw.exptime(), now) {
                self.remove_expired(&mut shard, hash, loc, false);
                return;
            }
            let freq = raw.freq();
            // A stub whose page was reused can only miss: nothing to keep, read or not.
            let dead_stub = from == STUBS
                && self
                    .flash()
                    .zip(Self::locator(&raw))
                    .is_some_and(|(f, loc)| !f.may_hold(loc));
            if retain && !dead_stub {
                // Promotion sorts probation's items into size classes; compaction and
                // retention keep an item in its queue.
                let class = if from == PROBATION && !compact {
                    if raw.is_flash() {
                        STUBS
                    } else {
                        class_of(self.footprint(&raw))
                    }
                } else {
                    from
                };
                if (freq > 0 || admit[class] || compact) && kept < cap {
                    // A compaction moves items as they are; eviction counts the trip.
                    let freq_after = if compact {
                        freq
                    } else {
                        freq.saturating_sub(1)
                    };
                    let moved = self.move_item(
                        ev,
                        &mut shard,
                        hash,
                        (loc, raw),
                        (class, freq_after),
                        cap - kept,
                        Payload::Same,
                    );
                    if let Some(size) = moved {
                        kept += size;
                        let c = &mut ev.counters;
                        if compact {
                            c.compacted += 1;
                        } else if from == PROBATION {
                            c.promoted += 1;
                            c.promoted_bytes += size as u64;
                        } else {
                            c.retained += 1;
                            c.retained_bytes += size as u64;
                        }
                        return;
                    }
                }
            }
            // With a flash tier, a value worth a disk read leaves memory but not the cache.
            if retain && kept < cap && self.flushable(&raw) {
                let moved = self.flush_to_flash(
                    ev,
                    &mut shard,
                    hash,
                    (loc, raw),
                    freq.saturating_sub(1),
                    cap - kept,
                );
                if let Some(size) = moved {
                    kept += size;
                    return;
                }
            }
            if self.remove_loc(&mut shard, hash, loc) {
                // Counted in the item's memcached slab class (see `class_stats`).
                let e = self.class_events.of(self.slab_class(&raw).0);
                bump(&e.evicted);
                if raw.bits() & FETCHED == 0 {
                    bump(&e.evicted_unfetched);
                }
                if freq > 0 {
                    bump(&e.evicted_active);
                }
                if raw.exptime() != 0 {
                    bump(&e.evicted_nonzero);
                }
                let idle = now.saturating_sub(raw.atime());
                e.evicted_time.store(idle, Ordering::Relaxed);
                ev.counters.evicted_time = idle;
                if let Some(observe) = self.evict_observer.get() {
                    // The segment is not reused before this walk ends, so the item's
                    // bytes are still intact although it is unlinked.
                    observe(&self.view(loc, raw, now));
                }
                if from == PROBATION {
                    self.ghost.insert(hash);
                }
            }
        });
    }

    /// Copies the linked item `old` (at `raw`) to the head of `queue` with read count
    /// `freq`, and points the index at the copy. Returns the copy's size, or `None`
    /// (nothing changed) if it would exceed `room` bytes or no segment can be had for it.
    /// The caller holds the item's shard lock and the eviction lock.
    // The item, where it goes and what it carries: one call per way of keeping an item.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn move_item(
        &self,
        ev: &mut Evictor,
        shard: &mut Shard,
        hash: u64,
        (old, raw): (Ref, RawItem),
        (queue, freq): (usize, u32),
        room: usize,
        payload: Payload<'_>,
    ) -> Option<usize> {
        let bits = raw.bits();
        const UNWRITTEN: [u8; LOCATOR_LEN] = [0; LOCATOR_LEN];
        let (mut payload, flash_bit, mut write): (&[u8], u32, _) = match payload {
            Payload::Same => (raw.value(), bits & crate::layout::FLASH, None),
            Payload::Stub(write) => (&UNWRITTEN[..], crate::layout::FLASH, Some(write)),
            Payload::Value(value) => (value, 0, None),
        };
        let spec = ItemSpec::moved(
            &raw,
            payload.len(),
            || self.cas_of(old, &raw),
            with_freq(bits & (FETCHED | STALE | WIN_SENT | CAS_SEEN), freq) | flash_bit,
        );
        let size = self.refs.aligned(spec.size());
        if size > room {
            return None;
        }
        let (seg, off) = ev.alloc(&self.segs, queue, size)?;
        let locator;
        let written = match write.as_mut().map(|w| w()) {
            None => true,
            Some(Some(l)) => {
                locator = l.to_bytes();
                payload = &locator;
                true
            }
            // Flash refused the value: the place taken stays a dead item (never linked),
            // as an overwritten one does, until eviction reaches its segment.
            Some(None) => false,
        };
        // SAFETY: eviction owns [off, off + size) of its head segment exclusively (under
        // the eviction lock); the copy is published below under the shard lock. The source
        // is another segment's item, immutable apart from its header's state words, which
        // readers only change under the shard lock this caller holds.
        unsafe {
            let dst = self.segs.base(seg).add(off as usize);
            layout::write(dst, &spec, raw.key(), &[payload], raw.atime());
        }
        if !written {
            return None;
        }
        self.expires_in(seg, spec.exptime);
        let new = self.refs.make(seg, off);
        self.link_accounting(shard, new, size);
        shard.replace(self, hash, old, new);
        self.unlink_accounting(shard, old);
        Some(size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_cover_every_size_in_order() {
        assert_eq!(class_of(16), 1);
        assert_eq!(class_of(95), 1);
        assert_eq!(class_of(96), 2);
        assert_eq!(class_of(1 << 20), CLASSES);
        assert_eq!(class_of(usize::MAX), CLASSES);
        let mut last = 1;
        for f in (16..2 << 20).step_by(997) {
            let c = class_of(f);
            assert!(c >= last && c < QUEUES);
            last = c;
        }
    }
}
