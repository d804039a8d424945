//! The run log: every execution of a locked job, recorded by the replica that ran it, with start
//! and end read from the **database's clock**.
//!
//! A run inserts its row (start) right after it took the lock and updates it (end) right before it
//! releases the lock, both inside the locked section. Every replica reads one clock (the
//! database server's; for SQLite, the one host's wall clock through SQLite's `'now'`), so the
//! intervals of different processes are comparable, which neither a per-process monotonic clock
//! (`Instant`) nor the replicas' own wall clocks (which may be skewed) would give. If the lock
//! works, two runs of one job never intersect: [`overlaps`] counts those that do.
//!
//! Each row also names the fire it ran (its scheduled instant `F`, the same on every replica), so
//! [`fires_run_twice`] finds a fire run by two replicas even when their runs did not intersect.
//!
//! A replica killed mid-run leaves its row without an end; its run cannot have lasted past the
//! lock's `lock_until` (recorded with the row), so that is used as its end.

use std::collections::BTreeMap;

use shedlock_core::provider::LockRecord;

use crate::database::{BoxError, Database, DbKind, Pool, check_identifier};

/// The run log's default table.
pub const DEFAULT_RUNS_TABLE: &str = "shedlock_demo_runs";

/// One execution of a job, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRecord {
    /// Row id.
    pub id: i64,
    /// The job's short name (the lock name without the prefix).
    pub job: String,
    /// The replica that ran it (`r1`, …).
    pub replica: String,
    /// The fire's tick (its instant `F` in ms since the Unix epoch / the job's period).
    pub tick: i64,
    /// The fire it ran: its scheduled instant `F` (µs since the Unix epoch), as the scheduler
    /// named it (the same on every replica).
    pub fire_us: i64,
    /// The acquisition's fencing token, if the store has tokens.
    pub token: Option<i64>,
    /// When the lock was taken, from the lock record (store clock, µs since the Unix epoch).
    pub locked_at_us: i64,
    /// When the lock would free itself, from the lock record at the start of the run (µs).
    pub lock_until_us: i64,
    /// Start of the run (database clock, µs since the Unix epoch).
    pub started_us: i64,
    /// End of the run (database clock), or `None` if the replica died before the end.
    pub ended_us: Option<i64>,
}

impl RunRecord {
    /// The end of the run, or for an unfinished run (replica killed), the latest moment it could
    /// have run under its lock: `lock_until`.
    #[must_use]
    pub fn effective_end(&self) -> i64 {
        self.ended_us
            .unwrap_or(self.lock_until_us.max(self.started_us))
    }
}

/// Two runs of one job whose intervals intersect: the lock failed to exclude.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    /// The run that started first.
    pub first: RunRecord,
    /// The run that started while the first was still running.
    pub second: RunRecord,
}

/// Every pair of runs of one job whose intervals `[start, end)` intersect (runs that only touch,
/// one ending in the microsecond the next starts, do not overlap).
///
/// ```
/// use shedlock_demo::runlog::{RunRecord, overlaps};
/// let run = |id, replica: &str, start, end| RunRecord {
///     id, job: "sync".into(), replica: replica.into(), tick: 0, fire_us: 0, token: None,
///     locked_at_us: start, lock_until_us: start + 1_000, started_us: start, ended_us: Some(end),
/// };
/// assert!(overlaps(&[run(1, "r1", 0, 10), run(2, "r2", 10, 20)]).is_empty());
/// assert_eq!(overlaps(&[run(1, "r1", 0, 10), run(2, "r2", 5, 20)]).len(), 1);
/// ```
#[must_use]
pub fn overlaps(records: &[RunRecord]) -> Vec<Overlap> {
    let mut by_job: BTreeMap<&str, Vec<&RunRecord>> = BTreeMap::new();
    for record in records {
        by_job.entry(&record.job).or_default().push(record);
    }
    let mut found = Vec::new();
    for runs in by_job.values_mut() {
        runs.sort_by_key(|r| (r.started_us, r.id));
        for (i, later) in runs.iter().enumerate() {
            for earlier in &runs[..i] {
                if later.started_us < earlier.effective_end() {
                    found.push(Overlap {
                        first: (*earlier).clone(),
                        second: (*later).clone(),
                    });
                }
            }
        }
    }
    found
}

/// Every fire that more than one run recorded: `(job, F in µs, runs)`. With a store that
/// records fires there is none, even when runs do not overlap in time.
///
/// ```
/// use shedlock_demo::runlog::{RunRecord, fires_run_twice};
/// let run = |id, fire_us| RunRecord {
///     id, job: "sync".into(), replica: format!("r{id}"), tick: 0, fire_us, token: None,
///     locked_at_us: fire_us, lock_until_us: fire_us + 1_000, started_us: fire_us, ended_us: None,
/// };
/// assert!(fires_run_twice(&[run(1, 0), run(2, 1_000_000)]).is_empty());
/// assert_eq!(fires_run_twice(&[run(1, 0), run(2, 0)]), [("sync".to_owned(), 0, 2)]);
/// ```
#[must_use]
pub fn fires_run_twice(records: &[RunRecord]) -> Vec<(String, i64, usize)> {
    let mut runs: BTreeMap<(&str, i64), usize> = BTreeMap::new();
    for record in records {
        *runs.entry((&record.job, record.fire_us)).or_default() += 1;
    }
    runs.into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|((job, fire), n)| (job.to_owned(), fire, n))
        .collect()
}

/// The run log table on a database.
#[derive(Debug, Clone)]
pub struct RunLog {
    kind: DbKind,
    pool: Pool,
    table: String,
}

type Row = (
    i64,
    String,
    String,
    i64,
    i64,
    Option<i64>,
    i64,
    i64,
    i64,
    Option<i64>,
);

impl RunLog {
    /// The run log in `table` (e.g. [`DEFAULT_RUNS_TABLE`]) of `db`.
    ///
    /// # Errors
    ///
    /// `table` is not a plain identifier.
    pub fn new(db: &Database, table: &str) -> Result<Self, BoxError> {
        check_identifier(table)?;
        Ok(Self {
            kind: db.kind(),
            pool: db.pool().clone(),
            table: table.to_owned(),
        })
    }

    /// The table's name.
    #[must_use]
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The database's "now" in microseconds since the Unix epoch, as an SQL expression.
    fn now_sql(&self) -> &'static str {
        match self.kind {
            DbKind::Postgres => "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT",
            DbKind::MySql => "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))",
            // Whole milliseconds, exactly as the lock provider reads SQLite's clock: julianday()
            // is a double whose rounding error (tens of µs) could put a run's start before the
            // lock's `locked_at`.
            DbKind::Sqlite => {
                "((CAST(strftime('%s', 'now') AS INTEGER) * 1000 \
                 + CAST(substr(strftime('%f', 'now'), 4) AS INTEGER)) * 1000)"
            }
        }
    }

    /// Creates the table if it does not exist. Run it once before the replicas start (concurrent
    /// `CREATE TABLE IF NOT EXISTS` can fail on Postgres).
    ///
    /// # Errors
    ///
    /// The DDL failed.
    pub async fn create_table(&self) -> Result<(), BoxError> {
        let t = &self.table;
        let columns = "session VARCHAR(64) NOT NULL, job VARCHAR(128) NOT NULL, \
             replica VARCHAR(64) NOT NULL, tick BIGINT NOT NULL, fire_us BIGINT NOT NULL, \
             token BIGINT NULL, \
             locked_at_us BIGINT NOT NULL, lock_until_us BIGINT NOT NULL, \
             started_us BIGINT NOT NULL, ended_us BIGINT NULL";
        let sql = sqlx::AssertSqlSafe(match self.kind {
            DbKind::Postgres => {
                format!("CREATE TABLE IF NOT EXISTS {t} (id BIGSERIAL PRIMARY KEY, {columns})")
            }
            DbKind::MySql => format!(
                "CREATE TABLE IF NOT EXISTS {t} (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, {columns})"
            ),
            DbKind::Sqlite => {
                format!(
                    "CREATE TABLE IF NOT EXISTS {t} (id INTEGER PRIMARY KEY AUTOINCREMENT, {columns})"
                )
            }
        });
        match &self.pool {
            #[cfg(feature = "postgres")]
            Pool::Postgres(pool) => sqlx::query(sql).execute(pool).await.map(drop)?,
            #[cfg(feature = "mysql")]
            Pool::MySql(pool) => sqlx::query(sql).execute(pool).await.map(drop)?,
            Pool::Sqlite(pool) => sqlx::query(sql).execute(pool).await.map(drop)?,
        }
        Ok(())
    }

    /// Records the start of a run (now, by the database clock) and returns its row id.
    ///
    /// # Errors
    ///
    /// The insert failed.
    pub async fn start(
        &self,
        session: &str,
        job: &str,
        replica: &str,
        tick: u64,
        fire_us: i64,
        lock: &LockRecord,
    ) -> Result<i64, BoxError> {
        let t = &self.table;
        let now = self.now_sql();
        let tick = i64::try_from(tick)?;
        let locked_at = lock.locked_at().timestamp_micros();
        let lock_until = lock.lock_until().timestamp_micros();
        let token = lock.fencing_token();
        let columns =
            "session, job, replica, tick, fire_us, token, locked_at_us, lock_until_us, started_us";
        let id = match &self.pool {
            #[cfg(feature = "postgres")]
            Pool::Postgres(pool) => {
                let sql = format!(
                    "INSERT INTO {t} ({columns}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, {now}) RETURNING id"
                );
                sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                    .bind(session)
                    .bind(job)
                    .bind(replica)
                    .bind(tick)
                    .bind(fire_us)
                    .bind(token)
                    .bind(locked_at)
                    .bind(lock_until)
                    .fetch_one(pool)
                    .await?
            }
            #[cfg(feature = "mysql")]
            Pool::MySql(pool) => {
                let sql =
                    format!("INSERT INTO {t} ({columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, {now})");
                let done = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(session)
                    .bind(job)
                    .bind(replica)
                    .bind(tick)
                    .bind(fire_us)
                    .bind(token)
                    .bind(locked_at)
                    .bind(lock_until)
                    .execute(pool)
                    .await?;
                i64::try_from(done.last_insert_id())?
            }
            Pool::Sqlite(pool) => {
                let sql = format!(
                    "INSERT INTO {t} ({columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, {now}) RETURNING id"
                );
                sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                    .bind(session)
                    .bind(job)
                    .bind(replica)
                    .bind(tick)
                    .bind(fire_us)
                    .bind(token)
                    .bind(locked_at)
                    .bind(lock_until)
                    .fetch_one(pool)
                    .await?
            }
        };
        Ok(id)
    }

    /// Records the end of run `id` (now, by the database clock).
    ///
    /// # Errors
    ///
    /// The update failed.
    pub async fn finish(&self, id: i64) -> Result<(), BoxError> {
        let (t, now) = (&self.table, self.now_sql());
        match &self.pool {
            #[cfg(feature = "postgres")]
            Pool::Postgres(pool) => {
                let sql = format!("UPDATE {t} SET ended_us = {now} WHERE id = $1");
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(id)
                    .execute(pool)
                    .await
                    .map(drop)?;
            }
            #[cfg(feature = "mysql")]
            Pool::MySql(pool) => {
                let sql = format!("UPDATE {t} SET ended_us = {now} WHERE id = ?");
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(id)
                    .execute(pool)
                    .await
                    .map(drop)?;
            }
            Pool::Sqlite(pool) => {
                let sql = format!("UPDATE {t} SET ended_us = {now} WHERE id = ?");
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(id)
                    .execute(pool)
                    .await
                    .map(drop)?;
            }
        }
        Ok(())
    }

    /// Every run recorded under `session`, in start order.
    ///
    /// # Errors
    ///
    /// The query failed.
    pub async fn records(&self, session: &str) -> Result<Vec<RunRecord>, BoxError> {
        let t = &self.table;
        let select = "SELECT id, job, replica, tick, fire_us, token, locked_at_us, lock_until_us, \
                      started_us, ended_us";
        let rows: Vec<Row> = match &self.pool {
            #[cfg(feature = "postgres")]
            Pool::Postgres(pool) => {
                let sql = format!("{select} FROM {t} WHERE session = $1 ORDER BY started_us, id");
                sqlx::query_as(sqlx::AssertSqlSafe(sql))
                    .bind(session)
                    .fetch_all(pool)
                    .await?
            }
            #[cfg(feature = "mysql")]
            Pool::MySql(pool) => {
                let sql = format!("{select} FROM {t} WHERE session = ? ORDER BY started_us, id");
                sqlx::query_as(sqlx::AssertSqlSafe(sql))
                    .bind(session)
                    .fetch_all(pool)
                    .await?
            }
            Pool::Sqlite(pool) => {
                let sql = format!("{select} FROM {t} WHERE session = ? ORDER BY started_us, id");
                sqlx::query_as(sqlx::AssertSqlSafe(sql))
                    .bind(session)
                    .fetch_all(pool)
                    .await?
            }
        };
        Ok(rows
            .into_iter()
            .map(
                |(
                    id,
                    job,
                    replica,
                    tick,
                    fire_us,
                    token,
                    locked_at_us,
                    lock_until_us,
                    started_us,
                    ended_us,
                )| RunRecord {
                    id,
                    job,
                    replica,
                    tick,
                    fire_us,
                    token,
                    locked_at_us,
                    lock_until_us,
                    started_us,
                    ended_us,
                },
            )
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: i64, job: &str, start: i64, end: Option<i64>, lock_until: i64) -> RunRecord {
        RunRecord {
            id,
            job: job.into(),
            replica: format!("r{id}"),
            tick: 0,
            fire_us: start,
            token: Some(id),
            locked_at_us: start,
            lock_until_us: lock_until,
            started_us: start,
            ended_us: end,
        }
    }

    #[test]
    fn an_unfinished_run_lasts_until_its_lock_expired() {
        // r1 died mid-run at some point; its lock ran out at 3_000.
        let dead = run(1, "sync", 0, None, 3_000);
        assert_eq!(dead.effective_end(), 3_000);
        // The next run started after the expiry: no overlap.
        assert!(overlaps(&[dead.clone(), run(2, "sync", 3_000, Some(4_000), 6_000)]).is_empty());
        // One that started before it: overlap.
        let found = overlaps(&[dead, run(2, "sync", 2_999, Some(4_000), 6_000)]);
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].first.id, found[0].second.id), (1, 2));
    }

    #[test]
    fn only_runs_of_one_job_can_overlap() {
        let runs = [
            run(1, "a", 0, Some(100), 1_000),
            run(2, "b", 50, Some(150), 1_000),
            run(3, "a", 200, Some(300), 1_000),
            // Out of order input, overlapping both a-runs' neighbours:
            run(4, "a", 90, Some(250), 1_000),
        ];
        let found = overlaps(&runs);
        let pairs: Vec<(i64, i64)> = found.iter().map(|o| (o.first.id, o.second.id)).collect();
        assert_eq!(pairs, [(1, 4), (4, 3)]);
    }
}
