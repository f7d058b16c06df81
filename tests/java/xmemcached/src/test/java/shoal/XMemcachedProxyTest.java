package shoal;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import net.rubyeye.xmemcached.GetsResponse;
import net.rubyeye.xmemcached.MemcachedClient;
import net.rubyeye.xmemcached.XMemcachedClientBuilder;
import net.rubyeye.xmemcached.auth.AuthInfo;
import net.rubyeye.xmemcached.command.BinaryCommandFactory;
import net.rubyeye.xmemcached.utils.AddrUtil;
import org.junit.After;
import org.junit.Assume;
import org.junit.Before;
import org.junit.Test;
import org.junit.runner.RunWith;
import org.junit.runners.Parameterized;
import org.junit.runners.Parameterized.Parameters;

/**
 * XMemcached in binary-protocol mode through shoal-proxy's binary front end, three ways
 * (every test runs for each):
 *
 * <ul>
 *   <li>a server pool (proxy.port, pool "plain") of a proxy with one worker thread, spreading
 *       keys over the three shoalds of shoald.cluster.ports;
 *   <li>the same pool (proxy.threads.port) of a proxy with --threads 2;
 *   <li>a failover route pool (proxy.route.port, pool "routed") of that second proxy, over the
 *       same cluster's pool and a spare pool: writes go to the cluster, misses go on to the
 *       spare.
 * </ul>
 *
 * <p>The pool on proxy.sasl.port (the first proxy) requires SASL PLAIN (user shoal, password
 * shoalpw); that test runs once.
 */
@RunWith(Parameterized.class)
public class XMemcachedProxyTest {
  private static final long OP_TIMEOUT_MS = 5000;
  private MemcachedClient client;
  private final String portProperty;
  private final String pool;

  public XMemcachedProxyTest(String name, String portProperty, String pool) {
    this.portProperty = portProperty;
    this.pool = pool;
  }

  @Parameters(name = "{0}")
  public static Collection<Object[]> proxies() {
    return Arrays.asList(
        new Object[][] {
          {"server pool, one worker", "proxy.port", "plain"},
          {"server pool, --threads 2", "proxy.threads.port", "plain"},
          {"failover route, --threads 2", "proxy.route.port", "routed"},
        });
  }

  private static MemcachedClient connect(String host, String port, AuthInfo auth) throws Exception {
    List<InetSocketAddress> servers = AddrUtil.getAddresses(host + ":" + port);
    XMemcachedClientBuilder builder = new XMemcachedClientBuilder(servers);
    builder.setCommandFactory(new BinaryCommandFactory());
    builder.setConnectionPoolSize(1);
    builder.setConnectTimeout(OP_TIMEOUT_MS);
    builder.setOpTimeout(OP_TIMEOUT_MS);
    if (auth != null) {
      builder.addAuthInfo(servers.get(0), auth);
    }
    MemcachedClient c = builder.build();
    c.setOpTimeout(OP_TIMEOUT_MS);
    return c;
  }

  private static String property(String name) {
    String v = System.getProperty(name);
    Assume.assumeTrue(name + " not set", v != null && !v.isEmpty());
    return v;
  }

  @Before
  public void setUp() throws Exception {
    client = connect("127.0.0.1", property(portProperty), null);
    client.flushAll();
  }

  @After
  public void tearDown() throws Exception {
    if (client != null) {
      client.shutdown();
    }
  }

  @Test
  public void commands() throws Exception {
    assertTrue(client.set("k", 0, "v1"));
    assertEquals("v1", client.get("k"));
    assertNull(client.get("missing"));
    byte[] blob = new byte[300_000];
    for (int i = 0; i < blob.length; i++) {
      blob[i] = (byte) i;
    }
    assertTrue(client.set("blob", 0, blob));
    assertTrue(java.util.Arrays.equals(blob, (byte[]) client.get("blob")));
    assertTrue(client.add("a", 0, "1"));
    assertFalse(client.add("a", 0, "2"));
    assertTrue(client.replace("a", 0, "3"));
    assertFalse(client.replace("nope", 0, "x"));
    assertTrue(client.append("a", "45"));
    assertTrue(client.prepend("a", "12"));
    assertEquals("12345", client.get("a"));
    assertTrue(client.delete("a"));
    assertFalse(client.delete("a"));
    assertEquals(10L, client.incr("c", 5, 10));
    assertEquals(15L, client.incr("c", 5, 10));
    assertEquals(0L, client.decr("c", 100, 0));
    assertTrue(client.touch("k", 100));
    assertFalse(client.touch("absent", 10));
    assertEquals("v1", client.getAndTouch("k", 0));
    assertNull(client.getAndTouch("absent", 10));
  }

  @Test
  public void cas() throws Exception {
    assertTrue(client.set("c", 0, "one"));
    GetsResponse<String> r = client.gets("c");
    assertEquals("one", r.getValue());
    assertTrue(client.cas("c", 0, "two", r.getCas()));
    assertFalse(client.cas("c", 0, "three", r.getCas()));
    assertEquals("two", client.get("c"));
  }

  @Test
  public void multiGetOverEveryServer() throws Exception {
    Map<String, String> want = new HashMap<>();
    for (int i = 0; i < 300; i++) {
      want.put("key" + i, "value" + i);
      client.setWithNoReply("key" + i, 0, "value" + i);
    }
    List<String> keys = new ArrayList<>(want.keySet());
    for (int i = 0; i < 50; i++) {
      keys.add("absent" + i);
    }
    assertEquals(want, client.get(keys));
    // The keys really are spread over the three servers behind the proxy.
    String[] ports = property("shoald.cluster.ports").split(",");
    int total = 0;
    for (String port : ports) {
      MemcachedClient node = connect("127.0.0.1", port, null);
      try {
        Map<String, String> held = node.get(new ArrayList<>(want.keySet()));
        assertTrue("a server holds none of the keys", held.size() > 0);
        total += held.size();
      } finally {
        node.shutdown();
      }
    }
    assertEquals(want.size(), total);
  }

  @Test
  public void statsVersionsFlush() throws Exception {
    Map<InetSocketAddress, Map<String, String>> stats = client.getStats();
    Map<String, String> s = stats.values().iterator().next();
    assertNotNull(s.get("pid"));
    assertEquals(pool, s.get("pool"));
    assertTrue(client.getVersions().values().iterator().next().contains("shoal-proxy"));
    client.set("f", 0, "v");
    client.flushAll();
    assertNull(client.get("f"));
  }

  /**
   * Four clients at once, each with its own connection (which --threads 2 spreads over both
   * workers), each setting and reading back its own keys.
   */
  @Test
  public void concurrentClients() throws Exception {
    ExecutorService workers = Executors.newFixedThreadPool(4);
    try {
      List<Future<Integer>> done = new ArrayList<>();
      for (int t = 0; t < 4; t++) {
        final int id = t;
        done.add(
            workers.submit(
                () -> {
                  MemcachedClient c = connect("127.0.0.1", property(portProperty), null);
                  try {
                    for (int i = 0; i < 200; i++) {
                      String k = "c" + id + "-" + i;
                      assertTrue(c.set(k, 0, "v" + i));
                      assertEquals("v" + i, c.get(k));
                    }
                    return 200;
                  } finally {
                    c.shutdown();
                  }
                }));
      }
      for (Future<Integer> f : done) {
        assertEquals(Integer.valueOf(200), f.get(60, TimeUnit.SECONDS));
      }
    } finally {
      workers.shutdownNow();
    }
  }

  /** Through the failover route, a key only the spare pool holds is read from it. */
  @Test
  public void failoverReadsTheSpareOnAMiss() throws Exception {
    Assume.assumeTrue("routed".equals(pool));
    MemcachedClient spare = connect("127.0.0.1", property("shoald.spare.port"), null);
    try {
      assertTrue(spare.set("only-spare", 0, "from-spare"));
      assertEquals("from-spare", client.get("only-spare"));
      Map<String, String> both = client.get(Arrays.asList("only-spare", "absent"));
      assertEquals(1, both.size());
      assertEquals("from-spare", both.get("only-spare"));
    } finally {
      spare.shutdown();
    }
  }

  @Test
  public void saslAtTheProxy() throws Exception {
    // The SASL pool is on the first proxy; once is enough.
    Assume.assumeTrue("proxy.port".equals(portProperty));
    String port = property("proxy.sasl.port");
    // XMemcached finds a server's AuthInfo by the reverse-resolved host, "localhost".
    MemcachedClient authed = connect("localhost", port, AuthInfo.plain("shoal", "shoalpw"));
    try {
      long deadline = System.currentTimeMillis() + 5000;
      while (true) {
        try {
          assertTrue(authed.set("secret", 0, "data"));
          break;
        } catch (net.rubyeye.xmemcached.exception.MemcachedServerException e) {
          // Authentication runs on XMemcached's own thread after connecting.
          if (System.currentTimeMillis() > deadline) {
            throw e;
          }
          Thread.sleep(100);
        }
      }
      assertEquals("data", authed.get("secret"));
    } finally {
      authed.shutdown();
    }
    MemcachedClient anon = connect("127.0.0.1", port, null);
    try {
      anon.get("secret");
      fail("an unauthenticated client was served");
    } catch (net.rubyeye.xmemcached.exception.MemcachedServerException expected) {
      // The auth error.
    } finally {
      anon.shutdown();
    }
  }
}
