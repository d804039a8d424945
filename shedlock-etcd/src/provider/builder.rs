//! [`EtcdLockProviderBuilder`]: a provider's settings, checked when it is built.

use std::fmt;
#[cfg(feature = "tls-rustls")]
use std::path::PathBuf;
use std::time::Duration;

use shedlock_core::{
    Error, Result,
    provider::{DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_NAME_LEN},
};

use super::{DEFAULT_PREFIX, EtcdLockProvider, MAX_NAME_LEN_LIMIT};
use crate::endpoint::{Credentials, Endpoints};
use crate::gateway::Gateway;
use crate::key;

/// Builds an [`EtcdLockProvider`] from endpoints, key prefix, name length, call timeout, TLS files
/// and credentials, which [`build`](Self::build) checks, reading the files.
///
/// ```
/// use std::time::Duration;
/// use shedlock_etcd::EtcdLockProvider;
///
/// let provider = EtcdLockProvider::builder("etcd://10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379")
///     .prefix("billing/locks/")
///     .call_timeout(Duration::from_secs(3))
///     .build()?;
/// assert_eq!(provider.endpoints().authorities().len(), 3);
/// # Ok::<(), shedlock_core::Error>(())
/// ```
///
/// Over TLS with a client certificate, as an etcd user, with the feature `tls-rustls`:
///
/// ```no_run
/// # #[cfg(feature = "tls-rustls")]
/// # fn main() -> shedlock_core::Result<()> {
/// use shedlock_etcd::EtcdLockProvider;
///
/// let provider = EtcdLockProvider::builder("https://etcd-0:2379,etcd-1:2379,etcd-2:2379")
///     .ca_file("/etc/etcd/pki/ca.pem")
///     .client_cert("/etc/etcd/pki/client.pem", "/etc/etcd/pki/client.key")
///     .credentials("locker", std::env::var("ETCD_PASSWORD").unwrap_or_default())
///     .build()?;
/// # let _ = provider;
/// # Ok(())
/// # }
/// # #[cfg(not(feature = "tls-rustls"))]
/// # fn main() {}
/// ```
#[derive(Clone)]
pub struct EtcdLockProviderBuilder {
    url: String,
    prefix: String,
    call_timeout: Duration,
    max_name_len: usize,
    credentials: Option<Credentials>,
    #[cfg(feature = "tls-rustls")]
    ca_file: Option<PathBuf>,
    #[cfg(feature = "tls-rustls")]
    client_cert: Option<(PathBuf, PathBuf)>,
}

impl fmt::Debug for EtcdLockProviderBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL may carry a password: it is shown parsed (password hidden), or not at all.
        let mut d = f.debug_struct("EtcdLockProviderBuilder");
        match self.url.parse::<Endpoints>() {
            Ok(endpoints) => d.field("endpoints", &endpoints),
            Err(_) => d.field("endpoints", &"(not a valid etcd URL)"),
        };
        d.field("prefix", &self.prefix)
            .field("call_timeout", &self.call_timeout)
            .field("max_name_len", &self.max_name_len)
            .field("credentials", &self.credentials);
        #[cfg(feature = "tls-rustls")]
        d.field("ca_file", &self.ca_file)
            .field("client_cert", &self.client_cert);
        d.finish()
    }
}

impl EtcdLockProviderBuilder {
    /// The key prefix every lock's keys start with, by default [`DEFAULT_PREFIX`] (`"shedlock/"`):
    /// printable ASCII ending in `/`, at most 256 bytes.
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The limit on one whole operation: all its round trips, across the members tried, by default
    /// [`DEFAULT_CALL_TIMEOUT`] (5 s). A call past it fails with [`Error::is_timeout`], and its
    /// connection is closed, never reused.
    #[must_use]
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// The longest lock name accepted, in characters, at most [`MAX_NAME_LEN_LIMIT`], by default
    /// [`DEFAULT_MAX_NAME_LEN`], 64, as in the SQL stores.
    #[must_use]
    pub fn max_name_len(mut self, max: usize) -> Self {
        self.max_name_len = max;
        self
    }

    /// The etcd user to authenticate as, overriding the URL's `user:password@` (see
    /// [TLS and authentication](crate#tls-and-authentication)).
    #[must_use]
    pub fn credentials(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.credentials = Some(Credentials {
            user: user.into(),
            password: password.into(),
        });
        self
    }

    /// The CA certificates to trust for the members' certificates instead of the system's roots, in
    /// a PEM file. [`build`](Self::build) reads it. It needs an `https://` URL.
    #[cfg(feature = "tls-rustls")]
    #[must_use]
    pub fn ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca_file = Some(path.into());
        self
    }

    /// A client certificate, PEM with its chain if any, and its private key, PEM as PKCS#8, PKCS#1
    /// or SEC1, for members that require one (`--client-cert-auth`). [`build`](Self::build) reads
    /// the files. It needs an `https://` URL.
    #[cfg(feature = "tls-rustls")]
    #[must_use]
    pub fn client_cert(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.client_cert = Some((cert.into(), key.into()));
        self
    }

    /// The provider.
    ///
    /// # Errors
    ///
    /// [`Error::is_invalid_config`] for a URL not of the [`Endpoints`] form, an invalid prefix, a
    /// timeout of zero or above an hour, a name limit of 0 or above [`MAX_NAME_LEN_LIMIT`], an
    /// empty user name, an `https://` URL without the `tls-rustls` feature, TLS files with a plain
    /// URL, or a CA file, client certificate or key that cannot be read or holds no PEM of its
    /// kind.
    pub fn build(self) -> Result<EtcdLockProvider> {
        let endpoints: Endpoints = self.url.parse()?;
        let credentials = self
            .credentials
            .clone()
            .or_else(|| endpoints.credentials().cloned());
        if credentials.as_ref().is_some_and(|c| c.user.is_empty()) {
            return Err(Error::invalid_config("the etcd user name is empty"));
        }
        key::validate_prefix(&self.prefix)?;
        if self.call_timeout.is_zero() || self.call_timeout > Duration::from_hours(1) {
            return Err(Error::invalid_config(format!(
                "the etcd call timeout ({:?}) must be above zero and at most an hour",
                self.call_timeout
            )));
        }
        if self.max_name_len == 0 || self.max_name_len > MAX_NAME_LEN_LIMIT {
            return Err(Error::invalid_config(format!(
                "the etcd lock name limit ({}) must be from 1 to {MAX_NAME_LEN_LIMIT} characters",
                self.max_name_len
            )));
        }
        #[cfg(feature = "tls-rustls")]
        let tls = self.tls_config(&endpoints)?;
        #[cfg(not(feature = "tls-rustls"))]
        if endpoints.is_tls() {
            return Err(Error::invalid_config(format!(
                "the etcd URL {endpoints} asks for TLS: enable feature `tls-rustls` of \
                 shedlock-etcd"
            )));
        }
        // Leave time to try the next member when one does not accept connections.
        let connect_timeout = (self.call_timeout / 3).min(Duration::from_secs(1));
        Ok(EtcdLockProvider {
            gateway: Gateway::new(
                endpoints,
                connect_timeout,
                credentials,
                #[cfg(feature = "tls-rustls")]
                tls,
            ),
            prefix: self.prefix,
            call_timeout: self.call_timeout,
            max_name_len: self.max_name_len,
        })
    }
}

#[cfg(feature = "tls-rustls")]
impl EtcdLockProviderBuilder {
    /// The rustls configuration, from the CA file and client certificate for a TLS URL. A plain URL
    /// must have neither, and gets a configuration that is never used.
    fn tls_config(&self, endpoints: &Endpoints) -> Result<rustls::ClientConfig> {
        if !endpoints.is_tls() {
            if self.ca_file.is_some() || self.client_cert.is_some() {
                return Err(Error::invalid_config(format!(
                    "ca_file/client_cert were given but the etcd URL {endpoints} is plain HTTP: \
                     use https://host:port for TLS"
                )));
            }
            return crate::tls::unused_config();
        }
        crate::tls::client_config(
            self.ca_file.as_deref(),
            self.client_cert
                .as_ref()
                .map(|(cert, key)| (cert.as_path(), key.as_path())),
        )
    }
}

impl EtcdLockProvider {
    /// A provider on the cluster at `url` with the default prefix, name limit and timeout.
    ///
    /// # Errors
    ///
    /// As [`EtcdLockProviderBuilder::build`].
    pub fn new(url: &str) -> Result<Self> {
        Self::builder(url).build()
    }

    /// A builder for a provider on the cluster at `url` (see [`Endpoints`] for the form).
    #[must_use]
    pub fn builder(url: impl Into<String>) -> EtcdLockProviderBuilder {
        EtcdLockProviderBuilder {
            url: url.into(),
            prefix: DEFAULT_PREFIX.to_owned(),
            call_timeout: DEFAULT_CALL_TIMEOUT,
            max_name_len: DEFAULT_MAX_NAME_LEN,
            credentials: None,
            #[cfg(feature = "tls-rustls")]
            ca_file: None,
            #[cfg(feature = "tls-rustls")]
            client_cert: None,
        }
    }
}
