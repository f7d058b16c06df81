//! TLS (`-Z`) against a real shoald with certificates made at test time (rcgen): a rustls
//! client round-trips text, meta and binary; a plain-text client on the TLS port gets no
//! cache service; with `ssl_verify_mode=2` only clients with a CA-signed certificate are
//! served.

mod common;

use common::binproto::{self as bp, op, status};
use common::{show, Conn, Server, IO_TIMEOUT};
use rustls::pki_types::CertificateDer;
use shoal_test_support::tls::{ca, cert_key, leaf, CertKey};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// A directory of PEM files, removed when dropped.
struct Pki {
    dir: PathBuf,
    /// The CA that signed the server and client certificates.
    ca: CertificateDer<'static>,
    /// The self-signed server certificate.
    self_signed: CertificateDer<'static>,
    /// A CA-signed client certificate and its key.
    client: CertKey,
    /// A client certificate from a CA the server does not trust.
    stranger: CertKey,
}

impl Pki {
    fn new(tag: &str) -> Pki {
        let dir = std::env::temp_dir().join(format!("shoal-tls-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("pki dir");
        let write =
            |name: &str, pem: String| std::fs::write(dir.join(name), pem).expect("write pem");

        // A self-signed server certificate, as `generate_simple_self_signed` makes it.
        let ss =
            rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("self-signed");
        write("self.pem", ss.cert.pem());
        write("self.key", ss.key_pair.serialize_pem());

        let authority = ca("shoal test CA");
        write("ca.pem", authority.0.pem());
        let server = leaf("localhost", false, &authority);
        write("server.pem", server.0.pem());
        write("server.key", server.1.serialize_pem());
        let client = leaf("shoal client", true, &authority);
        let other_ca = ca("untrusted CA");
        let stranger = leaf("stranger", true, &other_ca);
        Pki {
            dir,
            ca: authority.0.der().clone(),
            self_signed: ss.cert.der().clone(),
            client: cert_key(&client),
            stranger: cert_key(&stranger),
        }
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

/// A rustls client connection trusting `root`, optionally presenting a certificate.
fn tls_conn(
    addr: SocketAddr,
    root: &CertificateDer<'static>,
    client_cert: Option<&(CertificateDer<'static>, Vec<u8>)>,
) -> Conn {
    tls_conn_with(addr, root, client_cert, rustls::DEFAULT_VERSIONS)
}

/// [`tls_conn`] offering only the given TLS versions.
fn tls_conn_with(
    addr: SocketAddr,
    root: &CertificateDer<'static>,
    client_cert: Option<&CertKey>,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Conn {
    let tls = shoal_test_support::tls::connect(addr, root, client_cert, Some(versions), IO_TIMEOUT);
    let handle = tls.sock.try_clone().expect("clone");
    Conn::wrap(tls, Some(handle))
}

fn tls_server(pki: &Pki, cert: &str, key: &str, extra: &[&str]) -> Server {
    let opts = format!(
        "ssl_chain_cert={},ssl_key={}",
        pki.file(cert),
        pki.file(key)
    );
    let mut args = vec!["-Z", "-o", &opts];
    args.extend_from_slice(extra);
    Server::with_args(&args)
}

/// Text, meta and binary requests over one TLS connection.
fn round_trip(c: &mut Conn) {
    c.set("tk", b"over tls");
    assert_eq!(c.get("tk").as_deref(), Some(&b"over tls"[..]));
    c.rt(b"ms mk 5 T0\r\nmeta!\r\n", b"HD\r\n");
    c.rt(b"mg mk v f\r\n", b"VA 5 f0\r\nmeta!\r\n");
    c.rt(b"mn\r\n", b"MN\r\n");
    bp::set(c, b"bk", b"binary over tls", 42);
    let (flags, value, _) = bp::get(c, b"bk").expect("binary hit");
    assert_eq!((flags, value.as_slice()), (42, &b"binary over tls"[..]));
    let r = bp::expect_status(c, &bp::simple(op::GETK, b"tk"), status::OK);
    assert_eq!(r.value, b"over tls");
    c.assert_alive();
}

#[test]
fn self_signed_tls_round_trips_text_meta_binary() {
    let pki = Pki::new("self");
    let s = tls_server(&pki, "self.pem", "self.key", &[]);
    let mut c = tls_conn(s.addr.unwrap(), &pki.self_signed, None);
    round_trip(&mut c);
}

#[test]
fn tls_cert_and_key_flags_and_large_values() {
    let pki = Pki::new("large");
    let server_pem = pki.file("server.pem");
    let server_key = pki.file("server.key");
    let s = Server::with_args(&["-Z", "--tls-cert", &server_pem, "--tls-key", &server_key]);
    let mut c = tls_conn(s.addr.unwrap(), &pki.ca, None);
    round_trip(&mut c);
    // Values bigger than a TLS record and than the socket buffers, both ways.
    let big: Vec<u8> = (0..900_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    c.set("big", &big);
    assert_eq!(c.get("big").as_deref(), Some(&big[..]));
    // A pipelined binary multi-get whose replies exceed the server's write high-water mark.
    let mut batch = Vec::new();
    for i in 0..4u32 {
        batch.extend(bp::packet(op::GETKQ, &[], b"big", &[], i, 0));
    }
    batch.extend(bp::simple(op::NOOP, b""));
    c.send(&batch);
    for i in 0..4u32 {
        let r = bp::read(&mut c);
        assert_eq!((r.opaque, r.value.len()), (i, big.len()));
    }
    assert_eq!(bp::read(&mut c).opcode, op::NOOP);
}

#[test]
fn plain_text_client_on_tls_port_gets_no_service() {
    let pki = Pki::new("plain");
    let s = tls_server(&pki, "server.pem", "server.key", &[]);
    let addr = s.addr.unwrap();
    let mut binary_set = bp::store(op::SET, b"a", b"x", 0, 0, 0);
    binary_set.extend(bp::simple(op::GET, b"a"));
    for req in [
        &b"set a 0 0 1\r\nx\r\nget a\r\n"[..],
        b"version\r\n",
        b"mg a v\r\n",
        &binary_set,
    ] {
        let mut c = Conn::tcp(addr);
        c.send_lossy(req);
        let (got, closed) = c.drain_for(Duration::from_secs(3));
        let text = show(&got);
        assert!(closed, "plain connection left open; got {text:?}");
        for served in ["STORED", "VALUE", "VERSION", "VA ", "END"] {
            assert!(!text.contains(served), "plain client was served: {text:?}");
        }
        assert!(
            !got.starts_with(&[bp::RES]),
            "binary reply to a plain client: {got:?}"
        );
    }
    // TLS clients are unaffected and nothing was stored.
    let mut c = tls_conn(addr, &pki.ca, None);
    assert_eq!(c.get("a"), None);
}

/// Whether a TLS client gets served: true if `version` answers, false if the server refuses.
fn served(c: &mut Conn) -> bool {
    c.send_lossy(b"version\r\n");
    let (got, closed) = c.drain_for(Duration::from_secs(3));
    if got.starts_with(b"VERSION ") {
        return true;
    }
    assert!(closed, "neither served nor closed: {:?}", show(&got));
    assert!(got.is_empty(), "unexpected reply {:?}", show(&got));
    false
}

#[test]
fn verify_mode_2_requires_a_ca_signed_client_certificate() {
    let pki = Pki::new("mtls");
    let opts = format!("ssl_ca_cert={},ssl_verify_mode=2", pki.file("ca.pem"));
    let s = tls_server(&pki, "server.pem", "server.key", &["-o", &opts]);
    let addr = s.addr.unwrap();
    assert!(
        !served(&mut tls_conn(addr, &pki.ca, None)),
        "client without a certificate served"
    );
    assert!(
        !served(&mut tls_conn(addr, &pki.ca, Some(&pki.stranger))),
        "client with an untrusted certificate served"
    );
    let mut c = tls_conn(addr, &pki.ca, Some(&pki.client));
    assert!(served(&mut c));
    round_trip(&mut c);
}

#[test]
fn verify_mode_1_accepts_clients_without_certificates() {
    let pki = Pki::new("mtls1");
    let opts = format!("ssl_ca_cert={},ssl_verify_mode=1", pki.file("ca.pem"));
    let s = tls_server(&pki, "server.pem", "server.key", &["-o", &opts]);
    let addr = s.addr.unwrap();
    assert!(served(&mut tls_conn(addr, &pki.ca, None)));
    assert!(served(&mut tls_conn(addr, &pki.ca, Some(&pki.client))));
    assert!(!served(&mut tls_conn(addr, &pki.ca, Some(&pki.stranger))));
}

#[test]
fn bad_tls_configuration_refuses_to_start() {
    let pki = Pki::new("bad");
    let cert = pki.file("server.pem");
    let wrong_key = pki.file("self.key");
    let missing = pki.file("missing.pem");
    let base = ["-p", "-1", "-l", "127.0.0.1", "-Z"];
    for extra in [
        vec![],
        vec!["--tls-cert", cert.as_str()],
        vec!["--tls-cert", cert.as_str(), "--tls-key", missing.as_str()],
        vec!["--tls-cert", cert.as_str(), "--tls-key", wrong_key.as_str()],
    ] {
        let args: Vec<&str> = base.iter().copied().chain(extra.iter().copied()).collect();
        let (code, err) = common::run_to_exit(&args);
        assert!(
            code.is_some() && code != Some(0),
            "shoald {args:?} started: {err}"
        );
    }
}

/// `/metrics` counts TLS handshakes by result.
#[test]
fn metrics_count_tls_handshakes() {
    let pki = Pki::new("metrics");
    let opts = format!(
        "ssl_chain_cert={},ssl_key={}",
        pki.file("server.pem"),
        pki.file("server.key")
    );
    let (s, metrics) = common::with_metrics(&["-Z", "-o", &opts]);
    let addr = s.addr.expect("tcp");
    let mut c = tls_conn(addr, &pki.ca, None);
    c.set("a", b"b");
    let mut plain = Conn::tcp(addr);
    plain.send_lossy(b"version\r\n");
    let _ = plain.drain_for(Duration::from_secs(3));
    let (status, page) = common::http_get(metrics, "/metrics");
    assert_eq!(status, 200);
    let count = |result: &str| {
        common::parse_page(&page).into_iter().find_map(|(n, l, v)| {
            (n == "shoal_tls_handshakes_total" && l[0].1 == result).then_some(v)
        })
    };
    assert_eq!(count("ok"), Some(1.0), "{page}");
    assert_eq!(count("failed"), Some(1.0), "{page}");
}

const TLS12_ONLY: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS12];

#[test]
fn ssl_min_version_3_refuses_tls_1_2_clients() {
    let pki = Pki::new("minver");
    // memcached's default (2, TLS 1.2) and 0/1 (rustls has nothing older) allow TLS 1.2.
    for level in ["0", "2"] {
        let opt = format!("ssl_min_version={level}");
        let s = tls_server(&pki, "server.pem", "server.key", &["-o", &opt]);
        let addr = s.addr.unwrap();
        assert!(
            served(&mut tls_conn_with(addr, &pki.ca, None, TLS12_ONLY)),
            "ssl_min_version={level} refused a TLS 1.2 client"
        );
    }
    let s = tls_server(
        &pki,
        "server.pem",
        "server.key",
        &["-o", "ssl_min_version=3"],
    );
    let addr = s.addr.unwrap();
    assert!(
        !served(&mut tls_conn_with(addr, &pki.ca, None, TLS12_ONLY)),
        "ssl_min_version=3 served a TLS 1.2 client"
    );
    let mut c = tls_conn(addr, &pki.ca, None);
    assert!(served(&mut c), "TLS 1.3 client refused");
    let settings = c.stats("settings");
    assert_eq!(settings["ssl_min_version"], "tlsv1.3");
}

#[test]
fn refresh_certs_reloads_certificate_and_key() {
    let pki = Pki::new("refresh");
    let copy = |from: &str, to: &str| std::fs::copy(pki.file(from), pki.file(to)).expect("copy");
    copy("server.pem", "live.pem");
    copy("server.key", "live.key");
    let s = tls_server(&pki, "live.pem", "live.key", &[]);
    let addr = s.addr.unwrap();
    let mut old = tls_conn(addr, &pki.ca, None);
    assert!(served(&mut old));
    // Unchanged files: reloading is harmless; noreply suppresses only the OK.
    old.rt(b"refresh_certs\r\n", b"OK\r\n");
    old.rt(b"refresh_certs noreply\r\nmn\r\n", b"MN\r\n");

    // Swap in the self-signed pair: new connections get it, the open one goes on.
    copy("self.pem", "live.pem");
    copy("self.key", "live.key");
    old.rt(b"refresh_certs\r\n", b"OK\r\n");
    assert!(served(&mut tls_conn(addr, &pki.self_signed, None)));
    assert!(
        !served(&mut tls_conn(addr, &pki.ca, None)),
        "old certificate still offered after refresh_certs"
    );
    round_trip(&mut old);

    // A broken key: memcached's error (shown even with noreply), old certificate kept.
    std::fs::write(pki.file("live.key"), "not a key").expect("write");
    let line = old.request_until(b"refresh_certs noreply\r\n", b"\r\n");
    let line = String::from_utf8_lossy(&line).into_owned();
    assert!(
        line.starts_with(&format!(
            "Error loading the key: {} : ",
            pki.file("live.key")
        )),
        "{line:?}"
    );
    assert!(served(&mut tls_conn(addr, &pki.self_signed, None)));
    // A certificate that does not match the key.
    copy("server.key", "live.key");
    let line = old.request_until(b"refresh_certs\r\n", b"\r\n");
    assert!(
        line.starts_with(b"Error validating the certificate: "),
        "{:?}",
        show(&line)
    );
}

#[test]
fn refresh_certs_without_tls() {
    let s = Server::start();
    let mut c = s.conn();
    c.rt(b"refresh_certs\r\n", b"Error TLS not enabled\r\n");
    c.rt(
        b"refresh_certs noreply\r\nmn\r\n",
        b"Error TLS not enabled\r\nMN\r\n",
    );
}
