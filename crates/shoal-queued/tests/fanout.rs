//! Kestrel's fanout queues against the real binary: `parent+child` is created by first
//! use, receives a copy of every later set to `parent`, survives a restart, and leaves the
//! fanout when deleted; `fanout_only` parents store nothing; `stats` names the children.

mod common;

use common::Server;

fn drain(c: &mut common::Client, q: &str) -> Vec<String> {
    let mut v = Vec::new();
    while let Some(m) = c.get_str(q) {
        v.push(m);
    }
    v
}

#[test]
fn orders_and_audit() {
    let d = tempfile::tempdir().expect("tempdir");
    let s = Server::start(d.path(), &[]);
    let mut c = s.client();
    assert_eq!(c.get_str("orders+audit"), None, "created by this first use");
    for m in ["1", "2", "3"] {
        assert_eq!(c.set("orders", m.as_bytes()), "STORED");
    }
    assert_eq!(
        c.stat("queue_orders_children").as_deref(),
        Some("orders+audit")
    );
    assert_eq!(drain(&mut c, "orders"), ["1", "2", "3"]);
    assert_eq!(drain(&mut c, "orders+audit"), ["1", "2", "3"]);
    // Kestrel's dump_stats names them too.
    let dump = c.lines_until_end("dump_stats");
    assert!(
        dump.iter().any(|l| l == "  children=orders+audit"),
        "{dump:?}"
    );
    drop(c);
    // A restart keeps the child (and the relation, rebuilt from the directories).
    assert!(s.signal_and_wait(libc::SIGTERM).success());
    let s = Server::start(d.path(), &[]);
    let mut c = s.client();
    c.set("orders", b"4");
    assert_eq!(drain(&mut c, "orders+audit"), ["4"]);
    // Deleting the child stops the copies.
    assert_eq!(c.cmd("delete orders+audit"), "DELETED");
    assert_eq!(c.stat("queue_orders_children"), None);
    c.set("orders", b"5");
    assert_eq!(drain(&mut c, "orders"), ["4", "5"]);
    assert_eq!(c.get_str("orders+audit"), None);
}

#[test]
fn fanout_only_parent_and_children_inherit_its_config() {
    let d = tempfile::tempdir().expect("tempdir");
    let conf = d.path().join("queues.conf");
    std::fs::write(&conf, "feed fanout_only=true max_item_size=4\n").expect("write");
    let data = d.path().join("data");
    let s = Server::start(&data, &["--queue-config", conf.to_str().expect("utf8")]);
    let mut c = s.client();
    // Through Kestrel's blocking read: a child is created by any read.
    assert_eq!(c.get_str("feed+a/t=1"), None);
    assert_eq!(c.get_str("feed+b"), None);
    assert_eq!(c.set("feed", b"x"), "STORED");
    assert_eq!(
        c.set("feed", b"too long"),
        "SERVER_ERROR object too large for cache"
    );
    assert_eq!(
        c.get_str("feed"),
        None,
        "a fanout_only parent stores nothing"
    );
    assert_eq!(drain(&mut c, "feed+a"), ["x"]);
    assert_eq!(drain(&mut c, "feed+b"), ["x"]);
    assert_eq!(
        c.stat("queue_feed_children").as_deref(),
        Some("feed+a,feed+b")
    );
}

/// Kestrel's aliases: a set to the alias is written to each destination; a reload
/// changes them.
#[test]
fn aliases_write_to_each_destination() {
    let d = tempfile::tempdir().expect("tempdir");
    let conf = d.path().join("queues.conf");
    std::fs::write(&conf, "all destination_queues=a,b\nb max_items=1\n").expect("write");
    let s = Server::start(
        &d.path().join("data"),
        &["--queue-config", conf.to_str().expect("utf8")],
    );
    let mut c = s.client();
    assert_eq!(c.set("all", b"1"), "STORED");
    assert_eq!(
        c.set("all", b"2"),
        "NOT_STORED",
        "b is full: not every destination took it"
    );
    assert_eq!(drain(&mut c, "a"), ["1", "2"]);
    assert_eq!(drain(&mut c, "b"), ["1"]);
    assert_eq!(c.get_str("all"), None, "an alias holds nothing");
    std::fs::write(&conf, "all destination_queues=c\n").expect("write");
    assert_eq!(c.cmd("reload"), "Reloaded config.");
    assert_eq!(c.set("all", b"3"), "STORED");
    assert_eq!(drain(&mut c, "c"), ["3"]);
    assert_eq!(c.get_str("a"), None);
}
