//! [`MySqlLockProvider`]: locks in a MySQL or MariaDB table, on the database server's clock.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use shedlock_core::{Error, LockProvider, LockRecord, Result};
use sqlx::mysql::{MySql, MySqlDatabaseError, MySqlPool, MySqlPoolOptions, MySqlQueryResult};
use sqlx::{AssertSqlSafe, Executor as _, Row};

use crate::builder::{LockProviderBuilder, Settings};
use crate::ident::Quote;
use crate::store::{
    Call, DEFAULT_POOL_SIZE, Schema, Store, check_name_capacity, millis_ceil, utc_from_micros,
};

/// Runs the statement with `time_zone = '+00:00'` whatever the session's zone: MariaDB reads the
/// executable comment (`SET STATEMENT … FOR`, MariaDB ≥ 10.1.2), MySQL ignores it.
pub(crate) const PIN: &str = "/*M!100102 SET STATEMENT time_zone = '+00:00' FOR */ ";
/// The same for MySQL ≥ 8.0 (an optimizer hint after the statement's first keyword); MariaDB
/// treats it as a comment.
pub(crate) const HINT: &str = "/*+ SET_VAR(time_zone = '+00:00') */";
/// The database's "now" in UTC, with the millisecond precision of ShedLock's `TIMESTAMP(3)`.
pub(crate) const NOW: &str = "UTC_TIMESTAMP(3)";
/// [`NOW`] in microseconds since the Unix epoch (pure date arithmetic, no time-zone conversion).
const NOW_MICROS: &str = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(3))";
/// The statement's start in microseconds since the Unix epoch, which seeds fencing tokens.
const SEED_MICROS: &str = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))";
/// The session setting of the dedicated pool's connections.
const SET_UTC: &str = "SET time_zone = '+00:00'";

/// A [`LockProvider`] on a MySQL or MariaDB table: Java ShedLock's layout (`shedlock(name,
/// lock_until, locked_at, locked_by)`), plus a `fencing_token` column where the table has one.
///
/// # Table
///
/// Create it with [`create_table_if_not_exists`](Self::create_table_if_not_exists), or run the
/// same DDL from `migrations/mysql/0001_shedlock.sql` in this crate (sqlx-cli naming):
///
/// ```sql
/// CREATE TABLE IF NOT EXISTS shedlock (
///     name VARCHAR(64) NOT NULL,
///     lock_until TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
///     locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
///     locked_by VARCHAR(255) NOT NULL,
///     fencing_token BIGINT NOT NULL DEFAULT 0,
///     PRIMARY KEY (name)
/// ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
/// ```
///
/// The binary collation makes lock names compare exactly (`Report` and `report` are two locks)
/// and `utf8mb4` stores any Unicode name. Java ShedLock's own DDL works too (without the token
/// column, tokens are `None`; with a case-insensitive collation the provider logs a warning once).
/// On first use the provider reads the table's columns once and fails with
/// [`Error::is_missing_table`] or [`Error::is_schema`] if the table is missing or does not fit
/// (time columns must be `TIMESTAMP(3)` or `DATETIME(3)` or finer; `locked_at` must not have
/// `ON UPDATE`); a failed check is retried on the next call. `TIMESTAMP` columns cannot hold a
/// time after 2038-01-19 03:14:07 UTC on MySQL and on MariaDB before 11.5, so a `lock_until`
/// beyond it cannot be stored; `DATETIME(3)` columns have no such limit and work the same, as
/// the provider reads and writes UTC either way.
///
/// # Time
///
/// Every decision compares against the server's clock, `UTC_TIMESTAMP(3)`, inside the statement
/// that decides. `TIMESTAMP` columns convert through the session's `time_zone`, so the provider
/// runs each of its statements with `time_zone = '+00:00'` whatever the server's default or the
/// session's setting: MariaDB through `SET STATEMENT time_zone = '+00:00' FOR …`, MySQL 8
/// through the `SET_VAR` hint; the dedicated pool ([`connect`](Self::connect)) also sets it on
/// every new connection (which covers servers that know neither, such as MySQL 5.7: give those a
/// pool whose sessions are in UTC, as sqlx's default `timezone` option does). Values are therefore UTC wall-clock times, as Java ShedLock writes them
/// with `usingDbTime()`; **Java services sharing the table must pin their sessions to UTC too**
/// (e.g. `connectionTimeZone=UTC&forceConnectionTimeZoneToSession=true` with Connector/J, or
/// `default-time-zone='+00:00'` on the server). Durations are rounded up to whole milliseconds.
///
/// # Statements
///
/// Each call runs in autocommit on a connection taken from the pool and given back at once; no
/// connection is kept while a lock is held. An acquire is one `UPDATE … WHERE name = ?` that
/// takes the row only if the lock has expired (setting each column to itself otherwise, so a
/// held lock writes nothing) and reports through `LAST_INSERT_ID(…)` whether it did. Only if
/// the row is missing does a second statement insert it (`INSERT … ON DUPLICATE KEY UPDATE` that
/// changes nothing on a duplicate: no `INSERT IGNORE`, so errors such as "data too long" stay
/// visible, and no duplicate-key error). A row deleted by hand is therefore recreated by the
/// next acquire. A won acquire on a table with tokens reads the row back (one more statement,
/// as MySQL has no `RETURNING`): two statements on an existing row, three on a missing one.
///
/// # Fencing tokens
///
/// Each acquisition sets `fencing_token = GREATEST(fencing_token + 1, now in µs since 1970)`,
/// so tokens strictly increase per name. Deleting a row by hand does not restart the sequence:
/// the recreated row starts from the database clock in microseconds, above every earlier token
/// unless the clock was set back or the lock was taken more than once per microsecond on
/// average. A Java service's acquisitions leave the token unchanged (they carry none), so
/// [`holder`](LockProvider::holder) reports the last token a Rust acquisition set while Java
/// holds the lock.
///
/// # Pool, timeouts and failures
///
/// Use a small pool of its own ([`connect`](Self::connect) builds one): lock calls that do not
/// compete with the application's queries keep releasing and extending locks while the
/// application's jobs exhaust its own pool. 4 connections (the default) serve thousands of lock
/// calls per second. The pool should not ping on checkout (`test_before_acquire(false)`, as
/// [`pool_options`](Self::pool_options) sets): a statement then costs one round trip on the
/// caller's path.
///
/// After a server restart (or `KILL`) every idle connection is dead. A call that meets one (the
/// server says 1053 "server shutdown in progress", MariaDB 1927 "connection was killed", another
/// SQLSTATE `08` error, or the socket is closed) closes it and runs again on another connection,
/// within its deadline, until it reaches a fresh one (at most pool size + 1 attempts). A restart
/// that is over within `call_timeout` therefore fails no call; the statement's own errors are
/// never retried. A statement whose connection died after it was sent may have committed:
/// repeated, an acquire then returns `Ok(None)` and the lock stays held until its `at_most`, as
/// after a timed-out acquire; extends and releases are safe to repeat.
///
/// Every call has a deadline ([`call_timeout`](LockProviderBuilder::call_timeout), 5 s by
/// default) covering the checkout and the statements; the connection of a call that timed out is
/// closed, never returned to the pool. **A timed-out acquire may have committed**: the lock is
/// then held until its `at_most` ends.
///
/// ```no_run
/// use std::time::Duration;
/// use shedlock_core::{LockConfig, LockingTaskExecutor};
/// use shedlock_sqlx::MySqlLockProvider;
///
/// # async fn example() -> shedlock_core::Result<()> {
/// let provider = MySqlLockProvider::connect("mysql://app@db/app").await?;
/// provider.create_table_if_not_exists().await?;
/// let executor = LockingTaskExecutor::new(provider)?;
/// let cfg = LockConfig::new("nightly-report", Duration::from_secs(600))?;
/// executor.execute(&cfg, async { /* the job */ }).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct MySqlLockProvider {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store<MySql>,
    /// Statements for a table without (`[0]`) and with (`[1]`) the token column.
    sql: [Statements; 2],
    columns_sql: Arc<str>,
    unique_sql: Arc<str>,
    ddl: String,
}

struct Statements {
    /// Takes an expired row; `LAST_INSERT_ID` = the new token (or `locked_at` in µs) if taken.
    update: Arc<str>,
    /// Inserts a missing row; `LAST_INSERT_ID` = the token (or `locked_at` in µs) if inserted.
    insert: Arc<str>,
    /// Reads a won row back by its token (tables with tokens only).
    read_back: Arc<str>,
    extend: Arc<str>,
    release: Arc<str>,
    holder: Arc<str>,
}

impl MySqlLockProvider {
    /// A provider over `pool` with Java ShedLock's defaults (table `shedlock`, 5 s call
    /// timeout); see [`builder`](Self::builder) for the settings.
    ///
    /// ```no_run
    /// use shedlock_sqlx::MySqlLockProvider;
    ///
    /// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
    /// let pool = MySqlLockProvider::pool_options().connect("mysql://app@db/app").await?;
    /// let provider = MySqlLockProvider::new(pool);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn new(pool: MySqlPool) -> Self {
        Self::from_parts(pool, Settings::defaults())
    }

    /// Starts configuring a provider over `pool`; finish with
    /// [`build`](LockProviderBuilder::build).
    pub fn builder(pool: MySqlPool) -> LockProviderBuilder<MySql> {
        LockProviderBuilder::new(pool)
    }

    /// Pool options for a dedicated lock pool: at most 4 connections, one kept open, no ping on
    /// checkout (`test_before_acquire(false)`), a 5 s acquire timeout, and
    /// `SET time_zone = '+00:00'` on every new connection (after any of your connect options).
    ///
    /// ```no_run
    /// use shedlock_sqlx::MySqlLockProvider;
    ///
    /// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
    /// let pool = MySqlLockProvider::pool_options()
    ///     .max_connections(8)
    ///     .connect("mysql://app@db/app")
    ///     .await?;
    /// let provider = MySqlLockProvider::builder(pool).table("job_locks").build()?;
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn pool_options() -> MySqlPoolOptions {
        MySqlPoolOptions::new()
            .max_connections(DEFAULT_POOL_SIZE)
            .min_connections(1)
            .test_before_acquire(false)
            .acquire_timeout(shedlock_core::DEFAULT_CALL_TIMEOUT)
            .after_connect(|conn, _meta| {
                Box::pin(async move {
                    conn.execute(SET_UTC).await?;
                    Ok(())
                })
            })
    }

    /// A provider with a dedicated pool ([`pool_options`](Self::pool_options)) connected to
    /// `url`, and the default settings. It opens one connection now, so a wrong URL or
    /// password fails here.
    ///
    /// # Errors
    ///
    /// [`Error::is_backend`] if the URL is invalid or the server cannot be reached.
    pub async fn connect(url: &str) -> Result<Self> {
        let pool = Self::pool_options()
            .connect(url)
            .await
            .map_err(|e| Error::backend("connect to MySQL/MariaDB", e))?;
        Ok(Self::new(pool))
    }

    /// Like [`connect`](Self::connect), but connects on first use (startup does not need the
    /// database).
    ///
    /// # Errors
    ///
    /// [`Error::is_backend`] if the URL is invalid.
    pub fn connect_lazy(url: &str) -> Result<Self> {
        let pool = Self::pool_options()
            .connect_lazy(url)
            .map_err(|e| Error::backend("parse the MySQL/MariaDB URL", e))?;
        Ok(Self::new(pool))
    }

    fn from_parts(pool: MySqlPool, settings: Settings) -> Self {
        let quote = Quote::Backtick;
        let table = settings.table.quoted(quote);
        let cols = settings.columns.quoted(quote);
        let (name, until, at, by, tok) = (
            &cols.name,
            &cols.lock_until,
            &cols.locked_at,
            &cols.locked_by,
            &cols.fencing_token,
        );
        let expired = format!("{until} <= {NOW}");
        let statements = |token: bool| {
            // How the statements report a win through LAST_INSERT_ID(expr): with a token column
            // the new token; without, `locked_at` in microseconds (`0 * LAST_INSERT_ID(x)` adds
            // nothing to the value it sits in).
            let (take_tok, locked_at_value, ins_col, ins_val, same, ret_tok) = if token {
                (
                    format!(
                        "{tok} = IF({expired}, LAST_INSERT_ID(GREATEST({tok} + 1, {SEED_MICROS})), {tok}), "
                    ),
                    NOW.to_owned(),
                    format!(", {tok}"),
                    format!(", LAST_INSERT_ID({SEED_MICROS})"),
                    format!("{tok} = ?"),
                    tok.clone(),
                )
            } else {
                (
                    String::new(),
                    format!("TIMESTAMPADD(MICROSECOND, 0 * LAST_INSERT_ID({NOW_MICROS}), {NOW})"),
                    String::new(),
                    String::new(),
                    format!("{at} = ?"),
                    "CAST(NULL AS SIGNED)".to_owned(),
                )
            };
            Statements {
                // ? owner, ? at_most µs, ? name. `lock_until` is assigned last: the conditions
                // before it read its old value (MySQL assigns left to right).
                update: format!(
                    "{PIN}UPDATE {HINT} {table} SET {take_tok}\
                     {by} = IF({expired}, ?, {by}), \
                     {at} = IF({expired}, {locked_at_value}, {at}), \
                     {until} = IF({expired}, TIMESTAMPADD(MICROSECOND, ?, {NOW}), {until}) \
                     WHERE {name} = ?"
                )
                .into(),
                // ? name, ? at_most µs, ? owner. On a duplicate (inserted concurrently) it
                // changes nothing and resets LAST_INSERT_ID to 0.
                insert: format!(
                    "{PIN}INSERT {HINT} INTO {table} ({name}, {until}, {at}, {by}{ins_col}) \
                     VALUES (?, TIMESTAMPADD(MICROSECOND, ?, {NOW}), {locked_at_value}, ?{ins_val}) \
                     ON DUPLICATE KEY UPDATE {until} = TIMESTAMPADD(MICROSECOND, LAST_INSERT_ID(0), {until})"
                )
                .into(),
                // ? name, ? token.
                read_back: format!(
                    "{PIN}SELECT {HINT} {at}, {until} FROM {table} WHERE {name} = ? AND {tok} = ?"
                )
                .into(),
                // ? at_most µs, ? name, ? owner, ? token (or locked_at). LAST_INSERT_ID = now µs.
                extend: format!(
                    "{PIN}UPDATE {HINT} {table} \
                     SET {until} = TIMESTAMPADD(MICROSECOND, ? + 0 * LAST_INSERT_ID({NOW_MICROS}), {NOW}) \
                     WHERE {name} = ? AND {by} = ? AND {same} AND {until} > {NOW}"
                )
                .into(),
                // ? at_least µs, ? name, ? owner, ? token (or locked_at).
                release: format!(
                    "{PIN}UPDATE {HINT} {table} \
                     SET {until} = GREATEST({NOW}, TIMESTAMPADD(MICROSECOND, ?, {at})) \
                     WHERE {name} = ? AND {by} = ? AND {same}"
                )
                .into(),
                holder: format!(
                    "{PIN}SELECT {HINT} {by}, {at}, {until}, {ret_tok} FROM {table} \
                     WHERE {name} = ? AND {until} > {NOW}"
                )
                .into(),
            }
        };
        let sql = [statements(false), statements(true)];
        let columns_sql = "SELECT CAST(column_name AS CHAR), CAST(data_type AS CHAR), \
             CAST(character_maximum_length AS SIGNED), CAST(datetime_precision AS SIGNED), \
             CAST(extra AS CHAR), CAST(collation_name AS CHAR) \
             FROM information_schema.columns \
             WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?"
            .into();
        let unique_sql = "SELECT COUNT(*) FROM information_schema.statistics s \
             WHERE s.table_schema = COALESCE(?, DATABASE()) AND s.table_name = ? \
             AND s.non_unique = 0 AND s.column_name = ? \
             AND (SELECT COUNT(*) FROM information_schema.statistics s2 \
             WHERE s2.table_schema = s.table_schema AND s2.table_name = s.table_name \
             AND s2.index_name = s.index_name) = 1"
            .into();
        let ddl = ddl(&settings);
        Self {
            inner: Arc::new(Inner {
                store: Store::new(pool, settings),
                sql,
                columns_sql,
                unique_sql,
                ddl,
            }),
        }
    }

    /// The pool this provider runs on.
    #[must_use]
    pub fn pool(&self) -> &MySqlPool {
        &self.inner.store.pool
    }

    /// The `CREATE TABLE IF NOT EXISTS` statement for the configured table and columns (the
    /// migration file's statement, for the default names).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let pool = shedlock_sqlx::sqlx::MySqlPool::connect_lazy("mysql://localhost/app")?;
    /// let provider = shedlock_sqlx::MySqlLockProvider::new(pool);
    /// assert!(provider.ddl().ends_with("COLLATE = utf8mb4_bin"));
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
    pub(crate) fn store(&self) -> &Store<MySql> {
        &self.inner.store
    }

    pub(crate) async fn schema(&self, call: &Call) -> Result<Schema> {
        self.inner.store.schema(|| self.detect(call)).await
    }

    async fn detect(&self, call: &Call) -> Result<Schema> {
        let store = &self.inner.store;
        let s = &store.settings;
        let map = |e| self.map_error(e, "read the lock table's columns");
        let (rows, unique) = store
            .run(call, map, |mut c| async move {
                let outcome = call
                    .timed(
                        sqlx::query(AssertSqlSafe(self.inner.columns_sql.clone()))
                            .bind(s.table.schema.as_deref())
                            .bind(&s.table.table)
                            .fetch_all(c.conn()),
                    )
                    .await;
                let rows = c.settle(outcome, map)?;
                if rows.is_empty() {
                    return Ok((rows, false));
                }
                let outcome = call
                    .timed(
                        sqlx::query_scalar::<_, i64>(AssertSqlSafe(self.inner.unique_sql.clone()))
                            .bind(s.table.schema.as_deref())
                            .bind(&s.table.table)
                            .bind(&s.columns.name)
                            .fetch_one(c.conn()),
                    )
                    .await;
                Ok((rows, c.settle(outcome, map)? > 0))
            })
            .await?;
        if rows.is_empty() {
            return Err(self.missing_table(format!("table {} not found", s.table)));
        }
        let mut columns = Vec::with_capacity(rows.len());
        for row in &rows {
            let len: Option<i64> = row.try_get(2).map_err(map)?;
            columns.push(Column {
                name: row.try_get(0).map_err(map)?,
                ty: row
                    .try_get::<String, _>(1)
                    .map_err(map)?
                    .to_ascii_lowercase(),
                len: len.and_then(|l| usize::try_from(l).ok()),
                precision: row.try_get(3).map_err(map)?,
                extra: row
                    .try_get::<Option<String>, _>(4)
                    .map_err(map)?
                    .unwrap_or_default()
                    .to_ascii_lowercase(),
                collation: row.try_get(5).map_err(map)?,
            });
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
                "create it with MySqlLockProvider::create_table_if_not_exists() or the migration \
                 migrations/mysql/0001_shedlock.sql of shedlock-sqlx, i.e. run: {}",
                self.inner.ddl
            ),
            source,
        )
    }

    pub(crate) fn map_error(&self, error: sqlx::Error, what: &str) -> Error {
        let number = match &error {
            sqlx::Error::Database(db) => db
                .try_downcast_ref::<MySqlDatabaseError>()
                .map(MySqlDatabaseError::number),
            _ => None,
        };
        match number {
            // ER_NO_SUCH_TABLE
            Some(1146) => self.missing_table(error),
            // ER_BAD_FIELD_ERROR
            Some(1054) => Error::schema(
                format!(
                    "{} does not have the expected columns ({error}); see MySqlLockProvider::ddl()",
                    self.inner.store.settings.table
                ),
                Some(Box::new(error)),
            ),
            _ => Error::backend(what, error),
        }
    }

    /// Binds `record`'s identity: its token (from [`Schema::record_token`]), or its
    /// `locked_at` without a token column.
    fn bind_identity<'q>(
        query: sqlx::query::Query<'q, MySql, sqlx::mysql::MySqlArguments>,
        token: Option<i64>,
        record: &LockRecord,
    ) -> sqlx::query::Query<'q, MySql, sqlx::mysql::MySqlArguments> {
        match token {
            Some(token) => query.bind(token),
            None => query.bind(record.locked_at()),
        }
    }
}

/// One column of the lock table, from `information_schema.columns`.
struct Column {
    name: String,
    /// `data_type`, lowercase.
    ty: String,
    len: Option<usize>,
    precision: Option<i64>,
    /// `extra`, lowercase (`on update current_timestamp(3)`, …).
    extra: String,
    collation: Option<String>,
}

/// Checks the columns of the lock table against what the statements need.
fn check_columns(s: &Settings, columns: &[Column], unique: bool) -> Result<Schema> {
    let cols = &s.columns;
    let find = |name: &str| columns.iter().find(|c| c.name.eq_ignore_ascii_case(name));
    let text = [
        "varchar",
        "char",
        "text",
        "tinytext",
        "mediumtext",
        "longtext",
    ];
    let mut problems = Vec::new();
    let mut name_max = None;
    let mut owner_max = None;
    match find(&cols.name) {
        None => problems.push(format!("column {} is missing", cols.name)),
        Some(col) => {
            if !text.contains(&col.ty.as_str()) {
                problems.push(format!(
                    "column {} is {}, expected VARCHAR",
                    cols.name, col.ty
                ));
            }
            if !unique {
                problems.push(format!(
                    "column {} is not the primary key (nor alone in a unique index)",
                    cols.name
                ));
            }
            name_max = col.len;
            if let Some(collation) = &col.collation
                && !collation.to_ascii_lowercase().ends_with("_bin")
            {
                tracing::warn!(
                    table = %s.table,
                    collation,
                    "the lock name column has a case-insensitive collation: names that differ \
                     only in case are one lock (our DDL uses utf8mb4_bin)"
                );
            }
        }
    }
    match find(&cols.locked_by) {
        None => problems.push(format!("column {} is missing", cols.locked_by)),
        Some(col) => {
            if !text.contains(&col.ty.as_str()) {
                problems.push(format!(
                    "column {} is {}, expected VARCHAR",
                    cols.locked_by, col.ty
                ));
            }
            owner_max = col.len;
        }
    }
    for time in [&cols.lock_until, &cols.locked_at] {
        match find(time) {
            None => problems.push(format!("column {time} is missing")),
            Some(col) => problems.extend(time_column_problem(col, time == &cols.locked_at)),
        }
    }
    let has_token = match find(&cols.fencing_token) {
        None => false,
        Some(col) if col.ty == "bigint" => true,
        Some(col) => {
            problems.push(format!(
                "column {} is {}, expected BIGINT",
                cols.fencing_token, col.ty
            ));
            false
        }
    };
    if !problems.is_empty() {
        return Err(Error::schema(
            format!(
                "{}: {}; see the DDL of MySqlLockProvider::ddl()",
                s.table,
                problems.join("; ")
            ),
            None,
        ));
    }
    check_name_capacity(s, name_max)?;
    tracing::debug!(table = %s.table, has_token, "lock table checked");
    Ok(Schema {
        has_token,
        owner_max,
    })
}

/// What is wrong with a time column, if anything.
fn time_column_problem(col: &Column, is_locked_at: bool) -> Option<String> {
    let name = &col.name;
    let precision = col.precision.unwrap_or(0);
    if !matches!(col.ty.as_str(), "timestamp" | "datetime") {
        Some(format!(
            "column {name} is {}, expected TIMESTAMP(3) (or DATETIME(3))",
            col.ty
        ))
    } else if precision < 3 {
        Some(format!(
            "column {name} is {}({precision}), which drops milliseconds; use TIMESTAMP(3)",
            col.ty
        ))
    } else if is_locked_at && col.extra.contains("on update") {
        Some(format!(
            "column {name} has {}; it must keep the acquisition time (drop the ON UPDATE clause)",
            col.extra
        ))
    } else {
        None
    }
}

/// The value a statement passed to `LAST_INSERT_ID(expr)`, if it did.
fn reported(result: &MySqlQueryResult) -> Option<i64> {
    match result.last_insert_id() {
        0 => None,
        id => i64::try_from(id).ok(),
    }
}

/// `locked_at + millis` as a UTC time.
fn plus_millis(at: DateTime<Utc>, millis: i64) -> Result<DateTime<Utc>> {
    at.checked_add_signed(chrono::Duration::milliseconds(millis))
        .ok_or_else(|| Error::backend_message(format!("compute {at} + {millis} ms: out of range")))
}

/// The DDL for `settings` (the migration file's, for the default names).
fn ddl(settings: &Settings) -> String {
    let q = Quote::Backtick;
    let t = settings.table.quoted(q);
    let c = settings.columns.quoted(q);
    format!(
        "CREATE TABLE IF NOT EXISTS {t} (\n    \
         {} VARCHAR({}) NOT NULL,\n    \
         {} TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),\n    \
         {} TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),\n    \
         {} VARCHAR(255) NOT NULL,\n    \
         {} BIGINT NOT NULL DEFAULT 0,\n    \
         PRIMARY KEY ({})\n) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin",
        c.name,
        settings.max_name_len,
        c.lock_until,
        c.locked_at,
        c.locked_by,
        c.fencing_token,
        c.name
    )
}

impl LockProviderBuilder<MySql> {
    /// Checks the settings and builds the provider (no database access yet).
    ///
    /// # Errors
    ///
    /// [`Error::is_invalid_config`] for a table or column name that is not a plain identifier
    /// (optionally `schema.table`), two columns with one name, a `max_name_len` of 0 or above
    /// 10,000, or a zero call timeout.
    pub fn build(self) -> Result<MySqlLockProvider> {
        let (pool, settings) = self.into_parts()?;
        Ok(MySqlLockProvider::from_parts(pool, settings))
    }
}

#[async_trait]
impl LockProvider for MySqlLockProvider {
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
        let sql = self.statements(schema);
        let millis = millis_ceil(at_most);
        let micros = millis.saturating_mul(1_000);
        let what = || format!("acquire lock {name:?}");
        let map = |e| self.map_error(e, &what());
        // Repeating after a lost connection is safe: if the lost UPDATE or INSERT had won, the
        // repeat finds the row held (by this call, until `at_most`) and returns `None`.
        store
            .run(call, map, |mut c| async move {
                let outcome = call
                    .timed(
                        sqlx::query(AssertSqlSafe(sql.update.clone()))
                            .bind(owner)
                            .bind(micros)
                            .bind(name)
                            .execute(c.conn()),
                    )
                    .await;
                let updated = c.settle(outcome, map)?;
                // rows_affected counts matched rows (sqlx sets CLIENT_FOUND_ROWS): 0 = no row.
                let won = if updated.rows_affected() > 0 {
                    reported(&updated)
                } else {
                    let outcome = call
                        .timed(
                            sqlx::query(AssertSqlSafe(sql.insert.clone()))
                                .bind(name)
                                .bind(micros)
                                .bind(owner)
                                .execute(c.conn()),
                        )
                        .await;
                    reported(&c.settle(outcome, map)?)
                };
                let Some(reported) = won else {
                    return Ok(None);
                };
                if !schema.has_token {
                    let locked_at = utc_from_micros(reported)?;
                    return Ok(Some(LockRecord::new(
                        name,
                        owner,
                        locked_at,
                        plus_millis(locked_at, millis)?,
                    )));
                }
                let outcome = call
                    .timed(
                        sqlx::query(AssertSqlSafe(sql.read_back.clone()))
                            .bind(name)
                            .bind(reported)
                            .fetch_optional(c.conn()),
                    )
                    .await;
                // No row: the lock (of at most `at_most`) already passed to someone else.
                let Some(row) = c.settle(outcome, map)? else {
                    return Ok(None);
                };
                let locked_at: DateTime<Utc> = row.try_get(0).map_err(map)?;
                let lock_until: DateTime<Utc> = row.try_get(1).map_err(map)?;
                Ok(Some(
                    LockRecord::new(name, owner, locked_at, lock_until)
                        .with_fencing_token(Some(reported)),
                ))
            })
            .await
    }

    async fn extend(&self, record: &LockRecord, at_most: Duration) -> Result<Option<LockRecord>> {
        shedlock_core::validate_at_most(at_most)?;
        let store = &self.inner.store;
        let call = &store.call("extend");
        let schema = self.schema(call).await?;
        let millis = millis_ceil(at_most);
        let what = || format!("extend lock {:?}", record.name());
        let map = |e| self.map_error(e, &what());
        let token = schema.record_token(record)?;
        let sql = &self.statements(schema).extend;
        let result = store
            .run(call, map, |mut c| async move {
                let query = sqlx::query(AssertSqlSafe(sql.clone()))
                    .bind(millis.saturating_mul(1_000))
                    .bind(record.name())
                    .bind(record.owner());
                let query = Self::bind_identity(query, token, record);
                let outcome = call.timed(query.execute(c.conn())).await;
                c.settle(outcome, map)
            })
            .await?;
        if result.rows_affected() == 0 {
            return Ok(None);
        }
        let now = reported(&result).ok_or_else(|| {
            Error::backend_message(format!(
                "extend lock {:?}: the server did not report its time",
                record.name()
            ))
        })?;
        let lock_until = plus_millis(utc_from_micros(now)?, millis)?;
        Ok(Some(record.clone().with_lock_until(lock_until)))
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
                    .bind(millis_ceil(at_least).saturating_mul(1_000))
                    .bind(record.name())
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
        let locked_at: DateTime<Utc> = row.try_get(1).map_err(map)?;
        let lock_until: DateTime<Utc> = row.try_get(2).map_err(map)?;
        let token: Option<i64> = row.try_get(3).map_err(map)?;
        Ok(Some(
            LockRecord::new(name, owner, locked_at, lock_until).with_fencing_token(token),
        ))
    }

    fn max_name_len(&self) -> usize {
        self.inner.store.settings.max_name_len
    }
}

impl fmt::Debug for MySqlLockProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.inner.store.settings;
        f.debug_struct("MySqlLockProvider")
            .field("table", &s.table.to_string())
            .field("max_name_len", &s.max_name_len)
            .field("call_timeout", &s.call_timeout)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_data_statement_is_pinned_to_utc() {
        let pool = MySqlPool::connect_lazy("mysql://localhost/none").expect("a valid URL");
        let p = MySqlLockProvider::builder(pool)
            .table("app.locks")
            .build()
            .expect("valid settings");
        for s in &p.inner.sql {
            for sql in [&s.update, &s.insert, &s.extend, &s.release, &s.holder] {
                assert!(sql.starts_with(PIN), "{sql}");
                assert!(sql.contains(HINT), "{sql}");
                assert!(sql.contains("`app`.`locks`"), "{sql}");
                assert!(!sql.contains("INSERT IGNORE"), "{sql}");
            }
        }
    }

    #[tokio::test]
    async fn the_migration_file_holds_the_built_in_ddl() {
        let pool = MySqlPool::connect_lazy("mysql://localhost/none").expect("a valid URL");
        crate::store::assert_same_ddl(
            "mysql/0001_shedlock.sql",
            MySqlLockProvider::new(pool).ddl(),
        );
    }
}
