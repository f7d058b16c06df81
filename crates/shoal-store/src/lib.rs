//! Shoal's item store: memory-bounded, multi-threaded, with no protocol knowledge.
//!
//! Items live in fixed-size segments that writers fill by appending (one open segment per
//! thread, no lock); a sharded hash index, chained through the items, maps keys to item
//! locations. When memory is full a segment is emptied, and the items in it that were
//! read are moved to keep them (`evict`: probation and per-size-class main queues, a
//! ghost of recent evictions). Per-item overhead is a 12-byte header plus at most one
//! 4-byte bucket head, against memcached's ~50-byte header and slab-class rounding, so the
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
mod class_stats;
mod clock;
mod config;
mod dump;
mod entry;
mod error;
mod evict;
pub mod flash;
mod flash_reads;
mod flushed;
mod ghost;
mod index;
mod inner;
mod item;
mod layout;
mod memory_file;
mod queue_heads;
mod restart;
mod segments;
mod slab_class;
mod stats;
mod store;
mod store_id;
mod tier;
mod value_ref;
mod writer;

pub use class_stats::ClassStats;
pub use clock::{is_expired, Clock, MAX_RELATIVE_EXPTIME};
pub use config::StoreConfig;
pub use entry::{Entry, EntryError, StoreOptions};
pub use error::{ConfigError, StoreError};
pub use flash::{
    Flash, FlashCleanStart, FlashConfig, FlashError, FlashEvent, FlashFile, FlashStats,
};
pub use flash_reads::{Fetch, FlashRead, FlashReadDone, FlashReads, READ_AHEAD_BYTES};
pub use inner::EvictObserver;
pub use item::Item;
pub use restart::{
    metadata_path, CleanStart, RestartError, Restored, Saved, RESTART_FORMAT_VERSION,
};
pub use slab_class::{SlabClasses, ITEM_HEADER, MAX_CLASSES};
pub use stats::StoreStats;
pub use store::Store;
pub use value_ref::ValueRef;
pub use writer::Writer;
