//! Reproduces every line of every vector file computed by the real client libraries.
//!
//! The directory comes from `SHOAL_VECTORS_DIR`, defaulting to the vendored copy of the
//! shared vectors in this crate's `tests/data` (see its README for provenance). A
//! missing directory, an unreadable line, or a line this test does not know how to
//! check is a failure, never a skip: compatibility that is not checked is not claimed.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use shoal_ring::{Distribution, HashAlgorithm, Ring, RingConfig, Server};

/// `SHOAL_VECTORS_DIR` when set (another vector set), else the vendored copy in
/// `tests/data`.
fn vectors_dir() -> PathBuf {
    match std::env::var_os("SHOAL_VECTORS_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data"),
    }
}

/// The key list as bytes. Keys are UTF-8 text unless `keys.json` says
/// `"encoding": "latin1"`, where each code point stands for one byte (raw, possibly
/// invalid-UTF-8 keys).
fn keys(dir: &Path) -> Vec<Vec<u8>> {
    let text = fs::read_to_string(dir.join("keys.json"))
        .unwrap_or_else(|e| panic!("cannot read {}/keys.json: {e}", dir.display()));
    let v: Value = serde_json::from_str(&text).expect("keys.json is JSON");
    let latin1 = v.get("encoding").and_then(Value::as_str) == Some("latin1");
    let arr = v
        .get("keys")
        .and_then(Value::as_array)
        .or_else(|| v.as_array())
        .expect("keys.json holds a key list");
    arr.iter()
        .map(|k| {
            let k = k.as_str().expect("keys are strings");
            if latin1 {
                k.chars()
                    .map(|c| u8::try_from(u32::from(c)).expect("latin1 key byte"))
                    .collect()
            } else {
                k.as_bytes().to_vec()
            }
        })
        .collect()
}

/// XMemcached `HashAlgorithm` names, long (`FNV1A_32_HASH`) or as locator suffixes
/// (`fnv1a_32`).
fn java_hash(name: &str) -> Option<HashAlgorithm> {
    let n = name.to_ascii_lowercase();
    let n = n.strip_suffix("_hash").unwrap_or(&n);
    Some(match n {
        "native" => HashAlgorithm::JavaNative,
        "crc32" => HashAlgorithm::JavaCrc32,
        "fnv1_64" => HashAlgorithm::JavaFnv1_64,
        "fnv1a_64" => HashAlgorithm::JavaFnv1a_64,
        "fnv1_32" => HashAlgorithm::JavaFnv1_32,
        "fnv1a_32" => HashAlgorithm::JavaFnv1a_32,
        "ketama" => HashAlgorithm::JavaKetama,
        "mysql" => HashAlgorithm::JavaMysql,
        "elf" => HashAlgorithm::JavaElf,
        "rs" => HashAlgorithm::JavaRs,
        "lua" => HashAlgorithm::JavaLua,
        "election" => HashAlgorithm::JavaElection,
        "one_at_a_time" => HashAlgorithm::JavaOneAtATime,
        _ => return None,
    })
}

fn source(line: &Value) -> &str {
    line.get("source")
        .and_then(Value::as_str)
        .unwrap_or("libmemcached")
}

fn str_field<'a>(line: &'a Value, f: &str) -> Result<&'a str, String> {
    line.get(f)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("missing string field {f:?}"))
}

fn hash_for_line(line: &Value) -> Result<HashAlgorithm, String> {
    let alg = str_field(line, "algorithm")?;
    let src = source(line);
    if src.starts_with("xmemcached") {
        return java_hash(alg).ok_or_else(|| format!("unknown XMemcached hash {alg}"));
    }
    if src.starts_with("pymemcache") && alg.starts_with("murmur3_32") {
        return Ok(HashAlgorithm::PyMurmur3_32);
    }
    alg.parse().map_err(|e| format!("{e}"))
}

fn servers(line: &Value) -> Result<Vec<Server>, String> {
    let arr = line
        .get("servers")
        .and_then(Value::as_array)
        .ok_or("missing servers")?;
    arr.iter()
        .map(|s| {
            let host = s.get("host").and_then(Value::as_str).ok_or("server host")?;
            let port = s
                .get("port")
                .and_then(Value::as_u64)
                .and_then(|p| u16::try_from(p).ok())
                .ok_or("server port")?;
            let weight = s
                .get("weight")
                .and_then(Value::as_u64)
                .and_then(|w| u32::try_from(w).ok())
                .unwrap_or(1);
            let mut srv = Server::new(host, port).with_weight(weight);
            if let Some(a) = s.get("address_string").and_then(Value::as_str) {
                srv = srv.with_address(a);
            }
            Ok(srv)
        })
        .collect::<Result<_, &str>>()
        .map_err(str::to_string)
}

fn config_for_line(line: &Value) -> Result<RingConfig, String> {
    let src = source(line);
    if src.starts_with("twemproxy") {
        let dist = match str_field(line, "distribution")? {
            "ketama" => Distribution::TwemproxyKetama,
            "modula" => Distribution::WeightedModula,
            d => return Err(format!("unknown twemproxy distribution {d}")),
        };
        let hash: HashAlgorithm = str_field(line, "hash")?
            .parse()
            .map_err(|e| format!("{e}"))?;
        return Ok(RingConfig::new(dist).with_hash(hash));
    }
    if src.starts_with("xmemcached") {
        let locator = str_field(line, "locator")?;
        // A real client's sessions are MemcachedTCPSessions, which take XMemcached's
        // weighted branches; the shared vectors were computed through the other branch.
        let tcp = line.get("sessions").and_then(Value::as_str) == Some("tcp");
        let (dist, hash) = match locator {
            "election" => (
                Distribution::XmemcachedElection { weighted: tcp },
                HashAlgorithm::JavaElection,
            ),
            "libmemcached" => (
                Distribution::XmemcachedLibmemcached,
                HashAlgorithm::JavaOneAtATime,
            ),
            "ketama" => (Distribution::XmemcachedKetama, HashAlgorithm::JavaKetama),
            l => {
                if let Some(h) = l.strip_prefix("array_").and_then(java_hash) {
                    let d = if tcp {
                        Distribution::WeightedModula
                    } else {
                        Distribution::Modula
                    };
                    (d, h)
                } else if let Some(h) = l.strip_prefix("ketama_").and_then(java_hash) {
                    (Distribution::XmemcachedKetama, h)
                } else {
                    return Err(format!("unknown XMemcached locator {l}"));
                }
            }
        };
        return Ok(RingConfig::new(dist).with_hash(hash));
    }
    if src.starts_with("spymemcached") {
        let (weighted, hash) = match str_field(line, "locator")? {
            "weighted" => (true, HashAlgorithm::JavaKetama),
            l => (
                false,
                java_hash(l).ok_or_else(|| format!("unknown spymemcached locator {l}"))?,
            ),
        };
        return Ok(RingConfig::new(Distribution::SpymemcachedKetama { weighted }).with_hash(hash));
    }
    if src.starts_with("pymemcache") {
        return match str_field(line, "locator")? {
            "rendezvous" => Ok(RingConfig::new(Distribution::PymemcacheRendezvous)
                .with_hash(HashAlgorithm::PyMurmur3_32)),
            l => Err(format!("unknown pymemcache locator {l}")),
        };
    }
    if src.starts_with("python-memcached") {
        return match str_field(line, "locator")? {
            "crc32_buckets" => Ok(RingConfig::new(Distribution::WeightedModula)
                .with_hash(HashAlgorithm::CmemcacheHash)),
            l => Err(format!("unknown python-memcached locator {l}")),
        };
    }
    if src.starts_with("libmemcached") {
        // The line's `weighted` is what the generator asked for; libmemcached decides
        // the continuum mode from the server weights (see Distribution::libmemcached_ketama).
        let servers = servers(line)?;
        let dist = match str_field(line, "distribution")? {
            "ketama" => Distribution::libmemcached_ketama(&servers, false),
            "ketama_spy" => Distribution::libmemcached_ketama(&servers, true),
            "modula" => Distribution::Modula,
            d => return Err(format!("unknown libmemcached distribution {d}")),
        };
        let hash: HashAlgorithm = str_field(line, "key_hash")?
            .parse()
            .map_err(|e| format!("{e}"))?;
        return Ok(RingConfig::new(dist).with_hash(hash));
    }
    Err(format!("unknown source {src}"))
}

fn u64s(line: &Value, field: &str) -> Result<Vec<u64>, String> {
    line.get(field)
        .and_then(Value::as_array)
        .ok_or_else(|| format!("missing {field}"))?
        .iter()
        .map(|v| v.as_u64().ok_or_else(|| format!("non-integer in {field}")))
        .collect()
}

/// Checks one line; returns a description of every disagreement.
fn check_line(line: &Value, keys: &[Vec<u8>]) -> Result<(String, usize), String> {
    match str_field(line, "kind")? {
        "hash" => {
            let alg = hash_for_line(line)?;
            let want = u64s(line, "values")?;
            if want.len() != keys.len() {
                return Err(format!("{} values for {} keys", want.len(), keys.len()));
            }
            let bad: Vec<String> = keys
                .iter()
                .zip(&want)
                .filter(|(k, &w)| u64::from(alg.hash(k)) != w)
                .take(3)
                .map(|(k, &w)| {
                    let shown = String::from_utf8_lossy(k);
                    format!("{shown:?}: got {} want {w}", alg.hash(k))
                })
                .collect();
            let label = format!("hash {alg}");
            if bad.is_empty() {
                Ok((label, want.len()))
            } else {
                Err(format!("{label}: {}", bad.join("; ")))
            }
        }
        "distribution" => {
            let config = config_for_line(line)?;
            let servers = servers(line)?;
            let ring = Ring::new(config, servers).map_err(|e| format!("{e}"))?;
            let want = u64s(line, "indices")?;
            if want.len() != keys.len() {
                return Err(format!("{} indices for {} keys", want.len(), keys.len()));
            }
            let mut mismatches = 0;
            let mut first = Vec::new();
            for (k, &w) in keys.iter().zip(&want) {
                let got = ring.locate(k);
                if got != Ok(w as usize) {
                    mismatches += 1;
                    if first.len() < 3 {
                        let shown = String::from_utf8_lossy(k);
                        first.push(format!("{shown:?}: got {got:?} want {w}"));
                    }
                }
            }
            let label = format!("{} / {}", config.distribution, config.hash);
            if mismatches == 0 {
                Ok((label, want.len()))
            } else {
                Err(format!(
                    "{label}: {mismatches}/{} keys differ ({})",
                    want.len(),
                    first.join("; ")
                ))
            }
        }
        k => Err(format!("unknown line kind {k:?}")),
    }
}

/// Checks every line of every `.jsonl` file in `dir` against `dir/keys.json`; returns
/// (lines, key checks, failures).
fn check_dir(dir: &Path) -> (usize, usize, Vec<String>) {
    assert!(
        dir.is_dir(),
        "vector directory {} is missing (SHOAL_VECTORS_DIR overrides the vendored tests/data)",
        dir.display()
    );
    let keys = keys(dir);
    assert!(!keys.is_empty(), "keys.json has no keys");
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .expect("vector dir is readable")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .jsonl files in {}", dir.display());

    let mut failures = Vec::new();
    let (mut lines, mut checks) = (0usize, 0usize);
    for file in &files {
        let text = fs::read_to_string(file).expect("vector file is readable");
        let name = file.file_name().map(|n| n.to_string_lossy().into_owned());
        let name = name.unwrap_or_default();
        for (n, raw) in text.lines().enumerate() {
            if raw.trim().is_empty() {
                continue;
            }
            lines += 1;
            let result = serde_json::from_str::<Value>(raw)
                .map_err(|e| format!("bad JSON: {e}"))
                .and_then(|v| check_line(&v, &keys));
            match result {
                Ok((_, count)) => checks += count,
                Err(e) => failures.push(format!("{name}:{}: {e}", n + 1)),
            }
        }
    }
    (lines, checks, failures)
}

#[test]
fn every_vector_line_is_reproduced() {
    let (lines, checks, failures) = check_dir(&vectors_dir());
    assert!(
        failures.is_empty(),
        "{} of {lines} vector lines differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("{lines} vector lines, {checks} key checks, all reproduced");
}

/// The crate's own vectors, each directory produced by a generator script next to it
/// from the real libraries: `non_ascii` (libhashkit, XMemcached 2.4.9 and pymemcache 4.0.0
/// on non-ASCII keys: signed `char`, UTF-16 units, code points), `xmemcached_tcp` (a
/// live XMemcached 2.4.9 client with weighted TCP sessions), `spymemcached`
/// (spymemcached 2.12.3's `KetamaNodeLocator`) and `twemproxy_bytes` (a live nutcracker
/// 0.5.0 placing keys with bytes >= 0x80, including invalid UTF-8).
#[test]
fn crate_vectors_are_reproduced() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut dirs: Vec<PathBuf> = fs::read_dir(&root)
        .expect("tests/data is readable")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(
        dirs.len() >= 2,
        "expected vector directories in {}",
        root.display()
    );
    let mut failures = Vec::new();
    for dir in &dirs {
        let (lines, checks, f) = check_dir(dir);
        eprintln!("{}: {lines} lines, {checks} key checks", dir.display());
        failures.extend(f.into_iter().map(|e| format!("{}: {e}", dir.display())));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
