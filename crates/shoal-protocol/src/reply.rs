//! CONTRACT ONLY, implementation pending.
