package shoal;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import com.google.code.yanf4j.core.Session;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import net.rubyeye.xmemcached.CommandFactory;
import net.rubyeye.xmemcached.HashAlgorithm;
import net.rubyeye.xmemcached.MemcachedClient;
import net.rubyeye.xmemcached.MemcachedSessionLocator;
import net.rubyeye.xmemcached.XMemcachedClient;
import net.rubyeye.xmemcached.XMemcachedClientBuilder;
import net.rubyeye.xmemcached.command.BinaryCommandFactory;
import net.rubyeye.xmemcached.command.TextCommandFactory;
import net.rubyeye.xmemcached.impl.ElectionMemcachedSessionLocator;
import net.rubyeye.xmemcached.impl.KetamaMemcachedSessionLocator;
import net.rubyeye.xmemcached.networking.MemcachedSession;
import net.rubyeye.xmemcached.utils.AddrUtil;
import org.junit.AfterClass;
import org.junit.Assume;
import org.junit.BeforeClass;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * XMemcached's consistent-hashing locators over three shoald nodes (ports from the system
 * property shoald.cluster.ports, "p1,p2,p3"), in text and binary protocol.
 *
 * <p>For each locator the test asks XMemcached which node every key belongs to, stores the
 * keys through the cluster client, checks with one plain single-node client per node that
 * each key sits on exactly the chosen node, and checks that `shoal ring` (the CLI at the
 * system property shoal.cli) names the same node for every key.
 *
 * <p>Both locators hash each server by its Java address string, which shoal-ring takes as
 * {@code host:port@address}. The test reads that string from the live sessions and passes
 * it explicitly: for "127.0.0.1:P" XMemcached reverse-resolves the address when it wraps it,
 * so on a host whose /etc/hosts maps 127.0.0.1 to localhost it hashes
 * "localhost/127.0.0.1:P", not the "127.0.0.1/127.0.0.1:P" shoal-ring derives when no
 * address is given (which would move about two thirds of the keys).
 */
public class XMemcachedClusterTest {
  private static final long OP_TIMEOUT_MS = 5000;
  private static final int ASCII_KEYS = 288;

  @Rule public Timeout timeout = Timeout.seconds(45);

  private static int[] ports;
  private static String cli;
  /** One plain (default locator, text protocol) client per node, in port order. */
  private static MemcachedClient[] nodes;
  private static List<String> keys;

  @BeforeClass
  public static void setUpClass() throws Exception {
    String list = System.getProperty("shoald.cluster.ports");
    Assume.assumeTrue("shoald.cluster.ports not set", list != null && !list.trim().isEmpty());
    String[] parts = list.trim().split(",");
    assertEquals("shoald.cluster.ports needs three ports: " + list, 3, parts.length);
    ports = new int[parts.length];
    for (int i = 0; i < parts.length; i++) {
      ports[i] = Integer.parseInt(parts[i].trim());
    }
    cli = System.getProperty("shoal.cli");
    Assume.assumeTrue("shoal.cli not set", cli != null && !cli.trim().isEmpty());
    assertTrue("shoal CLI not executable: " + cli, new File(cli).canExecute());

    nodes = new MemcachedClient[ports.length];
    for (int i = 0; i < ports.length; i++) {
      XMemcachedClientBuilder b =
          new XMemcachedClientBuilder(AddrUtil.getAddresses("127.0.0.1:" + ports[i]));
      configure(b, new TextCommandFactory());
      nodes[i] = b.build();
      nodes[i].setOpTimeout(OP_TIMEOUT_MS);
    }

    keys = new ArrayList<>();
    for (int i = 0; i < ASCII_KEYS; i++) {
      keys.add("key:" + i);
    }
    // Non-ASCII keys: XMemcached hashes Java Strings (UTF-16), which KETAMA_HASH and
    // ELECTION_HASH turn into UTF-8 bytes; the wire carries the UTF-8 bytes too.
    keys.add("ключ-1");
    keys.add("clé-2");
    keys.add("schlüssel-3");
    keys.add("鍵-4");
    keys.add("κλειδί-5");
    keys.add("日本語キー:6");
    keys.add("naïve/façade-7");
    keys.add("emoji-\uD83D\uDE00-8"); // a surrogate pair (U+1F600)
    keys.add("straße_9");
    keys.add("ünïcödé:10");
    // 250 bytes of UTF-8, the longest key memcached accepts.
    keys.add("long:" + repeat('x', 245));
    keys.add("longé:" + repeat('y', 242));
    for (String k : keys) {
      assertTrue("bad test key " + k, k.getBytes(StandardCharsets.UTF_8).length <= 250);
    }
  }

  @AfterClass
  public static void tearDownClass() throws Exception {
    if (nodes != null) {
      for (MemcachedClient n : nodes) {
        if (n != null) {
          n.shutdown();
        }
      }
    }
  }

  private static String repeat(char c, int n) {
    StringBuilder sb = new StringBuilder(n);
    for (int i = 0; i < n; i++) {
      sb.append(c);
    }
    return sb.toString();
  }

  private static void configure(XMemcachedClientBuilder b, CommandFactory factory) {
    b.setCommandFactory(factory);
    b.setConnectionPoolSize(1);
    b.setConnectTimeout(OP_TIMEOUT_MS);
    b.setOpTimeout(OP_TIMEOUT_MS);
  }

  @Test
  public void ketamaText() throws Exception {
    check(Locator.KETAMA, new TextCommandFactory());
  }

  @Test
  public void ketamaBinary() throws Exception {
    check(Locator.KETAMA, new BinaryCommandFactory());
  }

  @Test
  public void electionText() throws Exception {
    check(Locator.ELECTION, new TextCommandFactory());
  }

  @Test
  public void electionBinary() throws Exception {
    check(Locator.ELECTION, new BinaryCommandFactory());
  }

  private enum Locator {
    KETAMA("xmemcached-ketama"),
    ELECTION("election");

    final String ringDistribution;

    Locator(String ringDistribution) {
      this.ringDistribution = ringDistribution;
    }

    MemcachedSessionLocator create() {
      return this == KETAMA
          ? new KetamaMemcachedSessionLocator(HashAlgorithm.KETAMA_HASH)
          : new ElectionMemcachedSessionLocator();
    }

    /** The server string this locator hashes for a session (see the XMemcached source). */
    String hashedAddress(Session s) {
      if (this == KETAMA) {
        // KetamaMemcachedSessionLocator.getSockStr: the wrapper's remote address string,
        // recorded when the session was added (String.valueOf(getRemoteSocketAddress())).
        String a = ((MemcachedSession) s).getInetSocketAddressWrapper().getRemoteAddressStr();
        return a != null ? a : String.valueOf(s.getRemoteSocketAddress());
      }
      // ElectionMemcachedSessionLocator: session.getRemoteSocketAddress().toString().
      return s.getRemoteSocketAddress().toString();
    }
  }

  private void check(Locator locator, CommandFactory factory) throws Exception {
    String label = locator + "/" + factory.getProtocol();
    for (MemcachedClient n : nodes) {
      n.flushAll();
    }

    StringBuilder servers = new StringBuilder();
    for (int p : ports) {
      servers.append("127.0.0.1:").append(p).append(' ');
    }
    XMemcachedClientBuilder b =
        new XMemcachedClientBuilder(AddrUtil.getAddresses(servers.toString().trim()));
    configure(b, factory);
    MemcachedSessionLocator sessionLocator = locator.create();
    b.setSessionLocator(sessionLocator);
    XMemcachedClient client = (XMemcachedClient) b.build();
    try {
      client.setOpTimeout(OP_TIMEOUT_MS);
      long deadline = System.currentTimeMillis() + OP_TIMEOUT_MS;
      while (client.getAvailableServers().size() < ports.length) {
        if (System.currentTimeMillis() > deadline) {
          fail(label + ": connected to only " + client.getAvailableServers());
        }
        Thread.sleep(20);
      }
      // The connector adds a session to its map before it rebuilds the locator; rebuild
      // once more (what the connector itself does after each addSession) so the locator
      // surely sees all three.
      client.getConnector().updateSessions();
      assertTrue(client.getSessionLocator() == sessionLocator);

      // 1. Where XMemcached puts each key, and the address string it hashed per node.
      Map<String, Integer> chosen = new LinkedHashMap<>();
      Map<Integer, String> hashed = new HashMap<>();
      for (String k : keys) {
        Session s = client.getSessionLocator().getSessionByKey(k);
        assertNotNull(label + ": no session for " + k, s);
        InetSocketAddress remote = s.getRemoteSocketAddress();
        int port = remote.getPort();
        chosen.put(k, port);
        String addr = locator.hashedAddress(s);
        String prev = hashed.putIfAbsent(port, addr);
        assertTrue(
            label + ": node " + port + " hashed as both " + prev + " and " + addr,
            prev == null || prev.equals(addr));
        assertTrue(
            label + ": unexpected address string " + addr, addr.endsWith("/127.0.0.1:" + port));
      }
      int[] perNode = new int[ports.length];
      for (int port : chosen.values()) {
        perNode[indexOf(port)]++;
      }
      for (int i = 0; i < ports.length; i++) {
        // ~100 expected each; a node with almost none would make the check meaningless.
        assertTrue(
            label + ": keys per node " + java.util.Arrays.toString(perNode), perNode[i] >= 30);
      }

      // 2. Store through the cluster client; each key must land on exactly the chosen node.
      for (String k : keys) {
        assertTrue(label + ": set " + k, client.set(k, 0, "v:" + k));
      }
      List<Map<String, String>> present = new ArrayList<>();
      for (MemcachedClient n : nodes) {
        Map<String, String> got = n.get(keys);
        present.add(got);
      }
      List<String> misplaced = new ArrayList<>();
      for (String k : keys) {
        int want = chosen.get(k);
        for (int i = 0; i < ports.length; i++) {
          String v = present.get(i).get(k);
          boolean shouldHave = ports[i] == want;
          if (shouldHave && !("v:" + k).equals(v)) {
            misplaced.add(k + " missing on chosen node " + ports[i] + " (got " + v + ")");
          } else if (!shouldHave && v != null) {
            misplaced.add(k + " also on node " + ports[i] + " (chosen " + want + ")");
          }
        }
      }
      assertTrue(label + ": " + misplaced, misplaced.isEmpty());
      // And the cluster client reads them back through the same routing.
      Map<String, String> back = client.get(keys);
      assertEquals(label + ": multi-get through the cluster client", keys.size(), back.size());

      // 3. shoal-ring must name the same node for every key.
      StringBuilder spec = new StringBuilder();
      for (int p : ports) {
        if (spec.length() > 0) {
          spec.append(',');
        }
        spec.append("127.0.0.1:").append(p).append('@').append(hashed.get(p));
      }
      assertEquals(label + ": a node got no keys", ports.length, hashed.size());
      Map<String, String> ring = runRing(locator.ringDistribution, spec.toString());
      List<String> disagreements = new ArrayList<>();
      for (String k : keys) {
        String want = "127.0.0.1:" + chosen.get(k);
        String got = ring.get(k);
        if (!want.equals(got)) {
          disagreements.add(k + ": xmemcached " + want + ", shoal-ring " + got);
        }
      }
      System.out.println(
          label
              + ": "
              + keys.size()
              + " keys, per node "
              + java.util.Arrays.toString(perNode)
              + ", servers "
              + spec
              + ", shoal-ring disagreements "
              + disagreements.size());
      assertTrue(
          label + ": shoal ring -d " + locator.ringDistribution + " -s " + spec + " disagrees on "
              + disagreements.size() + " keys: " + disagreements,
          disagreements.isEmpty());
    } finally {
      client.shutdown();
    }
  }

  private static int indexOf(int port) {
    for (int i = 0; i < ports.length; i++) {
      if (ports[i] == port) {
        return i;
      }
    }
    throw new AssertionError("XMemcached chose unknown port " + port);
  }

  /** Runs `shoal ring -d DIST -s SPEC KEY...` and returns key to server description. */
  private static Map<String, String> runRing(String distribution, String spec) throws Exception {
    List<String> cmd = new ArrayList<>();
    cmd.add(cli);
    cmd.add("ring");
    cmd.add("-d");
    cmd.add(distribution);
    cmd.add("-s");
    cmd.add(spec);
    cmd.add("--");
    cmd.addAll(keys);
    File err = File.createTempFile("shoal-ring", ".err");
    try {
      ProcessBuilder pb = new ProcessBuilder(cmd);
      pb.redirectError(err);
      Process proc = pb.start();
      proc.getOutputStream().close();
      String out;
      try (InputStream in = proc.getInputStream()) {
        out = new String(readAll(in), StandardCharsets.UTF_8);
      }
      if (!proc.waitFor(20, TimeUnit.SECONDS)) {
        proc.destroyForcibly();
        fail("shoal ring timed out");
      }
      String stderr = new String(Files.readAllBytes(err.toPath()), StandardCharsets.UTF_8);
      assertEquals("shoal ring failed: " + stderr, 0, proc.exitValue());
      String[] lines = out.split("\n");
      assertTrue(
          "shoal ring output lacks the header: " + out,
          lines.length > 0 && lines[0].startsWith("# distribution="));
      assertEquals("shoal ring output lines: " + out, keys.size() + 1, lines.length);
      Map<String, String> result = new HashMap<>();
      for (int i = 1; i < lines.length; i++) {
        String key = keys.get(i - 1);
        String[] f = lines[i].split("\t");
        assertEquals("shoal ring line " + i + ": " + lines[i], 2, f.length);
        // The CLI echoes the key: a mismatch means the argument was mangled on the way
        // (the JVM encodes process arguments with file.encoding, which must be UTF-8).
        assertEquals("shoal ring echoed a different key", key, f[0]);
        result.put(key, f[1]);
      }
      return result;
    } finally {
      err.delete();
    }
  }

  private static byte[] readAll(InputStream in) throws Exception {
    ByteArrayOutputStream buf = new ByteArrayOutputStream();
    byte[] chunk = new byte[8192];
    int n;
    while ((n = in.read(chunk)) > 0) {
      buf.write(chunk, 0, n);
    }
    return buf.toByteArray();
  }
}
