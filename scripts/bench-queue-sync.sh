#!/usr/bin/env bash
# shoal-queued's durability modes beside redis lists, and fanout (issue 27's benchmark):
#   1. enqueue throughput and latency of 256-byte messages into one queue, for
#      shoal-queued --fsync always / 5 ms / never beside redis LPUSH with
#      appendfsync always / everysec / no (an append-only file, no RDB snapshots);
#   2. the same modes set per queue (Kestrel's sync_journal in --queue-config, under a
#      server-wide --fsync never), and a memory-only queue (keep_journal=false) beside
#      redis with no persistence at all;
#   3. fanout: the same enqueues into a parent queue with 0, 1 and 4 children
#      (`parent+child` queues; the load's one key is `benchq0`), every message copied to each child, at --fsync 5.
# Each configuration runs REPEATS times (default 3) for SECS seconds (default 5), fresh
# server and data directory each time; the table gives medians (and min-max of ops/s).
# Closed loop, 16 connections on 2 threads, depth 1. Results to $OUT (default
# bench/results/queue-sync/results.md).
#
#   [REPEATS=3] [SECS=5] [OUT=...] bash scripts/bench-queue-sync.sh
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${REPEATS:-3}
secs=${SECS:-5}
out=${OUT:-bench/results/queue-sync}
bin=target/release
cargo build --release -p shoal-queued -p shoal-bench >&2
command -v redis-server >/dev/null || { echo "redis-server is required" >&2; exit 1; }
mkdir -p "$out"
tmp=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
  for _ in $(seq 1 100); do
    (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "nothing listening on $1" >&2
  exit 1
}
stop() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=; }

# One run: load against 127.0.0.1:$1 with protocol $2; prints "ops/s p50 p99".
run_load() {
  local json=$tmp/load.json
  "$bin/shoal-bench" load -s "127.0.0.1:$1" -P "$2" -c 16 -T 2 -k 1 --key-prefix benchq \
    --key-width 0 --no-prefill --set-ratio 1 -v 256 -t "${secs}s" -w 1s --no-progress \
    --json "$json" >/dev/null
  python3 - "$json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
def find(d, *names):
    for n in names:
        if isinstance(d, dict) and n in d:
            return d[n]
    return None
ops = find(r, "ops_per_sec")
lat = find(r, "latency") or {}
p50 = find(lat, "p50_us", "p50")
p99 = find(lat, "p99_us", "p99")
print(f"{ops:.0f} {p50} {p99}")
PY
}

# median of a column of numbers on stdin
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

rows=()
measure() { # label, then a function that starts the server on $port and sets $proto
  local label=$1 start=$2
  local runs=()
  for _ in $(seq 1 "$repeats"); do
    port=$(free_port)
    rm -rf "$tmp/data"
    mkdir -p "$tmp/data"
    "$start"
    wait_port "$port"
    runs+=("$(run_load "$port" "$proto")")
    stop
  done
  local ops p50 p99 lo hi
  ops=$(printf '%s\n' "${runs[@]}" | cut -d' ' -f1 | median)
  lo=$(printf '%s\n' "${runs[@]}" | cut -d' ' -f1 | sort -n | head -1)
  hi=$(printf '%s\n' "${runs[@]}" | cut -d' ' -f1 | sort -n | tail -1)
  p50=$(printf '%s\n' "${runs[@]}" | cut -d' ' -f2 | median)
  p99=$(printf '%s\n' "${runs[@]}" | cut -d' ' -f3 | median)
  echo "$label: $ops ops/s ($lo-$hi), p50 $p50 us, p99 $p99 us" >&2
  rows+=("| $label | $ops | $lo-$hi | $p50 | $p99 |")
}

queued() { # fsync, children
  "$bin/shoal-queued" -p "$port" -l 127.0.0.1 -d "$tmp/data" --fsync "$1" -t 2 \
    >/dev/null 2>&1 &
  pid=$!
  proto=text
  if [ "${2:-0}" -gt 0 ]; then
    wait_port "$port"
    for c in $(seq 1 "$2"); do
      # A child queue is created by its first use.
      printf 'get benchq0+child%d\r\nquit\r\n' "$c" >"/dev/tcp/127.0.0.1/$port" || true
    done
  fi
}
queued_conf() { # one queue-config line for the load's queue, under --fsync never
  echo "benchq0 $1" >"$tmp/queues.conf"
  "$bin/shoal-queued" -p "$port" -l 127.0.0.1 -d "$tmp/data" --fsync never -t 2 \
    --queue-config "$tmp/queues.conf" >/dev/null 2>&1 &
  pid=$!
  proto=text
}
redis() { # appendfsync, or "off" for no persistence
  local aof=(--appendonly yes --appendfsync "$1")
  [ "$1" = off ] && aof=(--appendonly no)
  redis-server --port "$port" --bind 127.0.0.1 --save '' "${aof[@]}" \
    --dir "$tmp/data" --daemonize no >/dev/null 2>&1 &
  pid=$!
  proto=resp-list
}
q_always() { queued always; }
q_5ms() { queued 5; }
q_never() { queued never; }
r_always() { redis always; }
r_everysec() { redis everysec; }
r_no() { redis no; }
pq_always() { queued_conf sync_journal=always; }
pq_5ms() { queued_conf sync_journal=5ms; }
pq_memory() { queued_conf keep_journal=false; }
r_off() { redis off; }
f_1() { queued 5 1; }
f_4() { queued 5 4; }

load_avg() { uptime | sed 's/.*load average: //'; }
started_load=$(load_avg)
measure "shoal-queued --fsync always" q_always
measure "redis appendfsync always" r_always
measure "shoal-queued --fsync 5 (ms)" q_5ms
measure "redis appendfsync everysec" r_everysec
measure "shoal-queued --fsync never" q_never
measure "redis appendfsync no" r_no
measure "queue sync_journal=always (server --fsync never)" pq_always
measure "queue sync_journal=5ms (server --fsync never)" pq_5ms
measure "queue keep_journal=false (memory only)" pq_memory
measure "redis without persistence" r_off
measure "shoal-queued --fsync 5, parent + 1 child" f_1
measure "shoal-queued --fsync 5, parent + 4 children" f_4

{
  echo "# shoal-queued durability modes beside redis lists, and fanout"
  echo
  echo "\`REPEATS=$repeats SECS=$secs bash scripts/bench-queue-sync.sh\` on $(date -u +%Y-%m-%d), $(nproc) CPUs, load average at start $started_load."
  echo "Enqueues of 256-byte messages into one queue (redis: LPUSH to one list), 16 connections on"
  echo "2 threads, depth 1, closed loop; medians of $repeats runs of $secs s, fresh server each run."
  echo
  echo "| configuration | enqueues/s (median) | min-max | p50 us | p99 us |"
  echo "|---|---:|---:|---:|---:|"
  printf '%s\n' "${rows[@]}"
} >"$out/results.md"
cat "$out/results.md"
