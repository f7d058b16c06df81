#!/usr/bin/env bash
# Hit ratio at equal memory (issue 24's evidence): demand-fill replay of the workload
# shapes into shoald, memcached 1.6.45 (built from ../shared/peers, or $MEMCACHED_NEW) and
# Debian's memcached 1.6.18, at -m 64 and -m 256 (each shape scaled with the cache), with
# libCacheSim's LRU, S3-FIFO, SIEVE and Belady on the same traces; then miss-ratio curves
# (16 MiB to 1 GiB) for two shapes. libCacheSim comes from PyPI into a venv under
# target/ (a benchmark-time tool only; nothing in Shoal needs Python).
# Results go to $OUT (default bench/results/hitratio). Takes about three hours on two
# cores; PARTS picks some of it, SHAPES some of the shapes.
#
#   [PARTS="shapes curves"] [SHAPES="zipf1-loguniform ..."] bash scripts/bench-hitratio.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
out=${OUT:-bench/results/hitratio}
bin=target/release
cargo build --release -p shoal-server -p shoal-bench >&2
mkdir -p "$out"

# memcached 1.6.45, the newest release, built once into target/peers.
mc_new=${MEMCACHED_NEW:-}
if [ -z "$mc_new" ]; then
  peers=${SHOAL_PEERS_DIR:-$root/../shared/peers}
  mc_dir=target/peers/memcached-1.6.45
  if [ ! -x "$mc_dir/memcached" ]; then
    mkdir -p target/peers
    tar xzf "$peers/memcached-1.6.45.tar.gz" -C target/peers
    (cd "$mc_dir" && ./autogen.sh && ./configure && make -j2 memcached) >&2
  fi
  mc_new=$mc_dir/memcached
fi
mc_old=$(command -v memcached)

# libCacheSim in a venv.
venv=target/hitratio-venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import libcachesim' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q libcachesim numpy
fi

servers=(--server shoald
  --server "memcached 1.6.45=memcached:$mc_new"
  --server "memcached 1.6.18=memcached:$mc_old")
shapes=(${SHAPES:-zipf0.8-100b zipf0.8-lognormal zipf1-field-sizes zipf1-loguniform zipf1-ttl zipf1-scan})
parts=" ${PARTS:-shapes curves} "
part() { [[ $parts == *" $1 "* ]]; }
shape_args=()
for s in "${shapes[@]}"; do shape_args+=(--shape "$s"); done

if part shapes; then
  echo "== shapes at 64 and 256 MiB ($(uptime | sed 's/.*load average/load average/'))" >&2
  "$bin/shoal-bench" hitratio "${shape_args[@]}" --memory 64,256 "${servers[@]}" \
    --reference-python "$venv/bin/python" --oracle --out "$out/shapes"
fi
if part curves; then
  for s in zipf1-loguniform zipf0.8-lognormal; do
    echo "== miss-ratio curve, $s ($(uptime | sed 's/.*load average/load average/'))" >&2
    "$bin/shoal-bench" hitratio --shape "$s" --curve --scale 2 \
      --server shoald --server "memcached 1.6.45=memcached:$mc_new" \
      --reference-python "$venv/bin/python" --out "$out/curve-$s"
  done
fi
echo "== done ($(uptime | sed 's/.*load average/load average/'))" >&2
