package shoal;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.net.InetSocketAddress;
import java.util.Arrays;
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
 * XMemcached in binary-protocol mode against a running shoald (port from the system property
 * shoald.port), and with SASL PLAIN against a shoald started with -S (shoald.sasl.port; user
 * shoal, password shoalpw).
 */
public class XMemcachedBinaryTest {
  private static final long OP_TIMEOUT_MS = 5000;
  private MemcachedClient client;

  private static MemcachedClient connect(String portProperty, AuthInfo auth) throws Exception {
    String port = System.getProperty(portProperty);
    Assume.assumeTrue(portProperty + " not set", port != null && !port.isEmpty());
    // XMemcached finds a server's AuthInfo by the host string of the connected session,
    // which it sees as "localhost" (reverse-resolved), so SASL servers are named that way.
    String addr = (auth == null ? "127.0.0.1:" : "localhost:") + port;
    List<InetSocketAddress> servers = AddrUtil.getAddresses(addr);
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

  @Before
  public void setUp() throws Exception {
    client = connect("shoald.port", null);
    client.flushAll();
  }

  @After
  public void tearDown() throws Exception {
    if (client != null) {
      client.shutdown();
    }
  }

  @Test
  public void setGetDelete() throws Exception {
    assertTrue(client.set("k", 0, "v1"));
    assertEquals("v1", client.get("k"));
    assertNull(client.get("missing"));
    byte[] blob = new byte[300_000];
    for (int i = 0; i < blob.length; i++) {
      blob[i] = (byte) i;
    }
    assertTrue(client.set("blob", 0, blob));
    assertTrue(Arrays.equals(blob, (byte[]) client.get("blob")));
    HashMap<String, Integer> obj = new HashMap<>();
    obj.put("a", 1);
    assertTrue(client.set("obj", 0, obj));
    assertEquals(obj, client.get("obj"));
    assertTrue(client.delete("k"));
    assertNull(client.get("k"));
    assertFalse(client.delete("k"));
  }

  @Test
  public void addReplaceAppendPrepend() throws Exception {
    assertTrue(client.add("a", 0, "1"));
    assertFalse(client.add("a", 0, "2"));
    assertEquals("1", client.get("a"));
    assertTrue(client.replace("a", 0, "3"));
    assertFalse(client.replace("nope", 0, "x"));
    assertNull(client.get("nope"));
    assertTrue(client.append("a", "45"));
    assertTrue(client.prepend("a", "12"));
    assertEquals("12345", client.get("a"));
    assertFalse(client.append("nope", "x"));
  }

  @Test
  public void incrDecr() throws Exception {
    // A missing counter starts at the initial value.
    assertEquals(10L, client.incr("c", 5, 10));
    assertEquals(15L, client.incr("c", 5, 10));
    assertEquals(12L, client.decr("c", 3, 0));
    assertEquals(0L, client.decr("c", 100, 0));
    assertEquals(7L, client.decr("d", 1, 7));
  }

  @Test
  public void casRoundTrip() throws Exception {
    assertTrue(client.set("c", 0, "one"));
    GetsResponse<String> r = client.gets("c");
    assertNotNull(r);
    assertEquals("one", r.getValue());
    assertTrue(client.cas("c", 0, "two", r.getCas()));
    assertFalse(client.cas("c", 0, "three", r.getCas()));
    assertEquals("two", client.get("c"));
    GetsResponse<String> r2 = client.gets("c");
    assertTrue(r2.getCas() != r.getCas());
  }

  @Test
  public void touchAndGetAndTouch() throws Exception {
    assertTrue(client.set("t", 100, "v"));
    assertTrue(client.touch("t", 0));
    assertFalse(client.touch("absent", 10));
    assertEquals("v", client.getAndTouch("t", 0));
    assertNull(client.getAndTouch("absent", 10));
    // Expiry by touch: 1 second, then gone.
    assertTrue(client.touch("t", 1));
    long deadline = System.currentTimeMillis() + 5000;
    while (client.get("t") != null) {
      if (System.currentTimeMillis() > deadline) {
        fail("touched item never expired");
      }
      Thread.sleep(200);
    }
  }

  @Test
  public void getMulti() throws Exception {
    Map<String, String> want = new HashMap<>();
    for (int i = 0; i < 100; i++) {
      want.put("key" + i, "value" + i);
      assertTrue(client.set("key" + i, 0, "value" + i));
    }
    List<String> keys = new java.util.ArrayList<>(want.keySet());
    keys.add("absent1");
    keys.add("absent2");
    Map<String, String> got = client.get(keys);
    assertEquals(want, got);
  }

  @Test
  public void statsAndFlushAll() throws Exception {
    client.set("s", 0, "v");
    client.get("s");
    Map<InetSocketAddress, Map<String, String>> stats = client.getStats();
    assertEquals(1, stats.size());
    Map<String, String> s = stats.values().iterator().next();
    assertNotNull(s.get("pid"));
    assertTrue(Long.parseLong(s.get("cmd_set")) >= 1);
    assertTrue(Long.parseLong(s.get("get_hits")) >= 1);
    Map<InetSocketAddress, Map<String, String>> settings = client.getStatsByItem("settings");
    assertEquals("1048576", settings.values().iterator().next().get("item_size_max"));
    client.flushAll();
    assertNull(client.get("s"));
    Map<InetSocketAddress, String> versions = client.getVersions();
    assertEquals(1, versions.size());
    assertNotNull(versions.values().iterator().next());
  }

  @Test
  public void saslPlain() throws Exception {
    MemcachedClient authed = connect("shoald.sasl.port", AuthInfo.plain("shoal", "shoalpw"));
    try {
      // XMemcached authenticates on its own thread after connecting: until that finishes the
      // server rightly answers "auth error", so retry the first command for a while.
      long deadline = System.currentTimeMillis() + 5000;
      while (true) {
        try {
          assertTrue(authed.set("secret", 0, "data"));
          break;
        } catch (net.rubyeye.xmemcached.exception.MemcachedServerException e) {
          if (System.currentTimeMillis() > deadline) {
            throw e;
          }
          Thread.sleep(100);
        }
      }
      assertEquals("data", authed.get("secret"));
      assertEquals(3L, authed.incr("n", 1, 3));
    } finally {
      authed.shutdown();
    }
  }

  @Test
  public void saslWrongPasswordIsRefused() throws Exception {
    MemcachedClient bad = connect("shoald.sasl.port", AuthInfo.plain("shoal", "wrong"));
    try {
      Thread.sleep(500);
      bad.set("stolen", 0, "x");
      fail("a client with a wrong password was served");
    } catch (net.rubyeye.xmemcached.exception.MemcachedException
        | java.util.concurrent.TimeoutException expected) {
      // The auth error, or a timeout while XMemcached reconnects after its failed login.
    } finally {
      bad.shutdown();
    }
  }

  @Test
  public void saslWithoutCredentialsIsRefused() throws Exception {
    MemcachedClient anon = connect("shoald.sasl.port", null);
    try {
      anon.get("secret");
      fail("an unauthenticated client was served");
    } catch (net.rubyeye.xmemcached.exception.MemcachedServerException expected) {
      // "Authentication required or not successful"
    } finally {
      anon.shutdown();
    }
  }
}
