#!/usr/bin/env bash
# User-space CPU per request of two shoald builds beside memcached at depth 1, under
# memtier_benchmark, in alternating rounds: what a data-path change is worth in the one
# figure issue 29 targets, with both builds measured in the same minutes.
#
# Each run: the server (-t 2 -m 2048) is filled with memtier's KEYS keys, then
# memtier_benchmark runs 1 thread, 16 connections, 1:10 set:get, 100 B values, depth 1
# for RUN_SECS while `perf record -e cpu-clock:u -F 2000` samples the server (perf's
# figure: the sum of the user-space sample periods) and /proc/PID/stat gives its
# tick-based user and system time (both raised by perf's presence, the system time most:
# compare CPU per request with compare-memcached, which keeps perf out of those runs).
# Per request = over memtier's request count. The table gives medians over the rounds
# and each against memcached.
#
#   bash scripts/bench-user-cpu-ab.sh OLD_SHOALD NEW_SHOALD [ROUNDS]
#   [MEMCACHED=path] [RUN_SECS=8] [VALUE=100] [KEYS=100000]   (needs perf; memtier via scripts/memtier.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
old=$1
new=$2
rounds=${3:-5}
memcached=${MEMCACHED:-.peers/memcached-1.6.45/memcached}
secs=${RUN_SECS:-8}
value=${VALUE:-100}
keys=${KEYS:-100000}
command -v perf >/dev/null || { echo "perf is needed (apt-get install -y linux-perf)" >&2; exit 1; }
[ -x "$memcached" ] || memcached=$(command -v memcached)
memtier=$(bash scripts/memtier.sh)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

run() { # name binary -> one line of name=value figures
  local name=$1 bin=$2 port pid perf t0 t1 ops sampled
  port=$(free_port)
  case $(basename "$bin") in
    memcached*) "$bin" -p "$port" -l 127.0.0.1 -t 2 -m 2048 -U 0 -u "$(id -un)" 2>/dev/null & ;;
    *) "$bin" -p "$port" -l 127.0.0.1 -t 2 -m 2048 2>/dev/null & ;;
  esac
  pid=$!
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
  "$memtier" -s 127.0.0.1 -p "$port" -P memcache_text -t 1 -c 16 --ratio 1:0 -d "$value" \
    --key-maximum "$keys" --key-pattern P:P --requests allkeys --hide-histogram >/dev/null 2>&1
  t0=$(awk '{print $14, $15}' "/proc/$pid/stat")
  perf record -q -e cpu-clock:u -F 2000 -p "$pid" -o "$work/perf.data" -- sleep "$secs" >/dev/null 2>&1 &
  perf=$!
  "$memtier" -s 127.0.0.1 -p "$port" -P memcache_text -t 1 -c 16 --ratio 1:10 -d "$value" \
    --key-maximum "$keys" --test-time "$secs" --hide-histogram --json-out-file "$work/mt.json" \
    >/dev/null 2>&1
  wait "$perf"
  t1=$(awk '{print $14, $15}' "/proc/$pid/stat")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  ops=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ALL STATS"]["Totals"]["Count"])' "$work/mt.json")
  sampled=$(perf script -i "$work/perf.data" -F period 2>/dev/null | awk '{p += $1} END {print p / 1e9}')
  echo "$t0 $t1" | awk -v n="$name" -v ops="$ops" -v p="$sampled" -v hz="$(getconf CLK_TCK)" '{
    printf "%s requests=%d proc_user=%.3f proc_sys=%.3f perf_user=%.3f\n", n, ops,
      ($3 - $1) / hz * 1e6 / ops, ($4 - $2) / hz * 1e6 / ops, p * 1e6 / ops }'
}

# The order rotates each round: with a fixed one, the same position ran 2-3% faster at
# 10 KB (two builds, run in both orders).
names=(memcached old new)
bins=("$memcached" "$old" "$new")
for r in $(seq "$rounds"); do
  echo "round $r of $rounds" >&2
  for k in 0 1 2; do
    i=$(( (k + r - 1) % 3 ))
    run "${names[$i]}" "${bins[$i]}"
  done
done | tee "$work/runs" >&2
python3 - "$work/runs" <<'PY'
import statistics as st, sys
runs = {}
for line in open(sys.argv[1]):
    name, *kv = line.split()
    runs.setdefault(name, []).append({k: float(v) for k, v in (x.split("=") for x in kv)})
med = {n: {k: st.median(r[k] for r in rs) for k in rs[0]} for n, rs in runs.items()}
mc = med["memcached"]
print("| server | requests per run | user us/request, perf | vs memcached | user us/request, /proc | vs memcached | system us/request, /proc |")
print("|---|---:|---:|---:|---:|---:|---:|")
for n, m in med.items():
    print(f"| {n} | {m['requests']:.0f} | {m['perf_user']:.3f} | {m['perf_user'] / mc['perf_user']:.2f}x "
          f"| {m['proc_user']:.3f} | {m['proc_user'] / mc['proc_user']:.2f}x | {m['proc_sys']:.2f} |")
print(f"\nnew / old: perf {med['new']['perf_user'] / med['old']['perf_user']:.2f}x, "
      f"/proc {med['new']['proc_user'] / med['old']['proc_user']:.2f}x ({len(runs['new'])} rounds, medians)")
PY
