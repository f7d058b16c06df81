#!/usr/bin/env bash
# A graceful restart of shoald with a flash tier (issue 26): $N values of $SIZE bytes
# (1.1 GB by default) into -m 64, a memory file in /dev/shm (-e) and a 2 GB flash file,
# SIGUSR1, a new start on the same files, then every value read back and compared byte
# for byte (bench/flash/restart_check.py). memcached 1.6.45 empties extstore on a
# restart; shoald keeps it.
#
#   bash scripts/bench-flash-restart.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
N=${N:-55000}
SIZE=${SIZE:-20000}
FLASH_DIR=${FLASH_DIR:-/var/tmp}
OUT=${OUT:-$root/bench/results/flash/$(date -u +%F)}
shoald=${SHOALD_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/shoald}
[ -x "$shoald" ] || (cd "$root" && cargo build --release -p shoal-server --bin shoald)
mkdir -p "$OUT"
shm=/dev/shm
[ -d "$shm" ] || shm=$FLASH_DIR
work=$(mktemp -d "$FLASH_DIR/shoal-flash-restart.XXXXXX")
mem=$(mktemp -d "$shm/shoal-flash-restart.XXXXXX")
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work" "$mem"' EXIT
port=$((27000 + RANDOM % 2000))
check=$root/bench/flash/restart_check.py

start() {
  # Recaching off: the read passes must not move values (and evict others) between the
  # two counts.
  "$shoald" -v -p "$port" -l 127.0.0.1 -m 64 -t 2 -e "$mem/shoal.mem" \
    -o "ext_path=$work/flash:2G,ext_recache_rate=0" >>"$work/log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do (echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
}
stat() {
  (exec 3<>"/dev/tcp/127.0.0.1/$port"; printf 'stats\r\nquit\r\n' >&3; timeout 5 cat <&3 || true) \
    | awk -v k="$1" '$2==k{print $3+0}'
}

start
python3 "$check" set "$port" "$N" "$SIZE" >/dev/null
before=$(python3 "$check" check "$port" "$N" "$SIZE")
on_flash=$(stat extstore_objects_used)
evicted=$(stat evictions)
refused=$(stat extstore_write_refused)
t0=$(date +%s.%N)
kill -USR1 "$pid"
wait "$pid" || true
t1=$(date +%s.%N)
start
t2=$(date +%s.%N)
after=$(python3 "$check" check "$port" "$N" "$SIZE")
misses=$(stat miss_from_extstore)
{
  echo "date: $(date -u +%FT%TZ)  commit: $(git -C "$root" rev-parse --short HEAD)"
  echo "values: $N x $SIZE bytes = $((N * SIZE / 1000000)) MB; -m 64, flash file 2G in $FLASH_DIR, memory file in $shm"
  echo "before the stop: $before; flash-resident: $on_flash; evictions: $evicted (of which values flash refused while its write buffers were busy: $refused)"
  echo "graceful stop (SIGUSR1 to exit): $(echo "$t1 - $t0" | bc) s; start to serving: $(echo "$t2 - $t1" | bc) s"
  echo "after the restart: $after; miss_from_extstore=$misses"
  grep -E "\[restart\]|\[extstore\]" "$work/log" | sed 's/^/log: /'
} | tee "$OUT/restart.txt"
