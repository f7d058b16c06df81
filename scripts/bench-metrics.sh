#!/usr/bin/env bash
# What --metrics-listen costs shoald: throughput with metrics off and on (on:
# scraped every second, as Prometheus would), pipelined (depth 16) and not (depth 1),
# in alternating pairs. Prints one line per pair and the medians: ops/s, and shoald's CPU
# time per request (user+system, from /proc; less sensitive than ops/s to other load on a
# shared machine).
# Usage: [DEPTHS="1 16"] scripts/bench-metrics.sh [pairs] [seconds]   (needs a release build of shoald and
# shoal-bench in ${CARGO_TARGET_DIR:-target}/release, and curl)
set -euo pipefail
pairs=${1:-5}
secs=${2:-5}
bin=${CARGO_TARGET_DIR:-target}/release
port=21911
mport=21912

run() { # mode depth -> "ops/s cpu-ns-per-request"
  local mode=$1 depth=$2 args=() scraper=
  [ "$mode" = on ] && args=(--metrics-listen 127.0.0.1:$mport)
  "$bin/shoald" -p $port -l 127.0.0.1 -t 1 -U 0 -m 256 "${args[@]}" >/dev/null 2>&1 &
  local pid=$!
  sleep 0.3
  # A shoald left over on the port would be measured instead: refuse to go on.
  kill -0 "$pid" 2>/dev/null || { echo "shoald did not start (port $port busy?)" >&2; exit 1; }
  if [ "$mode" = on ]; then
    curl -sf -o /dev/null http://127.0.0.1:$mport/metrics || { echo "no metrics on $mport" >&2; exit 1; }
  fi
  if [ "$mode" = on ]; then
    ( while true; do curl -s -o /dev/null http://127.0.0.1:$mport/metrics; sleep 1; done ) >/dev/null 2>&1 &
    scraper=$!
  fi
  local out ops reqs ticks
  out=$("$bin/shoal-bench" load -s 127.0.0.1:$port -T 1 -c 16 -d "$depth" -t "${secs}s" -w 1s \
        --no-progress 2>&1)
  ops=$(awk '/^ops\/s/ {print $2}' <<<"$out")
  # Requests served in the timed part and warm-up alike: gets + sets reported, plus the
  # warm-up second at the same rate.
  reqs=$(awk '/^ops\/s/ {gsub(/[(]/, "", $3); print $3 + $5 + $2}' <<<"$out")
  ticks=$(awk '{print $14 + $15}' /proc/$pid/stat)
  if [ -n "$scraper" ]; then kill "$scraper"; wait "$scraper" 2>/dev/null || true; fi
  kill "$pid"; wait "$pid" 2>/dev/null || true
  echo "$ops $(awk -v t="$ticks" -v r="$reqs" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%d", t / hz * 1e9 / r}')"
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

for depth in ${DEPTHS:-1 16}; do
  off=(); on=()
  for i in $(seq "$pairs"); do
    # Alternate which goes first, so drift (other load, thermal) hits both alike.
    if [ $((i % 2)) -eq 1 ]; then
      off+=("$(run off "$depth")"); on+=("$(run on "$depth")")
    else
      on+=("$(run on "$depth")"); off+=("$(run off "$depth")")
    fi
    echo "depth $depth pair $i: off ${off[-1]} on ${on[-1]}  (ops/s cpu-ns/request)"
  done
  m_off=$(printf '%s\n' "${off[@]}" | cut -d' ' -f1 | median)
  m_on=$(printf '%s\n' "${on[@]}" | cut -d' ' -f1 | median)
  c_off=$(printf '%s\n' "${off[@]}" | cut -d' ' -f2 | median)
  c_on=$(printf '%s\n' "${on[@]}" | cut -d' ' -f2 | median)
  awk -v d="$depth" -v a="$m_off" -v b="$m_on" -v x="$c_off" -v y="$c_on" \
    'BEGIN {printf "depth %s: median off %d ops/s, on %d ops/s (%+.2f%%); CPU per request off %d ns, on %d ns (%+.2f%%)\n", d, a, b, (b-a)*100/a, x, y, (y-x)*100/x}'
done
