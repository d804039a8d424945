//! The replicas' database, from a URL: Postgres (`postgres://`), MySQL/MariaDB (`mysql://`,
//! `mariadb://`) or SQLite (`sqlite:`). It hands out the lock store and the pool the
//! [run log](crate::runlog) writes through.

use std::fmt;
use std::str::FromStr as _;
use std::sync::Arc;
use std::time::Duration;

use shedlock_core::provider::LockProvider;
#[cfg(feature = "mysql")]
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
#[cfg(feature = "postgres")]
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};

/// The error type of this crate's harness code: anything that went wrong, with its message.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// How long SQLite waits for another process's write to finish before failing with "database is
/// locked" (three replicas share one file).
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a pool waits for a connection.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long [`Database::drop_table`] waits for its lock before giving up.
const DROP_TABLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Which database a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DbKind {
    /// PostgreSQL: `postgres://` or `postgresql://`.
    Postgres,
    /// MySQL or MariaDB: `mysql://` or `mariadb://`.
    MySql,
    /// SQLite: `sqlite:` (a file shared by processes on one host).
    Sqlite,
}

impl DbKind {
    /// The kind of database `url` names.
    ///
    /// # Errors
    ///
    /// A URL with another scheme.
    ///
    /// ```
    /// use shedlock_demo::database::DbKind;
    /// assert_eq!(DbKind::of_url("postgres://postgres@127.0.0.1/test")?, DbKind::Postgres);
    /// assert_eq!(DbKind::of_url("sqlite:///tmp/demo.db")?, DbKind::Sqlite);
    /// assert!(DbKind::of_url("redis://localhost").is_err());
    /// # Ok::<(), shedlock_demo::database::BoxError>(())
    /// ```
    pub fn of_url(url: &str) -> Result<Self, BoxError> {
        let scheme = url
            .split(':')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        match scheme.as_str() {
            "postgres" | "postgresql" => Ok(Self::Postgres),
            "mysql" | "mariadb" => Ok(Self::MySql),
            "sqlite" => Ok(Self::Sqlite),
            _ => Err(format!(
                "unsupported database URL {:?}: use postgres://, mysql:// (MySQL or MariaDB) or sqlite:",
                redact(url)
            )
            .into()),
        }
    }
}

impl fmt::Display for DbKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Postgres => "PostgreSQL",
            Self::MySql => "MySQL/MariaDB",
            Self::Sqlite => "SQLite",
        })
    }
}

/// A connection pool of one of the three kinds.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Pool {
    /// A Postgres pool.
    #[cfg(feature = "postgres")]
    Postgres(PgPool),
    /// A MySQL/MariaDB pool.
    #[cfg(feature = "mysql")]
    MySql(MySqlPool),
    /// A SQLite pool.
    Sqlite(SqlitePool),
}

/// A connected database: a small pool for the harness's own tables, and the lock store.
#[derive(Clone)]
pub struct Database {
    kind: DbKind,
    url: String,
    pool: Pool,
}

impl fmt::Debug for Database {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Database")
            .field("kind", &self.kind)
            .field("url", &redact(&self.url))
            .finish_non_exhaustive()
    }
}

impl Database {
    /// Connects to `url` (a SQLite file is created if missing, in WAL mode, with a busy timeout
    /// so that several processes can share it).
    ///
    /// # Errors
    ///
    /// An unsupported or malformed URL, or a database that cannot be reached.
    pub async fn connect(url: &str) -> Result<Self, BoxError> {
        let kind = DbKind::of_url(url)?;
        let what = || format!("cannot connect to {}", redact(url));
        let pool = match kind {
            #[cfg(feature = "postgres")]
            DbKind::Postgres => {
                let options = PgConnectOptions::from_str(url)?;
                Pool::Postgres(
                    PgPoolOptions::new()
                        .max_connections(4)
                        .acquire_timeout(ACQUIRE_TIMEOUT)
                        .connect_with(options)
                        .await
                        .map_err(|e| format!("{}: {e}", what()))?,
                )
            }
            #[cfg(feature = "mysql")]
            DbKind::MySql => {
                let options = MySqlConnectOptions::from_str(url)?;
                Pool::MySql(
                    MySqlPoolOptions::new()
                        .max_connections(4)
                        .acquire_timeout(ACQUIRE_TIMEOUT)
                        .connect_with(options)
                        .await
                        .map_err(|e| format!("{}: {e}", what()))?,
                )
            }
            DbKind::Sqlite => {
                let options = sqlite_options(url)?;
                Pool::Sqlite(
                    SqlitePoolOptions::new()
                        .max_connections(2)
                        .acquire_timeout(ACQUIRE_TIMEOUT)
                        .connect_with(options)
                        .await
                        .map_err(|e| format!("{}: {e}", what()))?,
                )
            }
            #[cfg(not(all(feature = "postgres", feature = "mysql")))]
            kind => return Err(crate::store::not_built(kind)),
        };
        Ok(Self {
            kind,
            url: url.to_owned(),
            pool,
        })
    }

    /// Which database this is.
    #[must_use]
    pub fn kind(&self) -> DbKind {
        self.kind
    }

    /// The URL it was connected with (may hold a password: print [`redact`]ed).
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The harness's pool (not the lock store's).
    #[must_use]
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The lock store on this database, on a pool of its own, on the lock table `table` (the
    /// store's default, `shedlock`, when `None`), with the per-call timeout `call_timeout` (the
    /// store's default, 5 s, when `None`).
    ///
    /// # Errors
    ///
    /// An invalid table name, or a store that cannot be reached.
    pub async fn lock_provider(
        &self,
        table: Option<&str>,
        call_timeout: Option<Duration>,
    ) -> Result<Arc<dyn LockProvider>, BoxError> {
        crate::store::provider(self, table, call_timeout).await
    }

    /// Creates the lock table `table` (default `shedlock`) if it does not exist, with the store's
    /// own DDL.
    ///
    /// # Errors
    ///
    /// The DDL failed.
    pub async fn create_lock_table(&self, table: Option<&str>) -> Result<(), BoxError> {
        crate::store::create_table(self, table).await
    }

    /// Drops the table `table` if it exists (cleanup after a test on a shared server).
    ///
    /// # Errors
    ///
    /// `table` is not a plain identifier, or the statement failed.
    pub async fn drop_table(&self, table: &str) -> Result<(), BoxError> {
        check_identifier(table)?;
        let sql = sqlx::AssertSqlSafe(format!("DROP TABLE IF EXISTS {table}"));
        let dropped = async {
            match &self.pool {
                #[cfg(feature = "postgres")]
                Pool::Postgres(pool) => sqlx::query(sql).execute(pool).await.map(drop),
                #[cfg(feature = "mysql")]
                Pool::MySql(pool) => sqlx::query(sql).execute(pool).await.map(drop),
                Pool::Sqlite(pool) => sqlx::query(sql).execute(pool).await.map(drop),
            }
        };
        // A session left idle in a transaction on the table (a connection cut off mid-way) would
        // make the DROP wait for ever: give up after a while instead.
        tokio::time::timeout(DROP_TABLE_TIMEOUT, dropped)
            .await
            .map_err(|_| {
                format!("DROP TABLE {table} waited {DROP_TABLE_TIMEOUT:?} for a lock; left as is")
            })??;
        Ok(())
    }
}

/// SQLite options for a file that several processes share (WAL journal, a busy timeout).
///
/// # Errors
///
/// A URL that is no valid SQLite URL.
pub fn sqlite_options(url: &str) -> Result<SqliteConnectOptions, BoxError> {
    Ok(SqliteConnectOptions::from_str(url)?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .busy_timeout(SQLITE_BUSY_TIMEOUT))
}

/// Checks that `name` is a plain SQL identifier (`[A-Za-z_][A-Za-z0-9_]*`, at most 63
/// characters), so it can be spliced into DDL.
///
/// # Errors
///
/// Anything else.
///
/// ```
/// use shedlock_demo::database::check_identifier;
/// assert!(check_identifier("shedlock_demo_runs").is_ok());
/// assert!(check_identifier("runs; DROP TABLE x").is_err());
/// ```
pub fn check_identifier(name: &str) -> Result<(), BoxError> {
    let mut chars = name.chars();
    let plain = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 63;
    if plain {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a plain table name ([A-Za-z_][A-Za-z0-9_]*, at most 63 characters)"
        )
        .into())
    }
}

/// `url` with its password replaced by `***`, for printing.
///
/// ```
/// use shedlock_demo::database::redact;
/// assert_eq!(redact("postgres://app:s3cret@db:5432/x"), "postgres://app:***@db:5432/x");
/// assert_eq!(redact("postgres://app@db/x"), "postgres://app@db/x");
/// ```
#[must_use]
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return url.to_owned();
    };
    match userinfo.split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:***@{host}{tail}"),
        None => url.to_owned(),
    }
}
