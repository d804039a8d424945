//! The lock store on a [`Database`]: the shedlock-sqlx provider of its kind, on a pool of its
//! own (lock traffic never waits behind the harness's run-log writes); or, for `redis://` and
//! `etcd://` URLs, the shedlock-redis and shedlock-etcd providers (stores without the harness's
//! tables: the run log then lives in a SQL database of its own).
//!
//! Only SQLite is always built: Postgres, MySQL/MariaDB, Redis and etcd are the package's
//! `postgres`, `mysql`, `redis` and `etcd` features, and a build without one refuses its URLs
//! with an error naming the feature ([`ensure_built`]).

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use shedlock_core::jobs::HistoryPolicy;
use shedlock_core::provider::LockProvider;
#[cfg(feature = "mysql")]
use shedlock_sqlx::MySqlLockProvider;
#[cfg(feature = "postgres")]
use shedlock_sqlx::PgLockProvider;
use shedlock_sqlx::{LockProviderBuilder, SqliteLockProvider};

use crate::database::{BoxError, Database, DbKind, Pool, sqlite_options};

/// The environment variable a password can come from (inherited by the replicas a cluster
/// starts; never a command-line option, which `ps` shows).
pub const PASSWORD_ENV: &str = "SHEDLOCK_PASSWORD";

/// What a Redis or etcd URL cannot carry, the same for every lock store this process opens:
/// the TLS files (`--cacert`, `--cert`, `--key`) and the credentials (`--user`, and the password
/// from `--password-file` or [`PASSWORD_ENV`]). Set once, at start-up, by the command line. A
/// SQL database takes them in its URL, which the run log shares.
#[derive(Default, Clone)]
pub struct ConnectOptions {
    /// The CA file to trust (turns on verifying the server's certificate and host name).
    pub cacert: Option<PathBuf>,
    /// The client certificate and its key.
    pub cert_key: Option<(PathBuf, PathBuf)>,
    /// The user to log in as (etcd: its authentication user).
    pub user: Option<String>,
    /// The password (never printed).
    pub password: Option<String>,
}

impl std::fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectOptions")
            .field("cacert", &self.cacert)
            .field("cert_key", &self.cert_key)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .finish()
    }
}

static CONNECT: OnceLock<ConnectOptions> = OnceLock::new();

static HISTORY: OnceLock<u32> = OnceLock::new();

/// Keeps the history of runs, `keep` per lock, in every lock store this process opens (SQL and
/// Redis: `history(HistoryPolicy::keep(keep))` on their builders); set once, at start-up, by
/// `--history`.
///
/// # Errors
///
/// When it was set already.
pub fn set_history(keep: u32) -> Result<(), BoxError> {
    HISTORY
        .set(keep)
        .map_err(|_| "the history is set once, at start-up".into())
}

fn history() -> Option<HistoryPolicy> {
    HISTORY.get().map(|keep| HistoryPolicy::keep(*keep))
}

/// Sets this process's [`ConnectOptions`]; once only.
///
/// # Errors
///
/// When they were set already.
pub fn set_connect_options(options: ConnectOptions) -> Result<(), BoxError> {
    CONNECT
        .set(options)
        .map_err(|_| "the connect options are set once, at start-up".into())
}

/// This process's [`ConnectOptions`] (none unless set).
pub fn connect_options() -> &'static ConnectOptions {
    CONNECT.get_or_init(ConnectOptions::default)
}

impl ConnectOptions {
    /// Whether any is given.
    #[must_use]
    pub fn is_set(&self) -> bool {
        self.cacert.is_some()
            || self.cert_key.is_some()
            || self.user.is_some()
            || self.password.is_some()
    }

    /// The command-line options that give a replica the same TLS files and user (the password
    /// goes through [`PASSWORD_ENV`]).
    #[must_use]
    pub fn as_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(ca) = &self.cacert {
            args.extend(["--cacert".to_owned(), ca.display().to_string()]);
        }
        if let Some((cert, key)) = &self.cert_key {
            args.extend(["--cert".to_owned(), cert.display().to_string()]);
            args.extend(["--key".to_owned(), key.display().to_string()]);
        }
        if let Some(user) = &self.user {
            args.extend(["--user".to_owned(), user.clone()]);
        }
        args
    }
}

fn configure<DB: sqlx::Database>(
    mut builder: LockProviderBuilder<DB>,
    table: Option<&str>,
    call_timeout: Option<Duration>,
) -> LockProviderBuilder<DB> {
    if let Some(table) = table {
        builder = builder.table(table);
    }
    if let Some(timeout) = call_timeout {
        builder = builder.call_timeout(timeout);
    }
    if let Some(policy) = history() {
        builder = builder.history(policy);
    }
    builder
}

/// The provider for `db` with connections of its own, on `table` (the store's default when `None`), with
/// `call_timeout` (the store's default when `None`).
pub(crate) async fn provider(
    db: &Database,
    table: Option<&str>,
    call_timeout: Option<Duration>,
) -> Result<Arc<dyn LockProvider>, BoxError> {
    if connect_options().is_set() {
        return Err(
            "--cacert, --cert, --key, --user and a password are for Redis and etcd: a SQL \
                    database takes them in its URL (Postgres: sslmode=verify-full&sslrootcert=…&\
                    sslcert=…&sslkey=…; MySQL: ssl-mode=VERIFY_IDENTITY&ssl-ca=…&ssl-cert=…&\
                    ssl-key=…), which the demo's run log shares"
                .into(),
        );
    }
    let url = db.url();
    Ok(match db.kind() {
        #[cfg(feature = "postgres")]
        DbKind::Postgres => {
            // From the URL, so that its `transaction_pooler=true` and TLS files are understood.
            let builder = PgLockProvider::from_url(url);
            Arc::new(configure(builder, table, call_timeout).connect().await?)
        }
        #[cfg(feature = "mysql")]
        DbKind::MySql => {
            let builder = MySqlLockProvider::from_url(url);
            Arc::new(configure(builder, table, call_timeout).connect().await?)
        }
        DbKind::Sqlite => {
            let builder = SqliteLockProvider::from_options(sqlite_options(url)?);
            Arc::new(configure(builder, table, call_timeout).connect().await?)
        }
        #[cfg(not(all(feature = "postgres", feature = "mysql")))]
        kind => return Err(not_built(kind)),
    })
}

/// Creates the lock table if missing, with the store's own DDL.
pub(crate) async fn create_table(db: &Database, table: Option<&str>) -> Result<(), BoxError> {
    match db.pool() {
        #[cfg(feature = "postgres")]
        Pool::Postgres(pool) => {
            configure(PgLockProvider::builder(pool.clone()), table, None)
                .build()?
                .create_table_if_not_exists()
                .await?;
        }
        #[cfg(feature = "mysql")]
        Pool::MySql(pool) => {
            configure(MySqlLockProvider::builder(pool.clone()), table, None)
                .build()?
                .create_table_if_not_exists()
                .await?;
        }
        Pool::Sqlite(pool) => {
            configure(SqliteLockProvider::builder(pool.clone()), table, None)
                .build()?
                .create_table_if_not_exists()
                .await?;
        }
    }
    Ok(())
}

/// Whether `url` names a Redis server (`redis://`, `rediss://`): a lock store without the
/// harness's tables (run log, heartbeats), served by shedlock-redis.
#[must_use]
pub fn is_redis_url(url: &str) -> bool {
    let scheme = url.split(':').next().unwrap_or_default();
    scheme.eq_ignore_ascii_case("redis") || scheme.eq_ignore_ascii_case("rediss")
}

/// The Redis lock store at `url`, under `key_prefix` (the store's default, `shedlock:`, when
/// `None`), with `call_timeout` (the store's default, 5 s, when `None`).
#[cfg_attr(not(feature = "redis"), allow(clippy::unused_async))]
pub(crate) async fn redis_provider(
    url: &str,
    key_prefix: Option<&str>,
    call_timeout: Option<Duration>,
) -> Result<Arc<dyn LockProvider>, BoxError> {
    #[cfg(feature = "redis")]
    {
        let mut builder = shedlock_redis::RedisLockProvider::builder(url);
        if let Some(prefix) = key_prefix {
            builder = builder.key_prefix(prefix);
        }
        let connect = connect_options();
        if let Some(ca) = &connect.cacert {
            builder = builder.ca_file(ca);
        }
        if let Some((cert, key)) = &connect.cert_key {
            builder = builder.client_cert(cert, key);
        }
        if let Some(user) = &connect.user {
            builder = builder.username(user);
        }
        if let Some(password) = &connect.password {
            builder = builder.password(password);
        }
        if let Some(timeout) = call_timeout {
            builder = builder.call_timeout(timeout);
        }
        if let Some(policy) = history() {
            builder = builder.history(policy);
        }
        Ok(Arc::new(builder.connect().await?))
    }
    #[cfg(not(feature = "redis"))]
    {
        let _ = (url, key_prefix, call_timeout);
        Err(missing_feature("Redis", "redis"))
    }
}

/// Whether `url` names an etcd cluster (`etcd://host:port[,host:port…]`, over TLS `etcds://` or
/// `https://`; `http://` too), served by shedlock-etcd.
#[must_use]
pub fn is_etcd_url(url: &str) -> bool {
    let scheme = url.split(':').next().unwrap_or_default();
    ["etcd", "etcds", "https", "http"]
        .iter()
        .any(|s| scheme.eq_ignore_ascii_case(s))
}

/// Whether `url` names a lock store that is no SQL database (Redis, etcd).
#[must_use]
pub fn is_kv_url(url: &str) -> bool {
    is_redis_url(url) || is_etcd_url(url)
}

/// The etcd lock store at `url`, under `key_prefix` (the store's default when `None`), with
/// `call_timeout` (the store's default when `None`).
pub(crate) fn etcd_provider(
    url: &str,
    key_prefix: Option<&str>,
    call_timeout: Option<Duration>,
) -> Result<Arc<dyn LockProvider>, BoxError> {
    #[cfg(feature = "etcd")]
    {
        let mut builder = shedlock_etcd::EtcdLockProvider::builder(url);
        if let Some(prefix) = key_prefix {
            builder = builder.prefix(prefix);
        }
        let connect = connect_options();
        if let Some(ca) = &connect.cacert {
            builder = builder.ca_file(ca);
        }
        if let Some((cert, key)) = &connect.cert_key {
            builder = builder.client_cert(cert, key);
        }
        match (&connect.user, &connect.password) {
            (Some(user), Some(password)) => builder = builder.credentials(user, password),
            (None, None) => {}
            _ => return Err("etcd authentication needs both --user and a password".into()),
        }
        if let Some(timeout) = call_timeout {
            builder = builder.call_timeout(timeout);
        }
        Ok(Arc::new(builder.build()?))
    }
    #[cfg(not(feature = "etcd"))]
    {
        let _ = (url, key_prefix, call_timeout);
        Err(missing_feature("etcd", "etcd"))
    }
}

/// Checks that this build has the store `url` names: a `redis://` or `etcd://` URL needs the
/// package's `redis` or `etcd` feature.
///
/// # Errors
///
/// The store's feature is off; the error says which feature and the command that turns it on.
pub fn ensure_built(url: &str) -> Result<(), BoxError> {
    let (store, feature, built) = if is_redis_url(url) {
        ("Redis", "redis", cfg!(feature = "redis"))
    } else if is_etcd_url(url) {
        ("etcd", "etcd", cfg!(feature = "etcd"))
    } else {
        match DbKind::of_url(url) {
            Ok(kind) => sql_feature(kind),
            // Not a store URL at all: connecting says so.
            Err(_) => return Ok(()),
        }
    };
    if built {
        Ok(())
    } else {
        Err(missing_feature(store, feature))
    }
}

/// The store's name, the package feature that builds its driver and whether this build has it.
fn sql_feature(kind: DbKind) -> (&'static str, &'static str, bool) {
    match kind {
        DbKind::Postgres => ("PostgreSQL", "postgres", cfg!(feature = "postgres")),
        DbKind::MySql => ("MySQL/MariaDB", "mysql", cfg!(feature = "mysql")),
        DbKind::Sqlite => ("SQLite", "sqlite", true),
    }
}

/// The error for a database whose driver this build left out.
#[cfg_attr(all(feature = "postgres", feature = "mysql"), allow(dead_code))]
pub(crate) fn not_built(kind: DbKind) -> BoxError {
    let (store, feature, _) = sql_feature(kind);
    missing_feature(store, feature)
}

/// The error for a store URL whose client this build left out: which feature to turn on, and
/// the command that does.
fn missing_feature(store: &str, feature: &str) -> BoxError {
    format!(
        "this build of the demo has no {store} store: it is the `{feature}` feature of \
         shedlock-demo, left out of the default build to keep it small; run \
         `cargo run --example cluster --features {feature} -- --database-url …`"
    )
    .into()
}

/// The lock store at `url` when it is Redis or etcd (`prefix` is then the key prefix); `None`
/// for a SQL URL.
pub(crate) async fn kv_provider(
    url: &str,
    prefix: Option<&str>,
    call_timeout: Option<Duration>,
) -> Result<Option<Arc<dyn LockProvider>>, BoxError> {
    if is_redis_url(url) {
        Ok(Some(redis_provider(url, prefix, call_timeout).await?))
    } else if is_etcd_url(url) {
        Ok(Some(etcd_provider(url, prefix, call_timeout)?))
    } else {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_url_needs_its_feature_and_sqlite_needs_none() {
        for (url, built, feature) in [
            ("redis://127.0.0.1:6379", cfg!(feature = "redis"), "redis"),
            ("etcd://127.0.0.1:2379", cfg!(feature = "etcd"), "etcd"),
            ("postgres://h/db", cfg!(feature = "postgres"), "postgres"),
            ("postgresql://h/db", cfg!(feature = "postgres"), "postgres"),
            ("mysql://h/db", cfg!(feature = "mysql"), "mysql"),
            ("mariadb://h/db", cfg!(feature = "mysql"), "mysql"),
        ] {
            match ensure_built(url) {
                Ok(()) => assert!(built, "{url} accepted without the `{feature}` feature"),
                Err(error) => {
                    assert!(
                        !built,
                        "{url} refused with the `{feature}` feature: {error}"
                    );
                    let text = error.to_string();
                    assert!(
                        text.contains(&format!("--features {feature}")),
                        "the error names the feature: {text}"
                    );
                }
            }
        }
        // SQLite is always built; a URL of no store is left to `Database::connect` to refuse.
        for url in ["sqlite:///tmp/x.db", "sqlite::memory:", "ftp://h/x"] {
            assert!(ensure_built(url).is_ok(), "{url}");
        }
    }
}
