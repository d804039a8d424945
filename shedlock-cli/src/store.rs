//! From a database URL to a [`LockAdmin`]: which store a URL names, and how it is opened.
//!
//! Each store is one [`Kind`] with its URL schemes and one arm in [`open`].

use std::sync::Arc;

use shedlock_core::LockAdmin;
use shedlock_etcd::EtcdLockProvider;
use shedlock_redis::RedisLockProvider;
use shedlock_sqlx::{LockProviderBuilder, MySqlLockProvider, PgLockProvider, SqliteLockProvider};

use crate::args::StoreArgs;
use crate::failure::Failure;

/// A store the tool knows by its URL scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Postgres,
    MySql,
    Sqlite,
    Redis,
    Etcd,
}

/// URL schemes (`scheme:` prefixes) and their stores; `Err` names a store this build does not
/// include yet.
const SCHEMES: &[(&str, Result<Kind, &str>)] = &[
    ("postgres", Ok(Kind::Postgres)),
    ("postgresql", Ok(Kind::Postgres)),
    ("mysql", Ok(Kind::MySql)),
    ("mariadb", Ok(Kind::MySql)),
    ("sqlite", Ok(Kind::Sqlite)),
    ("redis", Ok(Kind::Redis)),
    ("rediss", Ok(Kind::Redis)),
    ("unix", Ok(Kind::Redis)),
    ("etcd", Ok(Kind::Etcd)),
];

/// An opened store and how to name it in messages (never with the URL's credentials).
pub(crate) struct Store {
    pub(crate) admin: Arc<dyn LockAdmin>,
    pub(crate) table: String,
}

/// Which store `url` names.
pub(crate) fn kind(url: &str) -> Result<Kind, Failure> {
    let scheme = url.split_once(':').map(|(s, _)| s.to_ascii_lowercase());
    let known = || {
        SCHEMES
            .iter()
            .filter(|(_, k)| k.is_ok())
            .map(|(s, _)| format!("{s}://"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match SCHEMES.iter().find(|(s, _)| scheme.as_deref() == Some(*s)) {
        Some((_, Err(store))) => Err(Failure::usage(format!(
            "{store} stores are not supported by this build of shedlock yet; use one of {}",
            known()
        ))),
        Some((_, Ok(kind))) => Ok(*kind),
        None => Err(Failure::usage(format!(
            "the database URL does not start with a known scheme; use one of {}",
            known()
        ))),
    }
}

/// Opens the store `args` names. With `connect`, one connection is opened now, so a wrong URL,
/// a closed port or a bad password fails here; without, nothing is opened until first use
/// (`ddl` needs no database).
pub(crate) async fn open(args: &StoreArgs, connect: bool) -> Result<Store, Failure> {
    let url = args.database_url.as_deref().ok_or_else(|| {
        Failure::usage("no database given: pass --database-url URL or set DATABASE_URL")
    })?;
    let kind = kind(url)?;
    // A SQL provider for one command (two connections at most), connected now with `connect`.
    macro_rules! sql {
        ($provider:ty) => {{
            let builder = configure(<$provider>::from_url(url), args).max_connections(2);
            let provider = if connect {
                builder.connect().await
            } else {
                builder.build()
            };
            Arc::new(provider.map_err(connect_failure)?)
        }};
    }
    let admin: Arc<dyn LockAdmin> = match kind {
        Kind::Postgres => sql!(PgLockProvider),
        Kind::MySql => sql!(MySqlLockProvider),
        Kind::Sqlite => sql!(SqliteLockProvider),
        Kind::Redis => {
            let mut builder = RedisLockProvider::builder(url).call_timeout(args.timeout);
            if let Some(prefix) = &args.key_prefix {
                builder = builder.key_prefix(prefix);
            }
            let provider = if connect {
                builder.connect().await
            } else {
                builder.build()
            };
            Arc::new(provider.map_err(|e| {
                Failure::usage(format!(
                    "cannot connect to Redis: {}; check --database-url or DATABASE_URL",
                    crate::failure::causes(&e)
                ))
            })?)
        }
        Kind::Etcd => {
            let mut builder = EtcdLockProvider::builder(url).call_timeout(args.timeout);
            if let Some(prefix) = &args.key_prefix {
                builder = builder.prefix(prefix);
            }
            Arc::new(builder.build()?)
        }
    };
    Ok(Store {
        admin,
        table: args.table.clone(),
    })
}

/// Why a store could not be opened: bad settings as they are, anything else as a connection
/// problem, with the store's own words (the server, the cause).
fn connect_failure(error: shedlock_core::Error) -> Failure {
    if error.is_invalid_config() {
        Failure::from(error)
    } else {
        Failure::usage(format!(
            "cannot connect: {}; check --database-url or DATABASE_URL",
            crate::failure::causes(&error)
        ))
    }
}

fn configure<DB: shedlock_sqlx::sqlx::Database>(
    builder: LockProviderBuilder<DB>,
    args: &StoreArgs,
) -> LockProviderBuilder<DB> {
    builder
        .table(&args.table)
        .name_column(&args.name_column)
        .lock_until_column(&args.lock_until_column)
        .locked_at_column(&args.locked_at_column)
        .locked_by_column(&args.locked_by_column)
        .fencing_token_column(&args.fencing_token_column)
        .call_timeout(args.timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_their_store() {
        assert_eq!(kind("postgres://u@h/db").ok(), Some(Kind::Postgres));
        assert_eq!(kind("PostgreSQL://u@h/db").ok(), Some(Kind::Postgres));
        assert_eq!(kind("mysql://root@127.0.0.1/test").ok(), Some(Kind::MySql));
        assert_eq!(
            kind("mariadb://root@127.0.0.1/test").ok(),
            Some(Kind::MySql)
        );
        assert_eq!(kind("sqlite://locks.db").ok(), Some(Kind::Sqlite));
        assert_eq!(kind("sqlite::memory:").ok(), Some(Kind::Sqlite));
        assert_eq!(kind("redis://127.0.0.1:6379").ok(), Some(Kind::Redis));
        assert_eq!(kind("etcd://127.0.0.1:2379").ok(), Some(Kind::Etcd));
        let unknown = kind("oracle://x").expect_err("unknown");
        assert!(
            unknown
                .message
                .contains("postgres://, postgresql://, mysql://"),
            "{}",
            unknown.message
        );
        assert!(kind("no scheme at all").is_err());
    }
}
