//! The `route:` directive of a pool: mcrouter's routes in twemproxy's YAML.
//!
//! A pool either has `servers` (a server pool, twemproxy's kind) or a `route` that sends
//! its requests to other pools, named in the same file. A pool that is only a route's
//! target may have no `listen`. For example:
//!
//! ```yaml
//! web:
//!   listen: 127.0.0.1:22121
//!   route:
//!     type: failover
//!     pools: [main, backup]
//! main:
//!   servers:
//!    - 10.0.0.1:11211:1
//! backup:
//!   servers:
//!    - 10.0.0.2:11211:1
//! ```
//!
//! Route types and their keys (semantics in [`crate::route`]):
//! - `failover`: `pools: [a, b, ...]` (two or more);
//! - `warmup`: `cold: a`, `warm: b`, `exptime: N` (seconds for values copied from warm to
//!   cold; default 0, no expiry);
//! - `shadow`: `pool: a` (serves the clients), `shadow: b` (a server pool that gets the
//!   copies), and `fraction: F` (keys whose hash falls in `[0, F)`) or
//!   `key_fraction_range: [lo, hi]`;
//! - `prefix`: `prefixes:` a map of key prefix to pool, and `default: pool`;
//! - `replicated`: `pools: [a, b, ...]` (two or more), `failover_count: N` (default 5).
//!
//! Every error names the line and the key, as the rest of the configuration does.

use crate::error::ConfigError;
use crate::yaml::{scalar, Node};

/// A fraction of the key space, as a range of a key's hash mapped onto `[0, 1)`, in
/// millionths (`hi == 1_000_000` covers the top of the range).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyFraction {
    /// Lower bound (inclusive), in millionths.
    pub lo: u32,
    /// Upper bound (exclusive), in millionths.
    pub hi: u32,
}

/// Where a route sends requests: other pools of the configuration, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteConfig {
    /// mcrouter's FailoverRoute (and MissFailoverRoute for gets): each pool in turn.
    Failover {
        /// The pools, in the order they are tried.
        pools: Vec<String>,
    },
    /// mcrouter's WarmUpRoute: a cold pool filled from a warm one.
    Warmup {
        /// The pool being filled: every request goes here first.
        cold: String,
        /// The pool misses are read from.
        warm: String,
        /// Expiration time (seconds, memcached's meaning) of values copied to `cold`.
        exptime: u32,
    },
    /// mcrouter's shadowing: a fraction of requests copied to a test pool.
    Shadow {
        /// The pool (or route) that answers the clients.
        pool: String,
        /// The server pool that gets the copies (answers discarded).
        shadow: String,
        /// Which keys are copied.
        range: KeyFraction,
    },
    /// mcrouter's PrefixSelectorRoute: the longest matching key prefix picks the pool.
    Prefix {
        /// `(prefix, pool)`, longest prefix first.
        prefixes: Vec<(Vec<u8>, String)>,
        /// The pool of keys no prefix matches.
        default: String,
    },
    /// Replicated pools: writes in mcrouter's AllSyncRoute manner, reads in its
    /// LatestRoute manner.
    Replicated {
        /// The replicas.
        pools: Vec<String>,
        /// How many replicas a read tries at most (mcrouter's default is 5).
        failover_count: usize,
    },
}

/// A pool a route names, and where, for validation once every pool is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The pool named.
    pub name: String,
    /// Its line.
    pub line: usize,
    /// The key it was given under (`pools`, `cold`, `shadow`...).
    pub key: &'static str,
    /// Only a server pool will do (a shadow target).
    pub server_only: bool,
}

impl RouteConfig {
    /// Every pool this route sends requests to (shadow target included), in order.
    pub fn targets(&self) -> Vec<&str> {
        match self {
            RouteConfig::Failover { pools } | RouteConfig::Replicated { pools, .. } => {
                pools.iter().map(String::as_str).collect()
            }
            RouteConfig::Warmup { cold, warm, .. } => vec![cold, warm],
            RouteConfig::Shadow { pool, shadow, .. } => vec![pool, shadow],
            RouteConfig::Prefix { prefixes, default } => prefixes
                .iter()
                .map(|(_, p)| p.as_str())
                .chain([default.as_str()])
                .collect(),
        }
    }
}

/// Default of `failover_count` (mcrouter's LatestRoute default).
pub const DEFAULT_FAILOVER_COUNT: usize = 5;

fn pool_name(
    key: &'static str,
    line: usize,
    node: &Node,
    refs: &mut Vec<Reference>,
) -> Result<String, ConfigError> {
    let name = scalar(key, line, node)?.to_string();
    refs.push(Reference {
        name: name.clone(),
        line,
        key,
        server_only: false,
    });
    Ok(name)
}

fn pool_list(
    key: &'static str,
    line: usize,
    node: &Node,
    refs: &mut Vec<Reference>,
) -> Result<Vec<String>, ConfigError> {
    let Node::List(items) = node else {
        return Err(ConfigError::at(line, key, "expected a list of pool names"));
    };
    let mut out: Vec<String> = Vec::new();
    for (item_line, item) in items {
        let name = pool_name(key, *item_line, item, refs)?;
        if out.contains(&name) {
            return Err(ConfigError::at(
                *item_line,
                key,
                format!("pool '{name}' is listed twice"),
            ));
        }
        out.push(name);
    }
    if out.len() < 2 {
        return Err(ConfigError::at(line, key, "needs at least two pools"));
    }
    Ok(out)
}

fn fraction(key: &str, line: usize, s: &str) -> Result<u32, ConfigError> {
    let f: f64 = s
        .parse()
        .map_err(|_| ConfigError::at(line, key, format!("'{s}' is not a number")))?;
    if !(0.0..=1.0).contains(&f) {
        return Err(ConfigError::at(
            line,
            key,
            format!("'{s}' is not between 0 and 1"),
        ));
    }
    Ok((f * 1_000_000.0).round() as u32)
}

/// Parses the value of a pool's `route:` key (at `line`). Returns the route and the pools
/// it names, which [`validate`] checks once every pool is known.
pub fn parse(line: usize, node: Node) -> Result<(RouteConfig, Vec<Reference>), ConfigError> {
    let Node::Map(entries) = node else {
        return Err(ConfigError::at(
            line,
            "route",
            "expected a map with a 'type' key",
        ));
    };
    let Some((_, type_line, type_node)) = entries.iter().find(|(k, _, _)| k == "type") else {
        return Err(ConfigError::at(
            line,
            "route",
            "missing 'type' (failover, warmup, shadow, prefix or replicated)",
        ));
    };
    let kind = scalar("type", *type_line, type_node)?.to_string();
    let allowed: &[&str] = match kind.as_str() {
        "failover" => &["pools"],
        "warmup" => &["cold", "warm", "exptime"],
        "shadow" => &["pool", "shadow", "fraction", "key_fraction_range"],
        "prefix" => &["prefixes", "default"],
        "replicated" => &["pools", "failover_count"],
        other => {
            return Err(ConfigError::at(
                *type_line,
                "type",
                format!(
                    "unknown route type '{other}' (failover, warmup, shadow, prefix or replicated)"
                ),
            ))
        }
    };
    let mut refs = Vec::new();
    let mut pools = None;
    let mut cold = None;
    let mut warm = None;
    let mut exptime = 0u32;
    let mut pool = None;
    let mut shadow = None;
    let mut range = None;
    let mut prefixes = None;
    let mut default = None;
    let mut failover_count = DEFAULT_FAILOVER_COUNT;
    for (key, kline, value) in &entries {
        let k = key.as_str();
        if k == "type" {
            continue;
        }
        if !allowed.contains(&k) {
            return Err(ConfigError::at(
                *kline,
                k,
                format!("not a key of a '{kind}' route"),
            ));
        }
        match k {
            "pools" => pools = Some(pool_list("pools", *kline, value, &mut refs)?),
            "cold" => cold = Some(pool_name("cold", *kline, value, &mut refs)?),
            "warm" => warm = Some(pool_name("warm", *kline, value, &mut refs)?),
            "pool" => pool = Some(pool_name("pool", *kline, value, &mut refs)?),
            "shadow" => {
                let name = pool_name("shadow", *kline, value, &mut refs)?;
                if let Some(r) = refs.last_mut() {
                    r.server_only = true;
                }
                shadow = Some(name);
            }
            "default" => default = Some(pool_name("default", *kline, value, &mut refs)?),
            "exptime" => {
                let s = scalar(k, *kline, value)?;
                exptime = s.parse().map_err(|_| {
                    ConfigError::at(
                        *kline,
                        k,
                        format!("'{s}' is not a number of seconds (0 or more)"),
                    )
                })?;
            }
            "failover_count" => {
                let s = scalar(k, *kline, value)?;
                failover_count =
                    s.parse().ok().filter(|n: &usize| *n >= 1).ok_or_else(|| {
                        ConfigError::at(*kline, k, "must be a number, at least 1")
                    })?;
            }
            "fraction" => {
                if range.is_some() {
                    return Err(ConfigError::at(
                        *kline,
                        k,
                        "give 'fraction' or 'key_fraction_range', not both",
                    ));
                }
                let hi = fraction(k, *kline, scalar(k, *kline, value)?)?;
                range = Some(KeyFraction { lo: 0, hi });
            }
            "key_fraction_range" => {
                if range.is_some() {
                    return Err(ConfigError::at(
                        *kline,
                        k,
                        "give 'fraction' or 'key_fraction_range', not both",
                    ));
                }
                let bounds = match value {
                    Node::List(items) if items.len() == 2 => items
                        .iter()
                        .map(|(l, n)| fraction(k, *l, scalar(k, *l, n)?))
                        .collect::<Result<Vec<u32>, ConfigError>>()?,
                    _ => {
                        return Err(ConfigError::at(
                            *kline,
                            k,
                            "expected [lo, hi] with 0 <= lo <= hi <= 1",
                        ))
                    }
                };
                let (lo, hi) = (bounds[0], bounds[1]);
                if lo > hi {
                    return Err(ConfigError::at(*kline, k, "lo is above hi"));
                }
                range = Some(KeyFraction { lo, hi });
            }
            "prefixes" => {
                let Node::Map(items) = value else {
                    return Err(ConfigError::at(
                        *kline,
                        k,
                        "expected a map of key prefix to pool",
                    ));
                };
                let mut list: Vec<(Vec<u8>, String)> = Vec::new();
                for (prefix, pline, target) in items {
                    if prefix.is_empty()
                        || prefix.bytes().any(|b| b.is_ascii_control() || b == b' ')
                        || prefix.len() > 250
                    {
                        return Err(ConfigError::at(
                            *pline,
                            k,
                            format!("'{prefix}' cannot start a memcached key"),
                        ));
                    }
                    let name = pool_name("prefixes", *pline, target, &mut refs)?;
                    list.push((prefix.as_bytes().to_vec(), name));
                }
                if list.is_empty() {
                    return Err(ConfigError::at(*kline, k, "no prefixes"));
                }
                // Longest first, so the first match is the longest one.
                list.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
                prefixes = Some(list);
            }
            _ => {}
        }
    }
    let missing =
        |what: &str| ConfigError::at(line, "route", format!("a '{kind}' route needs '{what}'"));
    let route = match kind.as_str() {
        "failover" => RouteConfig::Failover {
            pools: pools.ok_or_else(|| missing("pools"))?,
        },
        "replicated" => RouteConfig::Replicated {
            pools: pools.ok_or_else(|| missing("pools"))?,
            failover_count,
        },
        "warmup" => {
            let cold = cold.ok_or_else(|| missing("cold"))?;
            let warm = warm.ok_or_else(|| missing("warm"))?;
            if cold == warm {
                return Err(ConfigError::at(
                    line,
                    "route",
                    "'cold' and 'warm' are the same pool",
                ));
            }
            RouteConfig::Warmup {
                cold,
                warm,
                exptime,
            }
        }
        "shadow" => {
            let pool = pool.ok_or_else(|| missing("pool"))?;
            let shadow = shadow.ok_or_else(|| missing("shadow"))?;
            if pool == shadow {
                return Err(ConfigError::at(
                    line,
                    "route",
                    "'pool' and 'shadow' are the same pool",
                ));
            }
            RouteConfig::Shadow {
                pool,
                shadow,
                range: range.ok_or_else(|| missing("fraction' or 'key_fraction_range"))?,
            }
        }
        _ => RouteConfig::Prefix {
            prefixes: prefixes.ok_or_else(|| missing("prefixes"))?,
            default: default.ok_or_else(|| missing("default"))?,
        },
    };
    Ok((route, refs))
}

/// What [`validate`] needs to know about each pool of the file.
pub struct PoolInfo<'a> {
    /// The pool's name.
    pub name: &'a str,
    /// The line of its name.
    pub line: usize,
    /// It has a `listen` address.
    pub listens: bool,
    /// Its route and the line of its `route:` key, if it is a route pool.
    pub route: Option<(&'a RouteConfig, usize)>,
    /// The pools its route names.
    pub refs: &'a [Reference],
}

/// Checks the routes of a whole file: every named pool exists, shadow targets are server
/// pools, no route reaches itself, and every pool without `listen` is some route's
/// target (else nothing could ever reach it).
pub fn validate(pools: &[PoolInfo<'_>]) -> Result<(), ConfigError> {
    let find = |name: &str| pools.iter().find(|p| p.name == name);
    for p in pools {
        for r in p.refs {
            let Some(target) = find(&r.name) else {
                return Err(ConfigError::at(
                    r.line,
                    r.key,
                    format!("no pool named '{}'", r.name),
                ));
            };
            if r.server_only && target.route.is_some() {
                return Err(ConfigError::at(
                    r.line,
                    r.key,
                    format!(
                        "'{}' is a route; a shadow target must be a pool with servers",
                        r.name
                    ),
                ));
            }
        }
    }
    // Cycles: depth-first from every route pool; a pool met again on the current path
    // closes a cycle.
    for p in pools {
        let mut path: Vec<&str> = Vec::new();
        if let Some(cycle) = cycle_from(p.name, &find, &mut path) {
            let line = p.route.map_or(p.line, |(_, l)| l);
            return Err(ConfigError::at(
                line,
                "route",
                format!("routes loop: {}", cycle.join(" -> ")),
            ));
        }
    }
    for p in pools.iter().filter(|p| !p.listens) {
        let used = pools
            .iter()
            .any(|o| o.refs.iter().any(|r| r.name == p.name));
        if !used {
            return Err(ConfigError::at(
                p.line,
                "listen",
                format!(
                    "pool '{}' has no listen address and no route sends to it",
                    p.name
                ),
            ));
        }
    }
    Ok(())
}

fn cycle_from<'a>(
    name: &'a str,
    find: &impl Fn(&str) -> Option<&'a PoolInfo<'a>>,
    path: &mut Vec<&'a str>,
) -> Option<Vec<String>> {
    if let Some(start) = path.iter().position(|p| *p == name) {
        let mut cycle: Vec<String> = path[start..].iter().map(|s| s.to_string()).collect();
        cycle.push(name.to_string());
        return Some(cycle);
    }
    let info = find(name)?;
    let (route, _) = info.route?;
    path.push(name);
    for t in route.targets() {
        if let Some(c) = cycle_from(t, find, path) {
            return Some(c);
        }
    }
    path.pop();
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ProxyConfig;

    /// Pools a and b only routes reach; c also listens.
    const SERVERS: &str = "a:\n  servers:\n   - 127.0.0.1:1:1\nb:\n  servers:\n   - 127.0.0.1:2:1\nc:\n  listen: 127.0.0.1:0\n  servers:\n   - 127.0.0.1:3:1\n";

    fn with(route: &str) -> String {
        format!("front:\n  listen: 127.0.0.1:0\n  route:\n{route}{SERVERS}")
    }

    fn err(text: &str) -> (usize, String, String) {
        let e = ProxyConfig::parse(text).expect_err("invalid");
        (e.line, e.field, e.message)
    }

    #[test]
    fn every_route_type_parses() {
        let cases = [
            "    type: failover\n    pools: [a, b, c]\n",
            "    type: warmup\n    cold: a\n    warm: b\n    exptime: 600\n",
            "    type: shadow\n    pool: a\n    shadow: b\n    fraction: 0.1\n",
            "    type: shadow\n    pool: a\n    shadow: b\n    key_fraction_range: [0.25, 0.5]\n",
            "    type: prefix\n    prefixes:\n      \"a/\": a\n      \"a/b/\": b\n    default: c\n",
            "    type: replicated\n    pools:\n     - a\n     - b\n     - c\n    failover_count: 2\n",
        ];
        for text in cases {
            let c = ProxyConfig::parse(&with(text)).unwrap_or_else(|e| panic!("{text}: {e}"));
            let front = &c.pools[0];
            assert!(front.route.is_some() && front.servers.is_empty());
            assert!(c.pools[1].listen.is_none(), "a target needs no listen");
        }
        let c = ProxyConfig::parse(&with(cases[4])).expect("prefix");
        let Some(RouteConfig::Prefix { prefixes, .. }) = &c.pools[0].route else {
            panic!("prefix route");
        };
        assert_eq!(prefixes[0].0, b"a/b/", "longest first");
        let c = ProxyConfig::parse(&with(cases[3])).expect("range");
        let Some(RouteConfig::Shadow { range, .. }) = &c.pools[0].route else {
            panic!("shadow route");
        };
        assert_eq!(
            *range,
            KeyFraction {
                lo: 250_000,
                hi: 500_000
            }
        );
        let c = ProxyConfig::parse(&with(cases[1])).expect("warmup");
        assert_eq!(
            c.pools[0].route,
            Some(RouteConfig::Warmup {
                cold: "a".into(),
                warm: "b".into(),
                exptime: 600
            })
        );
    }

    #[test]
    fn bad_routes_name_their_line_and_key() {
        // The route starts on line 3; its keys on lines 4 onwards.
        assert_eq!(err(&with("    type: mirror\n")).0, 4);
        assert_eq!(err(&with("    pools: [a, b]\n")).1, "route");
        let (line, field, _) = err(&with("    type: failover\n    pools: [a, nope]\n"));
        assert_eq!((line, field.as_str()), (5, "pools"));
        let (line, field, msg) = err(&with("    type: failover\n    pools: [a]\n"));
        assert_eq!((line, field.as_str()), (5, "pools"), "{msg}");
        let (line, field, _) = err(&with("    type: failover\n    pools: [a, a]\n"));
        assert_eq!((line, field.as_str()), (5, "pools"));
        let (line, field, _) = err(&with("    type: failover\n    cold: a\n"));
        assert_eq!((line, field.as_str()), (5, "cold"));
        let (line, field, _) = err(&with(
            "    type: warmup\n    cold: a\n    warm: b\n    exptime: soon\n",
        ));
        assert_eq!((line, field.as_str()), (7, "exptime"));
        let (line, _, msg) = err(&with("    type: warmup\n    cold: a\n    warm: a\n"));
        assert_eq!(line, 3, "{msg}");
        let (line, field, _) = err(&with(
            "    type: shadow\n    pool: a\n    shadow: b\n    fraction: 1.5\n",
        ));
        assert_eq!((line, field.as_str()), (7, "fraction"));
        let (line, field, _) = err(&with(
            "    type: shadow\n    pool: a\n    shadow: b\n    key_fraction_range: [0.5, 0.1]\n",
        ));
        assert_eq!((line, field.as_str()), (7, "key_fraction_range"));
        let (line, field, _) = err(&with("    type: shadow\n    pool: a\n    shadow: b\n"));
        assert_eq!((line, field.as_str()), (3, "route"));
        let (line, field, _) = err(&with(
            "    type: prefix\n    prefixes:\n      \"a b\": a\n    default: c\n",
        ));
        assert_eq!((line, field.as_str()), (6, "prefixes"));
        let (line, field, _) = err(&with(
            "    type: replicated\n    pools: [a, b]\n    failover_count: 0\n",
        ));
        assert_eq!((line, field.as_str()), (6, "failover_count"));
    }

    #[test]
    fn references_loops_and_orphans_are_refused() {
        // A shadow target must have servers.
        let text = format!(
            "front:\n  listen: 127.0.0.1:0\n  route:\n    type: shadow\n    pool: a\n    \
             shadow: mid\n    fraction: 0.5\nmid:\n  route:\n    type: failover\n    \
             pools: [b, c]\n{SERVERS}"
        );
        let (line, field, msg) = err(&text);
        assert_eq!((line, field.as_str()), (6, "shadow"), "{msg}");
        // x -> y -> x.
        let text = format!(
            "x:\n  listen: 127.0.0.1:0\n  route:\n    type: failover\n    pools: [a, y]\n\
             y:\n  route:\n    type: failover\n    pools: [b, x]\n{SERVERS}"
        );
        let (line, field, msg) = err(&text);
        assert_eq!((line, field.as_str()), (3, "route"));
        assert!(msg.contains("x -> y -> x"), "{msg}");
        // A pool without listen that no route sends to.
        let text = format!(
            "front:\n  listen: 127.0.0.1:0\n  route:\n    type: failover\n    pools: [a, c]\n{SERVERS}"
        );
        let (line, field, msg) = err(&text);
        assert_eq!((line, field.as_str()), (9, "listen"), "{msg}");
        // Server directives on a route pool.
        let text = with("    type: failover\n    pools: [a, b, c]\n")
            .replace("  route:\n", "  hash: md5\n  route:\n");
        let (line, field, _) = err(&text);
        assert_eq!((line, field.as_str()), (3, "hash"));
        // Neither servers nor a route.
        let (_, field, msg) = err("p:\n  listen: 127.0.0.1:0\n");
        assert_eq!(field, "servers", "{msg}");
    }
}
