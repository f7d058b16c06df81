//! memcached's `-l` syntax: lists of addresses, with or without ports, IPv6 in brackets or
//! bare, `*` and host names.

use super::{invalid, usage, ConfigError};
use std::net::{IpAddr, Ipv4Addr, ToSocketAddrs};

/// Parses memcached's `-l` values (repeatable; each a `,`/`;` separated list of `ADDR`,
/// `ADDR:PORT`, `[V6]`, `[V6]:PORT`, a bare IPv6 address, `*` or a host name) into the
/// addresses and ports shoald binds, in order (`port` is `-p`, for entries without one).
/// Repeats of one address and port are folded, as memcached folds repeated `-l`s.
pub(super) fn parse_listen(
    values: &[String],
    tls: bool,
    port: u16,
) -> Result<Vec<(IpAddr, u16)>, ConfigError> {
    let mut found: Vec<(IpAddr, u16)> = Vec::new();
    for spec in values.iter().flat_map(|v| v.split([',', ';'])) {
        let spec = spec.trim();
        if spec.is_empty() {
            continue;
        }
        let spec = match spec.strip_prefix("notls:") {
            Some(_) if !tls => {
                return Err(usage("'notls' option is valid only when SSL is enabled"))
            }
            Some(_) => {
                return Err(usage(format!(
                    "-l {spec}: shoald serves TLS on every listener, so a notls: listener \
                     is not supported"
                )))
            }
            None => spec,
        };
        let (host, named_port) = split_host_port(spec)?;
        let entry = (resolve_host(host)?, named_port.unwrap_or(port));
        if !found.contains(&entry) {
            found.push(entry);
        }
    }
    if found.is_empty() {
        found.push((IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    Ok(found)
}

/// Splits `-l` syntax into host and port the way memcached's `server_sockets` does.
fn split_host_port(spec: &str) -> Result<(&str, Option<u16>), ConfigError> {
    let port = |p: &str| -> Result<u16, ConfigError> {
        p.parse()
            .map_err(|_| invalid(format!("Invalid port number: \"{p}\"")))
    };
    if let Some(rest) = spec.strip_prefix('[') {
        let bad = || invalid(format!("Invalid IPV6 address: \"{spec}\""));
        let (host, after) = rest.split_once(']').ok_or_else(bad)?;
        return match after {
            "" => Ok((host, None)),
            _ => Ok((host, Some(port(after.strip_prefix(':').ok_or_else(bad)?)?))),
        };
    }
    match spec.split_once(':') {
        // Exactly one colon: HOST:PORT. More than one: an IPv6 address without a port.
        Some((host, p)) if !p.contains(':') => Ok((host, Some(port(p)?))),
        _ => Ok((spec, None)),
    }
}

/// The address for a `-l` host: an IP address, `*` (every IPv4 interface), `localhost`, or
/// a host name resolved as memcached resolves it (the first address, IPv4 preferred).
fn resolve_host(host: &str) -> Result<IpAddr, ConfigError> {
    let bad = || invalid(format!("invalid listen address {host:?}"));
    match host {
        "*" => return Ok(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
        "localhost" => return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        _ => {}
    }
    if let Ok(ip) = host.parse() {
        return Ok(ip);
    }
    // Only look up what could be a host name, so a typo fails at once, not after DNS.
    let hostname = !host.is_empty()
        && host.len() <= 253
        && host
            .split('.')
            .all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    if !hostname {
        return Err(bad());
    }
    let addrs: Vec<IpAddr> = (host, 0)
        .to_socket_addrs()
        .map_err(|_| bad())?
        .map(|a| a.ip())
        .collect();
    addrs
        .iter()
        .find(|ip| ip.is_ipv4())
        .or_else(|| addrs.first())
        .copied()
        .ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use crate::config::testing::settings;

    #[test]
    fn listen_syntax() {
        let l = |args: &[&str]| {
            settings(args).map(|s| (s.listen.to_string(), s.port.unwrap_or_default()))
        };
        assert_eq!(l(&["-l", "127.0.0.1"]), Ok(("127.0.0.1".into(), 11211)));
        assert_eq!(l(&["-l", "localhost"]), Ok(("127.0.0.1".into(), 11211)));
        assert_eq!(l(&["-l", "*"]), Ok(("0.0.0.0".into(), 11211)));
        assert_eq!(l(&["-l", "127.0.0.1:5"]), Ok(("127.0.0.1".into(), 5)));
        assert_eq!(l(&["-l", "[::1]:6"]), Ok(("::1".into(), 6)));
        assert_eq!(l(&["-l", "[::1]"]), Ok(("::1".into(), 11211)));
        assert_eq!(l(&["-l", "::1"]), Ok(("::1".into(), 11211)));
        // Repeats fold, as memcached folds them.
        assert_eq!(
            l(&["-l", "127.0.0.1", "-l", "127.0.0.1,127.0.0.1"]),
            Ok(("127.0.0.1".into(), 11211))
        );
        // An address given with and without the -p port is one listener.
        assert_eq!(
            l(&["-p", "7", "-l", "127.0.0.1", "-l", "127.0.0.1:7"]),
            Ok(("127.0.0.1".into(), 7))
        );
        // Several addresses: the first is `listen`, the others are listened on as well.
        let extra = |args: &[&str]| settings(args).map(|s| s.extra_listen);
        assert_eq!(
            extra(&["-l", "127.0.0.1", "-l", "127.0.0.1:7"]),
            Ok(vec!["127.0.0.1:7".parse().unwrap()])
        );
        assert_eq!(
            extra(&["-l", "127.0.0.1,::1,127.0.0.2"]),
            Ok(vec![
                "[::1]:11211".parse().unwrap(),
                "127.0.0.2:11211".parse().unwrap()
            ])
        );
        assert_eq!(extra(&["-l", "127.0.0.1"]), Ok(vec![]));
        assert!(l(&["-l", "not an address!"]).is_err());
    }
}
