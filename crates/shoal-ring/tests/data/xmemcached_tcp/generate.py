"""Regenerates vectors.jsonl from a live XMemcached 2.4.9 client.

The shared XMemcached vectors were computed with sessions that are not
`MemcachedTCPSession`s, which takes XMemcached's unweighted branch in the array and
election locators. A real client talks TCP, so its sessions are `MemcachedTCPSession`s
and it takes the weighted branch. This script starts three memcached processes on
loopback, builds a real XMemcachedClient with weights 1, 2, 3 for each locator, and
records which server each key of ../keys.json (the vendored shared vectors; or
$SHOAL_VECTORS_DIR/keys.json) goes to.

Needs: memcached, java + javac, the xmemcached 2.4.9 and slf4j-api jars (fetched with mvn
when missing). Usage: python3 generate.py
"""
import json, os, shutil, subprocess, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
PORTS = [31311, 31312, 31313]
WEIGHTS = [1, 2, 3]
M2 = os.path.expanduser("~/.m2/repository")
JARS = [(M2 + "/com/googlecode/xmemcached/xmemcached/2.4.9/xmemcached-2.4.9.jar",
         "com.googlecode.xmemcached:xmemcached:2.4.9"),
        (M2 + "/org/slf4j/slf4j-api/1.7.21/slf4j-api-1.7.21.jar", "org.slf4j:slf4j-api:1.7.21")]

JAVA = r"""
import net.rubyeye.xmemcached.*; import net.rubyeye.xmemcached.impl.*;
import net.rubyeye.xmemcached.utils.AddrUtil; import java.util.*; import java.nio.file.*;
public class Real { public static void main(String[] a) throws Exception {
  XMemcachedClientBuilder b = new XMemcachedClientBuilder(AddrUtil.getAddresses(a[2]), new int[]{1, 2, 3});
  MemcachedSessionLocator l = a[0].equals("election") ? new ElectionMemcachedSessionLocator()
      : a[0].equals("array_native") ? new ArrayMemcachedSessionLocator()
      : new KetamaMemcachedSessionLocator();
  b.setSessionLocator(l);
  MemcachedClient c = b.build();
  Thread.sleep(1500);
  StringBuilder sb = new StringBuilder();
  for (String k : Files.readAllLines(Paths.get(a[1]))) {
    sb.append(l.getSessionByKey(k).getRemoteSocketAddress().getPort()).append('\n');
  }
  System.out.print(sb);
  c.shutdown();
} }
"""

def main():
    vec = os.environ.get("SHOAL_VECTORS_DIR", os.path.join(HERE, ".."))
    keys = json.load(open(os.path.join(vec, "keys.json")))["keys"]
    json.dump({"kind": "keys", "keys": keys}, open(os.path.join(HERE, "keys.json"), "w"))
    for path, artifact in JARS:
        if not os.path.exists(path):
            subprocess.check_call(["mvn", "-q", "dependency:get", "-Dtransitive=false",
                                   "-Dartifact=" + artifact])
    cp = ":".join(p for p, _ in JARS)
    procs = [subprocess.Popen([shutil.which("memcached"), "-p", str(p), "-U", "0", "-l",
                               "127.0.0.1", "-m", "16", "-u", "root"]) for p in PORTS]
    try:
        time.sleep(1)
        with tempfile.TemporaryDirectory() as d:
            open(os.path.join(d, "Real.java"), "w").write(JAVA)
            kf = os.path.join(d, "keys.txt")
            open(kf, "w").write("\n".join(keys) + "\n")
            subprocess.check_call(["javac", "-cp", cp, "-d", d, os.path.join(d, "Real.java")])
            addrs = " ".join("127.0.0.1:%d" % p for p in PORTS)
            servers = [{"host": "127.0.0.1", "port": p, "weight": w,
                        "address_string": "localhost/127.0.0.1:%d" % p}
                       for p, w in zip(PORTS, WEIGHTS)]
            with open(os.path.join(HERE, "vectors.jsonl"), "w") as f:
                for loc in ["array_native", "ketama", "election"]:
                    out = subprocess.check_output(["java", "-cp", cp + ":" + d, "Real", loc, kf,
                                                   addrs], text=True, stderr=subprocess.DEVNULL)
                    idx = [PORTS.index(int(x)) for x in out.split()]
                    f.write(json.dumps({"kind": "distribution", "source": "xmemcached 2.4.9",
                                        "sessions": "tcp", "setup": "three_weighted",
                                        "locator": loc, "servers": servers,
                                        "indices": idx}) + "\n")
    finally:
        for p in procs:
            p.terminate()
            p.wait()

if __name__ == "__main__":
    main()
