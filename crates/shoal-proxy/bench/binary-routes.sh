#!/usr/bin/env bash
# Text vs binary clients through shoal-proxy --threads 1, on a server pool and on a
# failover route over the same three shoald (-t 1; a fourth is the route's backup):
# shoal-bench load (90% gets), 20 connections, depth 1 and 16, every combination once per
# round, ROUNDS rounds; prints one line per run (pool, protocol, depth, round, ops/s).
# Usage: crates/shoal-proxy/bench/binary-routes.sh [ROUNDS] [SECONDS]
# Needs release builds of shoald, shoal-proxy and shoal-bench in $CARGO_TARGET_DIR
# (default target/).
set -euo pipefail
cd "$(dirname "$0")/../../.."
rounds=${1:-3}
secs=${2:-5}
bin="${CARGO_TARGET_DIR:-target}/release"
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
port_of() {
  for _ in $(seq 1 200); do
    p=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$1" | head -n1)
    [ -n "$p" ] && { echo "$p"; return; }
    sleep 0.05
  done
  echo "no listening line in $1" >&2
  exit 1
}
ports=()
for i in 0 1 2 3; do
  "$bin/shoald" -p -1 -l 127.0.0.1 -t 1 -m 256 -v 2>"$tmp/shoald$i.log" &
  pids+=($!)
done
for i in 0 1 2 3; do ports+=("$(port_of "$tmp/shoald$i.log")"); done
{
  printf 'plain:\n  listen: 127.0.0.1:0\n  hash: md5\n  servers:\n'
  for p in "${ports[@]:0:3}"; do printf '   - 127.0.0.1:%s:1\n' "$p"; done
  printf 'front:\n  listen: 127.0.0.1:0\n  route:\n    type: failover\n    pools: [main, backup]\n'
  printf 'main:\n  hash: md5\n  servers:\n'
  for p in "${ports[@]:0:3}"; do printf '   - 127.0.0.1:%s:1\n' "$p"; done
  printf 'backup:\n  servers:\n   - 127.0.0.1:%s:1\n' "${ports[3]}"
} >"$tmp/proxy.yml"
"$bin/shoal-proxy" -c "$tmp/proxy.yml" -s -1 --threads 1 2>"$tmp/proxy.log" &
pids+=($!)
for _ in $(seq 1 200); do
  [ "$(grep -c ' listening on ' "$tmp/proxy.log")" -ge 2 ] && break
  sleep 0.05
done
mapfile -t pools < <(sed -n 's/.*pool \([a-z]*\) listening on \(.*\)$/\1 \2/p' "$tmp/proxy.log")
printf 'pool\tprotocol\tdepth\tround\tops/s\n'
for round in $(seq 1 "$rounds"); do
  for depth in 1 16; do
    for p in "${pools[@]}"; do
      set -- $p
      for proto in text binary; do
        ops=$("$bin/shoal-bench" load -s "$2" -P "$proto" -c 20 -d "$depth" -t "${secs}s" \
          -w 1s -T 1 2>&1 | sed -n 's/^ops\/s \([0-9]*\).*/\1/p' | head -n1)
        printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$proto" "$depth" "$round" "$ops"
      done
    done
  done
done
