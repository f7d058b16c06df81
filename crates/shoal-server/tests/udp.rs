//! `-U`: memcached's UDP protocol against the real shoald, on 127.0.0.1 with timeouts.
//! memcached's own `t/udp.t` runs too, from `scripts/memcached-t-suite.sh`.

mod common;

use common::Server;
use std::net::UdpSocket;
use std::time::Duration;

/// A UDP port free when asked (its socket is closed before shoald binds it).
fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("a free UDP port")
        .port()
}

/// Sends `payload` as one datagram with request id `id` and returns the reply
/// datagrams' payloads in sequence order, checking every frame header.
fn request(sock: &UdpSocket, id: u16, payload: &[u8]) -> Vec<u8> {
    let mut datagram = Vec::new();
    datagram.extend_from_slice(&id.to_be_bytes());
    datagram.extend_from_slice(&[0, 0, 0, 1, 0, 0]);
    datagram.extend_from_slice(payload);
    sock.send(&datagram).expect("send");
    let mut parts: Vec<(u16, Vec<u8>)> = Vec::new();
    let mut total = None;
    let mut buf = [0u8; 2048];
    while total.is_none_or(|t| parts.len() < usize::from(t)) {
        let n = sock.recv(&mut buf).expect("a reply datagram in time");
        assert!((9..=1400).contains(&n), "datagram of {n} bytes");
        let field = |i: usize| u16::from_be_bytes([buf[i], buf[i + 1]]);
        assert_eq!(field(0), id, "request id echoed");
        assert_eq!(field(6), 0, "reserved");
        total = Some(field(4));
        parts.push((field(2), buf[8..n].to_vec()));
    }
    parts.sort();
    parts.into_iter().flat_map(|(_, p)| p).collect()
}

#[test]
fn udp_answers_text_and_binary_as_tcp_does() {
    let port = free_udp_port();
    let server = Server::with_args(&["-U", &port.to_string()]);
    let mut c = server.conn();
    assert_eq!(c.stats("settings")["udpport"], port.to_string());
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind");
    sock.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    sock.connect(("127.0.0.1", port)).expect("connect");

    assert_eq!(
        request(&sock, 7, b"set foo 0 0 3\r\nbar\r\n"),
        b"STORED\r\n"
    );
    c.rt(b"get foo\r\n", b"VALUE foo 0 3\r\nbar\r\nEND\r\n");
    assert_eq!(
        request(&sock, 8, b"get foo\r\n"),
        b"VALUE foo 0 3\r\nbar\r\nEND\r\n"
    );
    // A reply longer than a datagram comes in numbered pieces.
    let big = vec![b'v'; 5000];
    c.send(b"set big 0 0 5000\r\n");
    c.send(&big);
    c.rt(b"\r\n", b"STORED\r\n");
    let mut want = b"VALUE big 0 5000\r\n".to_vec();
    want.extend_from_slice(&big);
    want.extend_from_slice(b"\r\nEND\r\n");
    assert_eq!(request(&sock, 9, b"get big\r\n"), want);
    // Binary: a get of foo (opcode 0, key length 3) answers status 0 with its value.
    let mut packet = vec![0x80, 0x00, 0x00, 0x03, 0, 0, 0, 0, 0, 0, 0, 3];
    packet.extend_from_slice(&[0; 12]);
    packet.extend_from_slice(b"foo");
    let reply = request(&sock, 10, &packet);
    assert_eq!(reply[0], 0x81);
    assert_eq!(&reply[6..8], &[0, 0], "status");
    assert!(reply.ends_with(b"bar"));
    // memcached drops a request spanning datagrams; the next one is still answered.
    sock.send(&[0, 11, 0, 0, 0, 2, 0, 0, b'x']).expect("send");
    assert_eq!(
        request(&sock, 12, b"version\r\n").get(..8),
        Some(&b"VERSION "[..])
    );
    // A watch answers but cannot stream over datagrams; the socket keeps serving.
    assert_eq!(request(&sock, 13, b"watch\r\n"), b"OK\r\n");
    assert_eq!(
        request(&sock, 14, b"get foo\r\n"),
        b"VALUE foo 0 3\r\nbar\r\nEND\r\n"
    );
    // stats conns lists the socket.
    let conns = c.request_until(b"stats conns\r\n", b"END\r\n");
    let conns = String::from_utf8_lossy(&conns);
    assert!(
        conns.contains(&format!(":addr udp:127.0.0.1:{port}\r\n")),
        "{conns}"
    );
}
