#!/usr/bin/env bash
# Builds memcached 1.6.45, the reference shoald's replies are compared with, from the
# peers tarball (../shared/peers/memcached-1.6.45.tar.gz relative to the repository, or
# $SHOAL_PEERS_DIR), into the ignored scratch directory .peers/ (or $SHOAL_PEERS_BUILD),
# unless it is already built there. Prints the source tree (holding `memcached`,
# `memcached-debug`, `timedrun` and the test suite `t/`) on stdout.
#
# Exit status: 0 built (or already built); 3 the tarball is missing, with a notice on
# stderr (callers skip what needs the reference rather than failing); 1 anything else.
# Needs build-essential autoconf automake libtool pkg-config libevent-dev libssl-dev
# zlib1g-dev (scripts/test.sh installs them); about a minute on two cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=1.6.45
peers=${SHOAL_PEERS_DIR:-$root/../shared/peers}
tarball=$peers/memcached-$version.tar.gz
build=${SHOAL_PEERS_BUILD:-$root/.peers}
tree=$build/memcached-$version

# A tree is complete once the stamp is written, after every binary linked: an
# interrupted build is redone rather than half used.
stamp=$tree/.shoal-built
if [ -f "$stamp" ] && [ -x "$tree/memcached" ] && [ -x "$tree/memcached-debug" ] \
    && [ -x "$tree/timedrun" ]; then
  echo "$tree"
  exit 0
fi
if [ ! -f "$tarball" ]; then
  echo "NOTICE: $tarball is missing (set SHOAL_PEERS_DIR to the directory holding it);" \
    "the suites that need memcached $version are skipped" >&2
  exit 3
fi
for tool in autoconf automake libtoolize pkg-config make gcc; do
  command -v "$tool" >/dev/null || {
    echo "memcached-reference: $tool is missing (apt-get install -y build-essential" \
      "autoconf automake libtool pkg-config libevent-dev libssl-dev zlib1g-dev)" >&2
    exit 1
  }
done
echo "memcached-reference: building memcached $version in $tree (about a minute)" >&2
rm -rf "$tree"
mkdir -p "$build"
tar xzf "$tarball" -C "$build"
log=$build/memcached-$version.build.log
(
  cd "$tree"
  ./autogen.sh
  ./configure --enable-tls
  make -j"$(nproc)" memcached memcached-debug timedrun
) >"$log" 2>&1 || {
  echo "memcached-reference: the build failed; the last lines of $log:" >&2
  tail -n 30 "$log" >&2
  exit 1
}
touch "$stamp"
echo "$tree"
