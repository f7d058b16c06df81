//! Warm restart with memcached's interface: `-e PATH` keeps item memory in a memory file,
//! SIGUSR1 stops gracefully and saves what the next start needs, and a start on a file
//! with valid, compatible metadata finds the whole cache (see `shoal_store`'s `restart`
//! module for the format and its guarantees).
//!
//! Messages use memcached's `[restart]` wording, so operators' log searches keep working.

use crate::config::Settings;
use shoal_store::{CleanStart, Restored, SlabClasses, Store, StoreConfig};

/// A store opened for these settings, and what a `-e` memory file held.
pub struct OpenedStore {
    /// The store.
    pub store: Store,
    /// What was found in the memory file (`None` without `-e`), to log once serving.
    pub restart: Option<RestartOutcome>,
    /// What the flash tier's file held (`None` without `ext_path`), likewise.
    pub flash: Option<crate::flash::FlashOutcome>,
}

/// What opening a memory file found, kept to be logged once the server is listening (the
/// log line operators and tests look for comes after `listening on`).
pub struct RestartOutcome {
    path: std::path::PathBuf,
    restored: Restored,
    secs: f64,
}

impl RestartOutcome {
    /// Logs the outcome in memcached's `[restart]` wording.
    pub fn log(&self) {
        match &self.restored {
            Restored::Warm { items, expired } => tracing::info!(
                "[restart] restored {items} items from {} in {:.3} s ({expired} expired while down)",
                self.path.display(),
                self.secs
            ),
            Restored::Clean(why @ CleanStart::NoMetadata) => tracing::info!("[restart] {why}"),
            Restored::Clean(why) => tracing::warn!("[restart] {why}"),
        }
    }
}

/// The slab classes memcached 1.6.45 would have with these settings (`-n`, `-f`,
/// `slab_chunk_max`, `slab_sizes`, `-C`), which `stats slabs`/`stats items` count items by.
pub fn slab_classes(settings: &Settings) -> SlabClasses {
    let t = &settings.tunables;
    SlabClasses::new(
        t.chunk_size,
        t.growth_factor,
        t.slab_chunk_max(),
        &t.slab_sizes,
        settings.cas_enabled,
    )
}

/// memcached's default `hashpower`: the index's initial size, log2 of buckets.
const DEFAULT_HASHPOWER: u8 = 16;

/// The store for these settings: on the heap, or in the `-e` memory file with whatever a
/// graceful stop left there. Called before privileges are dropped (`-u`), as the TLS and
/// SASL files are read, so a memory file in a root-owned tmpfs directory works.
pub fn open_store(settings: &Settings) -> Result<OpenedStore, crate::error::ServeError> {
    let cfg = StoreConfig {
        memory_limit: settings.memory_limit,
        max_item_size: settings.max_item_size,
        evict: settings.evictions,
        writers: settings.threads,
        // memcached starts its table at 2^16 buckets unless told otherwise; so does the
        // index here. Starting small and growing would keep chains long (up to the 1.0
        // load at which shards grow) for caches of a few hundred thousand items, and each
        // link walked is a cache miss on the request path.
        index_capacity: 1usize << settings.hashpower.unwrap_or(DEFAULT_HASHPOWER),
        preallocate: settings.large_pages,
        huge_pages: settings.huge_pages,
        slab_classes: slab_classes(settings),
    };
    let Some(path) = &settings.memory_file else {
        let store = Store::new(cfg)?;
        count_test_suite_malloc(&store);
        let flash = crate::flash::open(settings, &store, false)?;
        return Ok(OpenedStore {
            store,
            restart: None,
            flash,
        });
    };
    let started = std::time::Instant::now();
    let (store, restored) = Store::open_memory_file(cfg, path, &must_match(settings))?;
    count_test_suite_malloc(&store);
    let flash = crate::flash::open(settings, &store, matches!(restored, Restored::Warm { .. }))?;
    Ok(OpenedStore {
        store,
        flash,
        restart: Some(RestartOutcome {
            path: path.clone(),
            restored,
            secs: started.elapsed().as_secs_f64(),
        }),
    })
}

/// memcached's test-suite hook: `T_MEMD_INITIAL_MALLOC=N` in the environment counts N
/// bytes as already allocated (`total_malloced` starts there, and only the rest of `-m`
/// can be allocated). Every memcached build honours it (slabs.c: "for the test suite"),
/// and its t/64bit.t relies on it; shoald does the same, and says so in its log.
fn count_test_suite_malloc(store: &Store) {
    let Some(raw) = std::env::var_os("T_MEMD_INITIAL_MALLOC") else {
        return;
    };
    // memcached ignores a value it cannot parse.
    let Some(bytes) = raw.to_str().and_then(|s| s.trim().parse::<u64>().ok()) else {
        return;
    };
    tracing::warn!(
        "T_MEMD_INITIAL_MALLOC (memcached's test-suite hook): counting {bytes} bytes as \
         already allocated"
    );
    store.count_as_allocated(bytes);
}

/// The server settings, beyond the store's memory layout, that an item saved by one
/// process must agree with to be served by the next: items saved without CAS have no
/// uniques a CAS-enabled server could honour, and vice versa.
fn must_match(settings: &Settings) -> Vec<(&'static str, String)> {
    vec![("use_cas", settings.cas_enabled.to_string())]
}

/// After a graceful stop: writes the restart metadata if the store lives in a memory
/// file. Called once every worker has stopped writing.
pub fn save(store: &Store) -> Result<(), crate::error::ServeError> {
    let Some(path) = store.memory_file() else {
        return Ok(());
    };
    let started = std::time::Instant::now();
    // The flash tier first: the memory file's metadata, once written, promises a warm
    // start, whose stubs need the flash page table.
    crate::flash::save(store)?;
    let saved = store
        .save_restart()
        .map_err(crate::error::ServeError::Save)?;
    tracing::info!(
        "[restart] saved {} items ({} bytes of metadata) for {} in {:.3} s",
        saved.items,
        saved.metadata_bytes,
        path.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
