//! [`PgLockProvider`]: locks in a Postgres table, on the database server's clock.

use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, Utc};
use shedlock_core::{Error, Result};
use sqlx::Row;
use sqlx::postgres::types::PgInterval;
use sqlx::postgres::{PgConnectOptions, PgQueryResult, PgRow, PgSslMode, Postgres};

use crate::connect::ConnectSettings;

use crate::builder::ColumnNames;
use crate::dialect::{
    Attempt, ClaimFire, ClaimFires, Dialect, Fault, LAST_FIRE, Map, Role, Seen, StateKind,
    Statements, not_paused, pause_read, release_run_state,
};
use crate::ident::{Quote, Reserved};
use crate::link::statement;
use crate::link::{Call, Link, micros_ceil};
use crate::provider::{Provider, returning_statements};
use crate::provider_types::sql_lock_provider;

/// The database's "now" as a UTC wall-clock `timestamp`: the start of the statement, so every use
/// within one statement agrees. It equals ShedLock's `timezone('utc', CURRENT_TIMESTAMP)` in
/// autocommit and stays right inside a transaction.
pub(crate) const NOW: &str = "timezone('UTC', statement_timestamp())";
/// The same instant in microseconds since the Unix epoch, which seeds fencing tokens.
pub(crate) const NOW_MICROS: &str = "(extract(epoch FROM statement_timestamp()) * 1000000)::bigint";

sql_lock_provider! {
/// A [`LockProvider`](shedlock_core::provider::LockProvider) on a Postgres table of Java ShedLock's
/// layout (`shedlock(name, lock_until, locked_at, locked_by)`), using a `fencing_token` column
/// where the table has one.
///
/// # Table
///
/// Create it with [`create_table_if_not_exists`](Self::create_table_if_not_exists). Or run the same
/// DDL from this crate's migrations, named as sqlx-cli names them:
/// `migrations/postgres/0001_shedlock.sql`, `0002_last_fire.sql`, `0003_job_state.sql`,
/// `0005_pause.sql` and `0006_trigger.sql`.
///
/// ```sql
/// CREATE TABLE IF NOT EXISTS shedlock (
///     name VARCHAR(64) NOT NULL,
///     lock_until TIMESTAMP NOT NULL,
///     locked_at TIMESTAMP NOT NULL,
///     locked_by VARCHAR(255) NOT NULL,
///     fencing_token BIGINT NOT NULL DEFAULT 0,
///     last_fire TIMESTAMP NULL,
///     last_run_fire TIMESTAMP NULL,
///     last_run_by VARCHAR(255) NULL,
///     last_run_started TIMESTAMP NULL,
///     last_run_ended TIMESTAMP NULL,
///     last_run_outcome VARCHAR(16) NULL,
///     last_run_error VARCHAR(1000) NULL,
///     last_success TIMESTAMP NULL,
///     consecutive_failures INT NOT NULL DEFAULT 0,
///     paused_at TIMESTAMP NULL,
///     paused_until TIMESTAMP NULL,
///     paused_by VARCHAR(255) NULL,
///     paused_reason VARCHAR(255) NULL,
///     last_action VARCHAR(16) NULL,
///     last_action_by VARCHAR(255) NULL,
///     last_action_at TIMESTAMP NULL,
///     trigger_id BIGINT NULL,
///     trigger_at TIMESTAMP NULL,
///     trigger_expires TIMESTAMP NULL,
///     trigger_by VARCHAR(255) NULL,
///     trigger_taken_by VARCHAR(255) NULL,
///     trigger_taken_at TIMESTAMP NULL,
///     PRIMARY KEY (name)
/// )
/// ```
///
/// Times are UTC wall-clock values in `TIMESTAMP` columns without time zone, as Java ShedLock
/// writes them, so a Java service using `usingDbTime()` and this provider exclude each other on one
/// table. Java's DDL, without `fencing_token`, works as is, with tokens `None`. On first use the
/// provider reads which columns exist, their types and the name column's length. A missing table
/// fails with [`Error::is_missing_table`](shedlock_core::Error::is_missing_table), one that does
/// not fit with [`Error::is_schema`](shedlock_core::Error::is_schema), and a failed check is
/// retried on the next call. Restart the service after adding the token column to an existing
/// table.
///
/// # Time
///
/// Every decision compares against `timezone('UTC', statement_timestamp())`, read inside the
/// statement that decides. The application's clock, its time zone and the session's `TimeZone`
/// setting play no part.
///
/// # Statements
///
/// Each call is one statement in autocommit, on a connection given back at once.
///
/// An acquire is a single statement: `INSERT … SELECT … WHERE NOT EXISTS (a held lock) ON CONFLICT
/// DO UPDATE … WHERE lock_until <= now`. When the lock is held, its `SELECT` yields no row, so it
/// writes nothing and takes no row lock. A missing row is inserted, and a concurrent first acquire
/// makes that a conflict, never a duplicate-key error in the log. The `DO UPDATE` takes an expired
/// row, checking expiry again on the row's latest version.
///
/// Java ShedLock's `INSERT … ON CONFLICT DO UPDATE … WHERE` lacks the guard and locks the row even
/// when it does not take it. That costs a transaction id and 96 bytes of WAL, measured, on every
/// skip, against none here. On a skip the server runs ours at about 0.8 × the rate of Java's plain
/// conditional `UPDATE` (see BENCHMARKS.md). Only an acquire that loses a race for an expired or
/// missing row locks the row, the winner's new version, before it finds the lock held.
///
/// A release does not wait for its WAL flush: `synchronous_commit = off` for that statement alone.
/// If the server crashes before the flush, the release is lost and the lock ends at its
/// `lock_until`. Acquires and extends are durable.
///
/// # Fire claims
///
/// [`claim_fire`](shedlock_core::provider::LockProvider::claim_fire) is one statement that updates
/// an expired row or inserts a missing one, if `F <= now < next`, `last_fire` is older than `F` or
/// `NULL`, and the lock is free. It also returns the database's now and the row as it saw it, so
/// every reply costs one round trip. A fire it does not claim writes nothing and takes no row lock.
/// `last_fire` is a UTC wall-clock `TIMESTAMP`, like `lock_until`. A table without it answers
/// [`Error::is_unsupported`](shedlock_core::Error::is_unsupported). Add it with
/// `migrations/postgres/0002_last_fire.sql` and restart the service.
///
/// Where the table has the [pause columns](crate#pauses), the same statement also needs no pause
/// that holds at the database's now to claim, and returns the pause it saw, so a paused job's fire
/// is answered [`Paused`](shedlock_core::provider::FireClaim::Paused) in the same round trip,
/// writing nothing.
///
/// # Job state
///
/// [`release_run`](shedlock_core::provider::LockProvider::release_run) is the release's one
/// `UPDATE`, with its guard, also setting the [job state](crate#job-state) columns.
/// `last_success` and `consecutive_failures` are `CASE`s on the outcome. It keeps the release's
/// `synchronous_commit = off`, so a server crash before the WAL flush loses the release and its
/// record alike, and the job state shows the run before. A table without the columns answers
/// [`Error::is_unsupported`](shedlock_core::Error::is_unsupported). Run
/// `migrations/postgres/0003_job_state.sql`, or what
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
/// a connection left dead by a server restart, `pg_terminate_backend` or `idle_session_timeout`
/// runs again on another, but an acquire whose reply was lost fails. The repository's
/// `docs/sql-stores.md` explains pools, restarts, lost replies and deadlines, and lists the
/// Postgres errors that mark a connection as lost.
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
    pub struct PgLockProvider(Postgres);
    options: sqlx::postgres::PgConnectOptions,
    url: "postgres://app@db/app",
    offline url: "postgres://localhost/app",
    fn pool_options;
}

impl Dialect for Postgres {
    const PROVIDER: &'static str = "PgLockProvider";
    /// `relation "…" already exists, skipping` is a notice, which sqlx logs at INFO. The setting
    /// lasts until the end of the statement's (implicit) transaction.
    const BEFORE_CREATE: &'static str = "SET LOCAL client_min_messages = warning; ";
    type Extra = crate::postgres_batch::Extra;

    fn statements(table: &str, cols: &ColumnNames, token: bool) -> Statements<Self::Extra> {
        let (name, until, at, by, tok) = cols.each();
        let fire = &Self::QUOTE.quote(LAST_FIRE);
        let (set_tok, upd_tok, ins_col, ins_val, ret_tok, same) = if token {
            (
                format!(", {tok} = GREATEST({tok} + 1, {NOW_MICROS})"),
                format!(", {tok} = GREATEST(cur.{tok} + 1, EXCLUDED.{tok})"),
                format!(", {tok}"),
                format!(", {NOW_MICROS}"),
                tok.to_owned(),
                format!("{tok} = $4"),
            )
        } else {
            (
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                "NULL::bigint".to_owned(),
                format!("{at} = $4"),
            )
        };
        Statements {
            // $1 at_most, $2 name, $3 owner. One INSERT whose SELECT yields its row only if
            // no held lock is visible: a held lock yields none, so nothing is inserted, written
            // or locked (the guard is what Java's `INSERT … ON CONFLICT DO UPDATE` lacks). A
            // missing row is inserted; a visible expired row is the conflict, taken by the
            // `DO UPDATE` if it is still expired once locked (a concurrent acquire that won
            // first leaves it held: no update, no duplicate-key error). One table access and
            // one ModifyTable node: on the server about 0.8 × the throughput of Java's plain
            // conditional `UPDATE` (the former CTE of an UPDATE and an INSERT: about 0.7).
            acquire: format!(
                "INSERT INTO {table} AS cur ({name}, {until}, {at}, {by}{ins_col}) \
                 SELECT $2, {NOW} + $1, {NOW}, $3{ins_val} \
                 WHERE NOT EXISTS (SELECT 1 FROM {table} WHERE {name} = $2 AND {until} > {NOW}) \
                 ON CONFLICT ({name}) DO UPDATE SET {by} = EXCLUDED.{by}, {at} = EXCLUDED.{at}, \
                 {until} = EXCLUDED.{until}{upd_tok} \
                 WHERE cur.{until} <= {NOW} \
                 RETURNING {at}, {until}, {ret_tok}"
            )
            .into(),
            // $1 at_most, $2 name, $3 owner, $4 token (or locked_at).
            extend: format!(
                "UPDATE {table} SET {until} = {NOW} + $1 \
                 WHERE {name} = $2 AND {by} = $3 AND {same} AND {until} > {NOW} \
                 RETURNING {until}"
            )
            .into(),
            // $1 at_least, $2 name, $3 owner, $4 token (or locked_at).
            // A release whose commit is lost only keeps the lock until its lock_until, so it
            // does not wait for a durable WAL flush (`synchronous_commit = off` for this
            // statement's own transaction only; acquires and extends stay durable).
            release: format!(
                "UPDATE {table} SET {until} = GREATEST({NOW}, {at} + $1) \
                 WHERE {name} = $2 AND {by} = $3 AND {same} \
                 AND set_config('synchronous_commit', 'off', true) IS NOT NULL"
            )
            .into(),
            // $1 at_least, $2 name, $3 owner, $4 token (or locked_at), $5 fire, $6 outcome
            // kind, $7 error text. The release with the job state in the same statement, with
            // the release's durability (`synchronous_commit = off`: a lost commit loses the
            // release and its record alike).
            release_run: format!(
                "UPDATE {table} SET {until} = GREATEST({NOW}, {at} + $1), {} \
                 WHERE {name} = $2 AND {by} = $3 AND {same} \
                 AND set_config('synchronous_commit', 'off', true) IS NOT NULL",
                release_run_state::<Self>(cols, "", "$5", ["$6"; 3], "$7")
            )
            .into(),
            // $1 name.
            holder: format!(
                "SELECT {by}, {at}, {until}, {ret_tok} FROM {table} WHERE {name} = $1 AND {until} > {NOW}"
            )
            .into(),
            // $1 at_most, $2 name, $3 owner, $4 F, $5 next. An update and an insert with the fire's
            // conditions added (`claimed` also needs the recorded fire older than F and, with
            // the pause columns, no pause that holds), and one row out whatever happened: the
            // database's now and the row as the statement's snapshot saw it (`seen`: the recorded
            // fire, lock_until, locked_by, locked_at, the token), then the claim's columns if it
            // won, then the pause `seen` read. A fire it does not claim matches neither part: no
            // write, no row lock.
            claims: [false, true].map(|pause| {
                let (seen_names, out_pause, unpaused) = if pause {
                    (
                        ", pa, pu, pb",
                        ", seen.pa, seen.pu, seen.pb",
                        format!(" AND {}", not_paused::<Self>(NOW)),
                    )
                } else {
                    ("", "", String::new())
                };
                let seen_cols = pause_read::<Self>("", pause);
                format!(
                    "WITH seen (f, u, b, a, t{seen_names}) AS (\
                     SELECT {fire}, {until}, {by}, {at}, {ret_tok}{seen_cols} FROM {table} WHERE {name} = $2), \
                     claimed AS (\
                     UPDATE {table} SET {by} = $3, {at} = {NOW}, {until} = {NOW} + $1, {fire} = $4{set_tok} \
                     WHERE {name} = $2 AND $4 <= {NOW} AND {NOW} < $5 AND {until} <= {NOW} \
                     AND ({fire} IS NULL OR {fire} < $4){unpaused} \
                     RETURNING {at}, {until}, {ret_tok}), \
                     created AS (\
                     INSERT INTO {table} ({name}, {until}, {at}, {by}, {fire}{ins_col}) \
                     SELECT $2, {NOW} + $1, {NOW}, $3, $4{ins_val} \
                     WHERE $4 <= {NOW} AND {NOW} < $5 AND NOT EXISTS (SELECT 1 FROM seen) \
                     ON CONFLICT ({name}) DO NOTHING \
                     RETURNING {at}, {until}, {ret_tok}), \
                     won AS (SELECT * FROM claimed UNION ALL SELECT * FROM created) \
                     SELECT {NOW}, seen.f, seen.u, seen.b, seen.a, seen.t, won.*{out_pause} \
                     FROM (SELECT 1) AS one LEFT JOIN seen ON true LEFT JOIN won ON true"
                )
                .into()
            }),
            // Postgres answers within the claim's one statement.
            looks: ["".into(), "".into()],
            extra: crate::postgres_batch::Extra::new(table, cols, token),
        }
    }

    const NOW: &'static str = NOW;
    const NULL_TOKEN: &'static str = "NULL::bigint";
    const NULL_TIME: &'static str = "NULL::timestamp";
    fn param(n: usize) -> String {
        format!("${n}")
    }

    /// UTC wall-clock times without a time zone, as Java ShedLock writes them.
    const TIME_COLUMN: &'static str = "TIMESTAMP NOT NULL";
    /// The default lets Java's four-column `INSERT`s work.
    const TOKEN_COLUMN: &'static str = "BIGINT NOT NULL DEFAULT 0";
    /// The type of the other time columns, nullable.
    const LAST_FIRE_COLUMN: &'static str = "TIMESTAMP NULL";
    const TIME_PRECISION_MICROS: i64 = 1;

    /// Whole microseconds, rounded up. So a lock is never shorter than asked.
    type Span = PgInterval;
    fn now_plus(param: &str) -> String {
        format!("{NOW} + {param}")
    }

    fn next_token(tok: &str) -> String {
        format!("GREATEST({tok} + 1, {NOW_MICROS})")
    }

    const NOTIFIES: bool = true;

    /// The `UPDATE` in a CTE whose `SELECT` notifies once per row written, in the same statement
    /// and so the same transaction: the push goes out when the trigger commits.
    fn notify_trigger(update: &str, name: &str, channel: &str) -> Option<String> {
        Some(format!(
            "WITH written AS ({update} RETURNING {name}) \
             SELECT count(*) FROM written, LATERAL (SELECT pg_notify({channel}, written.{name})) AS n"
        ))
    }

    const CLAIM_SEES: bool = true;

    /// Like the fire claim: the row as the statement's snapshot saw it, and the `UPDATE`, which
    /// under READ COMMITTED re-checks its guard on the latest row version. Where the `UPDATE`
    /// claimed nothing but the snapshot allowed it, the row changed meanwhile: look again.
    fn claim_seeing(update: &str, look: &str) -> Option<String> {
        Some(format!(
            "WITH won AS ({update}), seen AS ({look}) \
             SELECT won.*, seen.* FROM seen LEFT JOIN won ON true"
        ))
    }

    fn watch_triggers(
        link: &Link<Self>,
        channel: String,
    ) -> impl Future<Output = Result<shedlock_core::provider::TriggerWake>> + Send {
        crate::postgres_watch::watch(
            link.conns.connect_options(),
            link.target().to_owned(),
            channel,
            link.settings.call_timeout,
        )
    }

    fn span(d: Duration) -> PgInterval {
        PgInterval {
            months: 0,
            days: 0,
            microseconds: micros_ceil(d),
        }
    }

    /// UTC wall-clock time, as the `TIMESTAMP` columns hold it.
    type Time = NaiveDateTime;
    fn time(t: DateTime<Utc>) -> NaiveDateTime {
        t.naive_utc()
    }

    fn read_time(row: &PgRow, index: usize, map: &Map<'_>) -> Result<DateTime<Utc>> {
        row.try_get::<NaiveDateTime, _>(index)
            .map(|t| t.and_utc())
            .map_err(map)
    }

    fn read_opt_time(row: &PgRow, index: usize, map: &Map<'_>) -> Result<Option<DateTime<Utc>>> {
        row.try_get::<Option<NaiveDateTime>, _>(index)
            .map(|t| t.map(|t| t.and_utc()))
            .map_err(map)
    }

    const DATABASE: &'static str = "Postgres";
    const SCHEMES: &'static [&'static str] = &["postgres", "postgresql"];
    const URL_FORM: &'static str = "postgres://user:password@host:5432/database";
    const TLS_FILES: &'static [(&'static str, &'static str)] = &[
        ("sslrootcert", "CA certificate"),
        ("sslcert", "client certificate"),
        ("sslkey", "client key"),
    ];
    fn target(options: &PgConnectOptions) -> String {
        let at = match options.get_socket() {
            Some(dir) => format!("socket {}", dir.display()),
            None => format!("{}:{}", options.get_host(), options.get_port()),
        };
        match options.get_database() {
            Some(db) => format!("Postgres at {at}/{db}"),
            None => format!("Postgres at {at}"),
        }
    }
    fn connect_settings(
        mut options: PgConnectOptions,
        settings: &ConnectSettings,
    ) -> Result<PgConnectOptions> {
        if let Some(ca) = &settings.ca {
            options = options.ssl_root_cert(ca);
            if !matches!(
                options.get_ssl_mode(),
                PgSslMode::VerifyCa | PgSslMode::VerifyFull
            ) {
                options = options.ssl_mode(PgSslMode::VerifyFull);
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

    fn rows_affected(result: &PgQueryResult) -> u64 {
        result.rows_affected()
    }

    const MIGRATIONS: &'static str = "postgres";
    const RESERVED: Reserved = Reserved::Postgres;
    fn classify(error: &sqlx::Error) -> Option<Fault> {
        let sqlx::Error::Database(db) = error else {
            return None;
        };
        match db.code().as_deref() {
            // undefined_table
            Some("42P01") => Some(Fault::MissingTable),
            // undefined_column, datatype_mismatch, invalid_column_reference (no unique index)
            Some("42703" | "42804" | "42P10") => Some(Fault::Columns(db.message().to_owned())),
            _ => None,
        }
    }

    /// Name, type, `VARCHAR` length, alone in a unique index.
    type TableColumn = (String, String, Option<usize>, bool);
    /// One statement that reads every column with its type, its `VARCHAR` length and whether it is
    /// alone in a unique, non-partial index. `to_regclass` resolves the quoted name as the
    /// statements do, search path included, and yields no rows for a missing table.
    async fn detect<'a>(
        link: &'a Link<Self>,
        call: &'a Call,
        map: &'a Map<'a>,
    ) -> Result<Option<(Vec<Self::TableColumn>, bool)>> {
        const DETECT: &str = "SELECT a.attname::text, format_type(a.atttypid, NULL), \
             CASE WHEN a.atttypid IN ('varchar'::regtype, 'bpchar'::regtype) AND a.atttypmod > 4 \
             THEN a.atttypmod - 4 END, \
             EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = a.attrelid AND i.indisunique \
             AND i.indpred IS NULL AND i.indnatts = 1 AND i.indkey[0] = a.attnum) \
             FROM pg_attribute a \
             WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped";
        let s = &link.settings;
        let regclass = s.table.quoted(Self::QUOTE);
        let rows = link
            .run(call, |mut c| {
                let regclass = &regclass;
                async move {
                    let query = sqlx::query(DETECT).bind(regclass);
                    statement!(c, query, map, fetch_all)
                }
            })
            .await?;
        if rows.is_empty() {
            return Ok(None);
        }
        let mut columns = Vec::with_capacity(rows.len());
        for row in &rows {
            let len: Option<i32> = row.try_get(2).map_err(map)?;
            columns.push((
                row.try_get(0).map_err(map)?,
                row.try_get(1).map_err(map)?,
                len.and_then(|l| usize::try_from(l).ok()),
                row.try_get(3).map_err(map)?,
            ));
        }
        let unique = columns
            .iter()
            .any(|(column, _, _, unique)| *unique && column == &s.columns.name);
        Ok(Some((columns, unique)))
    }

    /// Quoted names match exactly.
    const QUOTE: Quote = Quote::Double;
    fn is_column(column: &Self::TableColumn, name: &str) -> bool {
        column.0 == name
    }

    fn column_len(column: &Self::TableColumn) -> Option<usize> {
        column.2
    }

    fn column_problem(column: &Self::TableColumn, role: Role, name: &str) -> Option<String> {
        let ty = &column.1;
        match role {
            Role::Name
            | Role::LockedBy
            | Role::State(StateKind::Runner | StateKind::Outcome | StateKind::Error) => {
                (!["character varying", "text"].contains(&ty.as_str()))
                    .then(|| format!("column {name} is {ty}, expected VARCHAR"))
            }
            Role::State(StateKind::Id) => {
                (ty != "bigint").then(|| format!("column {name} is {ty}, expected BIGINT"))
            }
            Role::State(StateKind::Count) => (!["integer", "bigint", "smallint"]
                .contains(&ty.as_str()))
            .then(|| format!("column {name} is {ty}, expected INT")),
            Role::LockUntil | Role::LockedAt | Role::LastFire | Role::State(StateKind::Time) => (ty != "timestamp without time zone").then(|| {
                format!(
                    "column {name} is {ty}; it must be TIMESTAMP (without time zone) holding UTC \
                     wall-clock times, as in ShedLock's DDL"
                )
            }),
            Role::FencingToken => {
                (ty != "bigint").then(|| format!("column {name} is {ty}, expected BIGINT"))
            }
        }
    }

    returning_statements!();

    /// One statement decides and answers (see [`Statements::claim`]).
    async fn claim_fire<'a>(mut at: Attempt<'a, Self>, args: ClaimFire<'a>) -> Result<Seen> {
        let map = at.map;
        let row = Provider::<Self>::claim_returning(&mut at, args)
            .await?
            .ok_or_else(|| Error::backend_message("claim a fire: the statement returned no row"))?;
        if Self::read_opt_time(&row, 6, map)?.is_some() {
            let record =
                Provider::<Self>::returned_record(&row, 6, args.lock.name, args.lock.owner, map)?;
            return Ok(Seen::Won(record));
        }
        let pause = args.lock.schema.has_pause.then_some(9);
        Provider::<Self>::seen_row(&row, args.lock.name, map, pause)
    }

    /// A thousand names bind as four arrays of a thousand; the statement's plan and its reply grow
    /// with them, not its round trips.
    const FIRE_BATCH: usize = 1000;

    fn claim_fires<'a>(
        at: Attempt<'a, Self>,
        args: ClaimFires<'a>,
    ) -> impl std::future::Future<Output = Result<Vec<Seen>>> + Send + 'a {
        crate::postgres_batch::claim_fires(at, args)
    }

    fn release_runs<'a>(
        at: Attempt<'a, Self>,
        args: crate::dialect::ReleaseRuns<'a>,
    ) -> impl std::future::Future<Output = Result<Vec<Option<bool>>>> + Send + 'a {
        crate::postgres_release_batch::release_runs(at, args)
    }
}

#[cfg(test)]
mod tests {
    use sqlx::PgPool;

    use super::*;
    use crate::builder::LockProviderBuilder;

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
        let sql = p.0.all_statements();
        for s in sql {
            for (sql, param) in [
                (&s.acquire, "$2"),
                (&s.extend, "$2"),
                (&s.release, "$2"),
                (&s.release_run, "$2"),
                (&s.holder, "$1"),
            ] {
                assert!(sql.contains("\"ops\".\"locks\""), "{sql}");
                assert!(sql.contains(&format!("\"Lock_Name\" = {param}")), "{sql}");
            }
        }
        assert!(!sql[0].acquire.contains("fencing_token"));
        assert!(sql[1].acquire.contains("\"fencing_token\""));
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

    /// Behind a transaction-mode pooler a `LISTEN` would hear nothing: the watch is refused as
    /// unsupported, before any connection, and the schedulers poll.
    #[tokio::test]
    async fn no_trigger_watch_behind_a_transaction_pooler() {
        use shedlock_core::provider::LockProvider as _;
        let p = provider(|b| b.transaction_pooler(true));
        let error = p.watch_triggers().await.expect_err("refused");
        assert!(error.is_unsupported(), "{error}");
    }

    #[test]
    fn the_migration_files_hold_the_built_in_ddl() {
        crate::provider::assert_migrations::<Postgres>();
    }
}
