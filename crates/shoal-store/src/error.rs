//! The store's error types.

/// Why a store operation could not complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The item is larger than a segment can hold.
    #[error("object too large for cache")]
    TooLarge,
    /// The memory limit is reached and eviction is disabled (or nothing can be evicted).
    #[error("out of memory storing object")]
    OutOfMemory,
}

/// Errors in a [`StoreConfig`](crate::StoreConfig).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The memory limit is below what one segment needs.
    #[error("memory limit of {0} bytes is too small")]
    MemoryTooSmall(usize),
}
