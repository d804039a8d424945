//! [`MySqlLockProvider`]: locks in a MySQL or MariaDB table, on the database server's clock.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use chrono::{DateTime, Utc};
use shedlock_core::{
    Error, Result,
    provider::{LockRecord, fire_decision},
};
use sqlx::mysql::{
    MySql, MySqlConnectOptions, MySqlConnection, MySqlDatabaseError, MySqlQueryResult, MySqlRow,
    MySqlSslMode,
};
use sqlx::{AssertSqlSafe, Executor as _, Row};

use crate::builder::ColumnNames;
use crate::connect::ConnectSettings;
use crate::dialect::{
    Acquire, Attempt, ClaimFire, Dialect, Extend, Fault, LAST_FIRE, Map, Role, Seen, StateKind,
    Statements, not_paused, pause_read, release_run_state, seen_holder, seen_pause,
};
use crate::ident::{Quote, Reserved};
use crate::link::statement;
use crate::link::{Call, Checkout, Link, Schema, millis_ceil, utc_from_micros};
use crate::provider::Provider;
use crate::provider_types::sql_lock_provider;

/// Runs the statement with `time_zone = '+00:00'`, whatever the session's zone. MariaDB reads the
/// executable comment (`SET STATEMENT … FOR`, MariaDB ≥ 10.1.2). MySQL ignores it.
pub(crate) const PIN: &str = "/*M!100102 SET STATEMENT time_zone = '+00:00' FOR */ ";
/// The same for MySQL ≥ 8.0, as an optimizer hint after the statement's first keyword. MariaDB
/// treats it as a comment.
pub(crate) const HINT: &str = "/*+ SET_VAR(time_zone = '+00:00') */";
/// The database's "now" in UTC, with the millisecond precision of ShedLock's `TIMESTAMP(3)`.
pub(crate) const NOW: &str = "UTC_TIMESTAMP(3)";
/// [`NOW`] in microseconds since the Unix epoch. It is pure date arithmetic, with no time-zone
/// conversion.
const NOW_MICROS: &str = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(3))";
/// The statement's start in microseconds since the Unix epoch, which seeds fencing tokens.
const SEED_MICROS: &str = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))";
/// The session setting of the dedicated pool's connections.
const SET_UTC: &str = "SET time_zone = '+00:00'";

sql_lock_provider! {
/// A [`LockProvider`](shedlock_core::provider::LockProvider) on a MySQL or MariaDB table of Java
/// ShedLock's layout (`shedlock(name, lock_until, locked_at, locked_by)`), using a `fencing_token`
/// column where the table has one.
///
/// # Table
///
/// Create it with [`create_table_if_not_exists`](Self::create_table_if_not_exists). Or run the same
/// DDL from this crate's migrations, named as sqlx-cli names them:
/// `migrations/mysql/0001_shedlock.sql`, `0002_last_fire.sql`, `0003_job_state.sql`,
/// `0005_pause.sql` and `0006_trigger.sql`.
///
/// ```sql
/// CREATE TABLE IF NOT EXISTS shedlock (
///     name VARCHAR(64) NOT NULL,
///     lock_until TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
///     locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
///     locked_by VARCHAR(255) NOT NULL,
///     fencing_token BIGINT NOT NULL DEFAULT 0,
///     last_fire TIMESTAMP(3) NULL DEFAULT NULL,
///     last_run_fire TIMESTAMP(3) NULL DEFAULT NULL,
///     last_run_by VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
///     last_run_started TIMESTAMP(3) NULL DEFAULT NULL,
///     last_run_ended TIMESTAMP(3) NULL DEFAULT NULL,
///     last_run_outcome VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
///     last_run_error VARCHAR(1000) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
///     last_success TIMESTAMP(3) NULL DEFAULT NULL,
///     consecutive_failures INT NOT NULL DEFAULT 0,
///     paused_at TIMESTAMP(3) NULL DEFAULT NULL,
///     paused_until TIMESTAMP(3) NULL DEFAULT NULL,
///     paused_by VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
///     paused_reason VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
///     last_action VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
///     last_action_by VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
///     last_action_at TIMESTAMP(3) NULL DEFAULT NULL,
///     trigger_id BIGINT NULL,
///     trigger_at TIMESTAMP(3) NULL DEFAULT NULL,
///     trigger_expires TIMESTAMP(3) NULL DEFAULT NULL,
///     trigger_by VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
///     trigger_taken_by VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
///     trigger_taken_at TIMESTAMP(3) NULL DEFAULT NULL,
///     PRIMARY KEY (name)
/// ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
/// ```
///
/// The binary collation makes lock names compare exactly: `Report` and `report` are two locks.
/// `utf8mb4` stores any Unicode name. Java ShedLock's own DDL works too, without tokens. With a
/// case-insensitive collation, the provider logs a warning once.
///
/// On first use the provider reads the table's columns once. A missing table fails with
/// [`Error::is_missing_table`](shedlock_core::Error::is_missing_table), one that does not fit with
/// [`Error::is_schema`](shedlock_core::Error::is_schema), and a failed check is retried on the next
/// call. Time columns must be `TIMESTAMP(3)` or `DATETIME(3)` or finer. `locked_at` must not have
/// `ON UPDATE`.
///
/// On MySQL, and on MariaDB before 11.5, `TIMESTAMP` columns cannot hold a `lock_until` after
/// 2038-01-19 03:14:07 UTC. `DATETIME(3)` columns have no such limit and work the same.
///
/// # Time
///
/// Every decision compares against the server's clock, `UTC_TIMESTAMP(3)`, inside the statement
/// that decides. `TIMESTAMP` columns convert through the session's `time_zone`, so the provider
/// runs each statement with `time_zone = '+00:00'`, whatever the server's default or the session's
/// setting. MariaDB gets it through `SET STATEMENT time_zone = '+00:00' FOR …`, MySQL 8 through the
/// `SET_VAR` hint. The provider's own connections and a [`pool_options`](Self::pool_options) pool
/// also set it on every new connection, which covers servers that know neither, such as MySQL 5.7.
/// Give those a pool whose sessions are in UTC, as sqlx's default `timezone` option does.
///
/// Values are therefore UTC wall-clock times, as Java ShedLock writes them with `usingDbTime()`.
/// **Java services sharing the table must pin their sessions to UTC too**, with Connector/J's
/// `connectionTimeZone=UTC&forceConnectionTimeZoneToSession=true` or the server's
/// `default-time-zone='+00:00'`. Durations are rounded up to whole milliseconds.
///
/// # Statements
///
/// Each call runs in autocommit on a pooled connection given back at once.
///
/// An acquire is one `UPDATE … WHERE name = ?` that takes the row only if the lock has expired, and
/// otherwise sets each column to itself, so a held lock writes nothing. It reports through
/// `LAST_INSERT_ID(…)` whether it took the row. Only a missing row takes a second statement, an
/// `INSERT … ON DUPLICATE KEY UPDATE` that changes nothing on a duplicate. Unlike `INSERT IGNORE`,
/// it keeps errors such as "data too long" visible, and it gives no duplicate-key error. So the
/// next acquire recreates a row deleted by hand. A won acquire on a table with tokens reads the row
/// back, as MySQL has no `RETURNING`: two statements on an existing row, three on a missing one.
///
/// # Fire claims
///
/// [`claim_fire`](shedlock_core::provider::LockProvider::claim_fire) first reads the database's now
/// and the row in a consistent read without a row lock, which answers every fire it cannot claim.
/// A conditional `UPDATE`, or for a missing row an `INSERT` inside the window, then takes a
/// claimable fire. Either checks everything again on the row's latest version, so of racing
/// replicas exactly one claims. A won claim on a table with tokens reads the row back. `last_fire`
/// is `TIMESTAMP(3)`, so fires are kept and compared exactly, in whole milliseconds. A table
/// without it answers [`Error::is_unsupported`](shedlock_core::Error::is_unsupported). Add it with
/// `migrations/mysql/0002_last_fire.sql` and restart the service.
///
/// Where the table has the [pause columns](crate#pauses), the read also reads the pause, which
/// answers [`Paused`](shedlock_core::provider::FireClaim::Paused), and the `UPDATE` also needs no
/// pause that holds, so a pause committed between the two is honoured (the read then runs again).
/// A `paused_until` after 2038-01-19 does not fit a `TIMESTAMP(3)` column, as for `lock_until`.
///
/// # Job state
///
/// [`release_run`](shedlock_core::provider::LockProvider::release_run) is the release's one
/// `UPDATE`, with its guard, also setting the [job state](crate#job-state) columns.
/// `last_success` and `consecutive_failures` are `CASE`s on the outcome. A table without the
/// columns answers [`Error::is_unsupported`](shedlock_core::Error::is_unsupported). Run
/// `migrations/mysql/0003_job_state.sql`, or what
/// [`missing_ddl`](shedlock_core::admin::LockAdmin::missing_ddl) prints, then restart the service.
///
/// # Fencing tokens
///
/// Each acquisition sets a greater token (see [Fencing tokens](crate#fencing-tokens)).
///
/// # Connections, timeouts and failures
///
/// Built from a URL ([`connect`](Self::connect), [`from_url`](Self::from_url)), it opens
/// connections of its own. Over a sqlx pool of your own ([`new`](Self::new),
/// [`builder`](Self::builder)), start from [`pool_options`](Self::pool_options). A call that meets
/// a connection a server restart or `KILL` left dead runs again on another, but an acquire whose
/// reply was lost fails. The repository's `docs/sql-stores.md` explains pools, restarts, lost
/// replies and deadlines, and lists the MySQL and MariaDB errors that mark a connection as lost.
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
    pub struct MySqlLockProvider(MySql);
    options: sqlx::mysql::MySqlConnectOptions,
    url: "mysql://app@db/app",
    offline url: "mysql://localhost/app",
    /// Every new connection also runs `SET time_zone = '+00:00'`, after any of your connect
    /// options.
    fn pool_options;
}

/// MySQL has no `RETURNING`: an acquire's statements report a win through `LAST_INSERT_ID`.
pub(crate) struct Extra {
    /// Inserts a missing row. If inserted, `LAST_INSERT_ID` is the token, or `locked_at` in µs
    /// without tokens.
    insert: std::sync::Arc<str>,
    /// Reads a won row back by its token, on tables with tokens only.
    read_back: std::sync::Arc<str>,
    /// Inserts the missing row of a fire claim, inside the fire's window.
    claim_insert: std::sync::Arc<str>,
}

/// One column of the lock table, from `information_schema.columns`.
pub(crate) struct Column {
    name: String,
    /// `data_type`, lowercase.
    ty: String,
    len: Option<usize>,
    precision: Option<i64>,
    /// `extra`, lowercase (`on update current_timestamp(3)`, …).
    extra: String,
    collation: Option<String>,
}

impl Dialect for MySql {
    const PROVIDER: &'static str = "MySqlLockProvider";
    type Extra = Extra;

    fn statements(table: &str, cols: &ColumnNames, token: bool) -> Statements<Extra> {
        let (name, until, at, by, tok) = cols.each();
        let fire = &Self::QUOTE.quote(LAST_FIRE);
        let expired = format!("{until} <= {NOW}");
        // How the statements report a win through LAST_INSERT_ID(expr): with a token column the
        // new token; without, `locked_at` in microseconds (`0 * LAST_INSERT_ID(x)` adds nothing
        // to the value it sits in).
        let look_tok = if token {
            format!("t.{tok}")
        } else {
            "CAST(NULL AS SIGNED)".to_owned()
        };
        let (take_tok, locked_at_value, ins_col, ins_val, same, ret_tok, claim_tok) = if token {
            (
                format!(
                    "{tok} = IF({expired}, LAST_INSERT_ID(GREATEST({tok} + 1, {SEED_MICROS})), {tok}), "
                ),
                NOW.to_owned(),
                format!(", {tok}"),
                format!(", LAST_INSERT_ID({SEED_MICROS})"),
                format!("{tok} = ?"),
                tok.to_owned(),
                format!("{tok} = LAST_INSERT_ID(GREATEST({tok} + 1, {SEED_MICROS})), "),
            )
        } else {
            (
                String::new(),
                format!("TIMESTAMPADD(MICROSECOND, 0 * LAST_INSERT_ID({NOW_MICROS}), {NOW})"),
                String::new(),
                String::new(),
                format!("{at} = ?"),
                "CAST(NULL AS SIGNED)".to_owned(),
                String::new(),
            )
        };
        Statements {
            // ? owner, ? at_most µs, ? name: takes an expired row, setting each column to itself
            // otherwise (so a held lock writes nothing); `LAST_INSERT_ID` = the new token (or
            // `locked_at` in µs) if taken. `lock_until` is assigned last: the conditions before
            // it read its old value (MySQL assigns left to right).
            acquire: format!(
                "{PIN}UPDATE {HINT} {table} SET {take_tok}\
                 {by} = IF({expired}, ?, {by}), \
                 {at} = IF({expired}, {locked_at_value}, {at}), \
                 {until} = IF({expired}, TIMESTAMPADD(MICROSECOND, ?, {NOW}), {until}) \
                 WHERE {name} = ?"
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
            // ? at_least µs, ? fire, ? kind, ? fire, ? kind, ? fire, ? outcome kind, ? error
            // text, ? name, ? owner, ? token (or locked_at): the release with the job state in the same
            // statement. The counts read the last run's columns before they are set (MySQL
            // assigns left to right; MariaDB's SIMULTANEOUS_ASSIGNMENT mode reads the old values
            // anyway), so the result is the same in both modes.
            release_run: format!(
                "{PIN}UPDATE {HINT} {table} \
                 SET {until} = GREATEST({NOW}, TIMESTAMPADD(MICROSECOND, ?, {at})), {} \
                 WHERE {name} = ? AND {by} = ? AND {same}",
                release_run_state::<Self>(cols, "", "?", ["?"; 3], "?")
            )
            .into(),
            // ? name.
            holder: format!(
                "{PIN}SELECT {HINT} {by}, {at}, {until}, {ret_tok} FROM {table} \
                 WHERE {name} = ? AND {until} > {NOW}"
            )
            .into(),
            claims: [false, true].map(|pause| claim(table, cols, &claim_tok, &locked_at_value, pause)),
            looks: [false, true].map(|pause| look(table, cols, &look_tok, pause)),
            extra: Extra {
                // ? name, ? at_most µs, ? owner. On a duplicate (inserted concurrently) it
                // changes nothing and resets LAST_INSERT_ID to 0: no `INSERT IGNORE`, so errors
                // such as "data too long" stay visible, and no duplicate-key error.
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
                // ? name, ? at_most µs, ? owner, ? F, ? F, ? next. Inserts only inside the
                // window; a duplicate (inserted concurrently) changes nothing, as `insert`.
                claim_insert: format!(
                    "{PIN}INSERT {HINT} INTO {table} ({name}, {until}, {at}, {by}, {fire}{ins_col}) \
                     SELECT ?, TIMESTAMPADD(MICROSECOND, ?, {NOW}), {locked_at_value}, ?, ?{ins_val} \
                     FROM DUAL WHERE ? <= {NOW} AND {NOW} < ? \
                     ON DUPLICATE KEY UPDATE {until} = TIMESTAMPADD(MICROSECOND, LAST_INSERT_ID(0), {until})"
                )
                .into(),
            },
        }
    }

    const NOW: &'static str = NOW;
    const PIN: &'static str = PIN;
    const HINT: &'static str = HINT;
    const NULL_TOKEN: &'static str = "CAST(NULL AS SIGNED)";
    const NULL_TIME: &'static str = "CAST(NULL AS DATETIME(3))";
    /// In order: `?`.
    fn param(_: usize) -> String {
        "?".to_owned()
    }

    /// ShedLock's millisecond precision. The explicit default stops MySQL's implicit `DEFAULT
    /// CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP` on a first `TIMESTAMP` column.
    const TIME_COLUMN: &'static str = "TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)";
    const TOKEN_COLUMN: &'static str = "BIGINT NOT NULL DEFAULT 0";
    /// Milliseconds, compared exactly. The explicit `NULL DEFAULT NULL` keeps MySQL from giving a
    /// `TIMESTAMP` column an implicit default.
    const LAST_FIRE_COLUMN: &'static str = "TIMESTAMP(3) NULL DEFAULT NULL";
    const TIME_PRECISION_MICROS: i64 = 1_000;
    /// `utf8mb4` with the binary collation, whatever the table's default, so any error text and
    /// owner id fits even where a Java ShedLock table is `latin1`.
    fn text_column(len: usize) -> String {
        format!("VARCHAR({len}) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL")
    }
    const BIGINT: &'static str = "SIGNED";
    const POSITIONAL: bool = true;
    /// `utf8mb4` stores any name. The binary collation makes names compare exactly.
    const TABLE_OPTIONS: &'static str =
        " ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin";

    /// `VALUES(c)`, as the definitions' upsert writes it: MariaDB has no row alias.
    fn upsert(_key: &str, set: &[&str]) -> String {
        let set: Vec<String> = set.iter().map(|c| format!("{c} = VALUES({c})")).collect();
        format!("ON DUPLICATE KEY UPDATE {}", set.join(", "))
    }

    fn now_plus(param: &str) -> String {
        format!("TIMESTAMPADD(MICROSECOND, {param}, {NOW})")
    }

    fn next_token(tok: &str) -> String {
        format!("GREATEST({tok} + 1, {SEED_MICROS})")
    }

    /// MariaDB's `UPDATE` returns no rows: a claim reads its lock after.
    const UPDATE_RETURNING: bool = false;

    /// Microseconds of a duration rounded up to whole milliseconds, as `TIMESTAMP(3)` keeps it.
    type Span = i64;
    fn span(d: Duration) -> i64 {
        millis_ceil(d).saturating_mul(1_000)
    }

    /// The session is in UTC (pinned), so sqlx's `DateTime<Utc>` is the column's value.
    type Time = DateTime<Utc>;
    fn time(t: DateTime<Utc>) -> DateTime<Utc> {
        t
    }

    fn read_time(row: &MySqlRow, index: usize, map: &Map<'_>) -> Result<DateTime<Utc>> {
        row.try_get(index).map_err(map)
    }

    fn read_opt_time(row: &MySqlRow, index: usize, map: &Map<'_>) -> Result<Option<DateTime<Utc>>> {
        row.try_get(index).map_err(map)
    }

    const DATABASE: &'static str = "MySQL/MariaDB";
    const SCHEMES: &'static [&'static str] = &["mysql", "mariadb"];
    const URL_FORM: &'static str = "mysql://user:password@host:3306/database";
    const TLS_FILES: &'static [(&'static str, &'static str)] = &[
        ("ssl-ca", "CA certificate"),
        ("ssl-cert", "client certificate"),
        ("ssl-key", "client key"),
    ];
    fn target(options: &MySqlConnectOptions) -> String {
        let at = match options.get_socket() {
            Some(path) => format!("socket {}", path.display()),
            None => format!("{}:{}", options.get_host(), options.get_port()),
        };
        match options.get_database() {
            Some(db) => format!("MySQL/MariaDB at {at}/{db}"),
            None => format!("MySQL/MariaDB at {at}"),
        }
    }
    /// Matched rows: sqlx sets `CLIENT_FOUND_ROWS`.
    fn connect_settings(
        mut options: MySqlConnectOptions,
        settings: &ConnectSettings,
    ) -> Result<MySqlConnectOptions> {
        if let Some(ca) = &settings.ca {
            options = options.ssl_ca(ca);
            if !matches!(
                options.get_ssl_mode(),
                MySqlSslMode::VerifyCa | MySqlSslMode::VerifyIdentity
            ) {
                options = options.ssl_mode(MySqlSslMode::VerifyIdentity);
            }
        }
        if let Some((cert, key)) = &settings.client {
            options = options.ssl_client_cert(cert).ssl_client_key(key);
        }
        if let Some(user) = &settings.username {
            options = options.username(user);
        }
        if let Some(password) = &settings.password {
            options = options.password(password);
        }
        Ok(options)
    }

    fn rows_affected(result: &MySqlQueryResult) -> u64 {
        result.rows_affected()
    }

    /// Pins each new connection's session to UTC. This covers servers that understand neither
    /// [`PIN`] nor [`HINT`], such as MySQL 5.7.
    fn setup(
        conn: &mut MySqlConnection,
    ) -> Pin<Box<dyn Future<Output = sqlx::Result<()>> + Send + '_>> {
        Box::pin(async move {
            conn.execute(SET_UTC).await?;
            Ok(())
        })
    }

    const MIGRATIONS: &'static str = "mysql";
    const RESERVED: Reserved = Reserved::MySql;
    fn classify(error: &sqlx::Error) -> Option<Fault> {
        let sqlx::Error::Database(db) = error else {
            return None;
        };
        match db.try_downcast_ref::<MySqlDatabaseError>()?.number() {
            // ER_NO_SUCH_TABLE
            1146 => Some(Fault::MissingTable),
            // ER_BAD_FIELD_ERROR
            1054 => Some(Fault::Columns(error.to_string())),
            _ => None,
        }
    }

    type TableColumn = Column;
    /// Two statements: the columns from `information_schema.columns`, then whether the name column
    /// is alone in a unique index (`information_schema.statistics`).
    async fn detect<'a>(
        link: &'a Link<Self>,
        call: &'a Call,
        map: &'a Map<'a>,
    ) -> Result<Option<(Vec<Column>, bool)>> {
        const COLUMNS: &str = "SELECT CAST(column_name AS CHAR), CAST(data_type AS CHAR), \
             CAST(character_maximum_length AS SIGNED), CAST(datetime_precision AS SIGNED), \
             CAST(extra AS CHAR), CAST(collation_name AS CHAR) \
             FROM information_schema.columns \
             WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?";
        const UNIQUE: &str = "SELECT COUNT(*) FROM information_schema.statistics s \
             WHERE s.table_schema = COALESCE(?, DATABASE()) AND s.table_name = ? \
             AND s.non_unique = 0 AND s.column_name = ? \
             AND (SELECT COUNT(*) FROM information_schema.statistics s2 \
             WHERE s2.table_schema = s.table_schema AND s2.table_name = s.table_name \
             AND s2.index_name = s.index_name) = 1";
        let s = &link.settings;
        let (rows, unique) = link
            .run(call, |mut c| async move {
                let query = sqlx::query(COLUMNS)
                    .bind(s.table.schema.as_deref())
                    .bind(&s.table.table);
                let rows = statement!(c, query, map, fetch_all)?;
                if rows.is_empty() {
                    return Ok((rows, false));
                }
                let query = sqlx::query_scalar::<_, i64>(UNIQUE)
                    .bind(s.table.schema.as_deref())
                    .bind(&s.table.table)
                    .bind(&s.columns.name);
                let unique = statement!(c, query, map, fetch_one)?;
                Ok((rows, unique > 0))
            })
            .await?;
        if rows.is_empty() {
            return Ok(None);
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
        Ok(Some((columns, unique)))
    }

    /// MySQL column names are case-insensitive.
    const QUOTE: Quote = Quote::Backtick;
    fn is_column(column: &Column, name: &str) -> bool {
        column.name.eq_ignore_ascii_case(name)
    }

    fn column_len(column: &Column) -> Option<usize> {
        column.len
    }

    fn column_problem(column: &Column, role: Role, name: &str) -> Option<String> {
        let ty = &column.ty;
        match role {
            Role::Name
            | Role::LockedBy
            | Role::State(StateKind::Runner | StateKind::Outcome | StateKind::Error) => {
                if role == Role::Name
                    && let Some(collation) = &column.collation
                    && !collation.to_ascii_lowercase().ends_with("_bin")
                {
                    tracing::warn!(
                        column = name,
                        collation,
                        "the lock name column has a case-insensitive collation: names that \
                         differ only in case are one lock (our DDL uses utf8mb4_bin)"
                    );
                }
                let text = [
                    "varchar",
                    "char",
                    "text",
                    "tinytext",
                    "mediumtext",
                    "longtext",
                ];
                (!text.contains(&ty.as_str()))
                    .then(|| format!("column {name} is {ty}, expected VARCHAR"))
            }
            Role::LockUntil | Role::LockedAt | Role::LastFire | Role::State(StateKind::Time) => {
                time_column_problem(column, role == Role::LockedAt)
            }
            Role::State(StateKind::Count) => (!["int", "bigint", "mediumint", "smallint"]
                .contains(&ty.as_str()))
            .then(|| format!("column {name} is {ty}, expected INT")),
            Role::FencingToken | Role::State(StateKind::Id) => {
                (ty != "bigint").then(|| format!("column {name} is {ty}, expected BIGINT"))
            }
        }
    }

    async fn acquire<'a>(at: Attempt<'a, Self>, args: Acquire<'a>) -> Result<Option<LockRecord>> {
        let Attempt { sql, c, map } = at;
        let mut c = c;
        let (name, at_most, owner) = (args.name, args.at_most, args.owner);
        let micros = Self::span(at_most);
        let query = sqlx::query(AssertSqlSafe(sql.acquire.clone()))
            .bind(owner)
            .bind(micros)
            .bind(name);
        let updated = statement!(c, query, map, execute)?;
        // rows_affected counts matched rows (sqlx sets CLIENT_FOUND_ROWS): 0 = no row. Only then
        // is the row inserted (a second statement).
        let won = if updated.rows_affected() > 0 {
            reported(&updated)
        } else {
            let query = sqlx::query(AssertSqlSafe(sql.extra.insert.clone()))
                .bind(name)
                .bind(micros)
                .bind(owner);
            reported(&statement!(c, query, map, execute)?)
        };
        let Some(reported) = won else {
            return Ok(None);
        };
        won_record(c, map, sql, args.schema, (name, owner, at_most), reported).await
    }

    /// There is no `RETURNING`, so a look comes first. See [`MySqlLockProvider`]'s "Fire claims".
    /// A fire it does not claim costs one statement, and a claim two or three.
    async fn claim_fire<'a>(at: Attempt<'a, Self>, args: ClaimFire<'a>) -> Result<Seen> {
        let Attempt { sql, c, map } = at;
        let mut c = c;
        let (name, owner, micros) = (
            args.lock.name,
            args.lock.owner,
            Self::span(args.lock.at_most),
        );
        let schema = args.lock.schema;
        let query = sqlx::query(AssertSqlSafe(sql.look(schema).clone())).bind(name);
        let row = statement!(c, query, map, fetch_one)?;
        let now = Self::read_time(&row, 0, map)?;
        let recorded = Self::read_opt_time(&row, 1, map)?;
        let exists = row.try_get::<i64, _>(3).map_err(map)? == 1;
        let holder = seen_holder(
            name,
            row.try_get(4).map_err(map)?,
            Self::read_opt_time(&row, 5, map)?,
            Self::read_opt_time(&row, 2, map)?,
            row.try_get(6).map_err(map)?,
        )?;
        let pause = if schema.has_pause {
            seen_pause::<Self>(&row, 7, map)?
        } else {
            None
        };
        let fire = shedlock_core::provider::Fire::new(args.at, args.next)?;
        if fire_decision(&fire, now, holder.as_ref(), recorded, pause.as_ref()).is_some() {
            return Ok(Seen::Row {
                now,
                recorded,
                holder,
                pause,
            });
        }
        let query = if exists {
            sqlx::query(AssertSqlSafe(sql.claim(schema).clone()))
                .bind(owner)
                .bind(micros)
                .bind(args.at)
                .bind(name)
                .bind(args.at)
                .bind(args.next)
                .bind(args.at)
        } else {
            sqlx::query(AssertSqlSafe(sql.extra.claim_insert.clone()))
                .bind(name)
                .bind(micros)
                .bind(owner)
                .bind(args.at)
                .bind(args.at)
                .bind(args.next)
        };
        let result = statement!(c, query, map, execute)?;
        let Some(reported) = reported(&result).filter(|_| result.rows_affected() > 0) else {
            return Ok(Seen::Changed);
        };
        let who = (name, owner, args.lock.at_most);
        // None: the lock (of at most `at_most`) already passed on; the look says to whom.
        Ok(won_record(c, map, sql, args.lock.schema, who, reported)
            .await?
            .map_or(Seen::Changed, Seen::Won))
    }

    /// The statement reports the server's now through `LAST_INSERT_ID`. The new `lock_until` is now
    /// + `at_most`, in whole milliseconds, as stored.
    async fn extend<'a>(at: Attempt<'a, Self>, args: Extend<'a>) -> Result<Option<LockRecord>> {
        let (record, at_most) = (args.record, args.at_most);
        let query = Provider::identified(&at.sql.extend, at_most, record, args.token);
        let (mut c, map) = (at.c, at.map);
        let result = statement!(c, query, map, execute)?;
        if result.rows_affected() == 0 {
            return Ok(None);
        }
        let now = reported(&result).ok_or_else(|| {
            Error::backend_message(format!(
                "extend lock {:?}: the server did not report its time",
                record.name()
            ))
        })?;
        let lock_until = plus_millis(utc_from_micros(now)?, millis_ceil(at_most))?;
        Ok(Some(record.clone().with_lock_until(lock_until)))
    }
}

/// The fire claim's `UPDATE` (the row exists), with the pause condition when `pause`. `claim_tok`
/// sets the token, `locked_at_value` the new `locked_at` (see [`MySql::statements`]).
///
/// ? owner, ? `at_most` µs, ? F, ? name, ? F, ? next, ? F. Takes the row iff the fire is claimable
/// (the WHERE reads the old values, whatever the SET assigns; with the pause columns, a pause
/// that holds refuses it too, so one set since `look` is honoured), reporting the new token (or
/// `locked_at` in µs) through `LAST_INSERT_ID`; run only after `look` found the fire claimable,
/// so a fire it does not claim is never locked.
fn claim(
    table: &str,
    cols: &ColumnNames,
    claim_tok: &str,
    locked_at_value: &str,
    pause: bool,
) -> std::sync::Arc<str> {
    let (name, until, at, by, _) = cols.each();
    let fire = &MySql::QUOTE.quote(LAST_FIRE);
    let unpaused = if pause {
        format!(" AND {}", not_paused::<MySql>(NOW))
    } else {
        String::new()
    };
    format!(
        "{PIN}UPDATE {HINT} {table} SET {claim_tok}\
         {by} = ?, {at} = {locked_at_value}, \
         {until} = TIMESTAMPADD(MICROSECOND, ?, {NOW}), {fire} = ? \
         WHERE {name} = ? AND ? <= {NOW} AND {NOW} < ? AND {until} <= {NOW} \
         AND ({fire} IS NULL OR {fire} < ?){unpaused}"
    )
    .into()
}

/// The fire claim's look, with the pause when `pause`; `look_tok` reads the token.
///
/// ? name. A consistent read: no row lock. The database's now, the recorded fire, the lock row
/// (`lock_until`, `locked_by`, `locked_at`, the token), whether it exists, and with the pause columns
/// the pause.
fn look(table: &str, cols: &ColumnNames, look_tok: &str, pause: bool) -> std::sync::Arc<str> {
    let (name, until, at, by, _) = cols.each();
    let fire = &MySql::QUOTE.quote(LAST_FIRE);
    format!(
        "{PIN}SELECT {HINT} {NOW}, t.{fire}, t.{until}, CAST(t.{name} IS NOT NULL AS SIGNED), \
         t.{by}, t.{at}, {look_tok}{} \
         FROM (SELECT 1) AS one LEFT JOIN {table} AS t ON t.{name} = ?",
        pause_read::<MySql>("t.", pause)
    )
    .into()
}

/// The record of a won acquire or fire claim whose statement reported `reported` through
/// `LAST_INSERT_ID`.
///
/// On a table with tokens, `reported` is the new token and the row is read back, as there is no
/// `RETURNING`. The record is then `None` if the lock, of at most `at_most`, already passed to
/// someone else. Without tokens, `reported` is the claim's `locked_at` in microseconds.
async fn won_record(
    mut c: Checkout<'_, MySql>,
    map: &Map<'_>,
    sql: &Statements<Extra>,
    schema: Schema,
    (name, owner, at_most): (&str, &str, Duration),
    reported: i64,
) -> Result<Option<LockRecord>> {
    if !schema.has_token {
        let locked_at = utc_from_micros(reported)?;
        let lock_until = plus_millis(locked_at, millis_ceil(at_most))?;
        return Ok(Some(LockRecord::new(name, owner, locked_at, lock_until)));
    }
    let query = sqlx::query(AssertSqlSafe(sql.extra.read_back.clone()))
        .bind(name)
        .bind(reported);
    let Some(row) = statement!(c, query, map, fetch_optional)? else {
        return Ok(None);
    };
    Ok(Some(
        LockRecord::new(
            name,
            owner,
            MySql::read_time(&row, 0, map)?,
            MySql::read_time(&row, 1, map)?,
        )
        .with_fencing_token(Some(reported)),
    ))
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

#[cfg(test)]
mod tests {
    use sqlx::MySqlPool;

    use super::*;

    #[tokio::test]
    async fn every_data_statement_is_pinned_to_utc() {
        let pool = MySqlPool::connect_lazy("mysql://localhost/none").expect("a valid URL");
        let p = MySqlLockProvider::builder(pool)
            .table("app.locks")
            .build()
            .expect("valid settings");
        for s in p.0.all_statements() {
            for sql in [
                &s.acquire,
                &s.extra.insert,
                &s.extend,
                &s.release,
                &s.release_run,
                &s.holder,
                &s.claims[0],
                &s.claims[1],
                &s.looks[0],
                &s.looks[1],
                &s.extra.claim_insert,
            ] {
                assert!(sql.starts_with(PIN), "{sql}");
                assert!(sql.contains(HINT), "{sql}");
                assert!(sql.contains("`app`.`locks`"), "{sql}");
                assert!(!sql.contains("INSERT IGNORE"), "{sql}");
            }
        }
    }

    /// The look comes first, so a race is what the claim's own pause condition guards against:
    /// with the pause columns the `UPDATE` refuses a paused row too, without them it names none.
    #[tokio::test]
    async fn the_claim_itself_refuses_a_paused_row() {
        let pool = MySqlPool::connect_lazy("mysql://localhost/none").expect("a valid URL");
        let p = MySqlLockProvider::builder(pool)
            .build()
            .expect("valid settings");
        let unpaused = "(`paused_at` IS NULL OR `paused_until` <= UTC_TIMESTAMP(3))";
        for s in p.0.all_statements() {
            assert!(
                s.claims[1].ends_with(&format!(" AND {unpaused}")),
                "{}",
                s.claims[1]
            );
            assert!(!s.claims[0].contains("paused"), "{}", s.claims[0]);
            assert!(s.looks[1].contains("t.`paused_until`"), "{}", s.looks[1]);
            assert!(!s.looks[0].contains("paused"), "{}", s.looks[0]);
        }
    }

    #[test]
    fn the_migration_files_hold_the_built_in_ddl() {
        crate::provider::assert_migrations::<MySql>();
    }
}
