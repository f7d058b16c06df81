//! Certificates made at test time, and a TLS client, for the TLS tests of shoald and
//! shoal-proxy: a CA, leaf certificates it signs (for `localhost` and `127.0.0.1`), and a
//! rustls client connection over a blocking TCP stream.

use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};

/// A certificate and the key it was made with.
pub type Issued = (rcgen::Certificate, KeyPair);

/// A certificate in DER and its PKCS#8 private key, as a client presents them.
pub type CertKey = (CertificateDer<'static>, Vec<u8>);

/// A self-signed CA named `name`.
pub fn ca(name: &str) -> Issued {
    let key = KeyPair::generate().expect("CA key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let cert = params.self_signed(&key).expect("CA cert");
    (cert, key)
}

/// A certificate for `localhost` and `127.0.0.1` named `name`, signed by `issuer`, for
/// client authentication (`client`) or for a server.
pub fn leaf(name: &str, client: bool, issuer: &Issued) -> Issued {
    let key = KeyPair::generate().expect("leaf key");
    let mut params = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .expect("leaf params");
    params.distinguished_name.push(DnType::CommonName, name);
    params.extended_key_usages = vec![if client {
        ExtendedKeyUsagePurpose::ClientAuth
    } else {
        ExtendedKeyUsagePurpose::ServerAuth
    }];
    let cert = params
        .signed_by(&key, &issuer.0, &issuer.1)
        .expect("signed leaf");
    (cert, key)
}

/// A leaf as a client presents it: DER certificate and PKCS#8 key.
pub fn cert_key(issued: &Issued) -> CertKey {
    (issued.0.der().clone(), issued.1.serialize_der())
}

/// A TLS client connection to `addr` (verified as `localhost` against `root`), with
/// `client_cert` if given, speaking `versions` (`None`: rustls's safe defaults). Reads and
/// writes time out after `timeout`.
pub fn connect(
    addr: SocketAddr,
    root: &CertificateDer<'static>,
    client_cert: Option<&CertKey>,
    versions: Option<&[&'static rustls::SupportedProtocolVersion]>,
    timeout: Duration,
) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(root.clone()).expect("root");
    let builder = rustls::ClientConfig::builder_with_provider(provider);
    let builder = match versions {
        Some(v) => builder.with_protocol_versions(v),
        None => builder.with_safe_default_protocol_versions(),
    }
    .expect("versions")
    .with_root_certificates(roots);
    let config = match client_cert {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                vec![cert.clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.clone())),
            )
            .expect("client cert"),
        None => builder.with_no_client_auth(),
    };
    let name = ServerName::try_from("localhost").expect("name");
    let session = rustls::ClientConnection::new(Arc::new(config), name).expect("client");
    let tcp = TcpStream::connect_timeout(&addr, timeout).expect("connect");
    tcp.set_read_timeout(Some(timeout)).expect("timeout");
    tcp.set_write_timeout(Some(timeout)).expect("timeout");
    tcp.set_nodelay(true).expect("nodelay");
    rustls::StreamOwned::new(session, tcp)
}
