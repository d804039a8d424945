//! TLS settings a `rediss://` URL cannot carry, behind the feature `tls-rustls`.
//!
//! They are the CA to trust instead of the system's roots, and a client certificate for servers
//! that require one.

use std::path::{Path, PathBuf};

use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use shedlock_core::{Error, Result};

/// The certificate files of a [`RedisLockProviderBuilder`](crate::RedisLockProviderBuilder).
#[derive(Debug, Clone, Default)]
pub(crate) struct TlsFiles {
    pub(crate) ca: Option<PathBuf>,
    pub(crate) client: Option<(PathBuf, PathBuf)>,
}

impl TlsFiles {
    pub(crate) fn is_set(&self) -> bool {
        self.ca.is_some() || self.client.is_some()
    }

    /// The files' contents, each checked to hold what it should, for
    /// `redis::Client::build_with_tls`.
    pub(crate) fn certificates(&self) -> Result<redis::TlsCertificates> {
        let root_cert = self
            .ca
            .as_deref()
            .map(|path| certificates(path, "the CA file (ca_file)"))
            .transpose()?;
        let client_tls = self
            .client
            .as_ref()
            .map(|(cert, key)| {
                Ok::<_, Error>(redis::ClientTlsConfig {
                    client_cert: certificates(cert, "the client certificate file")?,
                    client_key: private_key(key)?,
                })
            })
            .transpose()?;
        Ok(redis::TlsCertificates {
            client_tls,
            root_cert,
        })
    }
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>> {
    std::fs::read(path)
        .map_err(|e| Error::invalid_config(format!("cannot read {what} {}: {e}", path.display())))
}

/// The file's bytes, if it holds at least one PEM certificate.
fn certificates(path: &Path, what: &str) -> Result<Vec<u8>> {
    let pem = read(path, what)?;
    let parsed: std::result::Result<Vec<_>, _> = CertificateDer::pem_slice_iter(&pem).collect();
    match parsed {
        Ok(certs) if !certs.is_empty() => Ok(pem),
        Ok(_) => Err(Error::invalid_config(format!(
            "{what} {} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            path.display()
        ))),
        Err(e) => Err(Error::invalid_config(format!(
            "{what} {} is not valid PEM: {e}",
            path.display()
        ))),
    }
}

/// The file's bytes, if it holds a PEM private key.
fn private_key(path: &Path) -> Result<Vec<u8>> {
    let what = "the client key file";
    let pem = read(path, what)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        Error::invalid_config(format!(
            "{what} {} holds no PEM private key ({e})",
            path.display()
        ))
    })?;
    Ok(pem)
}

/// The `redis` crate builds its TLS configuration with rustls' process-wide crypto provider.
///
/// Rustls picks that provider by itself only when exactly one is compiled in. An application that
/// also enables aws-lc-rs would make every `rediss://` connection fail. So this crate's ring is
/// installed as that default, unless the application installed one.
pub(crate) fn ensure_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another installer is fine: a provider is installed either way.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}
