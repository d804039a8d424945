//! The scheduler on Java ShedLock's four-column table (no `last_fire` column, so no fire claims):
//! jobs run under plain locks with their `at_least`, each replica warns once that the store does
//! not record fires (naming the DDL to add), and once more per job whose `at_least` is 0.
//!
//! Two replicas (each its own provider and pool, as two processes would have) on SQLite, and on
//! Postgres with `SHEDLOCK_PG_URL`. Waits poll the schedulers' status with a deadline. (The
//! multi-process scheduler tests use tables with the column, so they never fall back.)

use std::sync::{Arc, Mutex};
use std::time::Duration;

use shedlock_core::provider::chrono::{DateTime, Utc};
use shedlock_core::{Job, LockingTaskExecutor, Schedule, Scheduler, provider::LockProvider};
use shedlock_sqlx::{PgLockProvider, SqliteLockProvider, testing};
use shedlock_tests::log_capture::LogCapture;
use tokio::time::Instant;

const JAVA_SQLITE: &str = "CREATE TABLE {table}(name VARCHAR(64) NOT NULL PRIMARY KEY, \
     lock_until TIMESTAMP NOT NULL, locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL)";
const JAVA_PG: &str = "CREATE TABLE {table}(name VARCHAR(64) NOT NULL, \
     lock_until TIMESTAMP NOT NULL, locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL, \
     PRIMARY KEY (name))";

/// (job, replica, fire) of every run.
type Runs = Arc<Mutex<Vec<(String, String, DateTime<Utc>)>>>;

fn job(name: &str, replica: &str, at_least: Duration, runs: &Runs) -> Job {
    let (runs, replica, job) = (runs.clone(), replica.to_owned(), name.to_owned());
    Job::new(
        name,
        Schedule::every(Duration::from_secs(1)).unwrap(),
        move |run| {
            let (runs, replica, job) = (runs.clone(), replica.clone(), job.clone());
            async move {
                runs.lock().unwrap().push((job, replica, run.fire().at()));
            }
        },
    )
    .at_most(Duration::from_secs(30))
    .at_least(at_least)
}

/// Two replicas on `providers`, jobs `guarded` (`at_least` 500 ms) and `bare` (`at_least` 0) for
/// three fires; then the checks.
async fn scenario<P: LockProvider + 'static>(providers: [P; 2]) {
    let (log, _capture) = LogCapture::capture(tracing::Level::WARN);
    let runs = Runs::default();
    let mut schedulers = Vec::new();
    for (provider, replica) in providers.into_iter().zip(["a", "b"]) {
        let executor = LockingTaskExecutor::builder(provider)
            .owner_id(replica)
            .build()
            .unwrap();
        let scheduler = Scheduler::new(executor);
        scheduler
            .add(job("guarded", replica, Duration::from_millis(500), &runs))
            .unwrap();
        scheduler
            .add(job("bare", replica, Duration::ZERO, &runs))
            .unwrap();
        scheduler.start().await.unwrap();
        schedulers.push(scheduler);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while schedulers
        .iter()
        .map(|s| s.status("guarded").unwrap().runs)
        .sum::<u64>()
        < 3
    {
        assert!(Instant::now() < deadline, "no runs on the Java table");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for scheduler in &schedulers {
        scheduler.shutdown(Duration::from_secs(5)).await;
        assert_eq!(scheduler.uses_fire_claims(), Some(false), "plain locks");
    }
    let text = log.text();
    let plain = text
        .matches("this lock store does not record fires")
        .count();
    assert_eq!(plain, 2, "one warning per replica:\n{text}");
    assert!(
        text.contains("ADD COLUMN \"last_fire\"") && text.contains("0002_last_fire.sql"),
        "the warning names the DDL to add:\n{text}"
    );
    let bare = text
        .lines()
        .filter(|l| l.contains("at_least 0") && l.contains("bare"))
        .count();
    assert_eq!(
        bare, 2,
        "one at_least-0 warning per replica, for `bare`:\n{text}"
    );
    assert!(
        !text
            .lines()
            .any(|l| l.contains("at_least 0") && l.contains("guarded")),
        "no at_least-0 warning for `guarded`:\n{text}"
    );
    // With at_least 500 ms and one clock, no fire of `guarded` ran twice, and none was missed.
    let mut fires: Vec<DateTime<Utc>> = runs
        .lock()
        .unwrap()
        .iter()
        .filter(|(job, _, _)| job == "guarded")
        .map(|(_, _, fire)| *fire)
        .collect();
    let ran = fires.len();
    fires.sort();
    fires.dedup();
    assert_eq!(
        fires.len(),
        ran,
        "a fire of `guarded` ran twice: {:?}",
        runs.lock().unwrap()
    );
    for scheduler in &schedulers {
        let status = scheduler.status("guarded").unwrap();
        assert_eq!(status.missed, 0, "{status:?}");
    }
}

// One thread: the log capture is this thread's default subscriber.
#[tokio::test]
async fn on_a_java_table_jobs_run_under_plain_locks_with_one_warning_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("java.db").display());
    let table = "shedlock";
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(JAVA_SQLITE.replace("{table}", table)))
        .execute(&pool)
        .await
        .unwrap();
    let a = SqliteLockProvider::connect(&url).await.unwrap();
    let b = SqliteLockProvider::connect(&url).await.unwrap();
    scenario([a, b]).await;
}

// One thread: the log capture is this thread's default subscriber.
#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn on_a_java_table_jobs_run_under_plain_locks_with_one_warning_postgres() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let table = testing::unique_table_name("shedlock_java_sched");
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(JAVA_PG.replace("{table}", &table)))
        .execute(&pool)
        .await
        .unwrap();
    let provider = || async {
        PgLockProvider::builder(PgLockProvider::pool_options().connect(&url).await.unwrap())
            .table(&table)
            .build()
            .unwrap()
    };
    let (a, b) = (provider().await, provider().await);
    scenario([a, b]).await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP TABLE {table}")))
        .execute(&pool)
        .await
        .unwrap();
}
