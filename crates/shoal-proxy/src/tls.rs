//! TLS (rustls, as in shoald) on a pool's listener (`tls:`) and to its servers
//! (`server_tls:`), configured per pool:
//!
//! ```yaml
//! alpha:
//!   listen: 0.0.0.0:22121
//!   tls:
//!     cert: /etc/shoal/proxy.pem        # certificate chain (PEM), leaf first
//!     key: /etc/shoal/proxy.key         # its private key (PEM: PKCS#8, PKCS#1 or SEC1)
//!     ca: /etc/shoal/clients-ca.pem     # CA(s) client certificates are verified against
//!     require_client_cert: true         # refuse clients without one (needs ca)
//!   server_tls:
//!     ca: /etc/shoal/servers-ca.pem     # CA(s) the servers' certificates must chain to
//!     cert: /etc/shoal/proxy-client.pem # certificate the proxy presents (optional)
//!     key: /etc/shoal/proxy-client.key  # its key (with cert)
//!     server_name: cache.internal       # name to verify (default: each server's host)
//!   servers:
//!     - 10.0.0.1:11211:1
//! ```
//!
//! Guarantees: every file is read, and the rustls configuration built, when the
//! configuration is loaded, so a missing file, a key that does not match its certificate or
//! an unusable CA is an error naming the line, at startup (and `-t`) as on a reload. The
//! files' contents are part of the configuration: a reload after a certificate is renewed
//! in place serves new connections with the new one (open connections keep theirs).
//! With a `ca` but no `require_client_cert`, a client certificate is verified when one is
//! presented and not required. Servers are verified against `ca` only (no system roots).

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use shoal_client::backend::BackendTls;

use crate::error::ConfigError;
use crate::yaml::Node;
use crate::yaml::{boolean, scalar};

/// A PEM file, read when the configuration was loaded.
#[derive(Clone, PartialEq, Eq)]
pub struct PemFile {
    /// Where it was read from.
    pub path: PathBuf,
    bytes: Vec<u8>,
}

impl fmt::Debug for PemFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The contents may be a private key: only the path is shown.
        write!(f, "{:?}", self.path)
    }
}

impl PemFile {
    fn read(field: &str, line: usize, node: &Node) -> Result<PemFile, ConfigError> {
        let path = PathBuf::from(scalar(field, line, node)?);
        let bytes = std::fs::read(&path).map_err(|e| {
            ConfigError::at(line, field, format!("cannot read {}: {e}", path.display()))
        })?;
        Ok(PemFile { path, bytes })
    }

    fn certs(&self, field: &str, line: usize) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
        let err = |d: String| ConfigError::at(line, field, format!("{}: {d}", self.path.display()));
        let certs: Vec<_> = CertificateDer::pem_slice_iter(&self.bytes)
            .collect::<Result<_, _>>()
            .map_err(|e| err(e.to_string()))?;
        if certs.is_empty() {
            return Err(err("no certificates".into()));
        }
        Ok(certs)
    }

    fn key(&self, field: &str, line: usize) -> Result<PrivateKeyDer<'static>, ConfigError> {
        PrivateKeyDer::from_pem_slice(&self.bytes)
            .map_err(|e| ConfigError::at(line, field, format!("{}: {e}", self.path.display())))
    }

    fn roots(&self, field: &str, line: usize) -> Result<rustls::RootCertStore, ConfigError> {
        let mut roots = rustls::RootCertStore::empty();
        for c in self.certs(field, line)? {
            roots.add(c).map_err(|e| {
                ConfigError::at(line, field, format!("{}: {e}", self.path.display()))
            })?;
        }
        Ok(roots)
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A `(key, line, value)` entry of a section, with the field named `section.key`.
type Entry = (String, usize, Node);

fn entries(key: &str, line: usize, node: Node, what: &str) -> Result<Vec<Entry>, ConfigError> {
    match node {
        Node::Map(m) => Ok(m),
        _ => Err(ConfigError::at(
            line,
            key,
            format!("expected a map of {what}"),
        )),
    }
}

/// `tls:`: TLS on the pool's listener.
#[derive(Clone)]
pub struct ListenTls {
    /// `cert`: the certificate chain.
    pub cert: PemFile,
    /// `key`: its private key.
    pub key: PemFile,
    /// `ca`: what client certificates are verified against.
    pub ca: Option<PemFile>,
    /// `require_client_cert`: a client without a valid certificate is refused.
    pub require_client_cert: bool,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl PartialEq for ListenTls {
    fn eq(&self, o: &ListenTls) -> bool {
        (&self.cert, &self.key, &self.ca, self.require_client_cert)
            == (&o.cert, &o.key, &o.ca, o.require_client_cert)
    }
}

impl Eq for ListenTls {}

impl fmt::Debug for ListenTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListenTls")
            .field("cert", &self.cert)
            .field("key", &self.key)
            .field("ca", &self.ca)
            .field("require_client_cert", &self.require_client_cert)
            .finish()
    }
}

impl ListenTls {
    /// The handshake side for new client connections.
    pub fn acceptor(&self) -> &tokio_rustls::TlsAcceptor {
        &self.acceptor
    }

    /// Parses and builds a pool's `tls:` section (`key` at `line`).
    pub fn parse(key: &str, line: usize, node: Node) -> Result<ListenTls, ConfigError> {
        let (mut cert, mut pkey, mut ca, mut require) = (None, None, None, None);
        for (k, l, v) in entries(key, line, node, "cert, key, ca, require_client_cert")? {
            let field = format!("{key}.{k}");
            match k.as_str() {
                "cert" => cert = Some((PemFile::read(&field, l, &v)?, l)),
                "key" => pkey = Some((PemFile::read(&field, l, &v)?, l)),
                "ca" => ca = Some((PemFile::read(&field, l, &v)?, l)),
                "require_client_cert" => require = Some((boolean(&field, l, &v)?, l)),
                _ => return Err(ConfigError::at(l, &field, "unknown directive")),
            }
        }
        let missing = |what: &str| ConfigError::at(line, key, format!("'{what}' is required"));
        let (cert, cert_line) = cert.ok_or_else(|| missing("cert"))?;
        let (pkey, key_line) = pkey.ok_or_else(|| missing("key"))?;
        let require_client_cert = require.is_some_and(|(r, _)| r);
        if let (true, None, Some((_, l))) = (require_client_cert, &ca, require) {
            return Err(ConfigError::at(
                l,
                &format!("{key}.require_client_cert"),
                "needs 'ca' to verify client certificates against",
            ));
        }
        let chain = cert.certs(&format!("{key}.cert"), cert_line)?;
        let private = pkey.key(&format!("{key}.key"), key_line)?;
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(rustls::DEFAULT_VERSIONS)
            .map_err(|e| ConfigError::at(line, key, e.to_string()))?;
        let builder = match &ca {
            Some((ca, l)) => {
                let field = format!("{key}.ca");
                let roots = ca.roots(&field, *l)?;
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider(),
                );
                let verifier = if require_client_cert {
                    verifier
                } else {
                    verifier.allow_unauthenticated()
                };
                let verifier = verifier
                    .build()
                    .map_err(|e| ConfigError::at(*l, &field, e.to_string()))?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let config = builder.with_single_cert(chain, private).map_err(|e| {
            ConfigError::at(
                key_line,
                &format!("{key}.key"),
                format!("does not fit the certificate: {e}"),
            )
        })?;
        Ok(ListenTls {
            cert,
            key: pkey,
            ca: ca.map(|(c, _)| c),
            require_client_cert,
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        })
    }
}

/// `server_tls:`: TLS to the pool's servers.
#[derive(Clone)]
pub struct ServerTls {
    /// `ca`: what the servers' certificates are verified against.
    pub ca: PemFile,
    /// `cert`: the certificate chain the proxy presents, if any.
    pub cert: Option<PemFile>,
    /// `key`: its private key.
    pub key: Option<PemFile>,
    /// `server_name`: the name every server's certificate must carry (default: the
    /// server's host as configured, a DNS name or an IP address).
    pub server_name: Option<String>,
    connector: tokio_rustls::TlsConnector,
}

impl PartialEq for ServerTls {
    fn eq(&self, o: &ServerTls) -> bool {
        (&self.ca, &self.cert, &self.key, &self.server_name)
            == (&o.ca, &o.cert, &o.key, &o.server_name)
    }
}

impl Eq for ServerTls {}

impl fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerTls")
            .field("ca", &self.ca)
            .field("cert", &self.cert)
            .field("key", &self.key)
            .field("server_name", &self.server_name)
            .finish()
    }
}

impl ServerTls {
    /// The name the certificate of the server at `host` is verified for; `None` when
    /// `host` is not a valid name to verify (refused by [`ServerTls::check_hosts`] when
    /// the configuration is loaded).
    fn server_name(&self, host: &str) -> Option<ServerName<'static>> {
        let name = self.server_name.as_deref().unwrap_or(host);
        ServerName::try_from(name.to_string()).ok()
    }

    /// What a backend connection to the server at `host` handshakes with. Fail-closed: a
    /// host that is not a valid name (which configuration checking already refuses) gets
    /// TLS verified against the unspecified address, which no certificate matches, so the
    /// server is never spoken to in plain text or unverified.
    pub fn for_server(&self, host: &str) -> BackendTls {
        let server_name = self.server_name(host).unwrap_or(ServerName::IpAddress(
            std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED).into(),
        ));
        BackendTls {
            connector: self.connector.clone(),
            server_name,
        }
    }

    /// Checks that every server's certificate can be verified by name.
    pub fn check_hosts<'a>(
        &self,
        hosts: impl Iterator<Item = &'a str>,
        line: usize,
        key: &str,
    ) -> Result<(), ConfigError> {
        for h in hosts {
            if self.server_name(h).is_none() {
                return Err(ConfigError::at(
                    line,
                    key,
                    format!(
                        "'{h}' is not a name a certificate can be verified for (set server_name)"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Parses and builds a pool's `server_tls:` section (`key` at `line`).
    pub fn parse(key: &str, line: usize, node: Node) -> Result<ServerTls, ConfigError> {
        let (mut ca, mut cert, mut pkey, mut server_name) = (None, None, None, None);
        for (k, l, v) in entries(key, line, node, "ca, cert, key, server_name")? {
            let field = format!("{key}.{k}");
            match k.as_str() {
                "ca" => ca = Some((PemFile::read(&field, l, &v)?, l)),
                "cert" => cert = Some((PemFile::read(&field, l, &v)?, l)),
                "key" => pkey = Some((PemFile::read(&field, l, &v)?, l)),
                "server_name" => {
                    let s = scalar(&field, l, &v)?.to_string();
                    if ServerName::try_from(s.clone()).is_err() {
                        return Err(ConfigError::at(
                            l,
                            &field,
                            format!("'{s}' is not a DNS name or IP address"),
                        ));
                    }
                    server_name = Some(s);
                }
                _ => return Err(ConfigError::at(l, &field, "unknown directive")),
            }
        }
        let (ca, ca_line) =
            ca.ok_or_else(|| ConfigError::at(line, key, "'ca' is required to verify the servers"))?;
        let roots = ca.roots(&format!("{key}.ca"), ca_line)?;
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(rustls::DEFAULT_VERSIONS)
            .map_err(|e| ConfigError::at(line, key, e.to_string()))?
            .with_root_certificates(roots);
        let config = match (&cert, &pkey) {
            (Some((c, cl)), Some((k, kl))) => {
                let chain = c.certs(&format!("{key}.cert"), *cl)?;
                let private = k.key(&format!("{key}.key"), *kl)?;
                builder.with_client_auth_cert(chain, private).map_err(|e| {
                    ConfigError::at(
                        *kl,
                        &format!("{key}.key"),
                        format!("does not fit the certificate: {e}"),
                    )
                })?
            }
            (None, None) => builder.with_no_client_auth(),
            (Some((_, l)), None) | (None, Some((_, l))) => {
                return Err(ConfigError::at(*l, key, "'cert' and 'key' go together"))
            }
        };
        Ok(ServerTls {
            ca,
            cert: cert.map(|(c, _)| c),
            key: pkey.map(|(k, _)| k),
            server_name,
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
        })
    }
}
