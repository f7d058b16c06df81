//! Meta-command flags (`mg`, `ms`, `md`, `ma`, `me`): CONTRACT ONLY, implementation pending.
