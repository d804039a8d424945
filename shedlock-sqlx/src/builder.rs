//! [`LockProviderBuilder`]: table and column names, name length and call timeout, validated once.

use std::fmt;
use std::time::Duration;

use shedlock_core::{
    Error, Result,
    jobs::HistoryPolicy,
    provider::{DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_NAME_LEN, MAX_DURATION},
};
use sqlx::{Database, Pool};

use crate::connect::ConnectSettings;
use crate::conns::Options;
use crate::dialect::Dialect;
use crate::ident::{Quote, TableName, check_ident};
use crate::link::DEFAULT_POOL_SIZE;
use crate::url::parse_url;

/// Java ShedLock's table name, the default.
pub const DEFAULT_TABLE: &str = "shedlock";

/// The longest [`max_name_len`](LockProviderBuilder::max_name_len) accepted.
const MAX_NAME_LEN_LIMIT: usize = 10_000;

/// The most connections a provider opens itself.
const MAX_CONNECTIONS: u32 = 1_000;

/// Configures a lock provider: the table, its column names, the longest lock name, the per-call
/// timeout and, for a provider with connections of its own, how many it may open.
///
/// Start from a URL with `PgLockProvider::from_url(url)`, `MySqlLockProvider::from_url(url)` or
/// `SqliteLockProvider::from_url(url)`, or from a sqlx pool of yours with `…::builder(pool)`.
/// `build()` checks everything and builds the provider's SQL once. `connect()` also opens a
/// connection, so that a wrong URL fails there.
///
/// Every default matches Java ShedLock: the table `shedlock` with the columns `name`,
/// `lock_until`, `locked_at` and `locked_by`, plus our `fencing_token`, used when the table has it.
/// Names are plain identifiers (`[A-Za-z_][A-Za-z0-9_]*`) of at most 63 characters, always quoted
/// in SQL, so they match the table's names exactly, case included. On Postgres, an unquoted `CREATE
/// TABLE MyLocks` creates `mylocks`.
///
/// Names the database keeps for itself are refused too: on Postgres the system columns `tableoid`,
/// `xmin`, `cmin`, `xmax`, `cmax` and `ctid`, exactly so. On MySQL/MariaDB `InnoDB`'s `DB_ROW_ID`,
/// `DB_TRX_ID` and `DB_ROLL_PTR`, in any case and whatever the engine, as the table is created as
/// `InnoDB` and another engine with such a column is not supported. On SQLite table names starting
/// with `sqlite_`, in any case.
///
/// ```no_run
/// # #[cfg(feature = "postgres")]
/// # async fn example() -> shedlock_core::Result<()> {
/// use std::time::Duration;
/// use shedlock_sqlx::PgLockProvider;
///
/// // Connections of its own, with settings; one error type throughout.
/// let provider = PgLockProvider::from_url("postgres://app@db/app")
///     .table("ops.job_locks")
///     .max_connections(2)
///     .call_timeout(Duration::from_secs(3))
///     .connect()
///     .await?;
///
/// // Or over a pool of the application's.
/// use shedlock_sqlx::sqlx::postgres::PgPoolOptions;
/// let pool = PgPoolOptions::new()
///     .max_connections(4)
///     .connect_lazy("postgres://app@db/app")
///     .map_err(|e| shedlock_core::Error::backend("parse the database URL", e))?;
/// let provider = PgLockProvider::builder(pool)
///     .table("ops.job_locks")
///     .locked_by_column("owner")
///     .call_timeout(Duration::from_secs(3))
///     .build()?;
/// # Ok(()) }
/// ```
#[must_use]
pub struct LockProviderBuilder<DB: Database> {
    source: Source<DB>,
    connect: ConnectSettings,
    max_connections: Option<u32>,
    table: String,
    columns: ColumnNames,
    max_name_len: usize,
    call_timeout: Duration,
    transaction_pooler: bool,
    retry_refused: bool,
    history: Option<HistoryPolicy>,
}

/// Where a builder's provider gets its connections.
enum Source<DB: Database> {
    /// Connections of its own, to this URL.
    Url(String),
    /// Connections of its own, with these options.
    Options(Options<DB>),
    /// The application's pool.
    Pool(Pool<DB>),
}

/// What a checked builder hands to the provider: its connections' source, checked too.
pub(crate) enum Checked<DB: Database> {
    /// Connections of its own: the parsed URL and how many at most.
    Own(Options<DB>, u32),
    /// The application's pool.
    Pool(Pool<DB>),
}

/// The five column names, raw or quoted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ColumnNames {
    pub(crate) name: String,
    pub(crate) lock_until: String,
    pub(crate) locked_at: String,
    pub(crate) locked_by: String,
    pub(crate) fencing_token: String,
}

impl Default for ColumnNames {
    fn default() -> Self {
        Self {
            name: "name".into(),
            lock_until: "lock_until".into(),
            locked_at: "locked_at".into(),
            locked_by: "locked_by".into(),
            fencing_token: "fencing_token".into(),
        }
    }
}

impl ColumnNames {
    fn all(&self) -> [(&'static str, &str); 5] {
        [
            ("name", &self.name),
            ("lock_until", &self.lock_until),
            ("locked_at", &self.locked_at),
            ("locked_by", &self.locked_by),
            ("fencing_token", &self.fencing_token),
        ]
    }

    /// The names, in the order `name, lock_until, locked_at, locked_by, fencing_token`.
    pub(crate) fn each(&self) -> (&str, &str, &str, &str, &str) {
        (
            &self.name,
            &self.lock_until,
            &self.locked_at,
            &self.locked_by,
            &self.fencing_token,
        )
    }

    pub(crate) fn quoted(&self, quote: Quote) -> Self {
        Self {
            name: quote.quote(&self.name),
            lock_until: quote.quote(&self.lock_until),
            locked_at: quote.quote(&self.locked_at),
            locked_by: quote.quote(&self.locked_by),
            fencing_token: quote.quote(&self.fencing_token),
        }
    }
}

/// A checked configuration, as the providers use it.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) table: TableName,
    pub(crate) columns: ColumnNames,
    pub(crate) max_name_len: usize,
    pub(crate) call_timeout: Duration,
    /// Each statement runs unnamed in a transaction of its own, for a transaction-mode pooler
    /// ([`Checkout::begin`](crate::link::Checkout::begin)).
    pub(crate) transaction_pooler: bool,
    /// A refused connection is asked for again until the call's deadline
    /// ([`LockProviderBuilder::retry_refused_connections`]).
    pub(crate) retry_refused: bool,
    /// The run history to keep (see [`LockProviderBuilder::history`]), `None` for none.
    pub(crate) history: Option<crate::history::History>,
}

impl Settings {
    /// The defaults, valid by construction.
    pub(crate) fn defaults() -> Self {
        Self {
            table: TableName {
                schema: None,
                table: DEFAULT_TABLE.to_owned(),
            },
            columns: ColumnNames::default(),
            max_name_len: DEFAULT_MAX_NAME_LEN,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            transaction_pooler: false,
            retry_refused: true,
            history: None,
        }
    }
}

impl<DB: Database> LockProviderBuilder<DB> {
    pub(crate) fn new(pool: Pool<DB>) -> Self {
        Self::with_source(Source::Pool(pool))
    }

    pub(crate) fn from_url(url: String) -> Self {
        Self::with_source(Source::Url(url))
    }

    pub(crate) fn from_options(options: Options<DB>) -> Self {
        Self::with_source(Source::Options(options))
    }

    fn with_source(source: Source<DB>) -> Self {
        Self {
            source,
            connect: ConnectSettings::default(),
            max_connections: None,
            table: DEFAULT_TABLE.to_owned(),
            columns: ColumnNames::default(),
            max_name_len: DEFAULT_MAX_NAME_LEN,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            transaction_pooler: false,
            retry_refused: true,
            history: None,
        }
    }

    /// The lock table, `table` or `schema.table`, by default `shedlock`. On SQLite the schema is an
    /// attached database's name, such as `main` or `temp`.
    pub fn table(mut self, table: impl Into<String>) -> Self {
        self.table = table.into();
        self
    }

    /// The column holding the lock name, which is the primary key. It defaults to `name`.
    pub fn name_column(mut self, column: impl Into<String>) -> Self {
        self.columns.name = column.into();
        self
    }

    /// The column holding when the lock frees itself. It defaults to `lock_until`.
    pub fn lock_until_column(mut self, column: impl Into<String>) -> Self {
        self.columns.lock_until = column.into();
        self
    }

    /// The column holding when the current holder took the lock. It defaults to `locked_at`.
    pub fn locked_at_column(mut self, column: impl Into<String>) -> Self {
        self.columns.locked_at = column.into();
        self
    }

    /// The column holding the holder's owner id. It defaults to `locked_by`.
    pub fn locked_by_column(mut self, column: impl Into<String>) -> Self {
        self.columns.locked_by = column.into();
        self
    }

    /// The fencing-token column, by default `fencing_token`. The provider looks for it once, on
    /// first use. Without it, as in a Java ShedLock table, everything works and tokens are `None`.
    pub fn fencing_token_column(mut self, column: impl Into<String>) -> Self {
        self.columns.fencing_token = column.into();
        self
    }

    /// The longest lock name accepted, in characters, by default 64 as ShedLock's `VARCHAR(64)`.
    /// Set it to your `name` column's length, which the provider checks on first use. The DDL of
    /// `create_table_if_not_exists()` uses it.
    pub fn max_name_len(mut self, max: usize) -> Self {
        self.max_name_len = max;
        self
    }

    /// How long one provider call, getting a connection plus its statements, may take before it
    /// fails with [`Error::is_timeout`]. It defaults to [`DEFAULT_CALL_TIMEOUT`]. The connection of
    /// a call that timed out is closed, never reused. A timed-out acquire may still have committed,
    /// and the lock is then held until its `at_most` ends.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// Whether opening a connection that the server refuses is tried again, with growing pauses,
    /// until the call's deadline. The server refuses when nothing listens, as when the database is
    /// down or restarting. On by default, so that a service started while its database restarts
    /// waits for it. Off, the call fails at the first refusal, naming it, as a command-line tool
    /// wants. It applies to the connections a provider built from a URL or options opens itself.
    /// `build()` refuses `false` on a `builder(pool)`.
    pub fn retry_refused_connections(mut self, retry: bool) -> Self {
        self.retry_refused = retry;
        self
    }

    /// How many connections a provider built `from_url` may open at once, by default
    /// [`DEFAULT_POOL_SIZE`](crate::DEFAULT_POOL_SIZE). A lock call holds a connection only for its
    /// statement, so this bounds the lock calls running at the same instant, not the locks held.
    /// `build()` refuses it on a `builder(pool)`, which that pool sizes.
    pub fn max_connections(mut self, max: u32) -> Self {
        self.max_connections = Some(max);
        self
    }

    /// Trusts the CA certificates in this PEM file for the server's certificate, verifying it and
    /// the host name. A URL's `sslmode` below `verify-ca` or `ssl-mode` below `VERIFY_CA` becomes
    /// `verify-full` or `VERIFY_IDENTITY`. It is the URL's `sslrootcert=` or `ssl-ca=`, for a path
    /// a URL cannot carry well. [`build`](Self::build) checks that the TLS files are readable, and
    /// sqlx reads them when it connects. It needs a TLS feature (`tls-rustls`). It is refused for
    /// SQLite, and for a provider over your own pool, whose options to configure instead.
    pub fn ca_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.connect.ca = Some(path.into());
        self
    }

    /// Presents this client certificate and its private key, as PEM files, to a server that
    /// requires one: Postgres with `cert` authentication or `clientcert=`, MySQL with `REQUIRE
    /// X509` or `REQUIRE SUBJECT`. It is the URL's `sslcert=`/`sslkey=` on Postgres, and
    /// `ssl-cert=`/`ssl-key=` on MySQL.
    pub fn client_cert(
        mut self,
        cert: impl Into<std::path::PathBuf>,
        key: impl Into<std::path::PathBuf>,
    ) -> Self {
        self.connect.client = Some((cert.into(), key.into()));
        self
    }

    /// Logs in as this user, instead of the URL's.
    pub fn username(mut self, user: impl Into<String>) -> Self {
        self.connect.username = Some(user.into());
        self
    }

    /// Logs in with this password, instead of the URL's. Read it from a secret file or the
    /// environment, so that it appears in no URL, log or process list. `Debug` never shows it.
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.connect.password = Some(password.into());
        self
    }

    /// Runs every statement unprepared inside `BEGIN` … `COMMIT`, so it passes a connection pooler
    /// in transaction mode, such as `PgBouncer`'s. It is off by default, as it costs four round
    /// trips per statement instead of one. A Postgres URL can set it with
    /// `…?transaction_pooler=true`. See [Connection poolers](crate#connection-poolers).
    pub fn transaction_pooler(mut self, on: bool) -> Self {
        self.transaction_pooler = on;
        self
    }

    /// Keeps a history of the scheduler's runs in the table `<table>_history`, next to the lock
    /// table, as `create_table_if_not_exists()` or the migration `0004_jobs_and_history.sql`
    /// creates it. It is off by default, and then costs nothing.
    ///
    /// Each recorded release of a run's lock
    /// ([`release_run`](shedlock_core::provider::LockProvider::release_run)) then writes one entry:
    /// the lock name, fire, the lock's owner as runner, its `locked_at` as start, the database's
    /// now as end, the outcome and the error text capped at 1,000 characters. It also removes the
    /// lock's entries beyond the newest `policy.keep`, and with `policy.max_age` those that ended
    /// longer ago. That is one more statement and round trip on Postgres. On MySQL/MariaDB it is two
    /// statements, each committed on its own (two round trips; a pruning that fails leaves the
    /// entry written, and the next write prunes), and on SQLite a transaction of the two. It gets
    /// what is left of the release's call timeout and gives up when that runs out. With a policy,
    /// a Postgres provider's releases go one by one rather than in batches
    /// ([`release_batch_limit`](shedlock_core::provider::LockProvider::release_batch_limit) is 1),
    /// so that each writes its entry.
    ///
    /// A write never fails the release. A failed one is logged at `ERROR` once per kind of failure
    /// (a missing table, a timeout, any other), then at `DEBUG` until one succeeds again; a failed
    /// pruning is logged at `WARN` once, then at `DEBUG` until one succeeds. History needs the job state columns too: without them a release
    /// records nothing, history included, and the scheduler says so once. `build()` refuses a
    /// `keep` of 0 and a lock table name too long for the history table's name.
    pub fn history(mut self, policy: HistoryPolicy) -> Self {
        self.history = Some(policy);
        self
    }

    /// A provider over the application's pool opens no connections of its own: the settings that
    /// configure those are refused, naming where to set them instead.
    fn refuse_own_connection_settings(&self) -> Result<()>
    where
        DB: Dialect,
    {
        let refuse = |what: String, instead: &str| {
            Err(Error::invalid_config(format!(
                "{what} the connections a provider built from a URL or options opens itself \
                 ({}::from_url); a provider over your own pool {instead}",
                DB::PROVIDER
            )))
        };
        if !self.connect.is_empty() {
            return refuse(
                "ca_file, client_cert, username and password configure".to_owned(),
                "uses that pool's connect options: set them there",
            );
        }
        if !self.retry_refused {
            return refuse(
                "retry_refused_connections(false) configures".to_owned(),
                "opens connections as that pool does",
            );
        }
        if let Some(max) = self.max_connections {
            return refuse(
                format!("max_connections({max}) sizes"),
                "uses that pool's size: set it with PoolOptions::max_connections",
            );
        }
        Ok(())
    }

    /// Checks every setting, and gives the connections' source to the caller. This is the one
    /// validation path of every provider's `build()`.
    pub(crate) fn into_parts(self) -> Result<(Checked<DB>, Settings)>
    where
        DB: Dialect,
    {
        let own_max = || {
            let max = self.max_connections.unwrap_or(DEFAULT_POOL_SIZE);
            if max == 0 || max > MAX_CONNECTIONS {
                return Err(Error::invalid_config(format!(
                    "max_connections is {max}; use 1 to {MAX_CONNECTIONS} (a lock call holds a \
                     connection only for its statement, so a few serve any number of locks)"
                )));
            }
            Ok(max)
        };
        let connect = &self.connect;
        let own = |options: Options<DB>| {
            let options = DB::connect_settings(options, connect)?;
            connect.check_files()?;
            Ok::<_, Error>(options)
        };
        if matches!(self.source, Source::Pool(_)) {
            self.refuse_own_connection_settings()?;
        }
        let mut transaction_pooler = self.transaction_pooler;
        let source = match self.source {
            Source::Url(url) => {
                let (options, pooler) = parse_url::<DB>(&url)?;
                transaction_pooler |= pooler;
                Checked::Own(own(options)?, own_max()?)
            }
            Source::Options(options) => Checked::Own(own(options)?, own_max()?),
            Source::Pool(pool) => Checked::Pool(pool),
        };
        let table = TableName::parse(&self.table)?;
        DB::RESERVED.check_table(&table)?;
        for (what, column) in self.columns.all() {
            let what = format!("the {what} column name");
            check_ident(&what, column)?;
            DB::RESERVED.check_column(&what, column)?;
        }
        let all = self.columns.all();
        for (i, (what_a, a)) in all.iter().enumerate() {
            for (what_b, b) in &all[i + 1..] {
                if a.eq_ignore_ascii_case(b) {
                    return Err(Error::invalid_config(format!(
                        "the {what_a} and {what_b} columns have the same name {a:?}"
                    )));
                }
            }
        }
        // `last_fire` (the recorded fire) and the job state columns have fixed names: a
        // configured column may not take them.
        for fixed in crate::dialect::fixed_columns() {
            if let Some((what, _)) = all
                .iter()
                .find(|(_, column)| column.eq_ignore_ascii_case(fixed))
            {
                let whose = if fixed == crate::dialect::LAST_FIRE {
                    "the recorded fire's column (see migration 0002_last_fire.sql)"
                } else {
                    "a job state column (see migration 0003_job_state.sql)"
                };
                return Err(Error::invalid_config(format!(
                    "the {what} column may not be named {fixed:?}: that name is {whose}; \
                     choose another"
                )));
            }
        }
        if self.max_name_len == 0 || self.max_name_len > MAX_NAME_LEN_LIMIT {
            return Err(Error::invalid_config(format!(
                "max_name_len is {}; use 1 to {MAX_NAME_LEN_LIMIT} (the name column's length)",
                self.max_name_len
            )));
        }
        if self.call_timeout.is_zero() || self.call_timeout > MAX_DURATION {
            return Err(Error::invalid_config(format!(
                "call_timeout is {:?}; use a positive duration of at most 365 days",
                self.call_timeout
            )));
        }
        check_history(self.history.as_ref())?;
        let settings = Settings {
            table,
            columns: self.columns,
            max_name_len: self.max_name_len,
            call_timeout: self.call_timeout,
            transaction_pooler,
            retry_refused: self.retry_refused,
            history: self.history.map(crate::history::History::new),
        };
        if settings.history.is_some() {
            crate::tables::names::<DB>(&settings)?;
        }
        Ok((source, settings))
    }
}

/// Checks a history policy: at least one run kept, a `max_age` of 1 ns to 365 days.
fn check_history(policy: Option<&HistoryPolicy>) -> Result<()> {
    let Some(policy) = policy else {
        return Ok(());
    };
    if policy.keep == 0 {
        return Err(Error::invalid_config(
            "the history policy keeps 0 runs per lock; keep at least 1 (or give no policy)",
        ));
    }
    if let Some(age) = policy.max_age
        && (age.is_zero() || age > MAX_DURATION)
    {
        return Err(Error::invalid_config(format!(
            "the history policy's max_age is {age:?}; use a positive duration of at most 365 days"
        )));
    }
    Ok(())
}

impl<DB: Database> fmt::Debug for LockProviderBuilder<DB> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = match &self.source {
            Source::Url(_) => "url",
            Source::Options(_) => "options",
            Source::Pool(_) => "pool",
        };
        f.debug_struct("LockProviderBuilder")
            .field("source", &source)
            .field("connect", &self.connect)
            .field("max_connections", &self.max_connections)
            .field("table", &self.table)
            .field("columns", &self.columns)
            .field("max_name_len", &self.max_name_len)
            .field("call_timeout", &self.call_timeout)
            .field("transaction_pooler", &self.transaction_pooler)
            .field("retry_refused", &self.retry_refused)
            .field("history", &self.history)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    /// Each provider's `build()` goes through [`LockProviderBuilder::into_parts`]. It refuses its
    /// database's reserved names, and only those, with a message saying what to change.
    #[cfg(feature = "postgres")]
    #[tokio::test]
    async fn postgres_build_refuses_system_column_names() {
        use crate::PgLockProvider;
        let pool = sqlx::PgPool::connect_lazy("postgres://localhost/none").expect("a valid URL");
        let b = || PgLockProvider::builder(pool.clone());
        for bad in ["tableoid", "xmin", "cmin", "xmax", "cmax", "ctid"] {
            let err = b().locked_at_column(bad).build().expect_err(bad);
            assert!(err.is_invalid_config(), "{bad}: {err}");
            let msg = err.to_string();
            assert!(msg.contains("the locked_at column name"), "{msg}");
            assert!(msg.contains("system column name"), "{msg}");
            assert!(msg.contains("choose another name"), "{msg}");
        }
        b().name_column("XMIN")
            .lock_until_column("oid")
            .build()
            .expect("ordinary names");
        b().table("sqlite_locks")
            .locked_by_column("db_row_id")
            .build()
            .expect("fine here");
    }

    #[cfg(feature = "mysql")]
    #[tokio::test]
    async fn mysql_build_refuses_innodb_column_names() {
        use crate::MySqlLockProvider;
        let pool = sqlx::MySqlPool::connect_lazy("mysql://localhost/none").expect("a valid URL");
        let b = || MySqlLockProvider::builder(pool.clone());
        for bad in ["DB_ROW_ID", "db_trx_id", "Db_Roll_Ptr"] {
            let err = b().fencing_token_column(bad).build().expect_err(bad);
            assert!(err.is_invalid_config(), "{bad}: {err}");
            let msg = err.to_string();
            assert!(msg.contains("the fencing_token column name"), "{msg}");
            assert!(
                msg.contains("InnoDB") && msg.contains("choose another name"),
                "{msg}"
            );
        }
        b().name_column("xmin")
            .table("sqlite_locks")
            .build()
            .expect("fine here");
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn sqlite_build_refuses_the_sqlite_table_prefix() {
        use crate::SqliteLockProvider;
        let pool = sqlx::SqlitePool::connect_lazy("sqlite::memory:").expect("a valid URL");
        let b = || SqliteLockProvider::builder(pool.clone());
        for bad in ["sqlite_locks", "SQLITE_locks", "main.Sqlite_x"] {
            let err = b().table(bad).build().expect_err(bad);
            assert!(err.is_invalid_config(), "{bad}: {err}");
            let msg = err.to_string();
            assert!(
                msg.contains("sqlite_") && msg.contains("choose a name"),
                "{msg}"
            );
        }
        let err = b()
            .retry_refused_connections(false)
            .build()
            .expect_err("a pool opens its own connections");
        assert!(
            err.to_string()
                .contains("a provider over your own pool opens connections as that pool does"),
            "{err}"
        );
        b().table("sqlitelocks")
            .name_column("xmin")
            .locked_by_column("db_row_id")
            .build()
            .expect("fine here");
    }

    /// The recorded fire's column has a fixed name. No configured column may take it.
    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn no_configured_column_takes_the_last_fire_name() {
        use crate::SqliteLockProvider;
        let pool = sqlx::SqlitePool::connect_lazy("sqlite::memory:").expect("a valid URL");
        let b = || SqliteLockProvider::builder(pool.clone());
        let err = b()
            .locked_by_column("Last_Fire")
            .build()
            .expect_err("taken");
        assert!(err.is_invalid_config(), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains("the locked_by column") && msg.contains("\"last_fire\""),
            "{msg}"
        );
        b().locked_by_column("last_fired_by")
            .build()
            .expect("another name");
        // So do the job state columns.
        let err = b()
            .lock_until_column("Consecutive_Failures")
            .build()
            .expect_err("taken");
        let msg = err.to_string();
        assert!(
            msg.contains("the lock_until column")
                && msg.contains("\"consecutive_failures\"")
                && msg.contains("0003_job_state.sql"),
            "{msg}"
        );
        b().locked_by_column("last_run_by_host")
            .build()
            .expect("another name");
    }
}
