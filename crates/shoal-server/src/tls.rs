//! TLS with rustls: the server configuration built from memcached's `ssl_*` options.

use crate::config::TlsSettings;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::Arc;

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or holds nothing usable.
    #[error("{what} {path}: {detail}")]
    Pem {
        /// Which file.
        what: &'static str,
        /// Its path.
        path: String,
        /// What went wrong.
        detail: String,
    },
    /// rustls refused the configuration (e.g. the key does not match the certificate).
    #[error("TLS configuration: {0}")]
    Config(String),
}

fn certs(
    what: &'static str,
    path: &std::path::Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let err = |detail: String| TlsError::Pem {
        what,
        path: path.display().to_string(),
        detail,
    };
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|e| err(e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| err(e.to_string()))?;
    if certs.is_empty() {
        return Err(err("no certificates".into()));
    }
    Ok(certs)
}

/// The TLS versions `ssl_min_version` allows. rustls speaks only TLS 1.2 and 1.3, so
/// memcached's 0 (TLS 1.0), 1 (1.1) and 2 (1.2) all mean "1.2 or 1.3", and 3 means
/// TLS 1.3 only: a 1.2-only client is refused in the handshake, as with memcached.
pub fn protocol_versions(min_version: u8) -> &'static [&'static rustls::SupportedProtocolVersion] {
    static TLS13_ONLY: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];
    if min_version >= 3 {
        TLS13_ONLY
    } else {
        rustls::DEFAULT_VERSIONS
    }
}

/// memcached's `refresh_certs` error line for a failed reload (with `\r\n`).
pub fn refresh_error(e: &TlsError, t: &TlsSettings) -> String {
    match e {
        TlsError::Pem {
            what: "private key",
            detail,
            ..
        } => format!("Error loading the key: {} : {detail}\r\n", t.key.display()),
        TlsError::Pem {
            what: "CA certificate",
            path,
            detail,
        } => format!("Error loading the CA certificate: {path} : {detail}\r\n"),
        TlsError::Pem { detail, .. } => format!(
            "Error loading the certificate chain: {} : {detail}\r\n",
            t.cert.display()
        ),
        TlsError::Config(detail) => format!("Error validating the certificate: {detail}\r\n"),
    }
}

/// Builds the acceptor: the server's chain and key, and client-certificate verification
/// per `verify_mode` (0 none, 1 request, 2 and 3 require) against `ca`.
pub fn acceptor(t: &TlsSettings) -> Result<tokio_rustls::TlsAcceptor, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = certs("certificate chain", &t.cert)?;
    let key = PrivateKeyDer::from_pem_file(&t.key).map_err(|e| TlsError::Pem {
        what: "private key",
        path: t.key.display().to_string(),
        detail: e.to_string(),
    })?;
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(protocol_versions(t.min_version))
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = match (&t.ca, t.verify_mode) {
        (Some(ca), mode) if mode > 0 => {
            let mut roots = rustls::RootCertStore::empty();
            for c in certs("CA certificate", ca)? {
                roots.add(c).map_err(|e| TlsError::Config(e.to_string()))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            );
            let verifier = if mode == 1 {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(
                verifier
                    .build()
                    .map_err(|e| TlsError::Config(e.to_string()))?,
            )
        }
        (None, mode) if mode > 0 => {
            return Err(TlsError::Config("ssl_verify_mode needs ssl_ca_cert".into()))
        }
        _ => builder.with_no_client_auth(),
    };
    let config = builder
        .with_single_cert(chain, key)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}
