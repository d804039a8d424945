//! [`SqliteLockProvider`]: locks in an SQLite table, for processes on one host.

use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, Utc};
use shedlock_core::{Error, Result};
use sqlx::sqlite::{Sqlite, SqliteArguments, SqliteConnectOptions, SqliteQueryResult, SqliteRow};
use sqlx::{AssertSqlSafe, Row};

use crate::builder::ColumnNames;
use crate::connect::ConnectSettings;
use crate::dialect::{
    Attempt, ClaimFire, Dialect, Fault, LAST_FIRE, Map, Role, Seen, StateKind, Statements,
    not_paused, pause_read, release_run_state,
};
use crate::ident::{Quote, Reserved};
use crate::link::statement;
use crate::link::{Call, Link, millis_ceil};
use crate::provider::{Provider, returning_statements};
use crate::provider_types::sql_lock_provider;

/// The text format of the time columns: UTC, milliseconds, sortable as text.
const FORMAT: &str = "%Y-%m-%d %H:%M:%f";
/// The same format for chrono.
pub(crate) const CHRONO_FORMAT: &str = "%Y-%m-%d %H:%M:%S%.3f";
/// SQLite's "now". It is the same value for every use within one statement.
pub(crate) const NOW: &str = "strftime('%Y-%m-%d %H:%M:%f', 'now')";
/// "now" in microseconds since the Unix epoch, with millisecond precision. It seeds tokens.
const NOW_MICROS: &str = "((CAST(strftime('%s', 'now') AS INTEGER) * 1000 \
     + CAST(substr(strftime('%f', 'now'), 4) AS INTEGER)) * 1000)";

sql_lock_provider! {
/// A [`LockProvider`](shedlock_core::provider::LockProvider) on an SQLite table, for replicas **on
/// one host** sharing a database file. SQLite's clock is that host's clock.
///
/// # Table
///
/// Create it with [`create_table_if_not_exists`](Self::create_table_if_not_exists). Or run the same
/// DDL from this crate's migrations, named as sqlx-cli names them:
/// `migrations/sqlite/0001_shedlock.sql`, `0002_last_fire.sql`, `0003_job_state.sql`,
/// `0005_pause.sql` and `0006_trigger.sql`.
///
/// ```sql
/// CREATE TABLE IF NOT EXISTS shedlock (
///     name VARCHAR(64) NOT NULL,
///     lock_until TEXT NOT NULL,
///     locked_at TEXT NOT NULL,
///     locked_by VARCHAR(255) NOT NULL,
///     fencing_token INTEGER NOT NULL DEFAULT 0,
///     last_fire TEXT NULL,
///     last_run_fire TEXT NULL,
///     last_run_by TEXT NULL,
///     last_run_started TEXT NULL,
///     last_run_ended TEXT NULL,
///     last_run_outcome TEXT NULL,
///     last_run_error TEXT NULL,
///     last_success TEXT NULL,
///     consecutive_failures INTEGER NOT NULL DEFAULT 0,
///     paused_at TEXT NULL,
///     paused_until TEXT NULL,
///     paused_by TEXT NULL,
///     paused_reason TEXT NULL,
///     last_action TEXT NULL,
///     last_action_by TEXT NULL,
///     last_action_at TEXT NULL,
///     trigger_id INTEGER NULL,
///     trigger_at TEXT NULL,
///     trigger_expires TEXT NULL,
///     trigger_by TEXT NULL,
///     trigger_taken_by TEXT NULL,
///     trigger_taken_at TEXT NULL,
///     PRIMARY KEY (name)
/// )
/// ```
///
/// Times are UTC text, `YYYY-MM-DD HH:MM:SS.SSS`, read from SQLite's clock inside each statement
/// with `strftime('%Y-%m-%d %H:%M:%f', 'now')`. Durations are rounded up to whole milliseconds.
/// SQLite does not enforce `VARCHAR` lengths, so the provider's
/// [`max_name_len`](crate::LockProviderBuilder::max_name_len) (64) is the limit. A table without
/// `fencing_token` works, with tokens `None`. On first use the provider reads the table's columns
/// once. A missing table fails with
/// [`Error::is_missing_table`](shedlock_core::Error::is_missing_table), one that does not fit with
/// [`Error::is_schema`](shedlock_core::Error::is_schema).
///
/// A fire claim ([`claim_fire`](shedlock_core::provider::LockProvider::claim_fire)) is acquire's
/// upsert with the fire's conditions added, one statement when it claims. Any other reply reads the
/// row with a second statement, as SQLite's `RETURNING` returns only rows it wrote. `last_fire`
/// holds the same UTC text. A table without it answers
/// [`Error::is_unsupported`](shedlock_core::Error::is_unsupported). Add it with
/// `migrations/sqlite/0002_last_fire.sql`. Where the table has the
/// [pause columns](crate#pauses), the upsert also needs no pause that holds, and the second
/// statement reads the pause, which answers
/// [`Paused`](shedlock_core::provider::FireClaim::Paused).
///
/// # Statements
///
/// Each call is one statement on a connection given back at once. An acquire is one `INSERT … ON
/// CONFLICT DO UPDATE … WHERE lock_until <= now RETURNING …`. It inserts a missing row, takes an
/// expired one, and changes nothing when the lock is held. Like every write in SQLite, it takes the
/// database's write lock for that moment. Use WAL mode (`SqliteJournalMode::Wal`) so readers do not
/// wait.
///
/// A statement that finds the write lock taken by another process's write transaction waits until
/// the connection's busy timeout or the call timeout ends, whichever comes first. The busy timeout,
/// `SqliteConnectOptions::busy_timeout`, is sqlx's default 5 s, which [`connect`](Self::connect)
/// keeps. The call timeout defaults to
/// [`DEFAULT_CALL_TIMEOUT`](shedlock_core::provider::DEFAULT_CALL_TIMEOUT), also 5 s. The busy
/// timeout gives [`Error::is_backend`](shedlock_core::Error::is_backend) with SQLite's "database is
/// locked". The call timeout gives [`Error::is_timeout`](shedlock_core::Error::is_timeout) and
/// closes its connection. With both defaults, the call timeout usually ends it, because it started
/// first. For SQLite's own error, pass [`new`](Self::new) or [`builder`](Self::builder) a pool with
/// a shorter busy timeout.
///
/// # Job state
///
/// [`release_run`](shedlock_core::provider::LockProvider::release_run) is the release's one
/// `UPDATE`, with its guard, also setting the [job state](crate#job-state) columns.
/// `last_success` and `consecutive_failures` are `CASE`s on the outcome. A table without the
/// columns answers [`Error::is_unsupported`](shedlock_core::Error::is_unsupported). Run
/// `migrations/sqlite/0003_job_state.sql`, or what
/// [`missing_ddl`](shedlock_core::admin::LockAdmin::missing_ddl) prints, then restart the service.
///
/// # Fencing tokens
///
/// Each acquisition sets `fencing_token = max(fencing_token + 1, now in µs since 1970)`, so tokens
/// strictly increase per name. A row deleted by hand restarts from the clock, in microseconds with
/// millisecond resolution. That is above every earlier token if the row is recreated in a later
/// millisecond than the last acquisition, the clock was not set back, and the lock was not taken
/// more than a thousand times per millisecond on average. Within the same millisecond, SQLite's
/// clock cannot tell the two moments apart.
///
/// # Connections and timeouts
///
/// Use a file database, because an in-memory database lives only as long as the provider. As
/// SQLite runs one write at a time, the default [`DEFAULT_POOL_SIZE`](crate::DEFAULT_POOL_SIZE) or
/// `from_url(url).max_connections(n)` with a few connections is plenty. A timed-out acquire may
/// have committed. Having no server whose restart could leave idle connections dead, this provider
/// retries nothing, unlike the Postgres and MySQL ones. SQLite's errors, `SQLITE_BUSY` included,
/// are reported as they are. The repository's `docs/sql-stores.md` describes connections and
/// deadlines.
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
    pub struct SqliteLockProvider(Sqlite);
    options: sqlx::sqlite::SqliteConnectOptions,
    url: "sqlite://locks.db?mode=rwc",
    offline url: "sqlite::memory:",
    fn pool_options;
}

impl Dialect for Sqlite {
    const PROVIDER: &'static str = "SqliteLockProvider";
    type Extra = ();

    fn statements(table: &str, cols: &ColumnNames, token: bool) -> Statements<()> {
        let (name, until, at, by, tok) = cols.each();
        let fire = &Self::QUOTE.quote(LAST_FIRE);
        let plus = |param: &str| format!("strftime('{FORMAT}', 'now', {param})");
        let (ins_col, ins_val, set_tok, ret_tok, same, look_tok) = if token {
            (
                format!(", {tok}"),
                format!(", {NOW_MICROS}"),
                format!(", {tok} = max({tok} + 1, excluded.{tok})"),
                tok.to_owned(),
                format!("{tok} = ?4"),
                format!("t.{tok}"),
            )
        } else {
            (
                String::new(),
                String::new(),
                String::new(),
                "NULL".to_owned(),
                format!("{at} = ?4"),
                "NULL".to_owned(),
            )
        };
        Statements {
            // ?1 at_most modifier, ?2 name, ?3 owner. In DO UPDATE, bare column names are the
            // existing row's values; the WHERE makes a held lock change nothing.
            acquire: format!(
                "INSERT INTO {table} ({name}, {until}, {at}, {by}{ins_col}) \
                 VALUES (?2, {}, {NOW}, ?3{ins_val}) \
                 ON CONFLICT ({name}) DO UPDATE SET {until} = excluded.{until}, {at} = excluded.{at}, \
                 {by} = excluded.{by}{set_tok} \
                 WHERE {until} <= excluded.{at} \
                 RETURNING {at}, {until}, {ret_tok}",
                plus("?1")
            )
            .into(),
            // ?1 at_most modifier, ?2 name, ?3 owner, ?4 token (or locked_at).
            extend: format!(
                "UPDATE {table} SET {until} = {} \
                 WHERE {name} = ?2 AND {by} = ?3 AND {same} AND {until} > {NOW} RETURNING {until}",
                plus("?1")
            )
            .into(),
            // ?1 at_least modifier, ?2 name, ?3 owner, ?4 token (or locked_at).
            release: format!(
                "UPDATE {table} SET {until} = max({NOW}, strftime('{FORMAT}', {at}, ?1)) \
                 WHERE {name} = ?2 AND {by} = ?3 AND {same}"
            )
            .into(),
            // ?1 at_least modifier, ?2 name, ?3 owner, ?4 token (or locked_at), ?5 fire, ?6
            // outcome kind, ?7 error text: the release with the job state in the same statement.
            release_run: format!(
                "UPDATE {table} SET {until} = max({NOW}, strftime('{FORMAT}', {at}, ?1)), {} \
                 WHERE {name} = ?2 AND {by} = ?3 AND {same}",
                release_run_state::<Self>(cols, "", "?5", ["?6"; 3], "?7")
            )
            .into(),
            // ?1 name.
            holder: format!(
                "SELECT {by}, {at}, {until}, {ret_tok} FROM {table} WHERE {name} = ?1 AND {until} > {NOW}"
            )
            .into(),
            // ?1 at_most modifier, ?2 name, ?3 owner, ?4 F, ?5 next (text, as the columns).
            // Acquire's upsert with the fire's conditions: the window on the inserted values
            // (outside it there is nothing to insert or update), the free lock, the older
            // recorded fire and, with the pause columns, no pause that holds on the update. It
            // returns the row only if it claimed; otherwise nothing was written and `look` reads
            // what stopped it.
            claims: [false, true].map(|pause| {
                let unpaused = if pause {
                    format!(" AND {}", not_paused::<Self>(&format!("excluded.{at}")))
                } else {
                    String::new()
                };
                format!(
                    "INSERT INTO {table} ({name}, {until}, {at}, {by}, {fire}{ins_col}) \
                     SELECT ?2, {}, {NOW}, ?3, ?4{ins_val} WHERE ?4 <= {NOW} AND {NOW} < ?5 \
                     ON CONFLICT ({name}) DO UPDATE SET {until} = excluded.{until}, {at} = excluded.{at}, \
                     {by} = excluded.{by}, {fire} = excluded.{fire}{set_tok} \
                     WHERE {until} <= excluded.{at} AND ({fire} IS NULL OR {fire} < excluded.{fire})\
                     {unpaused} \
                     RETURNING {at}, {until}, {ret_tok}",
                    plus("?1")
                )
                .into()
            }),
            // ?1 name. The database's now, the recorded fire and the lock row, then the pause.
            looks: [false, true].map(|pause| {
                format!(
                    "SELECT {NOW}, t.{fire}, t.{until}, t.{by}, t.{at}, {look_tok}{} \
                     FROM (SELECT 1) AS one LEFT JOIN {table} AS t ON t.{name} = ?1",
                    pause_read::<Self>("t.", pause)
                )
                .into()
            }),
            extra: (),
        }
    }

    const NOW: &'static str = NOW;
    const NULL_TOKEN: &'static str = "NULL";
    const NULL_TIME: &'static str = "NULL";
    fn param(n: usize) -> String {
        format!("?{n}")
    }

    /// UTC text, `YYYY-MM-DD HH:MM:SS.SSS`, what SQLite's own date functions produce.
    const TIME_COLUMN: &'static str = "TEXT NOT NULL";
    const TOKEN_COLUMN: &'static str = "INTEGER NOT NULL DEFAULT 0";
    /// Text has no length in SQLite. Error texts are capped before they are written.
    fn text_column(_len: usize) -> String {
        "TEXT NULL".to_owned()
    }
    const COUNT_COLUMN: &'static str = "INTEGER NOT NULL DEFAULT 0";
    const ID_COLUMN: &'static str = "INTEGER NULL";
    const BIGINT: &'static str = "INTEGER";
    /// The same text as the other time columns, `NULL` until a fire is recorded.
    const LAST_FIRE_COLUMN: &'static str = "TEXT NULL";
    const TIME_PRECISION_MICROS: i64 = 1_000;

    /// A date modifier (`+600.500 seconds`).
    type Span = String;
    /// An SQLite date modifier adding `d`, rounded up to milliseconds: `+600.500 seconds`.
    fn now_plus(param: &str) -> String {
        format!("strftime('{FORMAT}', 'now', {param})")
    }

    fn next_token(tok: &str) -> String {
        format!("max({tok} + 1, {NOW_MICROS})")
    }

    fn span(d: Duration) -> String {
        let millis = millis_ceil(d);
        format!("+{}.{:03} seconds", millis / 1_000, millis % 1_000)
    }

    /// The columns' text.
    type Time = String;
    fn time(t: DateTime<Utc>) -> String {
        t.format(CHRONO_FORMAT).to_string()
    }

    /// Reads a time column written by SQLite's date functions.
    fn read_time(row: &SqliteRow, index: usize, _map: &Map<'_>) -> Result<DateTime<Utc>> {
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

    fn read_opt_time(
        row: &SqliteRow,
        index: usize,
        map: &Map<'_>,
    ) -> Result<Option<DateTime<Utc>>> {
        let text: Option<String> = row
            .try_get(index)
            .map_err(|e| Error::backend("read a lock row", e))?;
        match text {
            Some(_) => Self::read_time(row, index, map).map(Some),
            None => Ok(None),
        }
    }

    const DATABASE: &'static str = "SQLite";
    const SCHEMES: &'static [&'static str] = &["sqlite"];
    const PLAIN_PATHS: bool = true;
    const URL_FORM: &'static str = "sqlite:///path/to/file.db?mode=rwc, or sqlite::memory:";
    /// sqlx names a `sqlite::memory:` database `file:sqlx-in-memory-…`, with a shared cache. Any
    /// `mode=memory` URI is one too.
    fn keeps_anchor(options: &SqliteConnectOptions) -> bool {
        let name = options.get_filename().to_string_lossy();
        name == ":memory:"
            || name.starts_with("file:sqlx-in-memory-")
            || name.contains("mode=memory")
    }

    fn target(options: &SqliteConnectOptions) -> String {
        format!("SQLite database {}", options.get_filename().display())
    }
    fn connect_settings(
        options: SqliteConnectOptions,
        settings: &ConnectSettings,
    ) -> Result<SqliteConnectOptions> {
        if settings.is_empty() {
            return Ok(options);
        }
        Err(Error::invalid_config(
            "SQLite opens a local file: it has no TLS and no users; remove ca_file, \
             client_cert, username and password",
        ))
    }

    fn rows_affected(result: &SqliteQueryResult) -> u64 {
        result.rows_affected()
    }

    const MIGRATIONS: &'static str = "sqlite";
    const RESERVED: Reserved = Reserved::Sqlite;
    fn classify(error: &sqlx::Error) -> Option<Fault> {
        let sqlx::Error::Database(db) = error else {
            return None;
        };
        let message = db.message();
        if message.starts_with("no such table") {
            Some(Fault::MissingTable)
        } else if message.starts_with("no such column")
            || message.contains("does not match any PRIMARY KEY or UNIQUE constraint")
        {
            Some(Fault::Columns(message.to_owned()))
        } else {
            None
        }
    }

    /// Name and declared type.
    type TableColumn = (String, String);
    /// The table's columns (`pragma_table_info`), then those of each unique, non-partial index
    /// (`pragma_index_list`, `pragma_index_info`). A schema, an attached database's name, is the
    /// pragma functions' second argument.
    async fn detect<'a>(
        link: &'a Link<Self>,
        call: &'a Call,
        map: &'a Map<'a>,
    ) -> Result<Option<(Vec<Self::TableColumn>, bool)>> {
        let s = &link.settings;
        let schema = s.table.schema.as_deref();
        let pragma = |function: &str, select: &str, filter: &str| {
            let args = if schema.is_some() { "?1, ?2" } else { "?1" };
            format!("SELECT {select} FROM {function}({args}){filter}")
        };
        let columns_sql = pragma("pragma_table_info", "name, type", "");
        let indexes_sql = pragma(
            "pragma_index_list",
            "name",
            " WHERE \"unique\" = 1 AND partial = 0",
        );
        let index_columns_sql = pragma("pragma_index_info", "name", "");
        let (columns_sql, indexes_sql, index_columns_sql) =
            (&columns_sql, &indexes_sql, &index_columns_sql);
        link.run(call, |mut c| async move {
            let query = sqlx::query_as::<_, (String, String)>(AssertSqlSafe(columns_sql.clone()))
                .bind(&s.table.table)
                .bind_schema(schema);
            let columns = statement!(c, query, map, fetch_all)?;
            if columns.is_empty() {
                return Ok(None);
            }
            let query = sqlx::query_scalar::<_, String>(AssertSqlSafe(indexes_sql.clone()))
                .bind(&s.table.table)
                .bind_schema(schema);
            let indexes = statement!(c, query, map, fetch_all)?;
            let mut unique = false;
            for index in indexes {
                let query =
                    sqlx::query_scalar::<_, String>(AssertSqlSafe(index_columns_sql.clone()))
                        .bind(&index)
                        .bind_schema(schema);
                let columns = statement!(c, query, map, fetch_all)?;
                if let [only] = columns.as_slice()
                    && only.eq_ignore_ascii_case(&s.columns.name)
                {
                    unique = true;
                }
            }
            Ok(Some((columns, unique)))
        })
        .await
    }

    /// SQLite column names are case-insensitive.
    const QUOTE: Quote = Quote::Double;
    fn is_column(column: &Self::TableColumn, name: &str) -> bool {
        column.0.eq_ignore_ascii_case(name)
    }

    /// SQLite does not enforce `VARCHAR` lengths: `max_name_len` is the limit.
    fn column_len(_column: &Self::TableColumn) -> Option<usize> {
        None
    }

    /// SQLite types are affinities: a text column is any column without a numeric one.
    fn column_problem(column: &Self::TableColumn, role: Role, name: &str) -> Option<String> {
        let ty = column.1.to_ascii_uppercase();
        let numeric = ["INT", "REAL", "FLOA", "DOUB"]
            .iter()
            .any(|affinity| ty.contains(affinity));
        let expected = match role {
            Role::FencingToken | Role::State(StateKind::Count | StateKind::Id) => {
                return (!ty.contains("INT"))
                    .then(|| format!("column {name} is {ty}, expected INTEGER"));
            }
            Role::LockUntil | Role::LockedAt | Role::LastFire | Role::State(StateKind::Time) => {
                "text (UTC `YYYY-MM-DD HH:MM:SS.SSS`)"
            }
            Role::Name | Role::LockedBy | Role::State(_) => "text",
        };
        numeric.then(|| format!("column {name} is {ty}, expected {expected}"))
    }

    returning_statements!();

    /// The claim's upsert, and where it did not claim, a look at the row. SQLite's `RETURNING`
    /// returns only rows it wrote.
    async fn claim_fire<'a>(mut at: Attempt<'a, Self>, args: ClaimFire<'a>) -> Result<Seen> {
        let map = at.map;
        if let Some(row) = Provider::<Self>::claim_returning(&mut at, args).await? {
            let record =
                Provider::<Self>::returned_record(&row, 0, args.lock.name, args.lock.owner, map)?;
            return Ok(Seen::Won(record));
        }
        let schema = args.lock.schema;
        let query = sqlx::query(AssertSqlSafe(at.sql.look(schema).clone())).bind(args.lock.name);
        let row = statement!(at.c, query, map, fetch_one)?;
        Provider::<Self>::seen_row(&row, args.lock.name, map, schema.has_pause.then_some(6))
    }
}

/// Binds the schema argument of a pragma function, when the table name has one.
trait BindSchema<'q>: Sized {
    fn bind_schema(self, schema: Option<&'q str>) -> Self;
}

impl<'q, O> BindSchema<'q> for sqlx::query::QueryAs<'q, Sqlite, O, SqliteArguments> {
    fn bind_schema(self, schema: Option<&'q str>) -> Self {
        match schema {
            Some(schema) => self.bind(schema),
            None => self,
        }
    }
}

impl<'q, O> BindSchema<'q> for sqlx::query::QueryScalar<'q, Sqlite, O, SqliteArguments> {
    fn bind_schema(self, schema: Option<&'q str>) -> Self {
        match schema {
            Some(schema) => self.bind(schema),
            None => self,
        }
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    #[tokio::test]
    async fn connect_settings_are_refused_where_they_mean_nothing() {
        let e = crate::SqliteLockProvider::from_url("sqlite::memory:")
            .ca_file("ca.pem")
            .build()
            .expect_err("SQLite has no TLS");
        assert!(
            e.is_invalid_config() && e.to_string().contains("no TLS"),
            "{e}"
        );
        let pool = sqlx::SqlitePool::connect_lazy("sqlite::memory:").expect("a lazy pool");
        let e = crate::SqliteLockProvider::builder(pool)
            .password("s3cret")
            .build()
            .expect_err("a pool has its own options");
        assert!(e.to_string().contains("that pool's connect options"), "{e}");
        let builder = crate::SqliteLockProvider::from_url("sqlite::memory:").password("s3cret");
        assert!(!format!("{builder:?}").contains("s3cret"), "{builder:?}");
    }

    #[test]
    fn modifiers_round_up_to_milliseconds() {
        assert_eq!(
            Sqlite::span(Duration::from_millis(600_500)),
            "+600.500 seconds"
        );
        assert_eq!(Sqlite::span(Duration::from_micros(1)), "+0.001 seconds");
        assert_eq!(Sqlite::span(Duration::ZERO), "+0.000 seconds");
    }

    #[test]
    fn the_migration_files_hold_the_built_in_ddl() {
        crate::provider::assert_migrations::<Sqlite>();
    }
}
