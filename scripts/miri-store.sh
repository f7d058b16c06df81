#!/usr/bin/env bash
# Runs shoal-store's tests under Miri: the unit tests, the doc test and the integration
# tests, with the ones too slow for an interpreter marked `#[cfg_attr(miri, ignore)]` or
# shrunk under `cfg!(miri)` (tests/stress.rs runs a short version of itself). Miri checks
# the store's unsafe code -- segment memory, item views, and the publication protocol
# between writers, readers and eviction -- for undefined behaviour and data races.
#
# Usage: scripts/miri-store.sh [--require] [-- <test harness arguments>]
#   --require   exit 1 when nightly or Miri is missing (default: say how to install them,
#               print a "SKIPPED: ..." line naming what is missing and exit 0, so the
#               script can sit in any test run; CI does not run it)
#   -- ARGS     passed to every test binary, e.g. `-- stress` or `-- --skip dump::`
#
# MIRIFLAGS, if set, replaces the defaults:
#   -Zmiri-disable-isolation     the store's clock reads the wall clock (memcached's
#                                absolute expiry times) and the stress test is bounded by
#                                Instant; isolation refuses both
#   -Zmiri-permissive-provenance parking_lot keeps thread-queue pointers in integers, which
#                                strict provenance rejects; the store itself casts no
#                                integers to pointers (try -Zmiri-strict-provenance with
#                                `-- --lib` tests that do not contend on a lock)
# Add -Zmiri-tree-borrows to check the aliasing rules under Tree Borrows instead of
# Stacked Borrows.
#
# Expect 15-20 minutes on 2 cores (about 4 of them the stress test; the last full run took
# 1,085 s); pass a test name after -- to run less, e.g.
# `scripts/miri-store.sh -- eviction_under_concurrent`.
set -euo pipefail

require=0
harness=()
while [ $# -gt 0 ]; do
  case "$1" in
    --require) require=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    --)
      shift
      harness=("$@")
      break
      ;;
    *)
      echo "miri-store: unknown argument '$1' (see --help)" >&2
      exit 2
      ;;
  esac
  shift
done

skip() {
  echo "miri-store: install with: rustup toolchain install nightly --component miri,rust-src" >&2
  echo "miri-store:   (or, with nightly present: rustup component add --toolchain nightly miri rust-src)" >&2
  if [ "$require" = 1 ]; then
    echo "miri-store: FAILED: $1, and Miri is required (--require)" >&2
    exit 1
  fi
  echo "SKIPPED: shoal-store's tests under Miri: $1"
  exit 0
}

command -v rustup > /dev/null 2>&1 || skip "rustup not found"
rustup toolchain list | grep -q '^nightly' || skip "no nightly toolchain"
cargo +nightly miri --version > /dev/null 2>&1 || skip "Miri is not installed for nightly"

cd "$(dirname "$0")/.."
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-disable-isolation -Zmiri-permissive-provenance}"
echo "miri-store: $(cargo +nightly miri --version); MIRIFLAGS=$MIRIFLAGS"
# Builds Miri's sysroot on first use; a missing rust-src shows up here, not mid-test.
cargo +nightly miri setup > /dev/null 2>&1 || skip "cargo miri setup failed (is rust-src installed for nightly?)"

start=$SECONDS
cargo +nightly miri test -p shoal-store -- ${harness[@]+"${harness[@]}"}
echo "miri-store: passed in $((SECONDS - start)) s"
