#!/usr/bin/env bash
# Python client compatibility suite: pymemcache and python-binary-memcached against a real
# shoald, and python-binary-memcached through shoal-proxy's binary front end.
#
# Creates (or updates) the venv at .venv, builds shoald in release mode with the caller's
# CARGO_TARGET_DIR (default ./target), then runs pytest over tests/python. The tests start
# their own shoald instances on ephemeral loopback ports (binary: $SHOALD_BIN, default
# <target>/release/shoald) and run `shoal ring` ($SHOAL_CLI, default <target>/release/shoal).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
target="${CARGO_TARGET_DIR:-$root/target}"
export CARGO_TARGET_DIR="$target"

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/pip install -q --disable-pip-version-check pymemcache python-binary-memcached pytest

export SHOALD_BIN="${SHOALD_BIN:-$target/release/shoald}"
# Build only when no binary was handed over: scripts/test.sh has already built the whole
# workspace, and building one package alone would recompile its dependencies.
if [ ! -x "$SHOALD_BIN" ]; then
  cargo build --release --workspace --bins
fi
# shoal-proxy, which test_proxy_binary.py puts in front of shoalds.
export SHOAL_PROXY_BIN="${SHOAL_PROXY_BIN:-$target/release/shoal-proxy}"
if [ ! -x "$SHOAL_PROXY_BIN" ]; then
  cargo build --release -p shoal-proxy
fi
# `shoal ring`, which test_hashclient_placement.py cross-checks against pymemcache.
export SHOAL_CLI="${SHOAL_CLI:-$target/release/shoal}"
if [ ! -x "$SHOAL_CLI" ]; then
  cargo build --release -p shoal-cli
fi

exec .venv/bin/pytest -q tests/python "$@"
