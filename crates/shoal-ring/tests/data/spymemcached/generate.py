"""Regenerates vectors.jsonl from spymemcached 2.12.3's KetamaNodeLocator.

Nodes are java.lang.reflect.Proxy stand-ins for MemcachedNode whose only used method,
getSocketAddress(), returns `new InetSocketAddress(host, port)` as spymemcached's AddrUtil
builds it. Its toString() depends on the JDK (JDK 17 prints "/10.0.1.1:11211" for an
IP literal; older JDKs "10.0.1.1/10.0.1.1:11211"), so the string Java printed is recorded
as each server's address_string. Covers the unweighted
KETAMA_HASH ring, a non-KETAMA hash (FNV1A_32_HASH, one point per hash), and the weighted
ring. Keys come from the vendored shared vectors in ../keys.json (or $SHOAL_VECTORS_DIR).

Needs java + javac and the spymemcached 2.12.3 jar (fetched with mvn when missing).
Usage: python3 generate.py
"""
import json, os, subprocess, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
JAR = os.path.expanduser("~/.m2/repository/net/spy/spymemcached/2.12.3/spymemcached-2.12.3.jar")
SERVERS = [("10.0.1.1", 11211, 6), ("10.0.1.2", 11211, 3), ("10.0.1.3", 11212, 2),
           ("10.0.1.4", 11211, 1)]

JAVA = r"""
import net.spy.memcached.*; import java.lang.reflect.*; import java.net.*; import java.util.*;
import java.nio.file.*;
public class Spy { public static void main(String[] a) throws Exception {
  List<MemcachedNode> nodes = new ArrayList<>(); Map<InetSocketAddress, Integer> w = new HashMap<>();
  for (String s : a[1].split(",")) {
    String[] p = s.split(":");
    final InetSocketAddress isa = new InetSocketAddress(p[0], Integer.parseInt(p[1]));
    w.put(isa, Integer.parseInt(p[2]));
    nodes.add((MemcachedNode) java.lang.reflect.Proxy.newProxyInstance(MemcachedNode.class.getClassLoader(),
      new Class<?>[]{MemcachedNode.class}, (proxy, m, args) -> {
        if (m.getName().equals("getSocketAddress")) return isa;
        if (m.getName().equals("hashCode")) return System.identityHashCode(proxy);
        if (m.getName().equals("equals")) return proxy == args[0];
        if (m.getName().equals("toString")) return isa.toString();
        return null; }));
  }
  if (a[0].equals("addrs")) {
    for (MemcachedNode n : nodes) System.out.println(n.getSocketAddress());
    return;
  }
  KetamaNodeLocator loc = a[0].equals("weighted")
    ? new KetamaNodeLocator(nodes, DefaultHashAlgorithm.KETAMA_HASH, KetamaNodeKeyFormatter.Format.SPYMEMCACHED, w)
    : new KetamaNodeLocator(nodes, a[0].equals("fnv1a_32") ? DefaultHashAlgorithm.FNV1A_32_HASH : DefaultHashAlgorithm.KETAMA_HASH);
  StringBuilder sb = new StringBuilder();
  for (String k : Files.readAllLines(Paths.get(a[2]))) sb.append(nodes.indexOf(loc.getPrimary(k))).append('\n');
  System.out.print(sb);
} }
"""

def main():
    vec = os.environ.get("SHOAL_VECTORS_DIR", os.path.join(HERE, ".."))
    keys = json.load(open(os.path.join(vec, "keys.json")))["keys"]
    json.dump({"kind": "keys", "keys": keys}, open(os.path.join(HERE, "keys.json"), "w"))
    if not os.path.exists(JAR):
        subprocess.check_call(["mvn", "-q", "dependency:get", "-Dtransitive=false",
                               "-Dartifact=net.spy:spymemcached:2.12.3"])
    spec = ",".join("%s:%d:%d" % s for s in SERVERS)
    with tempfile.TemporaryDirectory() as d:
        open(os.path.join(d, "Spy.java"), "w").write(JAVA)
        kf = os.path.join(d, "keys.txt")
        open(kf, "w").write("\n".join(keys) + "\n")
        subprocess.check_call(["javac", "-cp", JAR, "-d", d, os.path.join(d, "Spy.java")])
        addrs = subprocess.check_output(["java", "-cp", JAR + ":" + d, "Spy", "addrs", spec, kf],
                                        text=True, stderr=subprocess.DEVNULL).split()
        servers = [{"host": h, "port": p, "weight": w, "address_string": a}
                   for (h, p, w), a in zip(SERVERS, addrs)]
        with open(os.path.join(HERE, "vectors.jsonl"), "w") as f:
            for mode in ["ketama", "fnv1a_32", "weighted"]:
                out = subprocess.check_output(["java", "-cp", JAR + ":" + d, "Spy", mode, spec, kf],
                                              text=True, stderr=subprocess.DEVNULL)
                f.write(json.dumps({"kind": "distribution", "source": "spymemcached 2.12.3",
                                    "setup": "four_weighted", "locator": mode,
                                    "servers": servers,
                                    "indices": [int(x) for x in out.split()]}) + "\n")

if __name__ == "__main__":
    main()
