//! memcached's UDP protocol (`-U`): each datagram is an 8-byte frame header and then
//! requests, text or binary, as on a connection; the replies go back to the sender split
//! into datagrams of at most 1400 bytes, each with its own frame header.
//!
//! The frame header is four big-endian 16-bit fields: the request id (echoed in every
//! reply datagram), the datagram's sequence number, the total datagrams in the message
//! and a reserved 0. As memcached, a request spanning several datagrams (total not 1)
//! is dropped, and so is a datagram of 8 bytes or fewer.
//!
//! A datagram is served as a connection of its own that ends with the datagram: its
//! requests run through the same code as a TCP connection's (`conn::serve`) over an
//! in-memory stream, so every command answers over UDP exactly as over TCP. One thread
//! serves the socket with its own store writer and counters, as memcached gives UDP its
//! own connection on a worker thread.

use crate::conns::ConnInfo;
use crate::worker::{Shared, Worker};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The frame header's size.
const HEADER: usize = 8;
/// The largest reply datagram, header included (memcached's `UDP_MAX_PAYLOAD_SIZE`).
const MAX_DATAGRAM: usize = 1400;
/// Reply bytes per datagram.
const DATA_PER_DATAGRAM: usize = MAX_DATAGRAM - HEADER;
/// The largest datagram read (UDP's own limit).
const MAX_REQUEST: usize = 65_536;

/// Binds the UDP socket `-U` asks for on the `-l` address (`-U -1`: any free port), or
/// none (`-U 0`, or a unix socket, which turns the network off as in memcached).
pub fn bind(settings: &crate::Settings) -> std::io::Result<Option<std::net::UdpSocket>> {
    let Some(port) = settings.udp_port.filter(|_| settings.unix_socket.is_none()) else {
        return Ok(None);
    };
    let socket = std::net::UdpSocket::bind(SocketAddr::new(settings.listen, port))?;
    socket.set_nonblocking(true)?;
    Ok(Some(socket))
}

/// `stats conns`' name for the socket: `udp:` or `udp6:` and its address.
pub fn label(socket: &std::net::UdpSocket) -> String {
    match socket.local_addr() {
        Ok(a) if a.is_ipv6() => format!("udp6:{a}"),
        Ok(a) => format!("udp:{a}"),
        Err(_) => "udp:?".to_string(),
    }
}

/// Starts the thread serving `socket` until shutdown.
pub fn start(
    shared: Arc<Shared>,
    socket: std::net::UdpSocket,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("shoal-udp".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!("UDP: cannot start its runtime: {e}");
                    return;
                }
            };
            rt.block_on(serve(shared, socket));
        })
}

/// Answers datagrams until shutdown.
async fn serve(shared: Arc<Shared>, socket: std::net::UdpSocket) {
    let socket = match tokio::net::UdpSocket::from_std(socket) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("UDP: {e}");
            return;
        }
    };
    let worker = Worker::new(&shared, false);
    // The one connection all datagrams share, as in memcached, under the id `stats
    // conns` lists the socket with.
    let Some(label) = shared.udp_label.clone() else {
        return;
    };
    let info = shared.conns.detached(shared.udp_conn_id(), label);
    let mut shutdown = shared.shutdown_signal();
    // A shutdown begun before the subscription above sends no change to wait for; it set
    // `stopping` first, so this sees it.
    if shared.stopping() {
        return;
    }
    let mut buf = vec![0u8; MAX_REQUEST];
    loop {
        let (n, peer) = tokio::select! {
            _ = shutdown.changed() => return,
            r = socket.recv_from(&mut buf) => match r {
                Ok(r) => r,
                Err(e) => {
                    tracing::debug!("UDP receive: {e}");
                    continue;
                }
            },
        };
        let Some((request_id, payload)) = frame(&buf[..n]) else {
            continue;
        };
        crate::stats::ThreadStats::add(&worker.stats.bytes_read, HEADER as u64);
        let reply = answer(&worker, &info, payload).await;
        for datagram in datagrams(request_id, &reply) {
            match socket.send_to(&datagram, peer).await {
                Ok(_) => crate::stats::ThreadStats::add(&worker.stats.bytes_written, HEADER as u64),
                Err(e) => {
                    tracing::debug!("UDP send to {peer}: {e}");
                    break;
                }
            }
        }
        if shared.stopping() {
            return;
        }
    }
}

/// A datagram's request id and requests, or `None` for one memcached drops: 8 bytes or
/// fewer, or part of a multi-datagram request.
fn frame(datagram: &[u8]) -> Option<(u16, &[u8])> {
    if datagram.len() <= HEADER {
        return None;
    }
    let field = |i: usize| u16::from_be_bytes([datagram[i], datagram[i + 1]]);
    if field(4) != 1 {
        return None;
    }
    Some((field(0), &datagram[HEADER..]))
}

/// Runs `payload`'s requests as a connection that ends with them and returns every reply
/// byte they produced.
async fn answer(worker: &Worker, info: &ConnInfo, payload: &[u8]) -> Vec<u8> {
    // Large enough that a typical datagram's requests and replies pass without waiting;
    // larger replies stream through it while they are read below.
    let (mut client, mut server) = tokio::io::duplex(MAX_REQUEST);
    let serving = async move {
        crate::conn::serve(&mut server, worker, info).await;
        // Dropping the server end is the client's end-of-file.
        drop(server);
    };
    let talking = async {
        let mut reply = Vec::new();
        if client.write_all(payload).await.is_ok() {
            // End of input: the connection answers what it read, then ends.
            let _ = client.shutdown().await;
            let _ = client.read_to_end(&mut reply).await;
        }
        reply
    };
    let ((), reply) = tokio::join!(serving, talking);
    reply
}

/// `reply` split into datagrams with memcached's frame headers; none for an empty reply.
fn datagrams(request_id: u16, reply: &[u8]) -> Vec<Vec<u8>> {
    let chunks: Vec<&[u8]> = reply.chunks(DATA_PER_DATAGRAM).collect();
    // memcached caps the count at what the header can say.
    let total = u16::try_from(chunks.len()).unwrap_or(u16::MAX);
    chunks
        .iter()
        .take(usize::from(total))
        .enumerate()
        .map(|(seq, chunk)| {
            let mut d = Vec::with_capacity(HEADER + chunk.len());
            d.extend_from_slice(&request_id.to_be_bytes());
            // `seq` < `total` ≤ u16::MAX.
            d.extend_from_slice(&(seq as u16).to_be_bytes());
            d.extend_from_slice(&total.to_be_bytes());
            d.extend_from_slice(&[0, 0]);
            d.extend_from_slice(chunk);
            d
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_read_and_dropped_as_memcached() {
        assert_eq!(
            frame(b"\x00\x05\x00\x00\x00\x01\x00\x00get a\r\n"),
            Some((5, &b"get a\r\n"[..]))
        );
        // Too short, or one of several datagrams.
        assert_eq!(frame(b"\x00\x05\x00\x00\x00\x01\x00\x00"), None);
        assert_eq!(frame(b"\x00\x05\x00\x00\x00\x02\x00\x00get a\r\n"), None);
    }

    #[test]
    fn replies_split_into_numbered_datagrams() {
        let reply = vec![b'x'; DATA_PER_DATAGRAM * 2 + 10];
        let d = datagrams(0x1234, &reply);
        assert_eq!(d.len(), 3);
        for (i, datagram) in d.iter().enumerate() {
            assert_eq!(&datagram[..2], &[0x12, 0x34]);
            assert_eq!(&datagram[2..4], &(i as u16).to_be_bytes());
            assert_eq!(&datagram[4..6], &[0, 3]);
            assert!(datagram.len() <= MAX_DATAGRAM);
        }
        assert_eq!(d[2].len(), HEADER + 10);
        assert!(datagrams(1, b"").is_empty());
    }
}
