//! The core's `JobStateSuite` on every SQL store with history on (`keep` 4): recorded releases,
//! definitions and the bounded history (`common::suite` runs it with history off).

use shedlock_core::admin::LockAdmin;
use shedlock_core::jobs::HistoryPolicy;
use shedlock_core::testkit::JobStateSuite;
use shedlock_sqlx::sqlx::{self, Executor as _};
use shedlock_sqlx::{MySqlLockProvider, PgLockProvider, SqliteLockProvider, testing};

/// The history `keep` the suite checks.
const KEEP: u32 = 4;

/// Creates `store`'s tables and runs the suite, history included.
async fn passes_the_job_state_suite<P: LockAdmin>(store: P) {
    store.create_table().await.expect("create the tables");
    JobStateSuite::new(store).with_history(KEEP).run().await;
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
