//! Behaviour beyond the vectors: bad input, ejection and re-adding, shared rings.

use std::sync::Arc;

use shoal_ring::{
    parse_server_list, Distribution, HashAlgorithm, Ring, RingConfig, RingError, Server, SharedRing,
};

fn servers(n: usize) -> Vec<Server> {
    (0..n)
        .map(|i| Server::new(format!("10.0.{}.{}", i / 250, i % 250 + 1), 11211))
        .collect()
}

fn all_configs() -> Vec<RingConfig> {
    Distribution::all().map(RingConfig::new).collect()
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    for config in all_configs() {
        let d = config.distribution;
        assert_eq!(
            Ring::new(config, vec![]).err(),
            Some(RingError::EmptyServerList),
            "{d}"
        );
        let zero = vec![
            Server::new("10.0.0.1", 11211).with_weight(0),
            Server::new("10.0.0.2", 11211).with_weight(0),
        ];
        assert_eq!(
            Ring::new(config, zero).err(),
            Some(RingError::ZeroTotalWeight),
            "{d}"
        );
        let dup = vec![
            Server::new("10.0.0.1", 11211),
            Server::new("10.0.0.1", 11211),
        ];
        assert!(
            matches!(Ring::new(config, dup), Err(RingError::DuplicateServer(_))),
            "{d}"
        );
        let ring = Ring::new(config, servers(3)).unwrap();
        assert_eq!(ring.locate(b""), Err(RingError::EmptyKey), "{d}");
        // Arbitrary bytes, including invalid UTF-8, never panic.
        for key in [
            &b"\xff\xfe\x80"[..],
            b"\x00",
            "é😀".as_bytes(),
            &[0x80; 300][..],
        ] {
            assert!(ring.locate(key).is_ok(), "{d}");
        }
        assert!(matches!(
            ring.with_ejected(7),
            Err(RingError::BadServerIndex { index: 7, len: 3 })
        ));
    }
}

#[test]
fn huge_weights_are_refused_not_allocated() {
    for d in [
        Distribution::WeightedModula,
        Distribution::Jump,
        Distribution::XmemcachedKetama,
    ] {
        let s = vec![Server::new("10.0.0.1", 11211).with_weight(u32::MAX)];
        assert!(
            matches!(
                Ring::new(RingConfig::new(d), s),
                Err(RingError::WeightsTooLarge { .. })
            ),
            "{d}"
        );
    }
    // Normalizing distributions take any weight.
    let s = vec![
        Server::new("10.0.0.1", 11211).with_weight(u32::MAX),
        Server::new("10.0.0.2", 11211).with_weight(1),
    ];
    for d in [
        Distribution::TwemproxyKetama,
        Distribution::LibmemcachedKetama { weighted: true },
        Distribution::Maglev,
    ] {
        let ring = Ring::new(RingConfig::new(d), s.clone()).unwrap();
        assert!(ring.locate(b"k").is_ok(), "{d}");
    }
}

#[test]
fn java_distributions_need_an_address_for_host_names() {
    let s = vec![Server::new("cache-a", 11211), Server::new("cache-b", 11211)];
    let r = Ring::new(RingConfig::new(Distribution::XmemcachedKetama), s.clone());
    assert!(matches!(r, Err(RingError::AddressStringRequired(_))));
    let with = s
        .into_iter()
        .map(|x| {
            let a = format!("{}/10.1.1.1:{}", x.host, x.port);
            x.with_address(a)
        })
        .collect();
    assert!(Ring::new(RingConfig::new(Distribution::XmemcachedKetama), with).is_ok());
}

#[test]
fn ejecting_everything_gives_no_live_servers() {
    let ring = Ring::new(RingConfig::new(Distribution::TwemproxyKetama), servers(2)).unwrap();
    let ring = ring.with_ejected(0).unwrap().with_ejected(1).unwrap();
    assert_eq!(ring.locate(b"k"), Err(RingError::NoLiveServers));
    let ring = ring.with_restored(1).unwrap();
    assert_eq!(ring.locate(b"k"), Ok(1));
}

#[test]
fn ejection_moves_only_the_ejected_servers_keys_on_consistent_rings() {
    for d in [
        Distribution::LibmemcachedKetama { weighted: true },
        Distribution::TwemproxyKetama,
        Distribution::XmemcachedElection { weighted: true },
        Distribution::PymemcacheRendezvous,
    ] {
        let ring = Ring::new(RingConfig::new(d), servers(10)).unwrap();
        let ejected = ring.with_ejected(3).unwrap();
        for i in 0..2000 {
            let key = format!("key:{i}");
            let before = ring.locate(key.as_bytes()).unwrap();
            let after = ejected.locate(key.as_bytes()).unwrap();
            assert_ne!(after, 3, "{d}");
            if before != 3 {
                assert_eq!(before, after, "{d}: {key} moved though its server stayed");
            }
        }
        // Restoring gives back the original placement exactly.
        let back = ejected.with_restored(3).unwrap();
        for i in 0..500 {
            let key = format!("key:{i}");
            assert_eq!(
                ring.locate(key.as_bytes()),
                back.locate(key.as_bytes()),
                "{d}"
            );
        }
    }
}

#[test]
fn adding_a_server_moves_about_one_nth() {
    let config = RingConfig::new(Distribution::LibmemcachedKetama { weighted: true });
    let ring = Ring::new(config, servers(9)).unwrap();
    let grown = ring.with_added(Server::new("10.9.9.9", 11211)).unwrap();
    let moved = (0..10_000)
        .filter(|i| {
            let k = format!("key:{i}");
            ring.locate(k.as_bytes()) != grown.locate(k.as_bytes())
        })
        .count();
    // Ideal is 1/10; ketama with 160 points lands within a few percent of it.
    assert!((500..1600).contains(&moved), "moved {moved}");
}

#[test]
fn shared_ring_swaps_under_concurrent_readers() {
    let shared = Arc::new(
        SharedRing::new(RingConfig::new(Distribution::TwemproxyKetama), servers(4)).unwrap(),
    );
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || {
                for i in 0..20_000 {
                    let k = format!("{t}:{i}");
                    let idx = shared.locate(k.as_bytes()).unwrap();
                    assert!(idx < 5);
                }
            })
        })
        .collect();
    for _ in 0..20 {
        shared.eject(1).unwrap();
        shared.restore(1).unwrap();
    }
    shared.add(Server::new("10.9.9.9", 11211)).unwrap();
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(shared.load().servers().len(), 5);
    shared.remove(4).unwrap();
    assert_eq!(shared.load().servers().len(), 4);
}

#[test]
fn hash_tag_sends_tagged_keys_together() {
    let config = RingConfig::new(Distribution::TwemproxyKetama)
        .with_hash(HashAlgorithm::Fnv1a_64)
        .with_hash_tag("{}")
        .unwrap();
    let ring = Ring::new(config, servers(8)).unwrap();
    let a = ring.locate(b"user:{42}:name").unwrap();
    for k in ["user:{42}:email", "{42}", "x{42}y"] {
        assert_eq!(ring.locate(k.as_bytes()).unwrap(), a);
    }
    assert!(RingConfig::new(Distribution::Jump)
        .with_hash_tag("{")
        .is_err());
}

#[test]
fn server_lists_parse() {
    let list = parse_server_list("10.0.0.1:11211:1, 10.0.0.2:11212:2").unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[1].weight, 2);
    assert!(parse_server_list("10.0.0.1").is_err());
}

/// libmemcached's weighted ketama and twemproxy's ketama build the same continuum for the
/// same names, so C clients of either kind agree (md5 key hash on both sides).
#[test]
fn libmemcached_weighted_and_twemproxy_agree() {
    for n in [3, 10, 100] {
        let mut list = servers(n);
        list[0].port = 22122; // a non-default port is named host:port by both
        let a = Ring::new(
            RingConfig::new(Distribution::LibmemcachedKetama { weighted: true })
                .with_hash(HashAlgorithm::Md5),
            list.clone(),
        )
        .unwrap();
        let b = Ring::new(
            RingConfig::new(Distribution::TwemproxyKetama).with_hash(HashAlgorithm::Md5),
            list,
        )
        .unwrap();
        for i in 0..5000 {
            let k = format!("key:{i}");
            assert_eq!(a.locate(k.as_bytes()), b.locate(k.as_bytes()), "n={n} {k}");
        }
    }
}

/// XMemcached's libmemcached locator equals libmemcached's unweighted ketama with
/// one_at_a_time for ASCII keys when the host names agree.
#[test]
fn xmemcached_libmemcached_locator_matches_libmemcached() {
    let list = servers(10);
    let a = Ring::new(
        RingConfig::new(Distribution::LibmemcachedKetama { weighted: false })
            .with_hash(HashAlgorithm::OneAtATime),
        list.clone(),
    )
    .unwrap();
    let b = Ring::new(RingConfig::new(Distribution::XmemcachedLibmemcached), list).unwrap();
    for i in 0..5000 {
        let k = format!("key:{i}");
        assert_eq!(a.locate(k.as_bytes()), b.locate(k.as_bytes()), "{k}");
    }
}

/// Without explicit address strings, spymemcached's ring uses what JDK 17 prints for an
/// IP-literal address ("/ip:port"), as recorded in tests/data/spymemcached.
#[test]
fn spymemcached_default_address_matches_explicit_jdk17_form() {
    let plain = vec![
        Server::new("10.0.1.1", 11211),
        Server::new("10.0.1.3", 11212),
    ];
    let explicit: Vec<Server> = plain
        .iter()
        .map(|s| s.clone().with_address(format!("/{}:{}", s.host, s.port)))
        .collect();
    let d = RingConfig::new(Distribution::SpymemcachedKetama { weighted: false });
    let a = Ring::new(d, plain).unwrap();
    let b = Ring::new(d, explicit).unwrap();
    for i in 0..2000 {
        let k = format!("key:{i}");
        assert_eq!(a.locate(k.as_bytes()), b.locate(k.as_bytes()));
    }
}
