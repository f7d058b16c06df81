#!/usr/bin/env bash
# Syscalls and server CPU per request, shoald beside memcached (the data path's evidence:
# what each server pays the kernel per request).
#
# For each server (shoald on epoll, shoald --io-uring, memcached), value size and pipeline
# depth: start it with -t 2, prefill, attach
# `strace -c -f` to it, send a fixed number of requests with shoal-bench load
# (16 connections, 1:10 set:get, 100-byte values), detach, and divide the syscall
# count and the server's CPU time (utime+stime from /proc) by the requests sent.
# strace slows the server down, so throughput is not reported here: only counts.
#
#   bash scripts/syscalls.sh [REQUESTS] > docs/benchmarks/DATE-syscalls.md
#   VALUES="100 10240 102400" DEPTHS=1 bash scripts/syscalls.sh 50000
set -euo pipefail
cd "$(dirname "$0")/.."
requests=${1:-200000}
bin=target/release
command -v strace >/dev/null || { echo "strace is needed (apt-get install -y strace)" >&2; exit 1; }
command -v memcached >/dev/null || { echo "memcached is needed (apt-get install -y memcached)" >&2; exit 1; }
[ -x "$bin/shoald" ] && [ -x "$bin/shoal-bench" ] || cargo build --release --bin shoald --bin shoal-bench >&2

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }

measure() { # server depth [value size]
  local server=$1 depth=$2 value=${3:-100} port pid trace
  port=$(free_port)
  case "$server" in
    shoald) "$bin/shoald" -p "$port" -l 127.0.0.1 -t 2 -m 1024 2>/dev/null & ;;
    "shoald io_uring") "$bin/shoald" -p "$port" -l 127.0.0.1 -t 2 -m 1024 --io-uring 2>/dev/null & ;;
    *) memcached -p "$port" -l 127.0.0.1 -t 2 -m 1024 -U 0 -u "$(id -un)" 2>/dev/null & ;;
  esac
  pid=$!
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
  # Prefill outside the measured window.
  "$bin/shoal-bench" load -s "127.0.0.1:$port" -c 16 -d "$depth" -k 10000 -v "$value" \
    -n 20000 --no-progress >/dev/null 2>&1
  trace=$(mktemp)
  strace -c -f -q -o "$trace" -p "$pid" &
  local spid=$!
  sleep 0.5
  local before after
  before=$(cpu_ticks "$pid")
  "$bin/shoal-bench" load -s "127.0.0.1:$port" -c 16 -d "$depth" -k 10000 -v "$value" \
    --set-ratio 0.0909 -n "$requests" --no-prefill --no-progress >/dev/null 2>&1
  after=$(cpu_ticks "$pid")
  kill -INT "$spid"; wait "$spid" 2>/dev/null || true
  kill "$pid"; wait "$pid" 2>/dev/null || true
  local total top
  # strace -c lines: % time, seconds, usecs/call, calls, [errors], syscall.
  total=$(awk '$NF=="total"{print $4}' "$trace")
  top=$(awk '$1 ~ /^[0-9.]+$/ && $NF!="total" {print $4, $NF}' "$trace" | sort -rn | head -3 \
        | awk -v n="$requests" '{printf "%s%s %.2f", (NR>1?", ":""), $2, $1/n}')
  rm -f "$trace"
  local hz; hz=$(getconf CLK_TCK)
  printf '| %s | %s | %s | %.2f | %.2f | %s |\n' "$server" "$depth" "$value" \
    "$(echo "$total / $requests" | bc -l)" \
    "$(echo "($after - $before) * 1000000 / $hz / $requests" | bc -l)" "$top"
}

echo "# Syscalls and CPU per request: shoald vs memcached ($(date -u +%F))"
echo
echo "\`bash scripts/syscalls.sh $requests\` on $(nproc) cores, $(uname -r); memcached $(memcached -V | awk '{print $2}')."
echo "$requests requests (1:10 set:get, 10,000 keys) over 16 connections, server -t 2 -m 1024, under \`strace -c -f\`."
echo
echo "| server | depth | value bytes | syscalls / request | server CPU µs / request (under strace) | most frequent (per request) |"
echo "|---|---:|---:|---:|---:|---|"
for value in ${VALUES:-100}; do
  for depth in ${DEPTHS:-1 16}; do
    for server in shoald "shoald io_uring" memcached; do
      measure "$server" "$depth" "$value"
    done
  done
done
