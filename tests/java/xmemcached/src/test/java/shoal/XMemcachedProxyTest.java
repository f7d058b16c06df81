package shoal;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
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

/**
 * XMemcached in binary-protocol mode through shoal-proxy's binary front end: the pool on
 * proxy.port spreads keys over the three shoalds of shoald.cluster.ports; the pool on
 * proxy.sasl.port requires SASL PLAIN (user shoal, password shoalpw).
 */
public class XMemcachedProxyTest {
  private static final long OP_TIMEOUT_MS = 5000;
  private MemcachedClient client;

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
    client = connect("127.0.0.1", property("proxy.port"), null);
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
    assertEquals("plain", s.get("pool"));
    assertTrue(client.getVersions().values().iterator().next().contains("shoal-proxy"));
    client.set("f", 0, "v");
    client.flushAll();
    assertNull(client.get("f"));
  }

  @Test
  public void saslAtTheProxy() throws Exception {
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
