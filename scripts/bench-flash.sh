#!/usr/bin/env bash
# shoald's flash tier beside memcached 1.6.45's extstore (issue 26), on this machine's disk.
#
# Both servers get -m $MEM and a $FLASH_SIZE file in $FLASH_DIR (a real disk, not tmpfs),
# each run in a memory cgroup limited to $CGROUP_MB (v1 memory controller), so the page
# cache cannot hold the flash file: a read of a flash-resident value is a disk read.
#
#   1. Hit ratio, RSS and write amplification: `shoal-bench hitratio` demand-fill
#      replays (get; on a miss, set) of four shapes (Zipf 0.99 and uniform keys, fixed
#      16 KB and log-uniform 100 B-100 KB values) at two working sets ($SETS MiB).
#   2. Throughput and GET latency under memtier_benchmark at the larger working set:
#      prefilled, then 1:10 set:get for $SECS s, $PAIRS alternating pairs, medians; at
#      full speed and at a fixed rate ($MEMTIER_RUNS).
#   3. RAM per flash-resident item: $DENSITY_KEYS values of 1000 bytes into -m 32 and a
#      2 GB file; the items each server still holds (curr_items) say how many stubs
#      32 MiB keeps.
#
# PARTS chooses among "replay memtier density" (default: all three).
#   sudo bash scripts/bench-flash.sh            # needs root for the cgroup
#   SETS="512" PAIRS=1 bash scripts/bench-flash.sh   # a quicker look
#   SHOALD_EXTRA_ARGS="-o ext_drop_unread=1" ...     # more shoald options (memtier part)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
MEM=${MEM:-64}
FLASH_SIZE=${FLASH_SIZE:-1G}
FLASH_DIR=${FLASH_DIR:-/var/tmp}
CGROUP_MB=${CGROUP_MB:-256}
SETS=${SETS:-"512 2048"}
PAIRS=${PAIRS:-3}
SECS=${SECS:-15}
OUT=${OUT:-$root/bench/results/flash/$(date -u +%F)}
target=${CARGO_TARGET_DIR:-$root/target}
shoald=${SHOALD_BIN:-$target/release/shoald}
bench=$target/release/shoal-bench
memcached=${MEMCACHED_BIN:-$root/.peers/memcached-1.6.45/memcached}
memtier=${MEMTIER_BIN:-$(bash "$root/scripts/memtier.sh" 2>/dev/null || true)}

[ -x "$shoald" ] && [ -x "$bench" ] || (cd "$root" && cargo build --release -p shoal-server -p shoal-bench)
[ -x "$memcached" ] || memcached=$(bash "$root/scripts/memcached-reference.sh")/memcached
mkdir -p "$OUT"
work=$(mktemp -d "$FLASH_DIR/shoal-flash.XXXXXX")
trap 'rm -rf "$work"; rmdir /sys/fs/cgroup/memory/shoal-flash-bench 2>/dev/null || true' EXIT

# The cgroup both servers run in (one at a time): RSS plus page cache within CGROUP_MB.
cg=/sys/fs/cgroup/memory/shoal-flash-bench
bounded=no
if mkdir -p "$cg" 2>/dev/null && echo $((CGROUP_MB << 20)) >"$cg/memory.limit_in_bytes" 2>/dev/null; then
  bounded=yes
else
  echo "warning: no memory cgroup (not root, or no v1 memory controller): the page cache may hold the flash file" >&2
fi
wrap() { # wrap NAME BIN: a script that joins the cgroup and execs BIN (same pid)
  cat >"$work/$1" <<EOF
#!/bin/sh
[ "$bounded" = yes ] && echo \$\$ >"$cg/cgroup.procs"
sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
exec "$2" "\$@"
EOF
  chmod +x "$work/$1"
}
wrap shoald.sh "$shoald"
wrap memcached.sh "$memcached"
{
  echo "date: $(date -u +%FT%TZ)  commit: $(git -C "$root" rev-parse --short HEAD)"
  echo "machine: $(nproc) vCPUs, $(free -m | awk '/Mem:/{print $2}') MiB RAM, disk $(df -h "$FLASH_DIR" | awk 'NR==2{print $1}')"
  echo "servers: -m $MEM -t 2, flash file $FLASH_SIZE in $FLASH_DIR; cgroup limit ${CGROUP_MB} MiB: $bounded"
  echo "memcached: $("$memcached" -V)"
} | tee "$OUT/setup.txt"

PARTS=${PARTS:-"replay memtier density"}
# memtier runs: Z (Zipf 0.99) or R (uniform) keys, at full speed or, with @N, N requests
# per second per connection (16 connections): latency below saturation, where it is the
# servers' own and not the queue of a saturated two-core machine.
MEMTIER_RUNS=${MEMTIER_RUNS:-"Z R Z@2000 R@2000"}
DENSITY_KEYS=${DENSITY_KEYS:-1500000}
has() { case " $PARTS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
start_server() { # start_server NAME PORT ARGS...: starts the wrapped server, waits for its port
  local srv=$1 port=$2
  shift 2
  local user=()
  # memcached refuses to run as root unless told which user to be.
  [ "$srv" = memcached ] && [ "$(id -u)" = 0 ] && user=(-u root)
  "$work/$srv.sh" -p "$port" -l 127.0.0.1 -U 0 "${user[@]}" "$@" >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
}
server_stats() { # server_stats PORT
  (exec 3<>"/dev/tcp/127.0.0.1/$1"; printf 'stats\r\nquit\r\n' >&3; timeout 5 cat <&3 || true)
}

# 1. Hit ratio, RSS, writes.
has replay && for set_mb in $SETS; do
  for pop in zipf:0.99 uniform; do
    for sizes in 16384 loguniform:100:100k; do
      case $sizes in
        16384) mean=16400 ;;
        *) mean=14500 ;; # (100k - 100) / ln(1000), plus the key
      esac
      keys=$((set_mb * 1048576 / mean))
      name="ws${set_mb}-${pop%%:*}-${sizes%%:*}"
      echo "== $name: $keys keys"
      "$bench" hitratio --custom --keys "$keys" --requests $((keys * 4)) \
        --popularity "$pop" --sizes "$sizes" --memory "$MEM" \
        --server "shoald=shoald:$work/shoald.sh" \
        --server "memcached 1.6.45=memcached:$work/memcached.sh" \
        --shoald-args "-o ext_path=$work/shoald.ext:$FLASH_SIZE" \
        --memcached-args "-o ext_path=$work/memcached.ext:$FLASH_SIZE" \
        --out "$OUT/$name" >"$OUT/$name.log" 2>&1 || { echo "failed: see $OUT/$name.log"; continue; }
      rm -f "$work"/*.ext
    done
  done
done

# 2. Throughput and latency under memtier at the largest working set, 16 KB values.
if has memtier && [ -n "$memtier" ] && [ -x "$memtier" ]; then
  set_mb=${SETS##* }
  keys=$((set_mb * 1048576 / 16400))
  for run in $MEMTIER_RUNS; do
    pattern=${run%@*}
    limit=()
    case $run in *@*) limit=(--rate-limiting "${run#*@}") ;; esac
    for pair in $(seq "$PAIRS"); do
      for srv in shoald memcached; do
        port=$((23000 + RANDOM % 2000))
        extra=()
        [ "$srv" = shoald ] && [ -n "${SHOALD_EXTRA_ARGS:-}" ] && read -ra extra <<<"$SHOALD_EXTRA_ARGS"
        start_server "$srv" "$port" -m "$MEM" -t 2 -o "ext_path=$work/$srv.ext:$FLASH_SIZE" "${extra[@]}"
        common=(-s 127.0.0.1 -p "$port" -P memcache_text --data-size 16384 --key-maximum "$keys" --hide-histogram)
        "$memtier" "${common[@]}" -t 1 -c 4 --ratio 1:0 --key-pattern P:P -n allkeys >/dev/null 2>&1
        w0=$(awk '/^write_bytes/{print $2}' /proc/$pid/io)
        "$memtier" "${common[@]}" -t 2 -c 8 --ratio 1:10 --key-pattern "$pattern:$pattern" "${limit[@]}" \
          --key-zipf-exp 0.99 --test-time "$SECS" --json-out-file "$OUT/memtier-$run-$srv-$pair.json" >/dev/null 2>&1
        w1=$(awk '/^write_bytes/{print $2}' /proc/$pid/io)
        rss=$(awk '/^VmHWM/{print $2}' /proc/$pid/status)
        st=$(server_stats "$port")
        echo "$st" >"$OUT/stats-$run-$srv-$pair.txt"
        ext_hits=$(echo "$st" | awk '$2=="get_extstore"{print $3+0}')
        hits=$(echo "$st" | awk '$2=="get_hits"{print $3+0}')
        echo "$run $srv $pair rss_kib=$rss disk_written=$((w1 - w0)) get_hits=$hits get_extstore=$ext_hits" \
          | tee -a "$OUT/memtier.txt"
        kill "$pid"; wait "$pid" 2>/dev/null || true
        rm -f "$work"/*.ext
      done
    done
  done
fi
# 3. RAM per flash-resident item.
if has density && [ -n "$memtier" ] && [ -x "$memtier" ]; then
  for srv in shoald memcached; do
    port=$((25000 + RANDOM % 2000))
    start_server "$srv" "$port" -m 32 -t 2 -o "ext_path=$work/$srv.ext:2G"
    "$memtier" -s 127.0.0.1 -p "$port" -P memcache_text --data-size 1000 --key-maximum "$DENSITY_KEYS" \
      --key-prefix k --ratio 1:0 --key-pattern P:P -n allkeys -t 1 -c 4 --hide-histogram >/dev/null 2>&1
    sleep 2
    st=$(server_stats "$port")
    get() { echo "$st" | awk -v k="$1" '$2==k{print $3+0}'; }
    rss=$(awk '/^VmRSS/{print $2}' /proc/$pid/status)
    echo "density $srv keys=$DENSITY_KEYS curr_items=$(get curr_items) evictions=$(get evictions) on_flash=$(get extstore_objects_used) rss_kib=$rss" \
      | tee -a "$OUT/density.txt"
    kill "$pid"; wait "$pid" 2>/dev/null || true
    rm -f "$work"/*.ext
  done
fi
python3 "$root/bench/flash/report.py" "$OUT" | tee "$OUT/report.md"
