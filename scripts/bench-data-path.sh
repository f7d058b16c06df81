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
#   5. system calls per request (scripts/syscalls.sh);
#   6. memtier_benchmark (scripts/memtier.sh builds it), a load generator we did not
#      write, with issue 29's setup: 1 thread, 16 connections, 1:10 set:get over 100,000
#      keys, 5 s runs, MT_REPEATS (7) alternating pairs, both servers -t 2; 100 B and
#      10 KB values (-m 2048, so every key fits) at depth 1 and pipeline 16, and 100 KB at
#      depth 1 with -m 1024 (100,000 keys of 100 KB are 10 GB: about 10% of gets hit);
#      throughput and the server's user and system CPU per request.
#      Sub-parts memtier-depth1, memtier-depth16 and memtier-100k; MT_TIME (seconds)
#      and MT_DEPTH16_SIZES (100,10k) shorten it.
# Results go to $OUT (default bench/results/data-path/; the dated reports in docs/benchmarks/ read
# them). Takes about 45 minutes at REPEATS=5, and the memtier part about 10 more; PARTS
# picks some of them.
#
# memcached is MEMCACHED, by default the 1.6.45 reference build when there is one
# (scripts/memcached-reference.sh), else memcached on PATH; the reports name its version.
#
#   [PARTS="depth1 depth16 conns1000 crossover syscalls memtier"] [MEMCACHED=path] bash scripts/bench-data-path.sh [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-5}
out=${OUT:-bench/results/data-path}
bin=target/release
memcached=${MEMCACHED:-.peers/memcached-1.6.45/memcached}
[ -x "$memcached" ] || memcached=$(command -v memcached)
cargo build --release -p shoal-server -p shoal-bench >&2
mkdir -p "$out"
cmp() { # name, then compare-memcached arguments
  local name=$1; shift
  echo "== $name ($(uptime | sed 's/.*load average/load average/'))" >&2
  "$bin/shoal-bench" compare-memcached --memcached "$memcached" --no-memory --memcaslap none \
    --repeats "$repeats" \
    --server-args="-t 2 -m 1024" --out "$out/$name" "$@" >&2
}
parts=" ${PARTS:-depth1 depth16 conns1000 crossover syscalls memtier} "
part() { [[ $parts == *" $1 "* ]]; }
mt_part() { part memtier || part "memtier-$1"; }
mt_repeats=${MT_REPEATS:-7}
mt_time=${MT_TIME:-5}
# With perf on the machine, each memtier run is followed by one in which perf samples the
# server's user time (--perf-user), which at depth 1 is steadier than /proc's tick-based
# figure; throughput and CPU come from the runs without perf, which raises system time.
perf_user=()
command -v perf >/dev/null && perf_user=(--perf-user)
mtcmp() { # name, memory limit (MiB), then compare-memcached arguments
  local name=$1 mem=$2; shift 2
  echo "== $name ($(uptime | sed 's/.*load average/load average/'))" >&2
  "$bin/shoal-bench" compare-memcached --memcached "$memcached" --no-memory --memcaslap none \
    --repeats "$mt_repeats" \
    --memtier "$memtier" --memtier-only --memtier-time "${mt_time}s" --memtier-threads 1 \
    --memtier-conns 16 --memtier-keys 100000 \
    --server-args="-t 2 -m $mem" --out "$out/$name" "${perf_user[@]}" "$@" >&2
}
if mt_part depth1 || mt_part depth16 || mt_part 100k; then
  memtier=$(bash scripts/memtier.sh)
fi
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
mt_part depth1 && mtcmp memtier-depth1 2048 --depths 1 --value-sizes 100,10k
mt_part depth16 && mtcmp memtier-depth16 2048 --depths 16 --value-sizes "${MT_DEPTH16_SIZES:-100,10k}"
mt_part 100k && mtcmp memtier-100k 1024 --depths 1 --value-sizes 100k
echo "== done ($(uptime | sed 's/.*load average/load average/'))" >&2
