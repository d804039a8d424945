//! The core's `JobStateSuite` on every SQL store, with history on (`keep` 4): definitions,
//! history and, where the lock table records job state (`release_run`), the recorded releases.
//! On a build whose `release_run` answers unsupported (no job-state columns), the cases that
//! need it are expected to fail and every other case must pass.

use std::time::Duration;

use shedlock_core::admin::LockAdmin;
use shedlock_core::jobs::{HistoryPolicy, RunOutcome, RunReport};
use shedlock_core::testkit::JobStateSuite;
use shedlock_sqlx::sqlx::{self, Executor as _};
use shedlock_sqlx::{MySqlLockProvider, PgLockProvider, SqliteLockProvider, testing};

/// The history `keep` the suite checks.
const KEEP: u32 = 4;

/// Runs the suite on `store` (its tables created); see the module's docs for what must pass.
async fn passes_the_job_state_suite<P: LockAdmin + Clone>(store: P) {
    store.create_table().await.expect("create the tables");
    let name = testing::unique_lock_name("probe");
    let record = store
        .acquire(&name, Duration::from_mins(1), "probe")
        .await
        .expect("acquire")
        .expect("free");
    let report = RunReport::new(chrono::Utc::now(), RunOutcome::Succeeded);
    let records = match store.release_run(&record, Duration::ZERO, &report).await {
        Ok(_) => true,
        Err(e) if e.is_unsupported() => {
            store
                .release(&record, Duration::ZERO)
                .await
                .expect("release");
            false
        }
        Err(e) => panic!("release_run: {e}"),
    };
    let failures = JobStateSuite::new(store).with_history(KEEP).report().await;
    if records {
        assert!(
            failures.is_empty(),
            "job state conformance failed:\n{failures}"
        );
    } else {
        // Every case but those of definitions records runs through release_run.
        for line in failures.lines() {
            assert!(
                !line.starts_with("- definitions_") && line.contains("release_run"),
                "a case that does not need release_run failed:\n{failures}"
            );
        }
        assert!(
            !failures.contains("definitions_"),
            "definitions failed:\n{failures}"
        );
        eprintln!(
            "release_run is unsupported here: {} cases that need it failed as expected",
            failures.lines().count()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn postgres_passes_the_job_state_suite() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let pool = PgLockProvider::pool_options()
        .connect(&url)
        .await
        .expect("connect");
    let table = testing::unique_table_name("shedlock_js");
    let store = PgLockProvider::builder(pool.clone())
        .table(&table)
        .history(HistoryPolicy::keep(KEEP))
        .build()
        .expect("valid");
    passes_the_job_state_suite(store).await;
    for suffix in ["", "_jobs", "_history"] {
        pool.execute(sqlx::AssertSqlSafe(format!("DROP TABLE {table}{suffix}")))
            .await
            .expect("drop");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn mysql_passes_the_job_state_suite() {
    let Some(url) = testing::mysql_url() else {
        return;
    };
    let pool = MySqlLockProvider::pool_options()
        .connect(&url)
        .await
        .expect("connect");
    let table = testing::unique_table_name("shedlock_js");
    let store = MySqlLockProvider::builder(pool.clone())
        .table(&table)
        .history(HistoryPolicy::keep(KEEP))
        .build()
        .expect("valid");
    passes_the_job_state_suite(store).await;
    for suffix in ["", "_jobs", "_history"] {
        pool.execute(sqlx::AssertSqlSafe(format!("DROP TABLE {table}{suffix}")))
            .await
            .expect("drop");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_passes_the_job_state_suite() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("js.db").display());
    let pool = SqliteLockProvider::pool_options()
        .connect(&url)
        .await
        .expect("open");
    let store = SqliteLockProvider::builder(pool)
        .history(HistoryPolicy::keep(KEEP))
        .build()
        .expect("valid");
    passes_the_job_state_suite(store).await;
}
