//! TLS to etcd members (feature `tls-rustls`): the rustls client configuration from the builder's
//! files, and what a failed handshake means, in words.

use std::error::Error as StdError;
use std::io;
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{AlertDescription, CertificateError, ClientConfig, RootCertStore};
use shedlock_core::{Error, Result};

/// The client configuration.
///
/// `ca_file`'s certificates are the only trusted roots. Without `ca_file`, the system's roots are
/// trusted. The client certificate is included when one is given. ring is the crypto provider,
/// named here. `ClientConfig::builder()` would panic in an application that also enables aws-lc-rs.
pub(crate) fn client_config(
    ca_file: Option<&Path>,
    client_cert: Option<(&Path, &Path)>,
) -> Result<ClientConfig> {
    let roots = match ca_file {
        Some(path) => file_roots(path)?,
        None => system_roots()?,
    };
    let builder =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::invalid_config(format!("etcd TLS: {e}")))?
            .with_root_certificates(roots);
    match client_cert {
        None => Ok(builder.with_no_client_auth()),
        Some((cert_path, key_path)) => {
            let chain = certificates(
                cert_path,
                "the etcd client certificate file",
                "the PEM client certificate (and its chain) to present to the members",
            )?;
            let key = PrivateKeyDer::from_pem_file(key_path).map_err(|e| {
                Error::invalid_config(format!(
                    "cannot read the etcd client key file {}: {e}; it should hold the PEM \
                     private key (PKCS#8, PKCS#1 or SEC1) of the client certificate {}",
                    key_path.display(),
                    cert_path.display()
                ))
            })?;
            builder.with_client_auth_cert(chain, key).map_err(|e| {
                Error::invalid_config(format!(
                    "the etcd client certificate {} and key {} cannot be used together: {e}",
                    cert_path.display(),
                    key_path.display()
                ))
            })
        }
    }
}

/// A configuration that is never used to connect: the connector of a plain-HTTP provider.
pub(crate) fn unused_config() -> Result<ClientConfig> {
    Ok(
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::invalid_config(format!("etcd TLS: {e}")))?
            .with_root_certificates(RootCertStore::empty())
            .with_no_client_auth(),
    )
}

/// Every PEM certificate in `path`, at least one.
fn certificates(path: &Path, what: &str, holds: &str) -> Result<Vec<CertificateDer<'static>>> {
    let bad = |why: String| {
        Error::invalid_config(format!(
            "cannot read {what} {}: {why}; it should hold {holds}",
            path.display()
        ))
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(e.to_string()))?
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
    if certs.is_empty() {
        return Err(bad("it has no PEM certificate".to_owned()));
    }
    Ok(certs)
}

fn file_roots(path: &Path) -> Result<RootCertStore> {
    let certs = certificates(
        path,
        "the etcd CA file",
        "the PEM certificate(s) of the CA that signed the etcd members' certificates",
    )?;
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots.add(cert).map_err(|e| {
            Error::invalid_config(format!(
                "the etcd CA file {} has a certificate that cannot be a trusted root: {e}",
                path.display()
            ))
        })?;
    }
    Ok(roots)
}

fn system_roots() -> Result<RootCertStore> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let why = found
            .errors
            .first()
            .map_or_else(String::new, |e| format!(" ({e})"));
        return Err(Error::invalid_config(format!(
            "etcd TLS: no trusted root certificate found on this system{why}; give the CA that \
             signed the etcd members' certificates with ca_file(..)"
        )));
    }
    Ok(roots)
}

/// The first `rustls::Error` in an error's chain.
///
/// `io::Error::source` skips the error it wraps, and gives that error's source. So wrapped I/O
/// errors are opened with `get_ref`.
fn rustls_error<'a>(error: &'a (dyn StdError + 'static)) -> Option<&'a rustls::Error> {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(found) = error.downcast_ref::<rustls::Error>() {
            return Some(found);
        }
        if let Some(io) = error.downcast_ref::<io::Error>()
            && let Some(inner) = io.get_ref()
            && let Some(found) = rustls_error(inner)
        {
            return Some(found);
        }
        next = error.source();
    }
    None
}

/// A failed TLS handshake, in words: what is wrong and what to change.
///
/// It is `None` when the chain has no TLS error.
///
/// The second value says whether the member refused the handshake itself. The member then never
/// read a request, even when this client had already written one. In TLS 1.3 a client may send its
/// request before the server has checked the client's certificate. `client_cert` says whether this
/// client has a certificate to present. A member that requires one and got none may answer "bad
/// certificate" or "certificate required".
pub(crate) fn explain(
    error: &(dyn StdError + 'static),
    client_cert: bool,
) -> Option<(String, bool)> {
    let tls = rustls_error(error)?;
    let handshake = "the TLS handshake failed";
    let text = match tls {
        rustls::Error::InvalidCertificate(cert) => match cert {
            CertificateError::UnknownIssuer => format!(
                "{handshake}: the member's certificate is not trusted (signed by a CA this client \
                 does not trust); give the CA that signed it with ca_file(..)"
            ),
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                format!(
                    "{handshake}: the member's certificate is not valid for this host name \
                     (host name mismatch: {cert}); connect with a name the certificate lists"
                )
            }
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => format!(
                "{handshake}: the member's certificate has expired ({cert}); renew it on the member"
            ),
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                format!("{handshake}: the member's certificate is not valid yet ({cert})")
            }
            other => format!("{handshake}: the member's certificate was refused: {other}"),
        },
        rustls::Error::AlertReceived(
            AlertDescription::CertificateRequired | AlertDescription::BadCertificate,
        ) if !client_cert => format!(
            "{handshake}: the member requires a client certificate and none was given; give one \
             with client_cert(cert, key)"
        ),
        rustls::Error::AlertReceived(
            alert @ (AlertDescription::BadCertificate
            | AlertDescription::UnknownCA
            | AlertDescription::CertificateUnknown
            | AlertDescription::CertificateExpired
            | AlertDescription::CertificateRevoked
            | AlertDescription::UnsupportedCertificate),
        ) => format!(
            "{handshake}: the member refused the client certificate ({alert:?}); it must be \
             signed by a CA the member trusts (its --trusted-ca-file) and be valid"
        ),
        rustls::Error::InvalidMessage(_) => format!(
            "{handshake}: the member did not answer in TLS (it seems to speak plain HTTP: use \
             etcd://, or enable TLS on the member)"
        ),
        other => format!("{handshake}: {other}"),
    };
    let refused = matches!(
        tls,
        rustls::Error::AlertReceived(
            AlertDescription::CertificateRequired
                | AlertDescription::BadCertificate
                | AlertDescription::UnknownCA
                | AlertDescription::CertificateUnknown
                | AlertDescription::CertificateExpired
                | AlertDescription::CertificateRevoked
                | AlertDescription::UnsupportedCertificate
                | AlertDescription::HandshakeFailure
        )
    );
    Some((text, refused))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rustls_error_is_found_inside_wrapped_io_errors() {
        // As hyper-rustls hands it over: rustls' error in tokio-rustls' io::Error, in another.
        let inner = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
        );
        let outer = io::Error::other(inner);
        let (text, refused) = explain(&outer, false).expect("a TLS error");
        assert!(
            text.contains("not trusted") && text.contains("ca_file"),
            "{text}"
        );
        assert!(!refused);
        assert!(explain(&io::Error::other("connection refused"), false).is_none());
    }

    #[test]
    fn a_refused_handshake_names_the_missing_client_certificate() {
        let alert = || rustls::Error::AlertReceived(AlertDescription::BadCertificate);
        let (none, refused) = explain(&alert(), false).unwrap();
        assert!(none.contains("none was given") && refused, "{none}");
        let (bad, refused) = explain(&alert(), true).unwrap();
        assert!(
            bad.contains("refused the client certificate") && refused,
            "{bad}"
        );
    }
}
