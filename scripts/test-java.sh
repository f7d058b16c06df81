#!/usr/bin/env bash
# Java client compatibility: XMemcached (from Maven Central) in binary-protocol mode against
# shoald, plus SASL PLAIN against a second shoald started with -S, plus XMemcached's ketama
# and election locators (text and binary) over a three-node cluster, checked node by node
# and against `shoal ring`; and XMemcached (binary) through shoal-proxy over the three-node
# cluster, plus a shoal-proxy pool that requires SASL PLAIN; and the same XMemcached suite
# through a second shoal-proxy with --threads 2, on its server pool and on a failover route
# pool (the cluster's pool, then a spare shoald's).
#
# Builds shoald and the shoal CLI (release, the caller's CARGO_TARGET_DIR) if needed, starts
# six shoalds and two shoal-proxies on ephemeral loopback ports, runs `mvn -B test` in
# tests/java/xmemcached with
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
  "$bin" -p -1 -l 127.0.0.1 -t 2 -v "$@" 2>"$tmp/$name.log" &
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
start spare >"$tmp/spare.port"
spare_port=$(cat "$tmp/spare.port")

# wait_pools LOG N: waits for N "pool NAME listening on" lines in LOG and prints the
# ports, in configuration order.
wait_pools() {
  local log=$1 n=$2 ports=()
  for _ in $(seq 1 200); do
    mapfile -t ports < <(sed -n 's/.*pool [a-z]* listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log")
    [ ${#ports[@]} -ge "$n" ] && break
    sleep 0.05
  done
  [ ${#ports[@]} -ge "$n" ] || { echo "shoal-proxy did not start" >&2; cat "$log" >&2; exit 1; }
  printf '%s\n' "${ports[@]}"
}

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
wait_pools "$tmp/proxy.log" 2 >"$tmp/proxy.ports"
mapfile -t proxy_ports <"$tmp/proxy.ports"

# A second shoal-proxy, with two worker threads: the cluster's pool "plain" again, and
# "routed", a failover route from it to "spare" (a pool over one more shoald that only the
# route reaches).
{
  printf 'plain:\n  listen: 127.0.0.1:0\n  hash: md5\n  timeout: 2000\n  servers:\n'
  for p in "${cluster[@]}"; do printf '   - 127.0.0.1:%s:1\n' "$p"; done
  printf 'routed:\n  listen: 127.0.0.1:0\n  route:\n    type: failover\n    pools: [plain, spare]\n'
  printf 'spare:\n  hash: md5\n  timeout: 2000\n  servers:\n   - 127.0.0.1:%s:1\n' "$spare_port"
} >"$tmp/proxy-threads.yml"
"$proxy" -c "$tmp/proxy-threads.yml" -s -1 --threads 2 2>"$tmp/proxy-threads.log" &
pids+=($!)
wait_pools "$tmp/proxy-threads.log" 2 >"$tmp/proxy-threads.ports"
mapfile -t threads_ports <"$tmp/proxy-threads.ports"

cd tests/java/xmemcached
timeout 900 mvn -q -B test -Dshoald.port="$port" -Dshoald.sasl.port="$sasl_port" \
  -Dshoald.cluster.ports="$cluster_ports" -Dshoal.cli="$cli" \
  -Dproxy.port="${proxy_ports[0]}" -Dproxy.sasl.port="${proxy_ports[1]}" \
  -Dproxy.threads.port="${threads_ports[0]}" -Dproxy.route.port="${threads_ports[1]}" \
  -Dshoald.spare.port="$spare_port"
echo "XMemcached suites passed (shoald on $port, SASL shoald on $sasl_port, cluster on $cluster_ports, shoal-proxy on ${proxy_ports[*]}, shoal-proxy --threads 2 on ${threads_ports[*]})"
