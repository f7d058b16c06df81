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
        .with_safe_default_protocol_versions()
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
