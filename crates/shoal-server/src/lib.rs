//! shoald server.
