//! A client connection of a queue pool (`queue: true`): shoal-queued (or Kestrel)
//! servers used the Kestrel way, as kestrel-client does from inside an application.
//!
//! Kestrel servers share nothing: every server holds every queue, and clients spread the
//! load. Each client connection of a queue pool gets its own
//! [`QueueClient`](shoal_client::queue_client::QueueClient) over the pool's servers, so:
//! - a `set` goes to a random server; one answered `SERVER_ERROR` (a server in `status
//!   readonly`, a full disk) or cut by a failed connection is tried on the others, and
//!   that server gets no sets for a while: a server being drained is still read from;
//! - reads are sticky: `gets_per_server` reads on one server, then the next; an empty
//!   read moves on at once, so every server is drained;
//! - a reliable read (`/open`) stays on the backend connection that opened it, which
//!   belongs to this client connection alone (the server gives an open read back when
//!   the connection holding it closes, so backend connections cannot be shared as a
//!   cache pool's are); `/close` and `/abort` go there, and closing this client
//!   connection closes it, giving the read back;
//! - `delete <q>`, `flush <q>` and `flush_all` reach every server.
//!
//! Replies are Kestrel's: `VALUE <queue> 0 <bytes>` (the bare queue name, flags 0), `END`
//! after `delete` and `flush`. Errors a backend gave come back as they were
//! (`SERVER_ERROR ...`, which kestrel-client retries); a failure of the proxy's own
//! connections is `SERVER_ERROR <what failed>`. A second `/open` on a queue with a read
//! already open, or a plain read with one open, is answered `ERROR` and the connection
//! closed, as Kestrel does with one open transaction per queue. Cache commands (`incr`,
//! `cas`, meta commands, ...) and the binary protocol mean nothing here and are refused
//! (`ERROR`; a binary client is disconnected).

use shoal_client::queue_client::{QueueClient, QueueError};
use shoal_net::connection::{self, End, Handler, Output, Step};
use shoal_net::peer::PeerWatch;
use shoal_net::{Budget, NoValue};
use shoal_protocol::kestrel::{parse_key, ReadOptions};
use shoal_protocol::{parse, reply, Parsed, Request, StoreKind};
use std::os::fd::RawFd;
use tokio::io::{AsyncRead, AsyncWrite};

use super::{LIMITS, REFUSE_VALUES};
use crate::config::{PoolConfig, QueuePool};
use crate::route::Target;
use crate::stats::incr;

/// How long a backend may take to answer when the pool sets no `timeout`: a queue
/// client must not wait forever on a server that stopped answering, since its sets
/// should go elsewhere.
const DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The reply to a queue name a server would refuse (shoal-queued's words).
const BAD_NAME: &[u8] = b"CLIENT_ERROR bad queue name\r\n";

/// One client connection's queue client and what ends it.
struct QueueSession {
    client: QueueClient,
    target: Target,
    client_err: bool,
    /// The client's socket, watched during blocking reads.
    peer: Option<RawFd>,
}

/// Serves one client of queue pool `target` until it quits or disconnects.
pub(super) async fn serve<S>(
    mut stream: S,
    target: Target,
    queue: QueuePool,
    budget: &Budget,
    peer: Option<RawFd>,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let config = target.config();
    let client = match build_client(config, queue) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(pool = %config.name, "queue pool: {e}");
            return;
        }
    };
    let conn_config = connection::Config {
        idle_timeout: config.client_idle_timeout,
        ..connection::Config::default()
    };
    let mut s = QueueSession {
        client,
        target: target.clone(),
        client_err: false,
        peer,
    };
    let end = connection::serve(&mut stream, &mut s, budget, &conn_config).await;
    match end {
        End::Eof => incr(&target.stats().client_eof),
        End::Error | End::LineTooLong => s.client_err = true,
        _ => {}
    }
    if s.client_err {
        incr(&target.stats().client_err);
    }
}

fn build_client(config: &PoolConfig, queue: QueuePool) -> Result<QueueClient, QueueError> {
    let servers = config.servers.iter().map(|s| {
        if s.host.contains(':') {
            format!("[{}]:{}", s.host, s.port)
        } else {
            format!("{}:{}", s.host, s.port)
        }
    });
    QueueClient::builder(servers)
        .gets_per_server(queue.gets_per_server)
        .timeout(config.timeout.unwrap_or(DEFAULT_TIMEOUT))
        .retry_delay(config.server_retry_timeout)
        .build()
}

impl Handler for QueueSession {
    type Value = NoValue;

    async fn request<W: AsyncWrite + Unpin>(
        &mut self,
        input: &[u8],
        refused: bool,
        out: &mut Output<'_, W, NoValue>,
    ) -> Step {
        if input.first() == Some(&shoal_protocol::binary::REQUEST_MAGIC) {
            self.client_err = true;
            return Step::Close;
        }
        if let Some(step) = self.queue_command(input, out).await {
            return step;
        }
        match parse(input, if refused { &REFUSE_VALUES } else { &LIMITS }) {
            Parsed::Incomplete { needed } => Step::Incomplete { needed },
            Parsed::Request { request, consumed } => {
                if self.execute(request, out).await {
                    Step::Done {
                        consumed,
                        swallow: 0,
                    }
                } else {
                    Step::Close
                }
            }
            Parsed::Error {
                error,
                consumed,
                swallow,
                close,
                silent,
            } => {
                if !silent {
                    out.buf().extend_from_slice(error.reply());
                }
                if close {
                    self.client_err = true;
                    return Step::Close;
                }
                Step::Done { consumed, swallow }
            }
            Parsed::TooLarge {
                consumed,
                swallow,
                noreply,
                ..
            } => {
                if !noreply {
                    out.buf().extend_from_slice(if refused {
                        reply::OUT_OF_MEMORY_STORING
                    } else {
                        reply::OBJECT_TOO_LARGE
                    });
                }
                Step::Done { consumed, swallow }
            }
        }
    }

    fn line_too_long(&self) -> &'static [u8] {
        reply::OUT_OF_MEMORY_READING
    }
}

impl QueueSession {
    /// `flush <queue>`, which memcached's parser does not know: handled here when the
    /// request line is complete and is one. `None`: not such a request.
    async fn queue_command<W: AsyncWrite + Unpin>(
        &mut self,
        input: &[u8],
        out: &mut Output<'_, W, NoValue>,
    ) -> Option<Step> {
        let end = memchr::memchr(b'\n', input)?;
        let line = input[..end].strip_suffix(b"\r").unwrap_or(&input[..end]);
        let mut words = line.split(|&b| b == b' ').filter(|w| !w.is_empty());
        if words.next() != Some(b"flush".as_slice()) {
            return None;
        }
        let (Some(queue), None) = (words.next(), words.next()) else {
            out.buf().extend_from_slice(reply::ERROR);
            return Some(done(end + 1));
        };
        match std::str::from_utf8(queue).ok().filter(|q| valid_name(q)) {
            Some(q) => {
                let replies = self.client.broadcast(&format!("flush {q}")).await;
                everywhere(out.buf(), replies, reply::END);
            }
            None => out.buf().extend_from_slice(BAD_NAME),
        }
        Some(done(end + 1))
    }

    /// Acts on one parsed request; false closes the connection.
    async fn execute<W: AsyncWrite + Unpin>(
        &mut self,
        request: Request<'_>,
        out: &mut Output<'_, W, NoValue>,
    ) -> bool {
        match request {
            Request::Get { keys, .. } => {
                for key in keys.iter() {
                    // What is ready goes out before the next read: a read may wait
                    // (`/t=`), and the replies of a long multi-get must not pile up. A
                    // client gone by then ends the request before more is taken.
                    if !out.is_empty() && out.flush().await.is_err() {
                        return false;
                    }
                    match self.read(key, out.buf()).await {
                        KeyStep::Next => {}
                        // An error line ends the reply, as a server's would.
                        KeyStep::Stop => return true,
                        KeyStep::Close => return false,
                    }
                }
                reply::end(out.buf());
            }
            Request::Store {
                kind: StoreKind::Set,
                key,
                exptime,
                data,
                noreply,
                ..
            } => {
                let r = match std::str::from_utf8(key).ok().filter(|q| valid_name(q)) {
                    None => BAD_NAME.to_vec(),
                    // A negative exptime has expired already: the servers would accept
                    // the message and drop it, so it is answered as they would answer.
                    Some(_) if exptime < 0 => reply::STORED.to_vec(),
                    Some(q) => {
                        // Otherwise the exptime goes to the server as sent, which reads
                        // it by its own rule (memcached's, or Kestrel's in --kestrel
                        // mode).
                        let exptime = u32::try_from(exptime).unwrap_or(u32::MAX);
                        match self.client.set(q, data, exptime).await {
                            Ok(_) => reply::STORED.to_vec(),
                            Err(e) => self.failed(&e),
                        }
                    }
                };
                if !noreply {
                    out.buf().extend_from_slice(&r);
                }
            }
            Request::Delete { key, noreply } => {
                let mut buf = Vec::new();
                match std::str::from_utf8(key).ok().filter(|q| valid_name(q)) {
                    Some(q) => {
                        let replies = self.client.broadcast(&format!("delete {q}")).await;
                        // Deleting a queue ends the open reads on it, ours included.
                        self.client.forget_open(q);
                        everywhere(&mut buf, replies, reply::END);
                    }
                    None => buf.extend_from_slice(BAD_NAME),
                }
                if !noreply {
                    out.buf().extend_from_slice(&buf);
                }
            }
            Request::FlushAll { noreply, .. } => {
                let mut buf = Vec::new();
                let replies = self.client.broadcast("flush_all").await;
                everywhere(&mut buf, replies, b"Flushed all queues.\r\n");
                if !noreply {
                    out.buf().extend_from_slice(&buf);
                }
            }
            Request::Version => reply::version(
                out.buf(),
                concat!("shoal-proxy-", env!("CARGO_PKG_VERSION")).as_bytes(),
            ),
            Request::Quit => return false,
            _ => out.buf().extend_from_slice(reply::ERROR),
        }
        true
    }

    /// One key of a `get`, with its Kestrel options.
    async fn read(&mut self, key: &[u8], out: &mut Vec<u8>) -> KeyStep {
        let opts = match parse_key(key) {
            Ok(o) => o,
            Err(e) => {
                // Kestrel (and shoal-queued) refuse bad options with a disconnect.
                out.extend_from_slice(format!("CLIENT_ERROR {e}\r\n").as_bytes());
                self.client_err = true;
                return KeyStep::Close;
            }
        };
        let Some(queue) = std::str::from_utf8(opts.queue)
            .ok()
            .filter(|q| valid_name(q))
        else {
            out.extend_from_slice(BAD_NAME);
            return KeyStep::Stop;
        };
        let held = self.client.open_on(queue).is_some();
        if held && !opts.close && !opts.abort && (opts.open || !opts.peek) {
            // One open read per queue and connection, as Kestrel allows by default:
            // another `/open`, or a plain read, is refused with a disconnect.
            out.extend_from_slice(reply::ERROR);
            self.client_err = true;
            return KeyStep::Close;
        }
        self.client.set_read_wait(opts.timeout);
        // A read that may wait is raced against the client leaving: if it leaves first,
        // the session ends, and closing its backend connections ends the server's wait
        // too, so no message is taken for a client that is gone.
        let watch = opts
            .timeout
            .and_then(|_| self.peer.and_then(PeerWatch::new));
        let taken = {
            let take = self.take(queue, &opts);
            let gone = async {
                match &watch {
                    Some(w) => w.closed().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                r = take => Some(r),
                _ = gone => None,
            }
        };
        let Some(taken) = taken else {
            return KeyStep::Close;
        };
        match taken {
            Ok(Some(data)) => reply::value(out, queue.as_bytes(), 0, &data, None),
            Ok(None) => {}
            Err(e) => {
                out.extend_from_slice(&self.failed(&e));
                // A server that refused the read (`ERROR`, `CLIENT_ERROR`) closed the
                // proxy's connection, as Kestrel does: this client's goes too.
                return match e {
                    QueueError::Refused { .. } => KeyStep::Close,
                    _ => KeyStep::Stop,
                };
            }
        }
        KeyStep::Next
    }

    /// The reply to a failed request, counted in the pool's `forward_error` when no
    /// server could serve it (a server's own answer, such as `NOT_STORED`, is not).
    fn failed(&self, e: &QueueError) -> Vec<u8> {
        if matches!(
            e,
            QueueError::Connection { .. } | QueueError::AllServersFailed { .. }
        ) {
            incr(&self.target.stats().forward_error);
        }
        error_reply(e)
    }

    async fn take(
        &mut self,
        queue: &str,
        opts: &ReadOptions<'_>,
    ) -> Result<Option<Vec<u8>>, QueueError> {
        if opts.abort {
            return self.client.abort(queue).await.map(|()| None);
        }
        if opts.open {
            // With `/close` too, the client confirms its open read and opens the next
            // in one request where it can (see QueueClient::get_open).
            return self.client.get_open(queue).await;
        }
        if opts.close {
            self.client.close(queue).await?;
            return Ok(None);
        }
        if opts.peek {
            return self.client.peek(queue).await;
        }
        self.client.get(queue).await
    }
}

/// What a `get` does after one of its keys.
enum KeyStep {
    /// Go on to the next key.
    Next,
    /// An error line was written: the reply ends there (no `END`).
    Stop,
    /// Close the connection after the replies so far.
    Close,
}

fn done(consumed: usize) -> Step {
    Step::Done {
        consumed,
        swallow: 0,
    }
}

/// shoal-queued's rule for a queue name (shoal-client checks it again).
fn valid_name(q: &str) -> bool {
    !q.is_empty() && q.len() <= 128 && q.bytes().all(|b| b.is_ascii_graphic() && b != b'/')
}

/// The reply to a command sent to every server: `ok` when each answered without an
/// error, else the first error (a server's own error line, or `SERVER_ERROR` naming the
/// server the proxy could not reach), since the command did not take effect everywhere.
fn everywhere(out: &mut Vec<u8>, replies: Vec<Result<String, QueueError>>, ok: &[u8]) {
    for r in replies {
        match r {
            Ok(line) if line.ends_with("ERROR") || line.contains("ERROR ") => {
                out.extend_from_slice(line.as_bytes());
                out.extend_from_slice(b"\r\n");
                return;
            }
            Ok(_) => {}
            Err(e) => {
                out.extend_from_slice(&error_reply(&e));
                return;
            }
        }
    }
    out.extend_from_slice(ok);
}

/// A queue client error as a reply line: a server's own error line as it was, the
/// proxy's failures as `SERVER_ERROR` (transient: kestrel-client retries those).
fn error_reply(e: &QueueError) -> Vec<u8> {
    let line = match e {
        QueueError::Server { line, .. } | QueueError::Refused { line, .. } => line.clone(),
        QueueError::NotStored { .. } => "NOT_STORED".into(),
        QueueError::BadQueueName => return BAD_NAME.to_vec(),
        QueueError::AllServersFailed { last, .. } => match &**last {
            QueueError::Server { line, .. } => line.clone(),
            other => format!("SERVER_ERROR {other}"),
        },
        other => format!("SERVER_ERROR {other}"),
    };
    let mut v = line.into_bytes();
    v.extend_from_slice(b"\r\n");
    v
}
