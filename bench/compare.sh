#!/usr/bin/env bash
# shoald vs Debian's memcached: same flags (-t 2 -m 256), same loads, alternating,
# 3 repeats; memcaslap against each; memory efficiency at -m 64 with 1M keys.
# Usage: bench/compare.sh [OUT_DIR] [extra shoal-bench compare-memcached flags, e.g. --quick]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-bench/results}"
shift || true
command -v memcached >/dev/null && command -v memcaslap >/dev/null ||
    apt-get install -y memcached libmemcached-tools
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
cargo build --release -p shoal-server -p shoal-bench --bin shoald --bin shoal-bench
"$CARGO_TARGET_DIR/release/shoal-bench" compare-memcached --out "$out" "$@"
