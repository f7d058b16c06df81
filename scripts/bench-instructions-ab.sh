#!/usr/bin/env bash
# Instructions per request of two shoald builds, counted by valgrind's callgrind: unlike
# ops/s or CPU time on a shared VM, an instruction count does not move with other load on
# the machine, so a change's cost on the data path can be checked to a few percent while
# other benchmarks run.
#
# For each depth and memory case, each build (-t 1) runs under callgrind; after a warm-up
# (200,000 requests, which fill the cache) the counters are zeroed, a fixed number of requests is sent
# (shoal-bench load -n, 16 connections, 100 B values, uniform keys), and the instructions
# shoald executed (all threads) are divided by the requests. Memory cases: `fits`
# (-m 1024, 100,000 keys, 10% sets: no eviction, the read path) and `evicts` (-m 8,
# 1,000,000 keys, 50% sets: the write and eviction path).
# Usage: scripts/bench-instructions-ab.sh OLD_SHOALD NEW_SHOALD [requests]
#   [DEPTHS="1 16"] [CASES="fits evicts"]   (needs valgrind and a release shoal-bench)
#   [OLD_ARGS="..."] [NEW_ARGS="..."]: further flags for each build, so one binary can be
#   compared with itself, e.g. OLD_ARGS="-o event_loop=tokio" for the worker loops.
set -euo pipefail
old=$1
new=$2
requests=${3:-200000}
bench=${SHOAL_BENCH:-${CARGO_TARGET_DIR:-target}/release/shoal-bench}
port=21931
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

wait_port() { # port
  for _ in $(seq 1 300); do
    (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "nothing listening on $1" >&2
  exit 1
}

run() { # shoald depth case extra-args -> instructions per request
  local shoald=$1 depth=$2 case=$3 extra=$4 mem keys sets prefill
  case $case in
    fits) mem=1024 keys=100000 sets=0.1 prefill=() ;;
    # No prefill (a million sets under callgrind take minutes): the warm-up's 100,000
    # sets fill 8 MiB, and half the measured requests are sets that evict.
    evicts) mem=8 keys=1000000 sets=0.5 prefill=(--no-prefill) ;;
    *) echo "unknown case $case" >&2; exit 2 ;;
  esac
  if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then
    echo "port $port is already taken: stop what listens there first" >&2
    exit 1
  fi
  valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" \
    "$shoald" -p $port -l 127.0.0.1 -t 1 -U 0 -m "$mem" $extra >/dev/null 2>"$tmp/vg.log" &
  local pid=$!
  wait_port $port
  "$bench" load -s 127.0.0.1:$port -T 1 -c 16 -d "$depth" -k "$keys" -v 100 --set-ratio "$sets" \
    --key-dist uniform -n 200000 "${prefill[@]}" --no-progress >/dev/null 2>&1
  callgrind_control -z "$pid" >/dev/null 2>&1
  "$bench" load -s 127.0.0.1:$port -T 1 -c 16 -d "$depth" -k "$keys" -v 100 --set-ratio "$sets" \
    --key-dist uniform -n "$requests" --no-prefill --no-progress >/dev/null 2>&1
  callgrind_control -d "$pid" >/dev/null 2>&1
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  # Only the dump made after zeroing has a part number (cg.out.1).
  local ir
  ir=$(cat "$tmp"/cg.out.* 2>/dev/null | awk '/^totals:/ {s += $2} END {print s + 0}')
  rm -f "$tmp"/cg.out*
  awk -v i="$ir" -v r="$requests" 'BEGIN {printf "%d", i / r}'
}

printf '| depth | memory | old instr/request | new instr/request | new / old |\n'
printf '|---:|---|---:|---:|---:|\n'
for depth in ${DEPTHS:-1 16}; do
  for case in ${CASES:-fits evicts}; do
    a=$(run "$old" "$depth" "$case" "${OLD_ARGS:-}")
    b=$(run "$new" "$depth" "$case" "${NEW_ARGS:-}")
    printf '| %s | %s | %s | %s | %s |\n' "$depth" "$case" "$a" "$b" \
      "$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.3f", b / a}')"
  done
done
