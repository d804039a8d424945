//! The store at a service's start, on Postgres: creating an existing table logs no notice of the
//! server's; a scheduler on a missing table fails `start` with one line and logs nothing; one on
//! a database that refuses connections starts (with one warning) unless told to require it;
//! `check()` answers for readiness probes.

use std::time::Duration;

use shedlock_core::provider::LockProvider;
use shedlock_core::{Job, LockingTaskExecutor, Schedule, Scheduler};
use shedlock_sqlx::{PgLockProvider, testing};
use shedlock_tests::log_capture::LogCapture;

fn provider(url: &str, table: &str) -> PgLockProvider {
    PgLockProvider::from_url(url)
        .table(table)
        .call_timeout(Duration::from_secs(1))
        .build()
        .unwrap()
}

fn scheduler(provider: PgLockProvider) -> Scheduler {
    let executor = LockingTaskExecutor::builder(provider)
        .default_at_most(Duration::from_secs(30))
        .build()
        .unwrap();
    let scheduler = Scheduler::new(executor);
    let every = Schedule::every(Duration::from_secs(1)).unwrap();
    scheduler
        .add(Job::new("sync", every, |_| async {}))
        .unwrap();
    scheduler
}

// One thread: the log capture is this thread's default subscriber (sqlx logs a connection's
// notices on the task that uses it).
#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn creating_an_existing_table_logs_no_postgres_notice() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let (table, raced) = (
        testing::unique_table_name("shedlock_notice"),
        testing::unique_table_name("shedlock_notice_race"),
    );
    let (log, capture) = LogCapture::capture(tracing::Level::TRACE);
    // Three replicas starting one after another, each creating the table if needed.
    for _ in 0..3 {
        let provider = provider(&url, &table);
        provider.create_table_if_not_exists().await.unwrap();
        provider.check().await.unwrap();
    }
    // Three starting at once: each looks, finds no table, and creates it.
    let [a, b, c] = [0, 1, 2].map(|_| provider(&url, &raced));
    let created = tokio::join!(
        a.create_table_if_not_exists(),
        b.create_table_if_not_exists(),
        c.create_table_if_not_exists()
    );
    created.0.unwrap();
    created.1.unwrap();
    created.2.unwrap();
    drop(capture);
    let text = log.text();
    assert!(!text.contains("already exists"), "{text}");
    assert!(!text.contains("sqlx::postgres::notice"), "{text}");
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    for table in [table, raced] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP TABLE {table}")))
            .execute(&pool)
            .await
            .unwrap();
    }
}

// One thread: the log capture is this thread's default subscriber.
#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn a_missing_table_fails_start_with_one_line_and_nothing_is_logged() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let table = testing::unique_table_name("shedlock_absent");
    let (log, _capture) = LogCapture::capture(tracing::Level::INFO);
    let scheduler = scheduler(provider(&url, &table));
    let err = scheduler.start().await.expect_err("no table");
    assert!(err.is_missing_table(), "{err}");
    assert_eq!(
        err.to_string(),
        format!(
            "the lock table {table} does not exist; create it with \
             PgLockProvider::create_table_if_not_exists(), with the migrations \
             migrations/postgres/0001_shedlock.sql, migrations/postgres/0002_last_fire.sql, \
             migrations/postgres/0003_job_state.sql, migrations/postgres/0005_pause.sql and \
             migrations/postgres/0006_trigger.sql of shedlock-sqlx, or with the statement \
             PgLockProvider::ddl() returns (`shedlock ddl` prints it)"
        )
    );
    assert!(scheduler.check().await.unwrap_err().is_missing_table());
    // No job started: a started job's status names its next fire from the moment it starts
    // (the unit test `a_store_set_up_wrong_fails_start_with_one_error_and_no_job_starts` lets
    // fires pass on paused time and sees none claimed).
    let status = scheduler.status("sync").unwrap();
    assert_eq!(status.next_fire, None, "{status:?}");
    assert_eq!((status.runs, status.store_errors), (0, 0), "{status:?}");
    assert_eq!(log.text(), "", "nothing logged");
    scheduler.shutdown(Duration::from_secs(1)).await;
}

// One thread: the log capture is this thread's default subscriber.
#[tokio::test]
async fn a_database_refusing_connections_at_start_is_retried_unless_required() {
    // A port nothing listens on: every connection is refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://postgres@127.0.0.1:{port}/test");
    let (log, _capture) = LogCapture::capture(tracing::Level::WARN);
    let required = scheduler(provider(&url, "shedlock")).require_store(true);
    let err = required.start().await.expect_err("required");
    assert!(err.is_timeout() || err.is_backend(), "{err}");
    assert!(err.to_string().contains("refused"), "{err}");
    assert_eq!(log.text(), "", "the error is returned, not logged");
    assert!(required.check().await.is_err());

    let lenient = scheduler(provider(&url, "shedlock"));
    lenient.start().await.unwrap();
    lenient.shutdown(Duration::from_secs(1)).await;
    let text = log.text();
    assert_eq!(
        text.matches("the lock store cannot be reached at start; the jobs start anyway and retry")
            .count(),
        1,
        "{text}"
    );
}
