//! [`PgLockProvider`]: locks in a Postgres table, on the database server's clock.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::NaiveDateTime;
use shedlock_core::{Error, LockProvider, LockRecord, Result};
use sqlx::postgres::types::PgInterval;
use sqlx::postgres::{PgPool, PgPoolOptions, PgRow, Postgres};
use sqlx::{AssertSqlSafe, Row};

use crate::builder::{LockProviderBuilder, Settings};
use crate::ident::Quote;
use crate::store::{Call, DEFAULT_POOL_SIZE, Schema, Store, check_name_capacity, micros_ceil};

/// The database's "now" as a UTC wall-clock `timestamp`: the start of the statement, so every
/// use within one statement agrees (in autocommit it equals ShedLock's
/// `timezone('utc', CURRENT_TIMESTAMP)`, and it stays right even inside a transaction).
pub(crate) const NOW: &str = "timezone('UTC', statement_timestamp())";
/// The same instant in microseconds since the Unix epoch, which seeds fencing tokens.
const NOW_MICROS: &str = "(extract(epoch FROM statement_timestamp()) * 1000000)::bigint";

/// A [`LockProvider`] on a Postgres table: Java ShedLock's layout (`shedlock(name, lock_until,
/// locked_at, locked_by)`), plus a `fencing_token` column where the table has one.
///
/// # Table
///
/// Create it with [`create_table_if_not_exists`](Self::create_table_if_not_exists), or run the
/// same DDL from `migrations/postgres/0001_shedlock.sql` in this crate (sqlx-cli naming):
///
/// ```sql
/// CREATE TABLE IF NOT EXISTS shedlock (
///     name VARCHAR(64) NOT NULL,
///     lock_until TIMESTAMP NOT NULL,
///     locked_at TIMESTAMP NOT NULL,
///     locked_by VARCHAR(255) NOT NULL,
///     fencing_token BIGINT NOT NULL DEFAULT 0,
///     PRIMARY KEY (name)
/// )
/// ```
///
/// Times are UTC wall-clock values in `TIMESTAMP` (without time zone) columns, as Java ShedLock
/// writes them, so a Java service using ShedLock's `usingDbTime()` and this provider exclude
/// each other on one table. A table without the `fencing_token` column (Java's DDL) works as is;
/// tokens are then `None`. On first use the provider reads the table's columns once (which
/// columns exist, their types, the name column's length) and fails with
/// [`Error::is_missing_table`] or [`Error::is_schema`] if the table is missing or does not fit;
/// a failed check is retried on the next call. Restart the service after adding the token column
/// to an existing table.
///
/// # Time
///
/// Every decision compares against the server's clock, read inside the statement that decides
/// (`timezone('UTC', statement_timestamp())`). The application's clock, its time zone and the
/// session's `TimeZone` setting play no part.
///
/// # Statements
///
/// Each call is one statement in autocommit, on a connection taken from the pool and given back
/// at once; no connection is kept while a lock is held, so one connection serves any number of
/// held locks. An acquire is a single statement that updates the row if the lock has expired
/// and inserts it if it is missing (`INSERT … WHERE NOT EXISTS … ON CONFLICT DO NOTHING`, so no
/// duplicate-key error ever reaches the log); when the lock is held it writes nothing and takes
/// no row lock. A row deleted by hand is recreated by the next acquire. (Java ShedLock's single
/// `INSERT … ON CONFLICT DO UPDATE … WHERE lock_until <= now` locks the row even when it does
/// not take it: a transaction id and WAL on every skip, 96 bytes measured, against none here.)
/// A release does not wait for its WAL flush (`synchronous_commit = off` for that statement
/// alone): if the server crashes before the flush, the release is lost and the lock simply ends
/// at its `lock_until`. Acquires and extends are durable.
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
/// calls per second; raise it only for many locks taken at the very same instant. The pool
/// should not ping on checkout (`test_before_acquire(false)`, as [`pool_options`](Self::pool_options)
/// sets): the statement then costs one round trip on the caller's path. (sqlx still checks the
/// connection when it goes back, off the caller's path.)
///
/// After a server restart (or `pg_terminate_backend`, or `idle_session_timeout`) every idle
/// connection is dead. A call that meets one (Postgres says `57P01` "terminating connection due
/// to administrator command" or "… immediate shutdown", or the socket is closed) closes it and
/// runs again on another connection, within its deadline, until it reaches a fresh one (at most
/// pool size + 1 attempts). A restart that is over within `call_timeout` therefore fails no call;
/// the statement's own errors are never retried. A statement whose connection died after it was
/// sent may have committed: repeated, an acquire then returns `Ok(None)` and the lock stays held
/// until its `at_most`, as after a timed-out acquire; extends and releases are safe to repeat.
///
/// Every call has a deadline ([`call_timeout`](LockProviderBuilder::call_timeout), 5 s by
/// default) covering the connection checkout and the statement; a black-holed database yields
/// [`Error::is_timeout`] then, and the connection is closed, never returned to the pool. **A
/// timed-out acquire may have committed**: the lock is then held until its `at_most` ends.
///
/// ```no_run
/// use std::time::Duration;
/// use shedlock_core::{LockConfig, LockingTaskExecutor};
/// use shedlock_sqlx::PgLockProvider;
///
/// # async fn example() -> shedlock_core::Result<()> {
/// let provider = PgLockProvider::connect("postgres://app@db/app").await?;
/// provider.create_table_if_not_exists().await?;
/// let executor = LockingTaskExecutor::new(provider)?;
/// let cfg = LockConfig::new("nightly-report", Duration::from_secs(600))?;
/// executor.execute(&cfg, async { /* the job */ }).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PgLockProvider {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store<Postgres>,
    /// Statements for a table without (`[0]`) and with (`[1]`) the token column.
    sql: [Statements; 2],
    detect: Arc<str>,
    regclass: String,
    ddl: String,
}

struct Statements {
    acquire: Arc<str>,
    extend: Arc<str>,
    release: Arc<str>,
    holder: Arc<str>,
}

impl PgLockProvider {
    /// A provider over `pool` with Java ShedLock's defaults (table `shedlock`, 5 s call
    /// timeout); see [`builder`](Self::builder) for the settings.
    ///
    /// ```no_run
    /// use shedlock_sqlx::PgLockProvider;
    ///
    /// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
    /// let pool = PgLockProvider::pool_options().connect("postgres://app@db/app").await?;
    /// let provider = PgLockProvider::new(pool);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn new(pool: PgPool) -> Self {
        Self::from_parts(pool, Settings::defaults())
    }

    /// Starts configuring a provider over `pool`; finish with
    /// [`build`](LockProviderBuilder::build).
    pub fn builder(pool: PgPool) -> LockProviderBuilder<Postgres> {
        LockProviderBuilder::new(pool)
    }

    /// Pool options for a dedicated lock pool: at most 4 connections, one kept open, no ping on
    /// checkout (`test_before_acquire(false)`), a 5 s acquire timeout. Adjust and connect:
    ///
    /// ```no_run
    /// use shedlock_sqlx::PgLockProvider;
    ///
    /// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
    /// let pool = PgLockProvider::pool_options()
    ///     .max_connections(8)
    ///     .connect("postgres://app@db/app")
    ///     .await?;
    /// let provider = PgLockProvider::builder(pool).table("ops.locks").build()?;
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn pool_options() -> PgPoolOptions {
        PgPoolOptions::new()
            .max_connections(DEFAULT_POOL_SIZE)
            .min_connections(1)
            .test_before_acquire(false)
            .acquire_timeout(shedlock_core::DEFAULT_CALL_TIMEOUT)
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
            .map_err(|e| Error::backend("connect to Postgres", e))?;
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
            .map_err(|e| Error::backend("parse the Postgres URL", e))?;
        Ok(Self::new(pool))
    }

    fn from_parts(pool: PgPool, settings: Settings) -> Self {
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
        let statements = |token: bool| {
            let (set_tok, ins_col, ins_val, ret_tok, same) = if token {
                (
                    format!(", {tok} = GREATEST({tok} + 1, {NOW_MICROS})"),
                    format!(", {tok}"),
                    format!(", {NOW_MICROS}"),
                    tok.clone(),
                    format!("{tok} = $4"),
                )
            } else {
                (
                    String::new(),
                    String::new(),
                    String::new(),
                    "NULL::bigint".to_owned(),
                    format!("{at} = $4"),
                )
            };
            Statements {
                // $1 name, $2 at_most, $3 owner. Both parts see one snapshot: `acquired` updates
                // an expired row; `created` inserts only if no row was visible (and does nothing
                // if a concurrent acquire inserted it first). A held lock matches neither: no
                // write, no row lock.
                acquire: format!(
                    "WITH acquired AS (\
                     UPDATE {table} SET {by} = $3, {at} = {NOW}, {until} = {NOW} + $2{set_tok} \
                     WHERE {name} = $1 AND {until} <= {NOW} \
                     RETURNING {at}, {until}, {ret_tok}), \
                     created AS (\
                     INSERT INTO {table} ({name}, {until}, {at}, {by}{ins_col}) \
                     SELECT $1, {NOW} + $2, {NOW}, $3{ins_val} \
                     WHERE NOT EXISTS (SELECT 1 FROM {table} WHERE {name} = $1) \
                     ON CONFLICT ({name}) DO NOTHING \
                     RETURNING {at}, {until}, {ret_tok}) \
                     SELECT * FROM acquired UNION ALL SELECT * FROM created"
                )
                .into(),
                // $1 name, $2 at_most, $3 owner, $4 token (or locked_at).
                extend: format!(
                    "UPDATE {table} SET {until} = {NOW} + $2 \
                     WHERE {name} = $1 AND {by} = $3 AND {same} AND {until} > {NOW} \
                     RETURNING {until}"
                )
                .into(),
                // $1 name, $2 at_least, $3 owner, $4 token (or locked_at).
                // A release whose commit is lost only keeps the lock until its lock_until, so it
                // does not wait for a durable WAL flush (`synchronous_commit = off` for this
                // statement's own transaction only; acquires and extends stay durable).
                release: format!(
                    "UPDATE {table} SET {until} = GREATEST({NOW}, {at} + $2) \
                     WHERE {name} = $1 AND {by} = $3 AND {same} \
                     AND set_config('synchronous_commit', 'off', true) IS NOT NULL"
                )
                .into(),
                holder: format!(
                    "SELECT {by}, {at}, {until}, {ret_tok} FROM {table} WHERE {name} = $1 AND {until} > {NOW}"
                )
                .into(),
            }
        };
        let sql = [statements(false), statements(true)];
        let detect = "SELECT a.attname::text, format_type(a.atttypid, NULL), \
             CASE WHEN a.atttypid IN ('varchar'::regtype, 'bpchar'::regtype) AND a.atttypmod > 4 \
             THEN a.atttypmod - 4 END, \
             EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = a.attrelid AND i.indisunique \
             AND i.indpred IS NULL AND i.indnatts = 1 AND i.indkey[0] = a.attnum) \
             FROM pg_attribute a \
             WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped"
            .into();
        let ddl = ddl(&settings);
        Self {
            inner: Arc::new(Inner {
                store: Store::new(pool, settings),
                sql,
                detect,
                regclass: table,
                ddl,
            }),
        }
    }

    /// The pool this provider runs on.
    #[must_use]
    pub fn pool(&self) -> &PgPool {
        &self.inner.store.pool
    }

    /// The `CREATE TABLE IF NOT EXISTS` statement for the configured table and columns (the
    /// migration file's statement, for the default names).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let pool = shedlock_sqlx::sqlx::PgPool::connect_lazy("postgres://localhost/app")?;
    /// let provider = shedlock_sqlx::PgLockProvider::new(pool);
    /// assert!(provider.ddl().starts_with("CREATE TABLE IF NOT EXISTS \"shedlock\""));
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn ddl(&self) -> &str {
        &self.inner.ddl
    }

    /// Creates the lock table (with the fencing-token column) unless it exists. Needs the
    /// `CREATE` privilege; the schema of a schema-qualified table must exist.
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
    pub(crate) fn store(&self) -> &Store<Postgres> {
        &self.inner.store
    }

    pub(crate) async fn schema(&self, call: &Call) -> Result<Schema> {
        self.inner.store.schema(|| self.detect(call)).await
    }

    async fn detect(&self, call: &Call) -> Result<Schema> {
        let store = &self.inner.store;
        let s = &store.settings;
        let map = |e| self.map_error(e, "read the lock table's columns");
        let rows = store
            .run(call, map, |mut c| async move {
                let outcome = call
                    .timed(
                        sqlx::query(AssertSqlSafe(self.inner.detect.clone()))
                            .bind(&self.inner.regclass)
                            .fetch_all(c.conn()),
                    )
                    .await;
                c.settle(outcome, map)
            })
            .await?;
        if rows.is_empty() {
            return Err(self.missing_table(format!("relation {} not found", self.inner.regclass)));
        }
        let mut columns = Vec::with_capacity(rows.len());
        for row in &rows {
            let column: String = row.try_get(0).map_err(map)?;
            let ty: String = row.try_get(1).map_err(map)?;
            let len: Option<i32> = row.try_get(2).map_err(map)?;
            let unique: bool = row.try_get(3).map_err(map)?;
            columns.push((
                column,
                ty,
                len.and_then(|l| usize::try_from(l).ok()),
                unique,
            ));
        }
        check_columns(s, &columns)
    }

    fn statements(&self, schema: Schema) -> &Statements {
        &self.inner.sql[usize::from(schema.has_token)]
    }

    fn missing_table(&self, source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Error {
        Error::missing_table(
            self.inner.store.settings.table.to_string(),
            format!(
                "create it with PgLockProvider::create_table_if_not_exists() or the migration \
                 migrations/postgres/0001_shedlock.sql of shedlock-sqlx, i.e. run: {}",
                self.inner.ddl
            ),
            source,
        )
    }

    pub(crate) fn map_error(&self, error: sqlx::Error, what: &str) -> Error {
        let code = match &error {
            sqlx::Error::Database(db) => db.code().map(std::borrow::Cow::into_owned),
            _ => None,
        };
        match code.as_deref() {
            // undefined_table
            Some("42P01") => self.missing_table(error),
            // undefined_column, datatype_mismatch, invalid_column_reference (no unique index)
            Some("42703" | "42804" | "42P10") => Error::schema(
                format!(
                    "{} does not have the expected columns ({}); see PgLockProvider::ddl()",
                    self.inner.store.settings.table,
                    db_message(&error)
                ),
                Some(Box::new(error)),
            ),
            _ => Error::backend(what, error),
        }
    }

    /// Binds `record`'s identity in the table: its token (from [`Schema::record_token`]), or its
    /// `locked_at` without a token column.
    fn bind_identity<'q>(
        query: sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>,
        token: Option<i64>,
        record: &LockRecord,
    ) -> sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments> {
        match token {
            Some(token) => query.bind(token),
            None => query.bind(record.locked_at().naive_utc()),
        }
    }
}

/// One column of the lock table: name, type, `VARCHAR` length, alone in a unique index.
type Column = (String, String, Option<usize>, bool);

/// Checks the columns of the lock table against what the statements need.
fn check_columns(s: &Settings, columns: &[Column]) -> Result<Schema> {
    let find = |name: &str| columns.iter().find(|(c, ..)| c == name);
    let cols = &s.columns;
    let mut problems = Vec::new();
    let text = ["character varying", "text"];
    let mut name_max = None;
    let mut owner_max = None;
    match find(&cols.name) {
        None => problems.push(format!("column {} is missing", cols.name)),
        Some((_, ty, len, unique)) => {
            if !text.contains(&ty.as_str()) {
                problems.push(format!("column {} is {ty}, expected VARCHAR", cols.name));
            }
            if !unique {
                problems.push(format!(
                    "column {} is not the primary key (nor alone in a unique index)",
                    cols.name
                ));
            }
            name_max = *len;
        }
    }
    match find(&cols.locked_by) {
        None => problems.push(format!("column {} is missing", cols.locked_by)),
        Some((_, ty, len, _)) => {
            if !text.contains(&ty.as_str()) {
                problems.push(format!(
                    "column {} is {ty}, expected VARCHAR",
                    cols.locked_by
                ));
            }
            owner_max = *len;
        }
    }
    for time in [&cols.lock_until, &cols.locked_at] {
        match find(time) {
            None => problems.push(format!("column {time} is missing")),
            Some((_, ty, ..)) if ty == "timestamp without time zone" => {}
            Some((_, ty, ..)) => problems.push(format!(
                "column {time} is {ty}; it must be TIMESTAMP (without time zone) holding UTC \
                 wall-clock times, as in ShedLock's DDL"
            )),
        }
    }
    let has_token = match find(&cols.fencing_token) {
        None => false,
        Some((_, ty, ..)) if ty == "bigint" => true,
        Some((_, ty, ..)) => {
            problems.push(format!(
                "column {} is {ty}, expected BIGINT",
                cols.fencing_token
            ));
            false
        }
    };
    if !problems.is_empty() {
        return Err(Error::schema(
            format!(
                "{}: {}; see the DDL of PgLockProvider::ddl()",
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

fn db_message(error: &sqlx::Error) -> String {
    match error {
        sqlx::Error::Database(db) => db.message().to_owned(),
        other => other.to_string(),
    }
}

fn interval(d: Duration) -> PgInterval {
    PgInterval {
        months: 0,
        days: 0,
        microseconds: micros_ceil(d),
    }
}

fn decode_times(
    row: &PgRow,
    at: usize,
) -> std::result::Result<(NaiveDateTime, NaiveDateTime), sqlx::Error> {
    Ok((row.try_get(at)?, row.try_get(at + 1)?))
}

/// The DDL for `settings` (the migration file's, for the default names).
fn ddl(settings: &Settings) -> String {
    let q = Quote::Double;
    let t = settings.table.quoted(q);
    let c = settings.columns.quoted(q);
    format!(
        "CREATE TABLE IF NOT EXISTS {t} (\n    \
         {} VARCHAR({}) NOT NULL,\n    \
         {} TIMESTAMP NOT NULL,\n    \
         {} TIMESTAMP NOT NULL,\n    \
         {} VARCHAR(255) NOT NULL,\n    \
         {} BIGINT NOT NULL DEFAULT 0,\n    \
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

impl LockProviderBuilder<Postgres> {
    /// Checks the settings and builds the provider (no database access yet).
    ///
    /// # Errors
    ///
    /// [`Error::is_invalid_config`] for a table or column name that is not a plain identifier
    /// (optionally `schema.table`), two columns with one name, a `max_name_len` of 0 or above
    /// 10,000, or a zero call timeout.
    pub fn build(self) -> Result<PgLockProvider> {
        let (pool, settings) = self.into_parts()?;
        Ok(PgLockProvider::from_parts(pool, settings))
    }
}

#[async_trait]
impl LockProvider for PgLockProvider {
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
                            .bind(interval(at_most))
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
        let (locked_at, lock_until) = decode_times(&row, 0).map_err(map)?;
        let token: Option<i64> = row.try_get(2).map_err(map)?;
        Ok(Some(
            LockRecord::new(name, owner, locked_at.and_utc(), lock_until.and_utc())
                .with_fencing_token(token),
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
                    .bind(interval(at_most))
                    .bind(record.owner());
                let query = Self::bind_identity(query, token, record);
                let outcome = call.timed(query.fetch_optional(c.conn())).await;
                c.settle(outcome, map)
            })
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let lock_until: NaiveDateTime = row.try_get(0).map_err(map)?;
        Ok(Some(record.clone().with_lock_until(lock_until.and_utc())))
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
                    .bind(interval(at_least))
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
        let (locked_at, lock_until) = decode_times(&row, 1).map_err(map)?;
        let token: Option<i64> = row.try_get(3).map_err(map)?;
        Ok(Some(
            LockRecord::new(name, owner, locked_at.and_utc(), lock_until.and_utc())
                .with_fencing_token(token),
        ))
    }

    fn max_name_len(&self) -> usize {
        self.inner.store.settings.max_name_len
    }
}

impl fmt::Debug for PgLockProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.inner.store.settings;
        f.debug_struct("PgLockProvider")
            .field("table", &s.table.to_string())
            .field("max_name_len", &s.max_name_len)
            .field("call_timeout", &s.call_timeout)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(
        builder: impl FnOnce(LockProviderBuilder<Postgres>) -> LockProviderBuilder<Postgres>,
    ) -> PgLockProvider {
        let pool = PgPool::connect_lazy("postgres://localhost/none").expect("a valid URL");
        builder(PgLockProvider::builder(pool))
            .build()
            .expect("valid settings")
    }

    #[tokio::test]
    async fn names_are_quoted_and_never_spliced() {
        let p = provider(|b| b.table("ops.locks").name_column("Lock_Name"));
        for s in &p.inner.sql {
            for sql in [&s.acquire, &s.extend, &s.release, &s.holder] {
                assert!(sql.contains("\"ops\".\"locks\""), "{sql}");
                assert!(sql.contains("\"Lock_Name\" = $1"), "{sql}");
            }
        }
        assert!(!p.inner.sql[0].acquire.contains("fencing_token"));
        assert!(p.inner.sql[1].acquire.contains("\"fencing_token\""));
    }

    #[tokio::test]
    async fn bad_identifiers_are_rejected_before_any_sql() {
        let pool = PgPool::connect_lazy("postgres://localhost/none").expect("a valid URL");
        let cases: [fn(LockProviderBuilder<Postgres>) -> LockProviderBuilder<Postgres>; 6] = [
            |b| b.table("shed lock"),
            |b| b.table("a.b.c"),
            |b| b.name_column("name\"; DROP TABLE x; --"),
            |b| b.locked_by_column(""),
            |b| b.lock_until_column("locked_at"),
            |b| b.max_name_len(0),
        ];
        for case in cases {
            let err = case(PgLockProvider::builder(pool.clone()))
                .build()
                .expect_err("must be rejected");
            assert!(err.is_invalid_config(), "{err}");
        }
    }

    #[tokio::test]
    async fn the_migration_file_holds_the_built_in_ddl() {
        let pool = PgPool::connect_lazy("postgres://localhost/none").expect("a valid URL");
        crate::store::assert_same_ddl(
            "postgres/0001_shedlock.sql",
            PgLockProvider::new(pool).ddl(),
        );
    }
}
