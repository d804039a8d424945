//! The two tables beside the lock table that job definitions and run history need, named from it:
//! `<table>_jobs` for the definitions replicas publish ([`crate::definitions`]), `<table>_history`
//! for the runs kept ([`crate::history`]). The lock table works without them.
//!
//! This module has their names, their DDL as in each database's migration
//! `0004_jobs_and_history.sql`, and what each database spells differently ([`JobTables`]). It
//! creates them, finds which are missing, gives the error that names the DDL to run, and runs a
//! call's statements in one transaction.

use std::time::Duration;

use shedlock_core::{Error, Result};
use sqlx::{AssertSqlSafe, ColumnIndex, Decode, Encode, Executor, IntoArguments, Type};

use crate::builder::Settings;
use crate::dialect::{Dialect, Fault, Map};
use crate::ident::{Quote, TableName};
use crate::link::{Call, Checkout, statement};
use crate::provider::Provider;

/// The suffix of the definitions table's name.
pub(crate) const JOBS_SUFFIX: &str = "_jobs";
/// The suffix of the history table's name.
pub(crate) const HISTORY_SUFFIX: &str = "_history";
/// The suffix of the history table's index name, after the history table's name.
///
/// Postgres and SQLite name indexes per schema. MySQL names it `lock_name_id` within the table.
pub(crate) const INDEX_SUFFIX: &str = "_idx";
/// The longest job name and replica (owner id) the definitions table holds, in characters.
pub(crate) const MAX_JOB_LEN: usize = 255;
/// The longest version the definitions table holds, in characters.
pub(crate) const MAX_VERSION_LEN: usize = 32;

/// A query of the crate's, with its parameters bound.
pub(crate) type Query<D> = sqlx::query::Query<'static, D, <D as sqlx::Database>::Arguments>;

/// What one database spells differently for the definitions and history tables. Each implementation
/// is in this file, next to the others, so the three can be read side by side.
pub(crate) trait JobTables: sqlx::Database {
    /// The longest table or index name the database keeps, in bytes (`None`: no limit).
    const IDENT_MAX: Option<usize>;
    /// The history table's id: an integer the database assigns in increasing order.
    const AUTO_ID: &'static str;
    /// The error text's column, 1,000 characters at most ([`shedlock_core::jobs::MAX_ERROR_LEN`]).
    const ERROR_COLUMN: &'static str;
    /// Whether the history table's index is declared inside its `CREATE TABLE` (MySQL) rather than
    /// by a `CREATE INDEX` of its own.
    const INLINE_INDEX: bool;
    /// What starts a transaction of several statements.
    const BEGIN: &'static str = "BEGIN";
    /// Whether [`record`](Self::record)'s first statement (the insert) and the rest (the prune)
    /// are calls of their own (MySQL: see `portable::record`), rather than one statement
    /// (Postgres) or one transaction (SQLite, whose one writer cannot deadlock).
    const RECORD_APART: bool;

    /// The SQL of `now + param`. The span is bound as the dialect binds durations.
    fn plus(param: &str) -> String;
    /// The SQL of `now - param`. The span is bound as the dialect binds durations.
    fn minus(param: &str) -> String;

    /// The statements of a publish ([`crate::definitions`]), with their parameters. They run in one
    /// transaction, or are one statement.
    fn publish(t: &Names, p: &Publish<'_>) -> Vec<Query<Self>>;

    /// The statements that write a history entry and prune ([`crate::history`]): the first writes
    /// it, any after it prune.
    fn record(t: &Names, r: &Record<'_>) -> Vec<Query<Self>>;
}

/// The arguments of a publish, checked, with no job twice.
#[derive(Debug)]
pub(crate) struct Publish<'a> {
    pub(crate) replica: &'a str,
    pub(crate) version: &'a str,
    /// (job, lock name, spec), each job once. The last given wins.
    pub(crate) entries: Vec<(&'a str, &'a str, &'a str)>,
    pub(crate) ttl: Duration,
}

/// The arguments of a history write.
#[derive(Debug)]
pub(crate) struct Record<'a> {
    pub(crate) lock_name: &'a str,
    pub(crate) fire: chrono::DateTime<chrono::Utc>,
    pub(crate) runner: &'a str,
    pub(crate) started: chrono::DateTime<chrono::Utc>,
    pub(crate) outcome: &'a str,
    pub(crate) error: Option<&'a str>,
    /// How many of the lock's entries are kept, the new one included (at least 1).
    pub(crate) keep: u32,
    pub(crate) max_age: Option<Duration>,
}

/// The names of the two tables, quoted for the dialect, and of the history table's index.
#[derive(Debug, Clone)]
pub(crate) struct Names {
    /// `<table>_jobs`, as it appears in messages (`schema.table_jobs`).
    pub(crate) jobs_display: String,
    /// `<table>_history`, as it appears in messages.
    pub(crate) history_display: String,
    /// `<table>_jobs`, quoted.
    pub(crate) jobs: String,
    /// `<table>_history`, quoted.
    pub(crate) history: String,
    /// The `CREATE INDEX`'s index name, quoted, and the table it is on as that statement names it.
    /// On SQLite the index name carries the schema.
    pub(crate) index: String,
    pub(crate) index_on: String,
}

/// `ident` in `quote`'s quotes, for the derived names, which may be longer than the lock table's
/// limit. [`names`] checks each against the database's own. They are plain identifiers, so there is
/// nothing to escape.
fn quoted(quote: Quote, ident: &str) -> String {
    match quote {
        Quote::Double => format!("\"{ident}\""),
        Quote::Backtick => format!("`{ident}`"),
    }
}

/// The derived names of `settings`' lock table.
///
/// # Errors
///
/// [`Error::is_invalid_config`] when a derived name is longer than the database keeps, saying how
/// long the lock table's name may be.
pub(crate) fn names<D: Dialect>(settings: &Settings) -> Result<Names> {
    let TableName { schema, table } = &settings.table;
    let jobs = format!("{table}{JOBS_SUFFIX}");
    let history = format!("{table}{HISTORY_SUFFIX}");
    let index = format!("{history}{INDEX_SUFFIX}");
    let longest = if D::INLINE_INDEX { &history } else { &index };
    if let Some(max) = D::IDENT_MAX
        && longest.len() > max
    {
        return Err(Error::invalid_config(format!(
            "the lock table name {table:?} is too long for the job definitions and history \
             tables: {longest:?} would be {} characters and {} keeps {max}; use a lock table \
             name of at most {} characters",
            longest.len(),
            D::DATABASE,
            max - (longest.len() - table.len()),
        )));
    }
    let q = |ident: &str| match schema {
        Some(schema) => format!("{}.{}", quoted(D::QUOTE, schema), quoted(D::QUOTE, ident)),
        None => quoted(D::QUOTE, ident),
    };
    let display = |ident: &str| match schema {
        Some(schema) => format!("{schema}.{ident}"),
        None => ident.to_owned(),
    };
    // SQLite qualifies the index and names its table bare; Postgres the reverse.
    let (index, index_on) = if D::MIGRATIONS == "sqlite" {
        (q(&index), quoted(D::QUOTE, &history))
    } else {
        (quoted(D::QUOTE, &index), q(&history))
    };
    Ok(Names {
        jobs_display: display(&jobs),
        history_display: display(&history),
        jobs: q(&jobs),
        history: q(&history),
        index,
        index_on,
    })
}

/// Which of the two tables a statement is about, for its errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Which {
    Jobs,
    History,
}

/// The `CREATE TABLE IF NOT EXISTS` of the definitions table.
pub(crate) fn jobs_ddl<D: Dialect>(s: &Settings, t: &Names) -> String {
    let q = |c: &str| quoted(D::QUOTE, c);
    format!(
        "CREATE TABLE IF NOT EXISTS {} (\n    \
         {} VARCHAR({MAX_JOB_LEN}) NOT NULL,\n    \
         {} VARCHAR({MAX_JOB_LEN}) NOT NULL,\n    \
         {} VARCHAR({}) NOT NULL,\n    \
         {} VARCHAR({MAX_VERSION_LEN}) NOT NULL,\n    \
         {} TEXT NOT NULL,\n    \
         {} {time},\n    \
         {} {time},\n    \
         PRIMARY KEY ({}, {})\n){}",
        t.jobs,
        q("job"),
        q("replica"),
        q("lock_name"),
        s.max_name_len,
        q("version"),
        q("spec"),
        q("published"),
        q("expires"),
        q("job"),
        q("replica"),
        D::TABLE_OPTIONS,
        time = D::TIME_COLUMN,
    )
}

/// The statements that create the history table: its `CREATE TABLE IF NOT EXISTS` and, where the
/// index is not declared inside it, the index's `CREATE INDEX IF NOT EXISTS`.
pub(crate) fn history_ddl<D: Dialect>(s: &Settings, t: &Names) -> Vec<String> {
    let q = |c: &str| quoted(D::QUOTE, c);
    let inline = if D::INLINE_INDEX {
        format!(
            ",\n    KEY {} ({}, {})",
            q("lock_name_id"),
            q("lock_name"),
            q("id")
        )
    } else {
        String::new()
    };
    let mut ddl = vec![format!(
        "CREATE TABLE IF NOT EXISTS {} (\n    \
         {} {},\n    \
         {} VARCHAR({}) NOT NULL,\n    \
         {} {time},\n    \
         {} VARCHAR({MAX_JOB_LEN}) NOT NULL,\n    \
         {} {time},\n    \
         {} {time},\n    \
         {} VARCHAR(16) NOT NULL,\n    \
         {} {}{inline}\n){}",
        t.history,
        q("id"),
        D::AUTO_ID,
        q("lock_name"),
        s.max_name_len,
        q("fire"),
        q("runner"),
        q("started"),
        q("ended"),
        q("outcome"),
        q("error"),
        D::ERROR_COLUMN,
        D::TABLE_OPTIONS,
        time = D::TIME_COLUMN,
    )];
    if !D::INLINE_INDEX {
        ddl.push(format!(
            "CREATE INDEX IF NOT EXISTS {} ON {} ({}, {})",
            t.index,
            t.index_on,
            q("lock_name"),
            q("id")
        ));
    }
    ddl
}

/// Every statement of the two tables, in order.
#[cfg(test)]
pub(crate) fn all_ddl<D: Dialect>(s: &Settings, t: &Names) -> Vec<String> {
    let mut all = vec![jobs_ddl::<D>(s, t)];
    all.extend(history_ddl::<D>(s, t));
    all
}

/// The migration `0004_jobs_and_history.sql` holds the built-in DDL of the default names.
#[cfg(test)]
pub(crate) fn assert_migration<D: Dialect>() {
    let settings = Settings::defaults();
    let t = names::<D>(&settings).expect("the default names fit");
    crate::link::assert_same_ddl(
        &format!("{}/0004_jobs_and_history.sql", D::MIGRATIONS),
        &all_ddl::<D>(&settings, &t).join(";\n"),
    );
}

/// The error of a statement on the definitions or history table: for a missing table, what to run,
/// otherwise the database's error on `what`.
pub(crate) fn job_table_error<D: Dialect>(
    s: &Settings,
    target: &str,
    which: Which,
    what: &str,
    error: sqlx::Error,
) -> Error {
    if matches!(D::classify(&error), Some(Fault::MissingTable))
        && let Ok(t) = names::<D>(s)
    {
        return missing_table::<D>(s, &t, which, crate::cause::source(error));
    }
    Error::backend(format!("{what} on {target}"), crate::cause::source(error))
}

/// The missing-table error of the definitions or history table, naming the statement to run.
pub(crate) fn missing_table<D: Dialect>(
    s: &Settings,
    t: &Names,
    which: Which,
    source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
) -> Error {
    let (table, ddl, purpose) = match which {
        Which::Jobs => (
            &t.jobs_display,
            jobs_ddl::<D>(s, t),
            "job definitions need it",
        ),
        Which::History => (
            &t.history_display,
            history_ddl::<D>(s, t).join("; "),
            "run history needs it",
        ),
    };
    Error::missing_table(
        table.clone(),
        format!(
            "{purpose}: create it with {p}::create_table_if_not_exists(), with the migration \
             migrations/{m}/0004_jobs_and_history.sql of shedlock-sqlx, or run: {}",
            ddl.split_whitespace().collect::<Vec<_>>().join(" "),
            p = D::PROVIDER,
            m = D::MIGRATIONS,
        ),
        source,
    )
}

/// Runs `queries` on the attempt's connection, and answers their rows affected, in order. One query
/// alone runs as any statement. Several run in one transaction, the dialect's
/// [`JobTables::BEGIN`] … `COMMIT`, rolled back on an error. Behind a transaction pooler that is
/// the pooler's unit already, and the statements go unnamed.
pub(crate) async fn run_queries<D: Dialect>(
    c: &mut Checkout<'_, D>,
    pooler: bool,
    queries: Vec<Query<D>>,
    map: &Map<'_>,
) -> Result<Vec<u64>>
where
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
    D::Arguments: IntoArguments<D>,
{
    let mut queries = queries;
    if queries.len() == 1
        && let Some(query) = queries.pop()
    {
        let done = statement!(*c, query, map, execute)?;
        return Ok(vec![D::rows_affected(&done)]);
    }
    let call = c.call();
    let begun = call.timed(sqlx::raw_sql(D::BEGIN).execute(c.conn())).await;
    c.settle(begun, map)?;
    let mut counts = Vec::with_capacity(queries.len());
    for query in queries {
        let outcome = call
            .timed(query.persistent(!pooler).execute(c.conn()))
            .await;
        match c.settle(outcome, map) {
            Ok(done) => counts.push(D::rows_affected(&done)),
            Err(error) => {
                // A statement the database refused: end the transaction. A connection whose
                // statement did not finish stays in flight and is closed, which ends it too.
                let rolled_back = call
                    .timed(sqlx::raw_sql("ROLLBACK").execute(c.conn()))
                    .await;
                let _ = c.settle(rolled_back, map);
                return Err(error);
            }
        }
    }
    let committed = call.timed(sqlx::raw_sql("COMMIT").execute(c.conn())).await;
    c.settle(committed, map)?;
    Ok(counts)
}

impl<D: Dialect> Provider<D>
where
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
    for<'q> &'q str: Encode<'q, D> + Type<D>,
    for<'q> Option<&'q str>: Encode<'q, D> + Type<D>,
    for<'q> i64: Encode<'q, D> + Decode<'q, D> + Type<D>,
    for<'r> String: Decode<'r, D> + Type<D>,
    usize: ColumnIndex<D::Row>,
    D::Arguments: IntoArguments<D>,
{
    /// Whether `table` exists: a query that reads no row, whose missing-table error says no.
    async fn job_table_exists(&self, call: &Call, table: &str, which: Which) -> Result<bool> {
        let link = self.link();
        let sql = format!("SELECT 1 FROM {table} WHERE 1 = 0");
        let sql = &sql;
        let missing = std::sync::atomic::AtomicBool::new(false);
        let missing = &missing;
        let s = &link.settings;
        let target = link.target();
        let map = &|e: sqlx::Error| {
            if matches!(D::classify(&e), Some(Fault::MissingTable)) {
                missing.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            job_table_error::<D>(s, target, which, "look for the table", e)
        };
        let found = link
            .run(call, |mut c| async move {
                let query = sqlx::query(AssertSqlSafe(sql.clone()));
                statement!(c, query, map, fetch_optional).map(drop)
            })
            .await;
        match found {
            Ok(()) => Ok(true),
            Err(_) if missing.load(std::sync::atomic::Ordering::Relaxed) => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// The statements that create whichever of the definitions and history tables is missing, for
    /// `LockAdmin::missing_ddl`, empty when both exist. A lock table whose name is too long for the
    /// derived names gets none, with a warning. The calls that need the tables say why.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub(crate) async fn missing_job_tables(&self) -> Result<Vec<String>> {
        let link = self.link();
        let s = &link.settings;
        let t = match names::<D>(s) {
            Ok(t) => t,
            Err(error) => {
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "no DDL for the job definitions and history tables"
                );
                return Ok(Vec::new());
            }
        };
        let call = &link.call("missing_ddl");
        let mut missing = Vec::new();
        if !self.job_table_exists(call, &t.jobs, Which::Jobs).await? {
            missing.push(jobs_ddl::<D>(s, &t));
        }
        if !self
            .job_table_exists(call, &t.history, Which::History)
            .await?
        {
            missing.extend(history_ddl::<D>(s, &t));
        }
        Ok(missing)
    }

    /// Creates whichever of the definitions and history tables is missing (part of
    /// `create_table_if_not_exists`). A lock table whose name is too long for the derived names
    /// gets none, with a warning: the lock table works without them.
    pub(crate) async fn create_job_tables(&self) -> Result<()> {
        let link = self.link();
        let s = &link.settings;
        let t = match names::<D>(s) {
            Ok(t) => t,
            Err(error) => {
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "not creating the job definitions and history tables"
                );
                return Ok(());
            }
        };
        let call = &link.call("create_table_if_not_exists").about(format!(
            "tables {} and {}",
            t.jobs_display, t.history_display
        ));
        let mut todo = Vec::new();
        if !self.job_table_exists(call, &t.jobs, Which::Jobs).await? {
            todo.push((Which::Jobs, vec![jobs_ddl::<D>(s, &t)]));
        }
        if !self
            .job_table_exists(call, &t.history, Which::History)
            .await?
        {
            todo.push((Which::History, history_ddl::<D>(s, &t)));
        }
        let target = link.target();
        for (which, statements) in todo {
            for ddl in statements {
                let create = format!("{}{ddl}", D::BEFORE_CREATE);
                let create = &create;
                let map = &|e| job_table_error::<D>(s, target, which, "create the table", e);
                link.run(call, |mut c| async move {
                    let run = || sqlx::raw_sql(AssertSqlSafe(create.clone()));
                    let mut outcome = c.call().timed(run().execute(c.conn())).await;
                    // Replicas creating the tables at once: on Postgres all but one may fail
                    // (see `create_table_if_not_exists`); the repeat finds them and skips.
                    if matches!(&outcome, Ok(Err(sqlx::Error::Database(_)))) {
                        outcome = c.call().timed(run().execute(c.conn())).await;
                    }
                    c.settle(outcome, map).map(drop)
                })
                .await?;
            }
        }
        Ok(())
    }
}

#[cfg(feature = "postgres")]
mod postgres {
    use sqlx::postgres::Postgres;

    use super::{JobTables, Names, Publish, Query, Record};
    use crate::dialect::Dialect;
    use crate::postgres::NOW;

    impl JobTables for Postgres {
        const IDENT_MAX: Option<usize> = Some(63);
        const AUTO_ID: &'static str = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY";
        const ERROR_COLUMN: &'static str = "VARCHAR(1000) NULL";
        const INLINE_INDEX: bool = false;
        const RECORD_APART: bool = false;

        fn plus(param: &str) -> String {
            format!("({NOW} + {param})")
        }

        fn minus(param: &str) -> String {
            format!("({NOW} - {param})")
        }

        /// One statement: the expired entries go, and every entry is upserted from arrays. One
        /// statement may not both delete and update a row, so expired entries this publish writes
        /// again do not go.
        fn publish(t: &Names, p: &Publish<'_>) -> Vec<Query<Self>> {
            let sql = format!(
                "WITH gone AS (DELETE FROM {jobs} WHERE expires <= {NOW} \
                 AND NOT (replica = $1 AND job = ANY($4))) \
                 INSERT INTO {jobs} (job, replica, lock_name, version, spec, published, expires) \
                 SELECT d.job, $1, d.lock_name, $2, d.spec, {NOW}, {expires} \
                 FROM unnest($4::text[], $5::text[], $6::text[]) AS d (job, lock_name, spec) \
                 ON CONFLICT (job, replica) DO UPDATE SET lock_name = EXCLUDED.lock_name, \
                 version = EXCLUDED.version, spec = EXCLUDED.spec, \
                 published = EXCLUDED.published, expires = EXCLUDED.expires",
                jobs = t.jobs,
                expires = Self::plus("$3"),
            );
            let jobs: Vec<&str> = p.entries.iter().map(|e| e.0).collect();
            let locks: Vec<&str> = p.entries.iter().map(|e| e.1).collect();
            let specs: Vec<&str> = p.entries.iter().map(|e| e.2).collect();
            vec![
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(p.replica)
                    .bind(p.version)
                    .bind(Self::span(p.ttl))
                    .bind(jobs)
                    .bind(locks)
                    .bind(specs),
            ]
        }

        /// One statement: the insert, and the prune of the lock's older entries. The new row is not
        /// visible to the `DELETE` of the same statement, so it keeps `keep - 1` of the others. It
        /// shares the release's durability: `synchronous_commit = off` for this statement's
        /// transaction, set once by the insert's `WHERE`.
        fn record(t: &Names, r: &Record<'_>) -> Vec<Query<Self>> {
            let too_old = if r.max_age.is_some() {
                format!(" OR ended < {}", Self::minus("$8"))
            } else {
                String::new()
            };
            let sql = format!(
                "WITH ins AS (INSERT INTO {h} (lock_name, fire, runner, started, ended, outcome, \
                 error) SELECT $1, $2, $3, $4, {NOW}, $5, $6 \
                 WHERE set_config('synchronous_commit', 'off', true) IS NOT NULL) \
                 DELETE FROM {h} WHERE lock_name = $1 AND (id <= (SELECT id FROM {h} \
                 WHERE lock_name = $1 ORDER BY id DESC LIMIT 1 OFFSET $7){too_old})",
                h = t.history,
            );
            let query = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(r.lock_name)
                .bind(Self::time(r.fire))
                .bind(r.runner)
                .bind(Self::time(r.started))
                .bind(r.outcome)
                .bind(r.error)
                .bind(i64::from(r.keep) - 1);
            let query = match r.max_age {
                Some(age) => query.bind(Self::span(age)),
                None => query,
            };
            vec![query]
        }
    }
}

/// The statements of MySQL and SQLite, which have no arrays and no data-modifying `WITH`.
///
/// A publish is a transaction of a `DELETE` and one multi-row upsert per chunk. A history write is
/// an `INSERT`, then a `DELETE`: on MySQL each a call of its own, on SQLite one transaction. `pin`
/// and `hint` are MySQL's time-zone pin.
/// `upsert` is the dialect's conflict clause. `keep_from` is the subquery of the first entry to
/// prune.
#[cfg(any(feature = "mysql", feature = "sqlite"))]
mod portable {
    use super::{Names, Publish, Query, Record};
    use crate::dialect::Dialect;

    /// Rows per multi-row `INSERT`. Each has 6 parameters, far below every limit.
    const CHUNK: usize = 100;

    pub(super) fn publish<D: Dialect>(t: &Names, p: &Publish<'_>, upsert: &str) -> Vec<Query<D>>
    where
        for<'q> &'q str: sqlx::Encode<'q, D> + sqlx::Type<D>,
    {
        let (pin, hint, now) = (D::PIN, D::HINT, D::NOW);
        let jobs = &t.jobs;
        let mut queries = vec![sqlx::query(sqlx::AssertSqlSafe(format!(
            "{pin}DELETE {hint} FROM {jobs} WHERE expires <= {now}"
        )))];
        for chunk in p.entries.chunks(CHUNK) {
            let row = format!("(?, ?, ?, ?, ?, {now}, {})", D::plus("?"));
            let rows = vec![row; chunk.len()].join(", ");
            let sql = format!(
                "{pin}INSERT {hint} INTO {jobs} \
                 (job, replica, lock_name, version, spec, published, expires) VALUES {rows} {upsert}"
            );
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (job, lock, spec) in chunk {
                query = query
                    .bind(*job)
                    .bind(p.replica)
                    .bind(*lock)
                    .bind(p.version)
                    .bind(*spec)
                    .bind(D::span(p.ttl));
            }
            queries.push(query);
        }
        queries
    }

    /// The `DELETE` sees the new row and keeps `keep` entries. On MySQL it runs after the
    /// `INSERT` has committed, not in one transaction with it: on MariaDB, two jobs' writes of the
    /// same instant, each holding its insert's locks while its prune read the lock's entries
    /// backwards (which locks the first entry of the next lock name), deadlocked 56 to 76 of 600
    /// writes of three writers; as two statements, none of 1,200 did. MySQL may read the table a `DELETE`
    /// deletes from only through a derived table, whose `LIMIT` keeps it from being merged.
    pub(super) fn record<D: Dialect>(t: &Names, r: &Record<'_>) -> Vec<Query<D>>
    where
        for<'q> &'q str: sqlx::Encode<'q, D> + sqlx::Type<D>,
        for<'q> i64: sqlx::Encode<'q, D> + sqlx::Type<D>,
        for<'q> Option<&'q str>: sqlx::Encode<'q, D> + sqlx::Type<D>,
    {
        let (pin, hint, now, h) = (D::PIN, D::HINT, D::NOW, &t.history);
        let insert = sqlx::query(sqlx::AssertSqlSafe(format!(
            "{pin}INSERT {hint} INTO {h} (lock_name, fire, runner, started, ended, outcome, error) \
             VALUES (?, ?, ?, ?, {now}, ?, ?)"
        )))
        .bind(r.lock_name)
        .bind(D::time(r.fire))
        .bind(r.runner)
        .bind(D::time(r.started))
        .bind(r.outcome)
        .bind(r.error);
        let too_old = if r.max_age.is_some() {
            format!(" OR ended < {}", D::minus("?"))
        } else {
            String::new()
        };
        let prune = sqlx::query(sqlx::AssertSqlSafe(format!(
            "{pin}DELETE {hint} FROM {h} WHERE lock_name = ? AND (id <= (SELECT id FROM \
             (SELECT id FROM {h} WHERE lock_name = ? ORDER BY id DESC LIMIT 1 OFFSET ?) AS nth)\
             {too_old})"
        )))
        .bind(r.lock_name)
        .bind(r.lock_name)
        .bind(i64::from(r.keep));
        let prune = match r.max_age {
            Some(age) => prune.bind(D::span(age)),
            None => prune,
        };
        vec![insert, prune]
    }
}

#[cfg(feature = "mysql")]
mod mysql {
    use sqlx::mysql::MySql;

    use super::{JobTables, Names, Publish, Query, Record, portable};
    use crate::mysql::NOW;

    impl JobTables for MySql {
        const IDENT_MAX: Option<usize> = Some(64);
        const AUTO_ID: &'static str = "BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY";
        const ERROR_COLUMN: &'static str = "VARCHAR(1000) NULL";
        const INLINE_INDEX: bool = true;
        const RECORD_APART: bool = true;

        fn plus(param: &str) -> String {
            format!("TIMESTAMPADD(MICROSECOND, {param}, {NOW})")
        }

        fn minus(param: &str) -> String {
            format!("TIMESTAMPADD(MICROSECOND, 0 - {param}, {NOW})")
        }

        /// `VALUES()` names the inserted row on MySQL and MariaDB alike.
        fn publish(t: &Names, p: &Publish<'_>) -> Vec<Query<Self>> {
            portable::publish::<Self>(
                t,
                p,
                "ON DUPLICATE KEY UPDATE lock_name = VALUES(lock_name), \
                 version = VALUES(version), spec = VALUES(spec), \
                 published = VALUES(published), expires = VALUES(expires)",
            )
        }

        fn record(t: &Names, r: &Record<'_>) -> Vec<Query<Self>> {
            portable::record::<Self>(t, r)
        }
    }
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use sqlx::sqlite::Sqlite;

    use super::{JobTables, Names, Publish, Query, Record, portable};

    /// The text format of the time columns (as `sqlite.rs`'s).
    const FORMAT: &str = "%Y-%m-%d %H:%M:%f";

    impl JobTables for Sqlite {
        /// SQLite limits no name's length.
        const IDENT_MAX: Option<usize> = None;
        /// The rowid: above every id in the table.
        const AUTO_ID: &'static str = "INTEGER PRIMARY KEY";
        const ERROR_COLUMN: &'static str = "TEXT NULL";
        const INLINE_INDEX: bool = false;
        const RECORD_APART: bool = false;
        /// Takes the write lock at once: a deferred transaction that reads first may fail to take
        /// it later without waiting.
        const BEGIN: &'static str = "BEGIN IMMEDIATE";

        /// The span is a date modifier (`+600.000 seconds`).
        fn plus(param: &str) -> String {
            format!("strftime('{FORMAT}', 'now', {param})")
        }

        fn minus(param: &str) -> String {
            format!("strftime('{FORMAT}', 'now', '-' || substr({param}, 2))")
        }

        fn publish(t: &Names, p: &Publish<'_>) -> Vec<Query<Self>> {
            portable::publish::<Self>(
                t,
                p,
                "ON CONFLICT (job, replica) DO UPDATE SET lock_name = excluded.lock_name, \
                 version = excluded.version, spec = excluded.spec, \
                 published = excluded.published, expires = excluded.expires",
            )
        }

        fn record(t: &Names, r: &Record<'_>) -> Vec<Query<Self>> {
            portable::record::<Self>(t, r)
        }
    }
}
