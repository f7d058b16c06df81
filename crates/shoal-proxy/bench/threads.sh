#!/usr/bin/env bash
# shoal-proxy --threads 1 vs --threads 2 (per-worker server connections) vs --threads 2
# --shared-backends vs nutcracker, same three shoald backends, same load, side by side in
# one run, beside the same load sent straight to the backends ("direct": shoal-bench
# placing keys itself with ketama, what a client does without a proxy), which is what
# each proxy's overhead is measured against: each round runs every target once, in an order rotated from round to round so
# drift (other load on the machine) is spread over all of them. Records ops/s, p50/p99
# and the proxy's CPU time per request (user+system of the proxy process, all threads,
# from /proc/PID/stat, over every request it served in the run: prefill, warm-up and the
# timed part).
# Usage: crates/shoal-proxy/bench/threads.sh [OUT_DIR] [ROUNDS] [SECONDS]
#   OLD_PROXY=path  also measure that binary with --threads 2 (e.g. a build from before
#                   the worker pool, whose --threads 2 was tokio's work-stealing runtime)
# Needs release builds of shoald, shoal-proxy and shoal-bench in $CARGO_TARGET_DIR
# (default target/) and nutcracker (apt-get install -y nutcracker).
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=${1:-crates/shoal-proxy/bench/results-threads}
rounds=${2:-5}
secs=${3:-5}
bin="${CARGO_TARGET_DIR:-target}/release"
mkdir -p "$out"
rm -f "$out"/*.json "$out"/runs.tsv
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

ports=()
for i in 0 1 2; do
  log=$(mktemp)
  "$bin/shoald" -p -1 -l 127.0.0.1 -t 1 -m 256 -v 2>"$log" &
  pids+=($!)
  p=
  for _ in $(seq 100); do
    p=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -n1)
    [ -n "$p" ] && break
    sleep 0.05
  done
  [ -n "$p" ] || { echo "shoald did not start" >&2; exit 1; }
  ports+=("$p")
done
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
conf() {
  printf 'bench:\n  listen: 127.0.0.1:%s\n  hash: fnv1a_64\n  distribution: ketama\n  timeout: 2000\n  servers:\n' "$1"
  for p in "${ports[@]}"; do printf '   - 127.0.0.1:%s:1\n' "$p"; done
}

# name -> "pid port"
declare -A target
start_proxy() { # name binary args...
  local name=$1 binary=$2; shift 2
  local port; port=$(free_port)
  conf "$port" > "$out/$name.yml"
  "$binary" -c "$out/$name.yml" -s -1 "$@" 2>/dev/null &
  pids+=($!)
  target[$name]="$! $port"
}
nport=$(free_port)
conf "$nport" > "$out/nutcracker.yml"
nutcracker -c "$out/nutcracker.yml" -s "$(free_port)" -a 127.0.0.1 -o /dev/null &
pids+=($!)
target[nutcracker]="$! $nport"
start_proxy threads1 "$bin/shoal-proxy" --threads 1
start_proxy threads2 "$bin/shoal-proxy" --threads 2
start_proxy threads2-shared "$bin/shoal-proxy" --threads 2 --shared-backends
names=(direct nutcracker threads1 threads2 threads2-shared)
target[direct]="0 $(IFS=,; echo "${ports[*]/#/127.0.0.1:}")"
if [ -n "${OLD_PROXY:-}" ]; then
  start_proxy old-threads2 "$OLD_PROXY" --threads 2
  names+=(old-threads2)
fi
sleep 1
for n in "${names[@]}"; do
  read -r pid _ <<<"${target[$n]}"
  [ "$pid" = 0 ] && continue
  kill -0 "$pid" 2>/dev/null || { echo "$n did not start" >&2; exit 1; }
done

hz=$(getconf CLK_TCK)
ticks() { if [ "$1" = 0 ]; then echo 0; else awk '{print $14 + $15}' "/proc/$1/stat"; fi; }
printf 'target\tdepth\tround\tops_per_sec\tp50_us\tp99_us\trequests\tcpu_us_per_request\tloadavg\n' > "$out/runs.tsv"
for depth in 1 16; do
  for r in $(seq "$rounds"); do
    # Rotate the order each round.
    order=("${names[@]:$(( (r - 1) % ${#names[@]} ))}" "${names[@]:0:$(( (r - 1) % ${#names[@]} ))}")
    for n in "${order[@]}"; do
      read -r pid port <<<"${target[$n]}"
      before=$(ticks "$pid")
      if [ "$pid" = 0 ]; then servers=(-s "$port" --placement ketama); else servers=(-s "127.0.0.1:$port"); fi
      "$bin/shoal-bench" load "${servers[@]}" -c 50 -T 2 -d "$depth" -t "${secs}s" -w 1s \
        --set-ratio 0.1 -v 100 -k 10000 --no-progress --json "$out/$n-d$depth-r$r.json" >/dev/null
      after=$(ticks "$pid")
      load=$(cut -d' ' -f1 /proc/loadavg)
      python3 - "$out/$n-d$depth-r$r.json" "$n" "$depth" "$r" "$((after - before))" "$hz" "$load" >> "$out/runs.tsv" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
name, depth, r, ticks, hz, load = sys.argv[2:8]
reqs = d["total"]["gets"] + d["total"]["sets"]
cpu_us = int(ticks) / int(hz) * 1e6 / reqs
print(f"{name}\t{depth}\t{r}\t{d['ops_per_sec']:.0f}\t{d['latency']['p50_us']:.0f}\t{d['latency']['p99_us']:.0f}\t{reqs}\t{cpu_us:.2f}\t{load}")
PY
      tail -n1 "$out/runs.tsv"
    done
  done
done

# Medians over the rounds, as a markdown table, with ratios to nutcracker and to one thread.
python3 - "$out" <<'PY' | tee "$out/summary.md"
import csv, statistics, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(f"{out}/runs.tsv"), delimiter="\t"))
names = list(dict.fromkeys(r["target"] for r in rows))
med = {}
for r in rows:
    med.setdefault((r["target"], r["depth"]), []).append(r)
print("| target | depth | ops/s (median) | vs direct | vs nutcracker | vs threads1 | p50 us | p99 us | p50 added to direct, us | proxy CPU us/request | vs nutcracker | runs ops/s |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
for depth in ("1", "16"):
    m = {}
    for n in names:
        rs = med[(n, depth)]
        m[n] = (statistics.median(float(x["ops_per_sec"]) for x in rs),
                statistics.median(float(x["cpu_us_per_request"]) for x in rs))
    for n in names:
        rs = med[(n, depth)]
        ops, cpu = m[n]
        p50 = statistics.median(float(x["p50_us"]) for x in rs)
        p99 = statistics.median(float(x["p99_us"]) for x in rs)
        runs = " / ".join(f"{float(x['ops_per_sec']):,.0f}" for x in rs)
        direct_p50 = statistics.median(float(x["p50_us"]) for x in med[("direct", depth)])
        print(f"| {n} | {depth} | {ops:,.0f} | {ops / m['direct'][0]:.2f}x | {ops / m['nutcracker'][0]:.2f}x | {ops / m['threads1'][0]:.2f}x "
              f"| {p50:,.0f} | {p99:,.0f} | {p50 - direct_p50:,.0f} | {cpu:.2f} | {cpu / m['nutcracker'][1]:.2f}x | {runs} |")
loads = [float(r["loadavg"]) for r in rows]
print(f"\nLoad average (1 min) after each run: min {min(loads):.2f}, median {statistics.median(loads):.2f}, max {max(loads):.2f}.")
PY
