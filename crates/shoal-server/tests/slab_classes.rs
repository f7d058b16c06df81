//! `stats slabs` and `stats items` per memcached slab class: the same items and requests
//! sent to shoald and to memcached 1.6.45 (the reference build, see
//! `shoal_test_support::memcached::reference`) land in the same classes, with the same
//! chunk sizes, live counts, `mem_requested` and per-class request counters. Skipped
//! (with a notice) where the reference build is missing.

mod common;

use common::{Conn, Server};
use shoal_test_support::memcached::{reference, Memcached};
use std::collections::{BTreeMap, HashMap};

/// The same requests to either server: items of many sizes (every class from the first
/// to ones near `slab_chunk_max`, none chunked), with and without client flags, then
/// hits, misses, a cas, incr/decr, touch, append and deletes.
fn workload(c: &mut Conn, cas: bool) {
    let sizes = [
        0usize, 1, 10, 30, 47, 48, 60, 100, 200, 333, 500, 900, 1_500, 4_000, 10_000, 30_000,
        66_560, 100_000, 250_000, 400_000,
    ];
    for (i, &n) in sizes.iter().enumerate() {
        let value = vec![b'v'; n];
        for (k, flags) in [(format!("k{i}"), 0), (format!("flagged-key-{i}"), 7)] {
            let mut req = format!("set {k} {flags} 0 {n}\r\n").into_bytes();
            req.extend_from_slice(&value);
            req.extend_from_slice(b"\r\n");
            c.rt(&req, b"STORED\r\n");
        }
    }
    for i in [0, 3, 7, 12] {
        assert!(c.get(&format!("k{i}")).is_some());
    }
    assert!(c.get("missing").is_none());
    if cas {
        let unique = common::gets_cas(c, "k2");
        c.rt(
            format!("cas k2 0 0 2 {unique}\r\nxy\r\n").as_bytes(),
            b"STORED\r\n",
        );
        c.rt(
            format!("cas k2 0 0 2 {unique}\r\nzz\r\n").as_bytes(),
            b"EXISTS\r\n",
        );
    }
    c.set("counter", b"99");
    c.rt(b"incr counter 1\r\n", b"100\r\n");
    c.rt(b"decr counter 5\r\n", b"95\r\n");
    c.rt(b"touch k5 1000\r\n", b"TOUCHED\r\n");
    c.rt(b"append k6 0 0 3\r\nabc\r\n", b"STORED\r\n");
    c.rt(b"delete k8\r\n", b"DELETED\r\n");
    c.rt(b"delete flagged-key-13\r\n", b"DELETED\r\n");
}

/// `N:field` (or `items:N:field`) stats, by class and field.
fn by_class(
    stats: &HashMap<String, String>,
    prefix: &str,
) -> BTreeMap<u32, HashMap<String, String>> {
    let mut out: BTreeMap<u32, HashMap<String, String>> = BTreeMap::new();
    for (k, v) in stats {
        let Some(rest) = k.strip_prefix(prefix) else {
            continue;
        };
        let Some((class, field)) = rest.split_once(':') else {
            continue;
        };
        if let Ok(class) = class.parse() {
            out.entry(class)
                .or_default()
                .insert(field.to_string(), v.clone());
        }
    }
    out
}

/// The figures both servers must agree on, per class.
fn classes(c: &mut Conn) -> BTreeMap<u32, Vec<(String, String)>> {
    let slabs = by_class(&c.stats("slabs"), "");
    let items = by_class(&c.stats("items"), "items:");
    let mut out = BTreeMap::new();
    for (class, s) in &slabs {
        let mut row = Vec::new();
        for f in [
            "chunk_size",
            "chunks_per_page",
            "used_chunks",
            "get_hits",
            "cmd_set",
            "delete_hits",
            "incr_hits",
            "decr_hits",
            "cas_hits",
            "cas_badval",
            "touch_hits",
        ] {
            row.push((f.to_string(), s.get(f).cloned().unwrap_or_default()));
        }
        if let Some(i) = items.get(class) {
            for f in ["number", "mem_requested"] {
                row.push((format!("items:{f}"), i.get(f).cloned().unwrap_or_default()));
            }
            // memcached splits read hits between its LRUs (shoald has COLD only), and
            // lists them only while its LRU maintainer runs: their sum is what must agree.
            let lru = [
                "hits_to_hot",
                "hits_to_warm",
                "hits_to_cold",
                "hits_to_temp",
            ];
            let hits: Option<u64> = lru
                .iter()
                .map(|f| i.get(*f).and_then(|v| v.parse::<u64>().ok()))
                .sum();
            row.push(("items:hits_to_*".into(), format!("{hits:?}")));
        }
        out.insert(*class, row);
    }
    // A class with items is always one `stats slabs` lists.
    for class in items.keys() {
        assert!(
            slabs.contains_key(class),
            "items:{class} without {class}: in stats slabs"
        );
    }
    out
}

fn compare(args: &[&str]) {
    let Some(bin) = reference() else {
        return;
    };
    let mc = Memcached::start_bin(&bin, args);
    let server = Server::with_args(args);
    let mut theirs = Conn::tcp(mc.addr());
    let mut ours = server.conn();
    let cas = !args.contains(&"-C");
    workload(&mut theirs, cas);
    workload(&mut ours, cas);
    let (t, o) = (classes(&mut theirs), classes(&mut ours));
    assert!(t.len() >= 10, "the workload spans many classes: {t:?}");
    assert_eq!(o, t, "shoald vs memcached, {args:?}");
    // After `stats reset`, the request counters start again in every class.
    theirs.rt(b"stats reset\r\n", b"RESET\r\n");
    ours.rt(b"stats reset\r\n", b"RESET\r\n");
    assert!(ours.get("k0").is_some() && theirs.get("k0").is_some());
    assert_eq!(
        classes(&mut ours),
        classes(&mut theirs),
        "after reset, {args:?}"
    );
}

#[test]
fn default_classes_match_memcached() {
    compare(&["-m", "64"]);
}

#[test]
fn classes_from_n_f_and_cas_off_match_memcached() {
    compare(&["-m", "64", "-n", "64", "-f", "1.5", "-C"]);
}

#[test]
fn no_modern_and_slab_sizes_match_memcached() {
    compare(&["-m", "64", "-o", "no_modern"]);
    compare(&[
        "-m",
        "64",
        "-o",
        "slab_sizes=100-200-400-800-1600-3200-6400-12800-25600-51200-102400-204800-409600",
    ]);
}

/// memcached-tool's `display` shows one row per class with items, with its chunk size
/// and count.
#[test]
fn memcached_tool_display_shows_each_class() {
    let Some(tool) = shoal_test_support::peer("memcached-tool", "memcached") else {
        return;
    };
    let server = Server::start();
    let mut c = server.conn();
    for (i, n) in [10usize, 1_000, 66_560].iter().enumerate() {
        for j in 0..5 {
            let mut req = format!("set k{i}-{j} 0 0 {n}\r\n").into_bytes();
            req.extend(std::iter::repeat_n(b'x', *n));
            req.extend_from_slice(b"\r\n");
            c.rt(&req, b"STORED\r\n");
        }
    }
    let out = std::process::Command::new("perl")
        .arg(tool)
        .args([&server.addr.expect("tcp").to_string(), "display"])
        .output()
        .expect("run memcached-tool");
    assert!(out.status.success(), "{}", common::show(&out.stderr));
    let text = common::show(&out.stdout);
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    // `#  Item_Size  Max_age  Pages  Count  Full?  Evicted  Evict_Time  OOM`: classes 1
    // (10-byte values, 96 B chunks), 12 (1000 bytes: 1063 B footprint, 1184 B chunks)
    // and 31 (66560 bytes, 80.9K chunks), five items each.
    let shown: Vec<(&str, &str, &str)> = rows.iter().map(|r| (r[0], r[1], r[4])).collect();
    assert_eq!(
        shown,
        [("1", "96B", "5"), ("12", "1.2K", "5"), ("31", "80.9K", "5")],
        "{text}"
    );
}
