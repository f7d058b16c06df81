#!/usr/bin/env bash
# The client's multi-get against 4 nodes vs 1, in each protocol, with shoald and then
# memcached (if installed) as the nodes, in one run; 3 runs of each cell, one JSON line each.
# Usage: crates/shoal-client/examples/multiget.sh [SECS] [PROTOCOLS]
#   (release builds in $CARGO_TARGET_DIR or target/; PROTOCOLS default "text meta binary")
set -euo pipefail
cd "$(dirname "$0")/../../.."
secs=${1:-5}
protocols=${2:-text meta binary}
bin="${CARGO_TARGET_DIR:-target}/release"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_nodes KIND: starts 4 single-threaded nodes, sets $addrs.
start_nodes() {
  addrs=()
  for _ in 0 1 2 3; do
    if [ "$1" = shoald ]; then
      log=$(mktemp)
      "$bin/shoald" -p -1 -l 127.0.0.1 -t 1 -m 128 -v 2>"$log" &
      pids+=($!)
      p=""
      for _ in $(seq 100); do
        p=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -n1)
        [ -n "$p" ] && break
        sleep 0.05
      done
    else
      p=$(free_port)
      memcached -p "$p" -U 0 -l 127.0.0.1 -t 1 -m 128 -u root &
      pids+=($!)
      sleep 0.2
    fi
    addrs+=("127.0.0.1:$p")
  done
}

kinds=shoald
command -v memcached >/dev/null && kinds="shoald memcached"
for kind in $kinds; do
  start_nodes "$kind"
  four=$(IFS=,; echo "${addrs[*]}")
  for proto in $protocols; do
    for _ in 1 2 3; do
      echo "$kind one:  $("$bin/examples/multiget" "${addrs[0]}" "$secs" 16 100 "$proto")"
      echo "$kind four: $("$bin/examples/multiget" "$four" "$secs" 16 100 "$proto")"
    done
  done
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  pids=()
done
