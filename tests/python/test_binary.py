"""python-binary-memcached (module bmemcached), a binary-protocol client, against shoald:
plain (no auth) and with SASL PLAIN (-S and a password database), where a wrong password
must fail and nothing may be served before authentication.

Servers are started the same way as in test_pymemcache.py (its Shoald helper), on ephemeral
loopback ports, and killed afterwards.
"""

import os
import socket
import struct
import tempfile

import bmemcached
import pytest
from bmemcached.exceptions import InvalidCredentials, MemcachedException

from test_pymemcache import IO_TIMEOUT, Shoald

USERS = {"alice": "wonderland", "bob": "hunter2"}


def bclient(server, *auth, **kw):
    kw.setdefault("socket_timeout", IO_TIMEOUT)
    return bmemcached.Client([f"127.0.0.1:{server.port}"], *auth, **kw)


@pytest.fixture(scope="module")
def plain_server():
    s = Shoald()
    yield s
    s.stop()


@pytest.fixture
def bc(plain_server):
    c = bclient(plain_server)
    assert c.flush_all() is True
    yield c
    c.disconnect_all()


@pytest.fixture(scope="module")
def sasl_server():
    fd, path = tempfile.mkstemp(prefix="shoal-pwdb-", suffix=".txt")
    with os.fdopen(fd, "w") as f:
        f.write("# user:password\n")
        for user, pw in USERS.items():
            f.write(f"{user}:{pw}\n")
    s = Shoald("-S", "--sasl-pwdb", path)
    yield s
    s.stop()
    os.unlink(path)


def test_set_get_delete(bc):
    assert bc.set("k", b"v1") is True
    assert bc.get("k") == b"v1"
    assert bc.get("missing") is None
    assert bc.get("missing", default="dflt") == "dflt"
    # Python objects go through the client's flags-based serialisation.
    assert bc.set("obj", {"a": [1, 2, 3]}) is True
    assert bc.get("obj") == {"a": [1, 2, 3]}
    assert bc.set("n", 42) is True
    assert bc.get("n") == 42
    assert bc.set("s", "unicodé") is True
    assert bc.get("s") == "unicodé"
    blob = bytes(range(256)) * 400
    assert bc.set("blob", blob) is True
    assert bc.get("blob") == blob
    assert bc.delete("k") is True
    assert bc.get("k") is None
    # bmemcached reports a delete of a missing key as True too (only a CAS clash is False).
    assert bc.delete("k") is True
    value, cas = bc.gets("blob")
    assert bc.delete("blob", cas=cas + 1) is False
    assert bc.get("blob") == blob
    assert bc.delete("blob", cas=cas) is True
    assert bc.get("blob") is None


def test_add_replace(bc):
    assert bc.add("a", b"1") is True
    assert bc.add("a", b"2") is False
    assert bc.get("a") == b"1"
    assert bc.replace("a", b"3") is True
    assert bc.get("a") == b"3"
    assert bc.replace("nope", b"x") is False
    assert bc.get("nope") is None


def test_incr_decr(bc):
    # A missing counter is created with the default (memcached's initial value).
    assert bc.incr("c", 5, default=10, time=0) == 10
    assert bc.incr("c", 5, time=0) == 15
    assert bc.decr("c", 20, time=0) == 0
    assert bc.decr("d", 1, default=7, time=0) == 7
    # memcached rewrites a shrinking counter in place, padded with spaces; shoald too.
    assert bc.get("c") == "0 "
    assert bc.get("d") == "7"
    bc.set("txt", b"abc")
    with pytest.raises(MemcachedException):
        bc.incr("txt", 1)


def test_cas(bc):
    assert bc.set("c", b"one") is True
    value, cas = bc.gets("c")
    assert value == b"one" and cas
    assert bc.cas("c", b"two", cas) is True
    # The old unique no longer matches.
    assert bc.cas("c", b"three", cas) is False
    assert bc.get("c") == b"two"
    value, cas2 = bc.get("c", get_cas=True)
    assert (value, cas2 != cas) == (b"two", True)
    # CAS on a missing key.
    assert bc.cas("gone", b"x", 12345) is None or bc.get("gone") is None
    assert bc.get("gone") is None


def test_multi(bc):
    values = {f"key{i}": f"value{i}".encode() for i in range(100)}
    # set_multi returns the keys that failed.
    assert not bc.set_multi(values)
    got = bc.get_multi(list(values) + ["absent1", "absent2"])
    assert got == values
    assert bc.delete_multi([f"key{i}" for i in range(50)]) is True
    got = bc.get_multi(list(values))
    assert got == {k: v for k, v in values.items() if int(k[3:]) >= 50}


def test_expiry(bc):
    bc.set("t", b"v", time=100)
    assert bc.get("t") == b"v"
    # An absolute time in the past (over 30 days means a unix timestamp) is expired at once.
    bc.set("past", b"v", time=60 * 60 * 24 * 31)
    assert bc.get("past") is None


def test_flush_all(bc):
    bc.set_multi({"x": b"1", "y": b"2"})
    assert bc.flush_all() is True
    assert bc.get_multi(["x", "y"]) == {}


def test_stats(bc, plain_server):
    bc.set("s", b"v")
    bc.get("s")
    stats = bc.stats()
    (server_stats,) = stats.values()
    assert int(server_stats["pid"]) == plain_server.proc.pid
    assert int(server_stats["cmd_set"]) >= 1
    assert int(server_stats["get_hits"]) >= 1
    settings = next(iter(bc.stats("settings").values()))
    assert int(settings["item_size_max"]) == 1024 * 1024


def test_sasl_list_mechs_unknown_without_sasl(plain_server):
    # Without -S, SASL opcodes are unknown commands (memcached), so clients given
    # credentials carry on unauthenticated.
    c = bclient(plain_server, "alice", "wonderland")
    assert c.set("k", b"v") is True
    assert c.get("k") == b"v"
    c.disconnect_all()


def test_sasl_correct_password(sasl_server):
    c = bclient(sasl_server, "alice", "wonderland")
    assert c.set("k", b"secret") is True
    assert c.get("k") == b"secret"
    assert c.incr("n", 1, default=1, time=0) == 1
    assert c.get_multi(["k", "zzz"]) == {"k": b"secret"}
    c.disconnect_all()
    other = bclient(sasl_server, "bob", "hunter2")
    assert other.get("k") == b"secret"
    other.disconnect_all()


@pytest.mark.parametrize("user,password", [("alice", "wrong"), ("mallory", "wonderland")])
def test_sasl_wrong_password_fails(sasl_server, user, password):
    c = bclient(sasl_server, user, password)
    # bmemcached expects status 0x08 for a failed login; shoald, like memcached, answers
    # 0x20, which the client reports as a plain MemcachedException with that code.
    with pytest.raises(MemcachedException) as failure:
        c.set("k", b"stolen")
    assert failure.value.code == 0x20 or isinstance(failure.value, InvalidCredentials)
    c.disconnect_all()
    ok = bclient(sasl_server, "alice", "wonderland")
    assert ok.get("k") != b"stolen"
    ok.disconnect_all()


def test_sasl_no_credentials_gets_nothing(sasl_server):
    ok = bclient(sasl_server, "alice", "wonderland")
    ok.set("private", b"data")
    anon = bclient(sasl_server)
    # Unauthenticated requests get the auth error, which the client reports as a failure.
    with pytest.raises(MemcachedException):
        anon.get("private")
    with pytest.raises(MemcachedException):
        anon.set("private", b"overwritten")
    assert ok.get("private") == b"data"
    ok.disconnect_all()
    anon.disconnect_all()


def test_sasl_text_connection_refused(sasl_server):
    with socket.create_connection(sasl_server.server, timeout=IO_TIMEOUT) as s:
        s.sendall(b"get private\r\nversion\r\n")
        data = b""
        while True:
            try:
                chunk = s.recv(4096)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
        assert b"VALUE" not in data and b"VERSION" not in data and b"END" not in data


def test_sasl_raw_auth_error_status(sasl_server):
    # The status code itself: 0x20 for a get before authentication.
    with socket.create_connection(sasl_server.server, timeout=IO_TIMEOUT) as s:
        key = b"private"
        s.sendall(struct.pack(">BBHBBHIIQ", 0x80, 0x00, len(key), 0, 0, 0, len(key), 7, 0) + key)
        header = b""
        while len(header) < 24:
            header += s.recv(24 - len(header))
        magic, opcode, _, _, _, status, _, opaque, _ = struct.unpack(">BBHBBHIIQ", header)
        assert (magic, opcode, status, opaque) == (0x81, 0x00, 0x20, 7)
