//! Fanout queues through the engine's API: copies to children, `fanout_only`,
//! inheritance, children surviving a restart.

mod common;

use common::{cfg, drain, set};

use shoal_queue::{Engine, QueueError};

#[test]
fn fanout_children_copy_survive_restart_and_leave_when_deleted() {
    let t = tempfile::tempdir().expect("tempdir");
    {
        let e = Engine::open(cfg(t.path(), "")).expect("open");
        e.queue_or_create("orders+audit").expect("child");
        assert_eq!(e.children("orders"), vec!["orders+audit".to_string()]);
    }
    // The child exists after a restart though nothing was written to it.
    let e = Engine::open(cfg(t.path(), "")).expect("reopen");
    assert_eq!(e.children("orders"), vec!["orders+audit".to_string()]);
    e.queue_or_create("orders+mail").expect("child");
    for m in ["a", "b", "c"] {
        set(&e, "orders", m, 0).expect("set");
    }
    assert_eq!(drain(&e, "orders"), ["a", "b", "c"]);
    assert_eq!(drain(&e, "orders+audit"), ["a", "b", "c"]);
    assert_eq!(drain(&e, "orders+mail"), ["a", "b", "c"]);
    assert!(e.delete("orders+audit"));
    set(&e, "orders", "d", 0).expect("set");
    assert_eq!(e.children("orders"), vec!["orders+mail".to_string()]);
    assert!(e.queue("orders+audit").is_none());
    assert_eq!(drain(&e, "orders+mail"), ["d"]);
}

#[test]
fn fanout_only_parent_stores_nothing_and_children_inherit() {
    let t = tempfile::tempdir().expect("tempdir");
    let e = Engine::open(cfg(
        t.path(),
        "feed fanout_only=true max_items=2\nfeed+b max_items=3\n",
    ))
    .expect("open");
    e.queue_or_create("feed+a").expect("child");
    e.queue_or_create("feed+b").expect("child");
    assert_eq!(e.limits_for("feed+a").max_items, 2, "the parent's");
    assert_eq!(e.limits_for("feed+b").max_items, 3, "its own");
    for m in ["1", "2", "3"] {
        set(&e, "feed", m, 0).expect("set");
    }
    assert!(drain(&e, "feed").is_empty());
    assert_eq!(
        drain(&e, "feed+a"),
        ["1", "2"],
        "full at 2: the third refused"
    );
    assert_eq!(drain(&e, "feed+b"), ["1", "2", "3"]);

    // When every child refuses, the message is stored nowhere: not STORED.
    let e2t = tempfile::tempdir().expect("tempdir");
    let e2 = Engine::open(cfg(
        e2t.path(),
        "only fanout_only=true max_items=1\nsolo fanout_only=true\n",
    ))
    .expect("open");
    e2.queue_or_create("only+a").expect("child");
    set(&e2, "only", "kept", 0).expect("the child takes it");
    assert!(
        matches!(set(&e2, "only", "nowhere", 0), Err(QueueError::Full)),
        "the only child is full"
    );
    assert_eq!(drain(&e2, "only+a"), ["kept"]);
    // With no child at all nobody refused: accepted and kept by no one, as in Kestrel.
    set(&e2, "solo", "x", 0).expect("no child to refuse");
    assert_eq!(drain(&e2, "solo"), Vec::<String>::new());
}

#[test]
fn a_full_parent_still_feeds_its_children() {
    let t = tempfile::tempdir().expect("tempdir");
    let e = Engine::open(cfg(t.path(), "log max_items=1\nlog+tail max_items=0\n")).expect("open");
    e.queue_or_create("log+tail").expect("child");
    set(&e, "log", "1", 0).expect("set");
    assert!(matches!(set(&e, "log", "2", 0), Err(QueueError::Full)));
    assert_eq!(drain(&e, "log"), ["1"]);
    assert_eq!(drain(&e, "log+tail"), ["1", "2"], "as in Kestrel");
}
