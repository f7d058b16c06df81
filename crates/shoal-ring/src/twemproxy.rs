//! twemproxy-specific server handling that is not part of a distribution itself.
//!
//! twemproxy 0.5.0 (`nc_conf.c`, `conf_validate_server`) sorts each pool's servers by
//! name before building any distribution: by name length first, then bytewise
//! (`string_compare`). The name is the configured server name, else `host` when the port
//! is 11211, else `host:port`. The sorted order is the server order its `modula` and
//! `random` distributions index, so a twemproxy-compatible router must use it too.

use crate::Server;

/// The name twemproxy sorts and (for ketama) hashes a server by: its configured name,
/// else [`Server::libmemcached_name`].
pub fn server_name(server: &Server) -> String {
    server
        .name
        .clone()
        .unwrap_or_else(|| server.libmemcached_name())
}

/// The permutation twemproxy applies to a configured server list: `order[i]` is the
/// configuration index of the server twemproxy puts at position `i`. Names compare by
/// length, then bytes; twemproxy rejects duplicate names, and for them this keeps
/// configuration order.
pub fn server_order(servers: &[Server]) -> Vec<usize> {
    let names: Vec<String> = servers.iter().map(server_name).collect();
    let mut order: Vec<usize> = (0..servers.len()).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (names[a].as_bytes(), names[b].as_bytes());
        x.len().cmp(&y.len()).then_with(|| x.cmp(y))
    });
    order
}

/// `servers` in twemproxy's order (see [`server_order`]).
pub fn sorted_servers(servers: &[Server]) -> Vec<Server> {
    server_order(servers)
        .into_iter()
        .map(|i| servers[i].clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_by_length_then_bytes() {
        let servers = vec![
            Server::new("127.0.0.1", 41087),
            Server::new("127.0.0.1", 9999),
            Server::new("127.0.0.1", 11211),
            Server::new("127.0.0.1", 22222).with_name("b"),
            Server::new("127.0.0.1", 33333).with_name("a"),
            Server::new("127.0.0.1", 46213),
        ];
        // Names: 127.0.0.1:41087, 127.0.0.1:9999, 127.0.0.1, b, a, 127.0.0.1:46213.
        assert_eq!(server_order(&servers), vec![4, 3, 2, 1, 0, 5]);
    }
}
