//! Server descriptions as the client libraries see them.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use crate::RingError;

/// One memcached server: what each library feeds into its placement.
///
/// `host` is kept verbatim (libmemcached and twemproxy hash the name as configured, not a
/// resolved address). `address` is the Java address string (`"hostname/ip:port"`) that
/// XMemcached and spymemcached hash; when absent it is derived for IPv4-literal hosts in
/// each client's form (see [`Server::java_address`], [`Server::spymemcached_address`]).
/// `name` is twemproxy's optional server name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Server {
    /// Host name or IP literal, as configured.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Relative weight; 0 means "place nothing here" in weighted distributions.
    pub weight: u32,
    /// Java's `InetSocketAddress.toString()` for this server, if known.
    pub address: Option<String>,
    /// twemproxy's explicit server name (`host:port:weight name`), if any.
    pub name: Option<String>,
}

/// The port libmemcached and twemproxy leave out of ketama point names.
pub const DEFAULT_PORT: u16 = 11211;

impl Server {
    /// A server with weight 1 and no Java address string or twemproxy name.
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        Server {
            host: host.into(),
            port,
            weight: 1,
            address: None,
            name: None,
        }
    }

    /// Sets the weight.
    pub fn with_weight(mut self, weight: u32) -> Self {
        self.weight = weight;
        self
    }

    /// Sets Java's `InetSocketAddress.toString()` for this server.
    pub fn with_address(mut self, address: impl Into<String>) -> Self {
        self.address = Some(address.into());
        self
    }

    /// Sets twemproxy's server name.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// `host:port`, the identity used for duplicate detection and display.
    pub fn host_port(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The address string XMemcached hashes: the explicit `address`, or `"ip/ip:port"`
    /// for an IPv4 literal host (what XMemcached reports for servers given as IPs). Host
    /// names (which Java would resolve) and IPv6 literals (which Java prints in its own
    /// expanded form) need it given explicitly.
    pub fn java_address(&self) -> Result<String, RingError> {
        if let Some(a) = &self.address {
            return Ok(a.clone());
        }
        match self.host.parse::<IpAddr>() {
            Ok(IpAddr::V4(ip)) => Ok(format!("{ip}/{ip}:{}", self.port)),
            _ => Err(RingError::AddressStringRequired(self.host_port())),
        }
    }

    /// The address string spymemcached hashes: the explicit `address`, or `"/ip:port"`
    /// for an IPv4 literal host, which is what `InetSocketAddress.toString()` prints for
    /// an address built from an IP literal on current JDKs (checked on JDK 17 with
    /// spymemcached 2.12.3).
    pub fn spymemcached_address(&self) -> Result<String, RingError> {
        if let Some(a) = &self.address {
            return Ok(a.clone());
        }
        match self.host.parse::<IpAddr>() {
            Ok(IpAddr::V4(ip)) => Ok(format!("/{ip}:{}", self.port)),
            _ => Err(RingError::AddressStringRequired(self.host_port())),
        }
    }

    /// Java's `InetSocketAddress.getHostName()`: the part of the address string before
    /// `/` when it is not empty, else the host as configured.
    pub fn java_host_name(&self) -> String {
        match &self.address {
            Some(a) => match a.split_once('/') {
                Some((name, _)) if !name.is_empty() => name.to_string(),
                _ => self.host.clone(),
            },
            None => self.host.clone(),
        }
    }

    /// The host name libmemcached/twemproxy hash for ketama points: `host` when the port
    /// is 11211, else `host:port`.
    pub fn libmemcached_name(&self) -> String {
        if self.port == DEFAULT_PORT {
            self.host.clone()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl fmt::Display for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.host_port())
    }
}

impl FromStr for Server {
    type Err = RingError;

    /// Parses `host:port[:weight][@java_address][ name]`; IPv6 hosts go in brackets
    /// (`[::1]:11211:1`). Weight defaults to 1.
    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let bad = |reason| RingError::BadServerSpec {
            spec: spec.to_string(),
            reason,
        };
        let spec_trim = spec.trim();
        let (main, name) = match spec_trim.split_once(char::is_whitespace) {
            Some((m, n)) => (m, Some(n.trim().to_string())),
            None => (spec_trim, None),
        };
        let (main, address) = match main.split_once('@') {
            Some((m, a)) if !a.is_empty() => (m, Some(a.to_string())),
            Some(_) => return Err(bad("empty address after '@'")),
            None => (main, None),
        };
        let (host, rest) = if let Some(stripped) = main.strip_prefix('[') {
            let (h, r) = stripped
                .split_once(']')
                .ok_or_else(|| bad("unclosed '['"))?;
            let r = r
                .strip_prefix(':')
                .ok_or_else(|| bad("expected ':' after ']'"))?;
            (h, r)
        } else {
            main.split_once(':')
                .ok_or_else(|| bad("expected host:port"))?
        };
        if host.is_empty() {
            return Err(bad("empty host"));
        }
        let mut parts = rest.split(':');
        let port = parts
            .next()
            .and_then(|p| p.parse::<u16>().ok())
            .ok_or_else(|| bad("port must be a number 0-65535"))?;
        let weight = match parts.next() {
            Some(w) => w
                .parse::<u32>()
                .map_err(|_| bad("weight must be a non-negative integer"))?,
            None => 1,
        };
        if parts.next().is_some() {
            return Err(bad("too many ':' fields"));
        }
        Ok(Server {
            host: host.to_string(),
            port,
            weight,
            address,
            name,
        })
    }
}

/// Parses a comma-separated server list (`a:11211:1,b:11211:2`).
pub fn parse_server_list(list: &str) -> Result<Vec<Server>, RingError> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::parse)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_specs() {
        let s: Server = "10.0.0.1:11211:2".parse().unwrap();
        assert_eq!((s.host.as_str(), s.port, s.weight), ("10.0.0.1", 11211, 2));
        assert_eq!(s.java_address().unwrap(), "10.0.0.1/10.0.0.1:11211");
        let s: Server = "[::1]:11212".parse().unwrap();
        assert_eq!((s.host.as_str(), s.port, s.weight), ("::1", 11212, 1));
        let s: Server = "localhost:11212:1@localhost/127.0.0.1:11212 cache1"
            .parse()
            .unwrap();
        assert_eq!(s.address.as_deref(), Some("localhost/127.0.0.1:11212"));
        assert_eq!(s.name.as_deref(), Some("cache1"));
        assert_eq!(s.java_host_name(), "localhost");
        assert!("nohost".parse::<Server>().is_err());
        assert!("h:99999".parse::<Server>().is_err());
        assert!("h:1:x".parse::<Server>().is_err());
        assert!(":1".parse::<Server>().is_err());
    }
}
