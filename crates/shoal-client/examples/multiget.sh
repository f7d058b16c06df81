#!/usr/bin/env bash
# The client's multi-get against 4 shoald nodes vs 1, in each protocol, 3 runs each.
# Usage: crates/shoal-client/examples/multiget.sh [SECS] [PROTOCOLS]
#   (release builds in $CARGO_TARGET_DIR or target/; PROTOCOLS default "text meta binary")
set -euo pipefail
cd "$(dirname "$0")/../../.."
secs=${1:-5}
bin="${CARGO_TARGET_DIR:-target}/release"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
addrs=()
for i in 0 1 2 3; do
  log=$(mktemp)
  "$bin/shoald" -p 0 -l 127.0.0.1 -t 1 -m 128 -v 2>"$log" &
  pids+=($!)
  for _ in $(seq 100); do
    p=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -n1)
    [ -n "$p" ] && break
    sleep 0.05
  done
  addrs+=("127.0.0.1:$p")
done
four=$(IFS=,; echo "${addrs[*]}")
for proto in ${2:-text meta binary}; do
  for r in 1 2 3; do
    echo "one:  $("$bin/examples/multiget" "${addrs[0]}" "$secs" 16 100 "$proto")"
    echo "four: $("$bin/examples/multiget" "$four" "$secs" 16 100 "$proto")"
  done
done
