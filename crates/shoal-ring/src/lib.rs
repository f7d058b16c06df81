//! Placeholder replaced by the ring work.
