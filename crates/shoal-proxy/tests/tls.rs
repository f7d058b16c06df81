//! TLS through a real shoal-proxy, with certificates made at test time (rcgen): rustls
//! clients speak text and binary to a pool whose listener requires a client certificate,
//! and the proxy speaks TLS to a shoald backend (`-Z`) that requires one from the proxy.
//! Clients without a certificate, with one from an unknown CA, or without TLS get no
//! service; a backend whose certificate the pool's CA did not sign is not used.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::Command;

use common::bin::{op, status, Bin};
use common::*;
use rustls::pki_types::CertificateDer;
use shoal_test_support::tls::{ca, cert_key, leaf, CertKey, Issued};

/// A directory of PEM files, removed when dropped.
struct Pki {
    dir: PathBuf,
    ca: CertificateDer<'static>,
    client: CertKey,
    stranger: CertKey,
    /// The CA's certificate and key, to sign renewed certificates with.
    authority: Issued,
}

impl Pki {
    fn new(tag: &str) -> Pki {
        let dir =
            std::env::temp_dir().join(format!("shoal-proxy-tls-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("pki dir");
        let write =
            |name: &str, pem: String| std::fs::write(dir.join(name), pem).expect("write pem");
        let authority = ca("shoal test CA");
        write("ca.pem", authority.0.pem());
        let server = leaf("localhost", false, &authority);
        write("server.pem", server.0.pem());
        write("server.key", server.1.serialize_pem());
        let client = leaf("shoal-proxy", true, &authority);
        write("client.pem", client.0.pem());
        write("client.key", client.1.serialize_pem());
        let other = ca("untrusted CA");
        write("other-ca.pem", other.0.pem());
        let stranger = leaf("stranger", true, &other);
        let stranger_server = leaf("localhost", false, &other);
        write("stranger-server.pem", stranger_server.0.pem());
        write("stranger-server.key", stranger_server.1.serialize_pem());
        Pki {
            dir,
            ca: authority.0.der().clone(),
            client: cert_key(&client),
            stranger: cert_key(&stranger),
            authority,
        }
    }

    /// Replaces server.pem and server.key with a new certificate from the same CA.
    fn renew_server(&self) {
        let server = leaf("localhost", false, &self.authority);
        std::fs::write(self.dir.join("server.pem"), server.0.pem()).expect("write pem");
        std::fs::write(self.dir.join("server.key"), server.1.serialize_pem()).expect("write key");
    }

    fn file(&self, name: &str) -> String {
        self.dir
            .join(name)
            .to_str()
            .expect("utf-8 path")
            .to_string()
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A rustls client trusting `root`, optionally presenting a certificate.
fn tls_client(addr: SocketAddr, root: &CertificateDer<'static>, cert: Option<&CertKey>) -> Tls {
    shoal_test_support::tls::connect(addr, root, cert, None, IO_TIMEOUT)
}

/// Sends `req` and reads until the reply ends with `end`; `None` if the connection fails
/// or closes first.
fn text<S: Read + Write>(s: &mut S, req: &[u8], end: &[u8]) -> Option<Vec<u8>> {
    s.write_all(req).ok()?;
    s.flush().ok()?;
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    while !got.ends_with(end) {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    Some(got)
}

/// shoald serving TLS only, requiring a client certificate signed by the test CA.
fn tls_shoald(pki: &Pki, cert: &str, key: &str) -> (Proc, SocketAddr) {
    let opts = format!(
        "ssl_chain_cert={},ssl_key={},ssl_ca_cert={},ssl_verify_mode=2",
        pki.file(cert),
        pki.file(key),
        pki.file("ca.pem")
    );
    let mut cmd = Command::new(shoald_bin());
    cmd.args([
        "-p",
        "-1",
        "-l",
        "127.0.0.1",
        "-t",
        "1",
        "-m",
        "64",
        "-v",
        "-Z",
        "-o",
        &opts,
    ]);
    let proc = Proc::spawn(cmd);
    let addr = proc.wait_for("listening on ").parse().expect("addr");
    (proc, addr)
}

fn conf(pki: &Pki, name: &str, backend: SocketAddr, server_ca: &str) -> String {
    format!(
        "{name}:\n  listen: 127.0.0.1:0\n  timeout: 2000\n  tls:\n    cert: {}\n    key: {}\n    ca: {}\n    require_client_cert: true\n  server_tls:\n    ca: {}\n    cert: {}\n    key: {}\n  servers:\n   - {backend}:1\n",
        pki.file("server.pem"),
        pki.file("server.key"),
        pki.file("ca.pem"),
        pki.file(server_ca),
        pki.file("client.pem"),
        pki.file("client.key"),
    )
}

#[test]
fn tls_on_both_sides_of_the_proxy() {
    let pki = Pki::new("both");
    let (_backend, backend_addr) = tls_shoald(&pki, "server.pem", "server.key");
    let (_liar, liar_addr) = tls_shoald(&pki, "stranger-server.pem", "stranger-server.key");
    let text_conf =
        conf(&pki, "good", backend_addr, "ca.pem") + &conf(&pki, "bad", liar_addr, "ca.pem");
    let proxy = Proxy::start(&text_conf, 2);
    let (good, bad) = (proxy.pools[0], proxy.pools[1]);

    // Text and binary over TLS, to a TLS backend; values larger than a TLS record.
    let mut s = tls_client(good, &pki.ca, Some(&pki.client));
    assert_eq!(
        text(&mut s, b"set k 0 0 3\r\nabc\r\n", b"\r\n").as_deref(),
        Some(&b"STORED\r\n"[..])
    );
    assert_eq!(
        text(&mut s, b"get k\r\n", b"END\r\n").as_deref(),
        Some(&b"VALUE k 0 3\r\nabc\r\nEND\r\n"[..])
    );
    let big: Vec<u8> = (0..700_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let mut req = format!("set big 0 0 {}\r\n", big.len()).into_bytes();
    req.extend_from_slice(&big);
    req.extend_from_slice(b"\r\n");
    assert_eq!(
        text(&mut s, &req, b"\r\n").as_deref(),
        Some(&b"STORED\r\n"[..])
    );
    let got = text(&mut s, b"get big big\r\n", b"END\r\n").expect("big values");
    let mut want = Vec::new();
    for _ in 0..2 {
        want.extend_from_slice(format!("VALUE big 0 {}\r\n", big.len()).as_bytes());
        want.extend_from_slice(&big);
        want.extend_from_slice(b"\r\n");
    }
    want.extend_from_slice(b"END\r\n");
    assert!(got == want, "the values came back whole");
    let mut b = Bin::over(tls_client(good, &pki.ca, Some(&pki.client)));
    assert_eq!(b.set(b"bk", b"binary over tls", 9).status, status::OK);
    let g = b.call(op::GETK, 7, 0, &[], b"big", &[]);
    assert_eq!((g.status, g.value.len()), (status::OK, big.len()));
    assert_eq!(b.get(b"bk").value, b"binary over tls");

    // No certificate, or one from a CA the pool does not trust: no service.
    for cert in [None, Some(&pki.stranger)] {
        let mut s = tls_client(good, &pki.ca, cert);
        assert_eq!(
            text(&mut s, b"get k\r\n", b"END\r\n"),
            None,
            "served a client with {cert:?}"
        );
    }
    // Plain text on the TLS port: no service either.
    let mut plain = TcpStream::connect_timeout(&good, IO_TIMEOUT).expect("connect");
    plain.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    assert_eq!(text(&mut plain, b"get k\r\n", b"END\r\n"), None);

    // A backend whose certificate the pool's CA did not sign is never sent a request.
    let mut s = tls_client(bad, &pki.ca, Some(&pki.client));
    let reply = text(&mut s, b"get k\r\n", b"\r\n").expect("an error reply");
    assert!(
        reply.starts_with(b"SERVER_ERROR"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    proxy.proc.wait_for("TLS handshake with");
}

#[test]
fn bad_tls_configuration_is_refused_with_its_line() {
    let pki = Pki::new("conf");
    let backend = "127.0.0.1:11211";
    let cases = [
        // A key that is not the certificate's.
        (
            format!(
                "a:\n  listen: 127.0.0.1:0\n  tls:\n    cert: {}\n    key: {}\n  servers:\n   - {backend}:1\n",
                pki.file("server.pem"),
                pki.file("client.key")
            ),
            "line 5: field 'tls.key'",
        ),
        (
            "a:\n  listen: 127.0.0.1:0\n  tls:\n    cert: /nonexistent.pem\n    key: /nonexistent.key\n  servers:\n   - h:1:1\n"
                .to_string(),
            "line 4: field 'tls.cert': cannot read /nonexistent.pem",
        ),
        (
            format!(
                "a:\n  listen: 127.0.0.1:0\n  tls:\n    cert: {}\n    key: {}\n    require_client_cert: true\n  servers:\n   - h:1:1\n",
                pki.file("server.pem"),
                pki.file("server.key")
            ),
            "line 6: field 'tls.require_client_cert'",
        ),
        (
            "a:\n  listen: 127.0.0.1:0\n  server_tls:\n    server_name: x\n  servers:\n   - h:1:1\n".to_string(),
            "line 3: field 'server_tls': 'ca' is required",
        ),
        (
            format!(
                "a:\n  listen: 127.0.0.1:0\n  server_tls:\n    ca: {}\n  servers:\n   - h:1:1\n  sasl:\n    users: []\n",
                pki.file("ca.pem")
            ),
            "line 7: field 'sasl'",
        ),
    ];
    for (text, want) in cases {
        let path = write_conf(&text);
        let out = Command::new(proxy_bin())
            .arg("-t")
            .arg("-c")
            .arg(&path)
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}\n{err}");
        assert!(err.contains(want), "wanted '{want}' in: {err}");
    }
}

/// `openssl s_client` (a TLS client that is not rustls) with `input`; its stdout.
fn s_client(
    openssl: &std::path::Path,
    addr: SocketAddr,
    pki: &Pki,
    cert: bool,
    input: &[u8],
) -> String {
    let mut cmd = Command::new(openssl);
    cmd.args([
        "s_client",
        "-quiet",
        "-ign_eof",
        "-verify_return_error",
        "-connect",
    ])
    .arg(addr.to_string())
    .args(["-servername", "localhost", "-CAfile"])
    .arg(pki.file("ca.pem"));
    if cert {
        cmd.arg("-cert")
            .arg(pki.file("client.pem"))
            .arg("-key")
            .arg(pki.file("client.key"));
    }
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run openssl");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("openssl s_client did not finish");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    String::from_utf8_lossy(&child.wait_with_output().expect("output").stdout).into_owned()
}

#[test]
fn openssl_s_client_through_the_proxy() {
    let Some(openssl) = shoal_test_support::peer("openssl", "openssl") else {
        return;
    };
    let pki = Pki::new("openssl");
    let (_backend, backend_addr) = tls_shoald(&pki, "server.pem", "server.key");
    let proxy = Proxy::start(&conf(&pki, "alpha", backend_addr, "ca.pem"), 1);
    let addr = proxy.pools[0];
    let out = s_client(
        &openssl,
        addr,
        &pki,
        true,
        b"set k 0 0 2\r\nhi\r\nget k\r\nquit\r\n",
    );
    assert_eq!(out, "STORED\r\nVALUE k 0 2\r\nhi\r\nEND\r\n");
    // Without a client certificate the proxy ends the handshake: nothing is served.
    let out = s_client(&openssl, addr, &pki, false, b"get k\r\nquit\r\n");
    assert!(!out.contains("VALUE") && !out.contains("END"), "{out}");
}

/// The certificate a TLS listener presents.
fn presented(
    addr: SocketAddr,
    root: &CertificateDer<'static>,
    cert: &CertKey,
) -> CertificateDer<'static> {
    let mut s = tls_client(addr, root, Some(cert));
    assert!(text(&mut s, b"version\r\n", b"\r\n").is_some(), "served");
    s.conn.peer_certificates().expect("a certificate")[0].clone()
}

#[test]
fn reload_rotates_certificates_and_turns_on_sasl() {
    let pki = Pki::new("reload");
    let backend = Shoald::start();
    let plain_pool = |extra: &str| {
        format!(
            "alpha:\n  listen: 127.0.0.1:0\n  tls:\n    cert: {}\n    key: {}\n    ca: {}\n{extra}  servers:\n   - {}:1\n",
            pki.file("server.pem"),
            pki.file("server.key"),
            pki.file("ca.pem"),
            backend.addr
        )
    };
    let proxy = Proxy::start(&plain_pool(""), 1);
    let addr = proxy.pools[0];
    let before = presented(addr, &pki.ca, &pki.client);
    let mut open = Bin::over(tls_client(addr, &pki.ca, Some(&pki.client)));
    assert_eq!(open.set(b"k", b"v", 0).status, status::OK);

    // A certificate renewed in place, and SASL turned on, by a reload.
    pki.renew_server();
    std::fs::write(
        &proxy.conf,
        plain_pool("  sasl:\n    users:\n      - alice:wonderland\n"),
    )
    .expect("conf");
    assert_eq!(reload(&proxy), "OK\r\n");
    proxy.proc.wait_for("sasl, tls changed");
    let after = presented(addr, &pki.ca, &pki.client);
    assert_ne!(before, after, "new connections get the renewed certificate");
    // The open connection stays open, and now has to authenticate.
    assert_eq!(open.get(b"k").status, status::AUTH_ERROR);
    let ok = open.call(op::SASL_AUTH, 1, 0, &[], b"PLAIN", b"\0alice\0wonderland");
    assert_eq!(ok.status, status::OK);
    assert_eq!(open.get(b"k").value, b"v");
}

fn stats_json(proxy: &Proxy) -> serde_json::Value {
    let mut s = TcpStream::connect_timeout(&proxy.stats, IO_TIMEOUT).expect("stats");
    s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read stats");
    serde_json::from_str(&out).expect("stats json")
}

/// A failover route pool `front` with TLS on its listener (client certificates
/// required) over `main`, a TLS server verified against `server_ca` (the proxy presents
/// its client certificate), and `backup`, a plain one.
fn route_conf(pki: &Pki, main: SocketAddr, backup: SocketAddr, server_ca: &str) -> String {
    format!(
        "front:\n  listen: 127.0.0.1:0\n  tls:\n    cert: {}\n    key: {}\n    ca: {}\n    require_client_cert: true\n  route:\n    type: failover\n    pools: [main, backup]\nmain:\n  timeout: 2000\n  server_tls:\n    ca: {}\n    cert: {}\n    key: {}\n  servers:\n   - {main}:1\nbackup:\n  timeout: 2000\n  servers:\n   - {backup}:1\n",
        pki.file("server.pem"),
        pki.file("server.key"),
        pki.file("ca.pem"),
        pki.file(server_ca),
        pki.file("client.pem"),
        pki.file("client.key"),
    )
}

/// Two text and two binary TLS clients through `addr`, ten sets and gets each, every
/// reply checked; the clients, still open.
fn four_tls_clients(pki: &Pki, addr: SocketAddr, tag: &str) -> (Vec<Tls>, Vec<Bin<Tls>>) {
    let mut texts: Vec<Tls> = (0..2)
        .map(|_| tls_client(addr, &pki.ca, Some(&pki.client)))
        .collect();
    let mut bins: Vec<Bin<Tls>> = (0..2)
        .map(|_| Bin::over(tls_client(addr, &pki.ca, Some(&pki.client))))
        .collect();
    for i in 0..10 {
        for (n, s) in texts.iter_mut().enumerate() {
            let k = format!("{tag}-t{n}-{i}");
            let set = format!("set {k} 0 0 1\r\nv\r\n");
            assert_eq!(
                text(s, set.as_bytes(), b"\r\n").as_deref(),
                Some(&b"STORED\r\n"[..])
            );
            let want = format!("VALUE {k} 0 1\r\nv\r\nEND\r\n");
            assert_eq!(
                text(s, format!("get {k}\r\n").as_bytes(), b"END\r\n"),
                Some(want.into_bytes())
            );
        }
        for (n, b) in bins.iter_mut().enumerate() {
            let k = format!("{tag}-b{n}-{i}");
            assert_eq!(b.set(k.as_bytes(), b"w", 0).status, status::OK);
            assert_eq!(b.get(k.as_bytes()).value, b"w");
        }
    }
    (texts, bins)
}

#[test]
fn tls_listener_and_tls_servers_with_worker_threads() {
    let pki = Pki::new("threads");
    let (_main, main_addr) = tls_shoald(&pki, "server.pem", "server.key");
    let backup = Shoald::start();
    let conf = route_conf(&pki, main_addr, backup.addr, "ca.pem");
    for (args, per_server) in [
        (&["--threads", "2"][..], 2),
        (&["--threads", "2", "--shared-backends"][..], 1),
    ] {
        let proxy = Proxy::start_args(&conf, 1, args);
        let addr = proxy.pools[0];
        // A client that connects and never starts its handshake holds up no one: the
        // handshake runs on the worker that serves the connection, like its requests.
        let _stalled = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
        let _clients = four_tls_clients(&pki, addr, "w");
        let st = stats_json(&proxy);
        let server = &st["main"][main_addr.to_string()];
        // Both workers served clients; each has its own TLS connection to the server,
        // unless they share one.
        assert_eq!(server["server_connections"], per_server, "{args:?}: {st}");
        assert_eq!(server["requests"], 80, "{st}");
        assert_eq!(st["backup"][backup.addr.to_string()]["requests"], 0, "{st}");
        assert_eq!(st["front"]["client_connections"], 5, "{st}");
    }
}

#[test]
fn server_tls_follows_reloads_on_every_worker() {
    let pki = Pki::new("tlsreload");
    let (_main, main_addr) = tls_shoald(&pki, "server.pem", "server.key");
    let backup = Shoald::start();
    let proxy = Proxy::start_threads(&route_conf(&pki, main_addr, backup.addr, "ca.pem"), 1, 2);
    let addr = proxy.pools[0];
    let (mut texts, mut bins) = four_tls_clients(&pki, addr, "before");
    let main_requests =
        |st: &serde_json::Value| st["main"][main_addr.to_string()]["requests"].as_u64();
    assert_eq!(main_requests(&stats_json(&proxy)), Some(80));

    // The servers' CA changed to one that did not sign main's certificate: every worker
    // gets new connections to main, their handshakes fail, and the route fails over to
    // backup. The clients' own TLS connections stay open throughout.
    std::fs::write(
        &proxy.conf,
        route_conf(&pki, main_addr, backup.addr, "other-ca.pem"),
    )
    .expect("conf");
    assert_eq!(reload(&proxy), "OK\r\n");
    proxy.proc.wait_for("server_tls changed");
    for (n, s) in texts.iter_mut().enumerate() {
        let set = format!("set moved{n} 0 0 1\r\nm\r\n");
        assert_eq!(
            text(s, set.as_bytes(), b"\r\n").as_deref(),
            Some(&b"STORED\r\n"[..])
        );
    }
    for (n, b) in bins.iter_mut().enumerate() {
        assert_eq!(
            b.set(format!("bmoved{n}").as_bytes(), b"m", 0).status,
            status::OK
        );
    }
    proxy.proc.wait_for("TLS handshake with");
    let backup_conn = || backup.conn();
    for k in ["moved0", "moved1", "bmoved0", "bmoved1"] {
        assert_eq!(
            backup_conn().get(&[k]),
            Ok(vec![(k.to_string(), "m".to_string())]),
            "{k} failed over to backup"
        );
    }

    // Back to the right CA: main serves again, on every worker.
    std::fs::write(
        &proxy.conf,
        route_conf(&pki, main_addr, backup.addr, "ca.pem"),
    )
    .expect("conf");
    assert_eq!(reload(&proxy), "OK\r\n");
    let before = main_requests(&stats_json(&proxy)).unwrap_or(0);
    for (n, s) in texts.iter_mut().enumerate() {
        let set = format!("set home{n} 0 0 1\r\nh\r\n");
        assert_eq!(
            text(s, set.as_bytes(), b"\r\n").as_deref(),
            Some(&b"STORED\r\n"[..])
        );
    }
    for (n, b) in bins.iter_mut().enumerate() {
        assert_eq!(
            b.set(format!("bhome{n}").as_bytes(), b"h", 0).status,
            status::OK
        );
        assert_eq!(b.get(format!("bhome{n}").as_bytes()).value, b"h");
    }
    let st = stats_json(&proxy);
    assert_eq!(main_requests(&st), Some(before + 6), "{st}");
    assert_eq!(
        st["main"][main_addr.to_string()]["server_connections"],
        2,
        "{st}"
    );
    for k in ["home0", "home1", "bhome0", "bhome1"] {
        assert_eq!(backup_conn().get(&[k]), Ok(vec![]), "{k} is main's");
    }
}

#[test]
fn route_pools_take_client_tls_and_sasl_but_not_server_tls() {
    let pki = Pki::new("routeconf");
    let tls = format!(
        "  tls:\n    cert: {}\n    key: {}\n",
        pki.file("server.pem"),
        pki.file("server.key")
    );
    let server_tls = format!("  server_tls:\n    ca: {}\n", pki.file("ca.pem"));
    let sasl = "  sasl:\n    users:\n      - alice:wonderland\n";
    let route = "  route:\n    type: failover\n    pools: [a, b]\n";
    let targets = "a:\n  servers:\n   - 127.0.0.1:1:1\nb:\n  servers:\n   - 127.0.0.1:2:1\n";
    let run = |text: &str| {
        let path = write_conf(text);
        let out = Command::new(proxy_bin())
            .arg("-t")
            .arg("-c")
            .arg(&path)
            .output()
            .expect("run");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // Client-side keys on a route pool: accepted.
    let good = format!("front:\n  listen: 127.0.0.1:0\n{tls}{sasl}{route}{targets}");
    let (code, err) = run(&good);
    assert_eq!(code, Some(0), "{err}");
    // server_tls on a route pool: refused at its line (line 7, after listen and tls).
    let bad = format!("front:\n  listen: 127.0.0.1:0\n{tls}{server_tls}{route}{targets}");
    let (code, err) = run(&bad);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("line 6: field 'server_tls': pool 'front' has a route"),
        "{err}"
    );
    // tls or sasl on a pool only routes reach (no listen): refused at its line.
    let orphan_tls = format!(
        "front:\n  listen: 127.0.0.1:0\n{route}a:\n{tls}  servers:\n   - 127.0.0.1:1:1\nb:\n  servers:\n   - 127.0.0.1:2:1\n"
    );
    let (code, err) = run(&orphan_tls);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("line 7: field 'tls': pool 'a' has no listen address"),
        "{err}"
    );
    let orphan_sasl = format!(
        "front:\n  listen: 127.0.0.1:0\n{route}a:\n  servers:\n   - 127.0.0.1:1:1\nb:\n{sasl}  servers:\n   - 127.0.0.1:2:1\n"
    );
    let (code, err) = run(&orphan_sasl);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("line 10: field 'sasl': pool 'b' has no listen address"),
        "{err}"
    );
}
