//! [`RedisLockProviderBuilder`]: the server, key prefix, name length and call timeout, checked
//! once.

use std::fmt;
#[cfg(feature = "tls-rustls")]
use std::path::PathBuf;
use std::time::Duration;

#[cfg(feature = "tls-rustls")]
use redis::ConnectionAddr;
use redis::ConnectionInfo;

use shedlock_core::{
    Error, Result,
    jobs::HistoryPolicy,
    provider::{DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_NAME_LEN, MAX_DURATION},
};

use crate::connection::{Connection, describe};
use crate::provider::RedisLockProvider;

/// The key prefix of every lock key unless configured: `shedlock:`. Java ShedLock's Redis provider
/// uses `job-lock:` with plain string values, so the two never meet.
pub const DEFAULT_KEY_PREFIX: &str = "shedlock:";

/// The longest key prefix accepted, in bytes.
const MAX_PREFIX_LEN: usize = 256;

/// The longest [`max_name_len`](RedisLockProviderBuilder::max_name_len) accepted.
const MAX_NAME_LEN_LIMIT: usize = 1024;

/// Configures a [`RedisLockProvider`]. Start from [`RedisLockProvider::builder`]. Finish with
/// [`connect`](Self::connect), which connects and checks the server, or [`build`](Self::build),
/// which does no I/O.
///
/// ```no_run
/// # async fn example() -> shedlock_core::Result<()> {
/// use std::time::Duration;
/// use shedlock_redis::RedisLockProvider;
///
/// let provider = RedisLockProvider::builder("redis://127.0.0.1:6379/0")
///     .key_prefix("billing:locks:")
///     .max_name_len(128)
///     .call_timeout(Duration::from_secs(2))
///     .connect()
///     .await?;
/// # Ok(()) }
/// ```
#[must_use]
pub struct RedisLockProviderBuilder {
    server: std::result::Result<ConnectionInfo, redis::RedisError>,
    #[cfg(feature = "tls-rustls")]
    tls: crate::tls::TlsFiles,
    key_prefix: String,
    max_name_len: usize,
    call_timeout: Duration,
    history: Option<HistoryPolicy>,
}

/// A checked configuration, as the provider uses it.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) key_prefix: String,
    pub(crate) max_name_len: usize,
    pub(crate) call_timeout: Duration,
    pub(crate) history: Option<HistoryPolicy>,
}

impl RedisLockProviderBuilder {
    pub(crate) fn new(server: impl redis::IntoConnectionInfo) -> Self {
        Self {
            server: server.into_connection_info(),
            #[cfg(feature = "tls-rustls")]
            tls: crate::tls::TlsFiles::default(),
            key_prefix: DEFAULT_KEY_PREFIX.to_owned(),
            max_name_len: DEFAULT_MAX_NAME_LEN,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            history: None,
        }
    }

    /// The prefix of every lock key, by default [`DEFAULT_KEY_PREFIX`]: 1 to 256 bytes, any but
    /// NUL. The key is the prefix followed by the lock name's UTF-8 bytes.
    ///
    /// Providers sharing a Redis database with prefixes that are not prefixes of each other, as
    /// `a:` and `b:` but not `a:` and `a:b:`, never see each other's locks. Overlapping prefixes
    /// cannot mix up two locks either, because each record keeps its lock name. A provider that
    /// meets a key holding another name's record fails with [`Error::is_invalid_config`] and leaves
    /// that key out of [`list`](shedlock_core::admin::LockAdmin::list).
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// The longest lock name accepted, in characters, at most 1024. It defaults to
    /// [`DEFAULT_MAX_NAME_LEN`], 64, as in the SQL stores, so names move between stores. Redis
    /// would take much longer keys, but the limit keeps keys and listings sane.
    pub fn max_name_len(mut self, max: usize) -> Self {
        self.max_name_len = max;
        self
    }

    /// How long one provider call may take, connecting included, before it fails with
    /// [`Error::is_timeout`], by default [`DEFAULT_CALL_TIMEOUT`], 5 s. A call that timed out drops
    /// its connection, and the next call connects afresh, so a black-holed connection never keeps
    /// failing calls. A timed-out acquire may still have taken the lock until its `at_most` ends.
    /// Each of [`LockAdmin::list`](shedlock_core::admin::LockAdmin::list)'s round trips has this
    /// timeout.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// Keeps the history of runs, off by default. Each [`release_run`] then also pushes the run
    /// onto a list per lock name (see [`history_key`]), trimmed in the same script to the newest
    /// `policy.keep` runs and to those that ended within `policy.max_age`. Without it,
    /// `release_run` writes only the job state of the lock's hash.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
    /// use std::time::Duration;
    /// use shedlock_core::jobs::HistoryPolicy;
    ///
    /// let provider = shedlock_redis::RedisLockProvider::builder("redis://127.0.0.1")
    ///     .history(HistoryPolicy::keep(50).max_age(Duration::from_secs(7 * 24 * 3600)))
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    ///
    /// [`release_run`]: shedlock_core::provider::LockProvider::release_run
    /// [`history_key`]: RedisLockProvider::history_key
    pub fn history(mut self, policy: HistoryPolicy) -> Self {
        self.history = Some(policy);
        self
    }

    /// Trusts the CA certificates in this PEM file instead of the system's root certificates, for a
    /// `rediss://` server whose certificate a private CA signed. Read by [`build`](Self::build).
    #[cfg(feature = "tls-rustls")]
    pub fn ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls.ca = Some(path.into());
        self
    }

    /// Presents this client certificate and its private key (PEM files) to a `rediss://` server
    /// that requires one (`tls-auth-clients yes`). Read by [`build`](Self::build).
    #[cfg(feature = "tls-rustls")]
    pub fn client_cert(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.tls.client = Some((cert.into(), key.into()));
        self
    }

    /// Logs in (`AUTH`) as this ACL user, instead of the address's.
    pub fn username(mut self, user: impl AsRef<str>) -> Self {
        self.server = self.server.map(|info| {
            let settings = info.redis_settings().clone().set_username(user);
            info.set_redis_settings(settings)
        });
        self
    }

    /// Logs in with this password, instead of the address's. Read it from a secret file or the
    /// environment, so that it appears in no URL, log or process list. `Debug` never shows it.
    pub fn password(mut self, password: impl AsRef<str>) -> Self {
        self.server = self.server.map(|info| {
            let settings = info.redis_settings().clone().set_password(password);
            info.set_redis_settings(settings)
        });
        self
    }

    /// The client of the server address, with the certificate files when TLS is configured.
    fn client(&self) -> Result<redis::Client> {
        let info = self.server.clone().map_err(|e| {
            if e.to_string().contains("TLS") {
                Error::invalid_config(format!(
                    "a rediss:// (TLS) address needs the feature \"tls-rustls\" of shedlock-redis ({e})"
                ))
            } else {
                Error::invalid_config(format!(
                    "the Redis server address is not valid ({e}); use \
                     redis://[user:password@]host[:port][/db] or rediss://… for TLS"
                ))
            }
        })?;
        #[cfg(feature = "tls-rustls")]
        {
            let tls = matches!(info.addr(), ConnectionAddr::TcpTls { .. });
            if tls {
                crate::tls::ensure_crypto_provider();
            }
            if self.tls.is_set() {
                if !tls {
                    return Err(Error::invalid_config(
                        "a CA file or client certificate is set, but the Redis address is not a \
                         TLS one: use rediss://host:port",
                    ));
                }
                return redis::Client::build_with_tls(info, self.tls.certificates()?).map_err(
                    |e| Error::invalid_config(format!("the TLS settings are not usable: {e}")),
                );
            }
        }
        redis::Client::open(info).map_err(|e| {
            Error::invalid_config(format!("the Redis server address is not usable ({e})"))
        })
    }

    fn settings(self) -> Result<(redis::Client, Settings)> {
        let client = self.client()?;
        if self.key_prefix.is_empty() || self.key_prefix.len() > MAX_PREFIX_LEN {
            return Err(Error::invalid_config(format!(
                "the key prefix is {} bytes long; use 1 to {MAX_PREFIX_LEN} bytes (e.g. {DEFAULT_KEY_PREFIX:?})",
                self.key_prefix.len()
            )));
        }
        if self.key_prefix.contains('\0') {
            return Err(Error::invalid_config(
                "the key prefix contains a NUL character; history and definitions keys are told \
                 from lock keys by it",
            ));
        }
        if self.history.is_some_and(|policy| policy.keep == 0) {
            return Err(Error::invalid_config(
                "the history policy keeps 0 runs; keep at least 1 (HistoryPolicy::keep)",
            ));
        }
        if self.max_name_len == 0 || self.max_name_len > MAX_NAME_LEN_LIMIT {
            return Err(Error::invalid_config(format!(
                "max_name_len is {}; use 1 to {MAX_NAME_LEN_LIMIT}",
                self.max_name_len
            )));
        }
        if self.call_timeout.is_zero() || self.call_timeout > MAX_DURATION {
            return Err(Error::invalid_config(format!(
                "call_timeout is {:?}; use a positive duration of at most 365 days",
                self.call_timeout
            )));
        }
        Ok((
            client,
            Settings {
                key_prefix: self.key_prefix,
                max_name_len: self.max_name_len,
                call_timeout: self.call_timeout,
                history: self.history,
            },
        ))
    }

    /// Checks the settings and returns the provider without talking to Redis. The first call
    /// connects, within its `call_timeout`, skipping [`connect`](Self::connect)'s eviction check.
    ///
    /// # Errors
    ///
    /// [`Error::is_invalid_config`] for a malformed server address, an empty or over-long key
    /// prefix or one with a NUL, a history policy keeping 0 runs, a `max_name_len` of 0 or above
    /// 1024, a zero `call_timeout`, or no tokio runtime to run the connection on.
    pub fn build(self) -> Result<RedisLockProvider> {
        let (client, settings) = self.settings()?;
        let connection = Connection::new(client, settings.call_timeout)?;
        Ok(RedisLockProvider::new(connection, settings))
    }

    /// Checks the settings, connects with `PING` within `call_timeout`, and looks at the server's
    /// `maxmemory-policy`. An `allkeys-*` policy may evict lock keys under memory pressure, freeing
    /// held locks and forgetting recorded fires, so it logs a `tracing` warning with the target
    /// `shedlock_redis`. A server that refuses `CONFIG GET`, as a managed Redis or an ACL does,
    /// gets a debug line instead.
    ///
    /// # Errors
    ///
    /// What [`build`](Self::build) refuses. [`Error::is_backend`] or [`Error::is_timeout`] when the
    /// server cannot be reached or refuses the connection, as with a wrong password.
    pub async fn connect(self) -> Result<RedisLockProvider> {
        let provider = self.build()?;
        provider.check_server().await?;
        Ok(provider)
    }
}

impl fmt::Debug for RedisLockProviderBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let server = match &self.server {
            Ok(info) => describe(info),
            Err(_) => "(invalid address)".to_owned(),
        };
        let mut f = f.debug_struct("RedisLockProviderBuilder");
        f.field("server", &server);
        #[cfg(feature = "tls-rustls")]
        f.field("tls", &self.tls);
        f.field("key_prefix", &self.key_prefix)
            .field("max_name_len", &self.max_name_len)
            .field("call_timeout", &self.call_timeout)
            .field("history", &self.history)
            .finish()
    }
}
