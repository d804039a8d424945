//! [`SqliteLockProvider`]: locks in an SQLite table, for processes on one host.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDateTime, Utc};
use shedlock_core::{Error, LockProvider, LockRecord, Result};
use sqlx::sqlite::{Sqlite, SqlitePool, SqlitePoolOptions, SqliteRow};
use sqlx::{AssertSqlSafe, Row};

use crate::builder::{LockProviderBuilder, Settings};
use crate::ident::Quote;
use crate::store::{Call, DEFAULT_POOL_SIZE, Schema, Store, millis_ceil};

/// The text format of the time columns: UTC, milliseconds, sortable as text.
const FORMAT: &str = "%Y-%m-%d %H:%M:%f";
/// The same format for chrono.
pub(crate) const CHRONO_FORMAT: &str = "%Y-%m-%d %H:%M:%S%.3f";
/// SQLite's "now" (the same value for every use within one statement).
pub(crate) const NOW: &str = "strftime('%Y-%m-%d %H:%M:%f', 'now')";
/// "now" in microseconds since the Unix epoch (millisecond precision), which seeds tokens.
const NOW_MICROS: &str = "((CAST(strftime('%s', 'now') AS INTEGER) * 1000 \
     + CAST(substr(strftime('%f', 'now'), 4) AS INTEGER)) * 1000)";

/// A [`LockProvider`] on an SQLite table, for replicas **on one host** sharing a database file:
/// SQLite's clock is that host's clock.
///
/// # Table
///
/// Create it with [`create_table_if_not_exists`](Self::create_table_if_not_exists), or run the
/// same DDL from `migrations/sqlite/0001_shedlock.sql` in this crate (sqlx-cli naming):
///
/// ```sql
/// CREATE TABLE IF NOT EXISTS shedlock (
///     name VARCHAR(64) NOT NULL,
///     lock_until TEXT NOT NULL,
///     locked_at TEXT NOT NULL,
///     locked_by VARCHAR(255) NOT NULL,
///     fencing_token INTEGER NOT NULL DEFAULT 0,
///     PRIMARY KEY (name)
/// )
/// ```
///
/// Times are UTC text, `YYYY-MM-DD HH:MM:SS.SSS` (what SQLite's own date functions produce), read
/// from SQLite's clock (`strftime('%Y-%m-%d %H:%M:%f', 'now')`) inside each statement; durations
/// are rounded up to whole milliseconds. SQLite does not enforce `VARCHAR` lengths: the
/// provider's [`max_name_len`](LockProviderBuilder::max_name_len) (64) is the limit. A table
/// without the `fencing_token` column works; tokens are then `None`. On first use the provider
/// reads the table's columns once and fails with [`Error::is_missing_table`] or
/// [`Error::is_schema`] if the table is missing or does not fit.
///
/// # Statements
///
/// Each call is one statement on a pooled connection given back at once; no connection is kept
/// while a lock is held. An acquire is one `INSERT … ON CONFLICT DO UPDATE … WHERE lock_until <=
/// now RETURNING …`: it inserts a missing row (so a row deleted by hand comes back at the next
/// acquire), takes an expired one, and changes nothing when the lock is held. Like every write
/// in SQLite it takes the database's write lock for that moment; use WAL mode
/// (`SqliteJournalMode::Wal`) so readers do not wait.
///
/// A statement that finds the write lock taken (another process in a write transaction) waits
/// for it up to the connection's busy timeout (`SqliteConnectOptions::busy_timeout`; sqlx's
/// default, 5 s, which [`connect`](Self::connect) keeps) and up to the call timeout (5 s by
/// default), whichever ends first, and either ends the call with an error: the busy timeout as
/// [`Error::is_backend`] with SQLite's "database is locked", the call timeout as
/// [`Error::is_timeout`] (its connection is closed). With both defaults the call timeout, which
/// started first, usually ends it. For SQLite's own error, build the pool from
/// `SqliteConnectOptions` with a shorter busy timeout and pass it to [`new`](Self::new) or
/// [`builder`](Self::builder).
///
/// # Fencing tokens
///
/// Each acquisition sets `fencing_token = max(fencing_token + 1, now in µs since 1970)`, so
/// tokens strictly increase per name. Deleting a row by hand does not restart the sequence: the
/// recreated row starts from the clock (millisecond resolution, in microseconds), above every
/// earlier token provided it is recreated in a later millisecond than the last acquisition, the
/// clock was not set back, and the lock was not taken more than a thousand times per millisecond
/// on average. (A row deleted and recreated within the millisecond of its last acquisition gets
/// a token no greater than that acquisition's: SQLite's clock cannot tell the two moments apart.)
///
/// # Pool and timeouts
///
/// Use a file database (an in-memory database is private to each connection). A pool of a few
/// connections is plenty, as SQLite runs one write at a time. Every call has a deadline
/// ([`call_timeout`](LockProviderBuilder::call_timeout), 5 s by default); the connection of a
/// call that timed out is closed, never returned to the pool. **A timed-out acquire may have
/// committed**: the lock is then held until its `at_most` ends.
/// There is no server whose restart could leave pooled connections dead, so, unlike the Postgres
/// and MySQL providers, this one has nothing to retry: SQLite's errors, `SQLITE_BUSY` included,
/// are reported as they are.
///
/// ```no_run
/// use std::time::Duration;
/// use shedlock_core::{LockConfig, LockingTaskExecutor};
/// use shedlock_sqlx::SqliteLockProvider;
///
/// # async fn example() -> shedlock_core::Result<()> {
/// let provider = SqliteLockProvider::connect("sqlite:///var/lib/app/locks.db?mode=rwc").await?;
/// provider.create_table_if_not_exists().await?;
/// let executor = LockingTaskExecutor::new(provider)?;
/// let cfg = LockConfig::new("nightly-report", Duration::from_secs(600))?;
/// executor.execute(&cfg, async { /* the job */ }).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct SqliteLockProvider {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store<Sqlite>,
    /// Statements for a table without (`[0]`) and with (`[1]`) the token column.
    sql: [Statements; 2],
    columns_sql: Arc<str>,
    indexes_sql: Arc<str>,
    index_columns_sql: Arc<str>,
    ddl: String,
}

struct Statements {
    acquire: Arc<str>,
    extend: Arc<str>,
    release: Arc<str>,
    holder: Arc<str>,
}

impl SqliteLockProvider {
    /// A provider over `pool` with the default settings (table `shedlock`, 5 s call timeout);
    /// see [`builder`](Self::builder) for the settings.
    ///
    /// ```no_run
    /// use shedlock_sqlx::SqliteLockProvider;
    ///
    /// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
    /// let pool = SqliteLockProvider::pool_options().connect("sqlite://locks.db?mode=rwc").await?;
    /// let provider = SqliteLockProvider::new(pool);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn new(pool: SqlitePool) -> Self {
        Self::from_parts(pool, Settings::defaults())
    }

    /// Starts configuring a provider over `pool`; finish with
    /// [`build`](LockProviderBuilder::build).
    pub fn builder(pool: SqlitePool) -> LockProviderBuilder<Sqlite> {
        LockProviderBuilder::new(pool)
    }

    /// Pool options for a dedicated lock pool: at most 4 connections, one kept open, no check
    /// on checkout, a 5 s acquire timeout.
    #[must_use]
    pub fn pool_options() -> SqlitePoolOptions {
        SqlitePoolOptions::new()
            .max_connections(DEFAULT_POOL_SIZE)
            .min_connections(1)
            .test_before_acquire(false)
            .acquire_timeout(shedlock_core::DEFAULT_CALL_TIMEOUT)
    }

    /// A provider with a dedicated pool ([`pool_options`](Self::pool_options)) on the database
    /// `url` (`sqlite://path?mode=rwc` creates the file if needed), with the default settings.
    ///
    /// # Errors
    ///
    /// [`Error::is_backend`] if the URL is invalid or the database cannot be opened.
    pub async fn connect(url: &str) -> Result<Self> {
        let pool = Self::pool_options()
            .connect(url)
            .await
            .map_err(|e| Error::backend("open the SQLite database", e))?;
        Ok(Self::new(pool))
    }

    /// Like [`connect`](Self::connect), but opens the database on first use.
    ///
    /// # Errors
    ///
    /// [`Error::is_backend`] if the URL is invalid.
    pub fn connect_lazy(url: &str) -> Result<Self> {
        let pool = Self::pool_options()
            .connect_lazy(url)
            .map_err(|e| Error::backend("parse the SQLite URL", e))?;
        Ok(Self::new(pool))
    }

    fn from_parts(pool: SqlitePool, settings: Settings) -> Self {
        let quote = Quote::Double;
        let table = settings.table.quoted(quote);
        let cols = settings.columns.quoted(quote);
        let (name, until, at, by, tok) = (
            &cols.name,
            &cols.lock_until,
            &cols.locked_at,
            &cols.locked_by,
            &cols.fencing_token,
        );
        let plus = |param: &str| format!("strftime('{FORMAT}', 'now', {param})");
        let statements = |token: bool| {
            let (ins_col, ins_val, set_tok, ret_tok, same) = if token {
                (
                    format!(", {tok}"),
                    format!(", {NOW_MICROS}"),
                    format!(", {tok} = max({tok} + 1, excluded.{tok})"),
                    tok.clone(),
                    format!("{tok} = ?4"),
                )
            } else {
                (
                    String::new(),
                    String::new(),
                    String::new(),
                    "NULL".to_owned(),
                    format!("{at} = ?4"),
                )
            };
            Statements {
                // ?1 name, ?2 at_most modifier, ?3 owner. In DO UPDATE, bare column names are
                // the existing row's values.
                acquire: format!(
                    "INSERT INTO {table} ({name}, {until}, {at}, {by}{ins_col}) \
                     VALUES (?1, {}, {NOW}, ?3{ins_val}) \
                     ON CONFLICT ({name}) DO UPDATE SET {until} = excluded.{until}, {at} = excluded.{at}, \
                     {by} = excluded.{by}{set_tok} \
                     WHERE {until} <= excluded.{at} \
                     RETURNING {at}, {until}, {ret_tok}",
                    plus("?2")
                )
                .into(),
                // ?1 name, ?2 at_most modifier, ?3 owner, ?4 token (or locked_at).
                extend: format!(
                    "UPDATE {table} SET {until} = {} \
                     WHERE {name} = ?1 AND {by} = ?3 AND {same} AND {until} > {NOW} RETURNING {until}",
                    plus("?2")
                )
                .into(),
                // ?1 name, ?2 at_least modifier, ?3 owner, ?4 token (or locked_at).
                release: format!(
                    "UPDATE {table} SET {until} = max({NOW}, strftime('{FORMAT}', {at}, ?2)) \
                     WHERE {name} = ?1 AND {by} = ?3 AND {same}"
                )
                .into(),
                holder: format!(
                    "SELECT {by}, {at}, {until}, {ret_tok} FROM {table} WHERE {name} = ?1 AND {until} > {NOW}"
                )
                .into(),
            }
        };
        let sql = [statements(false), statements(true)];
        let (columns_sql, indexes_sql, index_columns_sql) = if settings.table.schema.is_some() {
            (
                "SELECT name, type FROM pragma_table_info(?1, ?2)",
                "SELECT name FROM pragma_index_list(?1, ?2) WHERE \"unique\" = 1 AND partial = 0",
                "SELECT name FROM pragma_index_info(?1, ?2)",
            )
        } else {
            (
                "SELECT name, type FROM pragma_table_info(?1)",
                "SELECT name FROM pragma_index_list(?1) WHERE \"unique\" = 1 AND partial = 0",
                "SELECT name FROM pragma_index_info(?1)",
            )
        };
        let ddl = ddl(&settings);
        Self {
            inner: Arc::new(Inner {
                store: Store::new(pool, settings),
                sql,
                columns_sql: columns_sql.into(),
                indexes_sql: indexes_sql.into(),
                index_columns_sql: index_columns_sql.into(),
                ddl,
            }),
        }
    }

    /// The pool this provider runs on.
    #[must_use]
    pub fn pool(&self) -> &SqlitePool {
        &self.inner.store.pool
    }

    /// The `CREATE TABLE IF NOT EXISTS` statement for the configured table and columns (the
    /// migration file's statement, for the default names).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let pool = shedlock_sqlx::sqlx::SqlitePool::connect_lazy("sqlite::memory:")?;
    /// let provider = shedlock_sqlx::SqliteLockProvider::new(pool);
    /// assert!(provider.ddl().contains("\"fencing_token\" INTEGER NOT NULL DEFAULT 0"));
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn ddl(&self) -> &str {
        &self.inner.ddl
    }

    /// Creates the lock table (with the fencing-token column) unless it exists.
    ///
    /// # Errors
    ///
    /// [`Error::is_backend`] or [`Error::is_timeout`] if the statement failed.
    pub async fn create_table_if_not_exists(&self) -> Result<()> {
        let store = &self.inner.store;
        let call = &store.call("create_table_if_not_exists");
        let map = |e| self.map_error(e, "create the lock table");
        store
            .run(call, map, |mut c| async move {
                let outcome = call
                    .timed(sqlx::raw_sql(AssertSqlSafe(self.inner.ddl.clone())).execute(c.conn()))
                    .await;
                c.settle(outcome, map).map(drop)
            })
            .await
    }

    /// The shared store, for the admin surface (`admin.rs`).
    pub(crate) fn store(&self) -> &Store<Sqlite> {
        &self.inner.store
    }

    pub(crate) async fn schema(&self, call: &Call) -> Result<Schema> {
        self.inner.store.schema(|| self.detect(call)).await
    }

    async fn detect(&self, call: &Call) -> Result<Schema> {
        let store = &self.inner.store;
        let s = &store.settings;
        let cols = &s.columns;
        let schema_name = s.table.schema.as_deref();
        let map = |e| self.map_error(e, "read the lock table's columns");
        let (columns, unique) = store
            .run(call, map, |mut c| async move {
                let outcome = call
                    .timed(
                        with_schema(
                            sqlx::query_as::<_, (String, String)>(AssertSqlSafe(
                                self.inner.columns_sql.clone(),
                            ))
                            .bind(&s.table.table),
                            schema_name,
                        )
                        .fetch_all(c.conn()),
                    )
                    .await;
                let columns = c.settle(outcome, map)?;
                if columns.is_empty() {
                    return Ok((columns, false));
                }
                let outcome = call
                    .timed(
                        with_schema_scalar(
                            sqlx::query_scalar::<_, String>(AssertSqlSafe(
                                self.inner.indexes_sql.clone(),
                            ))
                            .bind(&s.table.table),
                            schema_name,
                        )
                        .fetch_all(c.conn()),
                    )
                    .await;
                let indexes = c.settle(outcome, map)?;
                let mut unique = false;
                for index in indexes {
                    let outcome = call
                        .timed(
                            with_schema_scalar(
                                sqlx::query_scalar::<_, String>(AssertSqlSafe(
                                    self.inner.index_columns_sql.clone(),
                                ))
                                .bind(&index),
                                schema_name,
                            )
                            .fetch_all(c.conn()),
                        )
                        .await;
                    let index_columns = c.settle(outcome, map)?;
                    if let [only] = index_columns.as_slice()
                        && only.eq_ignore_ascii_case(&cols.name)
                    {
                        unique = true;
                    }
                }
                Ok((columns, unique))
            })
            .await?;
        if columns.is_empty() {
            return Err(self.missing_table(format!("table {} not found", s.table)));
        }
        check_columns(s, &columns, unique)
    }

    fn statements(&self, schema: Schema) -> &Statements {
        &self.inner.sql[usize::from(schema.has_token)]
    }

    fn missing_table(&self, source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Error {
        Error::missing_table(
            self.inner.store.settings.table.to_string(),
            format!(
                "create it with SqliteLockProvider::create_table_if_not_exists() or the migration \
                 migrations/sqlite/0001_shedlock.sql of shedlock-sqlx, i.e. run: {}",
                self.inner.ddl
            ),
            source,
        )
    }

    pub(crate) fn map_error(&self, error: sqlx::Error, what: &str) -> Error {
        let message = match &error {
            sqlx::Error::Database(db) => db.message().to_owned(),
            _ => String::new(),
        };
        if message.starts_with("no such table") {
            self.missing_table(error)
        } else if message.starts_with("no such column")
            || message.contains("does not match any PRIMARY KEY or UNIQUE constraint")
        {
            Error::schema(
                format!(
                    "{} does not have the expected columns ({message}); see \
                     SqliteLockProvider::ddl()",
                    self.inner.store.settings.table
                ),
                Some(Box::new(error)),
            )
        } else {
            Error::backend(what, error)
        }
    }

    /// Binds `record`'s identity: its token (from [`Schema::record_token`]), or its
    /// `locked_at` without a token column.
    fn bind_identity<'q>(
        query: sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments>,
        token: Option<i64>,
        record: &LockRecord,
    ) -> sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments> {
        match token {
            Some(token) => query.bind(token),
            None => query.bind(record.locked_at().format(CHRONO_FORMAT).to_string()),
        }
    }
}

/// Checks the columns (name, declared type) of the lock table against what the statements need.
fn check_columns(s: &Settings, columns: &[(String, String)], unique: bool) -> Result<Schema> {
    let cols = &s.columns;
    let find = |name: &str| {
        columns
            .iter()
            .find(|(c, _)| c.eq_ignore_ascii_case(name))
            .map(|(_, ty)| ty.to_ascii_uppercase())
    };
    let numeric = |ty: &str| {
        ["INT", "REAL", "FLOA", "DOUB"]
            .iter()
            .any(|affinity| ty.contains(affinity))
    };
    let mut problems = Vec::new();
    for (column, what) in [
        (&cols.name, "text"),
        (&cols.locked_by, "text"),
        (&cols.lock_until, "text (UTC `YYYY-MM-DD HH:MM:SS.SSS`)"),
        (&cols.locked_at, "text (UTC `YYYY-MM-DD HH:MM:SS.SSS`)"),
    ] {
        match find(column) {
            None => problems.push(format!("column {column} is missing")),
            Some(ty) if numeric(&ty) => {
                problems.push(format!("column {column} is {ty}, expected {what}"));
            }
            Some(_) => {}
        }
    }
    if find(&cols.name).is_some() && !unique {
        problems.push(format!(
            "column {} is not the primary key (nor alone in a unique index)",
            cols.name
        ));
    }
    let has_token = match find(&cols.fencing_token) {
        None => false,
        Some(ty) if ty.contains("INT") => true,
        Some(ty) => {
            problems.push(format!(
                "column {} is {ty}, expected INTEGER",
                cols.fencing_token
            ));
            false
        }
    };
    if !problems.is_empty() {
        return Err(Error::schema(
            format!(
                "{}: {}; see the DDL of SqliteLockProvider::ddl()",
                s.table,
                problems.join("; ")
            ),
            None,
        ));
    }
    tracing::debug!(table = %s.table, has_token, "lock table checked");
    Ok(Schema {
        has_token,
        owner_max: None,
    })
}

type Args = sqlx::sqlite::SqliteArguments;

/// Binds the schema argument of a pragma function, when the table name has one.
fn with_schema<'q, O>(
    query: sqlx::query::QueryAs<'q, Sqlite, O, Args>,
    schema: Option<&'q str>,
) -> sqlx::query::QueryAs<'q, Sqlite, O, Args> {
    match schema {
        Some(schema) => query.bind(schema),
        None => query,
    }
}

/// [`with_schema`] for scalar queries.
fn with_schema_scalar<'q, O>(
    query: sqlx::query::QueryScalar<'q, Sqlite, O, Args>,
    schema: Option<&'q str>,
) -> sqlx::query::QueryScalar<'q, Sqlite, O, Args> {
    match schema {
        Some(schema) => query.bind(schema),
        None => query,
    }
}

/// An SQLite date modifier adding `d` (rounded up to milliseconds): `+600.500 seconds`.
fn modifier(d: Duration) -> String {
    let millis = millis_ceil(d);
    format!("+{}.{:03} seconds", millis / 1_000, millis % 1_000)
}

/// Reads a time column written by SQLite's date functions.
pub(crate) fn time(row: &SqliteRow, index: usize) -> Result<DateTime<Utc>> {
    let text: String = row
        .try_get(index)
        .map_err(|e| Error::backend("read a lock row", e))?;
    NaiveDateTime::parse_from_str(&text, CHRONO_FORMAT)
        .map(|t| t.and_utc())
        .map_err(|e| {
            Error::schema(
                format!("a time column holds {text:?}, not UTC `YYYY-MM-DD HH:MM:SS.SSS`"),
                Some(Box::new(e)),
            )
        })
}

/// The DDL for `settings` (the migration file's, for the default names).
fn ddl(settings: &Settings) -> String {
    let q = Quote::Double;
    let t = settings.table.quoted(q);
    let c = settings.columns.quoted(q);
    format!(
        "CREATE TABLE IF NOT EXISTS {t} (\n    \
         {} VARCHAR({}) NOT NULL,\n    \
         {} TEXT NOT NULL,\n    \
         {} TEXT NOT NULL,\n    \
         {} VARCHAR(255) NOT NULL,\n    \
         {} INTEGER NOT NULL DEFAULT 0,\n    \
         PRIMARY KEY ({})\n)",
        c.name,
        settings.max_name_len,
        c.lock_until,
        c.locked_at,
        c.locked_by,
        c.fencing_token,
        c.name
    )
}

impl LockProviderBuilder<Sqlite> {
    /// Checks the settings and builds the provider (no database access yet).
    ///
    /// # Errors
    ///
    /// [`Error::is_invalid_config`] for a table or column name that is not a plain identifier
    /// (optionally `schema.table`), two columns with one name, a `max_name_len` of 0 or above
    /// 10,000, or a zero call timeout.
    pub fn build(self) -> Result<SqliteLockProvider> {
        let (pool, settings) = self.into_parts()?;
        Ok(SqliteLockProvider::from_parts(pool, settings))
    }
}

#[async_trait]
impl LockProvider for SqliteLockProvider {
    async fn acquire(
        &self,
        name: &str,
        at_most: Duration,
        owner: &str,
    ) -> Result<Option<LockRecord>> {
        let store = &self.inner.store;
        store.check_name(name)?;
        shedlock_core::validate_at_most(at_most)?;
        let call = &store.call("acquire");
        let schema = self.schema(call).await?;
        schema.check_owner(owner)?;
        let what = || format!("acquire lock {name:?}");
        let map = |e| self.map_error(e, &what());
        let sql = &self.statements(schema).acquire;
        let row = store
            .run(call, map, |mut c| async move {
                let outcome = call
                    .timed(
                        sqlx::query(AssertSqlSafe(sql.clone()))
                            .bind(name)
                            .bind(modifier(at_most))
                            .bind(owner)
                            .fetch_optional(c.conn()),
                    )
                    .await;
                c.settle(outcome, map)
            })
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let token: Option<i64> = row.try_get(2).map_err(map)?;
        Ok(Some(
            LockRecord::new(name, owner, time(&row, 0)?, time(&row, 1)?).with_fencing_token(token),
        ))
    }

    async fn extend(&self, record: &LockRecord, at_most: Duration) -> Result<Option<LockRecord>> {
        shedlock_core::validate_at_most(at_most)?;
        let store = &self.inner.store;
        let call = &store.call("extend");
        let schema = self.schema(call).await?;
        let what = || format!("extend lock {:?}", record.name());
        let map = |e| self.map_error(e, &what());
        let token = schema.record_token(record)?;
        let sql = &self.statements(schema).extend;
        let row = store
            .run(call, map, |mut c| async move {
                let query = sqlx::query(AssertSqlSafe(sql.clone()))
                    .bind(record.name())
                    .bind(modifier(at_most))
                    .bind(record.owner());
                let query = Self::bind_identity(query, token, record);
                let outcome = call.timed(query.fetch_optional(c.conn())).await;
                c.settle(outcome, map)
            })
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        Ok(Some(record.clone().with_lock_until(time(&row, 0)?)))
    }

    async fn release(&self, record: &LockRecord, at_least: Duration) -> Result<bool> {
        shedlock_core::validate_at_least(at_least)?;
        let store = &self.inner.store;
        let call = &store.call("release");
        let schema = self.schema(call).await?;
        let what = || format!("release lock {:?}", record.name());
        let map = |e| self.map_error(e, &what());
        let token = schema.record_token(record)?;
        let sql = &self.statements(schema).release;
        let done = store
            .run(call, map, |mut c| async move {
                let query = sqlx::query(AssertSqlSafe(sql.clone()))
                    .bind(record.name())
                    .bind(modifier(at_least))
                    .bind(record.owner());
                let query = Self::bind_identity(query, token, record);
                let outcome = call.timed(query.execute(c.conn())).await;
                c.settle(outcome, map)
            })
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn holder(&self, name: &str) -> Result<Option<LockRecord>> {
        let store = &self.inner.store;
        store.check_name(name)?;
        let call = &store.call("holder");
        let schema = self.schema(call).await?;
        let what = || format!("read lock {name:?}");
        let map = |e| self.map_error(e, &what());
        let sql = &self.statements(schema).holder;
        let row = store
            .run(call, map, |mut c| async move {
                let outcome = call
                    .timed(
                        sqlx::query(AssertSqlSafe(sql.clone()))
                            .bind(name)
                            .fetch_optional(c.conn()),
                    )
                    .await;
                c.settle(outcome, map)
            })
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let owner: String = row.try_get(0).map_err(map)?;
        let token: Option<i64> = row.try_get(3).map_err(map)?;
        Ok(Some(
            LockRecord::new(name, owner, time(&row, 1)?, time(&row, 2)?).with_fencing_token(token),
        ))
    }

    fn max_name_len(&self) -> usize {
        self.inner.store.settings.max_name_len
    }
}

impl fmt::Debug for SqliteLockProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.inner.store.settings;
        f.debug_struct("SqliteLockProvider")
            .field("table", &s.table.to_string())
            .field("max_name_len", &s.max_name_len)
            .field("call_timeout", &s.call_timeout)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modifiers_round_up_to_milliseconds() {
        assert_eq!(modifier(Duration::from_millis(600_500)), "+600.500 seconds");
        assert_eq!(modifier(Duration::from_micros(1)), "+0.001 seconds");
        assert_eq!(modifier(Duration::ZERO), "+0.000 seconds");
    }

    #[tokio::test]
    async fn the_migration_file_holds_the_built_in_ddl() {
        let pool = SqlitePool::connect_lazy("sqlite::memory:").expect("a valid URL");
        crate::store::assert_same_ddl(
            "sqlite/0001_shedlock.sql",
            SqliteLockProvider::new(pool).ddl(),
        );
    }
}
