"""Key placement of pymemcache's HashClient over three shoald nodes, checked three ways.

For every key: the node HashClient's hasher (RendezvousHash over "host:port" node names)
picks; where the key actually is, asked of each node with a plain single-node Client (on
the chosen node, absent from the others); and what `shoal ring -d rendezvous` (shoal-ring's
reproduction of pymemcache's distribution, binary from $SHOAL_CLI, default
<repo>/target/release/shoal) names for it. All three must agree.

pymemcache 4.0 quirks this relies on (pymemcache/client/hash.py, rendezvous.py):
- the hasher scores murmur3_32(f"{node}-{key}") over the key *as passed*: a `str` key is
  hashed by code point (low byte of each, length in code points, which shoal-ring models
  from the UTF-8 it is given), a `bytes` key by its repr ("b'...'"), and key_prefix is
  never part of the hash (it only changes the stored key);
- node names are "%s:%s" % (host, port), whether the server was given as a tuple or as a
  "host:port" string.
"""

import os
import pathlib
import subprocess

import pytest
from pymemcache.client.base import Client
from pymemcache.client.hash import HashClient

from test_pymemcache import IO_TIMEOUT, Shoald

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHOAL_CLI = os.environ.get("SHOAL_CLI", str(ROOT / "target" / "release" / "shoal"))

# Valid memcached keys (no whitespace or control bytes, at most 250 bytes of UTF-8) whose
# code points are not all ASCII: Latin-1 (where hashing code points and hashing Latin-1
# bytes coincide), wider code points (where only the low byte of each counts), U+0100
# (low byte 0), astral characters, and a 250-byte key.
NON_ASCII = [
    "café",
    "naïve:ключ",
    "日本語のキー",
    "emoji:🦀🐚",
    "straße",
    "Ω:omega",
    "ÿ",
    "Ā",
    "mixed:a€b",
    "é" * 125,
]
KEYS = [f"place:{i}" for i in range(470)] + [
    "a",
    "ab",
    "abc",
    "x" * 250,
    "-leading-dash",
    "key:with:colons",
    "{hash}tag",
    "UPPER",
    "0",
    "12345",
    "tab\\t-not-really",
    "quote'\"",
    "slash/and\\back",
    "percent%s",
    "nul-free~!@#$^&*()",
    "dot.",
    "end",
    "VALUE",
    "x",
    "yy",
] + NON_ASCII
assert len(KEYS) == len(set(KEYS)) == 500


@pytest.fixture(scope="module")
def nodes():
    servers = []
    try:
        for _ in range(3):
            servers.append(Shoald())
        yield servers
    finally:
        for s in servers:
            s.stop()


@pytest.fixture
def plain(nodes):
    """A plain single-node Client per node, keyed by pymemcache's node name; all flushed."""
    clients = {}
    for s in nodes:
        c = s.client(allow_unicode_keys=True)
        c.flush_all(noreply=False)
        clients[f"127.0.0.1:{s.port}"] = c
    yield clients
    for c in clients.values():
        c.close()


def hash_client(servers, **kw):
    return HashClient(
        servers,
        connect_timeout=IO_TIMEOUT,
        timeout=IO_TIMEOUT,
        use_pooling=False,
        allow_unicode_keys=True,
        **kw,
    )


def shoal_ring(node_names, keys):
    """{key: node name} from `shoal ring -d rendezvous` over the nodes in this order."""
    proc = subprocess.run(
        [SHOAL_CLI, "ring", "-d", "rendezvous", "-s", ",".join(node_names), "--", *keys],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")
    lines = proc.stdout.decode("utf-8").split("\n")
    assert lines[0].startswith("# distribution="), lines[0]
    assert "hash=" in lines[0], lines[0]
    assert lines[-1] == ""
    placed = {}
    for line in lines[1:-1]:
        key, node = line.rsplit("\t", 1)
        placed[key] = node
    assert list(placed) == list(keys)
    return placed


def stored_on(plain, keys):
    """{node name: {key: value}} for the given (stored) keys, asked of each node alone."""
    found = {}
    for node, c in plain.items():
        found[node] = {}
        for i in range(0, len(keys), 100):
            found[node].update(c.get_many(keys[i : i + 100]))
    return found


def check_placement(hc, plain, node_names, keys, stored_key=lambda k: k):
    """Set every key through hc; check hasher choice == actual location == shoal ring."""
    values = {k: f"value-{i}".encode() for i, k in enumerate(keys)}
    assert hc.set_many(values, noreply=False) == []

    chosen = {k: hc.hasher.get_node(k) for k in keys}
    for k in keys:
        # The hasher's node name is the one HashClient routes to.
        assert hc._get_client(k) is hc.clients[chosen[k]]
    assert set(chosen.values()) == set(plain), "every node should get some keys"

    by_stored = {stored_key(k): k for k in keys}
    found = stored_on(plain, list(by_stored))
    wrong = []
    for node, items in found.items():
        for sk, v in items.items():
            k = by_stored[sk]
            assert v == values[k]
            if chosen[k] != node:
                wrong.append((k, chosen[k], node))
    assert wrong == [], f"keys found on a node pymemcache did not choose: {wrong[:20]}"
    counts = {k: 0 for k in keys}
    for items in found.values():
        for sk in items:
            counts[by_stored[sk]] += 1
    missing = [k for k, n in counts.items() if n != 1]
    assert missing == [], f"keys not on exactly one node: {missing[:20]}"

    # And the HashClient reads every key back.
    assert hc.get_many(keys) == values

    ring = shoal_ring(node_names, keys)
    disagree = [(k, chosen[k], ring[k]) for k in keys if ring[k] != chosen[k]]
    assert disagree == [], (
        f"shoal ring -d rendezvous disagrees with pymemcache on {len(disagree)} of "
        f"{len(keys)} keys (key, pymemcache, shoal ring): {disagree[:20]}"
    )
    return chosen


def test_placement_matches_pymemcache_and_shoal_ring(nodes, plain):
    names = [f"127.0.0.1:{s.port}" for s in nodes]
    hc = hash_client([s.server for s in nodes])
    try:
        assert sorted(hc.clients) == sorted(names)
        check_placement(hc, plain, names, KEYS)
    finally:
        hc.close()


def test_key_prefix_and_string_specs_do_not_move_keys(nodes, plain):
    """Servers as "host:port" strings in another order, and a key_prefix: same placement
    (node names are unchanged, rendezvous ignores order, and the prefix is not hashed),
    while the node holds the prefixed key."""
    names = [f"127.0.0.1:{s.port}" for s in reversed(nodes)]
    hc = hash_client(names, key_prefix=b"pfx:")
    try:
        assert sorted(hc.clients) == sorted(names)
        # Keys that still fit in 250 bytes with the prefix.
        subset = [
            k
            for k in dict.fromkeys(KEYS[::5] + NON_ASCII)
            if len(k.encode()) <= 250 - len("pfx:")
        ]
        chosen = check_placement(
            hc, plain, names, subset, stored_key=lambda k: "pfx:" + k
        )
        # Nothing was stored unprefixed.
        assert all(c.get_many(subset[:50]) == {} for c in plain.values())
    finally:
        hc.close()
    # Same nodes as a plain HashClient with tuple specs would choose.
    ref = hash_client([s.server for s in nodes])
    try:
        assert {k: ref.hasher.get_node(k) for k in chosen} == chosen
    finally:
        ref.close()


def test_bytes_keys_are_hashed_by_repr(nodes, plain):
    """A bytes key is placed by its repr: HashClient formats f"{node}-{key}", so b"k"
    scores "127.0.0.1:P-b'k'". shoal ring reproduces that when handed str(key)."""
    names = [f"127.0.0.1:{s.port}" for s in nodes]
    hc = hash_client([s.server for s in nodes])
    try:
        keys = [f"bytes:{i}".encode() for i in range(60)] + [k.encode() for k in NON_ASCII]
        for k in keys:
            assert hc.set(k, b"v", noreply=False) is True
        chosen = {k: hc.hasher.get_node(k) for k in keys}
        for node, c in plain.items():
            got = c.get_many(keys)
            assert sorted(got) == sorted(k for k in keys if chosen[k] == node)
        ring = shoal_ring(names, [str(k) for k in keys])
        disagree = [(k, chosen[k], ring[str(k)]) for k in keys if ring[str(k)] != chosen[k]]
        assert disagree == [], disagree[:20]
        # Not the node of the same text as a str key, for some of them.
        as_str = {k: hc.hasher.get_node(k.decode()) for k in keys}
        assert any(as_str[k] != chosen[k] for k in keys)
    finally:
        hc.close()
