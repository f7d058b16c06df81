#!/usr/bin/env bash
# Where the cores go at depth 1: server CPU, load-generator CPU and idle time per request,
# shoald beside memcached in alternating runs.
#
# For each round and server: start it with -t 2 -m 1024, prefill every key, then run
# `shoal-bench load -c 16 -T 1 -d 1` (1:10 set:get) for DURATION plus a 1 s warm-up.
# The measured run does not prefill again. Server CPU is utime+stime from
# /proc/PID/stat across the load run; the load
# generator's is its own user+system time from getrusage (bash's `times` is too coarse,
# so /usr/bin/time is used). Server sleeps are its threads' voluntary context switches.
# Idle is the share of the machine's cores neither used.
# This shows whether the benchmark is bound by CPU or by the round trip.
#
#   [SHOALD_ARGS="-o hugepages"] bash scripts/cpu-split.sh [ROUNDS] [VALUE_BYTES] [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
value=${2:-100}
duration=${3:-5s}
bin=target/release
command -v memcached >/dev/null || { echo "memcached is needed (apt-get install -y memcached)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "/usr/bin/time is needed (apt-get install -y time)" >&2; exit 1; }
[ -x "$bin/shoald" ] && [ -x "$bin/shoal-bench" ] || cargo build --release --bin shoald --bin shoal-bench >&2

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
# Voluntary context switches over all of a process's threads: each is a sleep and a wake-up.
switches() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^voluntary_ctxt_switches/ {s += $2} END {print s + 0}'; }
tck=$(getconf CLK_TCK)
cores=$(nproc)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

measure() { # server
  local server=$1 port pid t0 t1 w0 w1 ops secs cu cs
  port=$(free_port)
  case "$server" in
    # shellcheck disable=SC2086 # SHOALD_ARGS is a list of arguments
    shoald) "$bin/shoald" -p "$port" -l 127.0.0.1 -t 2 -m 1024 ${SHOALD_ARGS:-} 2>/dev/null & ;;
    *) memcached -p "$port" -l 127.0.0.1 -t 2 -m 1024 -U 0 -u "$(id -un)" 2>/dev/null & ;;
  esac
  pid=$!
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "$server did not start" >&2; exit 1; }
  "$bin/shoal-bench" load -s "127.0.0.1:$port" -c 16 -T 1 -k 10000 -v "$value" \
    -n 20000 --set-ratio 1.0 --no-progress >/dev/null 2>&1
  t0=$(cpu_ticks "$pid"); w0=$(switches "$pid")
  /usr/bin/time -f "%e %U %S" -o "$work/time" "$bin/shoal-bench" load -s "127.0.0.1:$port" \
    -c 16 -T 1 -d 1 -k 10000 -v "$value" --set-ratio 0.1 -t "$duration" --no-prefill \
    --no-progress >"$work/out" 2>&1
  t1=$(cpu_ticks "$pid"); w1=$(switches "$pid")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  ops=$(awk '/^ops\/s/ {print $2}' "$work/out")
  # The load run's wall time includes its warm-up, so requests are counted over it all.
  read -r secs cu cs <"$work/time"
  awk -v name="$server" -v ops="$ops" -v secs="$secs" -v cu="$cu" -v cs="$cs" \
    -v st="$((t1 - t0))" -v sw="$((w1 - w0))" -v tck="$tck" -v cores="$cores" 'BEGIN {
      req = ops * secs; sc = st / tck; cc = cu + cs;
      printf "| %s | %d | %.2f | %.3f | %.2f | %.0f%% | %.0f%% |\n", name, ops,
        sc * 1e6 / req, sw / req, cc * 1e6 / req, 100 * cs / cc,
        100 * (1 - (sc + cc) / (secs * cores)) }'
}

echo "# Server and load-generator CPU per request at depth 1 ($(date -u +%F), $value-byte values)"
echo
echo "\`bash scripts/cpu-split.sh $rounds $value $duration\` on $cores cores, $(uname -r); $(memcached -V)."
echo
echo "| server | ops/s | server CPU µs/request | server sleeps/request | load generator CPU µs/request | its system share | cores idle |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for round in $(seq "$rounds"); do
  if (( round % 2 )); then order="memcached shoald"; else order="shoald memcached"; fi
  for s in $order; do measure "$s" | tee -a "$work/rows"; done
done
echo
echo "Medians of $rounds, and shoald's ratio to memcached:"
echo
echo "| server | ops/s | server CPU µs/request | server sleeps/request | load generator CPU µs/request | cores idle |"
echo "|---|---:|---:|---:|---:|---:|"
median() { # server, column
  awk -F'|' -v s=" $1 " -v c="$2" '$2 == s {gsub(/[ %]/, "", $c); print $c}' "$work/rows" | sort -g |
    awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
declare -A m
for s in memcached shoald; do
  for c in 3 4 5 6 8; do m[$s,$c]=$(median "$s" "$c"); done
  echo "| $s | ${m[$s,3]} | ${m[$s,4]} | ${m[$s,5]} | ${m[$s,6]} | ${m[$s,8]}% |"
done
awk -v a="${m[shoald,3]}" -v b="${m[memcached,3]}" -v c="${m[shoald,4]}" -v d="${m[memcached,4]}" \
  'BEGIN {printf "| shoald / memcached | %.2fx | %.2fx | | | |\n", a / b, c / d}'
