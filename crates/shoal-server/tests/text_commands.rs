//! Every text-protocol command against a real shoald, asserting memcached's exact replies.

mod common;

use common::{gets_cas, Server};

#[test]
fn set_and_get_exact_replies() {
    let s = Server::start();
    let mut c = s.conn();
    c.rt(b"set k 5 0 3\r\nabc\r\n", b"STORED\r\n");
    c.rt(b"get k\r\n", b"VALUE k 5 3\r\nabc\r\nEND\r\n");
    // Overwrite with other flags and an empty value.
    c.rt(b"set k 4294967295 0 0\r\n\r\n", b"STORED\r\n");
    c.rt(b"get k\r\n", b"VALUE k 4294967295 0\r\n\r\nEND\r\n");
    // Binary-safe values: \r\n inside the data block is data.
    c.rt(b"set bin 0 0 4\r\n\r\n\0\xff\r\n", b"STORED\r\n");
    c.rt(b"get bin\r\n", b"VALUE bin 0 4\r\n\r\n\0\xff\r\nEND\r\n");
    c.rt(b"get missing\r\n", b"END\r\n");
    // A bad length is a bad command line; the unswallowed data line is then read as a
    // command (here one too short to be any: another format error).
    c.rt(
        b"set k 0 0 x\r\n",
        b"CLIENT_ERROR bad command line format\r\n",
    );
    c.rt(b"x\r\n", b"CLIENT_ERROR bad command line format\r\n");
    // Any other bad line swallows the data block it announced (memcached 1.6.45).
    c.rt(
        b"set k x 0 3\r\nabc\r\n",
        b"CLIENT_ERROR bad command line format\r\n",
    );
    c.rt(b"get k\r\n", b"VALUE k 4294967295 0\r\n\r\nEND\r\n");
}

#[test]
fn add_replace_append_prepend() {
    let s = Server::start();
    let mut c = s.conn();
    c.rt(b"add a 1 0 1\r\nx\r\n", b"STORED\r\n");
    c.rt(b"add a 2 0 1\r\ny\r\n", b"NOT_STORED\r\n");
    c.rt(b"get a\r\n", b"VALUE a 1 1\r\nx\r\nEND\r\n");

    c.rt(b"replace nope 0 0 1\r\ny\r\n", b"NOT_STORED\r\n");
    c.rt(b"get nope\r\n", b"END\r\n");
    c.rt(b"replace a 3 0 2\r\nyy\r\n", b"STORED\r\n");
    c.rt(b"get a\r\n", b"VALUE a 3 2\r\nyy\r\nEND\r\n");

    c.rt(b"append nope 0 0 1\r\nz\r\n", b"NOT_STORED\r\n");
    c.rt(b"prepend nope 0 0 1\r\nz\r\n", b"NOT_STORED\r\n");
    c.rt(b"get nope\r\n", b"END\r\n");
    // append/prepend keep the item's flags and ignore the ones given.
    c.rt(b"append a 9 0 3\r\nEND\r\n", b"STORED\r\n");
    c.rt(b"prepend a 9 0 2\r\n<<\r\n", b"STORED\r\n");
    c.rt(b"get a\r\n", b"VALUE a 3 7\r\n<<yyEND\r\nEND\r\n");
}

#[test]
fn cas_command() {
    let s = Server::start();
    let mut c = s.conn();
    c.rt(b"cas k 0 0 1 1\r\nx\r\n", b"NOT_FOUND\r\n");
    c.set("k", b"v1");
    let cas1 = gets_cas(&mut c, "k");
    assert_ne!(cas1, 0);
    c.rt(
        format!("cas k 7 0 2 {}\r\nv2\r\n", cas1 + 1000).as_bytes(),
        b"EXISTS\r\n",
    );
    c.rt(
        format!("cas k 7 0 2 {cas1}\r\nv2\r\n").as_bytes(),
        b"STORED\r\n",
    );
    let cas2 = gets_cas(&mut c, "k");
    assert_ne!(cas1, cas2, "every modification gets a new unique");
    c.rt(
        b"gets k\r\n",
        format!("VALUE k 7 2 {cas2}\r\nv2\r\nEND\r\n").as_bytes(),
    );
    // The old unique no longer matches.
    c.rt(
        format!("cas k 0 0 2 {cas1}\r\nv3\r\n").as_bytes(),
        b"EXISTS\r\n",
    );
    c.rt(b"get k\r\n", b"VALUE k 7 2\r\nv2\r\nEND\r\n");
    let st = c.stats("");
    assert_eq!(st["cas_misses"], "1");
    assert_eq!(st["cas_hits"], "1");
    assert_eq!(st["cas_badval"], "2");
    // A missing cas unique is a bad command line, and the data block is swallowed.
    c.rt(
        b"cas k 0 0 1\r\nx\r\n",
        b"CLIENT_ERROR bad command line format\r\n",
    );
}

#[test]
fn multi_key_get_gets_gat_gats() {
    let s = Server::start();
    let mut c = s.conn();
    c.set("a", b"1");
    c.set("c", b"333");
    c.rt(
        b"get a b c a\r\n",
        b"VALUE a 0 1\r\n1\r\nVALUE c 0 3\r\n333\r\nVALUE a 0 1\r\n1\r\nEND\r\n",
    );
    let ca = gets_cas(&mut c, "a");
    let cc = gets_cas(&mut c, "c");
    c.rt(
        b"gets a b c\r\n",
        format!("VALUE a 0 1 {ca}\r\n1\r\nVALUE c 0 3 {cc}\r\n333\r\nEND\r\n").as_bytes(),
    );
    c.rt(
        b"gat 100 a b c\r\n",
        b"VALUE a 0 1\r\n1\r\nVALUE c 0 3\r\n333\r\nEND\r\n",
    );
    c.rt(
        b"gats 0 c\r\n",
        format!("VALUE c 0 3 {cc}\r\n333\r\nEND\r\n").as_bytes(),
    );
    c.rt(b"gat 10 nope\r\n", b"END\r\n");
    // A gat needs its exptime and a key.
    c.rt(b"gat\r\n", b"CLIENT_ERROR bad command line format\r\n");
    c.rt(b"gat 10\r\n", b"CLIENT_ERROR bad command line format\r\n");
    c.rt(
        b"gat abc a\r\n",
        b"CLIENT_ERROR invalid exptime argument\r\n",
    );
    // gat with a negative time expires the item after returning it.
    c.rt(b"gat -1 a\r\n", b"VALUE a 0 1\r\n1\r\nEND\r\n");
    c.rt(b"get a\r\n", b"END\r\n");
    let st = c.stats("");
    // Counted per key, as memcached does.
    assert_eq!(st["touch_hits"], "4");
    assert_eq!(st["touch_misses"], "2");
    assert_eq!(st["cmd_touch"], "6");
    // Only the get/gets keys count as gets (4 + 1 + 1 + 3 + 1).
    assert_eq!(st["cmd_get"], "10");
    // get with no key.
    c.rt(b"get\r\n", b"CLIENT_ERROR bad command line format\r\n");
}

#[test]
fn delete_takes_a_zero_hold_time_and_refuses_other_tokens() {
    let s = Server::start();
    let mut c = s.conn();
    c.set("k", b"v");
    c.rt(b"delete k\r\n", b"DELETED\r\n");
    c.rt(b"delete k\r\n", b"NOT_FOUND\r\n");
    c.set("k", b"v");
    c.rt(b"delete k 0\r\n", b"DELETED\r\n");
    // Anything else after the key is refused and deletes nothing, as in memcached
    // 1.6.18 and as memccapable expects (1.6.45 ignores it: a documented deviation).
    c.set("k", b"v");
    c.rt(
        b"delete k 5\r\n",
        b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n",
    );
    c.rt(b"get k\r\n", b"VALUE k 0 1\r\nv\r\nEND\r\n");
    c.send(b"delete k 0 noreply\r\n");
    c.rt(b"get k\r\n", b"END\r\n");
    c.rt(b"delete\r\n", b"CLIENT_ERROR bad command line format\r\n");
    let st = c.stats("");
    assert_eq!(st["delete_hits"], "3");
    assert_eq!(st["delete_misses"], "1");
}

#[test]
fn incr_decr() {
    let s = Server::start();
    let mut c = s.conn();
    c.rt(b"incr n 1\r\n", b"NOT_FOUND\r\n");
    c.rt(b"decr n 1\r\n", b"NOT_FOUND\r\n");
    c.set("n", b"1");
    c.rt(b"incr n 1\r\n", b"2\r\n");
    c.rt(b"incr n 98\r\n", b"100\r\n");
    c.rt(b"get n\r\n", b"VALUE n 0 3\r\n100\r\nEND\r\n");
    // 64-bit wrap.
    c.set("n", b"18446744073709551615");
    c.rt(b"incr n 2\r\n", b"1\r\n");
    // memcached rewrites a shorter result in place, space-padded.
    c.rt(
        b"get n\r\n",
        b"VALUE n 0 20\r\n1                   \r\nEND\r\n",
    );
    c.rt(b"incr n 18446744073709551615\r\n", b"0\r\n");
    // decr floors at 0.
    c.set("n", b"5");
    c.rt(b"decr n 7\r\n", b"0\r\n");
    // A shrinking decr pads with spaces as memcached does: "10" -> "9 ".
    c.set("n", b"10");
    c.rt(b"decr n 1\r\n", b"9\r\n");
    c.rt(b"get n\r\n", b"VALUE n 0 2\r\n9 \r\nEND\r\n");
    // The padded value still counts.
    c.rt(b"incr n 1\r\n", b"10\r\n");
    c.rt(b"get n\r\n", b"VALUE n 0 2\r\n10\r\nEND\r\n");
    // Non-numeric values and deltas.
    c.set("s", b"abc");
    c.rt(
        b"incr s 1\r\n",
        b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
    );
    c.rt(
        b"decr s 1\r\n",
        b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
    );
    c.rt(
        b"incr n abc\r\n",
        b"CLIENT_ERROR invalid numeric delta argument\r\n",
    );
    c.rt(
        b"incr n -1\r\n",
        b"CLIENT_ERROR invalid numeric delta argument\r\n",
    );
    c.rt(b"incr n\r\n", b"CLIENT_ERROR bad command line format\r\n");
    // Flags survive arithmetic.
    c.rt(b"set f 42 0 1\r\n7\r\n", b"STORED\r\n");
    c.rt(b"incr f 1\r\n", b"8\r\n");
    c.rt(b"get f\r\n", b"VALUE f 42 1\r\n8\r\nEND\r\n");
    let st = c.stats("");
    assert_eq!(st["incr_misses"], "1");
    assert_eq!(st["decr_misses"], "1");
    assert_eq!(st["incr_hits"], "6");
    assert_eq!(st["decr_hits"], "2");
}

#[test]
fn touch_command() {
    let s = Server::start();
    let mut c = s.conn();
    c.rt(b"touch k 10\r\n", b"NOT_FOUND\r\n");
    c.set("k", b"v");
    c.rt(b"touch k 10\r\n", b"TOUCHED\r\n");
    c.rt(b"mg k t v\r\n", b"VA 1 t10\r\nv\r\n");
    c.rt(b"touch k 0\r\n", b"TOUCHED\r\n");
    c.rt(b"mg k t\r\n", b"HD t-1\r\n");
    // A negative time expires it.
    c.rt(b"touch k -1\r\n", b"TOUCHED\r\n");
    c.rt(b"get k\r\n", b"END\r\n");
    c.rt(
        b"touch k abc\r\n",
        b"CLIENT_ERROR invalid exptime argument\r\n",
    );
    c.rt(b"touch k\r\n", b"CLIENT_ERROR bad command line format\r\n");
    let st = c.stats("");
    assert_eq!(st["cmd_touch"], "4");
    assert_eq!(st["touch_hits"], "3");
    assert_eq!(st["touch_misses"], "1");
}

#[test]
fn flush_all_forms() {
    let s = Server::start();
    let mut c = s.conn();
    c.set("a", b"1");
    c.set("b", b"2");
    c.rt(b"flush_all\r\n", b"OK\r\n");
    c.rt(b"get a b\r\n", b"END\r\n");
    c.set("a", b"1");
    c.rt(b"flush_all 0\r\n", b"OK\r\n");
    c.rt(b"get a\r\n", b"END\r\n");
    c.set("a", b"1");
    c.send(b"flush_all noreply\r\n");
    c.rt(b"get a\r\n", b"END\r\n");
    c.set("a", b"1");
    c.send(b"flush_all 0 noreply\r\n");
    c.rt(b"get a\r\n", b"END\r\n");
    // Items stored after a flush are there.
    c.set("a", b"1");
    c.rt(b"get a\r\n", b"VALUE a 0 1\r\n1\r\nEND\r\n");
    // A delayed flush does not remove anything yet.
    c.rt(b"flush_all 100\r\n", b"OK\r\n");
    c.rt(b"get a\r\n", b"VALUE a 0 1\r\n1\r\nEND\r\n");
    c.rt(
        b"flush_all abc\r\n",
        b"CLIENT_ERROR invalid exptime argument\r\n",
    );
    // memcached counts a flush_all with a bad delay too (compared in parity.rs).
    assert_eq!(c.stat("cmd_flush"), 6);
}

/// `get_flushed` counts a read that misses a key `flush_all` removed, once per key, as
/// memcached counts the read that finds (and unlinks) a flushed item; a key written again
/// after the flush is no longer one, and `stats reset` zeroes the counter.
#[test]
fn get_flushed_counts_reads_of_flushed_keys_once() {
    let s = Server::start();
    let mut c = s.conn();
    let flushed = |c: &mut common::Conn| c.stat("get_flushed");
    for k in ["a", "b", "c"] {
        c.set(k, b"1");
    }
    c.rt(b"flush_all\r\n", b"OK\r\n");
    c.rt(b"get a\r\n", b"END\r\n");
    c.rt(b"mg b v\r\n", b"EN\r\n");
    assert_eq!(flushed(&mut c), 2);
    c.rt(b"get a b never-set\r\n", b"END\r\n");
    c.rt(b"touch b 10\r\n", b"NOT_FOUND\r\n");
    assert_eq!(flushed(&mut c), 2, "once per key, and only flushed keys");
    c.set("c", b"2");
    c.rt(b"delete c\r\n", b"DELETED\r\n");
    c.rt(b"get c\r\n", b"END\r\n");
    assert_eq!(flushed(&mut c), 2, "c was written again after the flush");
    c.set("d", b"1");
    c.rt(b"flush_all\r\n", b"OK\r\n");
    c.rt(b"touch d 10\r\n", b"NOT_FOUND\r\n");
    assert_eq!(flushed(&mut c), 3, "a touch reads too");
    c.rt(b"stats reset\r\n", b"RESET\r\n");
    assert_eq!(flushed(&mut c), 0);
    assert_eq!(c.stat("get_misses"), 0);
}

/// `stats` has memcached 1.6.45's keys (its t/stats.t counts 84 for its command line);
/// shoald's own eviction counters are in `stats eviction`.
#[test]
fn stats_has_memcacheds_keys_and_eviction_its_own() {
    let s = Server::with_args(&[
        "-I",
        "1024",
        "-o",
        "slab_chunk_max=1,no_lru_crawler,no_lru_maintainer",
    ]);
    let mut c = s.conn();
    let st = c.stats("");
    assert_eq!(st.len(), 84, "{:?}", st.keys().collect::<Vec<_>>());
    assert_eq!(st["libevent"], "none");
    assert!(!st.contains_key("ghost_hits"));
    let ev = c.stats("eviction");
    for key in [
        "evictions_promoted",
        "evictions_retained",
        "ghost_hits",
        "segments_main",
        "segments_stubs",
    ] {
        assert!(ev.contains_key(key), "{key} in stats eviction: {ev:?}");
    }
}

#[test]
fn version_verbosity_quit() {
    let s = Server::start();
    let mut c = s.conn();
    c.rt(
        b"version\r\n",
        format!("VERSION 1.6.45-shoal-{}\r\n", env!("CARGO_PKG_VERSION")).as_bytes(),
    );
    c.rt(b"verbosity 1\r\n", b"OK\r\n");
    c.send(b"verbosity 0 noreply\r\n");
    c.rt(b"mn\r\n", b"MN\r\n");
    c.rt(
        b"verbosity\r\n",
        b"CLIENT_ERROR bad command line format\r\n",
    );
    // quit closes without a reply, even with more pipelined after it.
    c.send(b"quit\r\nversion\r\n");
    c.expect_closed();
    // The server is fine.
    s.conn().assert_alive();
}

#[test]
fn noreply_on_every_command() {
    let s = Server::start();
    let mut c = s.conn();
    c.send(b"set a 1 0 1 noreply\r\nx\r\n");
    c.send(b"add a 0 0 1 noreply\r\ny\r\n");
    c.send(b"add b 2 0 1 noreply\r\nb\r\n");
    c.send(b"replace b 3 0 2 noreply\r\nbb\r\n");
    c.send(b"append a 0 0 1 noreply\r\n>\r\n");
    c.send(b"prepend a 0 0 1 noreply\r\n<\r\n");
    c.send(b"set n 0 0 2 noreply\r\n10\r\n");
    c.send(b"incr n 5 noreply\r\n");
    c.send(b"decr n 1 noreply\r\n");
    c.send(b"incr missing 1 noreply\r\n");
    c.send(b"touch a 100 noreply\r\n");
    c.send(b"delete b noreply\r\n");
    c.send(b"delete b noreply\r\n");
    c.send(b"verbosity 1 noreply\r\n");
    c.rt(b"mn\r\n", b"MN\r\n");
    c.rt(
        b"get a b n\r\n",
        b"VALUE a 1 3\r\n<x>\r\nVALUE n 0 2\r\n14\r\nEND\r\n",
    );
    let cas = gets_cas(&mut c, "a");
    c.send(format!("cas a 5 0 1 {cas} noreply\r\nz\r\n").as_bytes());
    c.send(format!("cas a 6 0 1 {cas} noreply\r\nw\r\n").as_bytes());
    c.rt(b"get a\r\n", b"VALUE a 5 1\r\nz\r\nEND\r\n");
    c.send(b"flush_all noreply\r\n");
    c.rt(b"get a n\r\n", b"END\r\n");
    // noreply also silences errors for storage commands, as in memcached; the stray
    // byte after a bad data block is then a line too short to be a command.
    c.send(b"set k 0 0 1 noreply\r\nxx\r\n");
    c.rt(b"mn\r\n", b"CLIENT_ERROR bad command line format\r\nMN\r\n");
    // ...and ERROR for an unknown command ending in noreply.
    c.send(b"bogus noreply\r\n");
    c.rt(b"mn\r\n", b"MN\r\n");
}

#[test]
fn stats_counters_move() {
    let s = Server::start();
    let mut c = s.conn();
    let before = c.stats("");
    for name in [
        "pid",
        "uptime",
        "time",
        "version",
        "curr_connections",
        "total_connections",
        "cmd_get",
        "cmd_set",
        "cmd_touch",
        "cmd_flush",
        "get_hits",
        "get_misses",
        "get_expired",
        "delete_hits",
        "delete_misses",
        "incr_hits",
        "incr_misses",
        "decr_hits",
        "decr_misses",
        "cas_hits",
        "cas_misses",
        "cas_badval",
        "touch_hits",
        "touch_misses",
        "bytes_read",
        "bytes_written",
        "limit_maxbytes",
        "threads",
        "bytes",
        "curr_items",
        "total_items",
        "evictions",
        "expired_unfetched",
        "evicted_unfetched",
        "reclaimed",
    ] {
        assert!(before.contains_key(name), "stats lacks {name}");
    }
    assert_eq!(before["pid"], s.pid().to_string());
    assert_eq!(before["threads"], "2");
    assert_eq!(before["limit_maxbytes"], (64u64 << 20).to_string());
    assert_eq!(before["curr_items"], "0");
    assert_eq!(before["bytes"], "0");
    assert_eq!(before["cmd_get"], "0");
    assert_eq!(before["curr_connections"], "1");

    c.set("a", b"hello");
    c.set("b", b"world");
    c.set("a", b"again");
    c.rt(
        b"get a b c\r\n",
        b"VALUE a 0 5\r\nagain\r\nVALUE b 0 5\r\nworld\r\nEND\r\n",
    );
    let st = c.stats("");
    assert_eq!(st["cmd_set"], "3");
    assert_eq!(st["cmd_get"], "3");
    assert_eq!(st["get_hits"], "2");
    assert_eq!(st["get_misses"], "1");
    assert_eq!(st["curr_items"], "2");
    assert_eq!(st["total_items"], "3");
    let bytes: u64 = st["bytes"].parse().unwrap();
    assert!(bytes >= 10, "bytes counts keys and values: {bytes}");
    assert!(st["bytes_read"].parse::<u64>().unwrap() > before["bytes_read"].parse().unwrap());
    assert!(st["bytes_written"].parse::<u64>().unwrap() > before["bytes_written"].parse().unwrap());

    // Another connection shows up in the connection counters.
    let mut c2 = s.conn();
    c2.assert_alive();
    let st = c.stats("");
    assert_eq!(st["curr_connections"], "2");
    assert!(st["total_connections"].parse::<u64>().unwrap() >= 2);
    drop(c2);

    c.rt(b"delete a\r\n", b"DELETED\r\n");
    let st = c.stats("");
    assert_eq!(st["curr_items"], "1");
    assert!(st["bytes"].parse::<u64>().unwrap() < bytes);

    // stats reset zeroes the request counters but not the item counts.
    c.rt(b"stats reset\r\n", b"RESET\r\n");
    let st = c.stats("");
    assert_eq!(st["cmd_get"], "0");
    assert_eq!(st["get_hits"], "0");
    assert_eq!(st["cmd_set"], "0");
    assert_eq!(st["curr_items"], "1");
}

#[test]
fn stats_groups() {
    let s = Server::with_args(&["-m", "32", "-I", "2m", "-c", "77"]);
    let mut c = s.conn();
    let st = c.stats("settings");
    assert_eq!(st["maxbytes"], (32u64 << 20).to_string());
    assert_eq!(st["maxconns"], "77");
    assert_eq!(st["item_size_max"], (2u64 << 20).to_string());
    assert_eq!(st["cas_enabled"], "yes");
    assert_eq!(st["evictions"], "on");
    assert_eq!(st["num_threads"], "2");

    // items: nothing until something is stored.
    c.rt(b"stats items\r\n", b"END\r\n");
    c.set("k", b"v");
    let st = c.stats("items");
    assert_eq!(st["items:1:number"], "1");

    let st = c.stats("slabs");
    assert!(!st.is_empty(), "slabs reports the pool once used");
    c.rt(b"stats sizes\r\n", b"STAT sizes_status disabled\r\nEND\r\n");
    let mut c2 = s.conn();
    c2.assert_alive();
    let raw = c.request_until(b"stats conns\r\n", b"END\r\n");
    let text = common::show(&raw);
    let addrs = text.lines().filter(|l| l.contains(":addr ")).count();
    assert!(addrs >= 2, "stats conns lists both clients: {text}");
    c.rt(b"stats nonsense\r\n", b"ERROR\r\n");
}

#[test]
fn cache_memlimit() {
    let s = Server::start();
    let mut c = s.conn();
    c.rt(b"cache_memlimit 100\r\n", b"OK\r\n");
    assert_eq!(c.stat("limit_maxbytes"), 100 << 20);
    c.send(b"cache_memlimit 80 noreply\r\n");
    c.rt(b"mn\r\n", b"MN\r\n");
    assert_eq!(c.stat("limit_maxbytes"), 80 << 20);
    c.rt(
        b"cache_memlimit 1\r\n",
        b"MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\n",
    );
    c.rt(b"cache_memlimit\r\n", b"ERROR\r\n");
    assert_eq!(c.stat("limit_maxbytes"), 80 << 20);
}

#[test]
fn key_rules() {
    let s = Server::start();
    let mut c = s.conn();
    let k250 = "k".repeat(250);
    c.set(&k250, b"ok");
    assert_eq!(c.get(&k250).as_deref(), Some(&b"ok"[..]));
    let k251 = "k".repeat(251);
    // memcached's get error path repeats the line end.
    c.rt(
        format!("get {k251}\r\n").as_bytes(),
        b"CLIENT_ERROR bad command line format\r\n\r\n",
    );
    c.rt(
        format!("set {k251} 0 0 1\r\nx\r\n").as_bytes(),
        b"CLIENT_ERROR bad command line format\r\n",
    );
    c.rt(
        format!("delete {k251}\r\n").as_bytes(),
        b"CLIENT_ERROR bad command line format\r\n",
    );
    c.assert_alive();
}
