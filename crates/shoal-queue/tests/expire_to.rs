//! `expire_to` through the engine's API: expired messages moved, in order, per sweep,
//! across a restart.

mod common;

use common::{cfg, drain, set};

use shoal_queue::{unix_now, Engine, Take};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn expired_messages_move_to_expire_to_in_order_and_per_sweep() {
    let t = tempfile::tempdir().expect("tempdir");
    let e = Engine::open(cfg(t.path(), "delay expire_to=work max_expire_sweep=2\n")).expect("open");
    let now = unix_now();
    for m in ["a", "b", "c"] {
        set(&e, "delay", m, now.saturating_sub(1).max(1)).expect("set");
    }
    // Already expired at enqueue: dropped, as memcached does, not moved.
    assert_eq!(e.queue("delay").expect("q").stats(now).expired, 3);
    for m in ["a", "b", "c"] {
        set(&e, "delay", m, now + 1).expect("set");
    }
    std::thread::sleep(std::time::Duration::from_millis(2100));
    // Not delivered from the source once expired.
    assert!(e
        .queue("delay")
        .expect("q")
        .dequeue(Take::Peek, unix_now())
        .expect("peek")
        .is_none());
    let rt = rt();
    assert_eq!(rt.block_on(e.move_expired()), 2);
    assert_eq!(rt.block_on(e.move_expired()), 1);
    assert_eq!(drain(&e, "work"), ["a", "b", "c"]);
    assert_eq!(e.queue("delay").expect("q").expiring(), 0);
}

#[test]
fn expire_to_moves_survive_restart() {
    let t = tempfile::tempdir().expect("tempdir");
    let now = unix_now();
    {
        let e = Engine::open(cfg(t.path(), "delay expire_to=work\n")).expect("open");
        for m in ["a", "b"] {
            set(&e, "delay", m, now + 1).expect("set");
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(2100));
    {
        let e = Engine::open(cfg(t.path(), "delay expire_to=work\n")).expect("reopen");
        assert_eq!(rt().block_on(e.move_expired()), 2);
    }
    let e = Engine::open(cfg(t.path(), "")).expect("reopen");
    assert_eq!(drain(&e, "work"), ["a", "b"]);
    assert!(drain(&e, "delay").is_empty());
}
