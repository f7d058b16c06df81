#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need (idempotently),
# then runs formatting and lint checks, every crate's tests (parity and differential
# against memcached 1.6.45 built from ../shared/peers), and the real-peer compatibility
# suites (memccapable, memcached's own t/ suite, pymemcache).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
# Tests that need a peer tool (memcached, memcached-tool, nutcracker, redis-server, ...)
# fail loudly when it is missing instead of skipping; the packages installed below
# provide them.
export SHOAL_REQUIRE_PEERS=1

started=$SECONDS
# Each step is logged with the time since the start, so a slow step shows in CI's log.
log() { printf '\n==> [%dm%02ds] %s\n' $(((SECONDS - started) / 60)) $(((SECONDS - started) % 60)) "$*"; }

need_pkgs=()
command -v memcached >/dev/null || need_pkgs+=(memcached)
command -v memccapable >/dev/null || need_pkgs+=(libmemcached-tools)
[ -x /usr/sbin/nutcracker ] || command -v nutcracker >/dev/null || need_pkgs+=(nutcracker)
command -v redis-server >/dev/null || need_pkgs+=(redis-server)
# Prometheus (and its promtool) scrape and lint the daemons' /metrics pages.
{ [ -x /usr/bin/prometheus ] && command -v promtool >/dev/null; } || need_pkgs+=(prometheus)
python3 -c 'import ensurepip, venv' 2>/dev/null || need_pkgs+=(python3-venv)
# openssl s_client: a TLS client that is not rustls, in crates/shoal-proxy/tests/tls.rs.
command -v openssl >/dev/null || need_pkgs+=(openssl)
# libfiu's fiu-run / fiu-ctrl inject IO errors (fsync EIO) under shoal-queued:
# crates/shoal-queued/tests/io_errors.rs.
{ command -v fiu-run >/dev/null && command -v fiu-ctrl >/dev/null; } || need_pkgs+=(fiu-utils)
# Ruby Dalli (binary protocol) through shoal-proxy: crates/shoal-proxy/tests/dalli.rs.
command -v ruby >/dev/null || need_pkgs+=(ruby)
{ command -v ruby >/dev/null && ruby -e 'require "dalli"' 2>/dev/null; } || need_pkgs+=(ruby-dalli)
# memcached 1.6.45, the reference the differential and parity tests compare shoald with,
# is built from ../shared/peers by scripts/memcached-reference.sh; its t/ suite runs under
# prove (part of perl).
for pkg in build-essential autoconf automake libtool pkg-config libevent-dev libssl-dev \
    zlib1g-dev perl; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
    || need_pkgs+=("$pkg")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
  log "installing Debian packages: ${need_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

# The compatibility vectors are vendored in crates/shoal-ring/tests/data, which the ring's
# tests read by default; SHOAL_VECTORS_DIR still overrides. Exported so that every test
# that reads them (shoal-proxy's placement test too) uses the copy inside the repository.
export SHOAL_VECTORS_DIR="${SHOAL_VECTORS_DIR:-$root/crates/shoal-ring/tests/data}"
target="${CARGO_TARGET_DIR:-$root/target}"
export CARGO_TARGET_DIR="$target"
# Tests build the release profile without its link-time optimisation and with more
# codegen units: LTO links each of the ~90 test binaries through a whole-program pass,
# minutes on two cores for no difference in what the tests check. Benchmarks and the
# package build (cargo build --release outside this script) keep the shipped profile.
export CARGO_PROFILE_RELEASE_LTO="${CARGO_PROFILE_RELEASE_LTO:-false}"
export CARGO_PROFILE_RELEASE_CODEGEN_UNITS="${CARGO_PROFILE_RELEASE_CODEGEN_UNITS:-16}"

# docs/grafana/shoal.json must load through Grafana's import unedited. Grafana itself is not
# available here, so tests/grafana applies what the import does to the file and strictly
# decodes the result with Grafana's Foundation SDK (types generated from Grafana's
# dashboard schema), plus checks the schema cannot express; its Go tests show it rejects
# broken copies. Only the SDK comes from the Go module proxy (pinned in go.sum); the
# first run on a machine compiles it (about a minute), later runs take under a second.
log "Grafana dashboard: simulated import + strict schema check (tests/grafana)"
command -v go >/dev/null || { echo "the Go toolchain is required for tests/grafana"; exit 1; }
(
  cd tests/grafana
  unformatted=$(gofmt -l .)
  [ -z "$unformatted" ] || { echo "gofmt would change: $unformatted"; exit 1; }
  go vet ./...
  # -count=1: go's test cache does not notice changes to files outside the module, and
  # the tests read docs/grafana/shoal.json.
  go test -count=1 ./...
  go run . ../../docs/grafana/shoal.json
)

log "cargo fmt --check"
cargo fmt --all -- --check

log "module cycles (none in any crate)"
python3 scripts/module-cycles.py crates/*/

log "cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets --release -- -D warnings

log "cargo build --release"
cargo build --workspace --release --bins

# memcached 1.6.45 (about a minute to build on two cores, once per machine). Exported,
# tests/parity.rs and tests/differential.rs compare against it and fail if it is gone;
# without the peers tarball (exit 3) they skip what needs it, as the script says.
log "memcached 1.6.45, the reference (scripts/memcached-reference.sh)"
ref_status=0
ref_tree=$(bash scripts/memcached-reference.sh) || ref_status=$?
if [ "$ref_status" -eq 0 ]; then
  export SHOAL_REFERENCE_MEMCACHED="$ref_tree/memcached"
  echo "reference: $SHOAL_REFERENCE_MEMCACHED"
elif [ "$ref_status" -eq 3 ]; then
  echo "SKIPPED: memcached 1.6.45 (no peers tarball); parity and differential skip it"
else
  exit "$ref_status"
fi

# The long suites from here on are bounded (timeout), so a hang fails this run under the
# suite's name instead of running into CI's limit with nothing said; stdin is /dev/null
# because timeout runs them in a process group of their own.
log "cargo test --release"
timeout -k 30 2700 cargo test --workspace --release </dev/null

log "shoald's protocol, limit and lifecycle tests again on the io_uring data path"
SHOALD_TEST_ARGS=--io-uring cargo test --release -p shoal-server \
  --test text_commands --test binary --test meta --test bad_input --test auth --test tls \
  --test hostile --test zero_copy --test restart --test operator

# memccapable -a and -b against a shoald started with the given extra options.
memccapable_against() {
  local errlog pid port out
  errlog=$(mktemp)
  "$target/release/shoald" -p -1 -l 127.0.0.1 -t 2 -v "$@" 2>"$errlog" &
  pid=$!
  trap 'kill $pid 2>/dev/null || true; rm -f "$errlog"' EXIT
  port=""
  for _ in $(seq 1 100); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$errlog" | head -n1)
    [ -n "$port" ] && break
    sleep 0.05
  done
  [ -n "$port" ] || { echo "shoald did not start"; cat "$errlog"; exit 1; }
  for mode in -a -b; do
    out=$(timeout 120 memccapable "$mode" -h 127.0.0.1 -p "$port" 2>&1) || true
    echo "$out" | tail -n 5
    echo "$out" | grep -q "All tests passed" || { echo "memccapable $mode failed:"; echo "$out"; exit 1; }
  done
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -f "$errlog"
  trap - EXIT
}

log "memccapable -a and -b (libmemcached's ascii and binary conformance suites) against shoald"
memccapable_against
log "memccapable -a and -b against shoald on the io_uring data path"
memccapable_against --io-uring

# memcached 1.6.45's own t/ suite against shoald; the files it lists as known failures
# test what only memcached's build has (docs/testing.md). It skips itself without the
# peers tarball.
log "memcached 1.6.45's t/ suite against shoald (scripts/memcached-t-suite.sh)"
SHOALD_BIN="$target/release/shoald" timeout -k 30 1200 bash scripts/memcached-t-suite.sh </dev/null

# The Debian package from the release binaries built above: lintian, dpkg -i/-r/--purge,
# systemd-analyze verify, shoald on Debian's stock /etc/memcached.conf (about a minute,
# plus two for cargo-deb's one-time install on a new machine).
log "Debian package (scripts/test-package.sh)"
timeout -k 30 1200 bash scripts/test-package.sh </dev/null

if [ -x scripts/test-python.sh ]; then
  log "Python client suites (pymemcache)"
  SHOALD_BIN="$target/release/shoald" timeout -k 30 900 bash scripts/test-python.sh </dev/null
fi

if [ -x scripts/test-java.sh ]; then
  log "Java client suite (XMemcached, binary protocol)"
  SHOALD_BIN="$target/release/shoald" timeout -k 30 1200 bash scripts/test-java.sh </dev/null
fi

log "all suites passed"
