#!/usr/bin/env bash
# Binary-protocol throughput, shoald vs memcached (memcaslap -B), and the cost of TLS
# (shoald plain vs shoald -Z, crates/shoal-server/examples/tls_bench.rs).
#
# Both servers run with the same flags (-t 2 -m 256) on loopback; runs alternate
# shoald/memcached RUNS times (default 3) and the medians and their ratio are printed as
# Markdown. Environment: RUNS, SECS (memcaslap seconds per run, default 10), CONC (memcaslap
# concurrency, default 32), TLS_CONNS (default 16), TLS_SECS (default 5).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
target="${CARGO_TARGET_DIR:-$root/target}"
export CARGO_TARGET_DIR="$target"
runs=${RUNS:-3}
secs=${SECS:-10}
conc=${CONC:-32}

command -v memcaslap >/dev/null && command -v memcached >/dev/null || {
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq memcached libmemcached-tools >/dev/null
}
cargo build --release -q -p shoal-server --bins --example tls_bench

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
user_flag=()
[ "$(id -u)" = 0 ] && user_flag=(-u nobody)

pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null || true' EXIT

# one_run NAME: starts the server, runs memcaslap -B against it, prints its TPS.
one_run() {
  local port; port=$(free_port)
  case $1 in
    shoald) "$target/release/shoald" -p "$port" -l 127.0.0.1 -t 2 -m 256 2>/dev/null & ;;
    memcached) memcached "${user_flag[@]}" -p "$port" -l 127.0.0.1 -U 0 -t 2 -m 256 2>/dev/null & ;;
  esac
  pid=$!
  for _ in $(seq 1 100); do
    python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null && break
    sleep 0.05
  done
  local out
  out=$(timeout $((secs + 30)) memcaslap -s "127.0.0.1:$port" -B -T 2 -c "$conc" -t "${secs}s" 2>&1)
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
  echo "$out" | sed -n 's/.*TPS: \([0-9]*\).*/\1/p' | tail -n1
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

s_runs=(); m_runs=()
for i in $(seq 1 "$runs"); do
  s=$(one_run shoald); m=$(one_run memcached)
  echo "run $i: shoald $s ops/s, memcached $m ops/s" >&2
  s_runs+=("$s"); m_runs+=("$m")
done
s_med=$(printf '%s\n' "${s_runs[@]}" | median)
m_med=$(printf '%s\n' "${m_runs[@]}" | median)
ratio=$(awk -v a="$s_med" -v b="$m_med" 'BEGIN { printf "%.2f", a / b }')

echo
echo "| memcaslap -B -T 2 -c $conc -t ${secs}s (90% get / 10% set) | runs (ops/s) | median ops/s |"
echo "| --- | --- | --- |"
echo "| shoald -t 2 -m 256 | ${s_runs[*]} | $s_med |"
echo "| memcached $(memcached -V | awk '{print $2}') -t 2 -m 256 | ${m_runs[*]} | $m_med |"
echo "| shoald / memcached | | **$ratio** |"
echo
"$target/release/examples/tls_bench" --conns "${TLS_CONNS:-16}" --secs "${TLS_SECS:-5}" --runs "$runs"
