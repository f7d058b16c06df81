#!/usr/bin/env bash
# Builds target/debian/shoal_<version>_<arch>.deb from the release binaries.
#
#   bash packaging/build-deb.sh            # builds what is missing, then packages
#   SHOAL_DEB_NO_BUILD=1 bash packaging/build-deb.sh
#                                          # packages the binaries already built
#
# Needs cargo-deb (cargo install cargo-deb --locked) and dpkg-dev (dpkg-shlibdeps, for
# the package's library dependencies). Man pages and completions come from shoal-dist,
# which generates them from the same clap definitions as each binary's --help.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
target="${CARGO_TARGET_DIR:-$root/target}"
export CARGO_TARGET_DIR="$target"

bins=(shoald shoal-proxy shoal-queued shoal shoal-bench shoal-dist)
if [ -z "${SHOAL_DEB_NO_BUILD:-}" ]; then
  cargo build --release --locked -p shoal-server -p shoal-proxy -p shoal-queued -p shoal-cli \
    -p shoal-bench -p shoal-dist --bins
fi
for b in "${bins[@]}"; do
  [ -x "$target/release/$b" ] || { echo "build-deb: $target/release/$b is missing" >&2; exit 1; }
done

dist="$target/release/dist"
rm -rf "$dist"
"$target/release/shoal-dist" --out "$dist"
# Debian's policy: man pages compressed with gzip -9n (no name, no timestamp).
gzip -9nf "$dist"/man/man1/*.1

cargo deb -p shoal-dist --no-build --no-separate-debug-symbols "$@"
