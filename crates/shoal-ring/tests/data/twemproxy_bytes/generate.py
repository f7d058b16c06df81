"""Regenerates vectors.jsonl from a live twemproxy (nutcracker 0.5.0).

The shared twemproxy vectors use ASCII keys; twemproxy's hsieh, crc16 and crc32a are not
in libhashkit, so their handling of bytes >= 0x80 (C's signed char) is checked here. The
script starts three memcached backends and one nutcracker with a pool per (distribution,
hash), stores each key through the proxy, and records which backend received it.

Needs memcached and nutcracker on PATH. Usage: python3 generate.py
"""
import json, os, shutil, socket, subprocess, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
BACKENDS = [(31321, 1), (31322, 1), (31323, 2)]
HASHES = ["hsieh", "crc16", "crc32a", "one_at_a_time", "fnv1a_64"]
DISTS = ["modula", "ketama"]
KEYS = [k.encode() for k in ["é", "aé", "abé", "naïve", "Straße:1000", "k€y", "€€€€",
                              "ÿÿÿ", "ключ", "日本語キー", "😀", "a😀b", "user:🙂:42"]]
KEYS += [b"\x80", b"a\xff", b"ab\xfe", b"\xc3\xa9\xc3", b"key\x90\x91\x92", b"\xf0" * 7]

TERMINAL = (b"STORED\r\n", b"END\r\n", b"OK\r\n", b"DELETED\r\n", b"NOT_FOUND\r\n",
            b"ERROR\r\n")

def cmd(sock, data):
    """Sends one command and reads until a terminal reply line."""
    sock.sendall(data)
    buf = b""
    while not buf.endswith(TERMINAL) and b"SERVER_ERROR" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            break
        buf += chunk
    return buf

def main():
    procs = []
    try:
        for port, _ in BACKENDS:
            procs.append(subprocess.Popen([shutil.which("memcached"), "-p", str(port), "-U",
                                           "0", "-l", "127.0.0.1", "-m", "16", "-u", "root"]))
        pools, listen = [], 31330
        conf = ""
        for dist in DISTS:
            for h in HASHES:
                conf += "p_%s_%s:\n  listen: 127.0.0.1:%d\n  hash: %s\n  distribution: %s\n" \
                        "  servers:\n" % (dist, h, listen, h, dist)
                conf += "".join("   - 127.0.0.1:%d:%d\n" % b for b in BACKENDS)
                pools.append((dist, h, listen))
                listen += 1
        with tempfile.TemporaryDirectory() as d:
            cf = os.path.join(d, "nc.yml")
            open(cf, "w").write(conf)
            procs.append(subprocess.Popen([shutil.which("nutcracker"), "-c", cf, "-s", "31399",
                                           "-o", os.path.join(d, "nc.log")]))
            time.sleep(1.5)
            backends = [socket.create_connection(("127.0.0.1", p), timeout=5) for p, _ in BACKENDS]
            lines = []
            for dist, h, port in pools:
                for b in backends:
                    cmd(b, b"flush_all\r\n")
                px = socket.create_connection(("127.0.0.1", port), timeout=5)
                idx = []
                for k in KEYS:
                    r = cmd(px, b"set " + k + b" 0 0 1\r\nx\r\n")
                    assert r.startswith(b"STORED"), (dist, h, k, r)
                    found = [i for i, b in enumerate(backends)
                             if cmd(b, b"get " + k + b"\r\n").startswith(b"VALUE")]
                    assert len(found) == 1, (dist, h, k, found)
                    idx.append(found[0])
                    for b in backends:
                        cmd(b, b"delete " + k + b"\r\n")
                px.close()
                lines.append({"kind": "distribution", "source": "twemproxy 0.5.0",
                              "distribution": dist, "hash": h,
                              "servers": [{"host": "127.0.0.1", "port": p, "weight": w}
                                          for p, w in BACKENDS], "indices": idx})
    finally:
        for p in procs:
            p.terminate()
            p.wait()
    # Keys are bytes; JSON carries each byte as one latin-1 code point ("encoding").
    json.dump({"kind": "keys", "encoding": "latin1", "keys": [k.decode("latin1") for k in KEYS]},
              open(os.path.join(HERE, "keys.json"), "w"))
    with open(os.path.join(HERE, "vectors.jsonl"), "w") as f:
        for l in lines:
            f.write(json.dumps(l) + "\n")

if __name__ == "__main__":
    main()
