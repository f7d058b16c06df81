#!/usr/bin/env bash
# What --metrics-listen costs shoald in instructions per request, counted by
# valgrind's callgrind: unlike ops/s or CPU time on a shared VM, an instruction count does
# not move with other load on the machine, so a 2% bound can be checked at all.
#
# For each depth, shoald (-t 1) runs under callgrind with metrics off, then on; after a
# warm-up the counters are zeroed, a fixed number of requests is sent (shoal-bench load -n,
# 16 connections, 100 B values, 10% sets), and the instructions shoald executed (all
# threads) are divided by the requests: the cost of recording. Scrapes are counted apart
# (instructions per GET /metrics, over 20 scrapes after the load), because under
# callgrind's ~50x slowdown a once-a-second scraper would land 50 times too often per
# request; what a 1 s scrape interval costs is that figure over the requests served in a
# second at full speed, which `scripts/bench-metrics.sh` measures.
# Usage: [DEPTHS="1 16"] [PAIRS=3] scripts/bench-metrics-instructions.sh [requests]   (needs release builds of
# shoald and shoal-bench in ${CARGO_TARGET_DIR:-target}/release, valgrind and curl)
set -euo pipefail
requests=${1:-200000}
bin=${CARGO_TARGET_DIR:-target}/release
port=21921
mport=21922
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

wait_port() { # port
  for _ in $(seq 1 200); do
    (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "nothing listening on $1" >&2
  exit 1
}

total_ir() { # the Ir total of the dumps callgrind_control -d made
  local ir
  ir=$(cat "$tmp"/cg.out.* 2>/dev/null | awk '/^totals:/ {s += $2} END {print s + 0}')
  rm -f "$tmp"/cg.out*
  echo "$ir"
}

run() { # mode depth -> "instructions-per-request [instructions-per-scrape]"
  local mode=$1 depth=$2 args=()
  [ "$mode" = on ] && args=(--metrics-listen 127.0.0.1:$mport)
  valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" \
    "$bin/shoald" -p $port -l 127.0.0.1 -t 1 -U 0 -m 64 "${args[@]}" >/dev/null 2>"$tmp/vg.log" &
  local pid=$!
  wait_port $port
  "$bin/shoal-bench" load -s 127.0.0.1:$port -T 1 -c 16 -d "$depth" -n 20000 --no-progress >/dev/null 2>&1
  callgrind_control -z "$pid" >/dev/null 2>&1
  "$bin/shoal-bench" load -s 127.0.0.1:$port -T 1 -c 16 -d "$depth" -n "$requests" --no-prefill \
    --no-progress >/dev/null 2>&1
  callgrind_control -d "$pid" >/dev/null 2>&1
  # Only the dump made after zeroing has a part number (cg.out.1).
  local per_request per_scrape=""
  per_request=$(awk -v i="$(total_ir)" -v r="$requests" 'BEGIN {printf "%d", i / r}')
  if [ "$mode" = on ]; then
    curl -s -o /dev/null http://127.0.0.1:$mport/metrics
    callgrind_control -z "$pid" >/dev/null 2>&1
    for _ in $(seq 20); do curl -s -o /dev/null http://127.0.0.1:$mport/metrics; done
    callgrind_control -d "$pid" >/dev/null 2>&1
    per_scrape=$(awk -v i="$(total_ir)" 'BEGIN {printf "%d", i / 20}')
  fi
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -f "$tmp"/cg.out*
  echo "$per_request $per_scrape"
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# Counts still vary by a few percent between runs (how many requests one read picks up
# depends on timing), so runs come in off/on pairs and the medians are compared.
for depth in ${DEPTHS:-1 16}; do
  offs=(); ons=()
  for i in $(seq "${PAIRS:-3}"); do
    read -r off _ < <(run off "$depth")
    read -r on scrape < <(run on "$depth")
    offs+=("$off"); ons+=("$on")
    echo "depth $depth pair $i: instructions per request off $off, on $on; one scrape $scrape"
  done
  off=$(printf '%s\n' "${offs[@]}" | median)
  on=$(printf '%s\n' "${ons[@]}" | median)
  echo "depth $depth: median instructions per request off $off, on $on ($(awk -v a="$off" -v b="$on" \
    'BEGIN {printf "%+.2f%%", (b / a - 1) * 100}'))"
done
