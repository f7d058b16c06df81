//! Warm restart with memcached's interface: `-e PATH` keeps item memory in a memory file,
//! SIGUSR1 stops gracefully and saves what the next start needs, and a start on a file
//! with valid, compatible metadata finds the whole cache (see `shoal_store`'s `restart`
//! module for the format and its guarantees).
//!
//! Messages use memcached's `[restart]` wording, so operators' log searches keep working.

use crate::config::Settings;
use shoal_store::{CleanStart, Restored, Store, StoreConfig};

/// The store for these settings: on the heap, or in the `-e` memory file with whatever a
/// graceful stop left there.
pub fn open_store(settings: &Settings) -> anyhow::Result<Store> {
    let cfg = StoreConfig {
        memory_limit: settings.memory_limit,
        max_item_size: settings.max_item_size,
        evict: settings.evictions,
        writers: settings.threads,
        index_capacity: settings.hashpower.map_or(0, |hp| 1usize << hp),
    };
    let Some(path) = &settings.memory_file else {
        return Ok(Store::new(cfg)?);
    };
    let started = std::time::Instant::now();
    let (store, restored) = Store::open_memory_file(cfg, path, &must_match(settings))?;
    match restored {
        Restored::Warm { items, expired } => tracing::info!(
            "[restart] restored {items} items from {} in {:.3} s ({expired} expired while down)",
            path.display(),
            started.elapsed().as_secs_f64()
        ),
        Restored::Clean(why @ CleanStart::NoMetadata) => tracing::info!("[restart] {why}"),
        Restored::Clean(why) => tracing::warn!("[restart] {why}"),
    }
    Ok(store)
}

/// The server settings, beyond the store's memory layout, that an item saved by one
/// process must agree with to be served by the next: items saved without CAS have no
/// uniques a CAS-enabled server could honour, and vice versa.
fn must_match(settings: &Settings) -> Vec<(&'static str, String)> {
    vec![("use_cas", settings.cas_enabled.to_string())]
}

/// After a graceful stop: writes the restart metadata if the store lives in a memory
/// file. Called once every worker has stopped writing.
pub fn save(store: &Store) -> anyhow::Result<()> {
    let Some(path) = store.memory_file() else {
        return Ok(());
    };
    let started = std::time::Instant::now();
    let saved = store.save_restart()?;
    tracing::info!(
        "[restart] saved {} items ({} bytes of metadata) for {} in {:.3} s",
        saved.items,
        saved.metadata_bytes,
        path.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
