//! twemproxy's YAML configuration: pools, their directives and defaults (those of
//! nutcracker 0.5.0), validated into [`PoolConfig`]s; a pool's `route:` directive is
//! parsed and checked by [`route`].

pub mod route;

use std::path::PathBuf;
use std::time::Duration;

use shoal_ring::{HashAlgorithm, Server};

use crate::error::ConfigError;
use crate::sasl::SaslConfig;
use crate::tls::{ListenTls, ServerTls};
use crate::yaml::{self, boolean, scalar, Node};
use route::{self as route_config, PoolInfo, Reference, RouteConfig};

/// How a pool spreads keys, as twemproxy's `distribution:` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DistributionKind {
    /// `ketama`: twemproxy's weighted MD5 continuum.
    Ketama,
    /// `modula`: servers repeated by weight, `hash % buckets`.
    Modula,
    /// `random`: any live server, uniformly.
    Random,
}

/// Where a pool listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// `host:port`.
    Tcp(String),
    /// `/path/to/socket [mode]`.
    Unix {
        /// Socket path.
        path: PathBuf,
        /// Octal permissions, if given.
        mode: Option<u32>,
    },
}

impl Listen {
    /// A TCP address with port 0 (the OS picks a port; several pools may use it).
    pub fn is_ephemeral(&self) -> bool {
        matches!(self, Listen::Tcp(a) if a.ends_with(":0"))
    }
}

/// One pool, with twemproxy's defaults for absent directives. A pool has either
/// `servers` (a server pool, as in twemproxy) or a `route` to other pools (see
/// [`crate::route`]); one that only routes' requests reach has no `listen`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolConfig {
    /// The pool's name (its top-level key).
    pub name: String,
    /// `listen`; `None` for a pool only routes send to.
    pub listen: Option<Listen>,
    /// Shoal extension `route`: where a pool without servers sends its requests.
    pub route: Option<RouteConfig>,
    /// `hash` (default `fnv1a_64`).
    pub hash: HashAlgorithm,
    /// `hash_tag` (two bytes), if any.
    pub hash_tag: Option<[u8; 2]>,
    /// `distribution` (default `ketama`).
    pub distribution: DistributionKind,
    /// `timeout` in ms; `None` (the default) waits forever, like twemproxy.
    pub timeout: Option<Duration>,
    /// `backlog` (default 512).
    pub backlog: u32,
    /// `preconnect` (default false): connect to every server at start.
    pub preconnect: bool,
    /// `auto_eject_hosts` (default false).
    pub auto_eject_hosts: bool,
    /// `server_connections` per server (default 1).
    pub server_connections: usize,
    /// `server_retry_timeout` (default 30000 ms).
    pub server_retry_timeout: Duration,
    /// `server_failure_limit` (default 2).
    pub server_failure_limit: u32,
    /// `client_connections` limit; 0 (default) is unlimited.
    pub client_connections: usize,
    /// Shoal extension `client_idle_timeout` in ms: a client connection that sends nothing
    /// for this long is closed (memcached's `idle_timeout`); `None` (absent or 0, the
    /// default) never closes one. Applies to connections accepted after it is configured.
    pub client_idle_timeout: Option<Duration>,
    /// Shoal extension `replicas` (default 1): keep each key on this many servers
    /// (its ring server and the next live ones in server order); writes go to all,
    /// reads fail over in that order. nutcracker rejects this directive.
    pub replicas: usize,
    /// `servers`, in twemproxy's order (sorted by name: length, then bytes; see
    /// `shoal_ring::twemproxy`), which is the order `modula` and `random` index. Empty
    /// exactly when the pool has a `route`.
    pub servers: Vec<Server>,
    /// Shoal extension `sasl:` (see [`crate::sasl`]): binary clients must authenticate
    /// (SASL PLAIN) as one of these users; text clients are refused.
    pub sasl: Option<SaslConfig>,
    /// Shoal extension `tls:` (see [`crate::tls`]): TLS on the listener.
    pub tls: Option<ListenTls>,
    /// Shoal extension `server_tls:` (see [`crate::tls`]): TLS to the servers.
    pub server_tls: Option<ServerTls>,
    /// Shoal extension `queue: true`: the servers are shoal-queued (or Kestrel) queue
    /// servers and the pool spreads queues over them the Kestrel way (see
    /// [`crate::session`]'s queue mode); `None` for a cache pool.
    pub queue: Option<QueuePool>,
}

/// A queue pool's settings (`queue: true` and the directives beside it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueuePool {
    /// `gets_per_server` (default 100, kestrel-client's): reads a client connection
    /// makes on one server before moving to the next.
    pub gets_per_server: u32,
}

/// The directives a queue pool may have: its clients' and its servers' addresses, and
/// what [`QueuePool`] and the queue client use. Placement (`hash`, `distribution`,
/// `replicas`...) means nothing to it: sets go to a random server.
const QUEUE_POOL_DIRECTIVES: &[&str] = &[
    "listen",
    "servers",
    "queue",
    "gets_per_server",
    "timeout",
    "server_retry_timeout",
    "backlog",
    "client_connections",
    "client_idle_timeout",
    "tls",
];

/// Directives a route pool may have besides `route`: those about its clients (where
/// they connect, TLS on that listener, SASL for them). The others, `server_tls`
/// included, describe servers, which a route pool has none of.
const ROUTE_POOL_DIRECTIVES: &[&str] = &[
    "listen",
    "route",
    "backlog",
    "client_connections",
    "client_idle_timeout",
    "tls",
    "sasl",
];

/// Directives about a pool's own clients, meaningless on a pool without a `listen`
/// address (one only routes reach, whose clients are the route pool's).
const CLIENT_DIRECTIVES: &[&str] = &["tls", "sasl", "client_idle_timeout"];

/// A whole configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyConfig {
    /// The pools, in file order.
    pub pools: Vec<PoolConfig>,
}

/// twemproxy's hash names and the algorithms they are.
pub const HASHES: &[(&str, HashAlgorithm)] = &[
    ("one_at_a_time", HashAlgorithm::OneAtATime),
    ("md5", HashAlgorithm::Md5),
    ("crc16", HashAlgorithm::Crc16),
    ("crc32", HashAlgorithm::Crc),
    ("crc32a", HashAlgorithm::Crc32a),
    ("fnv1_64", HashAlgorithm::Fnv1_64),
    ("fnv1a_64", HashAlgorithm::Fnv1a_64),
    ("fnv1_32", HashAlgorithm::Fnv1_32),
    ("fnv1a_32", HashAlgorithm::Fnv1a_32),
    ("hsieh", HashAlgorithm::Hsieh),
    ("murmur", HashAlgorithm::Murmur),
    ("jenkins", HashAlgorithm::Jenkins),
];

impl ProxyConfig {
    /// Reads and validates a configuration file.
    pub fn load(path: &std::path::Path) -> Result<ProxyConfig, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::at(0, "", format!("cannot read {}: {e}", path.display())))?;
        ProxyConfig::parse(&text)
    }

    /// Parses and validates configuration text. Guarantees every pool has either at
    /// least one server (no duplicates) or a route whose every target is a pool of the
    /// file, without loops; a pool without a listen address is some route's target;
    /// directive values are valid.
    pub fn parse(text: &str) -> Result<ProxyConfig, ConfigError> {
        let root = yaml::parse(text)?;
        let Node::Map(entries) = root else {
            return Err(ConfigError::at(1, "", "expected a map of pools"));
        };
        if entries.is_empty() {
            return Err(ConfigError::at(0, "", "no pools configured"));
        }
        let mut pools: Vec<PoolConfig> = Vec::new();
        let mut parsed: Vec<Parsed> = Vec::new();
        for (name, line, node) in entries {
            let p = parse_pool(&name, line, node)?;
            if let Some(listen) = &p.pool.listen {
                if let Some(other) = pools
                    .iter()
                    .find(|o| o.listen.as_ref() == Some(listen) && !listen.is_ephemeral())
                {
                    return Err(ConfigError::at(
                        line,
                        "listen",
                        format!("pool '{name}' listens where pool '{}' does", other.name),
                    ));
                }
            }
            pools.push(p.pool.clone());
            parsed.push(p);
        }
        let infos: Vec<PoolInfo<'_>> = parsed
            .iter()
            .map(|p| PoolInfo {
                name: &p.pool.name,
                line: p.line,
                listens: p.pool.listen.is_some(),
                route: p.pool.route.as_ref().map(|r| (r, p.route_line)),
                refs: &p.refs,
            })
            .collect();
        route_config::validate(&infos)?;
        for p in &parsed {
            if let Some(r) = p
                .refs
                .iter()
                .find(|r| pools.iter().any(|o| o.name == r.name && o.queue.is_some()))
            {
                return Err(ConfigError::at(
                    r.line,
                    r.key,
                    format!(
                        "'{}' is a queue pool: routes carry cache requests only",
                        r.name
                    ),
                ));
            }
        }
        Ok(ProxyConfig { pools })
    }
}

/// A pool as parsed, with what route validation needs.
struct Parsed {
    pool: PoolConfig,
    /// The line of the pool's name.
    line: usize,
    /// The line of its `route:` key (0 without one).
    route_line: usize,
    /// The pools its route names.
    refs: Vec<Reference>,
}

fn number<T: std::str::FromStr>(key: &str, line: usize, node: &Node) -> Result<T, ConfigError> {
    let s = scalar(key, line, node)?;
    s.parse::<T>()
        .map_err(|_| ConfigError::at(line, key, format!("'{s}' is not a valid number")))
}

fn parse_pool(name: &str, pool_line: usize, node: Node) -> Result<Parsed, ConfigError> {
    let Node::Map(entries) = node else {
        return Err(ConfigError::at(
            pool_line,
            name,
            "a pool must be a map of directives",
        ));
    };
    let mut pool = PoolConfig {
        name: name.to_string(),
        listen: None,
        route: None,
        hash: HashAlgorithm::Fnv1a_64,
        hash_tag: None,
        distribution: DistributionKind::Ketama,
        timeout: None,
        backlog: 512,
        preconnect: false,
        auto_eject_hosts: false,
        server_connections: 1,
        server_retry_timeout: Duration::from_millis(30_000),
        server_failure_limit: 2,
        client_connections: 0,
        client_idle_timeout: None,
        replicas: 1,
        servers: Vec::new(),
        sasl: None,
        tls: None,
        server_tls: None,
        queue: None,
    };
    let mut gets_per_server = None;
    let mut server_tls_line = pool_line;
    let mut servers_line = None;
    let mut route_line = 0;
    let mut refs = Vec::new();
    let mut seen: Vec<(String, usize)> = Vec::new();
    for (key, line, value) in entries {
        seen.push((key.clone(), line));
        let k = key.as_str();
        match k {
            "listen" => pool.listen = Some(parse_listen(k, line, &value)?),
            "route" => {
                let (route, r) = route_config::parse(line, value)?;
                pool.route = Some(route);
                route_line = line;
                refs = r;
            }
            "hash" => {
                let s = scalar(k, line, &value)?;
                pool.hash = HASHES
                    .iter()
                    .find(|(n, _)| *n == s)
                    .map(|(_, h)| *h)
                    .ok_or_else(|| ConfigError::at(line, k, format!("unknown hash '{s}'")))?;
            }
            "hash_tag" => {
                let s = scalar(k, line, &value)?;
                match s.as_bytes() {
                    [a, b] => pool.hash_tag = Some([*a, *b]),
                    _ => {
                        return Err(ConfigError::at(
                            line,
                            k,
                            "hash_tag must be exactly two characters",
                        ))
                    }
                }
            }
            "distribution" => {
                pool.distribution = match scalar(k, line, &value)? {
                    "ketama" => DistributionKind::Ketama,
                    "modula" => DistributionKind::Modula,
                    "random" => DistributionKind::Random,
                    s => {
                        return Err(ConfigError::at(
                            line,
                            k,
                            format!("unknown distribution '{s}' (ketama, modula or random)"),
                        ))
                    }
                }
            }
            "timeout" => {
                let ms: i64 = number(k, line, &value)?;
                pool.timeout = match ms {
                    ms if ms > 0 => Some(Duration::from_millis(ms as u64)),
                    -1 => None,
                    _ => {
                        return Err(ConfigError::at(
                            line,
                            k,
                            "must be a positive number of milliseconds (or -1)",
                        ))
                    }
                };
            }
            "backlog" => pool.backlog = number(k, line, &value)?,
            "preconnect" => pool.preconnect = boolean(k, line, &value)?,
            "auto_eject_hosts" => pool.auto_eject_hosts = boolean(k, line, &value)?,
            "server_connections" => {
                pool.server_connections = number(k, line, &value)?;
                if pool.server_connections == 0 || pool.server_connections > 1024 {
                    return Err(ConfigError::at(line, k, "must be between 1 and 1024"));
                }
            }
            "server_retry_timeout" => {
                let ms: u64 = number(k, line, &value)?;
                pool.server_retry_timeout = Duration::from_millis(ms);
            }
            "server_failure_limit" => {
                pool.server_failure_limit = number(k, line, &value)?;
                if pool.server_failure_limit == 0 {
                    return Err(ConfigError::at(line, k, "must be at least 1"));
                }
            }
            "client_connections" => pool.client_connections = number(k, line, &value)?,
            "client_idle_timeout" => {
                let ms: u64 = number(k, line, &value).map_err(|_| {
                    ConfigError::at(line, k, "must be a number of milliseconds (0: none)")
                })?;
                pool.client_idle_timeout = (ms > 0).then(|| Duration::from_millis(ms));
            }
            "replicas" => {
                pool.replicas = number(k, line, &value)?;
                if pool.replicas == 0 {
                    return Err(ConfigError::at(line, k, "must be at least 1"));
                }
            }
            "redis" => {
                if boolean(k, line, &value)? {
                    return Err(ConfigError::at(
                        line,
                        k,
                        "redis pools are not supported by shoal-proxy (memcache only)",
                    ));
                }
            }
            "tcpkeepalive" | "redis_auth" | "redis_db" => {
                scalar(k, line, &value)?;
            }
            "queue" => {
                if boolean(k, line, &value)? {
                    pool.queue = Some(QueuePool {
                        gets_per_server: 100,
                    });
                }
            }
            "gets_per_server" => {
                let n: u32 = number(k, line, &value)?;
                if n == 0 {
                    return Err(ConfigError::at(line, k, "must be at least 1"));
                }
                gets_per_server = Some((n, line));
            }
            "sasl" => pool.sasl = Some(SaslConfig::parse(k, line, value)?),
            "tls" => pool.tls = Some(ListenTls::parse(k, line, value)?),
            "server_tls" => {
                server_tls_line = line;
                pool.server_tls = Some(ServerTls::parse(k, line, value)?);
            }
            "servers" => {
                servers_line = Some(line);
                let Node::List(items) = value else {
                    return Err(ConfigError::at(line, k, "expected a list of servers"));
                };
                for (item_line, item) in items {
                    let s = scalar(k, item_line, &item)?;
                    let server = parse_server(s).map_err(|m| ConfigError::at(item_line, k, m))?;
                    if pool
                        .servers
                        .iter()
                        .any(|o| o.host == server.host && o.port == server.port)
                    {
                        return Err(ConfigError::at(
                            item_line,
                            k,
                            format!("duplicate server '{s}'"),
                        ));
                    }
                    pool.servers.push(server);
                }
            }
            _ => {
                return Err(ConfigError::at(line, k, "unknown directive"));
            }
        }
    }
    if pool.listen.is_none() {
        if let Some((k, line)) = seen
            .iter()
            .find(|(k, _)| CLIENT_DIRECTIVES.contains(&k.as_str()))
        {
            return Err(ConfigError::at(
                *line,
                k,
                format!(
                    "pool '{name}' has no listen address, so it has no clients of its own \
                     to apply '{k}' to (set it on the pool they connect to)"
                ),
            ));
        }
    }
    match (&mut pool.queue, gets_per_server) {
        (Some(q), Some((n, _))) => q.gets_per_server = n,
        (None, Some((_, line))) => {
            return Err(ConfigError::at(
                line,
                "gets_per_server",
                format!("pool '{name}' is not a queue pool (queue: true)"),
            ))
        }
        _ => {}
    }
    if pool.queue.is_some() {
        if let Some((k, line)) = seen
            .iter()
            .find(|(k, _)| !QUEUE_POOL_DIRECTIVES.contains(&k.as_str()))
        {
            return Err(ConfigError::at(
                *line,
                k,
                format!(
                    "pool '{name}' is a queue pool: its sets go to a random server and its \
                     reads move from server to server, so '{k}' does not apply"
                ),
            ));
        }
        if pool.listen.is_none() {
            return Err(ConfigError::at(
                pool_line,
                name,
                format!("queue pool '{name}' needs a listen address (routes cannot reach one)"),
            ));
        }
    }
    if pool.route.is_some() {
        if let Some((k, line)) = seen
            .iter()
            .find(|(k, _)| !ROUTE_POOL_DIRECTIVES.contains(&k.as_str()))
        {
            return Err(ConfigError::at(
                *line,
                k,
                format!("pool '{name}' has a route, so it has no servers to apply '{k}' to"),
            ));
        }
        return Ok(Parsed {
            pool,
            line: pool_line,
            route_line,
            refs,
        });
    }
    if pool.servers.is_empty() {
        return Err(ConfigError::at(
            servers_line.unwrap_or(pool_line),
            "servers",
            format!("pool '{name}' has no servers and no route"),
        ));
    }
    // twemproxy orders a pool's servers by name (length, then bytes) before placing
    // keys; modula and random index that order.
    pool.servers = shoal_ring::twemproxy::sorted_servers(&pool.servers);
    for pair in pool.servers.windows(2) {
        let (a, b) = (
            shoal_ring::twemproxy::server_name(&pair[0]),
            shoal_ring::twemproxy::server_name(&pair[1]),
        );
        if a == b {
            return Err(ConfigError::at(
                servers_line.unwrap_or(pool_line),
                "servers",
                format!("two servers are named '{a}'"),
            ));
        }
    }
    if let Some(t) = &pool.server_tls {
        t.check_hosts(
            pool.servers.iter().map(|s| s.host.as_str()),
            server_tls_line,
            "server_tls",
        )?;
    }
    if pool.replicas > pool.servers.len() {
        return Err(ConfigError::at(
            pool_line,
            "replicas",
            "more replicas than servers",
        ));
    }
    Ok(Parsed {
        pool,
        line: pool_line,
        route_line,
        refs,
    })
}

fn parse_listen(key: &str, line: usize, node: &Node) -> Result<Listen, ConfigError> {
    let s = scalar(key, line, node)?;
    if s.starts_with('/') {
        let mut parts = s.split_whitespace();
        let path = PathBuf::from(parts.next().unwrap_or_default());
        let mode = match parts.next() {
            Some(m) => Some(u32::from_str_radix(m, 8).map_err(|_| {
                ConfigError::at(line, key, format!("'{m}' is not an octal permission"))
            })?),
            None => None,
        };
        return Ok(Listen::Unix { path, mode });
    }
    let (host, port) = s
        .rsplit_once(':')
        .ok_or_else(|| ConfigError::at(line, key, format!("'{s}' is not host:port")))?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(ConfigError::at(
            line,
            key,
            format!("'{s}' is not host:port"),
        ));
    }
    Ok(Listen::Tcp(s.to_string()))
}

/// Parses twemproxy's `host:port:weight [name]`.
pub fn parse_server(spec: &str) -> Result<Server, String> {
    let spec = spec.trim();
    let (addr, name) = match spec.split_once(char::is_whitespace) {
        Some((a, n)) => (a, Some(n.trim())),
        None => (spec, None),
    };
    let mut parts = addr.rsplitn(3, ':');
    let (Some(weight), Some(port), Some(host)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(format!("'{spec}' is not host:port:weight [name]"));
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(format!("'{spec}' has an empty host"));
    }
    let port: u16 = port
        .parse()
        .map_err(|_| format!("'{spec}' has an invalid port"))?;
    let weight: u32 = weight
        .parse()
        .map_err(|_| format!("'{spec}' has an invalid weight"))?;
    if weight == 0 {
        return Err(format!("'{spec}' has a zero weight"));
    }
    let mut server = Server::new(host, port).with_weight(weight);
    if let Some(n) = name.filter(|n| !n.is_empty()) {
        server = server.with_name(n);
    }
    Ok(server)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "alpha:
  listen: 127.0.0.1:22121
  hash: fnv1a_64
  hash_tag: \"{}\"
  distribution: ketama
  auto_eject_hosts: true
  timeout: 400
  server_retry_timeout: 2000
  server_failure_limit: 1
  servers:
   - 127.0.0.1:11211:1
   - 127.0.0.1:11212:2 two
";

    #[test]
    fn parses_pool() {
        let c = ProxyConfig::parse(GOOD).unwrap();
        let p = &c.pools[0];
        assert_eq!(p.name, "alpha");
        assert_eq!(p.hash_tag, Some(*b"{}"));
        assert_eq!(p.timeout, Some(Duration::from_millis(400)));
        assert_eq!(p.servers.len(), 2);
        // Sorted as twemproxy sorts: "two" (3 bytes) before "127.0.0.1" (port 11211).
        assert_eq!(p.servers[0].name.as_deref(), Some("two"));
        assert_eq!(p.servers[0].weight, 2);
        assert!(p.auto_eject_hosts);
        assert_eq!(p.server_failure_limit, 1);
    }

    #[test]
    fn client_idle_timeout_is_milliseconds_and_needs_clients() {
        let p = |text: &str| ProxyConfig::parse(text).map(|c| c.pools[0].client_idle_timeout);
        assert_eq!(p(GOOD), Ok(None));
        let with = GOOD.replace(
            "  timeout: 400\n",
            "  timeout: 400\n  client_idle_timeout: 1500\n",
        );
        assert_eq!(p(&with), Ok(Some(Duration::from_millis(1500))));
        let zero = GOOD.replace("  timeout: 400\n", "  client_idle_timeout: 0\n");
        assert_eq!(p(&zero), Ok(None), "0 is none");
        let bad = GOOD.replace("  timeout: 400\n", "  client_idle_timeout: -5\n");
        let e = ProxyConfig::parse(&bad).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (7, "client_idle_timeout"));
        // A pool only routes reach has no clients of its own to time out.
        let unlistened = "front:\n  listen: 127.0.0.1:1\n  route:\n    type: failover\n    \
                          pools: [a, b]\na:\n  client_idle_timeout: 10\n  servers:\n   - h:1:1\n\
                          b:\n  servers:\n   - h:2:1\n";
        let e = ProxyConfig::parse(unlistened).unwrap_err();
        assert_eq!(
            (e.line, e.field.as_str()),
            (7, "client_idle_timeout"),
            "{e}"
        );
    }

    #[test]
    fn errors_name_line_and_field() {
        let bad = GOOD.replace("hash: fnv1a_64", "hash: fnv9");
        let e = ProxyConfig::parse(&bad).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (3, "hash"));
        let bad = GOOD.replace("timeout: 400", "timeout: soon");
        let e = ProxyConfig::parse(&bad).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (7, "timeout"));
        let bad = GOOD.replace("127.0.0.1:11212:2 two", "127.0.0.1:11212");
        let e = ProxyConfig::parse(&bad).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (12, "servers"));
        let bad = GOOD
            .replace("preconnect", "x")
            .replace("  timeout: 400", "  bogus: 1");
        let e = ProxyConfig::parse(&bad).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (7, "bogus"));
        let e = ProxyConfig::parse("a:\n  servers:\n   - h:1:1\n").unwrap_err();
        assert_eq!(e.field, "listen");
        assert!(e.to_string().starts_with("line 1: field 'listen'"));
    }
}
