#!/usr/bin/env bash
# shoal-proxy vs nutcracker vs direct shoald, same three shoald backends, same load.
# Usage: crates/shoal-proxy/bench/compare.sh [OUT_DIR] [REPEATS] [SECONDS]
# Needs release builds of shoald, shoal-proxy and shoal-bench in $CARGO_TARGET_DIR
# (default target/) and nutcracker (apt-get install -y nutcracker).
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=${1:-crates/shoal-proxy/bench/results}
repeats=${2:-3}
secs=${3:-5}
bin="${CARGO_TARGET_DIR:-target}/release"
mkdir -p "$out"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

ports=()
for i in 0 1 2; do
  log=$(mktemp)
  "$bin/shoald" -p -1 -l 127.0.0.1 -t 1 -m 256 -v 2>"$log" &
  pids+=($!)
  for _ in $(seq 100); do
    p=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -n1)
    [ -n "$p" ] && break
    sleep 0.05
  done
  ports+=("$p")
done
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
nport=$(free_port); sport=$(free_port)
conf() {
  printf 'bench:\n  listen: 127.0.0.1:%s\n  hash: fnv1a_64\n  distribution: ketama\n  timeout: 2000\n  servers:\n' "$1"
  for p in "${ports[@]}"; do printf '   - 127.0.0.1:%s:1\n' "$p"; done
}
conf "$nport" > "$out/nutcracker.yml"
conf "$sport" > "$out/shoal-proxy.yml"
nutcracker -c "$out/nutcracker.yml" -s "$(free_port)" -a 127.0.0.1 -o /dev/null &
pids+=($!)
"$bin/shoal-proxy" -c "$out/shoal-proxy.yml" -s -1 --threads "${PROXY_THREADS:-1}" 2>/dev/null &
pids+=($!)
sleep 1

targets=("direct:127.0.0.1:${ports[0]}" "nutcracker:127.0.0.1:$nport" "shoal-proxy:127.0.0.1:$sport")
for depth in 1 16; do
  for r in $(seq "$repeats"); do
    for t in "${targets[@]}"; do
      name=${t%%:*}; addr=${t#*:}
      "$bin/shoal-bench" load -s "$addr" -c 50 -T 2 -d "$depth" -t "${secs}s" -w 1s \
        --set-ratio 0.1 -v 100 -k 10000 --json "$out/$name-d$depth-r$r.json" >/dev/null
      python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], 'depth', sys.argv[3], 'run', sys.argv[4], round(d['ops_per_sec']), 'p50', round(d['latency']['p50_us']), 'p99', round(d['latency']['p99_us']))" \
        "$out/$name-d$depth-r$r.json" "$name" "$depth" "$r"
    done
  done
done

# Medians over the repeats, as a markdown table.
python3 - "$out" "$repeats" <<'PY' | tee "$out/summary.md"
import json, statistics, sys
out, repeats = sys.argv[1], int(sys.argv[2])
print("| target | depth | ops/s (median) | p50 us | p99 us | runs ops/s |")
print("|---|---:|---:|---:|---:|---|")
for depth in (1, 16):
    for name in ("direct", "nutcracker", "shoal-proxy"):
        runs = [json.load(open(f"{out}/{name}-d{depth}-r{r}.json")) for r in range(1, repeats + 1)]
        ops = [r["ops_per_sec"] for r in runs]
        p50 = statistics.median(r["latency"]["p50_us"] for r in runs)
        p99 = statistics.median(r["latency"]["p99_us"] for r in runs)
        print(f"| {name} | {depth} | {statistics.median(ops):,.0f} | {p50:,.0f} | {p99:,.0f} | "
              + " / ".join(f"{o:,.0f}" for o in ops) + " |")
PY
