//! Reloading the queue config, and `max_queue_age`, through the engine's API.

mod common;

use common::{cfg, drain, set};

use shoal_queue::queue_config;
use shoal_queue::{unix_now, Engine, QueueError};

#[test]
fn reload_applies_limits_to_existing_queues() {
    let t = tempfile::tempdir().expect("tempdir");
    let e = Engine::open(cfg(t.path(), "")).expect("open");
    // reload: a limit added to an existing queue holds from the next set.
    set(&e, "q", "1", 0).expect("set");
    e.reload(
        e.config().default_limits.clone(),
        queue_config::parse("q max_items=1").expect("parses"),
    );
    assert!(matches!(set(&e, "q", "2", 0), Err(QueueError::Full)));
    assert_eq!(drain(&e, "q"), ["1"]);
}

#[test]
fn max_queue_age_deletes_empty_old_queues_only() {
    let t = tempfile::tempdir().expect("tempdir");
    let e =
        Engine::open(cfg(t.path(), "tmp max_queue_age=1\nfull max_queue_age=1\n")).expect("open");
    e.queue_or_create("tmp").expect("queue");
    set(&e, "full", "x", 0).expect("set");
    e.queue_or_create("kept").expect("queue");
    let now = unix_now();
    assert_eq!(e.delete_aged_out(now), 0, "not old enough yet");
    assert_eq!(e.delete_aged_out(now + 2), 1);
    assert!(e.queue("tmp").is_none());
    assert!(e.queue("full").is_some(), "not empty");
    assert!(e.queue("kept").is_some(), "no max_queue_age");
    assert_eq!(e.queue_counts(), (3, 1, 1));
    assert_eq!(drain(&e, "full"), ["x"]);
    assert_eq!(e.delete_aged_out(now + 2), 1);
    assert!(!t.path().join("queues/full").exists(), "its files go too");
}
