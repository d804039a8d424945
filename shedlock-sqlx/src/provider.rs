//! The lock provider, written once over a [`Dialect`]: validation, per-call deadlines, retries on
//! dead connections, the lazily checked table, constructors, create-table and the admin calls,
//! whose statements and row reading are in [`crate::admin`]. The public providers
//! (`PgLockProvider`, …) are thin types around it, made by
//! [`sql_lock_provider!`](crate::provider_types::sql_lock_provider).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use shedlock_core::{
    Error, Result,
    admin::LockEntry,
    jobs::RunReport,
    provider::{Fire, FireClaim, LockRecord, fire_decision, validate_at_least, validate_at_most},
};
use sqlx::pool::PoolOptions;
use sqlx::{AssertSqlSafe, ColumnIndex, Decode, Encode, Executor, IntoArguments, Pool, Row, Type};

use crate::admin::{check_expected, entry, missing_columns_ddl, statements};
use crate::builder::{Checked, Settings};
use crate::conns::{ConnectionStats, Connections, Own};
use crate::dialect::{
    Acquire, Attempt, ClaimFire, Dialect, Extend, Fault, LAST_FIRE, Map, PAUSE_COLUMNS,
    STATE_COLUMNS, Seen, StateKind, Statements, TRIGGER_COLUMNS, check_columns, fire_time,
    state_column_type,
};
#[cfg(any(feature = "postgres", feature = "sqlite"))]
use crate::dialect::{seen_holder, seen_pause};
use crate::link::statement;
use crate::link::{AfterLostReply, Call, DEFAULT_POOL_SIZE, Link, Schema};

mod fire_batch;
mod release_batch;

/// A lock provider on `D`'s table.
pub(crate) struct Provider<D: Dialect> {
    inner: Arc<Inner<D>>,
}

impl<D: Dialect> Clone for Provider<D> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

struct Inner<D: Dialect> {
    link: Link<D>,
    /// Statements for a table without (`[0]`) and with (`[1]`) the token column.
    sql: [Statements<D::Extra>; 2],
    ddl: String,
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
    pub(crate) fn new(source: Checked<D>, settings: Settings) -> Self {
        let (conns, target) = match source {
            Checked::Own(options, max) => {
                let target = D::target(&options);
                let anchor = D::keeps_anchor(&options);
                (
                    Connections::Own(Own::new(
                        options,
                        D::setup,
                        max,
                        anchor,
                        settings.retry_refused,
                    )),
                    target,
                )
            }
            Checked::Pool(pool) => {
                let target = D::target(&pool.connect_options());
                (Connections::Pool(pool), target)
            }
        };
        let table = settings.table.quoted(D::QUOTE);
        let cols = settings.columns.quoted(D::QUOTE);
        let sql = [
            D::statements(&table, &cols, false),
            D::statements(&table, &cols, true),
        ];
        let ddl = ddl::<D>(&settings, true);
        Self {
            inner: Arc::new(Inner {
                link: Link::new(conns, settings, target),
                sql,
                ddl,
            }),
        }
    }

    /// Options for a sqlx pool of the application's own, to pass to `new(pool)` (see the public
    /// providers' `pool_options`).
    pub(crate) fn pool_options() -> PoolOptions<D> {
        PoolOptions::new()
            .max_connections(DEFAULT_POOL_SIZE)
            .min_connections(1)
            .test_before_acquire(false)
            .acquire_timeout(shedlock_core::provider::DEFAULT_CALL_TIMEOUT)
            .after_connect(|conn, _meta| D::setup(conn))
    }

    /// Opens one connection now and keeps it for the first call, so a wrong URL, password or
    /// database fails here, naming the database and the cause.
    pub(crate) async fn warm_up(&self) -> Result<()> {
        let link = &self.inner.link;
        let call = link.call("connect");
        match link.conns.checkout(&call).await? {
            Ok(conn) => {
                conn.give_back();
                Ok(())
            }
            Err(error) => Err(link.checkout_error(&call, error)),
        }
    }

    /// The application's pool, for a provider built on one.
    pub(crate) fn pool(&self) -> Option<&Pool<D>> {
        match &self.inner.link.conns {
            Connections::Pool(pool) => Some(pool),
            Connections::Own(_) => None,
        }
    }

    pub(crate) fn connection_stats(&self) -> ConnectionStats {
        self.inner.link.stats()
    }

    pub(crate) fn ddl(&self) -> &str {
        &self.inner.ddl
    }

    pub(crate) fn settings(&self) -> &Settings {
        &self.inner.link.settings
    }

    /// Both layouts' statements, for the dialects' tests.
    #[cfg(all(test, any(feature = "postgres", feature = "mysql")))]
    pub(crate) fn all_statements(&self) -> &[Statements<D::Extra>; 2] {
        &self.inner.sql
    }

    pub(crate) async fn create_table_if_not_exists(&self) -> Result<()> {
        let link = &self.inner.link;
        let call = &link
            .call("create_table_if_not_exists")
            .about(format!("table {}", link.settings.table));
        let look = &|e| self.map_error(e, "read the lock table's columns");
        if D::detect(link, call, look).await?.is_some() {
            // It exists: no CREATE, which needs the privilege, and whose "already exists,
            // skipping" notice Postgres would send on every start (sqlx logs notices at INFO).
            return Ok(());
        }
        let map = |e| self.map_error(e, "create the lock table");
        // Replicas creating the table at once: the statement may still meet it (the notice is
        // silenced by `BEFORE_CREATE`).
        let create = format!("{}{}", D::BEFORE_CREATE, self.inner.ddl);
        let create = &create;
        link.run(call, |mut c| async move {
            let ddl = || sqlx::raw_sql(AssertSqlSafe(create.clone()));
            let mut outcome = call.timed(ddl().execute(c.conn())).await;
            // Postgres: of sessions creating the table at once (replicas starting
            // together), all but one may fail (a unique violation in its catalog, or "type
            // … already exists") instead of skipping. The error comes once the winner has
            // committed, so the repeat finds the table and skips; a real error (rights,
            // syntax) fails the repeat the same way and is returned.
            if matches!(&outcome, Ok(Err(sqlx::Error::Database(_)))) {
                tracing::debug!("creating the lock table failed; once more, in case of a race");
                outcome = call.timed(ddl().execute(c.conn())).await;
            }
            c.settle(outcome, map).map(drop)
        })
        .await
    }

    pub(crate) async fn acquire(
        &self,
        name: &str,
        at_most: Duration,
        owner: &str,
    ) -> Result<Option<LockRecord>> {
        self.inner.link.check_name(name)?;
        validate_at_most(at_most)?;
        let (call, schema) = self.start("acquire", name).await?;
        schema.check_owner(owner)?;
        let what = format!("acquire lock {name:?}");
        // Not repeated after a lost reply: if the lost statement had won, a repeat would find
        // the row held (by this very call, until `at_most`) and answer `None`, "held elsewhere".
        let call = &call.after_lost_reply(AfterLostReply::Fail(what.clone()));
        let map = &self.mapper(what);
        let args = Acquire {
            name,
            at_most,
            owner,
            schema,
        };
        self.attempts(call, map, schema, |at| D::acquire(at, args))
            .await
    }

    /// Claims `fire` (see
    /// [`LockProvider::claim_fire`](shedlock_core::provider::LockProvider::claim_fire)), deciding
    /// in the database. A claim that did not win answers from the row as the database saw it,
    /// through [`fire_decision`], its pause included where the table has the pause columns. Where that row says the fire was claimable after all, a racing
    /// claimer changed it between the dialect's look and its claim, and the call looks again, a few
    /// times at most.
    pub(crate) async fn claim_fire(
        &self,
        name: &str,
        fire: &Fire,
        at_most: Duration,
        owner: &str,
    ) -> Result<FireClaim> {
        const LOOKS: usize = 4;
        self.inner.link.check_name(name)?;
        validate_at_most(at_most)?;
        let (call, schema) = self.start("claim_fire", name).await?;
        if !schema.has_last_fire {
            return Err(self.no_last_fire());
        }
        schema.check_owner(owner)?;
        let what = format!("claim a fire of lock {name:?}");
        // Not repeated after a lost reply: if the lost statement had claimed, a repeat would
        // find the fire recorded and answer `ClaimedElsewhere`, and the fire would run nowhere.
        // The error lets the scheduler tell from a later claim's `holder` whether it committed.
        let call = &call.after_lost_reply(AfterLostReply::Fail(what.clone()));
        let map = &self.mapper(what);
        let args = ClaimFire {
            lock: Acquire {
                name,
                at_most,
                owner,
                schema,
            },
            at: fire_time(fire.at(), D::TIME_PRECISION_MICROS),
            next: fire_time(fire.next(), D::TIME_PRECISION_MICROS),
        };
        // The fire as stored: its instant rounded up to the columns' precision.
        let stored = Fire::new(args.at, args.next)?;
        for _ in 0..LOOKS {
            match self
                .attempts(call, map, schema, |at| D::claim_fire(at, args))
                .await?
            {
                Seen::Won(record) => return Ok(FireClaim::Claimed(record)),
                Seen::Row {
                    now,
                    recorded,
                    holder,
                    pause,
                } => {
                    if let Some(reply) =
                        fire_decision(&stored, now, holder.as_ref(), recorded, pause.as_ref())
                    {
                        return Ok(reply);
                    }
                }
                Seen::Changed => {}
            }
            tracing::debug!(name, %fire, "the lock row changed during a fire claim; looking again");
        }
        Err(Error::backend_message(format!(
            "claim a fire of lock {name:?}: the row changed under each of {LOOKS} attempts"
        )))
    }

    /// The error of a fire claim on a table without the [`LAST_FIRE`] column.
    fn no_last_fire(&self) -> Error {
        Error::unsupported_because(
            "claim_fire",
            format!(
                "the lock table {} has no {LAST_FIRE} column, so it cannot record fires (Java \
                 ShedLock's table); add it with the migration migrations/{}/0002_last_fire.sql \
                 of shedlock-sqlx, i.e. run: {}, and restart the service",
                self.inner.link.settings.table,
                D::MIGRATIONS,
                add_last_fire::<D>(&self.inner.link.settings),
            ),
        )
    }

    pub(crate) async fn extend(
        &self,
        record: &LockRecord,
        at_most: Duration,
    ) -> Result<Option<LockRecord>> {
        validate_at_most(at_most)?;
        let (call, schema) = &self.start("extend", record.name()).await?;
        let token = schema.record_token(record)?;
        let map = &self.mapper(format!("extend lock {:?}", record.name()));
        let args = Extend {
            record,
            token,
            at_most,
        };
        self.attempts(call, map, *schema, |at| D::extend(at, args))
            .await
    }

    pub(crate) async fn release(&self, record: &LockRecord, at_least: Duration) -> Result<bool> {
        validate_at_least(at_least)?;
        let (call, schema) = &self.start("release", record.name()).await?;
        let token = schema.record_token(record)?;
        let map = &self.mapper(format!("release lock {:?}", record.name()));
        let done = self
            .attempts(call, map, *schema, |mut at| async move {
                let query = Self::identified(&at.sql.release, at_least, record, token);
                statement!(at.c, query, at.map, execute)
            })
            .await?;
        Ok(D::rows_affected(&done) > 0)
    }

    /// Releases `record` and records `run` in its row in one statement (see
    /// [`LockProvider::release_run`](shedlock_core::provider::LockProvider::release_run)). A table
    /// without the job state columns, found once with the table's layout, answers unsupported
    /// without a statement.
    pub(crate) async fn release_run(
        &self,
        record: &LockRecord,
        at_least: Duration,
        run: &RunReport,
    ) -> Result<bool> {
        validate_at_least(at_least)?;
        let began = tokio::time::Instant::now();
        // Repeated after a lost reply, as a release is: the statement leaves the counts alone
        // when the row already records this acquisition's run (`release_run_state`).
        let (call, schema) = &self.start("release_run", record.name()).await?;
        if !schema.has_job_state {
            return Err(self.no_job_state());
        }
        let token = schema.record_token(record)?;
        let map = &self.mapper(format!(
            "release lock {:?} recording its run",
            record.name()
        ));
        let outcome = run.outcome.clone().capped();
        let (kind, error) = (outcome.kind(), outcome.error());
        let fire = D::time(fire_time(run.fire, D::TIME_PRECISION_MICROS));
        let fire = &fire;
        let done = self
            .attempts(call, map, *schema, |mut at| async move {
                let sql = &at.sql.release_run;
                let query = if D::POSITIONAL {
                    // In order of appearance: `lock_until`'s duration; for each count the fire
                    // (is this run recorded already?) and the outcome kind; the last run; the
                    // guard.
                    let query = sqlx::query(AssertSqlSafe(sql.clone()))
                        .bind(D::span(at_least))
                        .bind(fire.clone())
                        .bind(kind)
                        .bind(fire.clone())
                        .bind(kind)
                        .bind(fire.clone())
                        .bind(kind)
                        .bind(error)
                        .bind(record.name())
                        .bind(record.owner());
                    match token {
                        Some(token) => query.bind(token),
                        None => query.bind(D::time(record.locked_at())),
                    }
                } else {
                    Self::identified(sql, at_least, record, token)
                        .bind(fire.clone())
                        .bind(kind)
                        .bind(error)
                };
                statement!(at.c, query, at.map, execute)
            })
            .await?;
        let released = D::rows_affected(&done) > 0;
        if released {
            // What is left of the call timeout, less a tenth for the caller's own margin.
            let timeout = self.inner.link.settings.call_timeout;
            let budget = timeout.saturating_sub(began.elapsed()).mul_f64(0.9);
            crate::history::after_release_run(self, record, run, budget).await;
        }
        Ok(released)
    }

    /// The error of a `release_run` on a table without the job state columns.
    fn no_job_state(&self) -> Error {
        Error::unsupported_because(
            "release_run",
            format!(
                "the lock table {} lacks the job state columns, so it cannot record runs (Java \
                 ShedLock's table); add them with the migration migrations/{}/0003_job_state.sql \
                 of shedlock-sqlx (`shedlock ddl` prints what is missing), and restart the service",
                self.inner.link.settings.table,
                D::MIGRATIONS,
            ),
        )
    }

    pub(crate) async fn holder(&self, name: &str) -> Result<Option<LockRecord>> {
        self.inner.link.check_name(name)?;
        let (call, schema) = &self.start("holder", name).await?;
        let map = &self.mapper(format!("read lock {name:?}"));
        self.attempts(call, map, *schema, |mut at| async move {
            let query = sqlx::query(AssertSqlSafe(at.sql.holder.clone())).bind(name);
            let Some(row) = Self::optional_row(&mut at, query).await? else {
                return Ok(None);
            };
            let owner: String = row.try_get(0).map_err(map)?;
            let token: Option<i64> = row.try_get(3).map_err(map)?;
            let (locked_at, lock_until) =
                (D::read_time(&row, 1, map)?, D::read_time(&row, 2, map)?);
            Ok(Some(
                LockRecord::new(name, owner, locked_at, lock_until).with_fencing_token(token),
            ))
        })
        .await
    }

    pub(crate) fn max_name_len(&self) -> usize {
        self.inner.link.settings.max_name_len
    }

    /// A statement that finds an acquisition, with the duration, the name, the owner, and the
    /// token, or `locked_at` without tokens, bound.
    pub(crate) fn identified<'q>(
        sql: &Arc<str>,
        d: Duration,
        record: &'q LockRecord,
        token: Option<i64>,
    ) -> sqlx::query::Query<'q, D, D::Arguments> {
        let query = Self::named(sql, d, record.name(), record.owner());
        match token {
            Some(token) => query.bind(token),
            None => query.bind(D::time(record.locked_at())),
        }
    }

    /// A statement on the lock `name`, with its first parameters bound: the duration, the name, the
    /// owner.
    pub(crate) fn named<'q>(
        sql: &Arc<str>,
        d: Duration,
        name: &'q str,
        owner: &'q str,
    ) -> sqlx::query::Query<'q, D, D::Arguments> {
        sqlx::query(AssertSqlSafe(sql.clone()))
            .bind(D::span(d))
            .bind(name)
            .bind(owner)
    }

    /// Runs `query` on the attempt's connection within the call's deadline, answering its row, if
    /// any.
    async fn optional_row(
        at: &mut Attempt<'_, D>,
        query: sqlx::query::Query<'_, D, D::Arguments>,
    ) -> Result<Option<D::Row>> {
        statement!(at.c, query, at.map, fetch_optional)
    }

    /// One attempt of an acquire where a single statement decides and returns the row (`RETURNING
    /// locked_at, lock_until, fencing_token`), or nothing if the lock is held.
    #[cfg(any(feature = "postgres", feature = "sqlite"))]
    pub(crate) async fn acquire_returning(
        mut at: Attempt<'_, D>,
        args: Acquire<'_>,
    ) -> Result<Option<LockRecord>> {
        let query = Self::named(&at.sql.acquire, args.at_most, args.name, args.owner);
        let Some(row) = Self::optional_row(&mut at, query).await? else {
            return Ok(None);
        };
        Self::returned_record(&row, 0, args.name, args.owner, at.map).map(Some)
    }

    /// The record in a returned row's columns `first..first + 3`: `locked_at, lock_until,
    /// fencing_token`. A trigger claim reads its lock so on every dialect.
    pub(crate) fn returned_record(
        row: &D::Row,
        first: usize,
        name: &str,
        owner: &str,
        map: &Map<'_>,
    ) -> Result<LockRecord> {
        let token: Option<i64> = row.try_get(first + 2).map_err(map)?;
        let locked_at = D::read_time(row, first, map)?;
        let lock_until = D::read_time(row, first + 1, map)?;
        Ok(LockRecord::new(name, owner, locked_at, lock_until).with_fencing_token(token))
    }

    /// Runs a dialect's fire-claim statement that returns rows, binding `at_most`, the name,
    /// owner, `F` and next, and answers the row it returned, if any.
    #[cfg(any(feature = "postgres", feature = "sqlite"))]
    pub(crate) async fn claim_returning(
        at: &mut Attempt<'_, D>,
        args: ClaimFire<'_>,
    ) -> Result<Option<D::Row>> {
        let lock = args.lock;
        let query = Self::named(
            at.sql.claim(lock.schema),
            lock.at_most,
            lock.name,
            lock.owner,
        )
        .bind(D::time(args.at))
        .bind(D::time(args.next));
        Self::optional_row(at, query).await
    }

    /// What a fire claim saw when it did not claim, from a row of the database's now, the recorded
    /// fire, and the lock's `lock_until`, `locked_by`, `locked_at` and fencing token, as
    /// Postgres's claim statement and SQLite's look return; and at `pause`, where the statement
    /// read it, the row's pause ([`pause_read`](crate::dialect::pause_read)).
    #[cfg(any(feature = "postgres", feature = "sqlite"))]
    pub(crate) fn seen_row(
        row: &D::Row,
        name: &str,
        map: &Map<'_>,
        pause: Option<usize>,
    ) -> Result<Seen>
    where
        for<'r> Option<String>: Decode<'r, D> + Type<D>,
    {
        Ok(Seen::Row {
            now: D::read_time(row, 0, map)?,
            recorded: D::read_opt_time(row, 1, map)?,
            holder: seen_holder(
                name,
                row.try_get(3).map_err(map)?,
                D::read_opt_time(row, 4, map)?,
                D::read_opt_time(row, 2, map)?,
                row.try_get(5).map_err(map)?,
            )?,
            pause: match pause {
                Some(first) => seen_pause::<D>(row, first, map)?,
                None => None,
            },
        })
    }

    /// One attempt of an extend whose statement returns the new `lock_until`, or nothing if this
    /// acquisition no longer holds the lock.
    #[cfg(any(feature = "postgres", feature = "sqlite"))]
    pub(crate) async fn extend_returning(
        mut at: Attempt<'_, D>,
        args: Extend<'_>,
    ) -> Result<Option<LockRecord>> {
        let query = Self::identified(&at.sql.extend, args.at_most, args.record, args.token);
        let Some(row) = Self::optional_row(&mut at, query).await? else {
            return Ok(None);
        };
        let lock_until = D::read_time(&row, 0, at.map)?;
        Ok(Some(args.record.clone().with_lock_until(lock_until)))
    }

    /// Runs `attempt` on connections from the pool (see [`Link::run`]) until it succeeds, fails
    /// for a reason other than a dead connection, or the call's deadline passes. A call that may
    /// not repeat a statement whose reply was lost stops at any failure.
    async fn attempts<'a, T, F, Fut>(
        &'a self,
        call: &'a Call,
        map: &'a Map<'a>,
        schema: Schema,
        mut attempt: F,
    ) -> Result<T>
    where
        F: FnMut(Attempt<'a, D>) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let sql = self.statements(schema);
        self.inner
            .link
            .run(call, |c| attempt(Attempt { sql, c, map }))
            .await
    }

    /// How the errors of one call are mapped. `what` names the call.
    fn mapper(&self, what: String) -> impl Fn(sqlx::Error) -> Error + Send + Sync + '_ {
        move |e| self.map_error(e, &what)
    }

    /// Starts the call `op` on the lock `name`: its deadline, and the table's layout. The layout is
    /// checked on first use.
    async fn start(&self, op: &'static str, name: &str) -> Result<(Call, Schema)> {
        let call = self.inner.link.call(op).about(format!("lock {name:?}"));
        let schema = self.schema(&call).await?;
        Ok((call, schema))
    }

    /// The table's layout, detected on first use.
    pub(crate) async fn schema(&self, call: &Call) -> Result<Schema> {
        self.inner.link.schema(|| self.detect(call)).await
    }

    /// The provider's link to its database, for the admin statements in `admin.rs`. The link has
    /// the connections, settings and call deadlines.
    pub(crate) fn link(&self) -> &Link<D> {
        &self.inner.link
    }

    async fn detect(&self, call: &Call) -> Result<Schema> {
        let link = &self.inner.link;
        let map = &|e| self.map_error(e, "read the lock table's columns");
        let Some((columns, unique)) = D::detect(link, call, map).await? else {
            return Err(self.missing_table(format!("table {} not found", link.settings.table)));
        };
        check_columns::<D>(&link.settings, &columns, unique)
    }

    fn statements(&self, schema: Schema) -> &Statements<D::Extra> {
        &self.inner.sql[usize::from(schema.has_token)]
    }

    fn missing_table(&self, source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Error {
        Error::missing_table(
            self.inner.link.settings.table.to_string(),
            format!(
                "create it with {p}::create_table_if_not_exists(), with the migrations \
                 migrations/{m}/0001_shedlock.sql, migrations/{m}/0002_last_fire.sql, \
                 migrations/{m}/0003_job_state.sql, migrations/{m}/0005_pause.sql and \
                 migrations/{m}/0006_trigger.sql of \
                 shedlock-sqlx, or with the statement {p}::ddl() returns (`shedlock ddl` prints it)",
                p = D::PROVIDER,
                m = D::MIGRATIONS,
            ),
            source,
        )
    }

    pub(crate) fn map_error(&self, error: sqlx::Error, what: &str) -> Error {
        match D::classify(&error) {
            Some(Fault::MissingTable) => self.missing_table(crate::cause::source(error)),
            Some(Fault::Columns(detail)) => Error::schema(
                format!(
                    "{} does not have the expected columns ({detail}); see {}::ddl()",
                    self.inner.link.settings.table,
                    D::PROVIDER
                ),
                Some(crate::cause::source(error)),
            ),
            None => Error::backend(
                format!("{what} on {}", self.inner.link.target()),
                crate::cause::source(error),
            ),
        }
    }

    // The admin calls of `LockAdmin` (admin.rs: their statements, how rows are read, the impls).

    /// Every row when `name` is `None`, or one row, with the database's now, sorted by name in
    /// code, in byte order, whatever the column's collation.
    pub(crate) async fn admin_list(
        &self,
        op: &'static str,
        name: Option<&str>,
    ) -> Result<Vec<LockEntry>> {
        let link = self.link();
        if let Some(name) = name {
            link.check_name(name)?;
        }
        let call = &match name {
            Some(name) => link.call(op).about(format!("lock {name:?}")),
            None => link.call(op),
        };
        let schema = self.schema(call).await?;
        let what = name.map_or_else(
            || "list the locks".to_owned(),
            |n| format!("read lock {n:?}"),
        );
        let map = &|e| self.map_error(e, &what);
        let sql = statements::<D>(&link.settings, schema);
        let (list, entry_sql) = (&sql.list, &sql.entry);
        let mut entries = link
            .run(call, |mut c| async move {
                let query = match name {
                    Some(name) => sqlx::query(AssertSqlSafe(entry_sql.clone())).bind(name),
                    None => sqlx::query(AssertSqlSafe(list.clone())),
                };
                let rows = statement!(c, query, map, fetch_all)?;
                rows.iter()
                    .map(|r| entry::<D>(r, map, schema))
                    .collect::<Result<Vec<_>>>()
            })
            .await?;
        entries.sort_by(|a, b| a.record().name().cmp(b.record().name()));
        Ok(entries)
    }

    /// The statements that add what the table lacks for job state (see
    /// [`LockAdmin::missing_ddl`](shedlock_core::admin::LockAdmin::missing_ddl)), each ending in
    /// `;` on its own line, or the whole [`ddl`](Self::ddl) for a missing table. It reads the
    /// table's columns anew, so it sees columns added since the provider looked.
    pub(crate) async fn admin_missing_ddl(&self) -> Result<Option<String>> {
        let link = self.link();
        let call = &link
            .call("missing_ddl")
            .about(format!("table {}", link.settings.table));
        let look = &|e| self.map_error(e, "read the lock table's columns");
        let statements = match D::detect(link, call, look).await? {
            None => vec![self.inner.ddl.clone()],
            Some((columns, _)) => missing_columns_ddl::<D>(&link.settings, &columns),
        };
        Ok((!statements.is_empty()).then(|| {
            statements
                .iter()
                .map(|s| format!("{s};"))
                .collect::<Vec<_>>()
                .join("\n")
        }))
    }

    /// Frees `expected`'s acquisition if the row still has it, in one conditional `UPDATE` that
    /// also records `actor` where the table has the pause columns.
    pub(crate) async fn admin_unlock(&self, expected: &LockRecord, actor: &str) -> Result<bool> {
        let link = self.link();
        link.check_name(expected.name())?;
        let call: &Call = &link
            .call("unlock")
            .about(format!("lock {:?}", expected.name()));
        let schema = self.schema(call).await?;
        let token = check_expected(schema, expected)?;
        let sql = &statements::<D>(&link.settings, schema).unlock;
        let what = format!("unlock {:?}", expected.name());
        let map = |e| self.map_error(e, &what);
        link.run(call, |mut c| async move {
            // Positional parameters bind the actor first: it is in the `SET`.
            let query = sqlx::query(AssertSqlSafe(sql.clone()));
            let (first, last) = match (schema.has_pause, D::POSITIONAL) {
                (false, _) => (None, None),
                (true, true) => (Some(actor), None),
                (true, false) => (None, Some(actor)),
            };
            let query = match first {
                Some(actor) => query.bind(actor),
                None => query,
            };
            let query = query
                .bind(expected.name())
                .bind(expected.owner())
                .bind(D::time(expected.locked_at()));
            let query = match token {
                Some(token) => query.bind(token),
                None => query,
            };
            let query = match last {
                Some(actor) => query.bind(actor),
                None => query,
            };
            let done = statement!(c, query, map, execute)?;
            Ok(D::rows_affected(&done) == 1)
        })
        .await
    }
}

/// Our `CREATE TABLE IF NOT EXISTS` statement for `settings`: Java ShedLock's columns plus the
/// fencing token, and when `full` the recorded fire, the job state and the pause columns. For the
/// default names it is the migration `0001_shedlock.sql`, or with `full` the table that it,
/// `0002_last_fire.sql` ([`add_last_fire`]), `0003_job_state.sql`, `0005_pause.sql` and `0006_trigger.sql`
/// ([`add_columns`]) make.
pub(crate) fn ddl<D: Dialect>(settings: &Settings, full: bool) -> String {
    let mut extra = String::new();
    if full {
        let columns = std::iter::once((LAST_FIRE, D::LAST_FIRE_COLUMN.to_owned())).chain(
            STATE_COLUMNS
                .iter()
                .chain(PAUSE_COLUMNS.iter())
                .chain(TRIGGER_COLUMNS.iter())
                .map(|(name, kind)| (*name, state_column_type::<D>(*kind))),
        );
        for (name, ty) in columns {
            extra.push_str(&D::QUOTE.quote(name));
            extra.push(' ');
            extra.push_str(&ty);
            extra.push_str(",\n    ");
        }
    }
    let t = settings.table.quoted(D::QUOTE);
    let c = settings.columns.quoted(D::QUOTE);
    format!(
        "CREATE TABLE IF NOT EXISTS {t} (\n    \
         {} VARCHAR({}) NOT NULL,\n    \
         {} {time},\n    \
         {} {time},\n    \
         {} VARCHAR(255) NOT NULL,\n    \
         {} {},\n    \
         {extra}\
         PRIMARY KEY ({})\n){}",
        c.name,
        settings.max_name_len,
        c.lock_until,
        c.locked_at,
        c.locked_by,
        c.fencing_token,
        D::TOKEN_COLUMN,
        c.name,
        D::TABLE_OPTIONS,
        time = D::TIME_COLUMN,
    )
}

/// The statement that adds the [`LAST_FIRE`] column to `settings`' table. For the default names, it
/// is the migration `0002_last_fire.sql`.
pub(crate) fn add_last_fire<D: Dialect>(settings: &Settings) -> String {
    format!(
        "ALTER TABLE {} ADD COLUMN {} {}",
        settings.table.quoted(D::QUOTE),
        D::QUOTE.quote(LAST_FIRE),
        D::LAST_FIRE_COLUMN
    )
}

/// The statements that add the job state or pause columns `columns` to `settings`' table, one
/// `ALTER TABLE` per column as SQLite adds one column per statement. For every column and the
/// default names, they are the migration `0003_job_state.sql` ([`STATE_COLUMNS`]) or
/// `0005_pause.sql` ([`PAUSE_COLUMNS`]) or `0006_trigger.sql` ([`TRIGGER_COLUMNS`]).
pub(crate) fn add_columns<D: Dialect>(
    settings: &Settings,
    columns: &[(&str, StateKind)],
) -> Vec<String> {
    let table = settings.table.quoted(D::QUOTE);
    columns
        .iter()
        .map(|(name, kind)| {
            format!(
                "ALTER TABLE {table} ADD COLUMN {} {}",
                D::QUOTE.quote(name),
                state_column_type::<D>(*kind)
            )
        })
        .collect()
}

/// The dialect's migration files hold its built-in DDL: `0001_shedlock.sql` the table without
/// [`LAST_FIRE`], `0002_last_fire.sql` the statement adding it, `0003_job_state.sql` those adding
/// the job state columns, `0005_pause.sql` those adding the pause columns, `0006_trigger.sql` the trigger columns.
#[cfg(test)]
pub(crate) fn assert_migrations<D: Dialect>() {
    let settings = Settings::defaults();
    let folder = D::MIGRATIONS;
    crate::link::assert_same_ddl(
        &format!("{folder}/0001_shedlock.sql"),
        &ddl::<D>(&settings, false),
    );
    crate::link::assert_same_ddl(
        &format!("{folder}/0002_last_fire.sql"),
        &add_last_fire::<D>(&settings),
    );
    crate::link::assert_same_ddl(
        &format!("{folder}/0003_job_state.sql"),
        &add_columns::<D>(&settings, &STATE_COLUMNS).join(";\n"),
    );
    crate::link::assert_same_ddl(
        &format!("{folder}/0005_pause.sql"),
        &add_columns::<D>(&settings, &PAUSE_COLUMNS).join(";\n"),
    );
    crate::link::assert_same_ddl(
        &format!("{folder}/0006_trigger.sql"),
        &add_columns::<D>(&settings, &TRIGGER_COLUMNS).join(";\n"),
    );
}

/// The `acquire` and `extend` of a [`Dialect`] whose statements decide and return the row in one
/// statement (`RETURNING`).
#[cfg(any(feature = "postgres", feature = "sqlite"))]
macro_rules! returning_statements {
    () => {
        async fn acquire<'a>(
            at: $crate::dialect::Attempt<'a, Self>,
            args: $crate::dialect::Acquire<'a>,
        ) -> ::shedlock_core::Result<Option<::shedlock_core::provider::LockRecord>> {
            $crate::provider::Provider::acquire_returning(at, args).await
        }

        async fn extend<'a>(
            at: $crate::dialect::Attempt<'a, Self>,
            args: $crate::dialect::Extend<'a>,
        ) -> ::shedlock_core::Result<Option<::shedlock_core::provider::LockRecord>> {
            $crate::provider::Provider::extend_returning(at, args).await
        }
    };
}

#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) use returning_statements;
