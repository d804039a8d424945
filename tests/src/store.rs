//! The lock store on a [`Database`]: the shedlock-sqlx provider of its kind, on a pool of its
//! own (lock traffic never waits behind the harness's run-log writes); or, for `redis://` and
//! `etcd://` URLs, the shedlock-redis and shedlock-etcd providers (stores without the harness's
//! tables: the run log then lives in a SQL database of its own).

use std::str::FromStr as _;
use std::sync::Arc;
use std::time::Duration;

use shedlock_core::LockProvider;
use shedlock_sqlx::{LockProviderBuilder, MySqlLockProvider, PgLockProvider, SqliteLockProvider};
use sqlx::mysql::MySqlConnectOptions;
use sqlx::postgres::PgConnectOptions;

use crate::database::{BoxError, Database, DbKind, Pool, sqlite_options};

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
    builder
}

/// The provider for `db` with connections of its own, on `table` (the store's default when `None`), with
/// `call_timeout` (the store's default when `None`).
pub(crate) async fn provider(
    db: &Database,
    table: Option<&str>,
    call_timeout: Option<Duration>,
) -> Result<Arc<dyn LockProvider>, BoxError> {
    let url = db.url();
    Ok(match db.kind() {
        DbKind::Postgres => {
            let builder = PgLockProvider::from_options(PgConnectOptions::from_str(url)?);
            Arc::new(configure(builder, table, call_timeout).connect().await?)
        }
        DbKind::MySql => {
            let builder = MySqlLockProvider::from_options(MySqlConnectOptions::from_str(url)?);
            Arc::new(configure(builder, table, call_timeout).connect().await?)
        }
        DbKind::Sqlite => {
            let builder = SqliteLockProvider::from_options(sqlite_options(url)?);
            Arc::new(configure(builder, table, call_timeout).connect().await?)
        }
    })
}

/// Creates the lock table if missing, with the store's own DDL.
pub(crate) async fn create_table(db: &Database, table: Option<&str>) -> Result<(), BoxError> {
    match db.pool() {
        Pool::Postgres(pool) => {
            configure(PgLockProvider::builder(pool.clone()), table, None)
                .build()?
                .create_table_if_not_exists()
                .await?;
        }
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
pub(crate) fn is_redis_url(url: &str) -> bool {
    let scheme = url.split(':').next().unwrap_or_default();
    scheme.eq_ignore_ascii_case("redis") || scheme.eq_ignore_ascii_case("rediss")
}

/// The Redis lock store at `url`, under `key_prefix` (the store's default, `shedlock:`, when
/// `None`), with `call_timeout` (the store's default, 5 s, when `None`).
pub(crate) async fn redis_provider(
    url: &str,
    key_prefix: Option<&str>,
    call_timeout: Option<Duration>,
) -> Result<Arc<dyn LockProvider>, BoxError> {
    let mut builder = shedlock_redis::RedisLockProvider::builder(url);
    if let Some(prefix) = key_prefix {
        builder = builder.key_prefix(prefix);
    }
    if let Some(timeout) = call_timeout {
        builder = builder.call_timeout(timeout);
    }
    Ok(Arc::new(builder.connect().await?))
}

/// Whether `url` names an etcd cluster (`etcd://host:port[,host:port…]`), served by
/// shedlock-etcd.
pub(crate) fn is_etcd_url(url: &str) -> bool {
    url.split(':')
        .next()
        .unwrap_or_default()
        .eq_ignore_ascii_case("etcd")
}

/// Whether `url` names a lock store that is no SQL database (Redis, etcd).
pub(crate) fn is_kv_url(url: &str) -> bool {
    is_redis_url(url) || is_etcd_url(url)
}

/// The etcd lock store at `url`, under `key_prefix` (the store's default when `None`), with
/// `call_timeout` (the store's default when `None`).
pub(crate) fn etcd_provider(
    url: &str,
    key_prefix: Option<&str>,
    call_timeout: Option<Duration>,
) -> Result<Arc<dyn LockProvider>, BoxError> {
    let mut builder = shedlock_etcd::EtcdLockProvider::builder(url);
    if let Some(prefix) = key_prefix {
        builder = builder.prefix(prefix);
    }
    if let Some(timeout) = call_timeout {
        builder = builder.call_timeout(timeout);
    }
    Ok(Arc::new(builder.build()?))
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
