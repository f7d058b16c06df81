//! Shoal's item store: memory-bounded, multi-threaded, with no protocol knowledge.
//!
//! Items live in fixed-size segments that writers fill by appending (one open segment per
//! thread, no lock); a sharded hash index maps keys to item locations. When memory is full
//! the oldest segment is evicted whole. Per-item overhead is an 8-byte header plus an
//! 8-byte index slot, against memcached's ~50-byte header and slab-class rounding, so the
//! same memory holds far more small items.
//!
//! ```
//! use shoal_store::{Store, StoreConfig, StoreOptions};
//! let store = Store::new(StoreConfig::default()).unwrap();
//! let mut w = store.writer();
//! let cas = store
//!     .update(&mut w, b"k", |e| e.store(&[b"hello"], StoreOptions::default()))
//!     .unwrap();
//! let v = store.get(b"k", |item| (item.value().to_vec(), item.cas())).unwrap();
//! assert_eq!(v, (b"hello".to_vec(), cas));
//! ```

mod anon_region;
mod clock;
mod config;
mod dump;
mod entry;
mod error;
mod evict;
mod ghost;
mod index;
mod inner;
mod item;
mod layout;
mod memory_file;
mod restart;
mod segments;
mod stats;
mod store;
mod store_id;
mod value_ref;
mod writer;

pub use clock::{is_expired, Clock, MAX_RELATIVE_EXPTIME};
pub use config::StoreConfig;
pub use entry::{Entry, EntryError, StoreOptions};
pub use error::{ConfigError, StoreError};
pub use inner::EvictObserver;
pub use item::Item;
pub use restart::{
    metadata_path, CleanStart, RestartError, Restored, Saved, RESTART_FORMAT_VERSION,
};
pub use stats::StoreStats;
pub use store::Store;
pub use value_ref::ValueRef;
pub use writer::Writer;
