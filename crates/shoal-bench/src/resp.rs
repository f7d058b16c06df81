//! Redis RESP2: `GET`/`SET` (and `LPUSH`/`RPOP` for queues, `DECR`) requests and replies.
//! No I/O.

use crate::text::Reply;
use crate::BenchError;

/// Appends an array of bulk strings: one command.
pub fn encode_command(buf: &mut Vec<u8>, args: &[&[u8]]) {
    buf.push(b'*');
    buf.extend_from_slice(args.len().to_string().as_bytes());
    buf.extend_from_slice(b"\r\n");
    for a in args {
        buf.push(b'$');
        buf.extend_from_slice(a.len().to_string().as_bytes());
        buf.extend_from_slice(b"\r\n");
        buf.extend_from_slice(a);
        buf.extend_from_slice(b"\r\n");
    }
}

fn line(buf: &[u8]) -> Option<(&[u8], usize)> {
    let nl = buf.iter().position(|&b| b == b'\n')?;
    let end = if nl > 0 && buf[nl - 1] == b'\r' {
        nl - 1
    } else {
        nl
    };
    Some((&buf[..end], nl + 1))
}

fn unexpected(l: &[u8]) -> BenchError {
    BenchError::Protocol(String::from_utf8_lossy(&l[..l.len().min(80)]).into_owned())
}

/// Parses one reply at the start of `buf`: a bulk string is a hit, a nil bulk a miss,
/// `+OK` or an integer stored/done, `-ERR ...` an error.
pub fn parse_reply(buf: &[u8]) -> Result<Option<(Reply, usize)>, BenchError> {
    let Some((l, n)) = line(buf) else {
        return Ok(None);
    };
    match l.first() {
        Some(b'+') | Some(b':') => Ok(Some((Reply::Stored, n))),
        Some(b'-') => Ok(Some((Reply::Error, n))),
        Some(b'$') => {
            let len: i64 = std::str::from_utf8(&l[1..])
                .ok()
                .and_then(|t| t.parse().ok())
                .ok_or_else(|| unexpected(l))?;
            if len < 0 {
                return Ok(Some((Reply::Miss, n)));
            }
            let need = usize::try_from(len)
                .ok()
                .and_then(|len| n.checked_add(len))
                .and_then(|x| x.checked_add(2))
                .ok_or_else(|| unexpected(l))?;
            if buf.len() < need {
                return Ok(None);
            }
            if &buf[need - 2..need] != b"\r\n" {
                return Err(unexpected(l));
            }
            Ok(Some((Reply::Hit, need)))
        }
        _ => Err(unexpected(l)),
    }
}

/// The `calls=` count of one command in `INFO commandstats` output.
pub fn command_calls(info: &str, command: &str) -> u64 {
    let prefix = format!("cmdstat_{command}:");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').find_map(|f| f.strip_prefix("calls=")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_commands() {
        let mut b = Vec::new();
        encode_command(&mut b, &[b"GET", b"k"]);
        assert_eq!(b, b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
    }

    #[test]
    fn parses_replies() {
        assert_eq!(parse_reply(b"+OK\r\n").unwrap(), Some((Reply::Stored, 5)));
        assert_eq!(parse_reply(b":12\r\n").unwrap(), Some((Reply::Stored, 5)));
        assert_eq!(parse_reply(b"$-1\r\n").unwrap(), Some((Reply::Miss, 5)));
        assert_eq!(parse_reply(b"-ERR x\r\n").unwrap(), Some((Reply::Error, 8)));
        let hit = b"$3\r\nabc\r\n";
        assert_eq!(parse_reply(hit).unwrap(), Some((Reply::Hit, 9)));
        for cut in 0..hit.len() {
            assert_eq!(parse_reply(&hit[..cut]).unwrap(), None);
        }
        assert!(parse_reply(b"$x\r\n").is_err());
        assert!(parse_reply(b"$1\r\nab\r\n").is_err());
        assert!(parse_reply(b"?\r\n").is_err());
    }

    #[test]
    fn reads_commandstats() {
        let info =
            "# Commandstats\r\ncmdstat_get:calls=42,usec=1\r\ncmdstat_set:calls=7,usec=2\r\n";
        assert_eq!(command_calls(info, "get"), 42);
        assert_eq!(command_calls(info, "set"), 7);
        assert_eq!(command_calls(info, "lpush"), 0);
    }
}
