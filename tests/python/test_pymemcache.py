"""pymemcache, a real memcached client, against shoald: every command its Client has.

Each test module run starts its own shoald instances on ephemeral loopback ports (binary
from $SHOALD_BIN, default <repo>/target/release/shoald) and kills them afterwards.
"""

import os
import pathlib
import queue
import subprocess
import threading
import time

import pytest
from pymemcache import serde
from pymemcache.client.base import Client
from pymemcache.client.hash import HashClient
from pymemcache.exceptions import (
    MemcacheClientError,
    MemcacheIllegalInputError,
    MemcacheServerError,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHOALD_BIN = os.environ.get("SHOALD_BIN", str(ROOT / "target" / "release" / "shoald"))
START_TIMEOUT = 10.0
IO_TIMEOUT = 5.0


class Shoald:
    """A shoald process on an ephemeral port, found from its "listening on" log line."""

    def __init__(self, *args):
        self.proc = subprocess.Popen(
            [SHOALD_BIN, "-p", "-1", "-l", "127.0.0.1", "-v", "-t", "2", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        lines = queue.Queue()

        def drain():
            # Keep reading for the life of the process so logging never blocks it.
            for raw in self.proc.stderr:
                lines.put(raw.decode("utf-8", "replace"))
            lines.put(None)

        threading.Thread(target=drain, daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT
        seen = []
        while True:
            left = deadline - time.monotonic()
            try:
                line = lines.get(timeout=max(left, 0.01))
            except queue.Empty:
                line = None
            if line is None or left <= 0:
                self.stop()
                raise RuntimeError(f"shoald did not start: {''.join(seen)}")
            seen.append(line)
            if "listening on 127.0.0.1:" in line:
                tail = line.split("listening on 127.0.0.1:", 1)[1]
                self.port = int("".join(ch for ch in tail.strip() if ch.isdigit()))
                break
        self.server = ("127.0.0.1", self.port)

    def client(self, **kw):
        kw.setdefault("connect_timeout", IO_TIMEOUT)
        kw.setdefault("timeout", IO_TIMEOUT)
        return Client(self.server, **kw)

    def wait(self, timeout):
        return self.proc.wait(timeout=timeout)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=IO_TIMEOUT)


@pytest.fixture(scope="module")
def server():
    s = Shoald()
    yield s
    s.stop()


@pytest.fixture
def client(server):
    c = server.client()
    c.flush_all(noreply=False)
    yield c
    c.close()


def test_set_get_and_noreply(client):
    assert client.set("k", b"v1") is True  # default noreply: always True
    assert client.get("k") == b"v1"
    assert client.set("k", "v2", noreply=False) is True
    assert client.get("k") == b"v2"
    assert client.get("missing") is None
    assert client.get("missing", default=b"dflt") == b"dflt"
    # Flags round-trip.
    assert client.set("f", b"x", flags=42, noreply=False) is True
    # raw_command strips the end token it waited for.
    assert client.raw_command("get f", b"END\r\n") == b"VALUE f 42 1\r\nx\r\n"
    # Binary-safe values.
    blob = bytes(range(256)) * 10
    assert client.set("blob", blob, noreply=False)
    assert client.get("blob") == blob
    # Expiry: a negative time stores an already expired item.
    client.set("gone", b"x", expire=-1, noreply=False)
    assert client.get("gone") is None


def test_set_many_get_many_delete_many(client):
    values = {f"key{i}": f"value{i}".encode() for i in range(50)}
    assert client.set_many(values, noreply=False) == []
    assert client.get_many(list(values) + ["nope"]) == values
    assert client.set_multi({"a": b"1", "b": b"2"}, noreply=False) == []
    assert client.get_multi(["a", "b"]) == {"a": b"1", "b": b"2"}
    assert client.delete_many(["key0", "key1", "nope"], noreply=False) is True
    assert client.get_many(["key0", "key1", "key2"]) == {"key2": b"value2"}
    assert client.delete_multi(["a", "b"]) is True
    assert client.get_many(["a", "b"]) == {}
    # Quiet variant: noreply deletes still take effect.
    client.delete_many(["key2", "key3"])
    assert client.get_many(["key2", "key3"]) == {}


def test_add_replace(client):
    assert client.add("a", b"1", noreply=False) is True
    assert client.add("a", b"2", noreply=False) is False
    assert client.get("a") == b"1"
    assert client.replace("nope", b"x", noreply=False) is False
    assert client.get("nope") is None
    assert client.replace("a", b"3", noreply=False) is True
    assert client.get("a") == b"3"
    # noreply variants report True whatever happened.
    assert client.add("a", b"4") is True
    assert client.replace("nope", b"x") is True
    assert client.get("a") == b"3"
    assert client.get("nope") is None


def test_append_prepend(client):
    assert client.append("nope", b"x", noreply=False) is False
    assert client.prepend("nope", b"x", noreply=False) is False
    client.set("s", b"mid", noreply=False)
    assert client.append("s", b">>", noreply=False) is True
    assert client.prepend("s", b"<<", noreply=False) is True
    client.append("s", b"!")
    client.prepend("s", b"!")
    assert client.get("s") == b"!<<mid>>!"


def test_gets_cas(client):
    assert client.gets("nope") == (None, None)
    assert client.cas("nope", b"x", b"1", noreply=False) is None
    client.set("c", b"v1", noreply=False)
    value, cas = client.gets("c")
    assert value == b"v1" and int(cas) > 0
    assert client.cas("c", b"v2", str(int(cas) + 12345), noreply=False) is False
    assert client.cas("c", b"v2", cas, noreply=False) is True
    value2, cas2 = client.gets("c")
    assert value2 == b"v2" and cas2 != cas
    # The old unique is stale now.
    assert client.cas("c", b"v3", cas, noreply=False) is False
    # noreply cas.
    assert client.cas("c", b"v4", cas2) is True
    assert client.get("c") == b"v4"


def test_gets_many(client):
    client.set_many({"x": b"1", "y": b"2"}, noreply=False)
    result = client.gets_many(["x", "y", "z"])
    assert set(result) == {"x", "y"}
    assert result["x"][0] == b"1" and result["y"][0] == b"2"
    assert result["x"][1] != result["y"][1]
    assert client.gets("x") == result["x"]


def test_delete(client):
    client.set("d", b"x", noreply=False)
    assert client.delete("d", noreply=False) is True
    assert client.delete("d", noreply=False) is False
    client.set("d", b"x", noreply=False)
    assert client.delete("d") is True  # noreply
    assert client.get("d") is None


def test_incr_decr(client):
    assert client.incr("n", 1, noreply=False) is None
    assert client.decr("n", 1, noreply=False) is None
    client.set("n", b"10", noreply=False)
    assert client.incr("n", 5, noreply=False) == 15
    assert client.decr("n", 6, noreply=False) == 9
    # memcached pads a shrunken number with spaces.
    assert client.get("n") == b"9 "
    assert client.decr("n", 100, noreply=False) == 0
    client.set("n", str(2**64 - 1), noreply=False)
    assert client.incr("n", 2, noreply=False) == 1
    assert client.incr("n", 1, noreply=True) is None
    assert client.decr("n", 1, noreply=True) is None
    assert client.incr("n", 1, noreply=True) is None
    assert client.get("n").strip() == b"2"
    client.set("s", b"abc", noreply=False)
    with pytest.raises(MemcacheClientError, match="non-numeric"):
        client.incr("s", 1, noreply=False)


def test_touch(client):
    assert client.touch("nope", 10, noreply=False) is False
    client.set("t", b"x", expire=1, noreply=False)
    assert client.touch("t", 100, noreply=False) is True
    assert client.raw_command("mg t t") == b"HD t100"
    assert client.touch("t", 0) is True  # noreply
    assert client.raw_command("mg t t") == b"HD t-1"


def test_gat_gats(client):
    client.set("g", b"val", expire=1, noreply=False)
    if hasattr(client, "gat"):
        assert client.gat("g", expire=100) == b"val"
        value, cas = client.gats("g", expire=200)
        assert value == b"val" and int(cas) > 0
        assert client.gat("nope", expire=10) is None
    else:
        # pymemcache 4.0 has no gat/gats methods: use its raw_command.
        assert client.raw_command("gat 100 g", b"END\r\n") == b"VALUE g 0 3\r\nval\r\n"
        reply = client.raw_command("gats 200 g", b"END\r\n")
        assert reply.startswith(b"VALUE g 0 3 ") and reply.endswith(b"\r\nval\r\n")
        assert client.raw_command("gat 10 nope", b"END\r\n") == b""
    assert client.raw_command("mg g t") == b"HD t200"


def test_stats(client):
    # pymemcache's stats() cannot parse RESET; send it raw.
    assert client.raw_command("stats reset") == b"RESET"
    client.set("a", b"1", noreply=False)
    client.get("a")
    client.get("b")
    st = client.stats()
    assert st[b"cmd_get"] == 2
    assert st[b"get_hits"] == 1
    assert st[b"get_misses"] == 1
    assert st[b"curr_items"] == 1
    assert st[b"version"].startswith(b"1.6")
    assert st[b"threads"] == 2
    settings = client.stats("settings")
    assert int(settings[b"maxbytes"]) == 64 * 1024 * 1024
    assert settings[b"cas_enabled"] == b"yes"  # as memcached prints it
    items = client.stats("items")
    assert items[b"items:1:number"] == 1
    assert client.stats("slabs")
    assert client.stats("sizes")[b"sizes_status"] == b"disabled"
    assert any(k.endswith(b":addr") for k in client.stats("conns"))


def test_version(client):
    assert client.version().startswith(b"1.6.45-shoal-")


def test_flush_all(client):
    client.set("a", b"1", noreply=False)
    assert client.flush_all(noreply=False) is True
    assert client.get("a") is None
    client.set("a", b"1", noreply=False)
    assert client.flush_all() is True  # noreply
    assert client.get("a") is None
    client.set("a", b"1", noreply=False)
    assert client.flush_all(delay=100, noreply=False) is True
    assert client.get("a") == b"1"


def test_quit_and_close_reconnect(client):
    client.set("q", b"1", noreply=False)
    client.quit()
    # The client reconnects on its next command.
    assert client.get("q") == b"1"
    client.close()
    assert client.get("q") == b"1"
    client.disconnect_all()
    assert client.version()


def test_raw_command_meta(client):
    assert client.raw_command("mn") == b"MN"
    assert client.raw_command("ms rk 2 T60 F7\r\nhi") == b"HD"
    assert client.raw_command("mg rk v f t", b"\r\nhi\r\n") == b"VA 2 f7 t60"
    assert client.raw_command("ma cnt N0 J5 v", b"\r\n5\r\n") == b"VA 1"
    assert client.raw_command("md rk") == b"HD"
    assert client.raw_command("mg rk v") == b"EN"


def test_cache_memlimit(client):
    assert client.cache_memlimit(128) is True
    assert client.stats()[b"limit_maxbytes"] == 128 * 1024 * 1024
    assert client.cache_memlimit(64) is True


def test_errors(client):
    with pytest.raises(MemcacheServerError, match="object too large"):
        client.set("big", b"x" * (2 * 1024 * 1024), noreply=False)
    # The connection still works and the key is absent.
    assert client.get("big") is None
    with pytest.raises(MemcacheIllegalInputError):
        client.get("k" * 251)
    assert client.version()


def test_serde_objects(server):
    c = server.client(serde=serde.pickle_serde)
    obj = {"list": [1, 2, 3], "n": 7}
    c.set("obj", obj, noreply=False)
    c.set("int", 42, noreply=False)
    c.set("str", "text", noreply=False)
    assert c.get("obj") == obj
    assert c.get("int") == 42
    assert c.get("str") == "text"
    c.close()


def test_shutdown_with_A():
    s = Shoald("-A")
    try:
        c = s.client()
        c.set("k", b"v", noreply=False)
        c.shutdown()
        assert s.wait(IO_TIMEOUT) == 0
    finally:
        s.stop()


def test_shutdown_refused_without_A(client):
    # memcached 1.6.45 refuses it with "SERVER_ERROR: shutdown not enabled".
    with pytest.raises(MemcacheServerError, match="shutdown not enabled"):
        client.shutdown()
    assert client.version()


def test_hash_client_over_three_servers():
    servers = [Shoald() for _ in range(3)]
    try:
        hc = HashClient(
            [s.server for s in servers],
            connect_timeout=IO_TIMEOUT,
            timeout=IO_TIMEOUT,
            use_pooling=False,
        )
        values = {f"hk{i}": f"v{i}".encode() for i in range(300)}
        assert hc.set_many(values, noreply=False) == []
        assert hc.get_many(list(values)) == values
        for i in range(10):
            assert hc.get(f"hk{i}") == values[f"hk{i}"]
        hc.set("counter", b"0", noreply=False)
        for _ in range(20):
            hc.incr("counter", 1)
        assert hc.get("counter") == b"20"
        assert hc.add("hk0", b"x", noreply=False) is False
        assert hc.delete("hk0", noreply=False) is True
        assert hc.get("hk0") is None
        hc.delete_many([f"hk{i}" for i in range(1, 50)])
        assert hc.get_many([f"hk{i}" for i in range(50)]) == {}
        # Keys are spread over all three servers, and every key is on exactly one.
        counts = [s.client().stats()[b"curr_items"] for s in servers]
        assert all(n > 0 for n in counts), counts
        assert sum(counts) == 300 - 50 + 1
        hc.close()
    finally:
        for s in servers:
            s.stop()
