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
# 1,000,000 keys, 50% sets: the write and eviction path); `overwrites` (-m 8, 80,000 keys
# of which about 60,000 fit, 50% sets: most sets replace a live item, leaving holes that
# compaction reclaims).
# Usage: scripts/bench-instructions-ab.sh OLD_SHOALD NEW_SHOALD [requests]
#   [DEPTHS="1 16"] [CASES="fits evicts overwrites"]   (needs valgrind and a release shoal-bench)
#   [OLD_ARGS="..."] [NEW_ARGS="..."]: further flags for each build, so one binary can be
#   compared with itself, e.g. OLD_ARGS="-o event_loop=tokio" for the worker loops.
#   Either build may be a memcached binary (its name starts with "memcached"): it gets
#   -c 19988 (what valgrind leaves of the file limit) and, as root, -u root.
#   [CACHE_SIM=1]: callgrind also simulates the caches (valgrind's model of this CPU's
#   L1 and last-level caches), and the table gives first-level and last-level data-cache
#   misses per request beside the instructions. On VMs without hardware counters
#   (perf stat: "instructions <not supported>") this is where memory stalls can be seen.
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
    overwrites) mem=8 keys=80000 sets=0.5 prefill=(--no-prefill) ;;
    *) echo "unknown case $case" >&2; exit 2 ;;
  esac
  if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then
    echo "port $port is already taken: stop what listens there first" >&2
    exit 1
  fi
  case $(basename "$shoald") in
    memcached*)
      extra="$extra -c 19988"
      [ "$(id -u)" = 0 ] && extra="$extra -u root"
      ;;
  esac
  local sim=()
  [ "${CACHE_SIM:-0}" = 1 ] && sim=(--cache-sim=yes)
  # shellcheck disable=SC2086 # $extra is a list of arguments
  valgrind --tool=callgrind "${sim[@]}" --callgrind-out-file="$tmp/cg.out" \
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
  # Per request: instructions, or with CACHE_SIM "instructions/D1 misses/LL misses" (the
  # events line names the totals' columns).
  cat "$tmp"/cg.out.* 2>/dev/null | awk -v r="$requests" -v sim="${CACHE_SIM:-0}" '
    /^events:/ { for (i = 2; i <= NF; i++) col[$i] = i }
    /^totals:/ {
      ir += $col["Ir"]
      if (sim == 1) {
        d1 += $col["D1mr"] + $col["D1mw"]
        ll += $col["DLmr"] + $col["DLmw"]
      }
    }
    END {
      if (sim == 1) printf "%d/%.1f/%.2f", ir / r, d1 / r, ll / r
      else printf "%d", ir / r
    }'
  rm -f "$tmp"/cg.out*
}

what="instr/request"
[ "${CACHE_SIM:-0}" = 1 ] && what="instr / D1 misses / LL misses per request"
printf '| depth | memory | old %s | new %s | new / old |\n' "$what" "$what"
printf '|---:|---|---:|---:|---:|\n'
for depth in ${DEPTHS:-1 16}; do
  for case in ${CASES:-fits evicts}; do
    a=$(run "$old" "$depth" "$case" "${OLD_ARGS:-}")
    b=$(run "$new" "$depth" "$case" "${NEW_ARGS:-}")
    # Each figure's ratio, in the same order.
    ratio=$(awk -v a="$a" -v b="$b" 'BEGIN {
      n = split(a, x, "/"); split(b, y, "/")
      for (i = 1; i <= n; i++) printf "%s%.3f", (i > 1 ? " / " : ""), (x[i] > 0 ? y[i] / x[i] : 0)
    }')
    printf '| %s | %s | %s | %s | %s |\n' "$depth" "$case" "${a//\// \/ }" "${b//\// \/ }" "$ratio"
  done
done
