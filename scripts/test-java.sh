#!/usr/bin/env bash
# Java client compatibility: XMemcached (from Maven Central) in binary-protocol mode against
# shoald, plus SASL PLAIN against a second shoald started with -S, plus XMemcached's ketama
# and election locators (text and binary) over a three-node cluster, checked node by node
# and against `shoal ring`; and XMemcached (binary) through shoal-proxy over the three-node
# cluster, plus a shoal-proxy pool that requires SASL PLAIN.
#
# Builds shoald and the shoal CLI (release, the caller's CARGO_TARGET_DIR) if needed, starts
# five shoalds on ephemeral loopback ports, runs `mvn -B test` in tests/java/xmemcached with
# the ports and the CLI path as system properties, and stops the servers whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
target="${CARGO_TARGET_DIR:-$root/target}"
export CARGO_TARGET_DIR="$target"
bin="${SHOALD_BIN:-$target/release/shoald}"
cli="${SHOAL_CLI_BIN:-$target/release/shoal}"
proxy="${SHOAL_PROXY_BIN:-$target/release/shoal-proxy}"

if ! command -v mvn >/dev/null || ! command -v java >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq maven default-jdk-headless >/dev/null
fi
if [ ! -x "$bin" ]; then
  cargo build --release -p shoal-server
fi
if [ ! -x "$cli" ]; then
  cargo build --release -p shoal-cli
fi
if [ ! -x "$proxy" ]; then
  cargo build --release -p shoal-proxy
fi

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# start NAME ARGS...: runs shoald, waits for its "listening on" line, prints the port.
start() {
  local name=$1; shift
  "$bin" -p 0 -l 127.0.0.1 -t 2 -v "$@" 2>"$tmp/$name.log" &
  pids+=($!)
  local port=""
  for _ in $(seq 1 200); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/$name.log" | head -n1)
    [ -n "$port" ] && break
    sleep 0.05
  done
  [ -n "$port" ] || { echo "shoald ($name) did not start" >&2; cat "$tmp/$name.log" >&2; exit 1; }
  echo "$port"
}

printf 'shoal:shoalpw\n' >"$tmp/pwdb"
start plain >"$tmp/plain.port"
start sasl -S --sasl-pwdb "$tmp/pwdb" >"$tmp/sasl.port"
port=$(cat "$tmp/plain.port")
sasl_port=$(cat "$tmp/sasl.port")
cluster=()
for n in 1 2 3; do
  start "node$n" >"$tmp/node$n.port"
  cluster+=("$(cat "$tmp/node$n.port")")
done
cluster_ports=$(IFS=,; echo "${cluster[*]}")

# shoal-proxy over the cluster: pool "plain", and pool "secure" requiring SASL.
{
  for pool in plain secure; do
    printf '%s:\n  listen: 127.0.0.1:0\n  hash: md5\n  timeout: 2000\n' "$pool"
    [ "$pool" = secure ] && printf '  sasl:\n    users:\n      - shoal:shoalpw\n'
    printf '  servers:\n'
    for p in "${cluster[@]}"; do printf '   - 127.0.0.1:%s:1\n' "$p"; done
  done
} >"$tmp/proxy.yml"
"$proxy" -c "$tmp/proxy.yml" -s -1 2>"$tmp/proxy.log" &
pids+=($!)
proxy_ports=()
for _ in $(seq 1 200); do
  mapfile -t proxy_ports < <(sed -n 's/.*pool [a-z]* listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/proxy.log")
  [ ${#proxy_ports[@]} -ge 2 ] && break
  sleep 0.05
done
[ ${#proxy_ports[@]} -ge 2 ] || { echo "shoal-proxy did not start" >&2; cat "$tmp/proxy.log" >&2; exit 1; }

cd tests/java/xmemcached
timeout 900 mvn -q -B test -Dshoald.port="$port" -Dshoald.sasl.port="$sasl_port" \
  -Dshoald.cluster.ports="$cluster_ports" -Dshoal.cli="$cli" \
  -Dproxy.port="${proxy_ports[0]}" -Dproxy.sasl.port="${proxy_ports[1]}"
echo "XMemcached suites passed (shoald on $port, SASL shoald on $sasl_port, cluster on $cluster_ports, shoal-proxy on ${proxy_ports[*]})"
