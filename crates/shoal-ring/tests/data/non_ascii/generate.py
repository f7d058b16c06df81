"""Regenerates the non-ASCII vectors in this directory from the real libraries.

The shared vectors use ASCII keys only, so they cannot show the quirks that differ on
other bytes (C's signed char, Java's UTF-16 units, Python's code points). This script asks
the libraries themselves:

- libhashkit.so.2 (Debian libmemcached 1.1.x) through ctypes,
- XMemcached 2.4.9's HashAlgorithm through a small Java program (jar from Maven Central),
- pymemcache 4.0.0's murmur3_32 and RendezvousHash.

Usage: python3 generate.py  (needs libhashkit2, java + javac, mvn, and pymemcache==4.0.0
importable). It rewrites keys.json and vectors.jsonl.
"""
import ctypes, json, os, subprocess, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
KEYS = [
    "é", "aé", "abé", "naïve", "Straße:1000", "k€y", "€€€€", "ÿÿÿ", "\u0080",
    "ключ", "日本語キー", "😀", "a😀b", "😀" * 17, "x" * 31 + "é" * 9, "é" * 70,
    "user:🙂:42", "\u00ff" * 5, "ab\u00ff", "mixed-ascii-then-ü",
]

def libhashkit():
    lib = ctypes.CDLL("libhashkit.so.2")
    out = []
    for name in ["one_at_a_time", "md5", "crc32", "fnv1_64", "fnv1a_64", "fnv1_32",
                 "fnv1a_32", "murmur", "murmur3", "jenkins"]:
        f = getattr(lib, "libhashkit_" + name)
        f.restype = ctypes.c_uint32
        f.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        vals = [f(k.encode(), len(k.encode())) for k in KEYS]
        out.append({"kind": "hash", "source": "libmemcached 1.1 libhashkit.so.2",
                    "algorithm": "crc" if name == "crc32" else name, "values": vals})
    return out

JAVA = r"""
import java.nio.file.*; import java.util.*;
import net.rubyeye.xmemcached.HashAlgorithm;
public class Gen { public static void main(String[] a) throws Exception {
  List<String> keys = Files.readAllLines(Paths.get(a[0]), java.nio.charset.StandardCharsets.UTF_8);
  for (HashAlgorithm h : HashAlgorithm.values()) {
    StringBuilder sb = new StringBuilder(h.name());
    for (String k : keys) sb.append(' ').append(h.hash(k) & 0xffffffffL);
    System.out.println(sb);
  } } }
"""

def xmemcached():
    jar = os.path.expanduser(
        "~/.m2/repository/com/googlecode/xmemcached/xmemcached/2.4.9/xmemcached-2.4.9.jar")
    slf4j = os.path.expanduser(
        "~/.m2/repository/org/slf4j/slf4j-api/1.7.21/slf4j-api-1.7.21.jar")
    for path, artifact in [(jar, "com.googlecode.xmemcached:xmemcached:2.4.9"),
                           (slf4j, "org.slf4j:slf4j-api:1.7.21")]:
        if not os.path.exists(path):
            subprocess.check_call(["mvn", "-q", "dependency:get", "-Dtransitive=false",
                                   "-Dartifact=" + artifact])
    jar = jar + ":" + slf4j
    with tempfile.TemporaryDirectory() as d:
        open(os.path.join(d, "Gen.java"), "w").write(JAVA)
        kf = os.path.join(d, "keys.txt")
        open(kf, "w", encoding="utf-8").write("\n".join(KEYS) + "\n")
        subprocess.check_call(["javac", "-cp", jar, "-d", d, os.path.join(d, "Gen.java")])
        text = subprocess.check_output(["java", "-cp", jar + ":" + d, "Gen", kf], text=True)
    out = []
    for line in text.splitlines():
        name, *vals = line.split()
        out.append({"kind": "hash", "source": "xmemcached 2.4.9", "algorithm": name,
                    "values": [int(v) for v in vals]})
    return out

def pymemcache():
    from pymemcache.client.murmur3 import murmur3_32
    from pymemcache.client.rendezvous import RendezvousHash
    out = [{"kind": "hash", "source": "pymemcache 4.0.0", "algorithm": "murmur3_32_seed0",
            "values": [murmur3_32(k) for k in KEYS]}]
    servers = [{"host": "10.19.90.%d" % i, "port": 11211, "weight": 1} for i in (74, 75, 76, 77)]
    nodes = ["%s:%d" % (s["host"], s["port"]) for s in servers]
    r = RendezvousHash(nodes=list(nodes))
    out.append({"kind": "distribution", "source": "pymemcache 4.0.0", "setup": "four_hosts",
                "locator": "rendezvous", "servers": servers,
                "indices": [nodes.index(r.get_node(k)) for k in KEYS]})
    return out

if __name__ == "__main__":
    json.dump({"kind": "keys", "keys": KEYS}, open(os.path.join(HERE, "keys.json"), "w"),
              ensure_ascii=False)
    with open(os.path.join(HERE, "vectors.jsonl"), "w") as f:
        for line in libhashkit() + xmemcached() + pymemcache():
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
