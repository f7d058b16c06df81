#!/usr/bin/env bash
# The data path's evidence (zero-copy values and io_uring against the targets of 1.1x
# memcached's throughput at 0.9x its CPU per request), shoald beside memcached on this
# machine, in one session:
#   1. depth 1 (one request in flight per connection), 16 connections, 100 B / 10 KB /
#      100 KB values: throughput and server CPU per request for memcached, shoald on
#      epoll and shoald --io-uring, REPEATS alternating runs each, medians and spread;
#      then p99 at 50/80/95% of memcached's saturation throughput (equal offered load);
#   2. pipelined (depth 16, 50 connections, 100 B): the lead must stay at least 4x;
#   3. 1,000 connections at depth 1: throughput, CPU per request and the latency curve;
#   4. the zero-copy crossover: shoald copying every value (-o no_zero_copy) against
#      sending values of 1 KB and more from segment memory, at 1-16 KB;
#   5. system calls per request (scripts/syscalls.sh).
# Results go to $OUT (default bench/results/data-path/; the dated reports in docs/benchmarks/ read
# them). Takes about 45 minutes at REPEATS=5; PARTS picks some of them.
#
#   [PARTS="depth1 depth16 conns1000 crossover syscalls"] bash scripts/bench-data-path.sh [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-5}
out=${OUT:-bench/results/data-path}
bin=target/release
cargo build --release -p shoal-server -p shoal-bench >&2
mkdir -p "$out"
cmp() { # name, then compare-memcached arguments
  local name=$1; shift
  echo "== $name ($(uptime | sed 's/.*load average/load average/'))" >&2
  "$bin/shoal-bench" compare-memcached --no-memory --memcaslap none --repeats "$repeats" \
    --server-args="-t 2 -m 1024" --out "$out/$name" "$@" >&2
}
parts=" ${PARTS:-depth1 depth16 conns1000 crossover syscalls} "
part() { [[ $parts == *" $1 "* ]]; }
# Segment memory on the heap (-o no_hugepages) beside the default (transparent huge
# pages): what the huge pages are worth per request.
part depth1 && cmp depth1 --depths 1 --value-sizes 100,10k,100k -c 16 -T 1 -t 5s \
  --variant "io_uring=--io-uring" --variant "no_hugepages=-o no_hugepages" \
  --equal-load 0.5,0.8,0.95
part depth16 && cmp depth16 --depths 16 --value-sizes 100 -c 50 -T 2 -t 5s \
  --variant "io_uring=--io-uring"
part conns1000 && cmp conns1000 --depths 1 --value-sizes 100 -c 1000 -T 2 -t 5s \
  --variant "io_uring=--io-uring" --equal-load 0.5,0.8,0.95
part crossover && cmp crossover --depths 1 --value-sizes 1k,2k,4k,8k,16k -c 16 -T 1 -t 4s \
  --variant "copy_all=-o no_zero_copy" --variant "from_1k=-o zero_copy_min=1024"
part syscalls && VALUES="100 10240 102400" DEPTHS="1 16" bash scripts/syscalls.sh 50000 \
  > "$out/syscalls.md"
echo "== done ($(uptime | sed 's/.*load average/load average/'))" >&2
