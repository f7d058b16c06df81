#!/usr/bin/env bash
# The Debian package, end to end, as root: build it from the release binaries already
# built (SHOAL_DEB_NO_BUILD=1; scripts/test.sh builds them), lintian (no errors;
# warnings printed), install on a system without it, files where Debian puts them, the
# shoal user, man pages, `systemd-analyze verify` of each unit, shoald started with
# Debian's stock /etc/memcached.conf serving on its port as its -u user, a changed -m in
# such a file showing in `stats settings`, journald-style logs when stderr is the
# journal's stream, remove (configuration kept), install again, purge (configuration
# gone).
#
#   bash scripts/test-package.sh     # builds the release binaries first if missing
#
# shoald runs in its own network and mount namespaces (unshare), so port 11211 and
# /run/memcached are its own even where a memcached is running.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
target="${CARGO_TARGET_DIR:-$root/target}"
export CARGO_TARGET_DIR="$target"
started=$SECONDS
log() { printf '==> [package %ds] %s\n' $((SECONDS - started)) "$*"; }
fail() { echo "test-package: FAILED: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "run as root (dpkg -i, a system user, switching users)"

need=()
command -v lintian >/dev/null || need+=(lintian)
command -v man >/dev/null || need+=(man-db)
command -v dpkg-shlibdeps >/dev/null || need+=(dpkg-dev)
command -v systemd-analyze >/dev/null || need+=(systemd)
command -v memcached >/dev/null || need+=(memcached)
command -v ip >/dev/null || need+=(iproute2)
command -v adduser >/dev/null || need+=(adduser)
if [ ${#need[@]} -gt 0 ]; then
  log "installing Debian packages: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
# cargo-deb, pinned; built once per machine (about two minutes on two cores).
cargo_deb_version=3.6.2
if ! cargo deb --version 2>/dev/null | grep -q "$cargo_deb_version"; then
  log "cargo install cargo-deb $cargo_deb_version"
  cargo install cargo-deb --version "$cargo_deb_version" --locked --quiet
fi

log "building the package"
missing=0
for b in shoald shoal-proxy shoal-queued shoal shoal-bench shoal-dist; do
  [ -x "$target/release/$b" ] || missing=1
done
if [ "$missing" = 1 ]; then
  bash packaging/build-deb.sh >/dev/null
else
  SHOAL_DEB_NO_BUILD=1 bash packaging/build-deb.sh >/dev/null
fi
deb=$(ls -t "$target"/debian/shoal_*.deb | head -n1)
[ -f "$deb" ] || fail "no package in $target/debian"
log "package: $deb"

log "lintian (errors fail; warnings listed in docs/packaging.md)"
lintian_out=$(lintian --tag-display-limit 0 "$deb" 2>&1 || true)
echo "$lintian_out" | sed 's/^/    /'
if echo "$lintian_out" | grep -q '^E: '; then fail "lintian reports errors"; fi

tmp=$(mktemp -d)
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT

# A system without the package: purge any earlier install (a machine kept between runs).
if dpkg-query -W -f='${Status}' shoal 2>/dev/null | grep -q 'installed\|config-files'; then
  log "purging an earlier install"
  dpkg --purge shoal >/dev/null
fi

log "dpkg -i"
dpkg -i "$deb" >/dev/null
dpkg-query -W -f='${Status}\n' shoal | grep -q '^install ok installed$' || fail "not installed"

log "files where Debian puts them"
for f in /usr/bin/shoald /usr/bin/shoal-proxy /usr/bin/shoal-queued /usr/bin/shoal \
  /usr/bin/shoal-bench /etc/shoal/shoald.conf /etc/shoal/queued.conf \
  /etc/shoal/nutcracker.yml /usr/lib/systemd/system/shoald.service \
  /usr/lib/systemd/system/shoal-proxy.service /usr/lib/systemd/system/shoal-queued.service \
  /usr/share/bash-completion/completions/shoald /usr/share/zsh/vendor-completions/_shoald \
  /usr/share/doc/shoal/copyright /usr/share/doc/shoal/changelog.Debian.gz; do
  [ -e "$f" ] || fail "$f missing"
done
contents=$(dpkg-deb -c "$deb")
grep -q ' ./usr/share/man/man1/shoald.1.gz$' <<<"$contents" || fail "no shoald.1.gz in the package"
for f in /etc/shoal/shoald.conf /etc/shoal/queued.conf /etc/shoal/nutcracker.yml; do
  grep -qx "$f" /var/lib/dpkg/info/shoal.conffiles || fail "$f is not a conffile"
done
getent passwd shoal >/dev/null || fail "no shoal user"
[ "$(getent passwd shoal | cut -d: -f7)" = /usr/sbin/nologin ] || fail "shoal has a login shell"
[ -L /etc/systemd/system/multi-user.target.wants/shoald.service ] || fail "shoald.service not enabled"
[ ! -e /etc/systemd/system/multi-user.target.wants/shoal-proxy.service ] || fail "shoal-proxy.service enabled"
/usr/bin/shoal-proxy --test-conf --conf-file /etc/shoal/nutcracker.yml 2>/dev/null ||
  fail "the packaged nutcracker.yml does not load"

log "man shoald renders"
if [ -e /usr/share/man/man1/shoald.1.gz ]; then
  page=$(MANWIDTH=80 man shoald 2>&1)
else
  # This machine's dpkg excludes man pages (path-exclude): render the packaged file.
  dpkg-deb -x "$deb" "$tmp/x"
  page=$(MANWIDTH=80 man -l "$tmp/x/usr/share/man/man1/shoald.1.gz" 2>&1)
fi
for want in "shoald - a drop-in memcached server" "--config <FILE>" "CONFIGURATION FILE" \
  "SIGUSR1" "/etc/memcached.conf"; do
  echo "$page" | grep -qF -- "$want" || fail "man shoald lacks '$want'"
done

log "systemd-analyze verify"
# verify also checks that Documentation=man:... pages exist; where dpkg excludes man
# pages (see above) that part is left out.
man_check=--man=yes
[ -e /usr/share/man/man1/shoald.1.gz ] || man_check=--man=no
for u in shoald shoal-proxy shoal-queued; do
  out=$(systemd-analyze verify "$man_check" "/usr/lib/systemd/system/$u.service" 2>&1) ||
    { echo "$out"; fail "systemd-analyze verify $u.service"; }
  # verify prints warnings without failing: the units must have none.
  if echo "$out" | grep -q "$u.service"; then echo "$out"; fail "systemd-analyze verify $u.service warns"; fi
done

# Waits up to $1 s for shoald ($2, a child of this shell) to exit after a signal. One that
# does not is a bug (SIGTERM must stop it): its threads' stacks and its log ($3) are
# printed, it is killed, and the test fails, rather than `wait` blocking until CI's limit.
stop_within() {
  local secs=$1 pid=$2 logfile=$3
  for _ in $(seq 1 $((secs * 20))); do
    kill -0 "$pid" 2>/dev/null || { wait "$pid" || true; return 0; }
    sleep 0.05
  done
  echo "shoald (pid $pid) still running ${secs}s after SIGTERM; its log:"
  cat "$logfile"
  grep -E '^(State|Sig)' "/proc/$pid/status" || true
  for t in /proc/"$pid"/task/*; do
    echo "thread $(cat "$t/comm" 2>/dev/null): wchan $(cat "$t/wchan" 2>/dev/null)"
    cat "$t/stack" 2>/dev/null || true
  done
  if command -v gdb >/dev/null; then
    timeout 60 gdb -p "$pid" -batch -ex 'thread apply all bt 20' 2>&1 | grep -E '^(#|Thread)' || true
  fi
  kill -9 "$pid" 2>/dev/null || true
  fail "shoald did not stop on SIGTERM"
}

# Runs shoald as the packaged unit would (root, stderr to a file) in fresh network and
# mount namespaces, sends $2 to 127.0.0.1:$3 and prints the reply, then the user shoald
# runs as. $1 is the options file.
serve_once() {
  local conf=$1 request=$2 port=$3
  unshare --mount --net bash -c '
    set -e
    ip link set lo up
    # A private /run: /run/memcached for the stock file'"'"'s -P, nobody else'"'"'s.
    mount -t tmpfs tmpfs /run
    mkdir -p /run/memcached && chown memcache:memcache /run/memcached 2>/dev/null || true
    /usr/bin/shoald --config "$1" 2>"$4/shoald.log" &
    pid=$!
    for _ in $(seq 1 100); do
      (exec 3<>/dev/tcp/127.0.0.1/"$3") 2>/dev/null && break
      sleep 0.05
    done
    exec 3<>/dev/tcp/127.0.0.1/"$3"
    printf "%s\r\nquit\r\n" "$2" >&3
    timeout 5 cat <&3 || true
    echo "USER $(ps -o user= -p $pid)"
    kill -TERM $pid
    wait $pid || true
  ' serve "$conf" "$request" "$port" "$tmp"
}

log "shoald with Debian's stock /etc/memcached.conf"
grep -qx -- '-u memcache' /etc/memcached.conf || fail "/etc/memcached.conf is not Debian's stock file"
reply=$(serve_once /etc/memcached.conf "stats settings" 11211)
echo "$reply" | grep -q '^STAT maxbytes 67108864' || { echo "$reply"; cat "$tmp/shoald.log"; fail "no -m 64"; }
echo "$reply" | grep -q '^STAT tcpport 11211' || { echo "$reply"; fail "not port 11211"; }
echo "$reply" | grep -q '^USER memcache$' || { echo "$reply"; cat "$tmp/shoald.log"; fail "not serving as memcache"; }

log "a changed -m in the file shows in stats settings"
sed 's/^-m 64$/-m 96/' /etc/memcached.conf >"$tmp/memcached.conf"
reply=$(serve_once "$tmp/memcached.conf" "stats settings" 11211)
echo "$reply" | grep -q '^STAT maxbytes 100663296' || { echo "$reply"; fail "-m 96 not in stats settings"; }

log "shoald with the packaged /etc/shoal/shoald.conf serves as shoal"
reply=$(serve_once /etc/shoal/shoald.conf "version" 11211)
echo "$reply" | grep -q '^VERSION ' || { echo "$reply"; cat "$tmp/shoald.log"; fail "no version reply"; }
echo "$reply" | grep -q '^USER shoal$' || { echo "$reply"; fail "not serving as shoal"; }

log "logs in journald's conventions when stderr is the journal's stream"
: >"$tmp/journal"
stream=$(stat -c '%d:%i' "$tmp/journal")
JOURNAL_STREAM=$stream /usr/bin/shoald -p -1 -l 127.0.0.1 -v -o no_lru_maintainer \
  2>"$tmp/journal" &
pid=$!
for _ in $(seq 1 100); do grep -q 'listening on' "$tmp/journal" && break; sleep 0.05; done
kill -TERM $pid
stop_within 10 $pid "$tmp/journal"
grep -q '^<6>.*listening on 127\.0\.0\.1:' "$tmp/journal" || { cat "$tmp/journal"; fail "no <6> listening line"; }
grep -q '^<4>.*without effect' "$tmp/journal" || { cat "$tmp/journal"; fail "no <4> warning line"; }
if grep -qE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T' "$tmp/journal"; then fail "a timestamp of our own"; fi

log "dpkg -r keeps the configuration; dpkg -i again; dpkg -i over itself"
echo "-m 128 # edited by the operator" >>/etc/shoal/shoald.conf
dpkg -r shoal >/dev/null
[ ! -e /usr/bin/shoald ] || fail "shoald left after remove"
grep -q 'edited by the operator' /etc/shoal/shoald.conf || fail "configuration lost on remove"
dpkg -i "$deb" >/dev/null
grep -q 'edited by the operator' /etc/shoal/shoald.conf || fail "configuration replaced on reinstall"
dpkg -i "$deb" >/dev/null
[ -x /usr/bin/shoald ] || fail "reinstall"

log "dpkg --purge removes the configuration"
dpkg --purge shoal >/dev/null
[ ! -e /etc/shoal ] || fail "/etc/shoal left after purge"
[ ! -e /usr/lib/systemd/system/shoald.service ] || fail "unit left after purge"
[ ! -e /etc/systemd/system/multi-user.target.wants/shoald.service ] || fail "enablement left after purge"

log "package tests passed in $((SECONDS - started))s"
