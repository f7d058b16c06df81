//! One server under test as the fuzzer talks to it: a text and a binary connection, each
//! command followed by a sentinel whose reply marks where the command's reply ends.
//!
//! The sentinel is `mn` on the text connection (memcached flushes at once and answers
//! `MN`) and a binary `NOOP` with its own opaque on the binary one. Whatever arrives
//! before the sentinel's reply is the command's reply, so `noreply`, quiet mode and
//! swallowed data blocks are compared too (an empty reply is a reply). A server that
//! closes the connection, or does not answer the sentinel within [`STUCK_AFTER`], ends
//! the reply with [`End`]; the connection is then dropped and the next command opens a
//! new one.

use super::canon::{self, CasBook, End, Reply};
use super::case::{Channel, Command};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long a server may take to answer the sentinel. memcached answers in microseconds;
/// no reply by then means it is waiting for bytes that will never come.
pub const STUCK_AFTER: Duration = Duration::from_millis(300);
/// The opaque of the binary sentinel `NOOP` (commands use other opaques).
const SENTINEL_OPAQUE: u32 = 0x5e47_1e10;
/// A reply longer than this is cut off (no generated command gets near it).
const MAX_REPLY: usize = 4 << 20;

/// The binary sentinel: a `NOOP` request.
fn binary_sentinel() -> [u8; 24] {
    let mut p = [0u8; 24];
    p[0] = 0x80;
    p[1] = 0x0a;
    p[12..16].copy_from_slice(&SENTINEL_OPAQUE.to_be_bytes());
    p
}

/// How many `MN` replies a text request brings: one per line that is an `mn` command (its
/// first space-separated token is exactly `mn`, as memcached reads it), plus the
/// sentinel's. A command's own `mn` answers before the sentinel, often in its own packet,
/// so the reply ends at the last of them.
pub fn expected_mn(request: &[u8]) -> usize {
    // memcached refuses a line shorter than four bytes with its `\n` before reading it.
    let lines = request
        .split_inclusive(|&b| b == b'\n')
        .filter(|l| l.ends_with(b"\n") && l.len() >= 4);
    1 + lines
        .filter(|l| {
            let body = l.strip_suffix(b"\n").unwrap_or(l);
            let body = body.strip_suffix(b"\r").unwrap_or(body);
            body.split(|&b| b == b' ').next() == Some(&b"mn"[..])
        })
        .count()
}

/// Where the sentinel's reply starts, once `buf` holds `want` lines `MN` and ends with the
/// last of them.
fn text_done(buf: &[u8], want: usize) -> Option<usize> {
    let n = buf.len();
    if !(buf.ends_with(b"MN\r\n") && (n == 4 || buf[..n - 4].ends_with(b"\n"))) {
        return None;
    }
    let seen = buf
        .split_inclusive(|&b| b == b'\n')
        .filter(|l| *l == b"MN\r\n")
        .count();
    (seen >= want).then(|| n - 4)
}

/// Whether `buf` ends with the binary sentinel's response; its start if so. Walks whole
/// packets from the start, so a value that happens to contain the sentinel's bytes is
/// never mistaken for it.
fn binary_done(buf: &[u8], _want: usize) -> Option<usize> {
    let mut pos = 0;
    while let Some(h) = buf.get(pos..pos + 24) {
        let body = u32::from_be_bytes([h[8], h[9], h[10], h[11]]) as usize;
        let end = pos + 24 + body;
        if end > buf.len() {
            return None;
        }
        if h[0] == 0x81
            && h[1] == 0x0a
            && h[12..16] == SENTINEL_OPAQUE.to_be_bytes()
            && end == buf.len()
        {
            return Some(pos);
        }
        pos = end;
    }
    None
}

/// A server: its address, open connections and the CAS uniques it showed.
pub struct Peer {
    addr: SocketAddr,
    text: Option<TcpStream>,
    binary: Option<TcpStream>,
    /// The `MN` replies the last text request brings ([`expected_mn`]).
    want_mn: usize,
    /// The CAS uniques this server showed.
    pub book: CasBook,
}

impl Peer {
    /// A server at `addr`; connections are opened when first needed.
    pub fn new(addr: SocketAddr) -> Peer {
        Peer {
            addr,
            text: None,
            binary: None,
            want_mn: 1,
            book: CasBook::default(),
        }
    }

    fn connect(&self, channel: Channel) -> std::io::Result<TcpStream> {
        let s = TcpStream::connect_timeout(&self.addr, Duration::from_secs(2))?;
        s.set_nodelay(true)?;
        s.set_write_timeout(Some(Duration::from_secs(2)))?;
        if channel == Channel::Binary {
            // Bind the connection to the binary protocol with a first packet that is
            // surely binary: memcached picks a connection's protocol from its first byte,
            // and a generated packet may start with a bad magic byte.
            let mut s2 = s.try_clone()?;
            s2.write_all(&binary_sentinel())?;
            let got = read_until(&mut s2, binary_done, 1)?;
            if got.1.is_some() {
                return Err(std::io::Error::other("no answer to the first NOOP"));
            }
        }
        Ok(s)
    }

    /// Sends `cmd` and its sentinel, with the CAS holes filled from this server's book.
    /// Nothing is read: [`Peer::receive`] does that, so two servers can work at once.
    pub fn send(&mut self, cmd: &Command) -> std::io::Result<()> {
        let bytes = cmd.render(|r| self.book.resolve(r));
        if cmd.channel == Channel::Text {
            self.want_mn = expected_mn(&bytes);
        }
        let open = match cmd.channel {
            Channel::Text => self.text.is_some(),
            Channel::Binary => self.binary.is_some(),
        };
        let fresh = if open {
            None
        } else {
            Some(self.connect(cmd.channel)?)
        };
        let slot = match cmd.channel {
            Channel::Text => &mut self.text,
            Channel::Binary => &mut self.binary,
        };
        if let Some(s) = fresh {
            *slot = Some(s);
        }
        let Some(stream) = slot.as_mut() else {
            return Err(std::io::Error::other("no connection"));
        };
        let mut all = bytes;
        match cmd.channel {
            Channel::Text => all.extend_from_slice(b"mn\r\n"),
            Channel::Binary => all.extend_from_slice(&binary_sentinel()),
        }
        match stream.write_all(&all) {
            // A server may close while we write (a command it refuses); what it sent
            // before is still readable.
            Err(e) if matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset) => {
                Ok(())
            }
            other => other,
        }
    }

    /// Reads the reply to the command last sent on `cmd`'s connection, in canonical form.
    pub fn receive(&mut self, cmd: &Command) -> Reply {
        let slot = match cmd.channel {
            Channel::Text => &mut self.text,
            Channel::Binary => &mut self.binary,
        };
        let (raw, end) = match slot.as_mut() {
            None => (Vec::new(), Some(End::Closed)),
            Some(s) => match cmd.channel {
                Channel::Text => read_until(s, text_done, self.want_mn),
                Channel::Binary => read_until(s, binary_done, 1),
            }
            .unwrap_or((Vec::new(), Some(End::Closed))),
        };
        if end.is_some() {
            *slot = None;
        }
        let key = cmd.key.as_deref();
        let mut reply = match cmd.channel {
            Channel::Text => canon::text(&raw, key, &mut self.book),
            Channel::Binary => canon::binary(&raw, key, &mut self.book),
        };
        if let Some(e) = end {
            reply.end(e);
        }
        reply
    }

    /// Closes both connections (the next command opens new ones).
    pub fn disconnect(&mut self) {
        self.text = None;
        self.binary = None;
    }
}

/// Reads until `done` finds the sentinel's reply (returning what came before it), the
/// server closes the connection, or [`STUCK_AFTER`] passes.
fn read_until(
    s: &mut TcpStream,
    done: fn(&[u8], usize) -> Option<usize>,
    want: usize,
) -> std::io::Result<(Vec<u8>, Option<End>)> {
    let deadline = Instant::now() + STUCK_AFTER;
    let mut got = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        if let Some(cut) = done(&got, want) {
            got.truncate(cut);
            return Ok((got, None));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || got.len() > MAX_REPLY {
            return Ok((got, Some(End::Stuck)));
        }
        s.set_read_timeout(Some(left))?;
        match s.read(&mut buf) {
            Ok(0) => return Ok((got, Some(End::Closed))),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return Ok((got, Some(End::Closed))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_sentinel_only_at_a_line_start() {
        assert_eq!(text_done(b"MN\r\n", 1), Some(0));
        assert_eq!(text_done(b"HD\r\nMN\r\n", 1), Some(4));
        assert_eq!(text_done(b"HD kMN\r\n", 1), None);
        assert_eq!(text_done(b"HD\r\nMN\r", 1), None);
        assert_eq!(text_done(b"MN\r\n", 2), None);
        assert_eq!(text_done(b"MN\r\nMN\r\n", 2), Some(4));
    }

    #[test]
    fn mn_lines_are_counted_as_memcached_reads_them() {
        assert_eq!(expected_mn(b"get a\r\n"), 1);
        assert_eq!(expected_mn(b"mn\r\n"), 2);
        assert_eq!(expected_mn(b"mn x\nmn\r\n"), 3);
        assert_eq!(expected_mn(b" mn\r\nmnx\r\nmn\r\r\nmn"), 1);
        assert_eq!(expected_mn(b"mn\n"), 1, "too short to be read");
        assert_eq!(expected_mn(b"mn \n"), 2);
    }

    #[test]
    fn binary_sentinel_is_found_by_walking_packets() {
        let mut noop = binary_sentinel();
        noop[0] = 0x81;
        // A packet whose value is the sentinel's bytes is not the sentinel.
        let mut pkt = vec![0x81, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 24];
        pkt.extend_from_slice(&[0; 12]);
        pkt.extend_from_slice(&noop);
        assert_eq!(binary_done(&pkt, 1), None);
        pkt.extend_from_slice(&noop);
        assert_eq!(binary_done(&pkt, 1), Some(48));
    }
}
