//! Rendezvous (highest-random-weight) hashing as XMemcached's election locator and as
//! pymemcache's `HashClient` do it.

use md5::{Digest, Md5};

use crate::hash::libhashkit::digest_word;
use crate::hash::HashAlgorithm;

/// One scoring candidate: the prefix hashed in front of the key, and its server.
#[derive(Debug, Clone)]
struct Candidate {
    prefix: Vec<u8>,
    /// MD5 state after absorbing `prefix`, when the hash is MD5-based: a lookup then
    /// only hashes the key.
    md5: Option<Md5>,
    /// The node string pymemcache compares on score ties.
    label: Vec<u8>,
    server: u32,
}

fn score(
    c: &Candidate,
    hash: HashAlgorithm,
    key: &[u8],
    key_is_utf8: bool,
    buf: &mut Vec<u8>,
) -> u32 {
    // MD5 of UTF-8 concatenation equals MD5 of the byte concatenation when the key is
    // valid UTF-8; other keys take the generic path, which decodes like Java does.
    if let (Some(state), true) = (&c.md5, key_is_utf8) {
        let mut h = state.clone();
        h.update(key);
        let digest: [u8; 16] = h.finalize().into();
        return digest_word(&digest, 0);
    }
    buf.clear();
    buf.extend_from_slice(&c.prefix);
    buf.extend_from_slice(key);
    hash.hash(buf)
}

fn candidate(prefix: String, label: &str, hash: HashAlgorithm, server: u32) -> Candidate {
    let prefix = prefix.into_bytes();
    let md5 = hash.is_md5_le().then(|| {
        let mut h = Md5::new();
        h.update(&prefix);
        h
    });
    Candidate {
        prefix,
        md5,
        label: label.as_bytes().to_vec(),
        server,
    }
}

/// XMemcached `ElectionMemcachedSessionLocator` (2.4.9): the first strictly highest score
/// above 0 wins.
///
/// XMemcached has two branches. For `MemcachedTCPSession`s, which is every session of a
/// real client, a server scores `hash(address + "-" + i + key)` for each `i < weight`
/// (`weighted`). Other sessions score `hash(address + key)` once, weights ignored; the
/// shared vectors were computed that way. A live-client check is in
/// `tests/data/xmemcached_tcp`.
#[derive(Debug, Clone)]
pub struct Election {
    candidates: Vec<Candidate>,
    hash: HashAlgorithm,
}

impl Election {
    pub(crate) fn new(
        live: &[(u32, String, u32)],
        hash: HashAlgorithm,
        weighted: bool,
    ) -> Election {
        let mut candidates = Vec::new();
        for (idx, address, weight) in live {
            if weighted {
                for i in 0..*weight {
                    candidates.push(candidate(format!("{address}-{i}"), address, hash, *idx));
                }
            } else {
                candidates.push(candidate(address.clone(), address, hash, *idx));
            }
        }
        Election { candidates, hash }
    }

    /// The winning server, or `None` when every score is 0 (XMemcached returns `null`).
    pub fn lookup(&self, key: &[u8]) -> Option<u32> {
        let mut buf = Vec::new();
        let utf8 = std::str::from_utf8(key).is_ok();
        let mut best: Option<u32> = None;
        let mut high: u32 = 0;
        for c in &self.candidates {
            let s = score(c, self.hash, key, utf8, &mut buf);
            if s > high {
                high = s;
                best = Some(c.server);
            }
        }
        best
    }
}

/// pymemcache `RendezvousHash.get_node`: score `hash(node + "-" + key)` with node
/// `host:port`; highest wins, ties go to the lexicographically larger node string;
/// weights are ignored.
#[derive(Debug, Clone)]
pub struct Pymemcache {
    candidates: Vec<Candidate>,
    hash: HashAlgorithm,
}

impl Pymemcache {
    pub(crate) fn new(live: &[(u32, String)], hash: HashAlgorithm) -> Pymemcache {
        let candidates = live
            .iter()
            .map(|(idx, node)| candidate(format!("{node}-"), node, hash, *idx))
            .collect();
        Pymemcache { candidates, hash }
    }

    /// The winning server; `None` only with no candidates.
    pub fn lookup(&self, key: &[u8]) -> Option<u32> {
        let mut buf = Vec::new();
        let utf8 = std::str::from_utf8(key).is_ok();
        let mut best: Option<(u32, &Candidate)> = None;
        for c in &self.candidates {
            let s = score(c, self.hash, key, utf8, &mut buf);
            best = match best {
                None => Some((s, c)),
                Some((hs, _)) if s > hs => Some((s, c)),
                // Python keeps max(str(node), str(winner)) on a tie.
                Some((hs, w)) if s == hs && c.label > w.label => Some((s, c)),
                keep => keep,
            };
        }
        best.map(|(_, c)| c.server)
    }
}
