"""python-binary-memcached (module bmemcached) through shoal-proxy's binary front end, over
three shoald backends: every command the client has, multi-gets whose keys live on all
three servers (the client batches GETKQ ... NOOP), and SASL PLAIN at the proxy (a pool
with a `sasl:` section): right, wrong and missing credentials. Each runs against a server
pool and against route pools over the same servers (a failover route to a fourth backend,
a prefix route), so binary clients are checked through routes too; the failover route's
misses are read from the backup pool.

The proxy (binary from $SHOAL_PROXY_BIN, default <repo>/target/release/shoal-proxy) and
the backends run on ephemeral loopback ports and are killed afterwards.
"""

import os
import pathlib
import queue
import subprocess
import tempfile
import threading
import time

import bmemcached
import pytest
from bmemcached.exceptions import InvalidCredentials, MemcachedException

from test_pymemcache import IO_TIMEOUT, START_TIMEOUT, Shoald

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROXY_BIN = os.environ.get("SHOAL_PROXY_BIN", str(ROOT / "target" / "release" / "shoal-proxy"))


class ShoalProxy:
    """shoal-proxy on a configuration whose pools listen on port 0; `ports` in pool order."""

    def __init__(self, conf, npools):
        fd, self.conf = tempfile.mkstemp(prefix="shoal-proxy-", suffix=".yml")
        with os.fdopen(fd, "w") as f:
            f.write(conf)
        self.proc = subprocess.Popen(
            [PROXY_BIN, "-c", self.conf, "-s", "-1"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        lines = queue.Queue()

        def drain():
            for raw in self.proc.stderr:
                lines.put(raw.decode("utf-8", "replace"))
            lines.put(None)

        threading.Thread(target=drain, daemon=True).start()
        self.ports = []
        deadline = time.monotonic() + START_TIMEOUT
        seen = []
        while len(self.ports) < npools:
            left = deadline - time.monotonic()
            try:
                line = lines.get(timeout=max(left, 0.01))
            except queue.Empty:
                line = None
            if line is None or left <= 0:
                self.stop()
                raise RuntimeError(f"shoal-proxy did not start: {''.join(seen)}")
            seen.append(line)
            if " listening on 127.0.0.1:" in line and "stats" not in line:
                tail = line.split("listening on 127.0.0.1:", 1)[1]
                self.ports.append(int("".join(ch for ch in tail.strip() if ch.isdigit())))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=IO_TIMEOUT)
        os.unlink(self.conf)


def pool(name, backends, extra="", listen=True):
    servers = "".join(f"   - 127.0.0.1:{b.port}:1\n" for b in backends)
    at = "  listen: 127.0.0.1:0\n" if listen else ""
    return f"{name}:\n{at}  hash: md5\n  timeout: 2000\n{extra}  servers:\n{servers}"


def route(name, body, extra=""):
    return f"{name}:\n  listen: 127.0.0.1:0\n{extra}  route:\n{body}"


SASL = "  sasl:\n    users:\n      - alice:wonderland\n"
FAILOVER = "    type: failover\n    pools: [main, backup]\n"
# Keys starting "absent" (the misses of the multi-get test) live in the backup pool.
PREFIX = '    type: prefix\n    prefixes:\n      "absent": backup\n    default: main\n'
# The listening pools, in configuration order (so in `ShoalProxy.ports` order).
POOLS = ["plain", "secure", "fo", "px", "secure_fo"]


@pytest.fixture(scope="module")
def cluster():
    backends = [Shoald() for _ in range(3)]
    backup = Shoald()
    conf = (
        pool("plain", backends)
        + pool("secure", backends, SASL)
        + route("fo", FAILOVER)
        + route("px", PREFIX)
        + route("secure_fo", FAILOVER, SASL)
        + pool("main", backends, listen=False)
        + pool("backup", [backup], listen=False)
    )
    proxy = ShoalProxy(conf, len(POOLS))
    yield backends, proxy, backup
    proxy.stop()
    for b in backends + [backup]:
        b.stop()


def client(port, *auth):
    return bmemcached.Client([f"127.0.0.1:{port}"], *auth, socket_timeout=IO_TIMEOUT)


@pytest.fixture(params=["plain", "fo", "px"])
def bc(request, cluster):
    """A client of a server pool, of a failover route and of a prefix route."""
    _, proxy, _ = cluster
    c = client(proxy.ports[POOLS.index(request.param)])
    c.pool_name = request.param
    assert c.flush_all() is True
    yield c
    c.disconnect_all()


def test_commands(bc):
    assert bc.set("k", b"v1") is True
    assert bc.get("k") == b"v1"
    assert bc.get("missing") is None
    assert bc.set("obj", {"a": [1, 2, 3]}) is True
    assert bc.get("obj") == {"a": [1, 2, 3]}
    assert bc.set("s", "unicodé") is True
    assert bc.get("s") == "unicodé"
    blob = bytes(range(256)) * 2000
    assert bc.set("blob", blob) is True
    assert bc.get("blob") == blob
    assert bc.add("k", b"x") is False
    assert bc.add("new", b"1") is True
    assert bc.replace("nope", b"x") is False
    assert bc.replace("new", b"2") is True
    assert bc.get("new") == b"2"
    assert bc.delete("k") is True
    assert bc.get("k") is None
    assert bc.incr("c", 5, default=10, time=0) == 10
    assert bc.incr("c", 5, time=0) == 15
    assert bc.decr("c", 20, time=0) == 0
    with pytest.raises(MemcachedException):
        bc.incr("s", 1)


def test_cas(bc):
    assert bc.set("c", b"one") is True
    value, cas = bc.gets("c")
    assert value == b"one" and cas
    assert bc.cas("c", b"two", cas) is True
    assert bc.cas("c", b"three", cas) is False
    assert bc.get("c") == b"two"
    assert bc.delete("c", cas=cas) is False
    assert bc.get("c") == b"two"


def test_multi_get_over_every_server(bc, cluster):
    backends, _, _ = cluster
    values = {f"key{i}": f"value{i}".encode() for i in range(300)}
    assert not bc.set_multi(values)
    got = bc.get_multi(list(values) + [f"absent{i}" for i in range(50)])
    assert got == values
    # The keys really are spread over the three servers.
    held = [len(b.client().get_many(list(values))) for b in backends]
    assert sum(held) == len(values) and all(held), held
    assert bc.delete_multi([f"key{i}" for i in range(150)]) is True
    assert bc.get_multi(list(values)) == {k: v for k, v in values.items() if int(k[3:]) >= 150}
    assert bc.flush_all() is True
    assert bc.get_multi(list(values)) == {}


def test_stats(bc, cluster):
    _, proxy, _ = cluster
    (stats,) = bc.stats().values()
    assert int(stats["pid"]) == proxy.proc.pid
    assert stats["pool"] in (bc.pool_name.encode(), bc.pool_name)


def test_failover_route_reads_misses_from_backup(cluster):
    _, proxy, backup = cluster
    fo = client(proxy.ports[POOLS.index("fo")])
    plain = client(proxy.ports[POOLS.index("plain")])
    assert fo.flush_all() is True
    direct = backup.client()
    for i in range(20):
        # Flags 0: python-binary-memcached reads them back as text.
        direct.set(f"old{i}", f"backup{i}".encode())
    assert fo.set("fresh", b"main") is True
    assert fo.get("old3") == "backup3"
    assert plain.get("old3") is None
    want = {f"old{i}": f"backup{i}" for i in range(20)}
    want["fresh"] = b"main"
    assert fo.get_multi(list(want) + ["gone"]) == want
    # Writes fail over on errors only: the new value is main's alone.
    assert plain.get("fresh") == b"main"
    assert direct.get("fresh") is None
    fo.disconnect_all()
    plain.disconnect_all()


@pytest.mark.parametrize("name", ["secure", "secure_fo"])
def test_sasl_at_the_proxy(cluster, name):
    _, proxy, _ = cluster
    port = proxy.ports[POOLS.index(name)]
    good = client(port, "alice", "wonderland")
    assert good.set("private", b"data") is True
    assert good.get("private") == b"data"
    assert good.get_multi(["private", "nothing"]) == {"private": b"data"}
    good.disconnect_all()
    wrong = client(port, "alice", "guess")
    with pytest.raises((MemcachedException, InvalidCredentials)):
        wrong.set("private", b"stolen")
    wrong.disconnect_all()
    anon = client(port)
    with pytest.raises(MemcachedException):
        anon.get("private")
    anon.disconnect_all()
    again = client(port, "alice", "wonderland")
    assert again.get("private") == b"data"
    again.disconnect_all()
