//! Operator commands against the real shoald, with memcached 1.6's replies, and the tools
//! operators run (`memcached-tool`) working unchanged.

mod common;

use common::{show, Server};
use std::collections::BTreeMap;
use std::process::Command;

#[test]
fn metadump_lists_every_item_with_memcached_fields() {
    let server = Server::start();
    let mut c = server.conn();
    c.rt(b"set foo 5 0 3\r\nbar\r\n", b"STORED\r\n");
    c.rt(b"set a%20b 0 100 2\r\nhi\r\n", b"STORED\r\n");
    c.rt(b"get foo\r\n", b"VALUE foo 5 3\r\nbar\r\nEND\r\n");
    let dump = show(&c.request_until(b"lru_crawler metadump all\r\n", b"END\r\n"));
    let mut lines: Vec<&str> = dump.lines().collect();
    assert_eq!(lines.pop(), Some("END"));
    // memcached 1.6.45 starts a dump with OK and ends each line with a space.
    assert_eq!(lines.remove(0), "OK");
    assert!(lines.iter().all(|l| l.ends_with(' ')), "{dump}");
    lines.sort();
    assert_eq!(lines.len(), 2, "{dump}");
    let fields = |line: &str| -> BTreeMap<String, String> {
        line.split(' ')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let ab = fields(lines[0]);
    let foo = fields(lines[1]);
    assert_eq!(ab["key"], "a%2520b");
    assert_eq!(foo["key"], "foo");
    assert_eq!(foo["exp"], "-1");
    assert_eq!(foo["fetch"], "yes");
    assert_eq!(ab["fetch"], "no");
    assert_eq!(foo["cls"], "1");
    assert_eq!(foo["flags"], "5");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    let exp: i64 = ab["exp"].parse().expect("exp");
    assert!((now + 95..=now + 105).contains(&exp), "exp {exp} now {now}");
    let la: i64 = foo["la"].parse().expect("la");
    assert!((now - 5..=now + 1).contains(&la));
    for f in ["cas", "size"] {
        assert!(foo[f].parse::<u64>().expect("number") > 0, "{f}");
    }
    // Dumping does not count as fetching.
    let again = show(&c.request_until(b"lru_crawler metadump 1\r\n", b"END\r\n"));
    assert!(again.contains("fetch=no"), "{again}");
    c.rt(b"lru_crawler metadump 5\r\n", b"OK\r\nEND\r\n");
    c.rt(b"lru_crawler mgdump 7\r\n", b"OK\r\nEN\r\n");
    // Behind another command's unsent reply, as memcached.
    c.rt(
        b"mn\r\nlru_crawler metadump all\r\n",
        b"MN\r\nERROR cannot pipeline other commands before metadump\r\n",
    );
    let mg = show(&c.request_until(b"lru_crawler mgdump hash\r\n", b"EN\r\n"));
    let mut mg: Vec<&str> = mg.lines().collect();
    mg.sort();
    assert_eq!(mg, vec!["EN", "OK", "mg a%20b", "mg foo"]);
}

#[test]
fn crawler_commands_answer_like_memcached() {
    let server = Server::start();
    let mut c = server.conn();
    for (req, want) in [
        (
            &b"lru_crawler metadump 0\r\n"[..],
            &b"BADCLASS invalid class id\r\n"[..],
        ),
        (
            b"lru_crawler metadump 64\r\n",
            b"BADCLASS invalid class id\r\n",
        ),
        (
            b"lru_crawler metadump x\r\n",
            b"BADCLASS invalid class id\r\n",
        ),
        (b"lru_crawler metadump all extra\r\n", b"ERROR\r\n"),
        (b"lru_crawler metadump\r\n", b"ERROR\r\n"),
        (b"lru_crawler bogus\r\n", b"ERROR\r\n"),
        (b"lru_crawler\r\n", b"ERROR\r\n"),
        (b"lru_crawler crawl all\r\n", b"OK\r\n"),
        (b"lru_crawler crawl 1,2\r\n", b"OK\r\n"),
        (
            b"lru_crawler crawl 99\r\n",
            b"BADCLASS invalid class id\r\n",
        ),
        (b"lru_crawler sleep 10\r\n", b"OK\r\n"),
        (
            b"lru_crawler sleep 2000000\r\n",
            b"CLIENT_ERROR sleep must be one second or less\r\n",
        ),
        (
            b"lru_crawler sleep x\r\n",
            b"CLIENT_ERROR bad command line format\r\n",
        ),
        (b"lru_crawler tocrawl 10\r\n", b"OK\r\n"),
        (
            b"lru_crawler tocrawl x\r\n",
            b"CLIENT_ERROR bad command line format\r\n",
        ),
        (b"lru_crawler disable\r\n", b"OK\r\n"),
        (b"lru_crawler disable\r\n", b"OK\r\n"),
        (
            b"lru_crawler metadump all\r\n",
            b"CLIENT_ERROR lru crawler disabled\r\n",
        ),
        (
            b"lru_crawler crawl all\r\n",
            b"CLIENT_ERROR lru crawler disabled\r\n",
        ),
        (b"lru_crawler enable\r\n", b"OK\r\n"),
        (
            b"lru_crawler enable\r\n",
            b"ERROR failed to start lru crawler thread\r\n",
        ),
        (
            b"stats cachedump 1\r\n",
            b"CLIENT_ERROR bad command line\r\n",
        ),
        (
            b"stats cachedump x 0\r\n",
            b"CLIENT_ERROR bad command line format\r\n",
        ),
        (
            b"stats cachedump 99 0\r\n",
            b"CLIENT_ERROR Illegal slab id\r\n",
        ),
        (b"stats cachedump 2 0\r\n", b"END\r\n"),
    ] {
        c.rt(req, want);
    }
    c.rt(b"set foo 0 0 3\r\nbar\r\n", b"STORED\r\n");
    c.rt(
        b"stats cachedump 1 10\r\n",
        b"ITEM foo [3 b; 0 s]\r\nEND\r\n",
    );
}

/// A dump far larger than the connection's high-water mark, read slowly, comes out whole
/// and in step, and the connection is usable after it.
#[test]
fn a_large_dump_is_complete() {
    let server = Server::with_args(&["-m", "128"]);
    let mut c = server.conn();
    let mut batch = Vec::new();
    for i in 0..20_000 {
        batch.extend_from_slice(format!("set key:{i:05} 0 0 1 noreply\r\nv\r\n").as_bytes());
    }
    c.send(&batch);
    c.rt(b"mn\r\n", b"MN\r\n");
    let dump = show(&c.request_until(b"lru_crawler metadump all\r\n", b"END\r\n"));
    let keys: std::collections::BTreeSet<&str> = dump
        .lines()
        .filter_map(|l| l.strip_prefix("key="))
        .filter_map(|l| l.split(' ').next())
        .collect();
    assert_eq!(keys.len(), 20_000);
    assert!(dump.len() > 1 << 20, "{} bytes", dump.len());
    c.rt(b"mn\r\n", b"MN\r\n");
}

#[test]
fn memcached_tool_dump_reads_every_key() {
    let Some(tool) = shoal_test_support::peer("memcached-tool", "memcached") else {
        return;
    };
    let server = Server::start();
    let mut c = server.conn();
    for i in 0..1000 {
        c.rt(
            format!(
                "set k{i} {i} 0 {}\r\nvalue{i}\r\n",
                format!("value{i}").len()
            )
            .as_bytes(),
            b"STORED\r\n",
        );
    }
    let addr = server.addr.expect("tcp").to_string();
    let out = Command::new("perl")
        .arg(&tool)
        .args([&addr, "dump"])
        .output()
        .expect("run memcached-tool");
    assert!(out.status.success(), "{}", show(&out.stderr));
    let text = show(&out.stdout);
    let adds = text.lines().filter(|l| l.starts_with("add ")).count();
    assert_eq!(adds, 1000, "{}", &text[..text.len().min(400)]);
    assert!(
        text.contains("add k7 7 0 6\r\nvalue7\r\n"),
        "flags and values kept"
    );
    for mode in ["display", "stats", "settings"] {
        let out = Command::new("perl")
            .arg(&tool)
            .args([&addr, mode])
            .output()
            .expect("run memcached-tool");
        assert!(out.status.success(), "{mode}: {}", show(&out.stderr));
        assert!(!out.stdout.is_empty(), "{mode} printed nothing");
    }
}

/// Reads what a watcher has received within `wait`.
fn watched(w: &mut common::Conn, wait: std::time::Duration) -> String {
    show(&w.drain_for(wait).0)
}

#[test]
fn watch_streams_events_in_memcached_format() {
    let server = Server::start();
    let mut w = server.conn();
    w.rt(
        b"watch fetchers mutations deletions connevents\r\n",
        b"OK\r\n",
    );
    let mut c = server.conn();
    c.rt(b"set wk 3 100 2\r\nhi\r\n", b"STORED\r\n");
    c.rt(b"get wk nokey\r\n", b"VALUE wk 3 2\r\nhi\r\nEND\r\n");
    c.rt(b"add wk 0 0 1\r\nx\r\n", b"NOT_STORED\r\n");
    c.rt(b"delete wk\r\n", b"DELETED\r\n");
    c.rt(b"mg wk v\r\n", b"EN\r\n");
    drop(c);
    let text = watched(&mut w, std::time::Duration::from_millis(300));
    let lines: Vec<&str> = text.lines().collect();
    let bodies: Vec<String> = lines
        .iter()
        .map(|l| {
            let mut parts = l.splitn(3, ' ');
            let ts = parts.next().unwrap_or("");
            assert!(ts.starts_with("ts=") && ts.contains('.'), "{l}");
            assert!(parts.next().unwrap_or("").starts_with("gid="), "{l}");
            // The connection's id varies; the rest is fixed.
            parts
                .next()
                .unwrap_or("")
                .split(' ')
                .filter(|f| !f.starts_with("cfd=") && !f.starts_with("rport="))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    // As memcached 1.6.45 logs them: every store and delete looks the key up first,
    // and that lookup is an item_get line too.
    let expected = [
        "type=conn_new rip=127.0.0.1 transport=tcp",
        "type=item_get key=wk status=not_found clsid=0 size=0",
        "type=item_store key=wk status=stored cmd=set ttl=100 clsid=1 size=2",
        "type=item_get key=wk status=found clsid=1 size=2",
        "type=item_get key=nokey status=not_found clsid=0 size=0",
        "type=item_get key=wk status=found clsid=1 size=2",
        "type=item_store key=wk status=not_stored cmd=add ttl=0 clsid=1 size=1",
        "type=item_get key=wk status=found clsid=1 size=2",
        "type=deleted key=wk cmd=delete clsid=1 size=2",
        "type=item_get key=wk status=not_found clsid=0 size=0",
        "type=conn_close rip=127.0.0.1 transport=tcp reason=normal",
    ];
    assert_eq!(bodies, expected, "{text}");
}

#[test]
fn watch_errors_limits_and_slow_watchers() {
    let server = Server::start();
    let mut c = server.conn();
    c.rt(b"watch bogus\r\n", b"ERROR\r\n");
    // A bare watch means fetchers.
    let mut w = server.conn();
    w.rt(b"watch\r\n", b"OK\r\n");
    c.rt(b"set a 0 0 1\r\n1\r\n", b"STORED\r\n");
    c.rt(b"get a\r\n", b"VALUE a 0 1\r\n1\r\nEND\r\n");
    let text = watched(&mut w, std::time::Duration::from_millis(200));
    // The set's own lookup, then the get.
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(text.contains("type=item_get key=a status=not_found"));
    assert!(text.contains("type=item_get key=a status=found"));
    // Twenty watchers at most.
    let mut more: Vec<_> = (0..19)
        .map(|_| {
            let mut m = server.conn();
            m.rt(b"watch mutations\r\n", b"OK\r\n");
            m
        })
        .collect();
    c.rt(
        b"watch\r\n",
        b"WATCHER_TOO_MANY log watcher limit reached\r\n",
    );
    more.clear();
    drop(w);
    // A watcher that does not read loses lines, is told how many, and never slows the
    // workers: 100,000 sets (11 MB of lines, more than socket buffers hold) finish
    // promptly while it sleeps.
    let mut slow = server.conn();
    slow.rt(b"watch mutations\r\n", b"OK\r\n");
    let started = std::time::Instant::now();
    let mut batch = Vec::new();
    for i in 0..100_000 {
        batch.extend_from_slice(format!("set key{i} 0 0 1 noreply\r\nv\r\n").as_bytes());
    }
    c.send(&batch);
    c.rt(b"mn\r\n", b"MN\r\n");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    // Now the watcher reads. Delivery resumes once its queue has room: a set made while
    // the queue is still full is lost (and counted) like the others, so one more set is
    // made each round until the newest one is delivered, which also means every line
    // before it has been read or counted.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut text = String::new();
    let mut lasts = 0;
    loop {
        c.rt(
            format!("set last{lasts} 0 0 1\r\nv\r\n").as_bytes(),
            b"STORED\r\n",
        );
        lasts += 1;
        text += &watched(&mut slow, std::time::Duration::from_millis(100));
        if text.contains(&format!("key=last{} status=stored", lasts - 1)) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "delivery did not resume: no line delivered after the watcher read"
        );
    }
    let received = text
        .lines()
        .filter(|l| l.contains("type=item_store"))
        .count();
    let skipped: usize = text
        .lines()
        .filter_map(|l| l.strip_prefix("skipped="))
        .map(|n| n.parse::<usize>().expect("number"))
        .sum();
    assert_eq!(
        received + skipped,
        100_000 + lasts,
        "every line delivered or counted"
    );
    assert!(skipped > 0, "a non-reading watcher lost lines");
    c.rt(
        b"version\r\n",
        format!("VERSION {}\r\n", shoal_server::VERSION).as_bytes(),
    );
}

#[test]
fn stats_detail_counts_by_prefix() {
    // -D also turns detail stats on, as in memcached.
    let server = Server::with_args(&["-D", "/"]);
    let mut c = server.conn();
    c.rt(b"set early/1 0 0 1\r\na\r\n", b"STORED\r\n");
    c.rt(
        b"stats detail dump\r\n",
        b"PREFIX early get 0 hit 0 set 1 del 0\r\nEND\r\n",
    );
    c.rt(b"stats reset\r\n", b"RESET\r\n");
    c.rt(b"stats detail off\r\n", b"OK\r\n");
    c.rt(
        b"stats detail\r\n",
        b"CLIENT_ERROR usage: stats detail on|off|dump\r\n",
    );
    c.rt(
        b"stats detail bogus\r\n",
        b"CLIENT_ERROR usage: stats detail on|off|dump\r\n",
    );
    c.rt(b"set user/1 0 0 1\r\na\r\n", b"STORED\r\n");
    c.rt(b"stats detail dump\r\n", b"END\r\n");
    c.rt(b"stats detail on\r\n", b"OK\r\n");
    c.rt(b"set user/1 0 0 1\r\na\r\n", b"STORED\r\n");
    c.rt(
        b"get user/1 user/2 plain\r\n",
        b"VALUE user/1 0 1\r\na\r\nEND\r\n",
    );
    c.rt(b"delete user/2\r\n", b"NOT_FOUND\r\n");
    c.rt(b"set a:b 0 0 1\r\na\r\n", b"STORED\r\n");
    c.rt(
        b"stats detail dump\r\n",
        b"PREFIX user get 2 hit 1 set 1 del 1\r\nEND\r\n",
    );
    c.rt(b"stats detail off\r\n", b"OK\r\n");
    c.rt(b"get user/1\r\n", b"VALUE user/1 0 1\r\na\r\nEND\r\n");
    c.rt(
        b"stats detail dump\r\n",
        b"PREFIX user get 2 hit 1 set 1 del 1\r\nEND\r\n",
    );
}

#[test]
fn dumps_and_watch_can_be_disabled() {
    let server = Server::with_args(&["-X", "-W"]);
    let mut c = server.conn();
    c.rt(
        b"lru_crawler metadump all\r\n",
        b"ERROR metadump not allowed\r\n",
    );
    c.rt(
        b"lru_crawler mgdump all\r\n",
        b"ERROR key dump not allowed\r\n",
    );
    c.rt(
        b"stats cachedump 1 0\r\n",
        b"CLIENT_ERROR stats cachedump not allowed\r\n",
    );
    c.rt(b"watch\r\n", b"CLIENT_ERROR watch commands not allowed\r\n");
    c.rt(b"lru_crawler crawl all\r\n", b"OK\r\n");
}

#[test]
fn stats_sizes_counts_items_with_track_sizes() {
    let off = Server::start();
    let mut c = off.conn();
    c.rt(b"stats sizes\r\n", b"STAT sizes_status disabled\r\nEND\r\n");
    let on = Server::with_args(&["-o", "track_sizes"]);
    let mut c = on.conn();
    c.rt(b"stats sizes\r\n", b"END\r\n");
    for i in 0..10 {
        c.rt(
            format!("set small{i} 0 0 1\r\nx\r\n").as_bytes(),
            b"STORED\r\n",
        );
    }
    let big = vec![b'b'; 1000];
    let mut req = b"set big 0 0 1000\r\n".to_vec();
    req.extend_from_slice(&big);
    req.extend_from_slice(b"\r\n");
    c.rt(&req, b"STORED\r\n");
    let stats = c.stats("sizes");
    let total: u64 = stats
        .values()
        .map(|v| v.parse::<u64>().expect("count"))
        .sum();
    assert_eq!(total, 11, "{stats:?}");
    for bucket in stats.keys() {
        assert_eq!(bucket.parse::<usize>().expect("bucket") % 32, 0, "{bucket}");
    }
    assert_eq!(stats.len(), 2, "small items share a bucket: {stats:?}");
}

/// libmemcached's tools read shoald as they read memcached.
#[test]
fn memcstat_and_memcdump_work() {
    let (Some(memcstat), Some(memcdump)) = (
        shoal_test_support::peer("memcstat", "libmemcached-tools"),
        shoal_test_support::peer("memcdump", "libmemcached-tools"),
    ) else {
        return;
    };
    let server = Server::start();
    let mut c = server.conn();
    for i in 0..50 {
        c.rt(
            format!("set tool{i} 0 0 1\r\nx\r\n").as_bytes(),
            b"STORED\r\n",
        );
    }
    let servers = format!("--servers={}", server.addr.expect("tcp"));
    let out = Command::new(memcstat)
        .arg(&servers)
        .output()
        .expect("run memcstat");
    assert!(out.status.success(), "{}", show(&out.stderr));
    let text = show(&out.stdout);
    assert!(text.contains("curr_items: 50"), "{text}");
    let out = Command::new(memcdump)
        .arg(&servers)
        .output()
        .expect("run memcdump");
    assert!(out.status.success(), "{}", show(&out.stderr));
    let mut keys: Vec<String> = show(&out.stdout).lines().map(str::to_string).collect();
    keys.sort();
    let mut want: Vec<String> = (0..50).map(|i| format!("tool{i}")).collect();
    want.sort();
    assert_eq!(keys, want);
}

#[test]
fn watch_evictions_reports_items_evicted_for_room() {
    let server = Server::with_args(&["-m", "8", "-t", "1"]);
    let mut w = server.conn();
    w.rt(b"watch evictions\r\n", b"OK\r\n");
    let mut c = server.conn();
    let value = vec![b'v'; 10_000];
    let mut batch = Vec::new();
    for i in 0..3000 {
        batch.extend_from_slice(format!("set ev{i} 0 0 {} noreply\r\n", value.len()).as_bytes());
        batch.extend_from_slice(&value);
        batch.extend_from_slice(b"\r\n");
    }
    c.send(&batch);
    c.rt(b"mn\r\n", b"MN\r\n");
    let evictions = c.stat("evictions");
    assert!(evictions > 100, "{evictions}");
    let text = watched(&mut w, std::time::Duration::from_millis(500));
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("type=eviction"))
        .collect();
    let skipped: u64 = text
        .lines()
        .filter_map(|l| l.strip_prefix("skipped="))
        .map(|n| n.parse::<u64>().expect("number"))
        .sum();
    assert_eq!(
        lines.len() as u64 + skipped,
        evictions,
        "{}",
        &text[..text.len().min(300)]
    );
    let first = lines.first().expect("an eviction line");
    assert!(
        first.contains(" key=ev0 fetch=no ttl=-1 la=") && first.ends_with(" clsid=1 size=10000"),
        "{first}"
    );
}
