#!/usr/bin/env bash
# What eviction copies under memtier's overwrites: for each shoald build given, one run of
# memtier_benchmark at 100 KB values (1 thread, 16 connections, 1:10 set:get, random keys;
# the 16 connections repeat one key sequence, so most sets overwrite), after a fill of
# every key and a WARM-second warm-up. Prints, over the RUN_SECS measured, the get hit
# ratio, items held, and per set: items compaction copied, compactions, evictions,
# promotions out of probation, with the server's user and system CPU per request
# (from /proc; one run, so a rough figure: use compare-memcached for CPU claims).
#
#   bash scripts/bench-overwrite-copies.sh SHOALD [SHOALD...]
#   [MEM=1024] [KEYS=100000] [VALUE=102400] [WARM=5] [RUN_SECS=8]   (memtier via scripts/memtier.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
memtier=$(bash scripts/memtier.sh)
mem=${MEM:-1024}
keys=${KEYS:-100000}
value=${VALUE:-102400}
warm=${WARM:-5}
secs=${RUN_SECS:-8}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

stats() { # port -> name=value of the counters this script reports
  python3 - "$1" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"stats\r\nstats eviction\r\n")
b = b""
while b.count(b"END\r\n") < 2:
    chunk = s.recv(65536)
    if not chunk:
        sys.exit("stats: connection closed")
    b += chunk
d = {l.split()[1]: l.split()[2] for l in b.decode().splitlines() if l.startswith("STAT ")}
names = ["cmd_set", "get_hits", "get_misses", "curr_items", "evictions", "evictions_compactions",
         "evictions_compacted_items", "evictions_promoted"]
print(" ".join(f"{k}={d.get(k, 0)}" for k in names))
PY
}

for bin in "$@"; do
  port=$(free_port)
  "$bin" -p "$port" -l 127.0.0.1 -t 2 -m "$mem" 2>/dev/null &
  pid=$!
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
  mt=("$memtier" -s 127.0.0.1 -p "$port" -P memcache_text -t 1 -c 16 -d "$value" --key-maximum "$keys" --hide-histogram)
  "${mt[@]}" --ratio 1:0 --key-pattern P:P --requests allkeys >/dev/null 2>&1
  "${mt[@]}" --ratio 1:10 --test-time "$warm" >/dev/null 2>&1
  before=$(stats "$port")
  t0=$(awk '{print $14, $15}' "/proc/$pid/stat")
  "${mt[@]}" --ratio 1:10 --test-time "$secs" --json-out-file "$work/mt.json" >/dev/null 2>&1
  t1=$(awk '{print $14, $15}' "/proc/$pid/stat")
  after=$(stats "$port")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  python3 - "$bin" "$before" "$after" "$t0 $t1" "$work/mt.json" "$(getconf CLK_TCK)" <<'PY'
import json, sys
name, before, after, ticks, out, hz = sys.argv[1:]
a = dict(x.split("=") for x in before.split())
b = dict(x.split("=") for x in after.split())
d = {k: int(b[k]) - int(a[k]) for k in a}
u0, s0, u1, s1 = (int(x) for x in ticks.split())
requests = json.load(open(out))["ALL STATS"]["Totals"]["Count"]
sets = max(1, d["cmd_set"])
gets = max(1, d["get_hits"] + d["get_misses"])
us = 1e6 / int(hz) / requests
print(f"{name}: requests={requests} hits={d['get_hits'] / gets:.3f} items={b['curr_items']} "
      f"per set: compacted={d['evictions_compacted_items'] / sets:.3f} "
      f"compactions={d['evictions_compactions'] / sets:.3f} evictions={d['evictions'] / sets:.3f} "
      f"promoted={d['evictions_promoted'] / sets:.3f}; "
      f"user={(u1 - u0) * us:.2f} us/request sys={(s1 - s0) * us:.2f} us/request")
PY
done
