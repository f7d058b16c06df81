//! The connection loop against a toy line protocol over in-memory pipes: the output bound
//! with a peer that never reads, a value refused by the budget, the idle timeout, and one
//! write for a pipeline.
//!
//! The protocol: `g\n` answers 64 KB; `p\n` answers `pong\n`; `s N\n` followed by N bytes
//! stores a value and answers `ok\n` (or `oom\n` when the budget refused it); `q\n` closes.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use shoal_net::connection::{serve, Config, End, Handler, Output, Step};
use shoal_net::{Budget, NoValue, OUTPUT_HIGH_WATER};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream, ReadBuf};

const BIG: usize = 64 * 1024;

#[derive(Default)]
struct Toy {
    handled: Arc<AtomicUsize>,
}

impl Handler for Toy {
    type Value = NoValue;

    async fn request<W: AsyncWrite + Unpin>(
        &mut self,
        input: &[u8],
        refused: bool,
        out: &mut Output<'_, W, NoValue>,
    ) -> Step {
        let Some(nl) = input.iter().position(|&b| b == b'\n') else {
            return Step::Incomplete { needed: 0 };
        };
        let line = &input[..nl];
        self.handled.fetch_add(1, Ordering::Relaxed);
        let done = Step::Done {
            consumed: nl + 1,
            swallow: 0,
        };
        match line {
            b"g" => {
                let len = out.len() + BIG;
                out.buf().resize(len, b'x');
                done
            }
            b"p" => {
                out.buf().extend_from_slice(b"pong\n");
                done
            }
            b"q" => Step::Close,
            _ => {
                let Some(len) = line
                    .strip_prefix(b"s ")
                    .and_then(|n| std::str::from_utf8(n).ok())
                    .and_then(|n| n.parse::<usize>().ok())
                else {
                    out.buf().extend_from_slice(b"error\n");
                    return done;
                };
                if refused {
                    out.buf().extend_from_slice(b"oom\n");
                    let here = (input.len() - nl - 1).min(len);
                    return Step::Done {
                        consumed: nl + 1 + here,
                        swallow: len - here,
                    };
                }
                if input.len() < nl + 1 + len {
                    self.handled.fetch_sub(1, Ordering::Relaxed);
                    return Step::Incomplete {
                        needed: nl + 1 + len,
                    };
                }
                out.buf().extend_from_slice(b"ok\n");
                Step::Done {
                    consumed: nl + 1 + len,
                    swallow: 0,
                }
            }
        }
    }

    fn line_too_long(&self) -> &'static [u8] {
        b"line too long\n"
    }
}

/// A stream that counts its writes.
struct Counting {
    inner: DuplexStream,
    writes: Arc<AtomicUsize>,
}

impl AsyncRead for Counting {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counting {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

fn run<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime")
        .block_on(f)
}

#[test]
fn a_peer_that_never_reads_stops_generation_at_the_high_water_mark() {
    run(async {
        let (mut client, mut server) = tokio::io::duplex(BIG);
        let budget = Budget::new(1 << 20);
        let mut toy = Toy::default();
        let handled = toy.handled.clone();
        let conn =
            tokio::spawn(
                async move { serve(&mut server, &mut toy, &budget, &Config::default()).await },
            );
        // 1,000 requests for 64 MB of replies, and nothing read.
        client.write_all(&b"g\n".repeat(1000)).await.expect("send");
        // Generation runs up to the mark (bounded wait) ...
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while handled.load(Ordering::Relaxed) < OUTPUT_HIGH_WATER / BIG {
            assert!(
                std::time::Instant::now() < deadline,
                "generation never started"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // ... and no further. On this one-thread runtime the connection task runs while
        // the test task waits, so a deliberate pause shows whether it would go on.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let n = handled.load(Ordering::Relaxed);
        // The mark, plus the request that crosses it, plus what the pipe holds.
        let bound = (OUTPUT_HIGH_WATER + BIG) / BIG + 1 + 1;
        assert!(
            n <= bound,
            "{n} requests handled for a peer that never reads"
        );
        assert!(!conn.is_finished());
        // Reading lets it go on, to the end.
        client.shutdown().await.expect("shutdown");
        let mut got = 0usize;
        let mut sink = vec![0u8; BIG];
        loop {
            match client.read(&mut sink).await.expect("read") {
                0 => break,
                k => got += k,
            }
        }
        assert_eq!(got, 1000 * BIG);
        assert_eq!(conn.await.expect("no panic"), End::Eof);
        assert_eq!(handled.load(Ordering::Relaxed), 1000);
    });
}

#[test]
fn a_value_past_the_budget_is_refused_and_skipped() {
    run(async {
        let (mut client, mut server) = tokio::io::duplex(1 << 20);
        let budget = Budget::new(100_000);
        let server_budget = budget.clone();
        let conn = tokio::spawn(async move {
            let mut toy = Toy::default();
            serve(&mut server, &mut toy, &server_budget, &Config::default()).await
        });
        // Fits the budget: stored.
        client.write_all(b"s 90000\n").await.expect("send");
        client.write_all(&[b'v'; 90_000]).await.expect("send");
        // Does not: refused at once, before its bytes arrive, and they are skipped.
        client.write_all(b"s 500000\n").await.expect("send");
        let mut reply = [0u8; 7];
        client.read_exact(&mut reply).await.expect("replies");
        assert_eq!(&reply, b"ok\noom\n");
        assert!(budget.used() <= 100_000);
        for _ in 0..5 {
            client.write_all(&[b'v'; 100_000]).await.expect("send");
        }
        client.write_all(b"p\nq\n").await.expect("send");
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).await.expect("read");
        assert_eq!(rest, b"pong\n");
        assert_eq!(conn.await.expect("no panic"), End::Closed);
        assert_eq!(budget.used(), 0, "the memory is given back");
        assert_eq!(budget.refused(), 1);
    });
}

#[test]
fn a_line_past_the_budget_closes_with_the_handlers_reply() {
    run(async {
        let (mut client, mut server) = tokio::io::duplex(1 << 20);
        let conn = tokio::spawn(async move {
            let mut toy = Toy::default();
            serve(&mut server, &mut toy, &Budget::new(0), &Config::default()).await
        });
        client.write_all(&[b'k'; 200_000]).await.expect("send");
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).await.expect("read");
        assert_eq!(rest, b"line too long\n");
        assert_eq!(conn.await.expect("no panic"), End::LineTooLong);
    });
}

#[test]
fn an_idle_connection_times_out() {
    run(async {
        let (mut client, mut server) = tokio::io::duplex(1024);
        let config = Config {
            idle_timeout: Some(Duration::from_millis(50)),
            ..Config::default()
        };
        let conn = tokio::spawn(async move {
            let mut toy = Toy::default();
            serve(&mut server, &mut toy, &Budget::new(0), &config).await
        });
        client.write_all(b"p\n").await.expect("send");
        let mut rest = Vec::new();
        // The reply, then the close, with nothing more sent.
        tokio::time::timeout(Duration::from_secs(5), client.read_to_end(&mut rest))
            .await
            .expect("closed in time")
            .expect("read");
        assert_eq!(rest, b"pong\n");
        assert_eq!(conn.await.expect("no panic"), End::IdleTimeout);
    });
}

#[test]
fn a_pipeline_is_answered_with_one_write() {
    run(async {
        let (mut client, server) = tokio::io::duplex(1 << 20);
        let writes = Arc::new(AtomicUsize::new(0));
        let mut server = Counting {
            inner: server,
            writes: writes.clone(),
        };
        client.write_all(&b"p\n".repeat(100)).await.expect("send");
        let conn = tokio::spawn(async move {
            let mut toy = Toy::default();
            serve(&mut server, &mut toy, &Budget::new(0), &Config::default()).await
        });
        let mut reply = vec![0u8; 500];
        client.read_exact(&mut reply).await.expect("replies");
        assert_eq!(reply, b"pong\n".repeat(100));
        assert_eq!(writes.load(Ordering::Relaxed), 1);
        drop(client);
        assert_eq!(conn.await.expect("no panic"), End::Eof);
    });
}

#[test]
fn a_turn_at_the_request_limit_keeps_its_replies_until_the_input_is_used_up() {
    run(async {
        let (mut client, server) = tokio::io::duplex(1 << 20);
        let writes = Arc::new(AtomicUsize::new(0));
        let mut server = Counting {
            inner: server,
            writes: writes.clone(),
        };
        client.write_all(&b"p\n".repeat(100)).await.expect("send");
        let config = Config {
            requests_per_turn: 20,
            ..Config::default()
        };
        let conn = tokio::spawn(async move {
            let mut toy = Toy::default();
            serve(&mut server, &mut toy, &Budget::new(0), &config).await
        });
        let mut reply = vec![0u8; 500];
        client.read_exact(&mut reply).await.expect("replies");
        assert_eq!(writes.load(Ordering::Relaxed), 1, "five turns, one write");
        drop(client);
        assert_eq!(conn.await.expect("no panic"), End::Eof);
    });
}
