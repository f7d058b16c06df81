#!/usr/bin/env bash
# memtier_benchmark 2.2 (Redis Ltd.'s load generator, the usual one for memcached), built
# once from ../shared/peers/memtier_benchmark.tar.gz (or $SHOAL_PEERS_DIR) into
# target/peers/memtier_benchmark, which git ignores. Idempotent: a second run only prints
# the path. Installs the Debian build dependencies that are missing (and only those) with
# apt-get. Build output goes to stderr; stdout is the binary's path and nothing else:
#
#   memtier=$(bash scripts/memtier.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
dir=target/peers/memtier_benchmark
bin=$root/$dir/memtier_benchmark
if [ ! -x "$bin" ]; then
  peers=${SHOAL_PEERS_DIR:-$root/../shared/peers}
  tarball=$peers/memtier_benchmark.tar.gz
  [ -f "$tarball" ] || { echo "memtier.sh: no $tarball" >&2; exit 1; }
  need=()
  for p in build-essential autoconf automake libtool pkg-config libevent-dev libssl-dev zlib1g-dev; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
  done
  if [ ${#need[@]} -gt 0 ]; then
    echo "memtier.sh: installing ${need[*]}" >&2
    sudo=; [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get install -y "${need[@]}" >&2
  fi
  # Unpack into a scratch directory and move it into place only once it has built, so an
  # interrupted build is redone rather than half-trusted.
  rm -rf "$dir" "$dir.tmp"
  mkdir -p "$dir.tmp"
  tar xzf "$tarball" -C "$dir.tmp"
  # Its version.sh asks git for a commit id; stop git at the scratch directory, or it
  # finds Shoal's repository above target/ and stamps Shoal's commit into the binary.
  (cd "$dir.tmp/memtier_benchmark" &&
    export GIT_CEILING_DIRECTORIES=$root/$dir.tmp &&
    autoreconf -ivf && ./configure && make -j2) >&2
  mv "$dir.tmp/memtier_benchmark" "$dir"
  rmdir "$dir.tmp"
fi
"$bin" --version | head -1 >&2
echo "$bin"
