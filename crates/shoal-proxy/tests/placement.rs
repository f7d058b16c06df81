//! shoal-proxy places every key exactly where twemproxy 0.5.0 (nutcracker) does: both run
//! the same configuration over the same three shoald backends, every key is set through
//! each, and each backend is asked directly which keys it holds. The twemproxy vectors
//! (`crates/shoal-ring/tests/data/twemproxy.jsonl`, computed by nutcracker 0.5.0) are checked the same
//! way, with the backends named as the vectors' servers (twemproxy's ketama hashes the
//! server name when one is given).

mod common;

use common::*;

struct Case {
    label: String,
    distribution: String,
    hash: String,
    hash_tag: Option<String>,
    /// Server names to give (the vectors' host:port), or none.
    names: Option<Vec<String>>,
    weights: Vec<u32>,
    expected: Option<Vec<usize>>,
}

fn load_vectors() -> (Vec<String>, Vec<Case>) {
    let dir = vectors_dir();
    let keys_text = std::fs::read_to_string(dir.join("keys.json"))
        .unwrap_or_else(|e| panic!("read {}/keys.json: {e}", dir.display()));
    let keys: serde_json::Value = serde_json::from_str(&keys_text).expect("keys json");
    let keys: Vec<String> = keys["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .map(|k| k.as_str().expect("key").to_string())
        .collect();
    let text = std::fs::read_to_string(dir.join("twemproxy.jsonl")).expect("twemproxy.jsonl");
    let mut cases = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).expect("vector line");
        let servers = v["servers"].as_array().expect("servers");
        cases.push(Case {
            label: format!("vectors {} {}", v["distribution"], v["hash"]),
            distribution: v["distribution"].as_str().expect("dist").to_string(),
            hash: v["hash"].as_str().expect("hash").to_string(),
            hash_tag: None,
            names: Some(
                servers
                    .iter()
                    .map(|s| format!("{}:{}", s["host"].as_str().expect("host"), s["port"]))
                    .collect(),
            ),
            weights: servers
                .iter()
                .map(|s| s["weight"].as_u64().expect("weight") as u32)
                .collect(),
            expected: Some(
                v["indices"]
                    .as_array()
                    .expect("indices")
                    .iter()
                    .map(|i| i.as_u64().expect("index") as usize)
                    .collect(),
            ),
        });
    }
    (keys, cases)
}

fn pool_yaml(name: &str, port: u16, case: &Case, backends: &[Shoald]) -> String {
    let mut s = format!(
        "{name}:\n  listen: 127.0.0.1:{port}\n  distribution: {}\n  hash: {}\n",
        case.distribution, case.hash
    );
    if let Some(t) = &case.hash_tag {
        s.push_str(&format!("  hash_tag: \"{t}\"\n"));
    }
    s.push_str("  servers:\n");
    for (i, b) in backends.iter().enumerate() {
        s.push_str(&format!("   - 127.0.0.1:{}:{}", b.port(), case.weights[i]));
        if let Some(n) = &case.names {
            s.push_str(&format!(" {}", n[i]));
        }
        s.push('\n');
    }
    s
}

#[test]
fn placement_matches_nutcracker_and_twemproxy_vectors() {
    let (keys, mut cases) = load_vectors();
    assert_eq!(cases.len(), 24, "twemproxy.jsonl has 24 distribution lines");
    // The same comparisons with servers identified by their real host:port (no names),
    // unequal weights, and a hash tag.
    for (dist, hash, tag) in [
        ("ketama", "md5", None),
        ("ketama", "fnv1a_64", None),
        ("ketama", "murmur", Some("{}")),
        ("modula", "fnv1a_64", None),
        ("modula", "crc32a", Some("::")),
    ] {
        cases.push(Case {
            label: format!("unnamed {dist} {hash} tag={tag:?}"),
            distribution: dist.into(),
            hash: hash.into(),
            hash_tag: tag.map(str::to_string),
            names: None,
            weights: vec![3, 1, 2],
            expected: None,
        });
    }
    let backends = three_backends();
    let mut ours = String::new();
    for (i, c) in cases.iter().enumerate() {
        ours.push_str(&pool_yaml(&format!("p{i}"), 0, c, &backends));
    }
    // nutcracker first: its ports are fixed, shoal-proxy's are picked by the OS after.
    // A port can be taken between choosing it and nutcracker binding it (there are many
    // here): then the ports are chosen again, up to three times.
    let mut attempt = 0;
    let (_nut, ports) = loop {
        let ports = free_ports(cases.len());
        let mut theirs = String::new();
        for (i, c) in cases.iter().enumerate() {
            theirs.push_str(&pool_yaml(&format!("p{i}"), ports[i], c, &backends));
        }
        match Nutcracker::try_start(&theirs, &ports) {
            None => return,
            Some(Ok(nut)) => break (nut, ports),
            Some(Err(e)) if attempt < 2 => {
                eprintln!("retrying with other ports: {e}");
                attempt += 1;
            }
            Some(Err(e)) => panic!("{e}"),
        }
    };
    let proxy = Proxy::start(&ours, cases.len());
    // Hash-tag cases use keys with tags in them.
    let tagged: Vec<String> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| format!("t{{{}}}:{}:x", i % 37, &k[..k.len().min(200)]))
        .collect();
    let tagged2: Vec<String> = (0..300).map(|i| format!("u:{}:v{i}", i % 41)).collect();
    let mut mismatches = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let keys = match c.hash_tag.as_deref() {
            Some("{}") => &tagged,
            Some(_) => &tagged2,
            None => &keys,
        };
        flush(&backends);
        set_all(proxy.pools[i], keys);
        let ours = holders(&backends, keys);
        flush(&backends);
        set_all(
            format!("127.0.0.1:{}", ports[i]).parse().expect("addr"),
            keys,
        );
        let theirs = holders(&backends, keys);
        if std::env::var("DEBUG_PLACEMENT").is_ok() {
            let count = |h: &Vec<Vec<usize>>| {
                let mut c = [0usize; 4];
                for x in h {
                    c[x.first().copied().unwrap_or(3)] += 1;
                }
                c
            };
            eprintln!(
                "{}: ours {:?} theirs {:?}",
                c.label,
                count(&ours),
                count(&theirs)
            );
        }
        for (k, key) in keys.iter().enumerate() {
            assert_eq!(ours[k].len(), 1, "{}: key {key} on {:?}", c.label, ours[k]);
            if ours[k] != theirs[k] {
                mismatches.push(format!(
                    "{}: {key}: shoal-proxy {:?}, nutcracker {:?}",
                    c.label, ours[k], theirs[k]
                ));
            }
            if let Some(exp) = &c.expected {
                if ours[k] != [exp[k]] {
                    mismatches.push(format!(
                        "{}: {key}: shoal-proxy {:?}, vectors {}",
                        c.label, ours[k], exp[k]
                    ));
                }
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} mismatches, first: {:#?}",
        mismatches.len(),
        &mismatches[..mismatches.len().min(10)]
    );
}
