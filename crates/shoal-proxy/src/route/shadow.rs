//! Shadow copies: which keys are copied (a fixed fraction of the key space, by hash) and
//! sending the copies without ever waiting for them.

use super::keyed_op::KeyedOp;
use super::keys::{GetSpec, KeyList};
use crate::config::route::KeyFraction;
use crate::frame::ReplyKind;
use crate::pool::Pool;
use crate::pool_request::latest::{fnv1a64, mix};
use crate::pool_request::{read_order, servers_for};

/// Where `key` falls in `[0, 1)`, in millionths: FNV-1a 64 of the key finished with
/// splitmix64's mixer (mcrouter hashes with SpookyHashV2 for the same purpose; the
/// fraction is the same idea, which keys fall in it differs).
pub(crate) fn key_position(key: &[u8]) -> u32 {
    let h = mix(fnv1a64(key));
    ((u128::from(h) * 1_000_000) >> 64) as u32
}

/// Whether `key` is in `range` (always or never, for a given key).
pub(crate) fn in_range(key: &[u8], range: KeyFraction) -> bool {
    let p = key_position(key);
    p >= range.lo && p < range.hi
}

/// Copies the keys of a get-family request that are in `range` to `shadow`: one request
/// per server, their replies read and dropped.
pub(crate) fn copy_get(shadow: &Pool, keys: &KeyList, spec: GetSpec, range: KeyFraction) {
    let mut per_server: Vec<(usize, Vec<u8>)> = Vec::new();
    for key in keys.refs() {
        if !in_range(key, range) {
            continue;
        }
        let Some(&server) = read_order(shadow, key)
            .ok()
            .as_ref()
            .and_then(|s| s.first())
        else {
            continue;
        };
        let at = match per_server.iter().position(|(s, _)| *s == server) {
            Some(at) => at,
            None => {
                let mut req = spec.cmd.as_bytes().to_vec();
                if let Some(t) = spec.exptime {
                    req.extend_from_slice(format!(" {t}").as_bytes());
                }
                per_server.push((server, req));
                per_server.len() - 1
            }
        };
        let req = &mut per_server[at].1;
        req.push(b' ');
        req.extend_from_slice(key);
    }
    for (server, mut req) in per_server {
        req.extend_from_slice(b"\r\n");
        if let Some(b) = shadow.backends.get(server) {
            b.try_send(req, ReplyKind::Retrieval);
        }
    }
}

/// Copies a one-key request to `shadow` if its key is in `range`: a read to the key's
/// first server, a write to every server holding it.
pub(crate) fn copy_keyed(shadow: &Pool, op: &KeyedOp, range: KeyFraction) {
    if !in_range(&op.key, range) {
        return;
    }
    let servers = if op.read {
        read_order(shadow, &op.key).map(|s| s.into_iter().take(1).collect())
    } else {
        servers_for(shadow, &op.key)
    };
    for s in servers.unwrap_or_default() {
        if let Some(b) = shadow.backends.get(s) {
            b.try_send(op.bytes.clone(), op.kind);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fraction_is_deterministic_and_proportional() {
        let range = KeyFraction { lo: 0, hi: 100_000 };
        let n = 100_000;
        let hits = (0..n)
            .filter(|i| in_range(format!("key:{i}").as_bytes(), range))
            .count();
        // 10% of 100,000 keys, within 1% of the key count.
        assert!((9_000..11_000).contains(&hits), "{hits}");
        assert_eq!(in_range(b"k", range), in_range(b"k", range));
        let all = KeyFraction {
            lo: 0,
            hi: 1_000_000,
        };
        assert!((0..1000).all(|i| in_range(format!("{i}").as_bytes(), all)));
        let none = KeyFraction { lo: 0, hi: 0 };
        assert!((0..1000).all(|i| !in_range(format!("{i}").as_bytes(), none)));
    }
}
